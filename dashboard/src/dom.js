// DOM helpers: element construction without innerHTML (so names from the
// server are always text), a live-refresh loop and the live detail built on
// it, and a debounce.

import { ApiError } from './api.js';

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

/**
 * Fills `root` with a query form named `label` (its `fields`, then a Show
 * button) over an output area of class `outClass`, which it returns.
 * Submitting the form sets the location's hash to what `hash()` says.
 */
export function queryView(root, { label, outClass, fields, hash }) {
  const form = h(
    'form',
    { class: 'panel query-form', role: 'search', 'aria-label': label },
    ...fields,
    h('button', { type: 'submit' }, 'Show'),
  );
  const out = h('div', { class: outClass });
  root.replaceChildren(form, out);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = hash();
  });
  return out;
}

/**
 * What a live chart view keeps while it shows something: `stop`, the end
 * of its refreshes (what `every` returns), and `chart`, the chart they
 * draw. `end()` stops the one and destroys the other.
 */
export function liveChart() {
  const live = {
    stop: null,
    chart: null,
    end() {
      if (live.stop) live.stop();
      live.stop = null;
      if (live.chart) live.chart.destroy();
      live.chart = null;
    },
  };
  return live;
}

/** The panel a view shows while nothing is chosen: `title`, then `children`. */
export function emptyPanel(title, ...children) {
  return h('div', { class: 'panel empty' }, h('h2', {}, title), ...children);
}

/**
 * The detail of one live chart: a head (`name` and a "Loading…" note), an
 * error line, `above`, then the figure `figureId`: `title` and `caption`
 * over the chart's element, then `below`. Returns `{ nodes, note,
 * errorBox, chartEl }`: the nodes to show and the parts a refresh fills.
 */
export function chartDetail({ name, figureId, title, caption, above = [], below = [] }) {
  const note = h('span', { class: 'live-note muted small' }, 'Loading…');
  const errorBox = h('p', { class: 'error', role: 'alert', hidden: true });
  const chartEl = h('div', { class: 'chart', role: 'img' });
  const nodes = [
    h('div', { class: 'detail-head' }, h('h2', {}, name), h('div', { class: 'detail-tools' }, note)),
    errorBox,
    ...above,
    h(
      'figure',
      { class: 'panel chart-card wide', id: figureId },
      h('figcaption', {}, h('h3', {}, title), caption),
      chartEl,
      ...below,
    ),
  ];
  return { nodes, note, errorBox, chartEl };
}

/** Local "HH:MM:SS" of a Date, for "updated at" notes. */
export function clockTime(date = new Date()) {
  return date.toLocaleTimeString('en-GB', { hour12: false });
}

/** After a load that worked: the error line hidden, the time in `note`. */
export function showLoaded(errorBox, note) {
  errorBox.hidden = true;
  note.textContent = `Live · updated ${clockTime()}`;
}

/**
 * After a load of `name` that failed with `e`: why in the error line (the
 * API's answer, or the server out of reach), `note` marking the view stale.
 */
export function showFailed(name, errorBox, note, e) {
  errorBox.textContent =
    e instanceof ApiError ? `Could not read ${name}: ${e.message}` : `Could not reach the server (${e.message}).`;
  errorBox.hidden = false;
  note.textContent = `Stale · failed at ${clockTime()}`;
}

/**
 * A live detail of `name`: a head (the name, a "Live · updated" note and a
 * Pause button), an error line, then `body`. `load()` draws the latest;
 * it runs now and every `ms` after (not while paused or hidden), and its
 * failure shows in the error line, the drawing left as it was. Returns
 * `{ nodes, stop }`: the nodes to show, and the end of the refreshes.
 */
export function liveDetail(name, body, ms, load) {
  let paused = false;
  const updated = h('span', { class: 'live-note muted small', 'aria-live': 'off' }, 'Loading…');
  const pause = h('button', { type: 'button', class: 'secondary small', 'aria-pressed': 'false' }, 'Pause');
  const errorBox = h('p', { class: 'error', role: 'alert', hidden: true });
  pause.addEventListener('click', () => {
    paused = !paused;
    pause.setAttribute('aria-pressed', String(paused));
    pause.textContent = paused ? 'Resume' : 'Pause';
    updated.classList.toggle('paused', paused);
  });
  const stop = every(
    ms,
    () =>
      load().then(
        () => showLoaded(errorBox, updated),
        (e) => showFailed(name, errorBox, updated, e),
      ),
    () => paused,
  );
  const head = h(
    'div',
    { class: 'detail-head' },
    h('h2', { class: 'detail-name' }, name),
    h('div', { class: 'detail-tools' }, updated, pause),
  );
  return { nodes: [head, errorBox, ...body], stop };
}
