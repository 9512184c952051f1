// console.js - octd's operator console (issue 16).  Plain JS, no build step.
// One WebSocket to octweb: JSON text (hello, values, health, reply) and
// binary images (u32 LE header length, JSON header, u8 pixels).  Each view
// keeps only the newest image, paints it on the next animation frame and
// then acknowledges it, so octweb sends the next one: no backlog anywhere.
'use strict';

const $ = (id) => document.getElementById(id);
const O = window.octweb = {          // state, also read by tests and the benchmark
  role: null, schema: null, values: {}, gen: 0, health: null,
  paints: 0, stats: [],              // {topic, lat_ms (publish -> painted), params_gen, seq}
  lastHeader: {}, replies: [], connected: false,
};
let ws = null, reqId = 0, retryMs = 250;
const waiting = new Map();           // request id -> {keys, done}

// ---------- colour maps ----------
function viridisRGB(t) {             // polynomial fit of matplotlib's viridis
  const c = [[0.2777273272234177, 0.005407344544966578, 0.3340998053353061],
    [0.1050930431085774, 1.404613529898575, 1.384590162594685],
    [-0.3308618287255563, 0.214847559468213, 0.09509516302823659],
    [-4.634230498983486, -5.799100973351585, -19.33244095627987],
    [6.228269936347081, 14.17993336680509, 56.69055260068105],
    [4.776384997670288, -13.74514537774601, -65.35303263337234],
    [-5.435455855934631, 4.645852612178535, 26.3124352495832]];
  return [0, 1, 2].map((k) => {
    let v = c[6][k];
    for (let i = 5; i >= 0; i--) v = c[i][k] + t * v;
    return Math.max(0, Math.min(255, Math.round(v * 255)));
  });
}
const LUTS = { gray: new Uint32Array(256), viridis: new Uint32Array(256) };
for (let i = 0; i < 256; i++) {
  const [r, g, b] = viridisRGB(i / 255);
  LUTS.gray[i] = 0xff000000 | (i << 16) | (i << 8) | i;           // little-endian RGBA
  LUTS.viridis[i] = 0xff000000 | (b << 16) | (g << 8) | r;
}
let lut = LUTS.gray;
$('cmap').onchange = (e) => { lut = LUTS[e.target.value]; for (const p of panels) p.repaint(); };

// ---------- views ----------
const KIND_CLASS = { bscan: 'bscan', xsec_h: 'bscan', xsec_v: 'bscan', enface: 'enface',
  slab_mean: 'enface', slab_max: 'enface', confocal: 'confocal' };
const PANELS = [
  { title: 'B-scan', kinds: ['bscan'] },
  { title: 'En-face', kinds: ['enface'], click: true },
  { title: 'Confocal', kinds: ['confocal'], click: true },
  { title: 'Cross-section (line)', kinds: ['xsec_h'] },
  { title: 'Cross-section (A-scan column)', kinds: ['xsec_v'] },
  { title: 'Slab', kinds: ['slab_mean', 'slab_max'], click: true },
];
// En-face angiograms (slab_max/ssada, slab_mean/decor, ...: the metric in
// place of the method) have one row per position of R repeated lines, not
// per line: no cross-section lines to click on or draw there.
const ANGIO_METRICS = ['struct', 'median', 'sv', 'decor', 'ssada'];
const perGroup = (topic) => ANGIO_METRICS.includes((topic || '').split('/')[1]);
let selected = 0;                     // the panel of the histogram

// Physical pixel size [rows, cols] in µm from the header's spacing_um
// [depth, ascan, line]; null when octd's profile does not give it.
function pixelUm(kind, sp) {
  if (!sp || sp.length !== 3) return null;
  if (kind === 'xsec_v') return [sp[0], sp[2]];
  if (kind === 'bscan' || kind === 'xsec_h') return [sp[0], sp[1]];
  return [sp[2], sp[1]];               // en-face, confocal, slabs: [line, ascan]
}

class Panel {
  constructor(slot, def) {
    this.slot = slot; this.def = def; this.topic = ''; this.q = 0; this.img = null; this.fresh = false;
    const el = this.el = document.createElement('div');
    el.className = 'view' + (def.click ? ' clickable' : '');
    el.dataset.slot = slot;
    el.innerHTML = `<div class="bar"><b>${def.title}</b><select class="topic"></select>
      <select class="q" hidden title="en-face depth (q)"></select><span class="info"></span></div>
      <div class="stage"><canvas class="img"></canvas><canvas class="overlay"></canvas></div>`;
    this.sel = el.querySelector('.topic'); this.qsel = el.querySelector('.q');
    this.info = el.querySelector('.info'); this.stage = el.querySelector('.stage');
    this.canvas = el.querySelector('canvas.img'); this.overlay = el.querySelector('canvas.overlay');
    this.off = document.createElement('canvas');
    this.sel.onchange = () => { this.topic = this.sel.value; this.subscribe(); };
    this.qsel.onchange = () => { this.q = +this.qsel.value; this.subscribe(); };
    el.onclick = () => { selected = slot; for (const p of panels) p.el.classList.toggle('selected', p === this); drawHistogram(); };
    this.canvas.onclick = (ev) => this.click(ev);
    el.hidden = true;
    $('views').appendChild(el);
  }
  setTopics(all) {
    const mine = all.filter((t) => this.def.kinds.includes(t.topic.split('/')[0]));
    const names = mine.map((t) => t.topic);
    if (names.join() !== this._names) {
      this._names = names.join();
      this.sel.innerHTML = names.map((n) => `<option>${esc(n)}</option>`).join("");
      if (!names.includes(this.topic)) this.topic = names[0] || '';
      this.sel.value = this.topic;
      this.el.hidden = !names.length;
      this.subscribe();
    }
    const t = mine.find((x) => x.topic === this.topic);
    const Q = t && t.ndim === 3 ? t.shape[0] : 0;
    if (Q !== this._q) {
      this._q = Q; this.qsel.hidden = !Q; this._labelled = '';
      this.qsel.innerHTML = Array.from({ length: Q }, (_, i) => `<option value="${i}">q=${i}</option>`).join('');
      if (this.q >= Q) this.q = 0;
      this.qsel.value = this.q;
    }
  }
  subscribe() {
    const r = window.devicePixelRatio || 1;
    const w = Math.round(this.stage.clientWidth * r), h = Math.round(this.stage.clientHeight * r);
    send(['view', this.slot, this.topic, w, h, this.q].join('\t'));
  }
  receive(hdr, px) { this.img = { hdr, px, t_arrive: performance.timeOrigin + performance.now() }; this.fresh = true; }
  paint() {                             // on an animation frame: the newest image only
    if (!this.fresh) return false;
    this.fresh = false;
    this.repaint();
    const now = performance.timeOrigin + performance.now();
    const h = this.img.hdr;
    O.paints++;
    O.lastHeader[this.slot] = h;
    // publish -> painted, and its parts: octd -> octweb (ZeroMQ), waiting in
    // octweb (for the previous image's acknowledgement), octweb -> page, page -> painted
    O.stats.push({ topic: h.topic, lat_ms: now - h.h.t_pub_ns / 1e6, params_gen: h.h.params_gen, seq: h.seq, t: now,
      zmq_ms: (h.t_recv_ns - h.h.t_pub_ns) / 1e6, queue_ms: (h.t_send_ns - h.t_recv_ns) / 1e6,
      net_ms: this.img.t_arrive - h.t_send_ns / 1e6, paint_ms: now - this.img.t_arrive });
    if (O.stats.length > 4000) O.stats.splice(0, 1000);
    send('ack\t' + this.slot);
    if (this.slot === selected) drawHistogram();
    return true;
  }
  repaint() {
    if (!this.img) return;
    const { hdr, px } = this.img, rows = hdr.rows, cols = hdr.cols;
    if (this.off.width !== cols || this.off.height !== rows) { this.off.width = cols; this.off.height = rows; }
    const octx = this.off.getContext('2d');
    const id = octx.createImageData(cols, rows);
    const out = new Uint32Array(id.data.buffer);
    for (let i = 0; i < px.length; i++) out[i] = lut[px[i]];
    octx.putImageData(id, 0, 0);
    // aspect-correct box: original pixel counts times their physical size
    const kind = hdr.h.kind, um = pixelUm(kind, hdr.h.spacing_um);
    const orows = rows * hdr.fy, ocols = cols * hdr.fx;
    const physW = ocols * (um ? um[1] : 1), physH = orows * (um ? um[0] : 1);
    const W = this.stage.clientWidth, H = this.stage.clientHeight;
    const s = Math.min(W / physW, H / physH);
    const dw = Math.max(1, Math.round(physW * s)), dh = Math.max(1, Math.round(physH * s));
    const r = window.devicePixelRatio || 1;
    for (const c of [this.canvas, this.overlay]) {
      if (c.width !== Math.round(dw * r) || c.height !== Math.round(dh * r)) {
        c.width = Math.round(dw * r); c.height = Math.round(dh * r);
        c.style.width = dw + 'px'; c.style.height = dh + 'px';
      }
      c.style.left = Math.round((W - dw) / 2) + 'px';
    }
    const ctx = this.canvas.getContext('2d');
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(this.off, 0, 0, this.canvas.width, this.canvas.height);
    this.geom = { orows, ocols, dw, dh, um };
    this.drawOverlay();
    const ind = hdr.h.indices || [];
    if (this._q && ind.length === this._q && this.qsel.options.length === ind.length && this._labelled !== ind.join()) {
      [...this.qsel.options].forEach((o, i) => { o.textContent = `q=${i} (depth ${ind[i]})`; });
      this._labelled = ind.join();   // the depths change with enface.start/step
    }
    const idx = hdr.h.indices && hdr.h.indices.length ? ` d=${hdr.h.indices[hdr.q] ?? hdr.h.indices[0]}` : '';
    this.info.textContent = `${hdr.h.shape.join('×')}${idx} gen ${hdr.h.params_gen} #${hdr.h.image_seq}` +
      (hdr.fy > 1 || hdr.fx > 1 ? ` (÷${hdr.fy}×${hdr.fx})` : '') + (hdr.h.mode === 'review' ? ' review' : '');
  }
  drawOverlay() {
    const g = this.geom, c = this.overlay, ctx = c.getContext('2d'), r = window.devicePixelRatio || 1;
    ctx.clearRect(0, 0, c.width, c.height);
    ctx.save(); ctx.scale(r, r);
    if (this.def.click && !perGroup(this.topic)) { // the cross-section lines: xsec.h_index (line), xsec.v_index (A-scan)
      const hi = +O.values['xsec.h_index'], vi = +O.values['xsec.v_index'];
      ctx.strokeStyle = 'rgba(255,80,80,.85)'; ctx.lineWidth = 1;
      if (hi >= 0 && hi < g.orows) { const y = (hi + 0.5) * g.dh / g.orows; ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(g.dw, y); ctx.stroke(); }
      ctx.strokeStyle = 'rgba(80,200,255,.85)';
      if (vi >= 0 && vi < g.ocols) { const x = (vi + 0.5) * g.dw / g.ocols; ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, g.dh); ctx.stroke(); }
    }
    if (g.um) {                        // scale bar: 1-2-5 steps, about a quarter of the width
      const umPerPx = g.ocols * g.um[1] / g.dw, target = g.dw / 4 * umPerPx;
      const p = Math.pow(10, Math.floor(Math.log10(target)));
      const len = [5, 2, 1].map((m) => m * p).find((v) => v <= target) || p;
      const wpx = len / umPerPx, y = g.dh - 10;
      ctx.fillStyle = '#fff'; ctx.fillRect(10, y, wpx, 3);
      ctx.font = '11px system-ui'; ctx.fillText(len >= 1000 ? `${len / 1000} mm` : `${len} µm`, 10, y - 4);
    }
    ctx.restore();
  }
  click(ev) {
    if (!this.def.click || !this.geom || O.role !== 'operator' || perGroup(this.topic)) return;
    const rect = this.canvas.getBoundingClientRect(), g = this.geom;
    const row = Math.floor((ev.clientY - rect.top) / rect.height * g.orows);
    const col = Math.floor((ev.clientX - rect.left) / rect.width * g.ocols);
    if (row < 0 || col < 0 || row >= g.orows || col >= g.ocols) return;
    setValues({ 'xsec.h_index': row, 'xsec.v_index': col });
  }
}
const panels = PANELS.map((d, i) => new Panel(i, d));
O.image = (slot) => panels[slot] && panels[slot].img;   // the newest painted image of a view
panels[0].el.classList.add('selected');
new ResizeObserver(() => { for (const p of panels) if (p.topic) { p.subscribe(); p.repaint(); } }).observe($('views'));

function paintLoop() {
  for (const p of panels) p.paint();
  requestAnimationFrame(paintLoop);
}
requestAnimationFrame(paintLoop);

// ---------- histogram and one-click contrast ----------
function histogramOf(px) {
  const h = new Uint32Array(256);
  for (let i = 0; i < px.length; i++) h[px[i]]++;
  return h;
}
function percentile(h, n, p) {
  let acc = 0;
  const want = p * n;
  for (let i = 0; i < 256; i++) { acc += h[i]; if (acc >= want) return i; }
  return 255;
}
function drawHistogram() {
  const p = panels[selected], c = $('hist'), ctx = c.getContext('2d');
  ctx.clearRect(0, 0, c.width, c.height);
  if (!p || !p.img) return;
  $('hist-topic').textContent = p.img.hdr.topic;
  const h = histogramOf(p.img.px);
  const max = Math.log1p(Math.max(...h));
  ctx.fillStyle = '#8fb3d9';
  for (let i = 0; i < 256; i++) {
    const v = Math.log1p(h[i]) / max * c.height;
    ctx.fillRect(i * c.width / 256, c.height - v, Math.ceil(c.width / 256), v);
  }
}
// gray = b + c*T(gsc*I): mapping the 1st..99th percentiles [lo, hi] onto
// [0, 255] is gray' = (gray - lo)*k, k = 255/(hi - lo): brightness' = (b - lo)*k
// and, in linear scale, gsc' = gsc*k (in log scale T shifts, so contrast' = c*k).
function autoContrast() {
  const p = panels[selected];
  if (!p || !p.img) return;
  const cls = KIND_CLASS[p.img.hdr.h.kind] || 'bscan';
  const h = histogramOf(p.img.px), n = p.img.px.length;
  const lo = percentile(h, n, 0.01), hi = Math.max(percentile(h, n, 0.99), lo + 1);
  const k = 255 / (hi - lo), v = O.values, pre = `display.${cls}.`;
  const b = +v[pre + 'brightness'], out = {};
  out[pre + 'brightness'] = +((b - lo) * k).toPrecision(6);
  if (v.scale === 'log') out[pre + 'contrast'] = +(+v[pre + 'contrast'] * k).toPrecision(6);
  else out[pre + 'gsc'] = +(+v[pre + 'gsc'] * k).toPrecision(6);
  setValues(out, (ok, msg) => { $('hist-result').textContent = ok ? `set ${Object.keys(out).join(', ')}` : msg; $('hist-result').className = 'msg' + (ok ? ' ok' : ''); });
}
$('auto-contrast').onclick = autoContrast;

// ---------- controls from the option schema ----------
const controls = {};                  // key -> {get(), set(text), msg}
// A bound that depends on the geometry (the schema's min_rule/max_rule:
// "lines-1", "samples/2", "-samples/2+1", "depths (clamped)"), evaluated
// with octd's current geometry; null when unknown.
function ruleBound(rule) {
  const g = O.health && O.health.octd ? O.health.geometry : null;   // [L, N, M]
  const m = /^\s*(-?)(lines|ascans|samples|depths)(\/2)?([+-]\d+)?/.exec(rule || '');
  if (!g || !m) return null;
  let v = { lines: g[0], ascans: g[1], samples: g[2], depths: Math.floor(g[2] / 2) + 1 }[m[2]];
  if (m[3]) v = Math.floor(v / 2);
  if (m[1]) v = -v;
  return v + (m[4] ? parseInt(m[4], 10) : 0);
}
function esc(s) { return String(s ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c])); }
function buildControls(schema) {
  const box = $('controls');
  box.innerHTML = '';
  for (const o of schema.options || []) {
    if (!o.key) continue;
    const d = document.createElement('div');
    d.className = 'ctl'; d.dataset.key = o.key;
    const unit = o.unit ? `<span class="unit">${esc(o.unit)}</span>` : '';
    let w;
    const num = o.kind === 'int' || o.kind === 'float';
    // a slider where the range is known and small enough to be useful
    const lo = ruleBound(o.min_rule) ?? o.min, hi = ruleBound(o.max_rule) ?? o.max;
    const ranged = num && Number.isFinite(lo) && Number.isFinite(hi) && hi > lo &&
      (o.kind === 'int' ? hi - lo <= 1e5 : hi - lo <= 1e3);
    if (ranged) {
      const step = o.kind === 'int' ? 1 : (hi - lo) / 1000;
      w = `<input type="range" min="${lo}" max="${hi}" step="${step}"><output></output>`;
    } else if (num) w = `<input type="number" step="${o.kind === 'int' ? 1 : 'any'}">`;
    else if (o.kind === 'enum') w = `<select>${(o.values || []).map((x) => `<option>${esc(x)}</option>`).join('')}</select>`;
    else if (o.kind === 'set') w = (o.values || []).map((x) => `<label class="chk"><input type="checkbox" value="${esc(x)}">${esc(x)}</label>`).join(' ');
    else if (o.kind === 'pair') w = `<span class="pair"><input type="number" step="any"><input type="number" step="any"></span>`;
    else if (o.kind === 'bool') w = `<input type="checkbox">`;
    else w = `<input type="text" spellcheck="false">`;
    d.innerHTML = `<label title="${esc(o.help)}"><span class="key">${esc(o.key)}</span><span>${w}${unit}</span></label>` +
      (o.help ? `<div class="help">${esc(o.help)}</div>` : '') + '<span class="msg"></span>';
    const inputs = [...d.querySelectorAll('input, select')], msg = d.querySelector('.msg');
    const outEl = d.querySelector('output');
    const ctl = controls[o.key] = {
      msg, busy: false,
      get() {
        if (o.kind === 'set') return inputs.filter((i) => i.checked).map((i) => i.value).join(',');
        if (o.kind === 'pair') return inputs.map((i) => i.value).join(',');
        if (o.kind === 'bool') return inputs[0].checked ? 'true' : 'false';
        return inputs[0].value;
      },
      set(text) {
        if (o.kind === 'set') { const s = String(text).split(','); inputs.forEach((i) => { i.checked = s.includes(i.value); }); }
        else if (o.kind === 'pair') { const s = String(text).split(','); inputs.forEach((i, k) => { i.value = (s[k] ?? '').trim(); }); }
        else if (o.kind === 'bool') inputs[0].checked = /^(true|1|on|yes)$/i.test(text);
        else if (o.kind === 'enum') inputs[0].value = String(text).split(':')[0];  // "tukey:0.5"
        else inputs[0].value = text;
        if (outEl) outEl.textContent = text;
      },
    };
    const commit = () => {
      ctl.busy = true;
      msg.textContent = ''; msg.className = 'msg';
      setValues({ [o.key]: ctl.get() }, (ok, m) => {
        ctl.busy = false;
        if (!ok) { msg.textContent = m; }
        ctl.set(O.values[o.key] ?? ctl.get());   // back to the applied value
      });
    };
    for (const i of inputs) {
      i.addEventListener('change', commit);
      if (outEl) i.addEventListener('input', () => { outEl.textContent = i.value; });
    }
    box.appendChild(d);
  }
  applyRole();
  showValues();
}
function applyRole() {
  const ro = O.role !== 'operator';
  document.querySelectorAll('#controls input, #controls select, .modes button, #auto-contrast').forEach((e) => { e.disabled = ro; });
}
function showValues() {
  for (const [k, c] of Object.entries(controls)) {
    const el = document.activeElement;
    if (c.busy || (el && el.closest && el.closest(`.ctl[data-key="${k}"]`) && el.type !== 'range')) continue;
    if (k in O.values) c.set(O.values[k]);
  }
  for (const p of panels) if (p.geom) p.drawOverlay();
}

// ---------- requests ----------
function send(text) { if (ws && ws.readyState === 1) ws.send(text); }
function setValues(kv, done) {
  const id = ++reqId;
  waiting.set(id, { keys: Object.keys(kv), done });
  send(['set', id, ...Object.entries(kv).map(([k, v]) => `${k}=${v}`)].join('\t'));
  return id;
}
function command(name, args, done) {
  const id = ++reqId;
  waiting.set(id, { keys: [], done, cmd: name });
  send(['cmd', id, name, ...(args || [])].join('\t'));
}
O.setValues = setValues;
O.command = command;
document.querySelectorAll('.modes button').forEach((b) => {
  b.onclick = () => {
    const args = b.dataset.cmd === 'record' ? ['raw', 'products'] : [];
    $('cmd-result').textContent = `${b.dataset.cmd}…`; $('cmd-result').className = '';
    command(b.dataset.cmd, args, (ok, m) => { $('cmd-result').textContent = `${b.dataset.cmd}: ${m}`; $('cmd-result').className = ok ? 'msg ok' : 'msg'; });
  };
});

// ---------- health ----------
const spark = [];
let builtFor = '';
function showHealth(h) {
  O.health = h;
  const geo = h.octd ? h.geometry.join('x') : '';
  if (O.schema && geo && geo !== builtFor) { builtFor = geo; buildControls(O.schema); }  // ranges follow the geometry
  const st = $('state');
  st.textContent = h.octd ? h.state : 'octd not running';
  st.className = 'badge ' + (h.octd && (h.state === 'online' || h.state === 'review') ? 'ok' : 'bad');
  const rows = [];
  const row = (k, v, bad) => rows.push(`<tr><td>${k}</td><td${bad ? ' class="msg"' : ''}>${esc(v)}</td></tr>`);
  if (h.octd) {
    row('backend', `${h.backend} ${h.device}`);
    row('geometry', `L ${h.geometry[0]} × N ${h.geometry[1]} × M ${h.geometry[2]}`);
    row('frame rate', `${h.fps.toFixed(1)} /s`);
    row('latency', `p50 ${(h.lat_p50_us / 1000).toFixed(1)} ms, p99 ${(h.lat_p99_us / 1000).toFixed(1)} ms`);
    row('frames', `${h.frames_processed} processed, ${h.frames_skipped} skipped, ${h.frames_torn} torn, ${h.frames_lost} lost`);
    row('publish drops', h.publish_drops);
    row('generation', `applied ${h.applied_gen}`);
    if (h.ring_message) row('ring', h.ring_message, true);
    if (h.warnings) row('warnings', h.warnings, true);
    if (h.last_error) row('last error', h.last_error, true);
    if (h.rejected_gen) row('last rejection', `gen ${h.rejected_gen}: ${h.rejected_reason}`, true);
    if (h.command_message) row('last command', h.command_message);
    if (h.status_minor >= 1) row('recording', `${h.record_state} ${h.record_frames} frames, ${h.record_dropped} left out ${h.record_message}`);
  }
  row('console', `${h.web.clients} browser(s), ${h.web.sent} images sent, ${h.web.skipped} stale dropped`);
  $('health').innerHTML = `<table>${rows.join('')}</table>`;
  // record exists when octd's status block reports recording (status ABI 1.1)
  const rec = h.octd && h.status_minor >= 1;
  $('cmd-record').hidden = !rec || h.record_state === 'recording';
  $('cmd-record_stop').hidden = !rec || h.record_state !== 'recording';
  for (const p of panels) p.setTopics(h.topics || []);
  if (h.octd) { spark.push([h.lat_p50_us, h.lat_p99_us]); if (spark.length > 120) spark.shift(); }
  const c = $('spark'), ctx = c.getContext('2d');
  ctx.clearRect(0, 0, c.width, c.height);
  const max = Math.max(1, ...spark.map((s) => s[1]));
  ctx.strokeStyle = '#7bd88f'; ctx.beginPath();
  spark.forEach((s, i) => { const x = i * c.width / 120, y = c.height - s[0] / max * (c.height - 2); i ? ctx.lineTo(x, y) : ctx.moveTo(x, y); });
  ctx.stroke();
  ctx.fillStyle = '#ff9e64';
  spark.forEach((s, i) => ctx.fillRect(i * c.width / 120, c.height - s[1] / max * (c.height - 2), 2, 2));
  ctx.fillStyle = '#8a96a3'; ctx.font = '10px system-ui'; ctx.textAlign = 'right'; ctx.fillText(`${(max / 1000).toFixed(1)} ms`, c.width - 2, 10); ctx.textAlign = 'left';
}

// ---------- connection ----------
function token() {
  const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (m) { sessionStorage.setItem('octweb-token', decodeURIComponent(m[1])); history.replaceState(null, '', location.pathname); }
  return sessionStorage.getItem('octweb-token') || '';
}
function connect() {
  const t = token();
  ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws${t ? '?token=' + encodeURIComponent(t) : ''}`);
  ws.binaryType = 'arraybuffer';
  ws.onopen = () => { O.connected = true; retryMs = 250; $('conn').textContent = 'connected'; $('conn').className = 'badge ok'; };
  ws.onclose = () => {
    O.connected = false;
    $('conn').textContent = 'disconnected (retrying)'; $('conn').className = 'badge bad';
    for (const [id, w] of waiting) { waiting.delete(id); if (w.done) w.done(false, 'connection to octweb lost'); }
    setTimeout(connect, retryMs); retryMs = Math.min(retryMs * 2, 5000);
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data !== 'string') {
      const dv = new DataView(ev.data), hl = dv.getUint32(0, true);
      const hdr = JSON.parse(new TextDecoder().decode(new Uint8Array(ev.data, 4, hl)));
      const px = new Uint8Array(ev.data, 4 + hl);
      if (panels[hdr.slot]) panels[hdr.slot].receive(hdr, px);
      return;
    }
    const m = JSON.parse(ev.data);
    if (m.type === 'hello') {
      O.role = m.role; O.schema = m.schema;
      $('role').textContent = m.role;
      builtFor = ''; buildControls(m.schema);
      for (const p of panels) if (p.topic) p.subscribe();
    } else if (m.type === 'values') {
      O.values = m.values; O.gen = m.gen; showValues();
    } else if (m.type === 'health') {
      showHealth(m);
    } else if (m.type === 'reply') {
      O.replies.push(m);
      const w = waiting.get(m.id);
      if (!w) return;
      waiting.delete(m.id);
      for (const k of w.keys) if (controls[k]) { controls[k].msg.textContent = m.ok ? '' : m.message; }
      if (w.done) w.done(m.ok, m.message);
    }
  };
}
connect();
setInterval(() => send('alive'), 20000);   // octweb closes a WebSocket silent for 120 s
