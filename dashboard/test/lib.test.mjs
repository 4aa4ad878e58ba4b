// Unit tests of the dashboard's pure helpers: `node --test test/`.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  buildHash,
  dayToUnix,
  fillSlices,
  fillStats,
  fmtCount,
  fmtDuration,
  fmtUtc,
  fmtValue,
  parseHash,
  rangeStart,
  rankingOf,
  sliceSpan,
  splitKeys,
  summarize,
  unixToDay,
} from '../src/lib.js';

test('durations use the largest unit that divides them', () => {
  assert.equal(fmtDuration(1), '1 s');
  assert.equal(fmtDuration(5), '5 s');
  assert.equal(fmtDuration(90), '90 s');
  assert.equal(fmtDuration(60), '1 min');
  assert.equal(fmtDuration(600), '10 min');
  assert.equal(fmtDuration(7200), '2 h');
  assert.equal(fmtDuration(18000), '5 h');
  assert.equal(fmtDuration(86400), '1 day');
  assert.equal(fmtDuration(86400 * 120), '120 days');
});

test('counts get separators', () => {
  assert.equal(fmtCount(0), '0');
  assert.equal(fmtCount(1234567), '1,234,567');
  assert.equal(fmtCount(-42), '-42');
});

test('fillSlices draws missing slices as 0 over the retained span', () => {
  const now = 1000.7;
  const { xs, ys } = fillSlices(
    [
      [990, 3],
      [1000, 7],
    ],
    5,
    4,
    now,
  );
  // Slice of now: 1000; four slices back from it.
  assert.deepEqual(xs, [985, 990, 995, 1000]);
  assert.deepEqual(ys, [0, 3, 0, 7]);
});

test('fillSlices drops samples older than the span and follows a server ahead of us', () => {
  const { xs, ys } = fillSlices(
    [
      [900, 100],
      [1010, 2],
    ],
    10,
    3,
    1000,
  );
  assert.deepEqual(xs, [990, 1000, 1010]);
  assert.deepEqual(ys, [0, 0, 2]);
});

test('fillSlices ignores a sample off the slice grid rather than misplacing it', () => {
  const { ys } = fillSlices([[1003, 9]], 5, 3, 1004);
  assert.deepEqual(ys, [0, 0, 0]);
});

test('fillSlices keeps every count of a full span', () => {
  const samples = Array.from({ length: 120 }, (_, i) => [60 * (1000 + i), i + 1]);
  const { xs, ys } = fillSlices(samples, 60, 120, 60 * 1119 + 59);
  assert.equal(xs.length, 120);
  assert.equal(summarize(ys).total, (120 * 121) / 2);
});

test('summarize finds the total and the first peak', () => {
  assert.deepEqual(summarize([0, 3, 7, 7, 1]), { total: 18, peak: 7, at: 2 });
  assert.deepEqual(summarize([0, 0]), { total: 0, peak: 0, at: -1 });
});

test('hash routes round-trip, names with any character included', () => {
  const params = { q: 'shop:', name: 'a b/c?d&e=f#g' };
  const hash = buildHash('counters', params);
  assert.deepEqual(parseHash(hash), { view: 'counters', params });
  assert.equal(buildHash('daily', { entity: '', days: null }), '#/daily');
  assert.deepEqual(parseHash('#/ts?model=pages&keys=a,b'), { view: 'ts', params: { model: 'pages', keys: 'a,b' } });
});

test('unknown or empty hashes open the counters view', () => {
  assert.equal(parseHash('').view, 'counters');
  assert.equal(parseHash('#main').view, 'counters');
  assert.equal(parseHash('#/nope?x=1').view, 'counters');
});

test('keys are split on commas and trimmed', () => {
  assert.deepEqual(splitKeys(' home, about,,x '), ['home', 'about', 'x']);
  assert.deepEqual(splitKeys(''), []);
});

test('days map to UTC midnights and back', () => {
  assert.equal(dayToUnix('1970-01-02'), 86400);
  assert.equal(unixToDay(dayToUnix('2026-11-22')), '2026-11-22');
  assert.equal(fmtUtc(0), '1970-01-01 00:00:00 UTC');
});

test('a range starts inside the finest rollup that keeps the whole span', () => {
  // 10 s buckets kept 360 times: a server up to 35 s ahead still picks them.
  const end = 1_000_000;
  assert.equal(rangeStart(end, 3600), end - 3600 + 36);
  assert.ok(end + 35 - 3600 <= rangeStart(end, 3600));
  assert.equal(rangeStart(end, 600), end - 600 + 10);
});

test('sliceSpan ends at the slice of now and finds only exact slice starts', () => {
  const { xs, at } = sliceSpan([990], 5, 4, 1003.2);
  assert.deepEqual(xs, [985, 990, 995, 1000]);
  assert.equal(at(985), 0);
  assert.equal(at(1000), 3);
  assert.equal(at(980), -1, 'older than the span');
  assert.equal(at(1005), -1, 'newer than the span');
  assert.equal(at(992), -1, 'not a slice start');
  // A sample past our now (the server's clock ahead) moves the end.
  assert.deepEqual(sliceSpan([1010], 5, 2, 1003).xs, [1005, 1010]);
});

test('fillStats keeps figures per slice and leaves gaps where nothing was observed', () => {
  const slices = [
    { start: 900, count: 9, mean: 1, quantiles: { 0.5: 1, 0.9: 1, 0.99: 1 } },
    { start: 990, count: 3, mean: 20, quantiles: { '0.5': 20, '0.9': 30, '0.99': 30.5 } },
    { start: 1000, count: 2, mean: 7.5, quantiles: {} },
  ];
  const s = fillStats(slices, 5, 4, 1000.7);
  assert.deepEqual(s.xs, [985, 990, 995, 1000]);
  assert.deepEqual(s.count, [0, 3, 0, 2]);
  assert.deepEqual(s.mean, [null, 20, null, 7.5]);
  assert.deepEqual(s.p50, [null, 20, null, null], 'a slice kept without a sketch has no quantiles');
  assert.deepEqual(s.p90, [null, 30, null, null]);
  assert.deepEqual(s.p99, [null, 30.5, null, null]);
});

test('summarize counts gaps as nothing', () => {
  assert.deepEqual(summarize([null, 4, null, 9, 2]), { total: 15, peak: 9, at: 3 });
  assert.deepEqual(summarize([null, null]), { total: 0, peak: 0, at: -1 });
});

test('the ranking choice falls back to p99 over the last hour', () => {
  assert.deepEqual(rankingOf({}), { by: 'p99', range: 3600 });
  assert.deepEqual(rankingOf({ by: 'mean', range: '300' }), { by: 'mean', range: 300 });
  assert.deepEqual(rankingOf({ by: 'p42', range: '17' }), { by: 'p99', range: 3600 });
  assert.deepEqual(rankingOf({ by: 'max', range: String(7 * 86400) }), { by: 'max', range: 604800 });
});

test('stat figures keep decimals and show a gap as a dash', () => {
  assert.equal(fmtValue(1234.56789), '1,234.568');
  assert.equal(fmtValue(0), '0');
  assert.equal(fmtValue(null), '–');
  assert.equal(fmtValue(undefined), '–');
});

test('the stats route round-trips', () => {
  const hash = buildHash('stats', { q: 'http', name: 'tally:http:latency', by: 'p99' });
  assert.equal(hash, '#/stats?q=http&name=tally%3Ahttp%3Alatency&by=p99');
  assert.deepEqual(parseHash(hash), { view: 'stats', params: { q: 'http', name: 'tally:http:latency', by: 'p99' } });
});
