// check.js - drives Debian's chromium (headless, through playwright-core)
// over the agent's web UI for tests/integration/ui.sh.
//   node check.js URL SCREENSHOT_DIR EXPECT.json
// Opens every page of the UI, waits until each panel has drawn its data,
// checks each chart has series and points, each stat its exact value and
// each table its exact rows (EXPECT.json, written by ui.sh from what the
// fixtures and the fake NVML make known), then that the URL keeps the
// state across a reload, and that the page broke no CSP rule. Every page is
// also drawn at 1400 and 800 px and held to layout.js's readability checks
// (legends, tables, axis labels, units, empty panels that say why);
// screenshots SCREENSHOT_DIR/PAGE.png (1400 px) and PAGE-800.png.
// EXPECT.json per page: count, panels {ID: {series, minSeries, labels,
// labelsInclude, rowCount, rows, rowsAnyOrder (the same rows, in any order),
// firstRow (the first row's given columns), rowSet {COLUMN: [values in any order]},
// positive, value, values, facts, why}},
// empty [IDs that must be empty] (with "why" matching a regex), mayBeEmpty
// [IDs]; "only_pages": true skips the checks of the gpu-node fixture.
// Prints one line per check; exits 1 on the first failure with what it saw.
'use strict';
const path = require('path');
const fs = require('fs');

const [url, shots, expectFile] = process.argv.slice(2);
const expect = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const layout = require('./layout.js');
let pw;
try {
  pw = require(path.join(__dirname, '../../../ui/node_modules/playwright-core'));
} catch (e) {
  console.error('FAIL: playwright-core is missing: run `npm ci` in ui/ (scripts/install-deps.sh test)');
  process.exit(1);
}
const CHROMIUM = process.env.MLWATCH_CHROMIUM || '/usr/bin/chromium';
if (!fs.existsSync(CHROMIUM)) {
  console.error(`FAIL: ${CHROMIUM} is missing: apt-get install chromium (scripts/install-deps.sh test)`);
  process.exit(1);
}

let checks = 0;
function fail(msg) {
  throw new Error(msg);
}
function ok(msg) {
  checks++;
  if (process.env.VERBOSE) console.log(`ok ${msg}`);
}

async function waitReady(page, loads) {
  await page.waitForFunction((n) => window.mlwatchUI && window.mlwatchUI.ready &&
    window.mlwatchUI.loads >= n, loads, { timeout: 15000 });
  return page.evaluate(() => JSON.parse(JSON.stringify(window.mlwatchUI)));
}

async function main() {
  const browser = await pw.chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await ctx.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // A reload aborts what is in flight (ERR_ABORTED): not a failure.
  page.on('requestfailed', (r) => {
    if (r.failure().errorText !== 'net::ERR_ABORTED') problems.push(`request failed: ${r.url()} ${r.failure().errorText}`);
  });

  const spec = await (await page.request.get(`${url}/ui/dashboards.json`)).json();
  for (const [pageId, want] of Object.entries(expect.pages)) {
   for (const width of [1400, 800]) {
    await page.setViewportSize({ width, height: 1000 });
    await page.goto(`${url}/ui/#/${pageId}?range=5m&refresh=off`);
    await page.reload(); // the same hash: a reload draws it at this width
    const st = await waitReady(page, 1);
    if (st.page !== pageId) fail(`${pageId}: the UI shows ${st.page}`);
    const mustBeEmpty = want.empty || [];
    const mayBeEmpty = want.mayBeEmpty || [];
    for (const [id, p] of Object.entries(st.panels)) {
      const w = (want.panels || {})[id] || {};
      if (mustBeEmpty.includes(id)) {
        if (p.state !== 'empty') fail(`${id} (${p.title}): state ${p.state}, expected empty`);
        if (w.why && !new RegExp(w.why).test(p.why)) fail(`${id} (${p.title}): empty because "${p.why}", expected /${w.why}/`);
        ok(`${id}: empty: ${p.why}`);
        continue;
      }
      if (p.state === 'empty' && mayBeEmpty.includes(id)) continue;
      // A finding's evidence chart (PAGE-N-fI-J): empty only with its reason (layout.js).
      if (/-f\d+-\d+$/.test(id) && p.state === 'empty' && !w.series) continue;
      if (p.state !== 'ok') fail(`${id} (${p.title}): state ${p.state} ${p.error || p.why || ''}`);
      if (p.points < 1) fail(`${id} (${p.title}): no data points`);
      if (w.series !== undefined && p.series !== w.series)
        fail(`${id} (${p.title}): ${p.series} series, expected ${w.series}`);
      if (w.minSeries !== undefined && p.series < w.minSeries)
        fail(`${id} (${p.title}): ${p.series} series, expected at least ${w.minSeries}`);
      if (w.labels !== undefined && JSON.stringify(p.labels) !== JSON.stringify(w.labels))
        fail(`${id} (${p.title}): series ${JSON.stringify(p.labels)}, expected ${JSON.stringify(w.labels)}`);
      for (const l of w.labelsInclude || []) {
        if (!p.labels.includes(l)) fail(`${id} (${p.title}): no series ${l} in ${JSON.stringify(p.labels)}`);
      }
      for (const [col, want] of Object.entries(w.rowSet || {})) {
        const got = p.table.map((r) => r[col]).sort();
        if (JSON.stringify(got) !== JSON.stringify([...want].sort()))
          fail(`${id} (${p.title}): ${col} ${JSON.stringify(got)}, expected ${JSON.stringify([...want].sort())}`);
      }
      if (w.rowCount !== undefined && p.rows !== w.rowCount)
        fail(`${id} (${p.title}): ${p.rows} rows, expected ${w.rowCount}: ${JSON.stringify(p.table)}`);
      if (w.value !== undefined && p.value !== w.value)
        fail(`${id} (${p.title}): value ${p.value}, expected ${w.value}`);
      if (w.values !== undefined && JSON.stringify(p.values.map(([l]) => l)) !== JSON.stringify(w.values))
        fail(`${id} (${p.title}): values ${JSON.stringify(p.values)}, expected labels ${JSON.stringify(w.values)}`);
      if (w.findings !== undefined) { // each regex matches one of them; worst first
        const rank = { critical: 0, warning: 1, info: 2 };
        const got = p.findings.map((f) => `${f.severity} ${f.kind} ${f.workload}`);
        if (!w.findings.every((re) => got.some((f) => new RegExp(re).test(f))))
          fail(`${id} (${p.title}): findings ${JSON.stringify(got)}, expected them to include ${JSON.stringify(w.findings)}`);
        for (let i = 1; i < p.findings.length; i++) {
          if (rank[p.findings[i].severity] < rank[p.findings[i - 1].severity]) fail(`${id} (${p.title}): not worst first: ${JSON.stringify(got)}`);
        }
      }
      // evidence: {KIND: N}: each finding of KIND has its first N evidence
      // charts (PAGE-N-fI-J) drawn with data, and at least one such finding.
      for (const [kind, n] of Object.entries(w.evidence || {})) {
        const idx = (p.findings || []).map((f, i) => (f.kind === kind ? i : -1)).filter((i) => i >= 0);
        if (!idx.length) fail(`${id} (${p.title}): no ${kind} finding for its evidence charts`);
        for (const i of idx) {
          for (let k = 0; k < n; k++) {
            const sub = st.panels[`${id}-f${i}-${k}`];
            if (!sub || sub.state !== 'ok' || !(sub.points > 0))
              fail(`${id} (${p.title}): ${kind} finding ${i}: evidence chart ${k} ${sub ? `${sub.title}: ${sub.state} ${sub.why || sub.error || ''}` : 'missing'}`);
          }
        }
        ok(`${id}: ${idx.length} ${kind} finding(s) with ${n} evidence chart(s) each`);
      }
      for (const [k, re] of Object.entries(w.facts || {})) {
        if (!p.facts || !new RegExp(re).test(p.facts[k] || ''))
          fail(`${id} (${p.title}): ${k} is "${p.facts ? p.facts[k] : ''}", expected /${re}/`);
      }
      if (w.rowsAnyOrder !== undefined) {
        const pick = (r) => JSON.stringify(Object.fromEntries(Object.keys(w.rowsAnyOrder[0]).map((k) => [k, r[k]])));
        const got = p.table.map(pick).sort(), want = w.rowsAnyOrder.map(pick).sort();
        if (JSON.stringify(got) !== JSON.stringify(want))
          fail(`${id} (${p.title}): rows ${JSON.stringify(got)}, expected in any order ${JSON.stringify(want)}`);
      }
      for (const [k, v] of Object.entries(w.firstRow || {}))
        if (!p.table.length || p.table[0][k] !== v)
          fail(`${id} (${p.title}): first row ${JSON.stringify(p.table[0])}, expected ${k} ${JSON.stringify(v)}`);
      if (w.rows !== undefined) {
        const got = p.table.map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => k in w.rows[0])));
        if (JSON.stringify(got) !== JSON.stringify(w.rows))
          fail(`${id} (${p.title}): rows ${JSON.stringify(got)}, expected ${JSON.stringify(w.rows)}`);
        for (const r of p.table) {
          for (const [col, min] of Object.entries(w.positive || {})) {
            if (!(r[col] > min)) fail(`${id} (${p.title}): ${col} = ${r[col]} in ${JSON.stringify(r)}`);
          }
        }
      }
      ok(`${id}: ${p.state}, ${p.series || 0} series, ${p.points || 0} points, ${p.rows || 0} rows`);
    }
    const n = Object.keys(st.panels).filter((id) => /^[a-z]+-\d+$/.test(id)).length;
    if (n !== want.count) fail(`${pageId}: ${n} panels, expected ${want.count}`);
    // Every chart is really drawn: a uPlot canvas per timeseries panel with data.
    const canvases = await page.locator('section.panel.timeseries canvas').count();
    const series = await page.locator('section.panel.timeseries[data-state="ok"]').count();
    if (canvases !== series) fail(`${pageId}: ${canvases} canvases for ${series} charts`);
    const problems = layout.unitProblems(spec, pageId, st.panels)
      .concat(layout.axisProblems(st.panels), await page.evaluate(layout.domProblems));
    await page.screenshot({ path: path.join(shots, width === 1400 ? `${pageId}.png` : `${pageId}-${width}.png`), fullPage: true });
    if (problems.length) fail(`${pageId} at ${width} px:\n  ${problems.join('\n  ')}`);
    ok(`${pageId} at ${width} px: ${n} panels, layout and units`);
   }
  }
  if (expect.only_pages) {
    if (problems.length) fail(`the browser reported: ${problems.join('; ')}`);
    await browser.close();
    console.log(`ui check: ${checks} checks passed`);
    return;
  }
  await page.setViewportSize({ width: 1400, height: 1000 });

  // State in the URL: a namespace and a range survive a reload, and scope
  // the panels.
  await page.goto(`${url}/ui/#/workloads?range=15m&refresh=off&namespace=shared&workload=notebook-`);
  await waitReady(page, 1);
  await page.reload();
  const st = await waitReady(page, 1);
  const sel = await page.evaluate(() => [document.getElementById('range').value,
    document.getElementById('var-namespace').value, document.getElementById('var-workload').value]);
  if (sel.join('|') !== '15m|shared|notebook-') fail(`after reload: range, namespace, workload = ${sel}`);
  const mem = st.panels['workloads-2'];
  if (mem.series !== expect.scoped_gpu_memory_series)
    fail(`scoped GPU memory: ${mem.series} series, expected ${expect.scoped_gpu_memory_series}`);
  ok('state kept across a reload');
  // Changing the range through the picker lands in the URL.
  await page.selectOption('#range', '1h');
  await page.waitForFunction(() => location.hash.includes('range=1h'));
  if (!page.url().includes('namespace=shared')) fail(`picker lost the namespace: ${page.url()}`);
  ok('picker writes the URL');
  // The navigation keeps the scope.
  await page.click('nav a[data-page="sustainability"]');
  await page.waitForFunction(() => location.hash.startsWith('#/sustainability') && window.mlwatchUI.ready);
  if (!page.url().includes('namespace=shared') || !page.url().includes('range=1h'))
    fail(`navigation lost the state: ${page.url()}`);
  ok('navigation keeps the state');

  // Auto-refresh queries again on its own.
  await page.goto(`${url}/ui/#/cluster?range=5m&refresh=5s`);
  await page.reload();
  await waitReady(page, 2);
  ok('auto-refresh');

  if (problems.length) fail(`the browser reported: ${problems.join('; ')}`);
  await browser.close();
  console.log(`ui check: ${checks} checks passed`);
}

main().catch((e) => {
  console.error(`FAIL: ${e.message}`);
  process.exit(1);
});
