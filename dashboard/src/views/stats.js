// The statistics view: the list of stat names (search by prefix as you
// type, as the counters'), a ranking of the slowest among them by a chosen
// figure over a chosen range, and, for the chosen stat, one chart per
// precision of its p50, p90, p99 and mean with the count per slice, both
// refreshed live.
//
// Hash: #/stats?q=<prefix>&name=<stat>&by=<p99|p90|p50|mean|max>&range=<seconds>

import { getJson } from '../api.js';
import { PrecisionCharts, STAT_SERIES, statChart } from '../charts.js';
import { clockTime, every, h } from '../dom.js';
import {
  buildHash,
  fillStats,
  fmtCount,
  fmtDuration,
  fmtLocal,
  fmtValue,
  rankingOf,
  seg,
  STAT_FIGURES,
  STAT_QUANTILES,
  STAT_RANGES,
  summarize,
} from '../lib.js';
import { nameList, namePane, nameView, relink } from '../namelist.js';

const REFRESH_MS = 3000;
const TOP_REFRESH_MS = 10000;
const TOP = 10;

export function statsView(root) {
  let params = {};
  let stopTop = null;
  let ranked = null; // the prefix, figure and range the ranking shows

  /** This view's link with `changes` applied to the current parameters. */
  const link = (changes) => {
    const { q, name, by, range } = { ...params, ...changes };
    return buildHash('stats', { q, name, by, range });
  };

  const names = nameList({
    kind: 'stat',
    title: 'Stats',
    placeholder: 'name prefix, e.g. api:',
    hrefFor: (name) => link({ name }),
    current: () => params.name,
    onSearch(q) {
      // Typing replaces the history entry rather than adding one per key.
      history.replaceState(null, '', link({ q }));
      params = { ...params, q };
      names.load(q);
      rank();
    },
  });

  // --- the ranking --------------------------------------------------------

  const by = h(
    'select',
    { id: 'stats-by', name: 'by' },
    STAT_FIGURES.map((f) => h('option', { value: f }, f)),
  );
  const range = h(
    'select',
    { id: 'stats-range', name: 'range' },
    STAT_RANGES.map((r) => h('option', { value: String(r) }, `last ${fmtDuration(r)}`)),
  );
  const topStatus = h('p', { class: 'muted small', id: 'stats-top-status', 'aria-live': 'polite' });
  const topList = h('ol', { id: 'stats-top-list', class: 'ranking', 'aria-describedby': 'stats-top-status' });
  const topPanel = h(
    'section',
    { class: 'panel ranking-panel', 'aria-labelledby': 'stats-top-title' },
    h(
      'div',
      { class: 'ranking-head' },
      h('h2', { id: 'stats-top-title' }, 'Slowest'),
      h('label', { for: 'stats-by', class: 'field-label' }, 'by'),
      by,
      h('label', { for: 'stats-range', class: 'field-label' }, 'over'),
      range,
    ),
    topStatus,
    topList,
  );
  const onChoice = () => {
    location.hash = link({ by: by.value, range: range.value });
  };
  by.addEventListener('change', onChoice);
  range.addEventListener('change', onChoice);

  async function loadTop() {
    const { by: figure, range: span } = rankingOf(params);
    const prefix = params.q || '';
    const from = Math.floor(Date.now() / 1000) - span;
    const query = new URLSearchParams({ by: figure, prefix, from: String(from), limit: String(TOP) });
    try {
      const answer = await getJson(`v1/stats/top?${query}`);
      if (ranked !== rankKey()) return; // the choice changed meanwhile
      topList.replaceChildren(
        ...answer.stats.map((r) =>
          h(
            'li',
            {},
            h(
              'a',
              {
                href: link({ name: r.name }),
                class: 'name-link rank-link',
                'aria-current': r.name === params.name ? 'page' : false,
                dataset: { name: r.name, value: String(r.value) },
              },
              h('span', { class: 'rank-name' }, r.name),
              h('span', { class: 'rank-value' }, fmtValue(r.value)),
              h('span', { class: 'rank-count muted small' }, `${fmtCount(r.summary.count)} obs.`),
            ),
          ),
        ),
      );
      const scope = `over the last ${fmtDuration(span)}${prefix ? ` starting with “${prefix}”` : ''}`;
      topStatus.textContent =
        answer.stats.length === 0
          ? `Nothing recorded ${scope}.`
          : `By ${figure} ${scope} · updated ${clockTime()}`;
    } catch (e) {
      topStatus.textContent = `Could not rank stats: ${e.message}`;
    }
  }

  const rankKey = () => {
    const { by: figure, range: span } = rankingOf(params);
    return `${params.q || ''}/${figure}/${span}`;
  };

  /** Shows the ranking for the current prefix and choice, refreshed live. */
  function rank() {
    const { by: figure, range: span } = rankingOf(params);
    by.value = figure;
    range.value = String(span);
    if (ranked === rankKey()) {
      relink(topList, (name) => link({ name }), params.name);
      return;
    }
    ranked = rankKey();
    if (stopTop) stopTop();
    topList.replaceChildren();
    topStatus.textContent = 'Loading…';
    stopTop = every(TOP_REFRESH_MS, loadTop);
  }

  // --- the chosen stat ----------------------------------------------------

  const detail = h('div', { class: 'detail', id: 'stat-detail' });
  const charts = new PrecisionCharts();

  root.replaceChildren(h('div', { class: 'split' }, names.el, h('div', { class: 'stats-main' }, topPanel, detail)));

  function showEmpty() {
    return [
      h(
        'div',
        { class: 'panel empty' },
        h('h2', {}, 'Statistics'),
        h(
          'p',
          {},
          'Choose a stat, from the list or the ranking, to see its p50, p90, p99 and mean at every precision with the count per slice, refreshed live.',
        ),
        h('p', { class: 'muted' }, 'Record a value from a shell:'),
        h(
          'pre',
          {},
          h(
            'code',
            {},
            `curl -X POST ${new URL('v1/stats/api:latency/record', location.href)} \\\n` +
              `  -H 'Content-Type: application/json' -d '{"value": 12.5}'`,
          ),
        ),
      ),
    ];
  }

  async function loadStat(name) {
    const answer = await getJson(`v1/stats/${seg(name)}?quantiles=${STAT_QUANTILES.join(',')}`);
    if (name !== params.name) return; // the user chose another meanwhile
    const kept = answer.samples_kept;
    const precisions = charts.begin(answer.precisions, kept);
    const now = Date.now() / 1000;
    for (const p of precisions) {
      const s = fillStats(answer.precisions[String(p)], p, kept, now);
      const card = charts.draw(p, kept, [s.xs, ...STAT_SERIES.map(({ key }) => s[key])], (el, data) =>
        statChart(`stat:${p}`, el, { bucket: `${fmtDuration(p)} slice` }, data),
      );
      const { total } = summarize(s.count);
      const { peak, at } = summarize(s.p99);
      const peakText = at >= 0 ? ` · highest p99 ${fmtValue(peak)} at ${fmtLocal(s.xs[at])}` : '';
      card.meta.textContent = `${fmtCount(total)} observations${peakText}`;
      card.fig.dataset.count = String(total);
      card.chartEl.setAttribute(
        'aria-label',
        `${name}, p50, p90, p99, mean and count per ${fmtDuration(p)} over the last ${fmtDuration(p * kept)}: ${fmtCount(total)} observations${peakText}`,
      );
    }
  }

  const pane = namePane(detail, { charts, refreshMs: REFRESH_MS, load: loadStat, empty: showEmpty });

  return nameView(names, pane, {
    setParams: (p) => {
      params = p;
    },
    onUpdate: rank,
    stop: () => {
      if (stopTop) stopTop();
    },
  });
}
