#!/bin/bash
# reglive_rate.sh - live registration rate through octd (issue 17.3): octsim
# motion frames replayed into a ring at RATE volumes/s, octd (BACKEND) with
# policy all, then `octctl reference set`; prints the ring counters over
# SECONDS without and with a reference, the volumes registered and skipped
# for registration (registration busy) per second, and octd's
# "registration: ... ms per volume" lines.  Loss-free: frames_skipped and
# frames_lost do not grow; all registered: registration_skipped does not.
# The producer is `octsim replay --commit` (the 4 volumes copied into the 64
# slots once, then headers only: a copy of 78.6 MB frames tops out near 36/s).
#   [WORKERS=W] [SIM=DIR] [PRODUCER=copy] tools/build/reglive_rate.sh [L N M BACKEND RATE SECONDS]
# WORKERS: [engine] registration_workers (default 0: automatic); SIM: reuse
# (or keep) the octsim motion output there; PRODUCER=copy: without --commit.
# GPU target: tools/build/reglive_rate.sh 192 200 1024 cuda 100 20
set -u
L=${1:-32} N=${2:-64} M=${3:-128} BACKEND=${4:-cpu} RATE=${5:-5} SECS=${6:-10}
BIN=${BIN:-bin} WORKERS=${WORKERS:-0} PRODUCER=${PRODUCER:-commit}
T=$(mktemp -d /tmp/octd-reglive-rate.XXXXXX)
SIM=${SIM:-$T/sim}
R=/octrr$$
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait; rm -f /dev/shm$R-*; rm -rf "$T"' EXIT
[ -f "$SIM/frames.npy" ] ||
    "$BIN/octsim" motion --output "$SIM" --lines "$L" --ascans "$N" --samples "$M" --volumes 4 \
        --saccades 1 --frames >"$T/sim.log" 2>&1 || { cat "$T/sim.log"; exit 1; }
cat >"$T/p.yaml" <<EOF
methods: [cfd]
window: {type: rect}
freq_cutoff: 0
enface: {start: $((M / 8)), step: $((M / 8)), count: 3}
products: [confocal]
EOF
cat >"$T/octd.ini" <<EOF
[engine]
backend = $BACKEND
registration_workers = $WORKERS
[ring]
frames = $R-frames
control = $R-control
status = $R-status
policy = all
[publish]
endpoint = ipc://$T/pub
[profile]
path = $T/p.yaml
[log]
level = info
EOF
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
PIDS+=($!)
sleep 2
COMMIT=--commit
[ "$PRODUCER" = copy ] && COMMIT=
"$BIN/octsim" replay "$SIM/frames.npy" --ring "$R-frames" --loop --ascan-rate $((L * N * RATE)) \
    --slots 64 $COMMIT --quiet &
PIDS+=($!)
C=("$BIN/octctl" --control "$R-control" --status "$R-status" --timeout 10)
counters() { "${C[@]}" status | grep -E "^(frames_(seen|processed|skipped|lost)|registration_(volumes|skipped))=" | tr '\n' ' '; echo; }
st() { "${C[@]}" status | sed -n "s/^$1=//p"; }
sleep 5
echo "no reference, start: $(counters)"; sleep "$SECS"; echo "no reference, +${SECS}s: $(counters)"
"${C[@]}" reference set
sleep 5
echo "reference, start:    $(counters)"
p0=$(st frames_processed) r0=$(st registration_volumes) s0=$(st registration_skipped)
sleep "$SECS"
echo "reference, +${SECS}s:    $(counters)"
p1=$(st frames_processed) r1=$(st registration_volumes) s1=$(st registration_skipped)
awk -v p=$((p1 - p0)) -v r=$((r1 - r0)) -v s=$((s1 - s0)) -v t="$SECS" 'BEGIN {
    printf "with a reference over %ss: %.1f volumes/s processed, %.1f registered, %.1f skipped for registration\n", t, p / t, r / t, s / t }'
echo "producer $PRODUCER, registration_workers $WORKERS"
grep -E "engine planned|registration" "$T/octd.log" | tail -6
