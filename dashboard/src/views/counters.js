// The counters view: the list of counter names (search by prefix as you
// type, more pages on scroll or on the button) and, for the chosen counter,
// one chart per precision over the retained span, refreshed live.
//
// Hash: #/counters?q=<prefix>&name=<counter>

import { ApiError, getJson } from '../api.js';
import { timeChart, PALETTE } from '../charts.js';
import { clockTime, debounce, every, h } from '../dom.js';
import { buildHash, fillSlices, fmtCount, fmtDuration, fmtLocal, seg, summarize } from '../lib.js';

const PAGE = 100;
const REFRESH_MS = 3000;

export function countersView(root) {
  let params = {};
  let listAbort = null;
  let next = null;
  let loadingMore = false;
  let charts = new Map();
  let stopLive = null;
  let paused = false;
  let chartsKey = null; // precisions and samples kept of the charts shown
  let activeName = null;
  let initialised = false;

  const search = h('input', {
    id: 'counter-search',
    type: 'search',
    placeholder: 'name prefix, e.g. api:',
    autocomplete: 'off',
    spellcheck: 'false',
    'aria-controls': 'counter-list',
  });
  const listStatus = h('p', { class: 'muted small', id: 'counter-list-status', 'aria-live': 'polite' });
  const list = h('ul', { id: 'counter-list', class: 'counter-list', 'aria-describedby': 'counter-list-status' });
  const more = h('button', { type: 'button', class: 'secondary more', hidden: true }, 'Load more');
  const sentinel = h('div', { class: 'sentinel', 'aria-hidden': 'true' });
  const detail = h('div', { class: 'detail', id: 'counter-detail' });

  root.replaceChildren(
    h(
      'div',
      { class: 'split' },
      h(
        'aside',
        { class: 'panel list-pane', 'aria-label': 'Counters' },
        h(
          'div',
          { class: 'list-head' },
          h('label', { for: 'counter-search', class: 'field-label' }, 'Search counters'),
          search,
          listStatus,
        ),
        list,
        sentinel,
        more,
      ),
      detail,
    ),
  );

  // --- the list -----------------------------------------------------------

  const hrefFor = (name) => buildHash('counters', { q: params.q, name });

  function renderNames(names, append) {
    const items = names.map((name) =>
      h(
        'li',
        {},
        h(
          'a',
          {
            href: hrefFor(name),
            class: 'counter-link',
            'aria-current': name === params.name ? 'page' : false,
            dataset: { name },
          },
          name,
        ),
      ),
    );
    if (append) {
      list.append(...items);
      return;
    }
    // A reload (a later search, a refresh) must not take the keyboard away
    // from someone moving through the list: focus the same name again, or
    // the search box when it is gone.
    const had = list.contains(document.activeElement) ? document.activeElement.dataset.name : null;
    list.replaceChildren(...items);
    if (had !== null) {
      const same = [...list.querySelectorAll('a')].find((a) => a.dataset.name === had);
      (same || search).focus();
    }
  }

  async function loadList(append) {
    if (listAbort) listAbort.abort();
    const abort = (listAbort = new AbortController());
    const prefix = params.q || '';
    const query = new URLSearchParams({ prefix, limit: String(PAGE) });
    if (append && next) query.set('cursor', next);
    if (!append) listStatus.textContent = 'Loading…';
    try {
      const page = await getJson(`v1/counters?${query}`, { signal: abort.signal });
      if (abort.signal.aborted) return;
      next = page.next;
      renderNames(page.counters, append);
      const n = list.children.length;
      listStatus.textContent =
        n === 0
          ? prefix
            ? `No counter starts with “${prefix}”.`
            : 'No counters yet.'
          : `${fmtCount(n)}${next ? '+' : ''} counter${n === 1 && !next ? '' : 's'}${prefix ? ` starting with “${prefix}”` : ''}`;
      more.hidden = !next;
    } catch (e) {
      if (e.name === 'AbortError') return;
      listStatus.textContent = `Could not list counters: ${e.message}`;
    } finally {
      if (listAbort === abort) listAbort = null;
    }
  }

  async function loadMore() {
    if (!next || loadingMore) return;
    loadingMore = true;
    try {
      await loadList(true);
    } finally {
      loadingMore = false;
    }
  }

  const onType = debounce(() => {
    const q = search.value;
    if (q === (params.q || '')) return;
    // Typing replaces the history entry rather than adding one per key.
    history.replaceState(null, '', buildHash('counters', { q, name: params.name }));
    params = { ...params, q };
    next = null;
    loadList(false);
  }, 150);
  search.addEventListener('input', onType);
  search.addEventListener('keydown', (ev) => {
    if (ev.key === 'ArrowDown' && list.firstElementChild) {
      ev.preventDefault();
      list.firstElementChild.querySelector('a').focus();
    }
  });
  // Arrow keys move through the list; Home/End jump; Enter follows the link.
  list.addEventListener('keydown', (ev) => {
    const li = ev.target.closest('li');
    if (!li) return;
    let to = null;
    if (ev.key === 'ArrowDown') to = li.nextElementSibling;
    else if (ev.key === 'ArrowUp') to = li.previousElementSibling || search;
    else if (ev.key === 'Home') to = list.firstElementChild;
    else if (ev.key === 'End') to = list.lastElementChild;
    else return;
    ev.preventDefault();
    if (!to) return;
    (to === search ? search : to.querySelector('a')).focus();
    if (to === list.lastElementChild) loadMore();
  });
  more.addEventListener('click', loadMore);
  const io = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) loadMore();
  });
  io.observe(sentinel);

  // --- the chosen counter -------------------------------------------------

  const updated = h('span', { class: 'live-note muted small', 'aria-live': 'off' });
  const pause = h('button', { type: 'button', class: 'secondary small', 'aria-pressed': 'false' }, 'Pause');
  const errorBox = h('p', { class: 'error', role: 'alert', hidden: true });
  const grid = h('div', { class: 'chart-grid' });

  pause.addEventListener('click', () => {
    paused = !paused;
    pause.setAttribute('aria-pressed', String(paused));
    pause.textContent = paused ? 'Resume' : 'Pause';
    updated.classList.toggle('paused', paused);
  });

  function clearCharts() {
    for (const c of charts.values()) c.chart.destroy();
    charts = new Map();
    chartsKey = null;
    grid.replaceChildren();
  }

  function showEmpty() {
    clearCharts();
    detail.replaceChildren(
      h(
        'div',
        { class: 'panel empty' },
        h('h2', {}, 'Counters'),
        h('p', {}, 'Choose a counter to see its counts at every precision, refreshed live.'),
        h('p', { class: 'muted' }, 'Count something from a shell:'),
        h(
          'pre',
          {},
          h(
            'code',
            {},
            `curl -X POST ${new URL('v1/counters/hits/incr', location.href)}\n` +
              `echo "hits:1|c" | nc -u -w1 127.0.0.1 8125   # with --statsd`,
          ),
        ),
      ),
    );
  }

  function figureFor(precision, kept) {
    const p = Number(precision);
    const chartEl = h('div', { class: 'chart', role: 'img' });
    const meta = h('p', { class: 'chart-meta muted small' });
    const fig = h(
      'figure',
      { class: 'panel chart-card', dataset: { precision: String(p) } },
      h(
        'figcaption',
        {},
        h('h3', {}, `Every ${fmtDuration(p)}`),
        h('span', { class: 'muted small' }, `last ${fmtDuration(p * kept)}`),
      ),
      chartEl,
      meta,
    );
    return { fig, chartEl, meta };
  }

  async function loadCounter(name) {
    const answer = await getJson(`v1/counters/${seg(name)}`);
    if (name !== params.name) return; // the user chose another meanwhile
    const kept = answer.samples_kept;
    const precisions = Object.keys(answer.precisions)
      .map(Number)
      .sort((a, b) => a - b);
    // The same counter keeps its charts (fed new data in place) unless the
    // server's precisions changed.
    const key = `${precisions.join(',')}/${kept}`;
    if (chartsKey !== key) {
      clearCharts();
      chartsKey = key;
    }
    const now = Date.now() / 1000;
    for (const p of precisions) {
      const { xs, ys } = fillSlices(answer.precisions[String(p)], p, kept, now);
      const { total, peak, at } = summarize(ys);
      let entry = charts.get(p);
      if (!entry) {
        const parts = figureFor(p, kept);
        grid.append(parts.fig);
        const chart = timeChart(
          `counter:${p}`,
          parts.chartEl,
          { series: [{ label: name, colour: PALETTE[0] }], bucket: `${fmtDuration(p)} slice` },
          [xs, ys],
        );
        entry = { ...parts, chart };
        charts.set(p, entry);
      } else {
        entry.chart.update([xs, ys]);
      }
      const peakText = at >= 0 ? ` · peak ${fmtCount(peak)} at ${fmtLocal(xs[at])}` : '';
      entry.meta.textContent = `total ${fmtCount(total)}${peakText}`;
      entry.fig.dataset.total = String(total);
      entry.chartEl.setAttribute(
        'aria-label',
        `${name}, counts per ${fmtDuration(p)} over the last ${fmtDuration(p * kept)}: total ${fmtCount(total)}${peakText}`,
      );
    }
    errorBox.hidden = true;
    updated.textContent = `Live · updated ${clockTime()}`;
  }

  function showCounter(name) {
    activeName = name;
    if (stopLive) stopLive();
    clearCharts();
    paused = false;
    pause.setAttribute('aria-pressed', 'false');
    pause.textContent = 'Pause';
    updated.classList.remove('paused');
    updated.textContent = 'Loading…';
    detail.replaceChildren(
      h(
        'div',
        { class: 'detail-head' },
        h('h2', { class: 'counter-name' }, name),
        h('div', { class: 'detail-tools' }, updated, pause),
      ),
      errorBox,
      grid,
    );
    stopLive = every(
      REFRESH_MS,
      () =>
        loadCounter(name).catch((e) => {
          errorBox.textContent =
            e instanceof ApiError ? `Could not read ${name}: ${e.message}` : `Could not reach the server (${e.message}).`;
          errorBox.hidden = false;
          updated.textContent = `Stale · failed at ${clockTime()}`;
        }),
      () => paused,
    );
  }

  function update(newParams) {
    const old = params;
    params = { ...newParams };
    if (search.value !== (params.q || '')) search.value = params.q || '';
    if (old.q !== params.q || list.children.length === 0) {
      next = null;
      loadList(false);
    } else {
      for (const a of list.querySelectorAll('a')) {
        a.href = hrefFor(a.dataset.name);
        if (a.dataset.name === params.name) a.setAttribute('aria-current', 'page');
        else a.removeAttribute('aria-current');
      }
    }
    if (params.name && params.name !== activeName) showCounter(params.name);
    else if (!params.name && (activeName !== null || !initialised)) {
      activeName = null;
      if (stopLive) stopLive();
      stopLive = null;
      showEmpty();
    }
    initialised = true;
  }

  return {
    update,
    focus: () => search.focus(),
    unmount() {
      if (stopLive) stopLive();
      if (listAbort) listAbort.abort();
      io.disconnect();
      clearCharts();
    },
  };
}
