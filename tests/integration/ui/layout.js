// layout.js - the readability checks of the web UI, run by check.js on
// every page at every width (1400 and 800 px): nothing on a panel is cut off
// or drawn over something else, and each panel's unit agrees with its title
// and its axis.
//   - no legend overflows its panel, and every legend entry is in sight
//     (no legend needs scrolling);
//   - no table needs to scroll sideways (every column on screen);
//   - no axis tick label overlaps its neighbour (positions and widths as
//     the chart drew them: window.mlwatchUI.panels[id].axes);
//   - one unit per panel: every y tick label carries the same unit, from the
//     family of the panel's declared unit, and a unit named in the title, e.g.
//     "(kWh)", is the declared one;
//   - an empty panel says why: no bare "No data in this range.", and a reason
//     of at least a sentence.
// Each check returns a list of problems, "PANEL (TITLE): what".
'use strict';

// The units a formatter may print for each declared unit (docs/ui.md).
const FAMILY = {
  percentunit: /^%$/,
  bytes: /^(B|KiB|MiB|GiB|TiB)$/,
  watt: /^(W|kW|MW|GW|TW)$/,
  joule: /^(J|kJ|MJ|GJ|TJ)$/,
  hertz: /^(Hz|kHz|MHz|GHz|THz)$/,
  massg: /^(g|kg|t)$/,
  kwatth: /^kWh$/,
  celsius: /^°C$/,
  s: /^(s|min|h|d)$/,
  short: /^(|k|M|G|T)$/,
};
// A unit named in a title, "(W)", and the declared unit it stands for.
const TITLE_UNITS = {
  '%': 'percentunit', '°C': 'celsius', bytes: 'bytes', W: 'watt', kWh: 'kwatth', J: 'joule', Hz: 'hertz',
  g: 'massg', s: 's', cores: 'suffix:cores', 'g/h': 'suffix:g/h', 'g/kWh': 'suffix:g/kWh',
  'per second': 'suffix:/s',
};

function family(unit) {
  if (unit && unit.startsWith('suffix:')) {
    const s = unit.slice(7).trim().replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    return new RegExp(`^${s}$`);
  }
  return FAMILY[unit || 'short'];
}

// "12.5 GiB" -> "GiB", "40%" -> "%", "3" -> "".
function unitOf(label) {
  return label.replace(/^[-+\d.,e]+\s?/, '').trim();
}

function unitProblems(spec, pageId, panels) {
  const page = spec.pages.find((p) => p.id === pageId);
  const out = [];
  for (const p of page.panels) {
    const id = `${pageId}-${p.id}`;
    const where = `${id} (${p.title})`;
    const m = p.title.match(/\(([^)]+)\)\s*$/);
    if (m && TITLE_UNITS[m[1]] !== undefined && p.kind !== 'table' && TITLE_UNITS[m[1]] !== p.unit)
      out.push(`${where}: the title names ${m[1]} but the panel's unit is ${p.unit}`);
    const info = panels[id];
    if (!info || info.state !== 'ok') continue;
    if (p.kind === 'timeseries') {
      const y = (info.axes || [])[1];
      if (!y || !y.ticks.length) {
        out.push(`${where}: no y axis ticks recorded`);
        continue;
      }
      const units = [...new Set(y.ticks.map((t) => unitOf(t.text)))];
      if (units.length !== 1) out.push(`${where}: y axis mixes units ${JSON.stringify(y.ticks.map((t) => t.text))}`);
      else if (!family(p.unit).test(units[0]))
        out.push(`${where}: y axis in "${units[0]}" (${y.ticks.map((t) => t.text).join(', ')}) for unit ${p.unit}`);
    }
  }
  return out;
}

function axisProblems(panels) {
  const out = [];
  for (const [id, info] of Object.entries(panels)) {
    for (const a of info.axes || []) {
      const t = [...a.ticks].sort((p, q) => p.pos - q.pos);
      for (let i = 1; i < t.length; i++) {
        const gap = t[i].pos - t[i - 1].pos;
        const need = a.side === 'x' ? (t[i].width + t[i - 1].width) / 2 + 4 : (t[i].height + t[i - 1].height) / 2;
        if (gap < need)
          out.push(`${id} (${info.title}): ${a.side} labels "${t[i - 1].text}" and "${t[i].text}" overlap (${gap.toFixed(1)} px apart, need ${need.toFixed(1)})`);
      }
    }
  }
  return out;
}

// In the page: legends, tables and panels against their boxes.
function domProblems() {
  const out = [];
  for (const el of document.querySelectorAll('#grid section.panel')) {
    const where = `${el.dataset.panel} (${el.querySelector('h2').firstChild.textContent})`;
    const box = el.getBoundingClientRect();
    if (el.scrollWidth > el.clientWidth + 1) out.push(`${where}: content ${el.scrollWidth} px wide in a ${el.clientWidth} px panel`);
    const lg = el.querySelector('.u-legend');
    if (lg) {
      const r = lg.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.bottom > box.bottom + 1)
        out.push(`${where}: legend [${r.left},${r.right}]x[${r.top},${r.bottom}] overflows the panel [${box.left},${box.right}]x[${box.top},${box.bottom}]`);
      // Every entry in sight: a chart has few enough series (the largest
      // and "others") that its legend needs no scrolling.
      if (lg.scrollHeight > lg.clientHeight + 1)
        out.push(`${where}: legend cut off (${lg.scrollHeight} px of entries in ${lg.clientHeight} px)`);
      const st = getComputedStyle(lg);
      for (const tr of lg.querySelectorAll('tr')) {
        const t = tr.getBoundingClientRect();
        if (t.right > r.right + 1 && st.overflowX !== 'auto') out.push(`${where}: legend entry "${tr.textContent}" cut off on the right`);
      }
    }
    for (const w of el.querySelectorAll('.tablewrap')) {
      if (w.scrollWidth > w.clientWidth + 1) {
        const last = w.querySelector('th:last-child');
        out.push(`${where}: table ${w.scrollWidth} px wide in ${w.clientWidth} px ("${last ? last.textContent : ''}" off screen)`);
      }
    }
    const text = el.querySelector('.body').textContent;
    if (/No data in this range/.test(text)) out.push(`${where}: a bare "No data in this range."`);
    if (el.dataset.state === 'empty') {
      const why = el.querySelector('.empty');
      if (!why || why.textContent.length < 40 || !/\.$/.test(why.textContent.trim()))
        out.push(`${where}: empty without saying why: "${why ? why.textContent : ''}"`);
    }
  }
  return out;
}

module.exports = { unitProblems, axisProblems, domProblems, unitOf };
