// End-to-end check of the dashboard in headless Chromium, driven by
// tests/tally-cli/dashboard.rs (which starts `tally serve`, feeds it known data and
// checks the API holds it, then runs this script):
//
//   node e2e/dashboard.mjs SPEC.json
//
// SPEC says where the server is, what the charts must show and where to
// save screenshots. Scenario "data": search the counters, pick one with the
// keyboard, check every precision's chart holds exactly the API's samples
// (missing slices 0, over the retained span), hover a slice and read the
// tooltip, feed one more increment and watch the same chart update live;
// then the statistics view opened by URL (quantiles, mean and count per
// slice, the ranking and its figure, the search, live refresh), the
// time-series and the daily views. Scenario "token": a server that
// protects reads; the page must ask for a token, refuse a wrong one, keep
// the right one. Any failed check, page error or failed request of the page
// exits 1 with a message.

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { fmtDuration, fmtValue } from '../src/lib.js';

const spec = JSON.parse(await readFile(process.argv[2], 'utf8'));
const TIMEOUT = 15000;

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

class CheckFailed extends Error {}

function check(ok, message) {
  if (!ok) throw new CheckFailed(message);
}

function step(message) {
  console.log(`e2e: ${message}`);
}

const utc = (ts) => new Date(ts * 1000).toISOString().slice(0, 19).replace('T', ' ') + ' UTC';

/** The data a chart drew: `{ xs, ys: [series...] }`, read from its uPlot. */
async function chartData(page, id) {
  return page.evaluate((id) => {
    const u = window.tallyCharts?.[id];
    if (!u) return null;
    return { xs: Array.from(u.data[0]), ys: u.data.slice(1).map((s) => Array.from(s)) };
  }, id);
}

async function waitChart(page, id) {
  await page.waitForFunction((id) => window.tallyCharts?.[id]?.data?.[0]?.length > 0, id, { timeout: TIMEOUT });
}

/** The data of chart `id` at precision `p`, checked to span the `kept` slices, `p` s apart. */
async function precisionChart(page, id, p, kept) {
  await waitChart(page, id);
  const data = await chartData(page, id);
  const { xs } = data;
  check(xs.length === kept, `precision ${p}: ${xs.length} slices drawn, expected the ${kept} retained`);
  check(xs.every((x, i) => i === 0 || x - xs[i - 1] === Number(p)), `precision ${p}: slices are not ${p} s apart`);
  return data;
}

/**
 * Moves the mouse over the point of chart `id` at x = `t`; returns the tooltip's text parts.
 *
 * A live refresh may redraw the chart, its window moved on, between finding the point's
 * place and reading the tooltip, which then describes the point now under the mouse. So
 * the tooltip is read at once with the x of the point it describes, and the mouse moved
 * again (1 px up or down, so it moves) until that x is `t`.
 */
async function hover(page, id, figure, t) {
  const deadline = Date.now() + TIMEOUT;
  for (let nudge = 0; ; nudge = 1 - nudge) {
    const pos = await page.evaluate(
      ({ id, t }) => {
        const u = window.tallyCharts[id];
        const box = u.over.getBoundingClientRect();
        return { x: box.left + u.valToPos(t, 'x'), y: box.top + box.height / 2 };
      },
      { id, t },
    );
    await page.mouse.move(pos.x, pos.y + nudge);
    await page.locator(`${figure} .chart-tip`).waitFor({ state: 'visible', timeout: TIMEOUT });
    const seen = await page.evaluate(
      ({ id, figure }) => {
        const u = window.tallyCharts[id];
        const tip = document.querySelector(`${figure} .chart-tip`);
        const texts = (sel) => [...tip.querySelectorAll(sel)].map((e) => e.textContent);
        return {
          x: u.cursor.idx == null ? null : u.data[0][u.cursor.idx],
          title: texts('.tip-title')[0] ?? '',
          sub: texts('.tip-sub')[0] ?? '',
          values: texts('.tip-value'),
        };
      },
      { id, figure },
    );
    if (seen.x === t) return { title: seen.title, sub: seen.sub, values: seen.values };
    check(Date.now() < deadline, `chart ${id}: the mouse never rested on the point at ${utc(t)}, the tooltip shows ${seen.x}`);
  }
}

/**
 * Fails unless `ys` is exactly `expected` (pairs [x, value]) at `xs` and
 * `missing` elsewhere (0 for counts, null for a gap in a statistic's line).
 */
function checkSeries(what, xs, ys, expected, missing = 0) {
  const want = new Map(expected.map(([x, c]) => [x, c]));
  xs.forEach((x, i) => {
    const w = want.get(x) ?? missing;
    check(ys[i] === w, `${what}: at ${x} (${utc(x)}) the chart drew ${ys[i]}, the API holds ${w}`);
  });
  for (const [x, c] of want) {
    check(xs.includes(x) || c === missing, `${what}: the API's sample at ${x} (${c}) is not on the chart`);
  }
}

/** Waits until the counter list shows the answer to the search `q`. */
async function listedFor(page, q) {
  await page.waitForFunction(
    (q) => document.querySelector('#counter-list-status')?.textContent.includes(`starting with “${q}”`),
    q,
    { timeout: TIMEOUT },
  );
}

async function counters(page, s) {
  const c = s.counter;
  step(`search "${c.search}" and pick ${c.name} with the keyboard`);
  await page.goto(s.base);
  await page.locator('#counter-search').waitFor({ timeout: TIMEOUT });
  await page.locator('#counter-search').pressSequentially(c.search, { delay: 30 });
  const names = page.locator('#counter-list a');
  await page.waitForFunction(
    (want) => {
      const got = [...document.querySelectorAll('#counter-list a')].map((a) => a.dataset.name);
      return JSON.stringify(got) === JSON.stringify(want);
    },
    c.listed,
    { timeout: TIMEOUT },
  ).catch(async () => {
    throw new CheckFailed(`the list shows ${JSON.stringify(await names.allTextContents())}, expected ${JSON.stringify(c.listed)}`);
  });
  // Wait for the search itself to have answered (a slow machine may list
  // the same names for a shorter prefix typed on the way).
  await listedFor(page, c.search);
  const index = c.listed.indexOf(c.name);
  await page.locator('#counter-search').press('ArrowDown');
  for (let i = 0; i < index; i++) await page.keyboard.press('ArrowDown');
  const focused = await page.evaluate(() => document.activeElement?.dataset?.name);
  check(focused === c.name, `arrow keys focused ${focused}, expected ${c.name}`);

  step('the list reloads under the keyboard focus and keeps it');
  for (const q of [c.search.slice(0, -1), c.search]) {
    // As if a search typed earlier answered now: the focus stays in the list.
    await page.evaluate((q) => {
      const search = document.querySelector('#counter-search');
      search.value = q;
      search.dispatchEvent(new Event('input'));
    }, q);
    await listedFor(page, q);
    const still = await page.evaluate(() => document.activeElement?.dataset?.name);
    check(still === c.name, `after the list reloaded for "${q}" the focus is on ${still}, expected ${c.name}`);
  }
  await page.keyboard.press('Enter');
  await page.waitForFunction((n) => decodeURIComponent(location.hash).includes(`name=${n}`), c.name, { timeout: TIMEOUT });
  check(
    (await page.locator('#counter-list a[aria-current="page"]').textContent()) === c.name,
    'the chosen counter is not marked current in the list',
  );

  step(`check the chart of each precision (${Object.keys(c.samples).join(', ')} s)`);
  for (const [p, samples] of Object.entries(c.samples)) {
    const { xs, ys } = await precisionChart(page, `counter:${p}`, p, c.samples_kept);
    checkSeries(`precision ${p}`, xs, ys[0], samples);
    const total = ys[0].reduce((a, b) => a + b, 0);
    check(total === c.total, `precision ${p}: the chart sums to ${total}, expected ${c.total}`);
    const shown = await page.locator(`figure[data-precision="${p}"]`).getAttribute('data-total');
    check(shown === String(c.total), `precision ${p}: the caption says total ${shown}`);
  }

  step(`hover the ${c.hover.precision} s slice at ${utc(c.hover.at)}`);
  const tip = await hover(page, `counter:${c.hover.precision}`, `figure[data-precision="${c.hover.precision}"]`, c.hover.at);
  check(tip.values[0] === String(c.hover.count), `the tooltip says ${tip.values[0]}, expected ${c.hover.count}`);
  check(tip.sub.includes(utc(c.hover.at)), `the tooltip's UTC line is "${tip.sub}", expected ${utc(c.hover.at)}`);
  await page.screenshot({ path: join(s.out_dir, 'dashboard-counters.png'), fullPage: true });

  step(`feed ${c.live_count} more and wait for the live refresh`);
  const coarsest = Object.keys(c.samples).at(-1);
  await page.evaluate((id) => {
    window.tallyCharts[id].e2eMark = true;
  }, `counter:${coarsest}`);
  const res = await fetch(new URL(`v1/counters/${encodeURIComponent(c.name)}/incr`, s.base), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ count: c.live_count }),
  });
  check(res.status === 202, `the extra increment was answered ${res.status}`);
  const want = c.total + c.live_count;
  await page
    .waitForFunction(
      ({ id, want }) => {
        const u = window.tallyCharts[id];
        return u && u.data[1].reduce((a, b) => a + b, 0) === want;
      },
      { id: `counter:${coarsest}`, want },
      { timeout: TIMEOUT },
    )
    .catch(() => {
      throw new CheckFailed(`the chart did not refresh to ${want} within ${TIMEOUT} ms`);
    });
  const same = await page.evaluate((id) => window.tallyCharts[id].e2eMark === true, `counter:${coarsest}`);
  check(same, 'the chart was rebuilt on refresh instead of updated in place');
}

/** Waits until the links in `selector` name exactly `want`, in order. */
async function namesAre(page, selector, want, what) {
  await page
    .waitForFunction(
      ({ selector, want }) =>
        JSON.stringify([...document.querySelectorAll(selector)].map((a) => a.dataset.name)) === JSON.stringify(want),
      { selector, want },
      { timeout: TIMEOUT },
    )
    .catch(async () => {
      const got = await page.evaluate((sel) => [...document.querySelectorAll(sel)].map((a) => a.dataset.name), selector);
      throw new CheckFailed(`${what} shows ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
    });
}

/** The total of the count series (the last) of chart `id`. */
async function chartCount(page, id) {
  return page.evaluate((id) => window.tallyCharts[id]?.data.at(-1).reduce((a, b) => a + b, 0), id);
}

async function stats(page, s) {
  const st = s.stats;
  const url = new URL(`#/stats?q=${encodeURIComponent(st.search)}&name=${encodeURIComponent(st.name)}&by=${st.by}`, s.base).href;
  step(`stats: open ${url}`);
  await page.goto('about:blank');
  await page.goto(url);
  await page.locator('#stat-search').waitFor({ timeout: TIMEOUT });
  check((await page.locator('#stat-search').inputValue()) === st.search, 'the search box does not hold the prefix of the URL');
  await namesAre(page, '#stat-list a', st.listed, 'the stat list');
  check(
    (await page.locator('#stat-list a[aria-current="page"]').textContent()) === st.name,
    'the stat of the URL is not marked current in the list',
  );

  step(`check ${st.name}'s chart of each precision (${Object.keys(st.precisions).join(', ')} s)`);
  const figures = [
    ['p50', (x) => x.quantiles['0.5']],
    ['p90', (x) => x.quantiles['0.9']],
    ['p99', (x) => x.quantiles['0.99']],
    ['mean', (x) => x.mean],
  ];
  for (const [p, slices] of Object.entries(st.precisions)) {
    const { xs, ys } = await precisionChart(page, `stat:${p}`, p, st.samples_kept);
    check(ys.length === 5, `precision ${p}: ${ys.length} series drawn, expected p50, p90, p99, mean and count`);
    figures.forEach(([name, of], i) => {
      checkSeries(`precision ${p} ${name}`, xs, ys[i], slices.map((x) => [x.start, of(x)]), null);
    });
    checkSeries(`precision ${p} count`, xs, ys[4], slices.map((x) => [x.start, x.count]));
    const total = ys[4].reduce((a, b) => a + b, 0);
    check(total === st.count, `precision ${p}: the counts sum to ${total}, expected ${st.count}`);
    const shown = await page.locator(`#stat-detail figure[data-precision="${p}"]`).getAttribute('data-count');
    check(shown === String(st.count), `precision ${p}: the caption says ${shown} observations`);
  }

  const [p1] = Object.keys(st.precisions);
  const busiest = st.precisions[p1].reduce((a, b) => (b.count > a.count ? b : a));
  step(`hover the ${p1} s slice at ${utc(busiest.start)}`);
  const tip = await hover(page, `stat:${p1}`, `#stat-detail figure[data-precision="${p1}"]`, busiest.start);
  const want = [
    fmtValue(busiest.quantiles['0.5']),
    fmtValue(busiest.quantiles['0.9']),
    fmtValue(busiest.quantiles['0.99']),
    fmtValue(busiest.mean),
    fmtValue(busiest.count),
  ];
  check(JSON.stringify(tip.values) === JSON.stringify(want), `the tooltip says ${JSON.stringify(tip.values)}, expected ${JSON.stringify(want)}`);

  step(`the ranking by ${st.by}, then by mean`);
  await namesAre(page, '#stats-top-list a', st.ranking[st.by].map((r) => r.name), `the ranking by ${st.by}`);
  const values = await page.evaluate(() => [...document.querySelectorAll('#stats-top-list a')].map((a) => Number(a.dataset.value)));
  check(
    JSON.stringify(values) === JSON.stringify(st.ranking[st.by].map((r) => r.value)),
    `the ranking by ${st.by} shows ${JSON.stringify(values)}, the API ranks ${JSON.stringify(st.ranking[st.by])}`,
  );
  await page.mouse.move(0, 0);
  await page.screenshot({ path: join(s.out_dir, 'dashboard-stats.png'), fullPage: true });
  await page.locator('#stats-by').selectOption('mean');
  await namesAre(page, '#stats-top-list a', st.ranking.mean.map((r) => r.name), 'the ranking by mean');
  check(decodeURIComponent(await page.evaluate(() => location.hash)).includes('by=mean'), 'the figure is not in the URL');

  step(`search "${st.narrow}": the list and the ranking keep to it`);
  await page.locator('#stat-search').fill(st.narrow);
  await namesAre(page, '#stat-list a', st.narrowed, `the stat list for "${st.narrow}"`);
  await namesAre(page, '#stats-top-list a', st.narrowed, `the ranking for "${st.narrow}"`);
  check(decodeURIComponent(await page.evaluate(() => location.hash)).includes(`q=${st.narrow}`), 'the search is not in the URL');

  const other = st.narrowed[0];
  step(`click ${other} in the ranking`);
  await page.locator(`#stats-top-list a[data-name="${other}"]`).click();
  await page.waitForFunction((n) => decodeURIComponent(location.hash).includes(`name=${n}`), other, { timeout: TIMEOUT });
  check((await page.locator('#stat-detail h2').textContent()) === other, `the detail does not show ${other}`);
  const coarsest = `stat:${Object.keys(st.precisions).at(-1)}`;
  await page
    .waitForFunction(({ id, want }) => window.tallyCharts[id]?.data.at(-1).reduce((a, b) => a + b, 0) === want, { id: coarsest, want: st.other_count }, { timeout: TIMEOUT })
    .catch(async () => {
      throw new CheckFailed(`${other}'s chart counts ${await chartCount(page, coarsest)}, expected ${st.other_count}`);
    });

  step(`record one more value of ${other} and wait for the live refresh`);
  await page.evaluate((id) => {
    window.tallyCharts[id].e2eMark = true;
  }, coarsest);
  const res = await fetch(new URL(`v1/stats/${encodeURIComponent(other)}/record`, s.base), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ value: st.live_value }),
  });
  check(res.ok, `the extra observation was answered ${res.status}`);
  await page
    .waitForFunction(({ id, want }) => window.tallyCharts[id]?.data.at(-1).reduce((a, b) => a + b, 0) === want, { id: coarsest, want: st.other_count + 1 }, { timeout: TIMEOUT })
    .catch(async () => {
      throw new CheckFailed(`the chart did not refresh to ${st.other_count + 1} observations (it counts ${await chartCount(page, coarsest)})`);
    });
  const same = await page.evaluate((id) => window.tallyCharts[id].e2eMark === true, coarsest);
  check(same, 'the stat chart was rebuilt on refresh instead of updated in place');
}

async function timeSeries(page, s) {
  const t = s.ts;
  step(`time series: ${t.model} keys ${t.keys.join(', ')}`);
  await page.locator('.nav a[data-view="ts"]').click();
  await page.locator('#ts-model').fill(t.model);
  await page.locator('#ts-keys').fill(t.keys.join(', '));
  await page.locator('#ts-keys').press('Enter');
  await waitChart(page, 'ts');
  const { xs, ys } = await chartData(page, 'ts');
  check(ys.length === t.keys.length, `${ys.length} series drawn, expected ${t.keys.length}`);
  t.keys.forEach((key, i) => {
    checkSeries(`key ${key}`, xs, ys[i], t.points[key]);
    const total = ys[i].reduce((a, b) => a + b, 0);
    check(total === t.totals[key], `key ${key}: the chart sums to ${total}, expected ${t.totals[key]}`);
  });
  const caption = await page.locator('#ts-caption').textContent();
  const rollup = `rollup ${fmtDuration(t.rollup)}`;
  check(caption.includes(rollup), `the caption "${caption}" does not show ${rollup}`);
  check(decodeURIComponent(await page.evaluate(() => location.hash)).includes(`keys=${t.keys.join(',')}`), 'the keys are not in the URL');
  const [x, count] = t.points[t.keys[0]].find(([, c]) => c > 0);
  const tip = await hover(page, 'ts', '#ts-figure', x);
  check(tip.values[0] === String(count), `the tooltip says ${tip.values[0]} for ${t.keys[0]}, expected ${count}`);
  await page.screenshot({ path: join(s.out_dir, 'dashboard-ts.png'), fullPage: true });
}

async function daily(page, s) {
  const d = s.daily;
  step(`daily: ${d.entity}`);
  await page.locator('.nav a[data-view="daily"]').click();
  await page.locator('#daily-entity').fill(d.entity);
  await page.locator('#daily-entity').press('Enter');
  await waitChart(page, 'daily');
  const { xs, ys } = await chartData(page, 'daily');
  check(xs.length === d.days.length, `${xs.length} days drawn, expected ${d.days.length}`);
  const days = xs.map((x) => new Date(x * 1000).toISOString().slice(0, 10));
  days.forEach((day, i) => {
    check(day === d.days[i].day, `bar ${i} is ${day}, expected ${d.days[i].day}`);
    check(ys[0][i] === d.days[i].count, `${day}: the bar is ${ys[0][i]}, expected ${d.days[i].count}`);
  });
  await page.waitForFunction(
    ({ today, total }) =>
      document.getElementById('daily-today')?.textContent === today && document.getElementById('daily-total')?.textContent === total,
    { today: String(d.today), total: String(d.total) },
    { timeout: TIMEOUT },
  ).catch(async () => {
    throw new CheckFailed(
      `today/total show ${await page.locator('#daily-today').textContent()}/${await page.locator('#daily-total').textContent()}, expected ${d.today}/${d.total}`,
    );
  });
  const busiest = d.days.reduce((a, b) => (b.count > a.count ? b : a));
  const tip = await hover(page, 'daily', '#daily-figure', xs[days.indexOf(busiest.day)]);
  check(tip.title === busiest.day && tip.values[0] === String(busiest.count), `the tooltip says ${tip.title}: ${tip.values[0]}, expected ${busiest.day}: ${busiest.count}`);
  await page.screenshot({ path: join(s.out_dir, 'dashboard-daily.png'), fullPage: true });

  step('narrow window');
  await page.setViewportSize({ width: 390, height: 800 });
  await page.mouse.move(0, 0);
  // The charts follow their containers' width on the next frames (a
  // ResizeObserver): wait for the page to fit rather than a fixed while.
  await page
    .waitForFunction(() => document.documentElement.scrollWidth <= window.innerWidth, null, { timeout: TIMEOUT })
    .catch(() => {});
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 0, `the page scrolls sideways by ${overflow}px in a 390px window`);
  await page.screenshot({ path: join(s.out_dir, 'dashboard-daily-narrow.png'), fullPage: true });
}

async function token(page, s) {
  const t = s.token;
  step('open a server that protects reads: the page must ask for a token');
  await page.goto(new URL(`#/counters?q=${encodeURIComponent(t.counter)}`, s.base).href);
  const dialog = page.locator('#token-dialog');
  await dialog.waitFor({ state: 'visible', timeout: TIMEOUT });
  step('cancel: the page says why it shows nothing and offers the prompt again');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await page.waitForFunction(() => document.getElementById('counter-list-status')?.textContent.includes('token'), null, { timeout: TIMEOUT });
  const again = page.locator('#token-button');
  check((await again.textContent()) === 'Enter token', `the header offers "${await again.textContent()}" after a cancel`);
  await again.click();
  await dialog.waitFor({ state: 'visible', timeout: TIMEOUT });
  step('a wrong token is refused with the reason');
  await page.locator('#token-input').fill('wrong-token-123');
  await page.locator('#token-ok').click();
  await page.waitForFunction(() => document.getElementById('token-reason')?.textContent.includes('not valid'), null, { timeout: TIMEOUT })
    .catch(async () => {
      throw new CheckFailed(`a wrong token did not bring the dialog back with a reason (it says "${await page.locator('#token-reason').textContent()}")`);
    });
  await page.screenshot({ path: join(s.out_dir, 'dashboard-token.png') });
  await page.locator('#token-input').fill(t.value);
  await page.locator('#token-ok').click();
  await page.locator(`#counter-list a[data-name="${t.counter}"]`).waitFor({ timeout: TIMEOUT });
  check((await page.evaluate(() => localStorage.getItem('tally.token'))) === t.value, 'the token is not kept in localStorage');
  step('reload: the kept token is used without asking');
  await page.reload();
  await page.locator(`#counter-list a[data-name="${t.counter}"]`).waitFor({ timeout: TIMEOUT });
  check(!(await dialog.isVisible()), 'the dialog asked again although a token was kept');
}

const profile = await mkdtemp(join(tmpdir(), 'tally-e2e-chromium-'));
let context;
let failed = false;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: spec.chromium,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 900 },
    timezoneId: spec.timezone,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !(spec.scenario === 'token' && m.text().includes('401'))) problems.push(`console error: ${m.text()}`);
  });
  page.on('requestfailed', (r) => {
    if (!r.failure()?.errorText.includes('ERR_ABORTED')) problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('request', (r) => {
    if (!r.url().startsWith(new URL(spec.base).origin)) problems.push(`request outside the server: ${r.url()}`);
  });
  if (spec.scenario === 'data') {
    await counters(page, spec);
    await stats(page, spec);
    await timeSeries(page, spec);
    await daily(page, spec);
  } else if (spec.scenario === 'token') {
    await token(page, spec);
  } else {
    throw new CheckFailed(`unknown scenario ${spec.scenario}`);
  }
  check(problems.length === 0, `the page had problems:\n  ${problems.join('\n  ')}`);
  step(`${spec.scenario}: all checks passed; screenshots in ${spec.out_dir}`);
} catch (e) {
  failed = true;
  console.error(`e2e FAILED: ${e instanceof CheckFailed ? e.message : e.stack || e}`);
  if (context) {
    const page = context.pages()[0];
    if (page) await page.screenshot({ path: join(spec.out_dir, `dashboard-failure-${spec.scenario}.png`), fullPage: true }).catch(() => {});
  }
} finally {
  if (context) await context.close().catch(() => {});
  await rm(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
