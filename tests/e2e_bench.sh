#!/bin/bash
# e2e_bench.sh - smoke run of `octbench --e2e --quick` on the CPU backend
# (small geometries): producer -> ring -> octd -> ZeroMQ subscriber, once
# through octd's pipelined zero-copy path (OCTD_ZERO_COPY=1 forces it for the
# depth-1 CPU engine) and once through the copying path.  Checks that frames
# arrive, that the table is complete and that a paced rate loses no frame.
# Smoke runs of `octbench --quick --only ipc` and `--only bscan-msi --backend
# cpu` (exit 0, their tables printed).
# Then tests/e2e_daemon.sh once more with OCTD_ZERO_COPY=1.
# Exit 0 pass, 77 skip, else fail.  About 30 s.
set -u
BIN=${BIN:-bin}
for p in octbench octd; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_bench: $BIN/$p not built"; exit 77; }
done
TMP=$(mktemp -d /tmp/octd-e2e-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/  | /' "$TMP/out.txt" 2>/dev/null | tail -40; exit 1; }

# rows: work be policy rate frames/s A-scans/s GB/s p50 p99 max produced processed skip torn drops gaps lost
check_rows() { # $1 workload
    awk -v w="$1" '$1 == w && $2 == "cpu" { n++; if ($5 + 0 <= 0 || NF != 17) bad++ }
                   END { exit !(n >= 1 && bad == 0) }' "$TMP/out.txt" || fail "$1: no complete row with frames/s > 0"
    grep -Eq "^# $1: (highest measured rate without loss|no frame lost)" "$TMP/out.txt" ||
        fail "$1: every paced rate lost frames (policy all)"
}

OCTD_ZERO_COPY=1 timeout 60 "$BIN/octbench" --e2e --quick --backend cpu --seconds 0.5 \
    --json "$TMP/e2e.json" >"$TMP/out.txt" 2>&1 || fail "octbench --e2e (zero-copy path) exit $?"
grep -q "pipelined cpu path" "$TMP/out.txt" || fail "octd did not use the pipelined path"
check_rows volume
check_rows bscan
[ "$(grep -c '"part":"e2e"' "$TMP/e2e.json")" -ge 2 ] || fail "JSON lines missing"
echo "ok zero-copy path: $(grep -E '^# (volume|bscan): (highest|no frame)' "$TMP/out.txt" | tr '\n' ' ')"

timeout 40 "$BIN/octbench" --e2e --quick --backend cpu --only bscan --seconds 0.5 \
    >"$TMP/out.txt" 2>&1 || fail "octbench --e2e (copying path) exit $?"
grep -q "pipelined" "$TMP/out.txt" && fail "the copying path was not used for the CPU engine"
check_rows bscan
echo "ok copying path: $(grep -E '^# bscan: (highest|no frame)' "$TMP/out.txt")"

# smoke runs of the other parts: the IPC ring benchmark and one engine workload
timeout 120 "$BIN/octbench" --quick --only ipc >"$TMP/out.txt" 2>&1 || fail "octbench --quick --only ipc exit $?"
grep -q "^shared-memory ring" "$TMP/out.txt" || fail "--only ipc: no ring table"
grep -q "^case .*GB/s .*lost .*torn" "$TMP/out.txt" || fail "--only ipc: no table header"
for w in "bscan 500x1024 u16" "volume 200x192x1024 u16"; do
    awk -v w="$w" 'index($0, w) == 1 { n++; if ($(NF - 7) + 0 <= 0) bad++ }
                   END { exit !(n == 1 && bad == 0) }' "$TMP/out.txt" || fail "--only ipc: no row '$w' with GB/s > 0"
done
echo "ok octbench --quick --only ipc: $(grep -c -E '^(bscan|volume) ' "$TMP/out.txt") rows"
timeout 120 "$BIN/octbench" --quick --only bscan-msi --backend cpu >"$TMP/out.txt" 2>&1 ||
    fail "octbench --quick --only bscan-msi --backend cpu exit $?"
grep -q "^engine workloads" "$TMP/out.txt" || fail "--only bscan-msi: no engine table"
grep -q "^workload .*total .*A-scans/s" "$TMP/out.txt" || fail "--only bscan-msi: no table header"
awk '$1 == "bscan-msi" && $2 == "cpu" && /seed-cpu/ { n++ } END { exit !(n == 1) }' "$TMP/out.txt" ||
    fail "--only bscan-msi: no cpu row with the seed speed-up"
[ "$(grep -c -E '^(bscan|volume|msi|li)-' "$TMP/out.txt")" -eq 1 ] || fail "--only bscan-msi ran other workloads"
echo "ok octbench --quick --only bscan-msi --backend cpu: $(awk '$1 == "bscan-msi" { print $10 " ms" }' "$TMP/out.txt")"

# bad option: a clear refusal, no child left behind
"$BIN/octbench" --e2e --only nosuch >"$TMP/out.txt" 2>&1 && fail "--only nosuch accepted"
grep -q "must be volume or bscan" "$TMP/out.txt" || fail "--only nosuch: no clear message"
# the daemon's own end-to-end test (images = octproc's, control values,
# snapshot/review/save, reload, ring restart, stop) through the zero-copy path
if [ -f tests/e2e_daemon.sh ]; then
    OCTD_ZERO_COPY=1 timeout 120 bash tests/e2e_daemon.sh >"$TMP/daemon.txt" 2>&1
    rc=$?
    [ $rc -eq 77 ] && echo "ok (skipped) e2e_daemon through the zero-copy path: $(grep ^SKIP "$TMP/daemon.txt")"
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || { cp "$TMP/daemon.txt" "$TMP/out.txt"; fail "e2e_daemon with OCTD_ZERO_COPY=1 exit $rc"; }
    [ $rc -eq 0 ] && echo "ok e2e_daemon passes through the zero-copy path ($(grep -c '^ok' "$TMP/daemon.txt") checks)"
fi
echo "ok e2e_bench"
