// Pure helpers of the dashboard: slice filling, URL-hash routes and
// formatting. No DOM, no network, no clock (callers pass `now`), so
// `node --test` checks them directly (see test/lib.test.mjs).

/** Seconds in a minute, hour and day, for durations. */
const UNITS = [
  [86400, 'day', 'days'],
  [3600, 'h', 'h'],
  [60, 'min', 'min'],
  [1, 's', 's'],
];

/**
 * A duration in seconds as a short phrase: 1 → "1 s", 300 → "5 min",
 * 86400 → "1 day", 90 → "90 s" (the largest unit that divides it exactly).
 */
export function fmtDuration(secs) {
  for (const [size, one, many] of UNITS) {
    if (secs >= size && secs % size === 0) {
      const n = secs / size;
      return `${n} ${n === 1 ? one : many}`;
    }
  }
  return `${secs} s`;
}

/** An integer with thousands separators ("12,345"), in a fixed locale. */
export function fmtCount(n) {
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: 3 });
}

const pad = (n) => String(n).padStart(2, '0');

/** Unix seconds as "YYYY-MM-DD HH:MM:SS" in local time. */
export function fmtLocal(ts) {
  const d = new Date(ts * 1000);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

/** Unix seconds as "YYYY-MM-DD HH:MM:SS UTC". */
export function fmtUtc(ts) {
  return new Date(ts * 1000).toISOString().slice(0, 19).replace('T', ' ') + ' UTC';
}

/**
 * The retained span of one precision: `kept` slice starts, ascending by
 * `precision`, ending at the slice holding `now` (or at the newest of
 * `starts`, if the server's clock runs ahead). Returns `{ xs, at }`, where
 * `at(start)` is the index of the slice starting exactly at `start`, or -1
 * when it lies outside the span (older slices: the cleaner removes them).
 */
export function sliceSpan(starts, precision, kept, now) {
  let end = Math.floor(now / precision) * precision;
  for (const start of starts) {
    const slice = Math.floor(start / precision) * precision;
    if (slice > end) end = slice;
  }
  const first = end - (kept - 1) * precision;
  const xs = new Array(kept);
  for (let i = 0; i < kept; i++) xs[i] = first + i * precision;
  const at = (start) => {
    const i = Math.round((start - first) / precision);
    return i >= 0 && i < kept && xs[i] === start ? i : -1;
  };
  return { xs, at };
}

/**
 * One precision's samples as a gap-free series over the retained span.
 *
 * `samples` are `[slice_start, count]` pairs, oldest first, as the API sends
 * them; a missing slice means 0. The span is `sliceSpan`'s. Returns
 * `{ xs, ys }`, equal lengths, xs ascending by `precision`.
 */
export function fillSlices(samples, precision, kept, now) {
  const { xs, at } = sliceSpan(
    samples.map(([start]) => start),
    precision,
    kept,
    now,
  );
  const ys = new Array(kept).fill(0);
  for (const [start, count] of samples) {
    const i = at(start);
    if (i >= 0) ys[i] += count;
  }
  return { xs, ys };
}

/** The quantiles the Stats view charts, as the API keys them. */
export const STAT_QUANTILES = ['0.5', '0.9', '0.99'];

/**
 * One precision of a statistic as chart series over the retained span.
 *
 * `slices` are the API's `{start, count, mean, quantiles: {"0.5": ..}}`,
 * oldest first. Returns `{ xs, p50, p90, p99, mean, count }`, equal
 * lengths: a slice with no observations (or none kept) has count 0 and
 * `null` figures (a gap in the line, not a fall to 0); a slice kept
 * without a sketch has `null` quantiles.
 */
export function fillStats(slices, precision, kept, now) {
  const { xs, at } = sliceSpan(
    slices.map((s) => s.start),
    precision,
    kept,
    now,
  );
  const gap = () => new Array(kept).fill(null);
  const out = { xs, p50: gap(), p90: gap(), p99: gap(), mean: gap(), count: new Array(kept).fill(0) };
  const names = { '0.5': 'p50', '0.9': 'p90', '0.99': 'p99' };
  for (const s of slices) {
    const i = at(s.start);
    if (i < 0) continue;
    out.count[i] = s.count;
    out.mean[i] = s.mean ?? null;
    for (const q of STAT_QUANTILES) out[names[q]][i] = s.quantiles?.[q] ?? null;
  }
  return out;
}

/** The figures the Stats view ranks by (the API's `by`); the first is the default. */
export const STAT_FIGURES = ['p99', 'p90', 'p50', 'mean', 'max'];

/** The ranges the Stats view ranks over, in seconds; the second is the default. */
export const STAT_RANGES = [300, 3600, 86400, 7 * 86400];

/**
 * The Stats view's ranking choice from its route parameters: `by` one of
 * `STAT_FIGURES` and `range` one of `STAT_RANGES`, anything else (or
 * nothing) their defaults.
 */
export function rankingOf(params) {
  const by = STAT_FIGURES.includes(params.by) ? params.by : STAT_FIGURES[0];
  const range = STAT_RANGES.includes(Number(params.range)) ? Number(params.range) : STAT_RANGES[1];
  return { by, range };
}

/** A statistic's figure for display: up to 3 decimals with separators; `–` for none. */
export function fmtValue(v) {
  return v === null || v === undefined ? '–' : fmtCount(v);
}

/**
 * Sum and peak (the largest value and its index; -1 when none is above 0).
 * `null`s (gaps) count as nothing.
 */
export function summarize(ys) {
  let total = 0;
  let peak = 0;
  let at = -1;
  ys.forEach((y, i) => {
    total += y;
    if (y > peak) {
      peak = y;
      at = i;
    }
  });
  return { total, peak, at };
}

/** The views the dashboard has; the first is the default. */
export const VIEWS = ['counters', 'ts', 'daily', 'stats'];

/**
 * A URL hash as a route: "#/daily?entity=ad%3A1" →
 * `{ view: "daily", params: { entity: "ad:1" } }`. Unknown views fall back
 * to the first.
 */
export function parseHash(hash) {
  const body = (hash || '').replace(/^#\/?/, '');
  const q = body.indexOf('?');
  const view = q < 0 ? body : body.slice(0, q);
  const params = {};
  if (q >= 0) {
    for (const [k, v] of new URLSearchParams(body.slice(q + 1))) params[k] = v;
  }
  return { view: VIEWS.includes(view) ? view : VIEWS[0], params };
}

/** The inverse of `parseHash`; empty parameters are left out. */
export function buildHash(view, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return `#/${view}${s ? `?${s}` : ''}`;
}

/**
 * The start of a time-series range of `span` seconds ending at `end`,
 * a little short of the full span: the server picks the finest rollup whose
 * retention, counted back from *its* now, reaches the start, so a start of
 * exactly `end - span` would flip between two rollups as its clock moves
 * past ours (e.g. 10 s buckets kept for exactly 1 h). 1 % of the span (at
 * least 10 s) absorbs that and small clock differences.
 */
export function rangeStart(end, span) {
  return end - span + Math.max(10, Math.floor(span / 100));
}

/** "a, b,,c " → ["a", "b", "c"]: the keys typed in the time-series form. */
export function splitKeys(text) {
  return (text || '')
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '');
}

/** "2026-11-22" → Unix seconds of that date's midnight UTC. */
export function dayToUnix(day) {
  const [y, m, d] = day.split('-').map(Number);
  return Date.UTC(y, m - 1, d) / 1000;
}

/** Unix seconds of a UTC midnight → "2026-11-22". */
export function unixToDay(ts) {
  return new Date(ts * 1000).toISOString().slice(0, 10);
}

/** An API path segment: the name percent-encoded (":" and "/" included). */
export function seg(name) {
  return encodeURIComponent(name);
}
