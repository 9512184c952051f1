#!/bin/bash
# e2e_tails.sh - smoke run of the latency-tails benchmark (issue 19.2) on the
# CPU backend, small geometries, ~15 s: `octbench --e2e --only
# volume-klin-disp --runs 2 --frame-rate 20` (the volume with sinc 21
# k-linearisation, dispersion and a frame-mean background, a fresh octd per
# run, with the new [engine] keys passed through --engine-keys) prints a row
# per run, the p99 over the runs, the distribution and a JSON line; bad
# --runs/--engine-keys uses are refused with a message.  No latency is
# asserted (timing is the benchmark's business on a shared machine).
# Exit 0 pass, 77 skip, else fail.
set -u
BIN=${BIN:-bin}
[ -x "$BIN/octbench" ] && [ -x "$BIN/octd" ] || { echo "SKIP e2e_tails: $BIN/octbench not built"; exit 77; }
TMP=$(mktemp -d /tmp/octd-e2e-tails.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/  | /' "$TMP/out.txt" 2>/dev/null | tail -40; exit 1; }

timeout 120 "$BIN/octbench" --e2e --quick --backend cpu --threads 1 --only volume-klin-disp \
    --producer commit --frame-rate 20 --runs 2 --seconds 0.5 \
    --engine-keys "timer_slack_ns=1,prefault=yes,numa=auto" --json "$TMP/t.json" \
    >"$TMP/out.txt" 2>&1 || fail "octbench --runs 2 --only volume-klin-disp exit $?"
[ "$(grep -c '^# volume-klin-disp: run [12] of 2' "$TMP/out.txt")" = 2 ] || fail "not two runs"
[ "$(awk '$1 == "volume-klin-disp" && $2 == "cpu" && $3 == "commit" && $7 + 0 > 0' "$TMP/out.txt" | wc -l)" = 2 ] ||
    fail "not two rows with frames/s > 0"
[ "$(grep -cE '^# tails volume-klin-disp +[12] ' "$TMP/out.txt")" = 2 ] || fail "no per-run tails rows"
grep -q '^# tails volume-klin-disp: p99 over the runs min .* runs with p99 <= 4 ms: [0-2] of 2' "$TMP/out.txt" ||
    fail "no p99-over-runs line"
grep -q '^# tails volume-klin-disp: all [0-9]* frames: p50 .* p99.9 .* max' "$TMP/out.txt" || fail "no distribution"
grep -q '^# tails volume-klin-disp: frames per latency bucket: 0-1 ms: [0-9]' "$TMP/out.txt" || fail "no buckets"
grep -q '"part":"e2e-tails","workload":"volume-klin-disp".*"runs":2' "$TMP/t.json" || fail "no tails JSON line"
# issue 19: where the latency went, from octd's header stamps (t_take_ns, t_sub_ns, t_done_ns)
grep -q "^# stages volume-klin-disp ([1-9][0-9]* frames with octd's stamps" "$TMP/out.txt" || fail "no stages header"
for st in 'commit->take' 'take->submitted' 'submitted->done' 'done->published' 'published->received'; do
    awk -v s="$st" '$3 == "volume-klin-disp:" && $4 == s && NF == 8 { ok = 1 } END { exit !ok }' "$TMP/out.txt" ||
        fail "no stage row $st"
done
# the engine's work lies between take and done: one CPU engine computes inside
# its submit (take->submitted holds it, submitted->done is the microsecond to
# its completion and may print 0.000), a pipelining engine after it
awk '$3 == "volume-klin-disp:" && ($4 == "take->submitted" || $4 == "submitted->done") { w += $5 }
     END { exit !(w > 0) }' "$TMP/out.txt" || fail "take->submitted + submitted->done p50 is 0"
grep -q '"part":"e2e-stages","workload":"volume-klin-disp","frames":[1-9]' "$TMP/t.json" || fail "no stages JSON line"
echo "ok   --only volume-klin-disp --runs 2: $(grep '^# tails volume-klin-disp: p99 over' "$TMP/out.txt" | cut -c3-)"

out=$(timeout 20 "$BIN/octbench" --e2e --quick --backend cpu --only volume --runs 2 2>&1) &&
    fail "--runs without --frame-rate accepted"
echo "$out" | grep -q -- "--runs 2 needs --frame-rate" || fail "--runs without --frame-rate: '$out'"
out=$(timeout 20 "$BIN/octbench" --e2e --runs 0 2>&1) && fail "--runs 0 accepted"
echo "$out" | grep -q -- "--runs 0: must be an integer" || fail "--runs 0: '$out'"
out=$(timeout 20 "$BIN/octbench" --e2e --engine-keys priority 2>&1) && fail "--engine-keys without = accepted"
echo "$out" | grep -q -- "--engine-keys priority: must be KEY=VALUE" || fail "--engine-keys: '$out'"
# a bad key reaches octd, which names it (file:line) and exits
timeout 60 "$BIN/octbench" --e2e --quick --backend cpu --only volume --frame-rate 20 --seconds 0.3 \
    --engine-keys "priority=100" >"$TMP/out.txt" 2>&1 && fail "octd accepted priority=100"
grep -q "\[engine\] priority: '100' is not 0" "$TMP/out.txt" || fail "octd's message for priority=100 not shown"
echo "ok   bad --runs / --engine-keys refused with a message; octd names a bad [engine] key"
echo "ok e2e_tails"
