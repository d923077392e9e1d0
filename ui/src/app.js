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
 * (firstPanelMs: the first panel). Charts also record their axes' tick
 * labels with positions and widths (axes), their legend's box, and the unit
 * their axis is drawn in (axisUnit), for the layout checks of the tests.
 *
 * Readability rules (docs/ui.md): a chart draws its TOP_N largest series and,
 * for additive quantities (the panel's "others": true), one "others" series
 * holding the rest; one unit per axis (one prefix for all its ticks); an
 * empty panel says what is missing and how to enable it (the spec's "needs"
 * and "empty", with what this agent found at /api/v1/status/sources).
 */
'use strict';
(() => {
  const RANGES = [['5m', 300], ['15m', 900], ['1h', 3600], ['6h', 21600], ['24h', 86400], ['7d', 604800]];
  const REFRESHES = [['off', 0], ['5s', 5], ['10s', 10], ['30s', 30], ['1m', 60], ['5m', 300]];
  const MAX_SERIES = 8; // per chart (TOP_N); more get a note, the largest are kept, the rest are "others"
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
  let sources = null; // /api/v1/status/sources: what this agent sees, or null
  let curStep = 15; // the step of the panels being loaded ($__rate_interval)
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
      if (name === '__rate_interval') { // as Grafana: max(step + scrape, 4 x scrape)
        const scrape = Math.max(1, Math.round((cfg.interval_ms || 15000) / 1000));
        return `${Math.max(curStep + scrape, 4 * scrape)}s`;
      }
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

  // The scale an axis is drawn in: one divisor and one unit for all its
  // ticks, picked from the largest; [divisor, unit text].
  function scaleOf(unit, maxAbs) {
    const pick = (list, base) => {
      for (const [f, p] of list) if (maxAbs >= f) return [f, `${p}${base}`];
      return [1, base];
    };
    if (typeof unit === 'string' && unit.startsWith('suffix:')) return [1, unit.slice(7).trim()];
    switch (unit) {
      case 'percentunit': return [0.01, '%'];
      case 'bytes': return pick(IEC, 'B');
      case 'watt': return pick(SI, 'W');
      case 'joule': return pick(SI, 'J');
      case 'hertz': return pick(SI, 'Hz');
      case 'massg': return maxAbs >= 1e6 ? [1e6, 't'] : maxAbs >= 1e3 ? [1e3, 'kg'] : [1, 'g'];
      case 'kwatth': return [1, 'kWh'];
      case 'celsius': return [1, '°C'];
      case 's': return maxAbs >= 86400 ? [86400, 'd'] : maxAbs >= 3600 ? [3600, 'h'] : maxAbs >= 60 ? [60, 'min'] : [1, 's'];
      default: return maxAbs >= 1e4 ? pick(SI, '') : [1, ''];
    }
  }

  // Tick labels of one axis: the same unit on every tick.
  function axisLabels(vals, unit, decimals) {
    const finite = vals.filter((v) => v !== null && Number.isFinite(v));
    const maxAbs = finite.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const [div, text] = scaleOf(unit, maxAbs);
    // Enough decimals to tell the ticks apart, the same on all of them.
    const scaled = finite.map((v) => v / div);
    let step = Infinity;
    for (let i = 1; i < scaled.length; i++) step = Math.min(step, Math.abs(scaled[i] - scaled[i - 1]) || Infinity);
    let d = decimals !== undefined && (!unit || unit === 'short') ? decimals :
      step === Infinity ? 0 : Math.max(0, Math.min(6, Math.ceil(-Math.log10(step) + 1e-9)));
    if (!Number.isFinite(d)) d = 0;
    return vals.map((v) => (v === null || !Number.isFinite(v) ? '' : `${(v / div).toFixed(d)}${text ? (text === '%' ? '' : ' ') + text : ''}`));
  }

  function fmt(v, unit, decimals) {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    if (typeof unit === 'string' && unit.startsWith('suffix:')) {
      return `${decimals !== undefined ? v.toFixed(decimals) : trim(v)} ${unit.slice(7).trim()}`;
    }
    if (decimals !== undefined && (unit === 'short' || !unit)) return v.toFixed(decimals);
    switch (unit) {
      case 'percentunit': return `${trim(v * 100)}%`;
      case 'bytes': return si(v, 'B', IEC);
      case 'watt': return si(v, 'W', SI);
      case 'joule': return si(v, 'J', SI);
      case 'hertz': return si(v, 'Hz', SI);
      case 'massg': return Math.abs(v) >= 1e6 ? `${trim(v / 1e6)} t` : Math.abs(v) >= 1e3 ? `${trim(v / 1e3)} kg` : `${trim(v)} g`;
      case 'kwatth': return `${decimals !== undefined ? v.toFixed(decimals) : trim(v)} kWh`;
      case 's': return duration(v);
      case 'celsius': return `${trim(v)} °C`;
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

  // Why a panel is empty, and how to get its data: the panel's own "empty"
  // text, its "needs" (a shared explanation in the spec), and what this
  // agent found about that source (/api/v1/status/sources).
  function emptyReason(p) {
    const parts = [];
    if (p.empty) parts.push(p.empty);
    const need = p.needs && spec.needs ? spec.needs[p.needs] : null;
    if (need) {
      parts.push(need.text);
      const src = need.source && sources ? sources[need.source] : null;
      if (src && src.state !== 'seen') parts.push(`This agent: ${src.detail}.`);
    }
    if (!parts.length) {
      const names = [...new Set((p.targets || []).flatMap((t) => (t.expr || '').match(/mlwatch_\w+/g) || []))];
      parts.push(`Nothing in this range from ${names.join(', ') || 'its queries'}.`);
    }
    return parts.join(' ');
  }

  function showEmpty(el, p, info) {
    const body = el.querySelector('.body');
    body.textContent = '';
    const d = document.createElement('div');
    d.className = 'empty';
    d.textContent = emptyReason(p);
    body.appendChild(d);
    setResult(el, Object.assign({ state: 'empty', why: d.textContent }, info));
  }

  // Series of a range query, placed on the panel's time grid.
  function grid(values, t0, step, n) {
    const y = new Array(n).fill(null);
    let points = 0;
    for (const [t, v] of values) {
      const i = Math.round((t - t0) / step);
      const f = Number(v);
      if (i >= 0 && i < n && Number.isFinite(f)) {
        y[i] = f;
        points++;
      }
    }
    return [y, points];
  }

  async function loadTimeseries(el, p, t0, t1, step) {
    // The series with the largest values (topk at each step): a page of
    // 1,000 pods moves MAX_SERIES series per chart, not 1,000. With
    // MAX_SERIES or fewer, topk returns them all; with more, how many there
    // are is asked after the chart is drawn (count), so that it never delays
    // the chart. An additive panel ("others") also asks for the rest: the
    // sum of all less the sum of the largest, at each step.
    const results = await Promise.all(p.targets.map((t) =>
      api('query_range', { query: `topk(${MAX_SERIES}, ${substitute(t.expr)})`, start: t0, end: t1, step })));
    let series = [];
    results.forEach((data, i) => {
      for (const r of data.result) {
        series.push({ label: legendOf(p.targets[i].legend, r.metric), values: r.values, dash: p.targets[i].dash });
      }
    });
    const total = series.length;
    if (series.length > MAX_SERIES) {
      const peak = (s) => s.values.reduce((m, [, v]) => Math.max(m, Number(v) || 0), -Infinity);
      series = series.map((s) => [peak(s), s]).sort((a, b) => b[0] - a[0]).slice(0, MAX_SERIES).map((x) => x[1]);
    }
    series.sort((a, b) => collator.compare(a.label, b.label));
    const full = results.filter((d) => d.result.length >= MAX_SERIES);
    if (p.others && full.length) {
      const rest = await Promise.all(p.targets.map((t, i) => (results[i].result.length < MAX_SERIES ? null :
        api('query_range', { query: `sum(${substitute(t.expr)}) - sum(topk(${MAX_SERIES}, ${substitute(t.expr)}))`, start: t0, end: t1, step }))));
      const sum = new Map();
      for (const d of rest) {
        for (const r of d ? d.result : []) {
          for (const [t, v] of r.values) sum.set(t, (sum.get(t) || 0) + Number(v));
        }
      }
      if ([...sum.values()].some((v) => v > 0)) series.push({ label: 'others', values: [...sum.entries()], others: true });
    }
    el.querySelector('.note').textContent = total > MAX_SERIES ? `the ${MAX_SERIES} largest of ${total}${p.others ? ' and the others' : ''}` : '';
    if (full.length) countSeries(el, p, t1, Math.min(total, MAX_SERIES));
    const n = Math.round((t1 - t0) / step) + 1;
    const xs = Array.from({ length: n }, (_, i) => t0 + i * step);
    let points = 0;
    const ys = series.map((s) => {
      const [y, k] = grid(s.values, t0, step, n);
      points += k;
      return y;
    });
    if (!points) return showEmpty(el, p, { series: 0, points: 0 });
    const body = el.querySelector('.body');
    body.textContent = '';
    const width = Math.max(200, Number(el.dataset.width) || body.clientWidth);
    const axisUnit = scaleOf(p.unit, 1)[1];
    const opts = {
      width,
      height: Math.max(140, p.h * 30 - 70),
      // A flat series gets a sensible axis: 0..1 (or 0..its value) instead
      // of uPlot's 0..100, which reads as 10000% for a ratio.
      scales: { x: { time: true }, y: { range: (u, min, max) => (max - min > 1e-12 ?
        window.uPlot.rangeNum(min, max, 0.1, true) : [Math.min(0, min), max > 0 ? max * 1.25 : 1]) } },
      series: [{}].concat(series.map((s, i) => ({
        label: s.label,
        stroke: s.others ? '#868e96' : COLORS[i % COLORS.length],
        dash: s.others || s.dash ? [6, 4] : undefined,
        width: s.dash ? 3 : 1.5,
        points: { show: false },
        value: (u, v) => fmt(v, p.unit, p.decimals),
      }))),
      // Ticks far enough apart for their labels (x: "20:44:30" is ~55 px).
      axes: [{ space: 90 }, { size: 78, space: 28, values: (u, vals) => axisLabels(vals, p.unit, p.decimals) }],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      hooks: { draw: [(u) => recordAxes(el, u)] },
    };
    const chart = new window.uPlot(opts, [xs].concat(ys), body);
    charts.push(chart);
    // last: each drawn series' latest value in the range, for the tests' exact checks.
    setResult(el, { state: 'ok', series: series.length, totalSeries: total, points, axisUnit,
      labels: series.map((x) => x.label), last: ys.map((y) => y.reduce((v, x) => (x === null ? v : x), null)) });
    recordAxes(el, chart);
  }

  // Tick labels of a chart's axes as drawn (text, centre in CSS pixels from
  // the chart's left or top, width, height), for the tests' overlap checks.
  function recordAxes(el, u) {
    const info = ui.panels[el.dataset.panel];
    if (!info || !u.axes) return;
    const ctx = u.ctx;
    const ratio = window.devicePixelRatio || 1;
    info.axes = u.axes.map((a, i) => {
      if (!a._values || !a._splits) return { ticks: [] };
      ctx.save();
      ctx.font = a.font[0];
      const key = i === 0 ? 'x' : 'y';
      const ticks = a._values.map((text, k) => ({
        text: String(text),
        pos: u.valToPos(a._splits[k], key),
        width: Math.max(...String(text).split('\n').map((l) => ctx.measureText(l).width)) / ratio,
        height: a.font[2] || 12,
      })).filter((t) => t.text !== '');
      ctx.restore();
      return { side: i === 0 ? 'x' : 'y', ticks };
    });
  }

  // "the 50 largest of 1000": the count of a chart's series, after it is drawn.
  async function countSeries(el, p, t1, shown) {
    try {
      const counts = await Promise.all(p.targets.map((t) =>
        api('query', { query: `count(${substitute(t.expr)})`, time: t1 })));
      const total = counts.reduce((n, d) => n + (d.result.length ? Number(d.result[0].value[1]) : 0), 0);
      if (total > shown) el.querySelector('.note').textContent = `the ${shown} largest of ${total}${p.others ? ' and the others' : ''}`;
      const info = ui.panels[el.dataset.panel];
      if (info) info.totalSeries = Math.max(total, shown);
    } catch (e) {
      el.querySelector('.note').textContent = `the ${shown} largest`;
    }
  }

  // One value, or one per series with its legend ("12 W estimated").
  async function loadStat(el, p, t1) {
    const t = p.targets[0];
    const data = await api('query', { query: substitute(t.expr), time: t1 });
    const r = data.result;
    const list = data.resultType === 'scalar' ? [{ metric: {}, value: r }] : r;
    const vals = list.map((x) => ({ v: Number(x.value[1]), label: t.legend ? legendOf(t.legend, x.metric) : '' }))
      .filter((x) => !Number.isNaN(x.v));
    if (!vals.length) return showEmpty(el, p, { rows: 0 });
    vals.sort((a, b) => collator.compare(a.label, b.label));
    const body = el.querySelector('.body');
    body.textContent = '';
    for (const x of vals) {
      const d = document.createElement('div');
      d.className = 'value';
      d.textContent = fmt(x.v, p.unit, p.decimals);
      if (x.label) {
        const l = document.createElement('span');
        l.className = 'stat-label';
        l.textContent = x.label;
        d.appendChild(l);
      }
      body.appendChild(d);
    }
    setResult(el, { state: 'ok', value: vals[0].v, values: vals.map((x) => [x.label, x.v]), points: vals.length, series: vals.length });
  }

  // A list of facts (name: value) from instant queries: a target with
  // "label" shows that label of its series (several: joined), else the value
  // in its unit; "source" shows what this agent found (sources.h).
  async function loadFacts(el, p, t1) {
    const rows = await Promise.all(p.targets.map(async (t) => {
      let text = '';
      if (t.expr) {
        const data = await api('query', { query: substitute(t.expr), time: t1 });
        const res = data.resultType === 'scalar' ? [{ metric: {}, value: data.result }] : data.result;
        if (t.label) text = [...new Set(res.map((x) => x.metric[t.label]).filter((x) => x))].sort(collator.compare).join(', ');
        else if (res.length) text = fmt(Number(res[0].value[1]), t.unit, t.decimals);
      }
      const src = t.source && sources ? sources[t.source] : null;
      if (t.source) text = [text, src ? src.detail : 'unknown (this agent does not say: /api/v1/status/sources)'].filter((x) => x).join(' · ');
      return { title: t.title, text: text || t.none || '–', state: src ? src.state : undefined };
    }));
    const body = el.querySelector('.body');
    body.textContent = '';
    const dl = document.createElement('dl');
    dl.className = 'facts';
    const out = {};
    for (const r of rows) {
      const dt = document.createElement('dt');
      dt.textContent = r.title;
      const dd = document.createElement('dd');
      dd.textContent = r.text;
      if (r.state) dd.dataset.state = r.state;
      dl.append(dt, dd);
      out[r.title] = r.text;
    }
    body.appendChild(dl);
    setResult(el, { state: 'ok', facts: out, rows: rows.length, points: rows.length });
  }

  // What this agent sees and cannot see, and why: each line from a source
  // of /api/v1/status/sources and the counts of the panel's targets (by id).
  async function loadSources(el, p, t1) {
    const n = {};
    await Promise.all(p.targets.map(async (t) => {
      const data = await api('query', { query: substitute(t.expr), time: t1 });
      n[t.id] = data.result.map((x) => ({ metric: x.metric, v: Number(x.value[1]) }));
    }));
    const num = (id) => (n[id] && n[id].length ? n[id][0].v : 0);
    const src = (k) => (sources && sources[k]) || null;
    const lines = [];
    const gpu = src('gpu');
    const gpus = num('gpus');
    lines.push({ what: 'GPUs', seen: gpus > 0, text: gpus > 0 ? `${gpus} GPU${gpus === 1 ? '' : 's'}${gpu ? ` (${gpu.detail})` : ''}` :
      `none seen: ${gpu ? gpu.detail : 'no GPU metrics'}. ${spec.needs.gpu.text}` });
    const methods = (n.energy || []).filter((x) => x.v > 0).map((x) => x.metric.method).sort();
    const rapl = src('rapl');
    lines.push({ what: 'Energy', seen: methods.includes('measured'), text: !methods.length ? `no node energy yet. ${spec.needs.energy.text}` :
      methods.includes('estimated') ? `estimated${methods.includes('measured') ? ' in part' : ''}: ${rapl && rapl.state !== 'seen' ? rapl.detail : 'a part of the node has no meter'}` :
        `measured${rapl && rapl.state === 'seen' ? ` (${rapl.detail})` : ''}` });
    const pods = num('pods');
    const kinds = [['systemd services', num('services')], ['Docker containers', num('docker')], ['Slurm jobs', num('slurm')]];
    const others = kinds.map(([k, c]) => `${c} ${k}`).join(', ');
    const cg = src('cgroup');
    lines.push({ what: 'Workloads', seen: pods + kinds.reduce((a, [, c]) => a + c, 0) > 0,
      text: pods ? `${pods} pod${pods === 1 ? '' : 's'}; ${others}` :
        `no pods: showing systemd services, Docker containers and Slurm jobs as workloads (${others})${cg && cg.state !== 'seen' ? `. ${cg.detail}` : ''}` });
    const kube = src('kubernetes');
    if (kube) lines.push({ what: 'Kubernetes', seen: kube.state === 'seen', text: kube.detail });
    if (cg) lines.push({ what: 'cgroups', seen: cg.state === 'seen', text: cg.detail });
    const ci = num('carbon');
    lines.push({ what: 'CO2', seen: (n.carbon || []).length > 0, text: (n.carbon || []).length ? `carbon intensity ${trim(ci)} g/kWh` : spec.needs.carbon.text });
    const procs = num('procs');
    lines.push({ what: 'Processes', seen: procs > 0, text: procs ? `the ${procs} busiest commands by CPU and user (Busiest processes below); workloads are cgroups (pods, services, containers, jobs)` :
      `no process figures: ${spec.needs.processes.text.replace(/^No process figures: /, '')}` });
    if (!sources) lines.push({ what: 'This agent', seen: false, text: 'did not answer /api/v1/status/sources: what it cannot see is not known' });
    const body = el.querySelector('.body');
    body.textContent = '';
    const dl = document.createElement('dl');
    dl.className = 'facts sources';
    const out = {};
    for (const l of lines) {
      const dt = document.createElement('dt');
      dt.textContent = l.what;
      const dd = document.createElement('dd');
      dd.textContent = l.text;
      dd.dataset.state = l.seen ? 'seen' : 'absent';
      dl.append(dt, dd);
      out[l.what] = l.text;
    }
    body.appendChild(dl);
    setResult(el, { state: 'ok', facts: out, rows: lines.length, points: lines.length });
  }

  // A state timeline (clock event reasons): one row per series, a bar where
  // its value is above 0, instead of overlapping 0/1 lines.
  async function loadStateTimeline(el, p, t0, t1, step) {
    const results = await Promise.all(p.targets.map((t) =>
      api('query_range', { query: substitute(t.expr), start: t0, end: t1, step })));
    const n = Math.round((t1 - t0) / step) + 1;
    let rows = [];
    results.forEach((data, i) => {
      for (const r of data.result) rows.push({ label: legendOf(p.targets[i].legend, r.metric), y: grid(r.values, t0, step, n)[0] });
    });
    rows = rows.filter((r) => r.y.some((v) => v !== null));
    if (!rows.length) return showEmpty(el, p, { series: 0, points: 0 });
    rows.sort((a, b) => collator.compare(a.label, b.label));
    const total = rows.length;
    const active = rows.filter((r) => r.y.some((v) => v > 0));
    const shown = (active.length ? active : rows).slice(0, 24);
    const body = el.querySelector('.body');
    body.textContent = '';
    const box = document.createElement('div');
    box.className = 'timeline';
    let points = 0;
    for (const r of shown) {
      const row = document.createElement('div');
      row.className = 'tl-row';
      const name = document.createElement('span');
      name.className = 'tl-label';
      name.textContent = r.label;
      const bar = document.createElement('span');
      bar.className = 'tl-bar';
      for (let i = 0; i < n; i++) {
        if (r.y[i] !== null) points++;
        if (!(r.y[i] > 0) || (i > 0 && r.y[i - 1] > 0)) continue;
        let j = i;
        while (j + 1 < n && r.y[j + 1] > 0) j++;
        const seg = document.createElement('span');
        seg.className = 'tl-on';
        seg.style.left = `${(100 * i) / n}%`;
        seg.style.width = `${(100 * (j - i + 1)) / n}%`;
        seg.title = `${r.label}: ${new Date((t0 + i * step) * 1000).toLocaleTimeString()} – ${new Date((t0 + (j + 1) * step) * 1000).toLocaleTimeString()}`;
        bar.appendChild(seg);
      }
      row.append(name, bar);
      box.appendChild(row);
    }
    const axis = document.createElement('div');
    axis.className = 'tl-axis';
    axis.append(Object.assign(document.createElement('span'), { textContent: new Date(t0 * 1000).toLocaleTimeString() }),
      Object.assign(document.createElement('span'), { textContent: new Date(t1 * 1000).toLocaleTimeString() }));
    box.appendChild(axis);
    body.appendChild(box);
    el.querySelector('.note').textContent = active.length ? `${active.length} of ${total} active in the range` : `none of ${total} active in the range`;
    setResult(el, { state: 'ok', series: shown.length, totalSeries: total, points, labels: shown.map((r) => r.label),
      active: active.map((r) => r.label) });
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
    if (!rows.size) return showEmpty(el, p, { rows: 0 });
    const cols = p.columns.map((c) => ({ title: c.title, get: (row) => row.metric[c.label] || (c.fallback ? row.metric[c.fallback] || '' : '') , label: c.label }));
    let list = [...rows.values()].sort((a, b) => {
      if (p.sort === 'value') { // largest first
        const x = (b.values[0] || 0) - (a.values[0] || 0);
        if (x) return x;
      }
      for (const c of cols) {
        const x = collator.compare(c.get(a), c.get(b));
        if (x) return x;
      }
      return 0;
    });
    const limit = p.limit || MAX_ROWS;
    const linkTo = p.link && spec.pages.some((x) => x.id === p.link) ? p.link : null;
    const table = document.createElement('table');
    const head = table.createTHead().insertRow();
    for (const c of cols) head.appendChild(Object.assign(document.createElement('th'), { textContent: c.title }));
    for (const t of p.targets) head.appendChild(Object.assign(document.createElement('th'), { textContent: t.title }));
    const tb = table.createTBody();
    const out = [];
    for (const row of list) {
      if (out.length >= limit) { // the rest only for tests and scripts
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
        const text = c.get(row);
        // A workload's row leads to what slows it down.
        if (linkTo && c.label === 'workload' && text && !text.startsWith('(')) {
          const a = document.createElement('a');
          a.textContent = text;
          a.href = hashOf(Object.assign({}, state, { page: linkTo, vars: Object.assign({}, state.vars, { workload: row.metric.pod || row.metric.cgroup || text }) }));
          td.appendChild(a);
        } else {
          td.textContent = text;
        }
        td.dataset.col = c.label;
        rec[c.label] = text;
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
    el.querySelector('.note').textContent = list.length > limit ? `the first ${limit} of ${list.length} rows` : '';
    const body = el.querySelector('.body');
    body.textContent = '';
    const wrap = document.createElement('div');
    wrap.className = 'tablewrap';
    wrap.appendChild(table);
    body.appendChild(wrap);
    setResult(el, { state: 'ok', rows: list.length, table: out });
  }

  // ---- the doctor's findings ("Why is it slow?") ----

  const SEVERITY = { critical: 0, warning: 1, info: 2 };

  // The PromQL selector of a finding's workload: a Kubernetes container by
  // its names, anything else by its cgroup (the finding's container).
  function findingSelector(f) {
    const q = (s) => JSON.stringify(String(s));
    const l = [];
    if (f.node) l.push(`node=${q(f.node)}`); // on a hub, the finding's own node
    if (!f.pod && f.container && f.container.startsWith('/')) return l.concat(`cgroup=${q(f.container)}`).join(', ');
    if (f.namespace) l.push(`namespace=${q(f.namespace)}`);
    if (f.pod) l.push(`pod=${q(f.pod)}`);
    if (f.container) l.push(`container=${q(f.container)}`);
    return l.join(', ');
  }

  function findingWorkload(f) {
    return f.pod ? `${f.namespace}/${f.pod}` : f.container || '(the node)';
  }

  // A hub runs no doctor of its own (no /api/v1/findings): the findings are
  // the nodes' mlwatch_finding series it stores, without their evidence
  // numbers and advice, which `mlwatch doctor` on the node gives.
  async function findingsOfSeries(t1) {
    const data = await api('query', { query: substitute('mlwatch_finding{node=~"$node"} == 1'), time: t1 });
    return { findings: data.result.map((x) => Object.assign({}, x.metric, { magnitude: 0, evidence: {},
      summary: `Reported by node ${x.metric.node || '(unnamed)'}.`,
      advice: `\`mlwatch doctor\` on ${x.metric.node || 'the node'} gives the evidence and what to do.` })) };
  }

  // Findings of /api/v1/findings worst first (severity, then magnitude),
  // scoped by the page's namespace and workload (pod name or cgroup prefix),
  // each with its summary, evidence numbers, advice and evidence charts (the
  // spec's "evidence" for its kind: expressions with $sel (the workload),
  // $gpu and $at (the finding's node: a hub holds every node's series)).
  async function loadFindings(el, p, t0, t1, step) {
    const r = await fetch(`../api/v1/findings${p.window ? `?window=${encodeURIComponent(p.window)}` : ''}`);
    let j;
    if (r.status === 404) j = await findingsOfSeries(t1);
    else if (!r.ok) throw new Error(`/api/v1/findings: HTTP ${r.status} (the doctor module answers it)`);
    else j = await r.json();
    const ns = (state.vars.namespace || '').split(',').filter((x) => x);
    const prefix = state.vars.workload || '';
    const list = (j.findings || []).filter((f) => (!ns.length || ns.includes(f.namespace)) &&
      (!prefix || (f.pod || f.container || '').startsWith(prefix)))
      .sort((a, b) => (SEVERITY[a.severity] ?? 3) - (SEVERITY[b.severity] ?? 3) || b.magnitude - a.magnitude ||
        collator.compare(findingWorkload(a), findingWorkload(b)));
    if (!list.length) return showEmpty(el, p, { rows: 0 });
    const body = el.querySelector('.body');
    body.textContent = '';
    el.querySelector('.note').textContent = `${list.length} finding${list.length === 1 ? '' : 's'}${j.window_seconds ? ` over the last ${duration(j.window_seconds)}` : ''}`;
    const charts = [];
    list.forEach((f, i) => {
      const card = document.createElement('article');
      card.className = `finding ${f.severity}`;
      card.dataset.kind = f.kind;
      const h = document.createElement('h3');
      h.textContent = `${f.severity} · ${f.kind.replace(/_/g, ' ')} · ${findingWorkload(f)}${f.gpu ? ` · GPU ${f.gpu}` : ''}`;
      const sum = document.createElement('p');
      sum.textContent = f.summary;
      const ev = document.createElement('p');
      ev.className = 'evidence';
      ev.textContent = Object.entries(f.evidence || {}).map(([k, v]) => `${k.replace(/_/g, ' ')} ${trim(v)}`).join(' · ');
      const adv = document.createElement('p');
      adv.className = 'advice';
      adv.textContent = f.advice;
      const grid2 = document.createElement('div');
      grid2.className = 'evidence-charts';
      card.append(h, sum, ev, adv, grid2);
      body.appendChild(card);
      const sel = findingSelector(f);
      (spec.evidence[f.kind] || []).forEach((e, k) => {
        const sub = { id: `${p.id}-f${i}-${k}`, title: e.title, kind: e.kind || 'timeseries', unit: e.unit, w: 12, h: 6,
          needs: e.needs, empty: e.empty, targets: e.targets.map((t) => Object.assign({}, t,
            { expr: t.expr.replace(/\$sel/g, sel).replace(/\$gpu/g, JSON.stringify(String(f.gpu || '')))
              .replace(/\$at/g, f.node ? `node=${JSON.stringify(f.node)}` : 'node=~".*"') })) };
        const sec = panelEl({ id: state.page }, sub);
        sec.classList.add('sub');
        sec.style.minHeight = '';
        grid2.appendChild(sec);
        charts.push([sec, sub]);
      });
    });
    setResult(el, { state: 'ok', rows: list.length, points: list.length,
      findings: list.map((f) => ({ kind: f.kind, severity: f.severity, workload: findingWorkload(f), gpu: f.gpu })) });
    // Widths once, before any chart is drawn (as loadPanels does).
    for (const [sec] of charts) sec.dataset.width = String(sec.querySelector('.body').clientWidth);
    await Promise.all(charts.map(async ([sec, sub]) => {
      try {
        if (sub.kind === 'statetimeline') await loadStateTimeline(sec, sub, t0, t1, step);
        else await loadTimeseries(sec, sub, t0, t1, step);
      } catch (e) {
        showError(sec, e);
      }
    }));
  }

  async function loadPanels(page, gen) {
    const t1 = Math.floor(Date.now() / 1000);
    const range = rangeSeconds();
    const t0 = t1 - range;
    const step = Math.max(1, Math.ceil(range / POINTS));
    curStep = step;
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
        else if (p.kind === 'statetimeline') await loadStateTimeline(el, p, t0, t1, step);
        else if (p.kind === 'stat') await loadStat(el, p, t1);
        else if (p.kind === 'facts') await loadFacts(el, p, t1);
        else if (p.kind === 'sources') await loadSources(el, p, t1);
        else if (p.kind === 'findings') await loadFindings(el, p, t0, t1, step);
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
    const bad = Object.values(ui.panels).filter((x) => x.state === 'error').length;
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
      // What this agent sees (it describes this agent, also with --query-url).
      const src = fetch('../api/v1/status/sources').then((r) => (r.ok ? r.json() : null))
        .then((j) => (j ? j.data : null), () => null);
      const [c, s] = await Promise.all([fetch('config.json'), fetch('dashboards.json')]);
      if (!c.ok || !s.ok) throw new Error(`config.json: HTTP ${c.status}, dashboards.json: HTTP ${s.status}`);
      cfg = await c.json();
      spec = await s.json();
      sources = await src;
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
