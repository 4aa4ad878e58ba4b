// DOM helpers: element construction without innerHTML (so names from the
// server are always text), a live-refresh loop, and a debounce.

/**
 * `h('a', { href: '#', class: 'x', onclick: f }, 'text', child)`: an element
 * with attributes (`on*` become listeners, `false`/`null` are left out) and
 * children (strings become text nodes; null and false are skipped).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Debounces `fn` by `ms` milliseconds. */
export function debounce(fn, ms) {
  let t;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}

/**
 * Runs `tick()` now and then every `ms` after each run finishes (never two
 * at once), pausing while the page is hidden or `paused()` says so.
 * Returns `stop()`.
 */
export function every(ms, tick, paused = () => false) {
  let timer = null;
  let stopped = false;
  const run = async () => {
    timer = null;
    if (stopped) return;
    if (!document.hidden && !paused()) {
      try {
        await tick();
      } catch {
        // tick reports its own errors; the loop goes on.
      }
    }
    if (!stopped) timer = setTimeout(run, ms);
  };
  const onVisible = () => {
    if (!document.hidden && timer !== null) {
      clearTimeout(timer);
      run();
    }
  };
  document.addEventListener('visibilitychange', onVisible);
  run();
  return () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
    document.removeEventListener('visibilitychange', onVisible);
  };
}

/** Local "HH:MM:SS" of a Date, for "updated at" notes. */
export function clockTime(date = new Date()) {
  return date.toLocaleTimeString('en-GB', { hour12: false });
}
