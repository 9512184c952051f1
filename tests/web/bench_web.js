// bench_web.js - octweb's targets (issue 16), run by tools/octweb/bench.sh:
//  1. publish -> painted latency, measured in the page (performance.timeOrigin
//     + now() at paint minus the header's t_pub_ns: same host, same clock)
//  2. a control change -> the first painted image with the new params_gen
//  3. the same page with EXTRA more clients connected (Chromium windows in
//     their own processes when EXTRA_MODE=chromium, else WebSocket clients
//     that acknowledge every image on receipt, as a painting browser does)
// Prints one JSON object.  Environment: URL, CHROMIUM, SECONDS, EXTRA,
// EXTRA_MODE, CHANGES, STATUS_CMD (JSON argv printing octctl status).
'use strict';
const { execFileSync } = require('child_process');
const puppeteer = require('puppeteer-core');
const WebSocket = require('ws');

const env = process.env;
const SECONDS = +(env.SECONDS || 10), EXTRA = +(env.EXTRA || 9), CHANGES = +(env.CHANGES || 40);
const LAUNCH = { executablePath: env.CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'] };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function pct(a, p) { if (!a.length) return null; const s = [...a].sort((x, y) => x - y); return +s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)].toFixed(2); }
function status() {
  const argv = JSON.parse(env.STATUS_CMD);
  const out = execFileSync(argv[0], argv.slice(1), { encoding: 'utf8' });
  const get = (k) => +(new RegExp('^' + k + '=(\\d+)', 'm').exec(out) || [0, 0])[1];
  return { processed: get('frames_processed'), skipped: get('frames_skipped'), lost: get('frames_lost'), seen: get('frames_seen') };
}
function cpuSeconds(pid) {   // utime + stime of a process, seconds
  const f = require('fs').readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (+f[11] + +f[12]) / 100;
}
async function window_(page, seconds, pid) {
  const s0 = status(), c0 = cpuSeconds(pid), t0 = Date.now();
  await page.evaluate(() => { window.octweb.stats.length = 0; });
  await sleep(seconds * 1000);
  const st = await page.evaluate(() => window.octweb.stats.filter((s) => s.topic.startsWith('bscan/')));
  const lat = st.map((s) => s.lat_ms);
  const part = (k) => `${pct(st.map((s) => s[k]), 0.5)} / ${pct(st.map((s) => s[k]), 0.95)}`;
  const s1 = status(), c1 = cpuSeconds(pid), dt = (Date.now() - t0) / 1000;
  return { painted: lat.length, painted_per_s: +(lat.length / dt).toFixed(1), p50_ms: pct(lat, 0.5), p95_ms: pct(lat, 0.95),
    p99_ms: pct(lat, 0.99),
    parts_p50_p95_ms: { octd_to_octweb: part('zmq_ms'), in_octweb: part('queue_ms'), octweb_to_page: part('net_ms'), to_paint: part('paint_ms') },
    octd_processed: s1.processed - s0.processed, octd_skipped: s1.skipped - s0.skipped,
    octd_lost: s1.lost - s0.lost, octweb_cpu_cores: +((c1 - c0) / dt).toFixed(3) };
}

(async () => {
  const browser = await puppeteer.launch(LAUNCH);
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  await page.goto(env.URL + '/', { waitUntil: 'load' });
  await page.waitForFunction(() => window.octweb.connected && window.octweb.stats.length > 20, { timeout: 20000 });
  const pid = +env.OCTWEB_PID;
  const res = { seconds: SECONDS };
  res.one_browser = await window_(page, SECONDS, pid);

  // control change -> new params_gen painted (display.bscan.brightness toggled)
  const ch = await page.evaluate(async (n) => {
    const out = [], applied = [];
    const now = () => performance.timeOrigin + performance.now();
    for (let i = 0; i < n; i++) {
      const t0 = now();
      const gen = await new Promise((res) => window.octweb.setValues({ 'display.bscan.brightness': i % 2 ? -60 : -59 },
        (ok) => res(ok ? window.octweb.replies[window.octweb.replies.length - 1].gen : -1)));
      if (gen < 0) { out.push(null); continue; }
      applied.push(now() - t0);
      await new Promise((res) => { const f = () => (window.octweb.stats.some((s) => s.topic.startsWith('bscan/') && s.params_gen >= gen && s.t > t0) ? res() : setTimeout(f, 1)); f(); });
      const s = window.octweb.stats.find((x) => x.topic.startsWith('bscan/') && x.params_gen >= gen && x.t > t0);
      out.push(s.t - t0);
      await new Promise((r) => setTimeout(r, 50));
    }
    return { out, applied };
  }, CHANGES);
  const okc = ch.out.filter((x) => x !== null);
  // applied: octd's status says the generation is in use (octweb's reply);
  // screen: the first painted image with that params_gen
  res.control_to_screen = { changes: ch.out.length, rejected: ch.out.length - okc.length,
    applied_p50_ms: pct(ch.applied, 0.5), applied_p95_ms: pct(ch.applied, 0.95),
    p50_ms: pct(okc, 0.5), p95_ms: pct(okc, 0.95), max_ms: pct(okc, 1) };

  // more clients
  const extras = [], browsers = [];
  if (env.EXTRA_MODE === 'chromium') {
    for (let i = 0; i < EXTRA; i++) {
      const b = await puppeteer.launch(LAUNCH); browsers.push(b);
      const p = await b.newPage(); await p.setViewport({ width: 1400, height: 1000 });
      await p.goto(env.URL + '/', { waitUntil: 'load' });
    }
  } else {
    const u = new URL(env.URL);
    for (let i = 0; i < EXTRA; i++) {
      const ws = new WebSocket(`ws://${u.host}/ws`, { origin: env.URL });
      ws.on('open', () => { for (let s = 0; s < 6; s++) ws.send(['view', s, '', 0, 0, 0].join('\t')); ws.send(['view', 0, 'bscan/cfd', 1300, 700, 0].join('\t')); });
      ws.on('message', (d, isBinary) => { if (isBinary) { const hl = d.readUInt32LE(0); const h = JSON.parse(d.subarray(4, 4 + hl)); ws.send('ack\t' + h.slot); } });
      extras.push(ws);
    }
  }
  await sleep(2000);
  res.extra_clients = { count: EXTRA, mode: env.EXTRA_MODE === 'chromium' ? 'chromium' : 'websocket' };
  res.with_extra = await window_(page, SECONDS, pid);
  for (const ws of extras) ws.close();
  for (const b of browsers) await b.close();
  await browser.close();
  console.log(JSON.stringify(res, null, 1));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
