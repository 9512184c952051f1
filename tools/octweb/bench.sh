#!/bin/bash
# bench.sh - octweb's targets (issue 16) on this machine, loopback:
#   octsim B-scans 500 x 1024 (N x M) at RATE frames/s -> octd (CPU) -> octweb
#   -> headless Chromium (tests/web/bench_web.js) measuring, in the page,
#   publish -> painted p50/p95/p99 and control change -> new params_gen on
#   screen; then EXTRA more clients (EXTRA_MODE=websocket: clients acknowledging
#   every image like a painting page; chromium: more Chromium processes) with
#   octd's skipped/lost frames and octweb's CPU (cores) over the same window.
#   POLICY=all makes octd process every frame (a late frame is then counted as
#   lost only if the ring overwrote it), so a producer's catch-up bursts are
#   not counted as skips.
#   OCTD_THREADS=1 sets octd's [engine] threads (default 0: all cores; with
#   browsers on the same two cores, FFTW/OpenMP threads that wait on each
#   other are what loses frames, not octweb).
#   OCTD_NICE=-10 runs octsim and octd at that nice value (as a unit's Nice=
#   would), so that browsers on the same few cores cannot starve them.
# Usage: tools/octweb/bench.sh   (BIN=bin SECONDS_=10 RATE=30 EXTRA=9 EXTRA_MODE=websocket POLICY=latest OCTD_THREADS=0 OCTD_NICE=)
set -eu
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin}
NODE_DIR=${NODE_DIR:-build/web-node}
CHROMIUM=${CHROMIUM:-$(command -v chromium)}
RATE=${RATE:-30} SECS=${SECONDS_:-10} EXTRA=${EXTRA:-9} EXTRA_MODE=${EXTRA_MODE:-websocket}
T=$(mktemp -d /tmp/octweb-bench.XXXXXX)
N=/octweb-bench$$
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -f /dev/shm"$N"-*; rm -rf "$T"; }
trap cleanup EXIT
cat >"$T/profile.yaml" <<EOT
geometry: {samples: 1024, ascans: 500, lines: 1, spacing_um: {depth: 3.5, ascan: 10.0, line: 10.0}}
methods: [cfd]
freq_cutoff: 4
scale: log
display:
  bscan: {gsc: 1.0, contrast: 2, brightness: -60}
products: [bscan]
EOT
cat >"$T/octd.ini" <<EOT
[engine]
backend = cpu
threads = ${OCTD_THREADS:-0}
[ring]
frames = $N-frames
control = $N-control
status = $N-status
policy = ${POLICY:-latest}
[publish]
endpoint = ipc://$T/pub
[profile]
path = $T/profile.yaml
EOT
NICE=(); [ -n "${OCTD_NICE:-}" ] && NICE=(nice -n "$OCTD_NICE")
"${NICE[@]}" "$BIN/octsim" --ring "$N-frames" --samples 1024 --ascans 500 --lines 1 --rate $((500 * RATE)) >"$T/octsim.log" 2>&1 &
PIDS+=($!)
"${NICE[@]}" "$BIN/octd" --config "$T/octd.ini" >"$T/octd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do "$BIN/octctl" --status "$N-status" --control "$N-control" status 2>/dev/null | grep -q '^state=online' && break; sleep 0.1; done
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN/octweb" --listen 127.0.0.1:$PORT --endpoint "ipc://$T/pub" --control "$N-control" --status "$N-status" \
    >"$T/octweb.log" 2>&1 &
WEB=$!
PIDS+=($WEB)
sleep 1
echo "octweb bench: $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "  B-scans 500 x 1024 at $RATE frames/s, octd CPU backend, ${SECS} s windows, $EXTRA extra $EXTRA_MODE clients, policy ${POLICY:-latest}, octd threads ${OCTD_THREADS:-0}${OCTD_NICE:+, octsim and octd at nice $OCTD_NICE}"
STATUS_CMD=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$BIN/octctl" --status "$N-status" --control "$N-control" status)
URL=http://127.0.0.1:$PORT CHROMIUM="$CHROMIUM" SECONDS=$SECS EXTRA=$EXTRA EXTRA_MODE=$EXTRA_MODE \
    OCTWEB_PID=$WEB STATUS_CMD="$STATUS_CMD" NODE_PATH="$NODE_DIR/node_modules" node tests/web/bench_web.js
