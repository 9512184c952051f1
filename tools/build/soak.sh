#!/bin/bash
# soak.sh - octsim -> octd (CPU, policy all) -> octgrab for SOAK_SECONDS
# (issue 8.3).  First measures the rate octd sustains (unpaced producer,
# SOAK_CAL_SECONDS), then paces the producer at SOAK_LOAD (fraction) of it.
# Samples octd's RSS and open fds every SOAK_SAMPLE seconds and fails on:
#  - a crash (octd gone, or not exit 0 on SIGTERM at the end),
#  - RSS growth > 1 % between the end of the warm-up (20 % of the time) and the end,
#  - fd growth over the same span,
#  - frames skipped/lost (policy all) while paced below the sustained rate,
#  - latency p99 (commit -> octgrab receive) of the second half > 1.5 x the
#    first half's (+ SOAK_LAT_SLACK_MS against timer noise on sub-ms figures).
# Prints a summary table.  Env: SOAK_SECONDS [600], SOAK_GEOM "M N L" ["1024 256 1"],
# SOAK_LOAD [0.4], SOAK_RATE_FPS (skip the calibration), BIN [bin], KEEP=1.
set -u
BIN=${BIN:-bin}
SECS=${SOAK_SECONDS:-600}
CAL=${SOAK_CAL_SECONDS:-6}
SAMPLE=${SOAK_SAMPLE:-5}
LOAD=${SOAK_LOAD:-0.4}
SLACK=${SOAK_LAT_SLACK_MS:-0.5}
read -r M A L <<<"${SOAK_GEOM:-1024 256 1}"
for p in octd octsim octctl octgrab; do
    [ -x "$BIN/$p" ] || { echo "soak: $BIN/$p not built (make progs)"; exit 2; }
done
T=$(mktemp -d /tmp/octd-soak.XXXXXX)
N=/octsoak$$
OCTD="" SIM="" GRAB=""
cleanup() {
    for p in $SIM $GRAB $OCTD; do kill "$p" 2>/dev/null; done
    for p in $SIM $GRAB $OCTD; do wait "$p" 2>/dev/null; done
    rm -f "/dev/shm$N-frames" "/dev/shm$N-control" "/dev/shm$N-status"
    [ -n "${KEEP:-}" ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "SOAK FAIL: $*"; [ -f "$T/octd.log" ] && tail -15 "$T/octd.log"; exit 1; }
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
st() { "${CTL[@]}" status | sed -n "s/^$1=//p"; }
alive() { kill -0 "$OCTD" 2>/dev/null; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$OCTD/status" 2>/dev/null; }
nfd() { ls "/proc/$OCTD/fd" 2>/dev/null | wc -l; }

cat >"$T/profile.yaml" <<EOF
geometry: {samples: $M, ascans: $A, lines: $L, sample_type: u16}
methods: [cfd]
window: {type: hann}
freq_cutoff: 4
scale: log
display:
  bscan: {gsc: 1.0, contrast: 2, brightness: -60}
products: [bscan, enface, confocal, xsec_h, xsec_v]
EOF
cat >"$T/octd.ini" <<EOF
[engine]
backend = cpu
[ring]
frames = $N-frames
control = $N-control
status = $N-status
policy = all
[publish]
endpoint = ipc://$T/pub
[profile]
path = $T/profile.yaml
[log]
level = info
EOF
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
sleep 0.5
alive || fail "octd did not start"

# ---- calibration: what octd sustains with an unpaced producer -------------
if [ -z "${SOAK_RATE_FPS:-}" ]; then
    "$BIN/octsim" --ring "$N-frames" --samples $M --ascans $A --lines $L --slots 16 --quiet 2>/dev/null &
    SIM=$!
    sleep 1
    p0=$(st frames_processed)
    sleep "$CAL"
    p1=$(st frames_processed)
    kill $SIM; wait $SIM 2>/dev/null; SIM=""
    sustained=$(awk -v a="$p0" -v b="$p1" -v t="$CAL" 'BEGIN {printf "%.1f", (b - a) / t}')
    fps=$(awk -v s="$sustained" -v l="$LOAD" 'BEGIN {printf "%.1f", s * l}')
else
    sustained="(not measured)" fps=$SOAK_RATE_FPS
fi
awk -v f="$fps" 'BEGIN {exit !(f > 0)}' || fail "no sustained rate measured ($sustained frames/s)"
rate=$(awk -v f="$fps" -v a="$A" -v l="$L" 'BEGIN {printf "%d", f * a * l}')
echo "soak: $SECS s, geometry ${L}x${A}x${M} u16, CPU backend, policy all;" \
    "sustained $sustained frames/s, paced at $fps frames/s ($LOAD)"

"$BIN/octsim" --ring "$N-frames" --samples $M --ascans $A --lines $L --slots 16 --rate "$rate" \
    --quiet 2>"$T/sim.log" &
SIM=$!
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic bscan/cfd >"$T/grab.txt" 2>&1 &
GRAB=$!
start=$SECONDS
warm=$((SECS / 5))
printf "%8s %10s %6s %10s %10s %8s %8s\n" t_s rss_kb fds processed skipped torn lat_ms >"$T/table.txt"
rss_w="" fd_w="" s_w="" lines_w=""
while :; do
    sleep "$SAMPLE"
    t=$((SECONDS - start))
    alive || fail "octd died at t=$t s"
    kill -0 $SIM 2>/dev/null || fail "octsim died at t=$t s"
    r=$(rss_kb) f=$(nfd)
    printf "%8d %10s %6s %10s %10s %8s %8s\n" $t "$r" "$f" "$(st frames_processed)" "$(st frames_skipped)" \
        "$(st frames_torn)" "$(st last_latency_ms)" >>"$T/table.txt"
    if [ -z "$rss_w" ] && [ $t -ge $warm ]; then
        rss_w=$r fd_w=$f s_w=$(st frames_skipped) lines_w=$(wc -l <"$T/grab.txt")
    fi
    [ $t -ge "$SECS" ] && break
done
rss_e=$(rss_kb) fd_e=$(nfd) s_e=$(st frames_skipped) lines_e=$(wc -l <"$T/grab.txt")
processed=$(st frames_processed) torn=$(st frames_torn) drops=$(st publish_drops)
kill -INT $GRAB; wait $GRAB 2>/dev/null; GRAB=""
kill $SIM; wait $SIM 2>/dev/null; SIM=""
t0=$(date +%s%N)
kill -TERM $OCTD; wait $OCTD; rc=$?; OCTD=""
t1=$(date +%s%N)

# latency p99, first vs second half of the messages after the warm-up
read -r p99a p99b nmsg <<<"$(sed -n "$((lines_w + 1)),${lines_e}p" "$T/grab.txt" |
    awk '$1 == "bscan/cfd" && $(NF - 1) + 0 == $(NF - 1) {print $(NF - 1)}' | "${PYTHON:-/usr/bin/python3}" -c '
import sys
v = [float(x) for x in sys.stdin.read().split()]
h = len(v) // 2
def p99(a):
    a = sorted(a)
    return a[min(len(a) - 1, int(0.99 * len(a)))] if a else float("nan")
print("%.3f %.3f %d" % (p99(v[:h]), p99(v[h:]), len(v)))')"
echo
cat "$T/table.txt"
echo
printf "%-34s %s\n" "duration / warm-up" "$SECS s / $warm s" \
    "rate (paced, frames/s)" "$fps (sustained $sustained)" \
    "frames processed" "$processed" \
    "RSS warm-up end -> end (kB)" "$rss_w -> $rss_e" \
    "fds warm-up end -> end" "$fd_w -> $fd_e" \
    "skipped after warm-up (policy all)" "$((s_e - s_w)) (total $s_e)" \
    "torn / publish drops" "$torn / $drops" \
    "latency p99 1st / 2nd half (ms)" "$p99a / $p99b ($nmsg messages)" \
    "SIGTERM" "exit $rc in $(((t1 - t0) / 1000000)) ms"
bad=0
[ $rc = 0 ] || { echo "SOAK FAIL: octd exit $rc"; bad=1; }
awk -v a="$rss_w" -v b="$rss_e" 'BEGIN {exit !(b > a * 1.01)}' && { echo "SOAK FAIL: RSS grew > 1 %"; bad=1; }
[ "$fd_e" -gt "$fd_w" ] && { echo "SOAK FAIL: fds grew"; bad=1; }
[ $((s_e - s_w)) -gt 0 ] && { echo "SOAK FAIL: frames skipped under policy all below the sustained rate"; bad=1; }
[ "$nmsg" -gt 10 ] || { echo "SOAK FAIL: only $nmsg messages received"; bad=1; }
awk -v a="$p99a" -v b="$p99b" -v s="$SLACK" 'BEGIN {exit !(b > 1.5 * a + s)}' &&
    { echo "SOAK FAIL: latency p99 regressed"; bad=1; }
[ $bad = 0 ] && echo "SOAK PASS"
exit $bad
