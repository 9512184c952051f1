#!/bin/bash
# e2e_bench.sh - smoke runs of `octbench --e2e --quick` on the CPU backend
# (small geometries): producer -> ring -> octd -> ZeroMQ subscriber, through
# octd's in-place input ([ring] zero_copy = on for the CPU engine) and through
# the copying one, with both producers: `commit` (headers only; unpaced it
# stays a few frames ahead of what the subscriber received, so it does not
# load the machine) and `copy` paced at a low rate.  Checks that frames
# arrive, that the table and the JSON lines are complete and that octd used
# the asked path.  No rate or loss is asserted: on a busy machine timing is
# the benchmark's business (the table is printed), not a pass/fail test's.
# Smoke runs of `octbench --quick --only ipc` (its rows complete; a row at
# 0 GB/s on a busy machine is a note) and `--only bscan-msi --backend
# cpu` (exit 0, their tables printed), and of `--e2e --only angio` (issue 18).
# `--e2e --sub-tcp` (the endpoint on loopback TCP).
# `--e2e --sub-shm` (the subscriber on [publish] shm_endpoint, copying each
# image out of octd's image area, over two SUB sockets) once this octd
# accepts shm_endpoint (octd --check-config on a config with it).
# Then tests/e2e_daemon.sh once more with [ring] zero_copy = on.
# Exit 0 pass, 77 skip, else fail.  About 30 s.
set -u
BIN=${BIN:-bin}
for p in octbench octd; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_bench: $BIN/$p not built"; exit 77; }
done
TMP=$(mktemp -d /tmp/octd-e2e-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/  | /' "$TMP/out.txt" 2>/dev/null | tail -40; exit 1; }

# rows: work be prod policy rate subs frames/s A-scans/s GB/s p50 p99 max produced processed skip torn drops gaps lost
check_rows() { # $1 workload $2 producer
    awk -v w="$1" -v p="$2" '$1 == w && $2 == "cpu" && $3 == p { n++; if ($7 + 0 <= 0 || NF != 19) bad++ }
                   END { exit !(n >= 1 && bad == 0) }' "$TMP/out.txt" || fail "$1 ($2 producer): no complete row with frames/s > 0"
}
summary() { awk '$2 == "cpu" && NF == 19 { printf "%s %s %s %.0f frames/s; ", $1, $3, $5, $7 }' "$TMP/out.txt"; }

timeout 90 "$BIN/octbench" --e2e --quick --backend cpu --seconds 0.5 --producer commit --zero-copy on \
    --json "$TMP/e2e.json" >"$TMP/out.txt" 2>&1 || fail "octbench --e2e --producer commit (in place) exit $?"
grep -q "frame path: cpu, .*read in place" "$TMP/out.txt" || fail "octd did not read frames in place"
grep -q "commit producer alone (headers only" "$TMP/out.txt" || fail "no commit-producer line"
grep -q "through shared memory" "$TMP/out.txt" && fail "a shared-memory subscriber without --sub-shm"
check_rows volume commit
check_rows bscan commit
[ "$(grep -c '"part":"e2e".*"producer":"commit"' "$TMP/e2e.json")" -ge 2 ] || fail "JSON lines missing"
echo "ok   in place, commit producer: $(summary)"

timeout 60 "$BIN/octbench" --e2e --quick --backend cpu --only bscan --seconds 0.5 --producer copy --frame-rate 200 \
    >"$TMP/out.txt" 2>&1 || fail "octbench --e2e --producer copy --frame-rate 200 (copying path) exit $?"
grep -q "frame path: cpu, .*copied per frame" "$TMP/out.txt" || fail "the copying path was not used for the CPU engine"
check_rows bscan copy
echo "ok   copied, copy producer paced: $(summary)"

# --sub-tcp: octd's endpoint on loopback TCP at a free port, the subscriber on it
timeout 60 "$BIN/octbench" --e2e --quick --backend cpu --only bscan --seconds 0.5 --producer commit --frame-rate 100 \
    --sub-tcp >"$TMP/out.txt" 2>&1 || fail "octbench --e2e --sub-tcp exit $?"
grep -q "^# octd: .*endpoint tcp://127\.0\.0\.1:[0-9]" "$TMP/out.txt" || fail "--sub-tcp: octd's endpoint is not loopback TCP"
check_rows bscan commit
echo "ok   subscriber on loopback TCP: $(summary)"

# angiography (issue 18): frames of R = 4 repeats, struct + decor + ssada + slab_max, paced
timeout 60 "$BIN/octbench" --e2e --quick --backend cpu --only angio --seconds 2 --producer commit \
    --frame-rate 20 --threads 1 >"$TMP/out.txt" 2>&1 || fail "octbench --e2e --only angio exit $?"
check_rows angio commit
echo "ok   angiography groups (R = 4), commit producer paced: $(summary)"

# --sub-shm: images copied out of octd's image area; only where octd knows [publish] shm_endpoint
printf 'geometry: {samples: 256, ascans: 64, lines: 1, sample_type: u16, sample_shift: 0}\nmethods: [cfd]\nproducts: [bscan]\n' >"$TMP/shm.yaml"
printf '[publish]\nendpoint = ipc://%s/shm-check.pub\nshm_endpoint = ipc://%s/shm-check-shm.pub\n[profile]\npath = %s/shm.yaml\n' \
    "$TMP" "$TMP" "$TMP" >"$TMP/shm.ini"
if "$BIN/octd" --config "$TMP/shm.ini" --check-config >/dev/null 2>&1; then
    timeout 60 "$BIN/octbench" --e2e --quick --backend cpu --only bscan --seconds 0.5 --producer commit --frame-rate 100 \
        --sub-shm --sub-sockets 2 --topics bscan/cfd,bscan/msi --json "$TMP/shm.json" >"$TMP/out.txt" 2>&1 ||
        fail "octbench --e2e --sub-shm exit $?"
    grep -q "^# subscriber: through shared memory, on \[publish\] shm_endpoint ipc://" "$TMP/out.txt" ||
        fail "--sub-shm: the subscriber is not on the shm endpoint"
    check_rows bscan commit
    grep -q "^# bscan: subscriber through shared memory: gaps [0-9]*, lost in shm [0-9]* " "$TMP/out.txt" ||
        fail "--sub-shm: no 'lost in shm' line"
    grep -q '"part":"e2e".*"sub_shm":true,"shm_lost":[0-9]' "$TMP/shm.json" || fail "--sub-shm: JSON line without shm_lost"
    echo "ok   subscriber through shared memory (2 SUB sockets): $(summary)$(sed -n 's/^# bscan: subscriber through shared memory: \(gaps [0-9]*, lost in shm [0-9]*\).*/\1/p' "$TMP/out.txt" | head -1)"
else
    echo "ok (skipped) --sub-shm: $BIN/octd does not accept [publish] shm_endpoint"
fi

# smoke runs of the other parts: the IPC ring benchmark and one engine workload
# a smoke run: the table and both rows, complete.  Their GB/s is the
# benchmark's business: beside stress-ng --cpu 2 the quick run's 1 s saw no
# 78 MB volume copied in 3 tries of 3 (2026-12-02; copy p99 169 ms), so a
# row at 0 GB/s is printed as a note, not failed (test_ipc covers the ring)
timeout 120 "$BIN/octbench" --quick --only ipc >"$TMP/out.txt" 2>&1 || fail "octbench --quick --only ipc exit $?"
grep -q "^shared-memory ring" "$TMP/out.txt" || fail "--only ipc: no ring table"
grep -q "^case .*GB/s .*lost .*torn" "$TMP/out.txt" || fail "--only ipc: no table header"
for w in "bscan 500x1024 u16" "volume 200x192x1024 u16"; do
    awk -v w="$w" 'index($0, w) == 1 { n++; if (NF != 12 || $(NF - 7) !~ /^[0-9.]+$/) bad++ }
                   END { exit !(n == 1 && bad == 0) }' "$TMP/out.txt" || fail "--only ipc: no complete row '$w'"
    awk -v w="$w" 'index($0, w) == 1 { exit !($(NF - 7) + 0 > 0) }' "$TMP/out.txt" ||
        echo "note --only ipc: '$w' at 0 GB/s (no frame copied in the quick run's second: a busy machine?)"
done
echo "ok   octbench --quick --only ipc: $(grep -c -E '^(bscan|volume) ' "$TMP/out.txt") rows"
timeout 120 "$BIN/octbench" --quick --only bscan-msi --backend cpu >"$TMP/out.txt" 2>&1 ||
    fail "octbench --quick --only bscan-msi --backend cpu exit $?"
grep -q "^engine workloads" "$TMP/out.txt" || fail "--only bscan-msi: no engine table"
grep -q "^workload .*total .*A-scans/s" "$TMP/out.txt" || fail "--only bscan-msi: no table header"
awk '$1 == "bscan-msi" && $2 == "cpu" && /seed-cpu/ { n++ } END { exit !(n == 1) }' "$TMP/out.txt" ||
    fail "--only bscan-msi: no cpu row with the seed speed-up"
[ "$(grep -c -E '^(bscan|volume|msi|li)-' "$TMP/out.txt")" -eq 1 ] || fail "--only bscan-msi ran other workloads"
echo "ok   octbench --quick --only bscan-msi --backend cpu: $(awk '$1 == "bscan-msi" { print $10 " ms" }' "$TMP/out.txt")"

# bad options: a clear refusal, no child left behind
"$BIN/octbench" --e2e --only nosuch >"$TMP/out.txt" 2>&1 && fail "--only nosuch accepted"
grep -q "'nosuch': unknown" "$TMP/out.txt" || fail "--only nosuch: no clear message"
"$BIN/octbench" --e2e --producer dma >"$TMP/out.txt" 2>&1 && fail "--producer dma accepted"
grep -q "must be copy, commit or both" "$TMP/out.txt" || fail "--producer dma: no clear message"
"$BIN/octbench" --e2e --hostile 5 >"$TMP/out.txt" 2>&1 && fail "--hostile 5 accepted"
grep -q "must be STALLED:CHURNING" "$TMP/out.txt" || fail "--hostile 5: no clear message"
"$BIN/octbench" --e2e --hostile 1:1 --hostile-cpus 3-x >"$TMP/out.txt" 2>&1 && fail "--hostile-cpus 3-x accepted"
grep -q "hostile-cpus 3-x: must be a CPU list" "$TMP/out.txt" || fail "--hostile-cpus 3-x: no clear message"
"$BIN/octbench" --e2e --sub-shm --publish-keys shm_endpoint=ipc:///tmp/x >"$TMP/out.txt" 2>&1 &&
    fail "--sub-shm with shm_endpoint in --publish-keys accepted"
grep -q "sub-shm sets \[publish\] shm_endpoint itself" "$TMP/out.txt" || fail "--sub-shm --publish-keys shm_endpoint=: no clear message"
echo "ok   bad --only / --producer / --hostile / --hostile-cpus / --sub-shm with shm_endpoint refused with a clear message"
# the daemon's own end-to-end test (images = octproc's, control values,
# snapshot/review/save, reload, ring restart, stop) through the in-place input
if [ -f tests/e2e_daemon.sh ]; then
    OCTD_ZERO_COPY=on timeout 180 bash tests/e2e_daemon.sh >"$TMP/daemon.txt" 2>&1
    rc=$?
    [ $rc -eq 77 ] && echo "ok (skipped) e2e_daemon through the in-place input: $(grep ^SKIP "$TMP/daemon.txt")"
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || { cp "$TMP/daemon.txt" "$TMP/out.txt"; fail "e2e_daemon with zero_copy = on exit $rc"; }
    [ $rc -eq 0 ] && echo "ok   e2e_daemon passes through the in-place input ($(grep -c '^ok' "$TMP/daemon.txt") checks)"
fi
echo "ok e2e_bench"
