// check.js - the cluster view in Debian's chromium (headless, through
// playwright-core) for tests/integration/cluster_view.sh and cluster_three.sh.
//   node check.js URL EXPECT.json [SHOTS]
// EXPECT.json: {"nodes": [...], "views": [VIEW...]}, a VIEW being
//   {"hash": PAGE, "select": NODE?, "panels": {ID: PANEL},
//    "each": {NODE: {ID: PANEL}}?, "complete": true?}.
// For each view: opens the page, checks the node selector lists exactly the
// nodes, picks NODE in it (as a user would: the <select>), waits for the
// panels to be drawn again and checks each listed panel; then, for "each",
// picks each of its nodes in turn and checks its panels. A PANEL is any of
//   {"value": N}               a stat's (first) value, exactly;
//   {"values": [[LABEL, N]]}   every value of a stat with its legend;
//   {"rows": [...]}            a table's rows, exactly (the columns the first
//                              expected row names);
//   {"sortedLabels": [...]}    a chart's series names (unique);
//   {"last": {LABEL: N}}       a chart's series names and each one's latest
//                              value, exactly;
//   {"total": N}               a chart of N series, the 8 largest drawn
//                              (which of equal ones is not stated);
//   {"facts": {TITLE: TEXT}}   lines of a facts panel, exactly;
//   {"findings": [...]}        a findings panel's findings (kind, severity,
//                              workload, gpu), worst first;
//   {"active": [...]}          a state timeline's rows that are on;
//   {"state": "empty"}         nothing to draw (and saying why);
//   {"unknown": WHY}           drawn or empty, with a figure the test cannot
//                              know (WHY says why), but never an error.
// With "complete", every panel of the page must be listed (a panel added to
// the page fails the test until its figures are stated). On every view no
// panel is in error, and with a node picked no panel names another node (a
// chart's legend, a table's node column, a fact). With SHOTS (a folder),
// every view is also held to the readability checks of the UI test
// (tests/integration/ui/layout.js: legends, tables and axis labels fit,
// units agree, an empty panel says why) for all nodes at 1400 and 800 px
// and with each node picked at 1400 px, and screenshotted for all nodes
// (SHOTS/PAGE.png, PAGE-800.png). Exits 1 on the first difference, saying
// what it saw.
'use strict';
const path = require('path');
const fs = require('fs');

const [url, expectFile, shots] = process.argv.slice(2);
const layout = require(path.join(__dirname, '../ui/layout.js'));
const expect = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const pw = require(path.join(__dirname, '../../../ui/node_modules/playwright-core'));
const CHROMIUM = process.env.MLWATCH_CHROMIUM || '/usr/bin/chromium';

function fail(msg) {
  throw new Error(msg);
}

const json = (x) => JSON.stringify(x);

async function settled(page, after) {
  await page.waitForFunction((n) => window.mlwatchUI && window.mlwatchUI.ready &&
    window.mlwatchUI.loads > n, after, { timeout: 20000 });
  return page.evaluate(() => JSON.parse(JSON.stringify(window.mlwatchUI)));
}

// Every panel: never an error; with NODE picked, no other node named.
function checkAll(where, st, node) {
  const others = node ? expect.nodes.filter((n) => n !== node) : [];
  const names = (s) => others.filter((n) => new RegExp(`(^|[^\\w-])${n}($|[^\\w-])`).test(String(s)));
  for (const [id, p] of Object.entries(st.panels)) {
    if (p.state === 'error') fail(`${where}: ${id} (${p.title}): error ${p.error}`);
    if (!node) continue;
    const texts = [].concat(p.labels || [], (p.table || []).map((r) => r.node || ''),
      Object.values(p.facts || {}), (p.values || []).map((v) => v[0]));
    for (const t of texts) {
      if (names(t).length) fail(`${where}: ${id} (${p.title}) names ${names(t)} with ${node} selected: ${json(t)}`);
    }
  }
}

function checkPanel(where, id, p, w) {
  if (!p) fail(`${where}: ${id}: missing`);
  if (w.unknown !== undefined) {
    if (p.state !== 'ok' && p.state !== 'empty') fail(`${where}: ${id} (${p.title}): ${p.state}`);
    return;
  }
  if (w.state !== undefined) {
    if (p.state !== w.state) fail(`${where}: ${id} (${p.title}): ${p.state}, expected ${w.state}: ${json(p).slice(0, 400)}`);
    return;
  }
  if (p.state !== 'ok') fail(`${where}: ${id}: ${p.state} ${p.error || p.why || ''}`);
  if (w.value !== undefined && p.value !== w.value)
    fail(`${where}: ${id} (${p.title}): ${p.value}, expected ${w.value}`);
  if (w.values !== undefined && json(p.values) !== json(w.values))
    fail(`${where}: ${id} (${p.title}): ${json(p.values)}, expected ${json(w.values)}`);
  if (w.rows !== undefined) {
    const keys = Object.keys(w.rows[0] || {});
    const got = p.table.map((r) => Object.fromEntries(keys.map((k) => [k, r[k]])));
    if (json(got) !== json(w.rows))
      fail(`${where}: ${id} (${p.title}): rows ${json(got)}, expected ${json(w.rows)}`);
  }
  if (w.sortedLabels !== undefined || w.last !== undefined) {
    const got = [...p.labels].sort();
    const want = [...(w.sortedLabels || Object.keys(w.last))].sort();
    if (new Set(got).size !== got.length) fail(`${where}: ${id}: legends collide: ${json(got)}`);
    if (json(got) !== json(want)) fail(`${where}: ${id} (${p.title}): legends ${json(got)}, expected ${json(want)}`);
  }
  if (w.last !== undefined) {
    const got = Object.fromEntries(p.labels.map((l, i) => [l, p.last[i]]));
    for (const [l, v] of Object.entries(w.last)) {
      if (got[l] !== v) fail(`${where}: ${id} (${p.title}): ${l} is ${got[l]}, expected ${v}: ${json(got)}`);
    }
  }
  if (w.total !== undefined && (p.totalSeries !== w.total || p.series !== Math.min(w.total, 8) ||
      new Set(p.labels).size !== p.labels.length))
    fail(`${where}: ${id} (${p.title}): ${p.series} of ${p.totalSeries} series drawn (${json(p.labels)}), expected the 8 largest of ${w.total}`);
  if (w.findings !== undefined && json(p.findings) !== json(w.findings))
    fail(`${where}: ${id} (${p.title}): findings ${json(p.findings)}, expected ${json(w.findings)}`);
  if (w.active !== undefined && json([...p.active].sort()) !== json([...w.active].sort()))
    fail(`${where}: ${id} (${p.title}): active ${json(p.active)}, expected ${json(w.active)}`);
  if (w.facts !== undefined) {
    for (const [k, v] of Object.entries(w.facts)) {
      if (p.facts[k] !== v) fail(`${where}: ${id} (${p.title}): ${k}: ${json(p.facts[k])}, expected ${json(v)}`);
    }
  }
}

function checkPanels(where, st, panels, complete) {
  if (complete) {
    const missing = Object.keys(st.panels).filter((id) => !(id in panels));
    if (missing.length) fail(`${where}: panels the test states nothing about: ${missing.map((id) => `${id} (${st.panels[id].title})`).join(', ')}`);
  }
  for (const [id, w] of Object.entries(panels)) checkPanel(where, id, st.panels[id], w);
  return Object.keys(panels).length;
}

// The readability checks of layout.js on the page as drawn.
async function checkLayout(page, spec, where, hash, st) {
  const problems = layout.unitProblems(spec, hash, st.panels)
    .concat(layout.axisProblems(st.panels), await page.evaluate(layout.domProblems));
  if (problems.length) fail(`${where}:\n  ${problems.join('\n  ')}`);
}

async function pick(page, st, where, node) {
  await page.selectOption('#var-node', node);
  const next = await settled(page, st.loads);
  if (!page.url().includes(`node=${node}`)) fail(`${where}: the URL lacks the node: ${page.url()}`);
  return next;
}

async function main() {
  const browser = await pw.chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  let checks = 0;
  let spec = null;
  if (shots) {
    fs.mkdirSync(shots, { recursive: true });
    spec = await (await page.request.get(`${url}/ui/dashboards.json`)).json();
  }
  for (const view of expect.views) {
    const where = `${view.hash}${view.select ? ` (node ${view.select})` : ''}`;
    await page.goto('about:blank');
    await page.goto(`${url}/ui/#/${view.hash}?range=5m&refresh=off`);
    let st = await settled(page, 0);
    await page.waitForSelector('#var-node', { timeout: 10000 });
    const opts = await page.$$eval('#var-node option', (os) => os.map((o) => o.value));
    if (json(opts) !== json([''].concat(expect.nodes))) fail(`${where}: node selector offers ${json(opts)}`);
    if (view.select) st = await pick(page, st, where, view.select);
    checkAll(where, st, view.select);
    checks += checkPanels(where, st, view.panels, view.complete);
    if (shots) {
      await checkLayout(page, spec, `${where} at 1400 px`, view.hash, st);
      await page.screenshot({ path: path.join(shots, `${view.hash}.png`), fullPage: true });
      await page.setViewportSize({ width: 800, height: 1000 });
      await page.reload(); // the same hash: a reload draws it at this width
      const narrow = await settled(page, 0);
      checks += checkPanels(`${where} at 800 px`, narrow, view.panels, view.complete);
      await checkLayout(page, spec, `${where} at 800 px`, view.hash, narrow);
      await page.screenshot({ path: path.join(shots, `${view.hash}-800.png`), fullPage: true });
      await page.setViewportSize({ width: 1400, height: 1000 });
      await page.reload();
      st = await settled(page, 0);
    }
    for (const [node, panels] of Object.entries(view.each || {})) {
      const at = `${view.hash} (node ${node})`;
      st = await pick(page, st, at, node);
      checkAll(at, st, node);
      checks += checkPanels(at, st, panels, view.complete);
      if (shots) await checkLayout(page, spec, `${at} at 1400 px`, view.hash, st);
    }
  }
  if (problems.length) fail(`the browser reported: ${problems.join('; ')}`);
  await browser.close();
  console.log(`cluster check of ${url}: ${checks} panels as expected`);
}

main().catch((e) => {
  console.error(`FAIL: ${e.message}`);
  process.exit(1);
});
