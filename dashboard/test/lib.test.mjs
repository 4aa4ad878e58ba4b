// Unit tests of the dashboard's pure helpers: `node --test test/`.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  buildHash,
  dayToUnix,
  fillSlices,
  fmtCount,
  fmtDuration,
  fmtUtc,
  parseHash,
  rangeStart,
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
