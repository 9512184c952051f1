// e2e_web.js - drives Debian's Chromium (headless, puppeteer-core) against
// octsim -> octd -> octweb (tests/e2e_web.sh sets the environment):
//   URL, OP_TOKEN, VIEWER_TOKEN, OCTCTL (a shell-split command line for
//   `octctl get/set`), ART (artefact directory), CHROMIUM.
// Exit 0 pass, 77 skip (Chromium cannot start), 1 fail (the reason printed).
'use strict';
const { execFileSync } = require('child_process');
const puppeteer = require('puppeteer-core');

const env = process.env;
const OCTCTL = JSON.parse(env.OCTCTL);
let browser, browser2;
function fail(msg) {
  console.log('FAIL: ' + msg);
  for (const b of [browser, browser2]) if (b) b.close().catch(() => {});
  process.exit(1);
}
const LAUNCH = { executablePath: env.CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'] };
function ok(msg) { console.log('ok   ' + msg); }
function ctlGet(key) {
  const out = execFileSync(OCTCTL[0], [...OCTCTL.slice(1), 'get', key], { encoding: 'utf8' });
  const m = new RegExp('^' + key.replace(/\./g, '\\.') + '=(.*)$', 'm').exec(out);
  if (!m) fail(`octctl get ${key} printed no value: ${out}`);
  return m[1];
}
async function until(page, fn, arg, what, ms = 10000) {
  try {
    return await page.waitForFunction(fn, { timeout: ms, polling: 50 }, arg);
  } catch (e) {
    const st = await page.evaluate(() => JSON.stringify({ connected: window.octweb.connected, role: window.octweb.role,
      values: Object.keys(window.octweb.values).length, paints: window.octweb.paints, health: window.octweb.health,
      replies: window.octweb.replies.slice(-3) })).catch(() => '?');
    fail(`${what} (waited ${ms} ms); console state ${st}`);
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// canvas statistics of a panel: [min, max] gray of its painted pixels
async function canvasRange(page, slot) {
  return page.evaluate((s) => {
    const c = document.querySelector(`.view[data-slot="${s}"] canvas.img`);
    if (!c || !c.width) return null;
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let lo = 255, hi = 0;
    for (let i = 0; i < d.length; i += 4) { lo = Math.min(lo, d[i + 1]); hi = Math.max(hi, d[i + 1]); }
    return [lo, hi];
  }, slot);
}

// sets a control through its widget, the way an operator does: the value
// into the input (a slider, a number box or a text field), then `change`
async function setWidget(page, key, value) {
  const found = await page.evaluate((k, v) => {
    const d = document.querySelector(`.ctl[data-key="${k}"]`);
    if (!d) return 'no control for ' + k;
    const i = d.querySelector('input, select');
    if (i.disabled) return 'disabled';
    i.value = String(v);
    i.dispatchEvent(new Event('input', { bubbles: true }));
    i.dispatchEvent(new Event('change', { bubbles: true }));
    return i.type;
  }, key, value);
  return found;
}
async function lastReply(page) { return page.evaluate(() => { const r = window.octweb.replies; return r[r.length - 1] || null; }); }

async function openConsole(token, b = browser) {
  const page = await b.newPage();
  await page.setViewport({ width: 1500, height: 1100 });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.log('console: ' + m.text()); });
  page.on('pageerror', (e) => fail('page error: ' + e.message));
  await page.goto(`${env.URL}/#token=${token}`, { waitUntil: 'load' });
  await until(page, () => window.octweb.connected && window.octweb.role && Object.keys(window.octweb.values).length > 0 &&
    window.octweb.health && window.octweb.health.octd && document.querySelector('.ctl[data-key="enface.start"]'),
  null, 'the console did not connect or receive values and health');
  return page;
}

(async () => {
  try {
    browser = await puppeteer.launch(LAUNCH);
  } catch (e) {
    console.log('SKIP e2e_web: chromium cannot start: ' + e.message.split('\n')[0]);
    process.exit(77);
  }
  const op = await openConsole(env.OP_TOKEN);
  const role = await op.evaluate(() => window.octweb.role);
  if (role !== 'operator') fail('operator token gave role ' + role);
  ok('operator console connected');

  // ---- live images: non-blank and updating (en-face panel = slot 1) ----
  await until(op, () => window.octweb.stats.filter((s) => s.topic.startsWith('enface/')).length >= 3 &&
    window.octweb.stats.filter((s) => s.topic.startsWith('xsec_h/')).length >= 2,
  null, 'no en-face / cross-section images painted');
  const seqs = await op.evaluate(() => window.octweb.stats.filter((s) => s.topic.startsWith('enface/')).map((s) => s.seq));
  if (new Set(seqs).size < 3) fail('en-face images do not update: seq ' + seqs.join(','));
  for (const slot of [1, 2, 3]) {
    const r = await canvasRange(op, slot);
    if (!r || r[1] - r[0] < 10) fail(`panel ${slot} is blank (gray range ${r})`);
  }
  const sp = await op.evaluate(() => window.octweb.lastHeader[1].h.spacing_um);
  if (JSON.stringify(sp) !== '[4,12,24]') fail('image header spacing_um = ' + JSON.stringify(sp) + ', want the profile\'s [4,12,24]');
  ok(`live images painted and updating (en-face seq ${seqs.slice(0, 5).join(',')}...)`);

  // ---- a slider: octctl get and the next image's params_gen ----
  {
    const n0 = await op.evaluate(() => window.octweb.replies.length);
    const t = await setWidget(op, 'enface.start', 30);
    if (t !== 'range') fail(`enface.start is a '${t}' widget, not a slider (range from the schema's max_rule depths-1)`);
    await until(op, (n) => window.octweb.replies.length > n, n0, 'no reply to the slider');
    const r = await lastReply(op);
    if (!r.ok) fail('enface.start=30 rejected: ' + r.message);
    if (ctlGet('enface.start') !== '30') fail(`octctl get enface.start = ${ctlGet('enface.start')}, want 30`);
    await until(op, (g) => { const h = window.octweb.lastHeader[1]; return h && h.h.params_gen >= g && h.h.indices[0] === 30; }, r.gen,
      `no en-face image with params_gen >= ${r.gen} and depth 30 painted`);
    ok(`slider enface.start -> 30 (octctl get), generation ${r.gen} painted with indices[0] = 30`);
  }
  const before = parseFloat(ctlGet('display.enface.gsc'));
  const want = +(before * 1.5).toPrecision(4);
  const nset = await op.evaluate(() => window.octweb.replies.length);
  const type = await setWidget(op, 'display.enface.gsc', want);
  if (type.startsWith('no control') || type === 'disabled') fail(type);
  await until(op, (n) => window.octweb.replies.length > n, nset, 'no reply to the change');
  const rep = await lastReply(op);
  if (!rep.ok) fail('display.enface.gsc change rejected: ' + rep.message);
  const after = parseFloat(ctlGet('display.enface.gsc'));
  if (Math.abs(after - want) > 1e-6 * Math.abs(want)) fail(`octctl get display.enface.gsc = ${after}, want ${want}`);
  await until(op, (g) => window.octweb.stats.some((s) => s.topic.startsWith('enface/') && s.params_gen >= g), rep.gen,
    `no en-face image with params_gen >= ${rep.gen} painted`);
  ok(`${type} display.enface.gsc ${before} -> ${after} (octctl get), generation ${rep.gen} on screen`);

  // ---- an invalid value: octd's reason next to the control, value restored ----
  const nrep = await op.evaluate(() => window.octweb.replies.length);
  await setWidget(op, 'display.enface.gsc', -1);
  await until(op, (n) => window.octweb.replies.length > n, nrep, 'no reply to the invalid value');
  const bad = await lastReply(op);
  if (bad.ok) fail('display.enface.gsc=-1 was applied');
  const shown = await op.evaluate(() => document.querySelector('.ctl[data-key="display.enface.gsc"] .msg').textContent);
  if (!shown || !/display\.enface\.gsc/.test(shown)) fail(`octd's reason (naming the key) not shown next to the control: '${shown}'`);
  const health = await until(op, () => window.octweb.health && window.octweb.health.rejected_reason, null, 'no rejection in the health panel');
  await until(op, () => document.querySelector('.ctl[data-key="display.enface.gsc"] input').value === window.octweb.values['display.enface.gsc'] &&
    window.octweb.values['display.enface.gsc'] !== '-1', null, 'the control did not return to the applied value');
  ok(`invalid display.enface.gsc=-1 rejected by octd: "${shown}"; control back to the applied value`);
  // a value the parser refuses (octweb answers with the table's message)
  const nrep2 = await op.evaluate(() => window.octweb.replies.length);
  await op.evaluate(() => window.octweb.setValues({ window: 'bogus' }));
  await until(op, (n) => window.octweb.replies.length > n, nrep2, 'no reply to window=bogus');
  const bad2 = await lastReply(op);
  if (bad2.ok || !/window/.test(bad2.message)) fail('window=bogus: ' + JSON.stringify(bad2));
  ok(`window=bogus refused: "${bad2.message}"`);

  // ---- clicking the en-face image moves the cross-section lines ----
  const box = await op.evaluate(() => { const r = document.querySelector('.view[data-slot="1"] canvas.img').getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; });
  const hBefore = ctlGet('xsec.h_index');
  await op.mouse.click(box[0] + box[2] * 0.25, box[1] + box[3] * 0.75);
  await until(op, (h) => window.octweb.values['xsec.h_index'] !== h, hBefore, 'clicking the en-face image did not move xsec.h_index');
  const h2 = +ctlGet('xsec.h_index'), v2 = +ctlGet('xsec.v_index');
  const geo = await op.evaluate(() => window.octweb.health.geometry);
  const wantH = Math.floor(0.75 * geo[0]), wantV = Math.floor(0.25 * geo[1]);
  if (Math.abs(h2 - wantH) > 1 || Math.abs(v2 - wantV) > 1) fail(`click at (25%, 75%) set xsec to (${h2}, ${v2}), want about (${wantH}, ${wantV})`);
  ok(`click on en-face: xsec.h_index=${h2} xsec.v_index=${v2}`);

  // ---- snapshot -> review -> online ----
  for (const [cmd, state] of [['snapshot', null], ['review', 'review'], ['online', 'online']]) {
    const n = await op.evaluate(() => window.octweb.replies.length);
    await op.click(`#cmd-${cmd}`);
    await until(op, (k) => window.octweb.replies.length > k, n, `no answer to ${cmd}`);
    const r = await lastReply(op);
    if (!r.ok) fail(`${cmd} refused: ${r.message}`);
    if (state) await until(op, (s) => window.octweb.health && window.octweb.health.state === s, state, `state did not become ${state}`);
    if (state === 'review')
      await until(op, () => Object.values(window.octweb.lastHeader).some((h) => h.h.mode === 'review'), null, 'no review image painted');
  }
  ok('snapshot -> review (review images painted) -> online');

  // ---- one-click contrast on a still frame (review): the values octctl
  // prints must be those of the 1st/99th percentiles of the shown image ----
  const cmd = (name) => op.evaluate((n) => new Promise((res) => window.octweb.command(n, [], (k, m) => res([k, m]))), name);
  for (const c of ['snapshot', 'review']) { const [k, m] = await cmd(c); if (!k) fail(`${c}: ${m}`); }
  await until(op, () => window.octweb.lastHeader[1] && window.octweb.lastHeader[1].h.mode === 'review', null, 'no review en-face image');
  await op.click('.view[data-slot="1"] .bar');      // select the en-face panel for the histogram
  const pre = await op.evaluate(() => {
    const im = window.octweb.image(1);
    return { px: Array.from(im.px), gen: im.hdr.h.params_gen, v: window.octweb.values };
  });
  const sorted = [...pre.px].sort((a, b) => a - b), n = sorted.length;
  const lo = sorted[Math.ceil(0.01 * n) - 1], hi = Math.max(sorted[Math.ceil(0.99 * n) - 1], lo + 1);
  const k = 255 / (hi - lo);
  const wantC = +pre.v['display.enface.contrast'] * k, wantB = (+pre.v['display.enface.brightness'] - lo) * k;
  const nc = await op.evaluate(() => window.octweb.replies.length);
  await op.click('#auto-contrast');
  await until(op, (m) => window.octweb.replies.length > m, nc, 'no answer to one-click contrast');
  const rc = await lastReply(op);
  if (!rc.ok) fail('one-click contrast rejected: ' + rc.message);
  const gotC = parseFloat(ctlGet('display.enface.contrast')), gotB = parseFloat(ctlGet('display.enface.brightness'));
  if (Math.abs(gotC - wantC) > 1e-4 * Math.abs(wantC) || Math.abs(gotB - wantB) > 1e-4 * Math.max(1, Math.abs(wantB)))
    fail(`one-click contrast (log scale, percentiles ${lo}..${hi}): contrast ${gotC} brightness ${gotB}, want ${wantC} ${wantB}`);
  await until(op, (g) => { const h = window.octweb.lastHeader[1]; return h && h.h.params_gen >= g; }, rc.gen, 'no image after one-click contrast');
  const post = await op.evaluate(() => Array.from(window.octweb.image(1).px));
  const ps = [...post].sort((a, b) => a - b);
  const spread = ps[Math.ceil(0.99 * n) - 1] - ps[Math.ceil(0.01 * n) - 1];
  if (spread < 200) fail(`after one-click contrast the 1..99 % range spans only ${spread} gray levels`);
  { const [k2, m2] = await cmd('online'); if (!k2) fail('online: ' + m2); }
  ok(`one-click contrast: percentiles ${lo}..${hi} -> contrast ${gotC.toPrecision(5)}, brightness ${gotB.toPrecision(5)}; new 1..99 % span ${spread} levels`);

  // ---- a viewer: read-only, in a second browser at the same time (its own
  // process: a background tab of the same browser does not paint) ----
  browser2 = await puppeteer.launch(LAUNCH);
  const viewer = await openConsole(env.VIEWER_TOKEN, browser2);
  const vrole = await viewer.evaluate(() => window.octweb.role);
  if (vrole !== 'viewer') fail('viewer token gave role ' + vrole);
  const disabled = await viewer.evaluate(() => [...document.querySelectorAll('#controls input, #controls select, .modes button')].every((e) => e.disabled));
  if (!disabled) fail('a viewer has enabled controls');
  const gsc0 = ctlGet('display.bscan.gsc');
  const vn = await viewer.evaluate(() => window.octweb.replies.length);
  await viewer.evaluate(() => window.octweb.setValues({ 'display.bscan.gsc': 123 })); // around the disabled widget
  await until(viewer, (n) => window.octweb.replies.length > n, vn, 'no answer to a viewer set');
  const vr = await lastReply(viewer);
  if (vr.ok || !/read-only/.test(vr.message)) fail('viewer set: ' + JSON.stringify(vr));
  if (ctlGet('display.bscan.gsc') !== gsc0) fail('a viewer changed display.bscan.gsc');
  ok(`viewer refused: "${vr.message}"`);
  const p0 = await op.evaluate(() => window.octweb.paints), q0 = await viewer.evaluate(() => window.octweb.paints);
  await sleep(1500);
  const p1 = await op.evaluate(() => window.octweb.paints), q1 = await viewer.evaluate(() => window.octweb.paints);
  if (p1 <= p0 || q1 <= q0) fail(`two browsers: paints operator ${p0}->${p1}, viewer ${q0}->${q1}`);
  ok(`two browsers painting at once (operator +${p1 - p0}, viewer +${q1 - q0} in 1.5 s)`);

  // ---- a wrong token is refused ----
  const intruder = await browser2.newPage();
  await intruder.goto(`${env.URL}/#token=wrong-token-0123456789`, { waitUntil: 'load' });
  await sleep(800);
  if (await intruder.evaluate(() => window.octweb.connected)) fail('a wrong token was accepted');
  ok('a wrong token is refused');
  await intruder.close();

  await op.evaluate(() => { document.getElementById('cmap').value = 'viridis'; document.getElementById('cmap').dispatchEvent(new Event('change')); });
  await sleep(600);
  await op.screenshot({ path: `${env.ART}/octweb.png` });
  await op.screenshot({ path: `${env.ART}/octweb.jpg`, type: 'jpeg', quality: 80 });
  ok(`screenshot ${env.ART}/octweb.png`);
  await browser2.close();
  await browser.close();
  process.exit(0);
})().catch((e) => fail(e.stack || String(e)));
