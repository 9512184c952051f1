#!/bin/bash
# e2e_metrics.sh - the Prometheus metrics endpoint (issue 14.4), CPU backend, ~10 s:
#  a. off by default: octd without [metrics] listens on no TCP port (its
#     publisher is ipc:// here; ss)
#  b. [metrics] listen = PORT (a bare port: loopback): octd listens on
#     127.0.0.1:PORT only; GET /metrics (curl) is the Prometheus text format
#     (every sample line parses; HELP/TYPE for each family), its counters
#     match `octctl status` read around it, the latency histogram is
#     cumulative with +Inf = count > 0, rates > 0 while frames flow,
#     octd_ring_attached 1; other paths are 404
#  c. a bad listen value is a configuration error naming [metrics] listen
#     (78); a port in use is a start-up failure (69)
# Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octd octsim octctl; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_metrics: $BIN/$p not built"; exit 77; }
done
for c in curl ss; do
    command -v $c >/dev/null || { echo "SKIP e2e_metrics: no $c"; exit 77; }
done
T=$(mktemp -d /tmp/octd-e2e-metrics.XXXXXX)
N=/octe2e-m$$
. tests/helpers/e2e_lib.sh
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }
printf 'methods: [cfd]\nfreq_cutoff: 2\nproducts: [bscan]\n' >"$T/profile.yaml"
ini() { # METRICS-SECTION
    printf '[engine]\nbackend = cpu\nthreads = 1\n[ring]\nframes = %s-frames\ncontrol = %s-control\nstatus = %s-status\n[publish]\nendpoint = ipc://%s/pub\n[profile]\npath = %s/profile.yaml\n%s\n' \
        "$N" "$N" "$N" "$T" "$T" "$1" >"$T/octd.ini"
}
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN/octsim" --ring "$N-frames" --samples 256 --ascans 32 --lines 1 --rate 3200 --quiet 2>"$T/sim.log" &
PIDS+=($!)

# ---- a. off by default ----
ini ""
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 10 '[ "$(st frames_processed)" -gt 2 ] 2>/dev/null' || fail "octd does not process"
socks=$(ss -Hltnp | grep "pid=$OCTD," | awk '{print $4}')
[ -z "$socks" ] || fail "octd without [metrics] listens on TCP: $socks"
kill $OCTD; wait $OCTD; OCTD=""
rm -f "/dev/shm$N-status" # the next octd's counters, not this one's left-overs
echo "ok   a. no [metrics] section: no TCP port"

# ---- b. listen = PORT ----
ini "[metrics]
listen = $PORT"
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 30 '[ "$(st frames_processed)" -gt 20 ] 2>/dev/null' || fail "octd does not process"
wait_for 30 'ss -Hltnp | grep -q "pid=$OCTD,"' # a loaded machine may start the server late
socks=$(ss -Hltnp | grep "pid=$OCTD," | awk '{print $4}')
[ "$socks" = "127.0.0.1:$PORT" ] || fail "listen = $PORT: octd listens on '$socks', expected 127.0.0.1:$PORT only"
sleep 1.2 # a whole second of rates
s0=$(st frames_processed)
curl -sS -D "$T/headers" -o "$T/metrics.txt" "http://127.0.0.1:$PORT/metrics" || fail "curl /metrics"
s1=$(st frames_processed)
grep -qi '^Content-Type: text/plain; version=0.0.4' "$T/headers" || fail "content type: $(cat "$T/headers")"
"$PYTHON" - "$T/metrics.txt" "$s0" "$s1" <<'PYEOF' || fail "metrics: see above"
import re, sys
text = open(sys.argv[1]).read()
s0, s1 = int(sys.argv[2]), int(sys.argv[3])
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*",?)*\})? (-?[0-9.eE+-]+|\+Inf|NaN)$')
vals, types, helps = {}, {}, set()
for line in text.splitlines():
    if line.startswith("# HELP "):
        helps.add(line.split()[2]); continue
    if line.startswith("# TYPE "):
        _, _, name, t = line.split(); types[name] = t; continue
    m = sample.match(line)
    assert m, f"not a sample line: {line!r}"
    vals[line.rsplit(" ", 1)[0]] = float(line.rsplit(" ", 1)[1])
for fam in types:
    assert fam in helps, f"no HELP for {fam}"
def v(k):
    assert k in vals, f"missing {k}"
    return vals[k]
for c in ["frames_seen_total", "frames_processed_total", "frames_skipped_total", "frames_torn_total",
          "frames_lost_total", "frames_reprocessed_total", "ring_reattaches_total",
          "images_published_total", "publish_drops_total"]:
    assert types.get("octd_" + c) == "counter", f"octd_{c}: type {types.get('octd_' + c)}"
p = v("octd_frames_processed_total")
assert s0 <= p <= s1, f"frames_processed {p} not within octctl's {s0}..{s1}"
assert v("octd_frames_seen_total") >= p
assert v("octd_ring_attached") == 1
assert v('octd_state{state="online"}') == 1 and v('octd_state{state="review"}') == 0
assert v("octd_frames_processed_per_second") > 0, "no rate"
assert v("octd_images_published_per_second") > 0, "no image rate"
assert types["octd_latency_seconds"] == "histogram"
b = [(k, x) for k, x in vals.items() if k.startswith("octd_latency_seconds_bucket")]
assert len(b) >= 5 and b[-1][0].endswith('le="+Inf"}'), b[-1]
xs = [x for _, x in b]
assert all(a <= c for a, c in zip(xs, xs[1:])), f"buckets not cumulative: {xs}"
n = v("octd_latency_seconds_count")
assert xs[-1] == n > 0, f"+Inf {xs[-1]} vs count {n}"
assert v("octd_latency_seconds_sum") > 0
print(f"ok   b. /metrics: {len(vals)} samples, frames_processed {int(p)} (octctl {s0}..{s1}), "
      f"{v('octd_frames_processed_per_second'):.0f} frames/s, latency count {int(n)}")
PYEOF
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/other")
[ "$code" = 404 ] || fail "GET /other: $code, expected 404"

# ---- c. bad values, port in use ----
ini "[metrics]
listen = 0.0.0.0:99999"
"$BIN/octd" --config "$T/octd.ini" --check-config >"$T/check.txt" 2>&1
rc=$?
[ $rc = 78 ] && grep -q "\[metrics\] listen: '0.0.0.0:99999'" "$T/check.txt" ||
    fail "listen = 0.0.0.0:99999: exit $rc, $(cat "$T/check.txt")"
printf '[engine]\nbackend = cpu\n[ring]\nframes = %s-frames\ncontrol = %s-c2\nstatus = %s-s2\n[publish]\nendpoint = ipc://%s/pub2\n[profile]\npath = %s/profile.yaml\n[metrics]\nlisten = 127.0.0.1:%s\n' \
    "$N" "$N" "$N" "$T" "$T" "$PORT" >"$T/second.ini"
timeout 20 "$BIN/octd" --config "$T/second.ini" 2>"$T/second.log"
rc=$?
[ $rc = 69 ] && grep -q "\[metrics\] listen: cannot serve on 127.0.0.1:$PORT" "$T/second.log" ||
    fail "metrics port in use: exit $rc, $(grep '<[0-3]>' "$T/second.log" | head -2)"
echo "ok   c. bad listen value: 78 naming [metrics] listen; port in use: 69"
exit 0
