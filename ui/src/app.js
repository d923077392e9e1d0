/* app.js - mlwatch's built-in web UI (docs/ui.md).
 *
 * Reads the dashboards' one source (dashboards.json, the same file that
 * scripts/grafana_dashboards.py turns into deploy/grafana/*.json), runs each
 * panel's PromQL against the API that config.json names (the agent's
 * embedded store, or the agent's proxy to --query-url), and draws time
 * series with uPlot, single values and tables. Everything the page shows is
 * in the URL (#/page?range=..&refresh=..&namespace=..), so links and reloads
 * keep it. Plain modern JavaScript, no framework, no build step.
 *
 * For tests and benchmarks each panel element carries data-state (loading,
 * ok, empty, error), data-series, data-points, data-rows and data-value, and
 * window.mlwatchUI holds the same per panel plus firstPaintMs: the time from
 * navigation to the moment every panel of the first page had its data drawn
 * (firstPanelMs: the first panel).
 */
'use strict';
(() => {
  const RANGES = [['5m', 300], ['15m', 900], ['1h', 3600], ['6h', 21600], ['24h', 86400], ['7d', 604800]];
  const REFRESHES = [['off', 0], ['5s', 5], ['10s', 10], ['30s', 30], ['1m', 60], ['5m', 300]];
  const MAX_SERIES = 20; // per chart; more get a note, the largest are kept
  const MAX_ROWS = 200; // per table drawn; more get a note (all are in mlwatchUI)
  const collator = new Intl.Collator(undefined, { numeric: true });
  const POINTS = 150; // per series and range: enough for a chart's width
  const COLORS = ['#2f6fde', '#e8590c', '#2b8a3e', '#c2255c', '#7048e8', '#0c8599', '#e67700',
    '#5c940d', '#862e9c', '#1971c2', '#d6336c', '#495057'];

  const ui = window.mlwatchUI = { ready: false, firstPanelMs: null, firstPaintMs: null, page: null, panels: {}, loads: 0 };
  let spec = null;
  let cfg = null;
  let state = null;
  let timer = null;
  let generation = 0;
  let charts = [];
  let varOptions = {};
  const $ = (id) => document.getElementById(id);

  // ---- state in the URL ----

  function defaults() {
    return { page: spec.pages[0].id, range: '1h', refresh: '30s', vars: {} };
  }

  function readHash() {
    const s = defaults();
    const h = location.hash.replace(/^#\/?/, '');
    const [page, query] = h.split('?');
    if (spec.pages.some((p) => p.id === page)) s.page = page;
    const q = new URLSearchParams(query || '');
    if (RANGES.some(([r]) => r === q.get('range'))) s.range = q.get('range');
    if (REFRESHES.some(([r]) => r === q.get('refresh'))) s.refresh = q.get('refresh');
    for (const name of Object.keys(spec.variables)) {
      if (q.has(name)) s.vars[name] = q.get(name);
    }
    return s;
  }

  function hashOf(s) {
    const q = new URLSearchParams();
    q.set('range', s.range);
    q.set('refresh', s.refresh);
    for (const [k, v] of Object.entries(s.vars)) if (v) q.set(k, v);
    return `#/${s.page}?${q.toString()}`;
  }

  function navigate(change) {
    const next = Object.assign({}, state, change, { vars: Object.assign({}, state.vars, change.vars || {}) });
    const h = hashOf(next);
    if (h !== location.hash) location.hash = h; // hashchange renders
    else render();
  }

  // ---- PromQL values ----

  // Escape a literal for a regex matcher inside a PromQL double-quoted
  // string: regex metacharacters get a backslash, which the string needs
  // doubled (as Grafana does for multi-value variables).
  function regexLiteral(s) {
    return s.replace(/[\\^$.|?*+()[\]{}]/g, (c) => '\\\\' + c).replace(/"/g, '\\"');
  }

  function varValue(name) {
    const v = spec.variables[name];
    const raw = state.vars[name] || '';
    if (v.type === 'textbox') return regexLiteral(raw);
    const list = raw.split(',').filter((x) => x);
    if (!list.length) return v.all;
    return list.length === 1 ? regexLiteral(list[0]) : `(${list.map(regexLiteral).join('|')})`;
  }

  function rangeSeconds() {
    return RANGES.find(([r]) => r === state.range)[1];
  }

  function substitute(expr) {
    return expr.replace(/\$\{(\w+)(?::\w+)?\}|\$(\w+)/g, (m, a, b) => {
      const name = a || b;
      if (name === '__range') return `${rangeSeconds()}s`;
      if (spec.variables[name]) return varValue(name);
      return m;
    });
  }

  async function api(path, params) {
    const body = new URLSearchParams(params).toString();
    const url = `${cfg.api}/${path}`;
    const opts = body.length > 1800 ?
      { method: 'POST', body, headers: { 'Content-Type': 'application/x-www-form-urlencoded' } } : {};
    const r = await fetch(body.length > 1800 ? url : `${url}?${body}`, opts);
    let j = null;
    try {
      j = await r.json();
    } catch (e) {
      throw new Error(`${path}: HTTP ${r.status} (${r.statusText}), not JSON`);
    }
    if (j.status !== 'success') throw new Error(j.error || `${path}: HTTP ${r.status}`);
    return j.data;
  }

  // ---- formatting by Grafana unit id ----

  function si(v, unit, prefixes) {
    const a = Math.abs(v);
    for (const [f, p] of prefixes) if (a >= f) return `${trim(v / f)} ${p}${unit}`;
    return `${trim(v)} ${unit}`;
  }

  function trim(v) {
    if (!isFinite(v)) return String(v);
    const a = Math.abs(v);
    if (Number.isInteger(v)) return String(v);
    return (a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toPrecision(2));
  }

  const SI = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
  const IEC = [[2 ** 40, 'Ti'], [2 ** 30, 'Gi'], [2 ** 20, 'Mi'], [2 ** 10, 'Ki']];

  function duration(s) {
    s = Math.round(s);
    const d = Math.floor(s / 86400);
    const h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    const parts = [];
    if (d) parts.push(`${d}d`);
    if (h) parts.push(`${h}h`);
    if (m && !d) parts.push(`${m}m`);
    if (!d && !h) parts.push(`${s % 60}s`);
    return parts.join(' ');
  }

  function fmt(v, unit, decimals) {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    if (decimals !== undefined && (unit === 'short' || !unit)) return v.toFixed(decimals);
    switch (unit) {
      case 'percentunit': return `${trim(v * 100)}%`;
      case 'bytes': return si(v, 'B', IEC);
      case 'watt': return si(v, 'W', SI);
      case 'joule': return si(v, 'J', SI);
      case 'hertz': return si(v, 'Hz', SI);
      case 'massg': return Math.abs(v) >= 1e6 ? `${trim(v / 1e6)} t` : Math.abs(v) >= 1e3 ? `${trim(v / 1e3)} kg` : `${trim(v)} g`;
      case 'kwatth': return Math.abs(v) >= 1 ? `${trim(v)} kWh` : `${trim(v * 1000)} Wh`;
      case 's': return duration(v);
      case 'dateTimeAsIso': return new Date(v).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
      default: return Math.abs(v) >= 1e4 ? si(v, '', SI).trim() : trim(v);
    }
  }

  function legendOf(fmtString, metric) {
    if (!fmtString) {
      const l = Object.entries(metric).filter(([k]) => k !== '__name__').map(([k, v]) => `${k}="${v}"`);
      return l.length ? `{${l.join(', ')}}` : 'value';
    }
    return fmtString.replace(/\{\{\s*(\w+)\s*\}\}/g, (m, k) => metric[k] || '');
  }

  // ---- panels ----

  function panelEl(page, p) {
    const el = document.createElement('section');
    el.className = `panel ${p.kind} w${p.w}`;
    el.dataset.panel = `${page.id}-${p.id}`;
    el.dataset.kind = p.kind;
    el.dataset.state = 'loading';
    el.style.minHeight = `${p.h * 30}px`;
    const h = document.createElement('h2');
    h.textContent = p.title;
    const note = document.createElement('span');
    note.className = 'note';
    h.appendChild(note);
    const body = document.createElement('div');
    body.className = 'body';
    el.append(h, body);
    return el;
  }

  function setResult(el, info) {
    const id = el.dataset.panel;
    ui.panels[id] = Object.assign({ title: el.querySelector('h2').firstChild.textContent }, info);
    el.dataset.state = info.state;
    if (info.state === 'ok' && ui.firstPanelMs === null) ui.firstPanelMs = Math.round(performance.now());
    for (const k of ['series', 'points', 'rows', 'value']) {
      if (info[k] !== undefined) el.dataset[k] = String(info[k]);
    }
  }

  function showError(el, err) {
    const body = el.querySelector('.body');
    body.textContent = '';
    const d = document.createElement('div');
    d.className = 'error';
    d.textContent = String(err.message || err);
    body.appendChild(d);
    setResult(el, { state: 'error', error: d.textContent });
  }

  function showEmpty(el, info) {
    const body = el.querySelector('.body');
    body.textContent = '';
    const d = document.createElement('div');
    d.className = 'empty';
    d.textContent = 'No data in this range.';
    body.appendChild(d);
    setResult(el, Object.assign({ state: 'empty' }, info));
  }

  async function loadTimeseries(el, p, t0, t1, step) {
    // The series with the largest values (topk at each step): a page of
    // 1,000 pods moves 20 series per chart, not 1,000. With MAX_SERIES or
    // fewer, topk returns them all; with more, how many there are is asked
    // after the chart is drawn (count), so that it never delays the chart.
    const results = await Promise.all(p.targets.map((t) =>
      api('query_range', { query: `topk(${MAX_SERIES}, ${substitute(t.expr)})`, start: t0, end: t1, step })));
    let series = [];
    results.forEach((data, i) => {
      for (const r of data.result) {
        series.push({ label: legendOf(p.targets[i].legend, r.metric), values: r.values });
      }
    });
    const total = series.length;
    if (series.length > MAX_SERIES) {
      const peak = (s) => s.values.reduce((m, [, v]) => Math.max(m, Number(v) || 0), -Infinity);
      series = series.map((s) => [peak(s), s]).sort((a, b) => b[0] - a[0]).slice(0, MAX_SERIES).map((x) => x[1]);
    }
    series.sort((a, b) => collator.compare(a.label, b.label));
    el.querySelector('.note').textContent = total > series.length ? `the ${series.length} largest of ${total}` : '';
    if (results.some((d) => d.result.length >= MAX_SERIES)) countSeries(el, p, t1, series.length);
    const n = Math.round((t1 - t0) / step) + 1;
    const xs = Array.from({ length: n }, (_, i) => t0 + i * step);
    let points = 0;
    const ys = series.map((s) => {
      const y = new Array(n).fill(null);
      for (const [t, v] of s.values) {
        const i = Math.round((t - t0) / step);
        const f = Number(v);
        if (i >= 0 && i < n && Number.isFinite(f)) {
          y[i] = f;
          points++;
        }
      }
      return y;
    });
    if (!points) return showEmpty(el, { series: 0, points: 0 });
    const body = el.querySelector('.body');
    body.textContent = '';
    const opts = {
      width: Math.max(200, Number(el.dataset.width) || body.clientWidth),
      height: Math.max(140, p.h * 30 - 70),
      // A flat series gets a sensible axis: 0..1 (or 0..its value) instead
      // of uPlot's 0..100, which reads as 10000% for a ratio.
      scales: { x: { time: true }, y: { range: (u, min, max) => (max - min > 1e-12 ?
        window.uPlot.rangeNum(min, max, 0.1, true) : [Math.min(0, min), max > 0 ? max * 1.25 : 1]) } },
      series: [{}].concat(series.map((s, i) => ({
        label: s.label,
        stroke: COLORS[i % COLORS.length],
        width: 1.5,
        points: { show: false },
        value: (u, v) => fmt(v, p.unit, p.decimals),
      }))),
      axes: [{}, { size: 70, values: (u, vals) => vals.map((v) => fmt(v, p.unit, p.decimals)) }],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
    };
    const chart = new window.uPlot(opts, [xs].concat(ys), body);
    charts.push(chart);
    setResult(el, { state: 'ok', series: series.length, totalSeries: total, points, labels: series.map((x) => x.label) });
  }

  // "the 50 largest of 1000": the count of a chart's series, after it is drawn.
  async function countSeries(el, p, t1, shown) {
    try {
      const counts = await Promise.all(p.targets.map((t) =>
        api('query', { query: `count(${substitute(t.expr)})`, time: t1 })));
      const total = counts.reduce((n, d) => n + (d.result.length ? Number(d.result[0].value[1]) : 0), 0);
      if (total > shown) el.querySelector('.note').textContent = `the ${shown} largest of ${total}`;
      const info = ui.panels[el.dataset.panel];
      if (info) info.totalSeries = Math.max(total, shown);
    } catch (e) {
      el.querySelector('.note').textContent = `the ${shown} largest`;
    }
  }

  async function loadStat(el, p, t1) {
    const data = await api('query', { query: substitute(p.targets[0].expr), time: t1 });
    const r = data.result;
    const v = data.resultType === 'scalar' ? Number(r[1]) : r.length ? Number(r[0].value[1]) : null;
    if (v === null || Number.isNaN(v)) return showEmpty(el, { rows: 0 });
    const body = el.querySelector('.body');
    body.textContent = '';
    const d = document.createElement('div');
    d.className = 'value';
    d.textContent = fmt(v, p.unit, p.decimals);
    body.appendChild(d);
    setResult(el, { state: 'ok', value: v, points: 1, series: 1 });
  }

  function labelKey(metric) {
    return Object.keys(metric).filter((k) => k !== '__name__').sort().map((k) => `${k}=${metric[k]}`).join(',');
  }

  async function loadTable(el, p, t1) {
    const results = await Promise.all(p.targets.map((t) =>
      api('query', { query: substitute(t.expr), time: t1 })));
    const rows = new Map(); // label set -> {metric, values[]}
    results.forEach((data, i) => {
      for (const r of data.result) {
        const k = labelKey(r.metric);
        if (!rows.has(k)) rows.set(k, { metric: r.metric, values: [] });
        rows.get(k).values[i] = Number(r.value[1]);
      }
    });
    if (!rows.size) return showEmpty(el, { rows: 0 });
    const cols = p.columns.map((c) => ({ title: c.title, get: (row) => row.metric[c.label] || (c.fallback ? row.metric[c.fallback] || '' : '') , label: c.label }));
    const list = [...rows.values()].sort((a, b) => {
      for (const c of cols) {
        const x = collator.compare(c.get(a), c.get(b));
        if (x) return x;
      }
      return 0;
    });
    const table = document.createElement('table');
    const head = table.createTHead().insertRow();
    for (const c of cols) head.appendChild(Object.assign(document.createElement('th'), { textContent: c.title }));
    for (const t of p.targets) head.appendChild(Object.assign(document.createElement('th'), { textContent: t.title }));
    const tb = table.createTBody();
    const out = [];
    for (const row of list) {
      if (out.length >= MAX_ROWS) { // the rest only for tests and scripts
        const rec = {};
        for (const c of cols) rec[c.label] = c.get(row);
        p.targets.forEach((t, i) => { rec[t.title] = row.values[i] === undefined ? null : row.values[i]; });
        out.push(rec);
        continue;
      }
      const tr = tb.insertRow();
      tr.dataset.row = '';
      const rec = {};
      for (const c of cols) {
        const td = tr.insertCell();
        td.textContent = c.get(row);
        td.dataset.col = c.label;
        rec[c.label] = td.textContent;
      }
      p.targets.forEach((t, i) => {
        const td = tr.insertCell();
        td.className = 'num';
        td.dataset.col = t.title;
        td.dataset.value = String(row.values[i]);
        td.textContent = fmt(row.values[i], t.unit, t.decimals);
        rec[t.title] = row.values[i] === undefined ? null : row.values[i];
      });
      out.push(rec);
    }
    el.querySelector('.note').textContent = list.length > MAX_ROWS ? `the first ${MAX_ROWS} of ${list.length} rows` : '';
    const body = el.querySelector('.body');
    body.textContent = '';
    const wrap = document.createElement('div');
    wrap.className = 'tablewrap';
    wrap.appendChild(table);
    body.appendChild(wrap);
    setResult(el, { state: 'ok', rows: list.length, table: out });
  }

  async function loadPanels(page, gen) {
    const t1 = Math.floor(Date.now() / 1000);
    const range = rangeSeconds();
    const t0 = t1 - range;
    const step = Math.max(1, Math.ceil(range / POINTS));
    for (const c of charts) c.destroy();
    charts = [];
    // Widths once, before any chart: reading them between charts would
    // lay the page out again for each one.
    for (const el of document.querySelectorAll('#grid .panel')) {
      el.dataset.width = String(el.querySelector('.body').clientWidth);
    }
    const jobs = page.panels.map(async (p) => {
      const el = document.querySelector(`[data-panel="${page.id}-${p.id}"]`);
      try {
        if (p.kind === 'timeseries') await loadTimeseries(el, p, t0, t1, step);
        else if (p.kind === 'stat') await loadStat(el, p, t1);
        else await loadTable(el, p, t1);
      } catch (e) {
        if (gen === generation) showError(el, e);
      }
    });
    await Promise.all(jobs);
    if (gen !== generation) return;
    ui.loads++;
    ui.ready = true;
    if (ui.firstPaintMs === null) {
      // After the browser has laid out and painted what was drawn.
      requestAnimationFrame(() => setTimeout(() => {
        if (ui.firstPaintMs === null) ui.firstPaintMs = Math.round(performance.now());
      }, 0));
    }
    const bad = page.panels.filter((p) => ui.panels[`${page.id}-${p.id}`].state === 'error').length;
    const st = $('status');
    st.className = bad ? 'error' : '';
    st.textContent = bad ? `${bad} panel(s) failed: see their messages.` :
      `Updated ${new Date().toLocaleTimeString()} · ${state.range} · step ${step}s`;
  }

  // ---- variables and controls ----

  async function loadVarOptions(page) {
    const t1 = Math.floor(Date.now() / 1000);
    await Promise.all(page.variables.map(async (name) => {
      const v = spec.variables[name];
      if (v.type !== 'query') return;
      try {
        varOptions[name] = await api(`label/${v.label_name}/values`,
          { 'match[]': v.metric, start: t1 - rangeSeconds(), end: t1 });
      } catch (e) {
        varOptions[name] = [];
      }
    }));
  }

  function renderVars(page) {
    const box = $('vars');
    box.textContent = '';
    for (const name of page.variables) {
      const v = spec.variables[name];
      const label = document.createElement('label');
      label.append(`${v.label} `);
      if (v.type === 'textbox') {
        const input = document.createElement('input');
        input.id = `var-${name}`;
        input.value = state.vars[name] || '';
        input.placeholder = 'all';
        input.size = 14;
        input.addEventListener('change', () => navigate({ vars: { [name]: input.value.trim() } }));
        label.appendChild(input);
      } else {
        const opts = varOptions[name] || [];
        const cur = state.vars[name] || '';
        if (!opts.length && !cur) continue; // e.g. no instance label on one machine
        const sel = document.createElement('select');
        sel.id = `var-${name}`;
        sel.appendChild(new Option('All', ''));
        const all = cur && !opts.includes(cur) ? opts.concat([cur]) : opts;
        for (const o of all) sel.appendChild(new Option(o, o));
        sel.value = cur;
        sel.addEventListener('change', () => navigate({ vars: { [name]: sel.value } }));
        label.appendChild(sel);
      }
      box.appendChild(label);
    }
  }

  function renderNav() {
    const nav = $('nav');
    nav.textContent = '';
    for (const p of spec.pages) {
      const a = document.createElement('a');
      a.textContent = p.title;
      a.href = hashOf(Object.assign({}, state, { page: p.id }));
      a.dataset.page = p.id;
      if (p.id === state.page) a.className = 'active';
      nav.appendChild(a);
    }
  }

  function setupControls() {
    const range = $('range');
    for (const [r] of RANGES) range.appendChild(new Option(r, r));
    range.addEventListener('change', () => navigate({ range: range.value }));
    const refresh = $('refresh');
    for (const [r] of REFRESHES) refresh.appendChild(new Option(r, r));
    refresh.addEventListener('change', () => navigate({ refresh: refresh.value }));
    $('reload').addEventListener('click', () => render());
    window.addEventListener('hashchange', () => render());
    let resizeTimer = null;
    window.addEventListener('resize', () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        for (const c of charts) {
          const w = c.root.parentElement.clientWidth;
          if (w > 0) c.setSize({ width: w, height: c.height });
        }
      }, 150);
    });
  }

  async function render() {
    const gen = ++generation;
    state = readHash();
    ui.ready = false;
    ui.page = state.page;
    ui.panels = {};
    const page = spec.pages.find((p) => p.id === state.page);
    document.title = `mlwatch · ${page.title}`;
    $('range').value = state.range;
    $('refresh').value = state.refresh;
    $('description').textContent = page.description;
    renderNav();
    const grid = $('grid');
    for (const c of charts) c.destroy();
    charts = [];
    grid.textContent = '';
    for (const p of page.panels) grid.appendChild(panelEl(page, p));
    // Panels start at once; the variable lists only fill the selects.
    const vars = loadVarOptions(page).then(() => { if (gen === generation) renderVars(page); });
    renderVars(page);
    await loadPanels(page, gen);
    await vars;
    clearInterval(timer);
    const every = REFRESHES.find(([r]) => r === state.refresh)[1];
    if (every) {
      timer = setInterval(() => {
        if (gen === generation && !document.hidden) loadPanels(page, gen);
      }, every * 1000);
    }
  }

  async function start() {
    try {
      const [c, s] = await Promise.all([fetch('config.json'), fetch('dashboards.json')]);
      if (!c.ok || !s.ok) throw new Error(`config.json: HTTP ${c.status}, dashboards.json: HTTP ${s.status}`);
      cfg = await c.json();
      spec = await s.json();
    } catch (e) {
      $('status').className = 'error';
      $('status').textContent = `Cannot load the UI's configuration: ${e.message}`;
      return;
    }
    $('backend').textContent = cfg.backend === 'query-url' ? `mlwatch ${cfg.version} · data from ${cfg.query_url}` :
      cfg.backend === 'store' ? `mlwatch ${cfg.version} · data from the agent's embedded store` :
        `mlwatch ${cfg.version} · no query backend: the store is off and no --query-url was given`;
    if (!window.uPlot) {
      $('status').className = 'error';
      $('status').textContent = 'uPlot did not load (vendor/uPlot.iife.min.js).';
      return;
    }
    setupControls();
    if (!location.hash) history.replaceState(null, '', hashOf(defaults()));
    render();
  }

  start();
})();
