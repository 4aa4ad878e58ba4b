// The daily view: an entity's count per day over the last N days as bars,
// with today, the sum over those days and the all-time total, refreshed
// live.
//
// Hash: #/daily?entity=<entity>&days=<n>

import { getJson } from '../api.js';
import { dayBars, PALETTE } from '../charts.js';
import { chartDetail, emptyPanel, every, h, liveChart, queryView, showFailed, showLoaded } from '../dom.js';
import { buildHash, dayToUnix, fmtCount, seg, summarize } from '../lib.js';

const DAYS = [7, 30, 90];
const REFRESH_MS = 10000;

export function dailyView(root) {
  let shown = null;
  const live = liveChart();

  const entity = h('input', { id: 'daily-entity', name: 'entity', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'ad:42' });
  const days = h(
    'select',
    { id: 'daily-days', name: 'days' },
    DAYS.map((d) => h('option', { value: String(d) }, `last ${d} days`)),
  );
  const out = queryView(root, {
    label: 'Daily statistics',
    outClass: 'daily-out',
    fields: [
      h('div', { class: 'field grow' }, h('label', { for: 'daily-entity', class: 'field-label' }, 'Entity'), entity),
      h('div', { class: 'field' }, h('label', { for: 'daily-days', class: 'field-label' }, 'Days'), days),
    ],
    hash: () => buildHash('daily', { entity: entity.value.trim(), days: days.value }),
  });

  function showIntro() {
    out.replaceChildren(
      emptyPanel(
        'Daily statistics',
        h('p', {}, 'Give an entity (an ad, a page, a user…) to see its count per day, today and all time.'),
        h('pre', {}, h('code', {}, `curl -X POST ${new URL('v1/daily/ad:42/incr', location.href)}`)),
      ),
    );
  }

  function stat(label, id) {
    const value = h('span', { class: 'stat-value', id }, '–');
    return { el: h('div', { class: 'panel stat' }, h('span', { class: 'stat-label' }, label), value), value };
  }

  function show(name, n) {
    live.end();
    const today = stat('Today', 'daily-today');
    const period = stat(`Last ${n} days`, 'daily-period');
    const total = stat('All time', 'daily-total');
    const caption = h('p', { class: 'muted small' });
    const { nodes, note, errorBox, chartEl } = chartDetail({
      name,
      figureId: 'daily-figure',
      title: `Count per day, last ${n} days`,
      caption,
      above: [h('div', { class: 'stats' }, today.el, period.el, total.el)],
    });
    out.replaceChildren(...nodes);

    const tick = async () => {
      try {
        const answer = await getJson(`v1/daily/${seg(name)}?days=${n}`);
        const xs = answer.days.map((d) => dayToUnix(d.day));
        const ys = answer.days.map((d) => d.count);
        if (!live.chart) {
          live.chart = dayBars('daily', chartEl, { label: name, colour: PALETTE[0] }, [xs, ys]);
        } else {
          live.chart.update([xs, ys]);
        }
        const { total: sum, peak, at } = summarize(ys);
        today.value.textContent = fmtCount(answer.today?.count ?? 0);
        period.value.textContent = fmtCount(sum);
        total.value.textContent = fmtCount(answer.total);
        const first = answer.days[0]?.day;
        const last = answer.days[answer.days.length - 1]?.day;
        caption.textContent = first ? `${first} to ${last}` + (at >= 0 ? ` · busiest ${answer.days[at].day} (${fmtCount(peak)})` : '') : '';
        chartEl.setAttribute(
          'aria-label',
          `${name}: ${fmtCount(sum)} over the last ${n} days, ${fmtCount(answer.today?.count ?? 0)} today, ${fmtCount(answer.total)} all time`,
        );
        showLoaded(errorBox, note);
      } catch (e) {
        showFailed(name, errorBox, note, e);
      }
    };
    live.stop = every(REFRESH_MS, tick);
  }

  function update(p) {
    const n = DAYS.includes(Number(p.days)) ? Number(p.days) : 30;
    const name = (p.entity || '').trim();
    entity.value = name;
    days.value = String(n);
    const sig = `${name}/${n}`;
    if (sig === shown) return;
    shown = sig;
    if (name) show(name, n);
    else {
      live.end();
      showIntro();
    }
  }

  return {
    update,
    focus: () => entity.focus(),
    unmount() {
      shown = null;
      live.end();
    },
  };
}
