// The counters view: the list of counter names (search by prefix as you
// type, more pages on scroll or on the button) and, for the chosen counter,
// one chart per precision over the retained span, refreshed live.
//
// Hash: #/counters?q=<prefix>&name=<counter>

import { getJson } from '../api.js';
import { PALETTE, PrecisionCharts, timeChart } from '../charts.js';
import { h } from '../dom.js';
import { buildHash, fillSlices, fmtCount, fmtDuration, fmtLocal, seg, summarize } from '../lib.js';
import { nameList, namePane, nameView } from '../namelist.js';

const REFRESH_MS = 3000;

export function countersView(root) {
  let params = {};

  const names = nameList({
    kind: 'counter',
    title: 'Counters',
    placeholder: 'name prefix, e.g. api:',
    hrefFor: (name) => buildHash('counters', { q: params.q, name }),
    current: () => params.name,
    onSearch(q) {
      // Typing replaces the history entry rather than adding one per key.
      history.replaceState(null, '', buildHash('counters', { q, name: params.name }));
      params = { ...params, q };
      names.load(q);
    },
  });
  const detail = h('div', { class: 'detail', id: 'counter-detail' });
  root.replaceChildren(h('div', { class: 'split' }, names.el, detail));

  // --- the chosen counter -------------------------------------------------

  const charts = new PrecisionCharts();

  function showEmpty() {
    return [
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
    ];
  }

  async function loadCounter(name) {
    const answer = await getJson(`v1/counters/${seg(name)}`);
    if (name !== params.name) return; // the user chose another meanwhile
    const kept = answer.samples_kept;
    const precisions = charts.begin(answer.precisions, kept);
    const now = Date.now() / 1000;
    for (const p of precisions) {
      const { xs, ys } = fillSlices(answer.precisions[String(p)], p, kept, now);
      const { total, peak, at } = summarize(ys);
      const entry = charts.draw(p, kept, [xs, ys], (el, data) =>
        timeChart(`counter:${p}`, el, { series: [{ label: name, colour: PALETTE[0] }], bucket: `${fmtDuration(p)} slice` }, data),
      );
      const peakText = at >= 0 ? ` · peak ${fmtCount(peak)} at ${fmtLocal(xs[at])}` : '';
      entry.meta.textContent = `total ${fmtCount(total)}${peakText}`;
      entry.fig.dataset.total = String(total);
      entry.chartEl.setAttribute(
        'aria-label',
        `${name}, counts per ${fmtDuration(p)} over the last ${fmtDuration(p * kept)}: total ${fmtCount(total)}${peakText}`,
      );
    }
  }

  const pane = namePane(detail, { charts, refreshMs: REFRESH_MS, load: loadCounter, empty: showEmpty });

  return nameView(names, pane, {
    setParams: (p) => {
      params = p;
    },
  });
}
