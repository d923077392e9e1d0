// check.js - the cluster view in Debian's chromium (headless, through
// playwright-core) for tests/integration/cluster_view.sh.
//   node check.js URL EXPECT.json
// EXPECT.json: {"nodes": [...], "views": [{"hash": PAGE, "select": NODE?,
// "panels": {ID: {"value": N} | {"rows": [...]} | {"sortedLabels": [...]}}}]}.
// For each view: opens the page, checks the node selector lists exactly the
// nodes, picks NODE in it (as a user would: the <select>), waits for the
// panels to be drawn again and checks each listed panel: a stat's exact
// value, a table's exact rows (the columns the expectation names), a
// chart's series names, which must also be unique. Exits 1 on the first
// difference, saying what it saw.
'use strict';
const path = require('path');
const fs = require('fs');

const [url, expectFile] = process.argv.slice(2);
const expect = JSON.parse(fs.readFileSync(expectFile, 'utf8'));
const pw = require(path.join(__dirname, '../../../ui/node_modules/playwright-core'));
const CHROMIUM = process.env.MLWATCH_CHROMIUM || '/usr/bin/chromium';

function fail(msg) {
  throw new Error(msg);
}

async function settled(page, after) {
  await page.waitForFunction((n) => window.mlwatchUI && window.mlwatchUI.ready &&
    window.mlwatchUI.loads > n, after, { timeout: 20000 });
  return page.evaluate(() => JSON.parse(JSON.stringify(window.mlwatchUI)));
}

async function main() {
  const browser = await pw.chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  let checks = 0;
  for (const view of expect.views) {
    const where = `${view.hash}${view.select ? ` (node ${view.select})` : ''}`;
    await page.goto('about:blank');
    await page.goto(`${url}/ui/#/${view.hash}?range=5m&refresh=off`);
    let st = await settled(page, 0);
    await page.waitForSelector('#var-node', { timeout: 10000 });
    const opts = await page.$$eval('#var-node option', (os) => os.map((o) => o.value));
    if (JSON.stringify(opts) !== JSON.stringify([''].concat(expect.nodes)))
      fail(`${where}: node selector offers ${JSON.stringify(opts)}`);
    if (view.select) {
      await page.selectOption('#var-node', view.select);
      st = await settled(page, st.loads);
      if (!page.url().includes(`node=${view.select}`)) fail(`${where}: the URL lacks the node: ${page.url()}`);
    }
    for (const [id, w] of Object.entries(view.panels)) {
      const p = st.panels[id];
      if (!p || p.state !== 'ok') fail(`${where}: ${id}: ${p ? `${p.state} ${p.error || ''}` : 'missing'}`);
      if (w.value !== undefined && p.value !== w.value)
        fail(`${where}: ${id} (${p.title}): ${p.value}, expected ${w.value}`);
      if (w.rows !== undefined) {
        const got = p.table.map((r) => Object.fromEntries(Object.keys(w.rows[0]).map((k) => [k, r[k]])));
        if (JSON.stringify(got) !== JSON.stringify(w.rows))
          fail(`${where}: ${id} (${p.title}): rows ${JSON.stringify(got)}, expected ${JSON.stringify(w.rows)}`);
      }
      if (w.sortedLabels !== undefined) {
        const got = [...p.labels].sort();
        if (new Set(got).size !== got.length) fail(`${where}: ${id}: legends collide: ${JSON.stringify(got)}`);
        if (JSON.stringify(got) !== JSON.stringify([...w.sortedLabels].sort()))
          fail(`${where}: ${id}: legends ${JSON.stringify(got)}, expected ${JSON.stringify(w.sortedLabels)}`);
      }
      checks++;
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
