// tracer view: the timeline of a trace's byte series, and the allocator's
// state at a clicked moment. Data comes from the tracer server (/api/...) or,
// in a report file, from the JSON embedded in the page; both answer the same
// four calls (info, columns, moment, stack).
'use strict';

const SERIES = ['allocated', 'reserved', 'active', 'requested'];
const SERIES_COLOR = { allocated: '#3182ce', reserved: '#718096', active: '#ed8936', requested: '#38a169' };
const TRACE_COLOR = ['#2d3748', '#d53f8c', '#00a3c4', '#b7791f', '#805ad5', '#e53e3e', '#2f855a', '#dd6b20'];
const MARK_COLOR = { oom: '#e53e3e', empty_cache: '#805ad5', peak_allocated: '#2b6cb0', peak_reserved: '#4a5568', phase: '#38a169' };

// ---- data sources ----

function serverAPI() {
  const get = (path) => fetch(path).then((r) => {
    if (!r.ok) return r.text().then((t) => { throw new Error(t.trim()); });
    return r.json();
  });
  return {
    report: false,
    info: () => get('api/info'),
    columns: (id, x0, x1, cols) => get(`api/timeline?trace=${id}&x0=${x0}&x1=${x1}&cols=${cols}`),
    moment: (id, ev) => get(`api/moment?trace=${id}&event=${ev}`),
    stack: (id, sid) => get(`api/stack?trace=${id}&stack=${sid}`),
  };
}

// reportAPI answers from the data a report embeds: each trace's timeline
// reduced once at fine resolution (re-reduced here to the visible columns)
// and the moments computed when the report was written.
function reportAPI(d) {
  return {
    report: true,
    info: () => Promise.resolve(d.info),
    columns: (id, x0, x1, cols) => {
      // Zoomed in within a window saved event by event, use it.
      let c = d.timelines[id];
      for (const w of d.details[id]) {
        const n = w.x_start.length;
        if (n && w.x_start[0] <= x0 && w.x_end[n - 1] >= x1 && x1 - x0 < c.x_end[c.x_end.length - 1] / c.x_start.length * cols) c = w;
      }
      return Promise.resolve(reduceColumns(c, x0, x1, cols));
    },
    moment: (id, ev) => {
      let best = null;
      for (const m of d.moments[id]) if (!best || Math.abs(m.event - ev) < Math.abs(best.event - ev)) best = m;
      return Promise.resolve(best);
    },
    stack: (id, sid) => Promise.resolve(d.stacks[id][sid] || { frames: [], site: '' }),
  };
}

function reduceColumns(c, x0, x1, cols) {
  const n = c.x_start.length;
  let lo = 0;
  while (lo + 1 < n && c.x_start[lo + 1] <= x0) lo++;
  let hi = lo;
  while (hi + 1 < n && c.x_start[hi] <= x1) hi++;
  const out = { exact: c.exact, x0, x1, series: c.series, first_event: [], last_event: [], x_start: [], x_end: [],
    min_bytes: SERIES.map(() => []), max_bytes: SERIES.map(() => []), max_event: SERIES.map(() => []) };
  const w = (x1 - x0) / cols;
  let bin = -Infinity;
  for (let i = lo; i <= hi && n > 0; i++) {
    const b = Math.floor((c.x_start[i] - x0) / w);
    if (b !== bin || hi - lo + 1 <= cols) {
      bin = b;
      out.first_event.push(c.first_event[i]); out.last_event.push(c.last_event[i]);
      out.x_start.push(c.x_start[i]); out.x_end.push(c.x_end[i]);
      for (let k = 0; k < SERIES.length; k++) {
        out.min_bytes[k].push(c.min_bytes[k][i]); out.max_bytes[k].push(c.max_bytes[k][i]); out.max_event[k].push(c.max_event[k][i]);
      }
      continue;
    }
    const j = out.x_start.length - 1;
    out.last_event[j] = c.last_event[i]; out.x_end[j] = c.x_end[i];
    for (let k = 0; k < SERIES.length; k++) {
      out.min_bytes[k][j] = Math.min(out.min_bytes[k][j], c.min_bytes[k][i]);
      if (c.max_bytes[k][i] > out.max_bytes[k][j]) { out.max_bytes[k][j] = c.max_bytes[k][i]; out.max_event[k][j] = c.max_event[k][i]; }
    }
  }
  return out;
}

// ---- formatting ----

function fmtBytes(b) {
  const a = Math.abs(b);
  if (a < 1024) return b + ' B';
  if (a < 1 << 20) return (b / 1024).toFixed(1) + ' KiB';
  if (a < 1 << 30) return (b / (1 << 20)).toFixed(1) + ' MiB';
  return (b / (1 << 30)).toFixed(2) + ' GiB';
}

function fmtX(x) {
  if (state.info.axis !== 'time_us') return 'event ' + Math.round(x).toLocaleString('en');
  return fmtDur(x);
}

function fmtDur(us) {
  const a = Math.abs(us);
  if (a < 1000) return Math.round(us) + ' µs';
  if (a < 1e6) return +(us / 1e3).toFixed(2) + ' ms';
  return +(us / 1e6).toFixed(3) + ' s';
}

function fmtSpan(x) { return state.info.axis === 'time_us' ? fmtDur(x) : Math.round(x).toLocaleString('en') + ' events'; }

function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c])); }

// ---- state ----

const embedded = document.getElementById('tracer-data');
const api = embedded ? reportAPI(JSON.parse(embedded.textContent)) : serverAPI();
const state = { info: null, x0: 0, x1: 1, xmax: 1, cols: [], shown: new Set(SERIES), selected: null, momentTrace: 0, seq: 0, sitePath: [] };
const canvas = document.getElementById('timeline');
const tip = document.getElementById('tip');
const PAD = { left: 70, right: 12, top: 22, bottom: 26 };

function plotWidth() { return canvas.clientWidth - PAD.left - PAD.right; }
function px(x) { return PAD.left + (x - state.x0) / (state.x1 - state.x0) * plotWidth(); }
function xAt(p) { return state.x0 + (p - PAD.left) / plotWidth() * (state.x1 - state.x0); }

function init(info) {
  state.info = info;
  state.xmax = Math.max(1, ...info.traces.map((t) => t.x_max));
  state.x0 = 0; state.x1 = state.xmax;
  const legend = document.getElementById('legend');
  legend.innerHTML = info.traces.map((t, i) => `<span class="item" data-trace="${i}"><span class="swatch" style="background:${i ? TRACE_COLOR[i % TRACE_COLOR.length] : 'linear-gradient(90deg,' + SERIES.map((s) => SERIES_COLOR[s]).join(',') + ')'}"></span>${esc(t.name)}: ${esc(t.label)}${t.device ? ' (device ' + t.device + ')' : ''}, peak ${fmtBytes(t.peak_reserved_bytes)} reserved</span>`).join('');
  document.getElementById('series-toggles').innerHTML = SERIES.map((s) => `<label><input type="checkbox" data-series="${s}" checked><span class="swatch" style="background:${SERIES_COLOR[s]}"></span>${s}</label>`).join('');
  document.querySelectorAll('#series-toggles input').forEach((el) => el.addEventListener('change', () => {
    if (el.checked) state.shown.add(el.dataset.series); else state.shown.delete(el.dataset.series);
    draw();
  }));
  const sel = document.getElementById('moment-trace');
  sel.innerHTML = info.traces.map((t, i) => `<option value="${i}">${esc(t.name)}: ${esc(t.label)}</option>`).join('');
  sel.addEventListener('change', () => {
    state.momentTrace = +sel.value;
    renderMarks();
    draw();
    if (state.selected) selectEvent(state.selected.event, true);
  });
  if (info.traces.length < 2) document.getElementById('moment-trace-label').style.display = 'none';
  renderMarks();
  // A link may name a range and a moment: #x0=..&x1=..&t=..&e=..
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.has('x0') && h.has('x1') && +h.get('x1') > +h.get('x0')) { state.x0 = +h.get('x0'); state.x1 = +h.get('x1'); }
  if (h.has('t') && +h.get('t') < info.traces.length) { state.momentTrace = +h.get('t'); sel.value = h.get('t'); }
  if (h.has('e')) selectEvent(+h.get('e'), false);
  load();
}

// renderMarks lists the marks of the trace whose moments are shown.
function renderMarks() {
  const marks = document.getElementById('marks');
  const t = state.info.traces[state.momentTrace];
  // Moments (peaks, OOMs, empty_cache calls) first, then the phases.
  const order = t.marks.map((m, i) => i).sort((i, j) => (t.marks[i].kind === 'phase') - (t.marks[j].kind === 'phase') || i - j);
  marks.innerHTML = order.slice(0, 200).map((i) => { const m = t.marks[i]; return `<button class="${m.kind}" data-i="${i}" title="${esc(m.label)}">${esc(markName(m))}</button>`; }).join('');
  marks.querySelectorAll('button').forEach((b) => b.addEventListener('click', () => selectEvent(t.marks[+b.dataset.i].event, true)));
}

// saveHash keeps the range and the moment in the address, so that a link
// (or a reload) shows the same.
function saveHash() {
  let h = `x0=${Math.round(state.x0)}&x1=${Math.round(state.x1)}`;
  if (state.selected) h += `&t=${state.selected.trace}&e=${state.selected.event}`;
  history.replaceState(null, '', '#' + h);
}

function markName(m) {
  switch (m.kind) {
    case 'oom': return 'OOM at ' + fmtX(m.x);
    case 'empty_cache': return 'empty_cache at ' + fmtX(m.x);
    case 'peak_allocated': return 'allocated peak';
    case 'peak_reserved': return 'reserved peak';
    default: return m.label;
  }
}

// load fetches the visible range's columns of every trace, then draws.
function load() {
  const seq = ++state.seq;
  const cols = Math.max(1, Math.floor(plotWidth()));
  const x0 = Math.floor(state.x0), x1 = Math.ceil(state.x1);
  canvas.dataset.busy = '1'; // until the latest range is drawn
  Promise.all(state.info.traces.map((t) => api.columns(t.id, x0, x1, cols))).then((cs) => {
    if (seq !== state.seq) return; // a newer range was asked for
    state.cols = cs;
    draw();
    canvas.dataset.busy = '0';
  }).catch(showError);
  saveHash();
  document.getElementById('range').textContent = `showing ${fmtX(state.x0)} to ${fmtX(state.x1)} (${fmtSpan(state.x1 - state.x0)})`;
}

function showError(e) {
  document.getElementById('range').textContent = 'error: ' + e.message;
}

// ---- drawing ----

function draw() {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = w * dpr; canvas.height = h * dpr;
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  let ymax = 1;
  state.cols.forEach((c, i) => SERIES.forEach((s, k) => {
    if (i > 0 && !(s === 'reserved' || s === 'allocated')) return;
    if (!state.shown.has(s)) return;
    for (const v of c.max_bytes[k]) ymax = Math.max(ymax, v);
  }));
  ymax *= 1.08;
  const ph = h - PAD.top - PAD.bottom;
  const py = (v) => PAD.top + ph - v / ymax * ph;
  axes(g, w, h, ymax, py);
  g.save();
  g.beginPath(); g.rect(PAD.left, PAD.top - 2, w - PAD.left - PAD.right, ph + 4); g.clip();
  phases(g, ph);
  // Overlays first (traces 1..), the first trace's full envelope on top.
  for (let i = state.cols.length - 1; i >= 0; i--) {
    const c = state.cols[i];
    const names = i === 0 ? ['reserved', 'active', 'requested', 'allocated'] : ['reserved', 'allocated'];
    for (const s of names) {
      if (!state.shown.has(s)) continue;
      const k = SERIES.indexOf(s);
      const color = i === 0 ? SERIES_COLOR[s] : TRACE_COLOR[i % TRACE_COLOR.length];
      envelope(g, c, k, py, color, i === 0, i > 0 && s === 'allocated');
    }
  }
  marks(g, ph);
  if (state.selected) {
    const x = px(state.selected.x);
    g.strokeStyle = '#e53e3e'; g.lineWidth = 1.5; g.setLineDash([]);
    g.beginPath(); g.moveTo(x, PAD.top); g.lineTo(x, PAD.top + ph); g.stroke();
  }
  g.restore();
  canvas.dataset.drawn = String(state.cols.reduce((n, c) => n + c.x_start.length, 0));
}

// envelope draws a series' column maxima as a step line and fills down to
// the minima: a column of many events shows its whole range.
function envelope(g, c, k, py, color, fill, dashed) {
  const n = c.x_start.length;
  if (!n) return;
  const right = (j) => (j + 1 < n ? px(c.x_start[j + 1]) : Math.max(px(c.x_end[j]), px(c.x_start[j]) + 1));
  g.beginPath();
  for (let j = 0; j < n; j++) {
    const x = px(c.x_start[j]), y = py(c.max_bytes[k][j]);
    if (j === 0) g.moveTo(x, y); else g.lineTo(x, y);
    g.lineTo(right(j), y);
  }
  if (fill) {
    for (let j = n - 1; j >= 0; j--) {
      const y = py(c.min_bytes[k][j]);
      g.lineTo(right(j), y); g.lineTo(px(c.x_start[j]), y);
    }
    g.closePath();
    g.globalAlpha = 0.18; g.fillStyle = color; g.fill(); g.globalAlpha = 1;
    g.beginPath();
    for (let j = 0; j < n; j++) {
      const x = px(c.x_start[j]), y = py(c.max_bytes[k][j]);
      if (j === 0) g.moveTo(x, y); else g.lineTo(x, y);
      g.lineTo(right(j), y);
    }
  }
  g.strokeStyle = color; g.lineWidth = 1.3; g.setLineDash(dashed ? [5, 3] : []);
  g.stroke();
  g.setLineDash([]);
}

function axes(g, w, h, ymax, py) {
  g.font = '11px system-ui, sans-serif'; g.fillStyle = '#4a5568'; g.strokeStyle = '#edf2f7'; g.lineWidth = 1;
  const unit = ymax >= 1 << 30 ? [1 << 30, 'GiB'] : ymax >= 1 << 20 ? [1 << 20, 'MiB'] : [1024, 'KiB'];
  const step = niceStep(ymax / unit[0] / 5) * unit[0];
  g.textAlign = 'right'; g.textBaseline = 'middle';
  for (let v = 0; v <= ymax; v += step) {
    const y = py(v);
    g.beginPath(); g.moveTo(PAD.left, y); g.lineTo(w - PAD.right, y); g.stroke();
    g.fillText(+(v / unit[0]).toFixed(2) + ' ' + unit[1], PAD.left - 6, y);
  }
  const span = state.x1 - state.x0;
  const xs = Math.max(niceStep(span / 8), state.info.axis === 'time_us' ? 1 : 1);
  g.textAlign = 'center'; g.textBaseline = 'top';
  for (let x = Math.ceil(state.x0 / xs) * xs; x <= state.x1; x += xs) {
    const p = px(x);
    g.beginPath(); g.moveTo(p, PAD.top); g.lineTo(p, h - PAD.bottom); g.stroke();
    g.fillText(state.info.axis === 'time_us' ? fmtDur(x) : Math.round(x).toLocaleString('en'), p, h - PAD.bottom + 4);
  }
}

function niceStep(x) {
  if (x <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  const m = x / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

function marks(g, ph) {
  const t = state.info.traces[state.momentTrace];
  g.font = '10px system-ui, sans-serif'; g.textAlign = 'left'; g.textBaseline = 'top';
  const rows = []; // where each row of labels ends, so that labels do not overlap
  for (const m of t.marks) {
    if (m.kind === 'phase' || m.x < state.x0 || m.x > state.x1) continue;
    const x = px(m.x);
    g.strokeStyle = MARK_COLOR[m.kind] || '#000';
    g.setLineDash(m.kind.startsWith('peak') ? [3, 3] : []);
    g.lineWidth = m.kind === 'oom' ? 2 : 1;
    g.beginPath(); g.moveTo(x, PAD.top); g.lineTo(x, PAD.top + ph); g.stroke();
    g.fillStyle = g.strokeStyle;
    const label = m.kind === 'oom' ? 'OOM' : m.kind === 'empty_cache' ? 'empty_cache' : m.kind === 'peak_allocated' ? 'alloc peak' : 'reserved peak';
    let row = 0;
    while (row < rows.length && rows[row] > x) row++;
    rows[row] = x + 3 + g.measureText(label).width + 4;
    g.fillText(label, x + 3, PAD.top + 1 + row * 11);
  }
  g.setLineDash([]);
}

// phases draws record_function ranges (marks of kind "phase") as bands.
function phases(g, ph) {
  const t = state.info.traces[state.momentTrace];
  g.font = '10px system-ui, sans-serif'; g.textBaseline = 'top';
  let labelEnd = -Infinity; // a label is drawn only where it fits its band and clears the last one
  for (const m of t.marks) {
    if (m.kind !== 'phase' || m.end_x < state.x0 || m.x > state.x1) continue;
    const a = px(m.x), b = Math.max(px(m.end_x), a + 1);
    g.fillStyle = 'rgba(56,161,105,0.08)'; g.fillRect(a, PAD.top, b - a, ph);
    g.fillStyle = 'rgba(56,161,105,0.35)'; g.fillRect(a, PAD.top, 1, ph);
    const w = g.measureText(m.label).width;
    if (w + 4 <= b - a && a >= labelEnd) {
      g.fillStyle = MARK_COLOR.phase; g.fillText(m.label, a + 2, PAD.top + 2);
      labelEnd = a + w + 6;
    }
  }
}

// ---- interaction ----

function zoom(factor, at) {
  const span = Math.max((state.x1 - state.x0) * factor, 4);
  const f = (at - state.x0) / (state.x1 - state.x0);
  let x0 = at - f * span, x1 = x0 + span;
  const lim = state.xmax * 0.02;
  if (x0 < -lim) { x1 -= x0 + lim; x0 = -lim; }
  if (x1 > state.xmax + lim) { x0 -= x1 - state.xmax - lim; x1 = state.xmax + lim; }
  state.x0 = Math.max(x0, -lim); state.x1 = Math.min(x1, state.xmax + lim);
  load();
}

let drag = null;
canvas.addEventListener('mousedown', (e) => { drag = { x: e.offsetX, x0: state.x0, x1: state.x1, moved: false }; });
window.addEventListener('mouseup', (e) => {
  if (!drag) return;
  const d = drag; drag = null;
  if (!d.moved && e.target === canvas) clickAt(e.offsetX);
});
canvas.addEventListener('mousemove', (e) => {
  if (drag) {
    const dx = e.offsetX - drag.x;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (drag.moved) {
      const shift = dx / plotWidth() * (drag.x1 - drag.x0);
      state.x0 = drag.x0 - shift; state.x1 = drag.x1 - shift;
      load();
    }
  }
  readout(e.offsetX);
});
canvas.addEventListener('mouseleave', () => { document.getElementById('readout').textContent = ''; });
canvas.addEventListener('wheel', (e) => { e.preventDefault(); zoom(e.deltaY < 0 ? 0.8 : 1.25, xAt(e.offsetX)); }, { passive: false });
document.getElementById('zoom-in').addEventListener('click', () => zoom(0.5, (state.x0 + state.x1) / 2));
document.getElementById('zoom-out').addEventListener('click', () => zoom(2, (state.x0 + state.x1) / 2));
document.getElementById('reset').addEventListener('click', () => { state.x0 = 0; state.x1 = state.xmax; load(); });
window.addEventListener('resize', () => load());
// Keys: ← and → step the moment by one event, + and − zoom.
window.addEventListener('keydown', (e) => {
  if (e.target.closest && e.target.closest('select, input')) return;
  const m = state.selected;
  const n = state.info.traces[state.momentTrace].events;
  if (e.key === 'ArrowLeft' && m && m.event > 0) selectEvent(m.event - 1, true);
  else if (e.key === 'ArrowRight' && m && m.event + 1 < n) selectEvent(m.event + 1, true);
  else if (e.key === '+' || e.key === '=') zoom(0.5, m ? m.x : (state.x0 + state.x1) / 2);
  else if (e.key === '-') zoom(2, m ? m.x : (state.x0 + state.x1) / 2);
  else return;
  e.preventDefault();
});

// column returns the index of the column of trace i under pixel p.
function column(i, p) {
  const c = state.cols[i];
  if (!c || !c.x_start.length) return -1;
  const x = xAt(p);
  let j = 0;
  while (j + 1 < c.x_start.length && c.x_start[j + 1] <= x) j++;
  return j;
}

function readout(p) {
  const j = column(0, p);
  const el = document.getElementById('readout');
  if (j < 0) { el.textContent = ''; return; }
  const c = state.cols[0];
  const ev = c.first_event[j] === c.last_event[j] ? 'event ' + c.first_event[j] : `events ${c.first_event[j]}–${c.last_event[j]}`;
  const near = state.info.traces[state.momentTrace].marks.filter((m) => m.kind !== 'phase' && Math.abs(px(m.x) - p) <= 3);
  el.textContent = `${fmtX(xAt(p))} · ${ev} · ` + SERIES.map((s, k) => `${s} ${fmtBytes(c.max_bytes[k][j])}`).join(' · ') +
    near.map((m) => ' · ' + m.label).join('');
}

// clickAt selects the moment under pixel p: of the columns (or events)
// drawn in that pixel, the one where allocated bytes peaked, so that a click
// on a peak gets the peak however far out the view is zoomed.
function clickAt(p) {
  const i = state.momentTrace;
  const c = state.cols[i];
  let j = column(i, p - 0.5);
  if (j < 0) return;
  let best = j;
  const end = xAt(p + 0.5);
  for (; j < c.x_start.length && c.x_start[j] <= end; j++) {
    if (c.max_bytes[0][j] > c.max_bytes[0][best]) best = j;
  }
  selectEvent(c.max_event[0][best], false);
}

function selectEvent(ev, center) {
  api.moment(state.momentTrace, ev).then((m) => {
    state.selected = m;
    if (center && (m.x < state.x0 || m.x > state.x1)) {
      const span = state.x1 - state.x0;
      state.x0 = m.x - span / 2; state.x1 = m.x + span / 2;
      load();
    } else {
      draw();
    }
    showMoment(m);
    saveHash();
  }).catch(showError);
}

// ---- the moment's panels ----

function showMoment(m) {
  const t = state.info.traces[m.trace];
  const lv = m.levels;
  document.getElementById('moment-head').innerHTML =
    `${esc(t.name)} (${esc(t.label)}): after event ${m.event.toLocaleString('en')} (${esc(m.kind)}) at ${esc(fmtX(m.x))}: ` +
    `allocated ${fmtBytes(lv.allocated_bytes)} · reserved ${fmtBytes(lv.reserved_bytes)} · active ${fmtBytes(lv.active_bytes)} · requested ${fmtBytes(lv.requested_bytes)}` +
    (api.report ? ' <span class="note">(the nearest moment this report saved; tracer view serves every one)</span>' : '') +
    t.marks.filter((k) => k.kind !== 'phase' && k.event === m.event).map((k) => `<div class="mark-note ${k.kind}">${esc(k.label)}</div>`).join('');
  segments(m);
  icicle(m);
  largest(m);
}

function segments(m) {
  let alloc = 0, pend = 0, split = 0, free = 0, biggest = 1;
  for (const s of m.segments) {
    alloc += s.allocated_bytes; pend += s.pending_free_bytes; split += s.split_free_bytes; free += s.free_bytes;
    biggest = Math.max(biggest, s.size_bytes);
  }
  document.getElementById('segments-summary').textContent =
    `${m.segments.length} segments: ${fmtBytes(alloc)} allocated, ${fmtBytes(pend)} pending free, ${fmtBytes(split)} free beside live blocks, ${fmtBytes(free)} in empty segments` +
    (m.blocks_omitted ? ` (${m.blocks_omitted} smallest blocks not drawn)` : '') +
    (m.blocks_outside_segments ? `; ${m.blocks_outside_segments} blocks outside any segment` : '');
  const rows = m.segments.slice(0, 1000).map((s) => {
    const w = Math.max(2, 100 * s.size_bytes / biggest);
    const blocks = s.blocks.map((b) => `<div class="b${b.pending ? ' pending' : ''}" data-stack="${b.stack}" data-size="${b.size_bytes}" style="left:${100 * b.offset_bytes / s.size_bytes}%;width:${100 * b.size_bytes / s.size_bytes}%"></div>`).join('');
    return `<div class="segment"><div class="seglabel" title="stream ${s.stream}">${s.addr} ${fmtBytes(s.size_bytes)}${s.expandable ? ' exp' : ''}${s.stream ? ' s' + s.stream : ''}</div>` +
      `<div class="bar${s.blocks.length || s.allocated_bytes + s.pending_free_bytes > 0 ? ' split' : ''}" style="width:${w}%" title="${fmtBytes(s.allocated_bytes)} allocated, ${fmtBytes(s.pending_free_bytes)} pending, ${fmtBytes(s.split_free_bytes + s.free_bytes)} free">${blocks}</div></div>`;
  });
  if (m.segments.length > 1000) rows.push(`<p class="note">${m.segments.length - 1000} more segments</p>`);
  document.getElementById('segments').innerHTML = rows.join('');
}

// icicle draws live memory by site from state.sitePath's node down (a
// click on a node zooms into it; on the top node, back out).
function icicle(m) {
  const el = document.getElementById('icicle');
  let root = m.sites;
  const path = [];
  for (const name of state.sitePath) {
    const k = root.children.find((c) => c.name === name);
    if (!k) break;
    root = k; path.push(name);
  }
  state.sitePath = path;
  document.getElementById('sites-summary').textContent = !m.sites.bytes ? 'nothing allocated at this moment'
    : path.length ? `${fmtBytes(root.bytes)} of ${fmtBytes(m.sites.bytes)} allocated under ${path[path.length - 1]}; click the top frame to go back up`
      : `${fmtBytes(root.bytes)} allocated; outermost frame at the top, width by bytes; click a frame to zoom, hover for it`;
  const out = [];
  let depth = 0;
  const H = 17;
  const walk = (n, d, left, width, p) => {
    if (width < 0.15) return;
    depth = Math.max(depth, d + 1);
    const hue = (n.name.length * 37 + d * 11) % 60 + 10;
    out.push(`<div class="node" style="top:${d * H}px;left:${left}%;width:${width}%;background:hsl(${hue},70%,${78 - d % 3 * 4}%)" data-name="${esc(n.name)}" data-bytes="${n.bytes}" data-path="${esc(JSON.stringify(p))}">${width > 4 ? esc(n.name) + ' ' + fmtBytes(n.bytes) : ''}</div>`);
    let x = left;
    for (const k of n.children) {
      const w = width * k.bytes / n.bytes;
      walk(k, d + 1, x, w, p.concat([k.name]));
      x += w;
    }
  };
  if (root.bytes) walk(root, 0, 0, 100, path);
  el.style.height = depth * H + 'px';
  el.innerHTML = out.join('');
  el.querySelectorAll('.node').forEach((n) => n.addEventListener('click', () => {
    const p = JSON.parse(n.dataset.path);
    state.sitePath = p.length === path.length ? p.slice(0, -1) : p; // the top node: back up one
    icicle(m);
  }));
}

function largest(m) {
  const rows = m.largest.map((b) => `<tr data-stack="${b.stack}" data-trace="${m.trace}"><td class="num">${fmtBytes(b.size_bytes)}</td><td class="num">${fmtBytes(b.requested_bytes)}</td>` +
    `<td>${b.pending ? 'pending free' : 'allocated'}</td><td class="num">${esc(fmtX(b.alloc_x))}</td>` +
    `<td class="num">${b.lifetime_x < 0 ? 'live at the end' : esc(fmtSpan(b.lifetime_x))}</td><td>${esc(b.site)}</td></tr>`);
  document.getElementById('largest').innerHTML =
    '<tr><th>size</th><th>requested</th><th>state</th><th>allocated at</th><th>lifetime</th><th>site (hover for the whole stack)</th></tr>' + rows.join('');
}

// ---- hover: whole stacks ----

const stackCache = new Map();
function stackOf(trace, sid) {
  const key = trace + ':' + sid;
  if (!stackCache.has(key)) {
    const m = state.selected;
    if (m && m.trace === trace && m.stacks[sid]) stackCache.set(key, Promise.resolve({ frames: m.stacks[sid] }));
    else stackCache.set(key, api.stack(trace, sid));
  }
  return stackCache.get(key);
}

function showTip(e, text) {
  tip.textContent = text;
  tip.style.display = 'block';
  tip.style.left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + 'px';
  tip.style.top = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 8) + 'px';
}

document.addEventListener('mouseover', (e) => {
  const el = e.target.closest('[data-stack], .node');
  if (!el) { tip.style.display = 'none'; return; }
  if (el.classList.contains('node')) { showTip(e, `${el.dataset.name}\n${fmtBytes(+el.dataset.bytes)} live`); return; }
  const trace = state.selected ? state.selected.trace : 0;
  const sid = +el.dataset.stack;
  const head = el.dataset.size ? fmtBytes(+el.dataset.size) + (el.classList.contains('pending') ? ' pending free' : ' allocated') + '\n' : '';
  if (sid < 0) { showTip(e, head + (sid === -3 ? '(live before the recording began)' : '(no stack recorded)')); return; }
  stackOf(trace, sid).then((s) => {
    if (el.matches(':hover')) showTip(e, head + (s.frames.length ? s.frames.join('\n') : '(no stack recorded)'));
  });
});

api.info().then(init).catch(showError);
