// ui_first_paint.js - how long the web UI takes to show a page of 1,000 pods
// (docs/benchmarks.md; run by bench/ui_first_paint.sh, not a test).
//   node ui_first_paint.js MLWATCH_BIN [PODS] [RUNS]
// A fake Prometheus API on 127.0.0.1 answers every query the way a real one
// would for PODS pods in 10 namespaces on 125 nodes of 8 GPUs (one series per
// pod and by-clause, one point per step over the hour); the agent runs
// with --query-url pointing at it, so the page goes through the agent's
// proxy as it would to a cluster's Prometheus. Debian's chromium (headless,
// playwright-core) opens each page RUNS times and reports the median of
// window.mlwatchUI.firstPaintMs: navigation start to every panel drawn;
// and, since a wall-clock time on a shared machine says as much about the
// machine's load as about the page, the CPU the same load cost, which load
// changes little: the renderer's main thread until first paint (Chromium's
// Performance.getMetrics TaskDuration, through the DevTools protocol), the
// agent's (its /proc/PID/stat) and the fake upstream's (process.cpuUsage).
// PAGES=overview,workloads,... picks the pages (default: every page).
'use strict';
const http = require('http');
const path = require('path');
const { spawn } = require('child_process');
const pw = require(path.join(__dirname, '../ui/node_modules/playwright-core'));

const [bin, podsArg, runsArg] = process.argv.slice(2);
const PODS = Number(podsArg || 1000);
const RUNS = Number(runsArg || 5);
const NS = 10;

function series(expr) {
  const m = /by \(([^)]*)\)/.exec(expr);
  const by = m ? m[1].split(',').map((s) => s.trim()) : [];
  const out = [];
  if (by.includes('pod')) {
    for (let i = 0; i < PODS; i++) out.push({ namespace: `team-${i % NS}`, pod: `job-${i}-worker` });
  } else if (by.includes('namespace')) {
    for (let i = 0; i < NS; i++) out.push({ namespace: `team-${i}` });
  } else if (/mlwatch_cpu_frequency_hertz/.test(expr)) {
    for (let i = 0; i < 64; i++) out.push({ cpu: String(i), governor: 'performance' });
  } else if (/method/.test(expr)) {
    out.push({ method: 'measured' }, { method: 'estimated' });
  } else if (/mlwatch_gpu_/.test(expr) && !/count\(/.test(expr)) {
    for (let i = 0; i < 8; i++) out.push({ gpu: String(i), reason: 'none' });
  } else {
    out.push({});
  }
  return out;
}

function answer(u, body) {
  const q = new URLSearchParams(u.search);
  if (body) for (const [k, v] of new URLSearchParams(body)) q.append(k, v);
  const p = u.pathname;
  if (p.startsWith('/api/v1/label/')) {
    return { status: 'success', data: Array.from({ length: NS }, (_, i) => `team-${i}`) };
  }
  let expr = q.get('query') || '';
  // The UI asks topk(N, EXPR) over the range and count(EXPR) at its end.
  const topk = /^topk\((\d+), (.*)\)$/s.exec(expr);
  const count = /^count\((.*)\)$/s.exec(expr);
  // ... and the "others" line, sum(EXPR) - sum(topk(N, EXPR)): one series.
  const others = /^sum\(.*\) - sum\(topk\(\d+, .*\)\)$/s.test(expr);
  if (topk) expr = topk[2];
  let labels = others ? [{}] : series(count && !count[1].startsWith('count(') ? count[1] : expr);
  if (count && !count[1].startsWith('count(')) labels = [{ n: labels.length }];
  if (topk) labels = labels.slice(0, Number(topk[1]));
  if (p === '/api/v1/query_range') {
    const start = Number(q.get('start')), end = Number(q.get('end')), step = Number(q.get('step'));
    return { status: 'success', data: { resultType: 'matrix', result: labels.map((metric, k) => {
      const values = [];
      for (let t = start; t <= end; t += step) values.push([t, String(((k * 7 + t) % 100) / 100)]);
      return { metric, values };
    }) } };
  }
  const t = Number(q.get('time')) || Date.now() / 1000;
  return { status: 'success', data: { resultType: 'vector',
    result: labels.map((metric, k) => (metric.n !== undefined ? { metric: {}, value: [t, String(metric.n)] } :
      { metric, value: [t, String(k + 1)] })) } };
}

async function main() {
  const fake = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const s = JSON.stringify(answer(new URL(req.url, 'http://x'), body));
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(s);
    });
  });
  await new Promise((r) => fake.listen(0, '127.0.0.1', r));
  const fport = fake.address().port;
  const probe = http.createServer(); // a free port, released for the agent
  await new Promise((r) => probe.listen(0, '127.0.0.1', r));
  const aport = probe.address().port;
  await new Promise((r) => probe.close(r));
  const dataDir = require('fs').mkdtempSync('/tmp/mlwatch-first-paint-'); // nothing in /var/lib/mlwatch
  const agent = spawn(bin, ['agent', '--listen', `127.0.0.1:${aport}`, '--store=false', '--collectors', 'self',
    '--query-url', `http://127.0.0.1:${fport}`, '--data-dir', dataDir, '--log-level', 'warn'], { stdio: 'inherit' });
  process.on('exit', () => { agent.kill(); require('fs').rmSync(dataDir, { recursive: true, force: true }); });
  const url = `http://127.0.0.1:${aport}`;
  for (let i = 0; i < 100; i++) {
    try {
      await new Promise((ok, ko) => http.get(`${url}/-/ready`, (r) => (r.statusCode === 200 ? ok() : ko())).on('error', ko));
      break;
    } catch (e) {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  if (process.env.HOLD) { // keep the fake upstream and agent up for a profiler
    console.log(url);
    return;
  }
  const load0 = require('fs').readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const browser = await pw.chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const results = {};
  const agentCpu = () => { // ms of CPU the agent used so far (user + system)
    const f = require('fs').readFileSync(`/proc/${agent.pid}/stat`, 'utf8');
    const v = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return ((Number(v[11]) + Number(v[12])) * 1000) / 100; // USER_HZ
  };
  const pages = (process.env.PAGES || 'overview,whyslow,gpu,workloads,cluster,sustainability,node').split(',');
  for (const pageId of pages) {
    const times = [];
    const firsts = [];
    const tasks = [], agentMs = [], fakeMs = [];
    for (let r = 0; r < RUNS; r++) {
      const page = await ctx.newPage();
      const cdp = await ctx.newCDPSession(page);
      await cdp.send('Performance.enable', { timeDomain: 'threadTicks' });
      const a0 = agentCpu(), f0 = process.cpuUsage();
      await page.goto(`${url}/ui/#/${pageId}?range=1h&refresh=off`);
      await page.waitForFunction(() => window.mlwatchUI && window.mlwatchUI.firstPaintMs !== null, null, { timeout: 60000 });
      const m = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((x) => [x.name, x.value]));
      const f1 = process.cpuUsage(f0);
      tasks.push(Math.round(m.TaskDuration * 1000));
      agentMs.push(agentCpu() - a0);
      fakeMs.push(Math.round((f1.user + f1.system) / 1000));
      const st = await page.evaluate(() => ({ ms: window.mlwatchUI.firstPaintMs, first: window.mlwatchUI.firstPanelMs,
        bad: Object.values(window.mlwatchUI.panels).filter((p) => p.state !== 'ok').length,
        queries: performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/')).length,
        kib: Math.round(performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/'))
          .reduce((n, e) => n + e.encodedBodySize, 0) / 1024) }));
      if (st.bad && !process.env.ALLOW_EMPTY) throw new Error(`${pageId}: ${st.bad} panels without data`);
      if (process.env.VERBOSE && r === RUNS - 1) {
        // Where the time goes: each request's start and end (ms since navigation).
        const res = await page.evaluate(() => performance.getEntriesByType('resource').map((e) =>
          `${Math.round(e.startTime)}..${Math.round(e.responseEnd)} ms ${e.encodedBodySize} B ` +
          decodeURIComponent(e.name.replace(/^.*\/ui\//, '')).slice(0, 70)));
        console.log(`${pageId}: first paint ${st.ms} ms\n  ${res.join('\n  ')}`);
      }
      times.push(st.ms);
      firsts.push(st.first);
      results[pageId] = { queries: st.queries, kib: st.kib, empty: st.bad };
      await page.close();
    }
    times.sort((a, b) => a - b);
    results[pageId].median_ms = times[Math.floor(times.length / 2)];
    results[pageId].max_ms = times[times.length - 1];
    firsts.sort((a, b) => a - b);
    results[pageId].first_ms = firsts[Math.floor(firsts.length / 2)];
    const med = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
    results[pageId].task_ms = med(tasks);
    results[pageId].agent_ms = med(agentMs);
    results[pageId].fake_ms = med(fakeMs);
  }
  await browser.close();
  agent.kill();
  fake.close();
  console.log(`pods: ${PODS}, runs per page: ${RUNS}, range 1h`);
  console.log(`load average before ${load0}, after ${require('fs').readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  console.log('page            queries   KiB  first panel  all panels: median    max   main thread  agent CPU  upstream CPU  empty panels');
  for (const [p, r] of Object.entries(results)) {
    console.log(`${p.padEnd(16)}${String(r.queries).padStart(7)} ${String(r.kib).padStart(5)}  ${String(r.first_ms).padStart(8)} ms  ${String(r.median_ms).padStart(15)} ms  ${String(r.max_ms).padStart(5)} ms  ${String(r.task_ms).padStart(8)} ms  ${String(r.agent_ms).padStart(6)} ms  ${String(r.fake_ms).padStart(9)} ms  ${String(r.empty).padStart(6)}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
