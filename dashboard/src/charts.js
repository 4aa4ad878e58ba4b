// Charts: thin wrappers over uPlot for the views. A chart is created
// once and then only fed new data (`update`), so live refreshes redraw in
// place without flicker; it follows its container's width, shows a tooltip
// with local time, UTC and values on hover, and registers itself in
// `window.tallyCharts` (by id) so tests and curious users can read exactly
// what was drawn.

import uPlot from 'uplot';
import { h } from './dom.js';
import { fmtCount, fmtDuration, fmtLocal, fmtUtc, fmtValue } from './lib.js';

/** Series colours: distinct, readable on light and dark backgrounds. */
export const PALETTE = ['#2f6fdf', '#d9480f', '#2b8a3e', '#ae3ec9', '#e67700', '#0c8599', '#c2255c', '#5c940d'];

const registry = (window.tallyCharts = window.tallyCharts || {});

function cssVar(name, fallback) {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

function axisStyle() {
  const text = cssVar('--muted', '#555');
  const grid = cssVar('--grid', 'rgba(0,0,0,0.08)');
  return {
    stroke: text,
    grid: { stroke: grid, width: 1 },
    ticks: { stroke: grid, width: 1 },
    font: '12px system-ui, sans-serif',
  };
}

/**
 * Time axis labels in 24-hour local time: uPlot's table of formats per tick
 * size (tick size, label, then the context line shown when the year, month,
 * day, hour, minute or second changes; null keeps the previous).
 */
const _ = null;
const TIME_VALUES = [
  [3600 * 24 * 365, '{YYYY}', _, _, _, _, _, _, 1],
  [3600 * 24 * 28, '{MMM}', '\n{YYYY}', _, _, _, _, _, 1],
  [3600 * 24, '{MMM} {D}', '\n{YYYY}', _, _, _, _, _, 1],
  [3600, '{HH}:{mm}', '\n{MMM} {D}', _, '\n{MMM} {D}', _, _, _, 1],
  [60, '{HH}:{mm}', '\n{MMM} {D}', _, '\n{MMM} {D}', _, _, _, 1],
  [1, '{HH}:{mm}:{ss}', '\n{MMM} {D}', _, '\n{MMM} {D}', _, _, _, 1],
];

/** Count axis labels: integers only, with separators. */
function countValues(_u, splits) {
  return splits.map((v) => (Number.isInteger(v) ? fmtCount(v) : ''));
}

/**
 * A tooltip that follows the cursor. `describe(u, idx)` returns
 * `{ title, subtitle, rows: [[label, value, colour]] }` for the hovered point.
 */
function tooltipPlugin(describe) {
  let tip;
  return {
    hooks: {
      init(u) {
        tip = document.createElement('div');
        tip.className = 'chart-tip';
        tip.hidden = true;
        // Pointer-only detail: the figure's label and caption say the same for screen readers.
        tip.setAttribute('aria-hidden', 'true');
        u.over.appendChild(tip);
        u.over.addEventListener('mouseleave', () => {
          tip.hidden = true;
        });
      },
      setCursor(u) {
        const idx = u.cursor.idx;
        if (idx == null || u.cursor.left < 0) {
          tip.hidden = true;
          return;
        }
        const { title, subtitle, rows } = describe(u, idx);
        const head = document.createElement('div');
        head.className = 'tip-title';
        head.textContent = title;
        const parts = [head];
        if (subtitle) {
          const sub = document.createElement('div');
          sub.className = 'tip-sub';
          sub.textContent = subtitle;
          parts.push(sub);
        }
        for (const [label, value, colour] of rows) {
          const row = document.createElement('div');
          row.className = 'tip-row';
          const dot = document.createElement('span');
          dot.className = 'tip-dot';
          dot.style.background = colour;
          const name = document.createElement('span');
          name.className = 'tip-label';
          name.textContent = label;
          const val = document.createElement('span');
          val.className = 'tip-value';
          val.textContent = value;
          row.append(dot, name, val);
          parts.push(row);
        }
        tip.replaceChildren(...parts);
        tip.hidden = false;
        const x = u.valToPos(u.data[0][idx], 'x');
        const w = u.over.clientWidth;
        const tw = tip.offsetWidth;
        const left = x + 12 + tw > w ? Math.max(0, x - 12 - tw) : x + 12;
        tip.style.transform = `translate(${Math.round(left)}px, 4px)`;
      },
    },
  };
}

/**
 * The tooltip of a chart over time: the slice's local time, its UTC time
 * and `bucket` (the slice length), then `rows(u, idx)`.
 */
function timeTooltip(bucket, rows) {
  return tooltipPlugin((u, idx) => {
    const t = u.data[0][idx];
    return { title: fmtLocal(t), subtitle: `${fmtUtc(t)}${bucket ? ` · ${bucket}` : ''}`, rows: rows(u, idx) };
  });
}

/** Keeps the chart as wide as its container. */
function followWidth(u, el, height) {
  const fit = () => {
    const width = Math.max(200, Math.floor(el.clientWidth));
    if (width !== u.width) u.setSize({ width, height });
  };
  const ro = new ResizeObserver(fit);
  ro.observe(el);
  return () => ro.disconnect();
}

class Chart {
  constructor(id, el, opts, data) {
    this.id = id;
    this.el = el;
    this.u = new uPlot(
      { ...opts, width: Math.max(200, Math.floor(el.clientWidth) || 300) },
      data,
      el,
    );
    this.unfollow = followWidth(this.u, el, opts.height);
    registry[id] = this.u;
  }

  /** Replaces the data, redrawing in place. */
  update(data) {
    this.u.setData(data, true);
  }

  destroy() {
    this.unfollow();
    this.u.destroy();
    if (registry[this.id] === this.u) delete registry[this.id];
  }
}

const cursor = {
  // No drag-to-zoom (a live refresh would undo it), no horizontal hair line.
  drag: { x: false, y: false, setScale: false },
  y: false,
  points: { size: 7 },
};

/**
 * A time chart: x is Unix seconds (axis in local time), one series per
 * entry of `series` (`{ label, colour }`), counts on y from 0.
 * `bucket` (seconds) is named in the tooltip ("slice of 5 s").
 */
export function timeChart(id, el, { series, height = 170, bucket, legend = false }, data) {
  const axis = axisStyle();
  const opts = {
    height,
    legend: { show: legend, live: false },
    cursor,
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes: [
      { ...axis, space: 70, values: TIME_VALUES },
      { ...axis, values: countValues, size: 56 },
    ],
    series: [
      {},
      ...series.map(({ label, colour }) => ({
        label,
        stroke: colour,
        width: 2,
        fill: series.length === 1 ? `${colour}22` : undefined,
        points: { show: false },
      })),
    ],
    plugins: [
      timeTooltip(bucket, (u, idx) =>
        series.map(({ label, colour }, s) => [label, fmtCount(u.data[s + 1][idx] ?? 0), colour]),
      ),
    ],
  };
  return new Chart(id, el, opts, data);
}

/**
 * A bar chart of days: x is a UTC midnight per day (the API's day labels,
 * shown as dates whatever the browser's time zone), one series.
 */
export function dayBars(id, el, { label, colour, height = 220 }, data) {
  const axis = axisStyle();
  const utc = (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC');
  const opts = {
    height,
    tzDate: utc,
    legend: { show: false },
    cursor: { ...cursor, points: { show: false } },
    scales: {
      x: { time: true, range: (u, min, max) => [min - 43200, max + 43200] },
      y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
    },
    axes: [
      { ...axis, space: 60, values: (u, splits) => splits.map((v) => uPlot.fmtDate('{MMM} {D}')(utc(v))) },
      { ...axis, values: countValues, size: 56 },
    ],
    series: [
      {},
      {
        label,
        stroke: colour,
        fill: `${colour}cc`,
        width: 0,
        paths: uPlot.paths.bars({ size: [0.7, 40], align: 0 }),
        points: { show: false },
      },
    ],
    plugins: [
      tooltipPlugin((u, idx) => {
        const day = new Date(u.data[0][idx] * 1000).toISOString().slice(0, 10);
        return { title: day, subtitle: '', rows: [[label, fmtCount(u.data[1][idx] ?? 0), colour]] };
      }),
    ],
  };
  return new Chart(id, el, opts, data);
}

/** Figures on y: up to 3 decimals, with separators. */
function valueValues(_u, splits) {
  return splits.map((v) => fmtCount(v));
}

/** The series of a statistic's chart, in the order of its data after x. */
export const STAT_SERIES = [
  { key: 'p50', label: 'p50', colour: PALETTE[2] },
  { key: 'p90', label: 'p90', colour: PALETTE[4] },
  { key: 'p99', label: 'p99', colour: PALETTE[1] },
  { key: 'mean', label: 'mean', colour: PALETTE[0], dash: [6, 4] },
  { key: 'count', label: 'count', colour: PALETTE[5] },
];

/**
 * A statistic's chart: x is Unix seconds (local time), the figures p50,
 * p90, p99 and mean as lines on the left axis (gaps where a slice holds
 * nothing), the count per slice as pale bars on the right axis.
 * `data` is `[xs, p50, p90, p99, mean, count]`.
 */
export function statChart(id, el, { bucket, height = 200 }, data) {
  const axis = axisStyle();
  const counts = STAT_SERIES.at(-1);
  const opts = {
    height,
    legend: { show: true, live: false },
    cursor,
    scales: {
      x: { time: true },
      y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      n: { range: (_u, _min, max) => [0, max > 0 ? max * 2 : 1] },
    },
    axes: [
      { ...axis, space: 70, values: TIME_VALUES },
      { ...axis, scale: 'y', values: valueValues, size: 60 },
      { ...axis, scale: 'n', side: 1, values: countValues, size: 50, grid: { show: false } },
    ],
    series: [
      {},
      ...STAT_SERIES.slice(0, -1).map(({ label, colour, dash }) => ({
        label,
        scale: 'y',
        stroke: colour,
        width: 2,
        dash,
        // A slice between two empty ones is a point, not a line.
        points: { show: true, size: 5, fill: colour },
      })),
      {
        label: counts.label,
        scale: 'n',
        stroke: counts.colour,
        fill: `${counts.colour}55`,
        width: 0,
        paths: uPlot.paths.bars({ size: [0.8, 30], align: 0 }),
        points: { show: false },
      },
    ],
    plugins: [
      timeTooltip(bucket, (u, idx) =>
        STAT_SERIES.map(({ label, colour }, s) => [label, fmtValue(u.data[s + 1][idx]), colour]),
      ),
    ],
  };
  return new Chart(id, el, opts, data);
}

/**
 * The charts of one name at every precision, in a grid (`.grid`): a card per
 * precision ("Every 5 s", "last 10 min", a caption line), created on first
 * use and then fed new data in place, until the precisions or the slices
 * kept change.
 */
export class PrecisionCharts {
  constructor() {
    this.grid = h('div', { class: 'chart-grid' });
    this.cards = new Map();
    this.key = null;
  }

  /**
   * Starts a refresh of an API answer's `precisions` (an object keyed by
   * precision) keeping `kept` slices each; returns the precisions as
   * numbers, ascending.
   */
  begin(byPrecision, kept) {
    const precisions = Object.keys(byPrecision)
      .map(Number)
      .sort((a, b) => a - b);
    const key = `${precisions.join(',')}/${kept}`;
    if (this.key !== key) {
      this.clear();
      this.key = key;
    }
    return precisions;
  }

  /**
   * Draws `data` at precision `p`: `make(chartEl, data)` creates the chart
   * the first time. Returns the card `{ fig, chartEl, meta, chart }`.
   */
  draw(p, kept, data, make) {
    let card = this.cards.get(p);
    if (card) {
      card.chart.update(data);
      return card;
    }
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
    this.grid.append(fig);
    card = { fig, chartEl, meta, chart: make(chartEl, data) };
    this.cards.set(p, card);
    return card;
  }

  clear() {
    for (const c of this.cards.values()) c.chart.destroy();
    this.cards = new Map();
    this.key = null;
    this.grid.replaceChildren();
  }
}
