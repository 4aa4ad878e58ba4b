// The time-series view: a model and the keys typed by the user (there is no
// "list the keys" endpoint), a chart of each key's count per bucket over the
// chosen range with the rollup the server used, refreshed live.
//
// Hash: #/ts?model=<model>&keys=<a,b>&range=<seconds>

import { getJson } from '../api.js';
import { PALETTE, timeChart } from '../charts.js';
import { chartDetail, emptyPanel, every, h, liveChart, queryView, showFailed, showLoaded } from '../dom.js';
import { buildHash, fmtCount, fmtDuration, fmtLocal, rangeStart, seg, splitKeys, summarize } from '../lib.js';

const RANGES = [3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400];
const REFRESH_MS = 10000;

export function tsView(root) {
  let params = {};
  const live = liveChart();
  let chartKey = null;
  let shown = null;

  const model = h('input', { id: 'ts-model', name: 'model', required: true, autocomplete: 'off', spellcheck: 'false' });
  const keys = h('input', {
    id: 'ts-keys',
    name: 'keys',
    required: true,
    autocomplete: 'off',
    spellcheck: 'false',
    placeholder: 'home, about',
    'aria-describedby': 'ts-keys-help',
  });
  const range = h(
    'select',
    { id: 'ts-range', name: 'range' },
    RANGES.map((r) => h('option', { value: String(r) }, `last ${fmtDuration(r)}`)),
  );
  const out = queryView(root, {
    label: 'Time series',
    outClass: 'ts-out',
    fields: [
      h('div', { class: 'field' }, h('label', { for: 'ts-model', class: 'field-label' }, 'Model'), model),
      h(
        'div',
        { class: 'field grow' },
        h('label', { for: 'ts-keys', class: 'field-label' }, 'Keys'),
        keys,
        h('span', { id: 'ts-keys-help', class: 'muted small' }, 'Comma-separated'),
      ),
      h('div', { class: 'field' }, h('label', { for: 'ts-range', class: 'field-label' }, 'Range'), range),
    ],
    hash: () =>
      buildHash('ts', {
        model: model.value.trim(),
        keys: splitKeys(keys.value).join(','),
        range: range.value,
      }),
  });

  function stop() {
    live.end();
    chartKey = null;
  }

  function showIntro() {
    out.replaceChildren(
      emptyPanel(
        'Time series',
        h('p', {}, 'Give a model and one or more of its keys to chart their counts over time.'),
        h('pre', {}, h('code', {}, `curl -X POST ${new URL('v1/ts/pages/incr', location.href)} \\\n  -H 'Content-Type: application/json' -d '{"key": "home"}'`)),
      ),
    );
  }

  function show(m, ks, span) {
    stop();
    const caption = h('p', { class: 'muted small', id: 'ts-caption' });
    const totals = h('tbody');
    const { nodes, note, errorBox, chartEl } = chartDetail({
      name: m,
      figureId: 'ts-figure',
      title: `Counts per bucket, last ${fmtDuration(span)}`,
      caption,
      below: [
        h(
          'table',
          { class: 'totals' },
          h('caption', { class: 'visually-hidden' }, 'Totals per key over the range'),
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Key'), h('th', { scope: 'col', class: 'num' }, 'Total'), h('th', { scope: 'col', class: 'num' }, 'Peak'))),
          totals,
        ),
      ],
    });
    out.replaceChildren(...nodes);

    const tick = async () => {
      const end = Math.floor(Date.now() / 1000);
      const q = new URLSearchParams({ keys: ks.join(','), start: String(rangeStart(end, span)), end: String(end) });
      try {
        const answer = await getJson(`v1/ts/${seg(m)}/range?${q}`);
        const series = answer.series;
        const xs = series.length ? series[0].points.map(([t]) => t) : [];
        const data = [xs, ...series.map((s) => s.points.map(([, c]) => c))];
        const key = `${answer.rollup}/${series.map((s) => s.key).join(',')}`;
        if (!live.chart || chartKey !== key) {
          if (live.chart) live.chart.destroy();
          live.chart = timeChart(
            'ts',
            chartEl,
            {
              series: series.map((s, i) => ({ label: s.key, colour: PALETTE[i % PALETTE.length] })),
              bucket: `${fmtDuration(answer.rollup)} bucket`,
              legend: true,
              height: 280,
            },
            data,
          );
          chartKey = key;
        } else {
          live.chart.update(data);
        }
        caption.textContent = xs.length
          ? `rollup ${fmtDuration(answer.rollup)} · ${fmtCount(xs.length)} buckets from ${fmtLocal(xs[0])} to ${fmtLocal(xs[xs.length - 1])}`
          : `rollup ${fmtDuration(answer.rollup)} · no buckets`;
        document.getElementById('ts-figure').dataset.rollup = String(answer.rollup);
        const sums = series.map((s, i) => ({ key: s.key, ...summarize(data[i + 1]) }));
        totals.replaceChildren(
          ...sums.map(({ key: k, total, peak }, i) =>
            h(
              'tr',
              {},
              h('th', { scope: 'row' }, h('span', { class: 'swatch', style: `background:${PALETTE[i % PALETTE.length]}` }), k),
              h('td', { class: 'num' }, fmtCount(total)),
              h('td', { class: 'num' }, fmtCount(peak)),
            ),
          ),
        );
        chartEl.setAttribute(
          'aria-label',
          `${m}: ${sums.map((s) => `${s.key} total ${fmtCount(s.total)}`).join(', ')} over the last ${fmtDuration(span)}`,
        );
        showLoaded(errorBox, note);
      } catch (e) {
        showFailed(m, errorBox, note, e);
      }
    };
    live.stop = every(REFRESH_MS, tick);
  }

  function update(p) {
    const sig = JSON.stringify([p.model || '', p.keys || '', p.range || '']);
    const same = sig === shown;
    shown = sig;
    params = { ...p };
    model.value = params.model || '';
    keys.value = splitKeys(params.keys).join(', ');
    const span = RANGES.includes(Number(params.range)) ? Number(params.range) : RANGES[0];
    range.value = String(span);
    if (same) return;
    const ks = splitKeys(params.keys);
    if (params.model && ks.length) show(params.model, ks, span);
    else {
      stop();
      showIntro();
    }
  }

  return {
    update,
    focus: () => (params.model ? keys : model).focus(),
    unmount() {
      shown = null;
      stop();
    },
  };
}
