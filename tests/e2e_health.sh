#!/bin/bash
# e2e_health.sh - health that agrees and no silent states (issue 14.2, 14.4,
# 14.5), CPU backend, ~30 s:
#  a. producers that pause: a producer built from the tree (cc -Iipc, with
#     $BUILD/liboctipc.a) commits 3 frames 3 s apart with the library's
#     heartbeat thread on: octd never re-attaches (ring_reattaches 0) and
#     processes all 3; the same without the thread but with [ring]
#     stale_ms = 6000 in octd.ini (SIGHUP)
#  b. counters add up: octsim -> octd, a review of 1.5 s, online, producer
#     stopped: frames_seen = frames_processed + frames_skipped + frames_torn,
#     review re-processing only in frames_reprocessed
#  c. no silent image loss: a profile whose products the ring cannot produce
#     (en-face/confocal on a B-scan ring) after SIGHUP: frames processed,
#     none published, and a warning in the status block (warnings,
#     warning_count), octctl status (summary=) and the log; a valid profile
#     clears it; on a volume ring, enface.start past the last depth: applied
#     with a warning naming enface.start and the depth
#  d. a control block whose seq goes back (re-created): a warning while octd
#     ignores it, then taken after 1 s unchanged (logged), and set works on
# Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}
for p in octd octsim octctl; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_health: $BIN/$p not built"; exit 77; }
done
[ -f "$BUILD/liboctipc.a" ] || { echo "SKIP e2e_health: no $BUILD/liboctipc.a (make lib)"; exit 77; }
command -v "$CC" >/dev/null || { echo "SKIP e2e_health: no C compiler"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-health.XXXXXX)
N=/octe2e-h$$
. tests/helpers/e2e_lib.sh
E2E_LOGS=("$T/octd.log" "$T/prod.log")
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }
profile() { # PRODUCTS
    printf 'methods: [cfd]\nfreq_cutoff: 2\nenface: {start: 4, step: 2, count: 4}\nproducts: [%s]\n' "$1" >"$T/profile.yaml"
}
ini() { # EXTRA-RING-LINE
    printf '[engine]\nbackend = cpu\nthreads = 1\n[ring]\nframes = %s-frames\ncontrol = %s-control\nstatus = %s-status\n%s\n[publish]\nendpoint = ipc://%s/pub\n[profile]\npath = %s/profile.yaml\n' \
        "$N" "$N" "$N" "$1" "$T" "$T" >"$T/octd.ini"
}
profile bscan
ini ""
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 10 '[ "$(st state)" = online ]' || fail "octd did not start"

# ---- a. a producer that pauses 3 s between frames ----
cat >"$T/prod.c" <<'CEOF'
#include "oct_ipc.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* prod RING FRAMES PAUSE_S THREAD(0/1) */
int main(int argc, char **argv)
{
    oct_ring_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.geom.samples = 256; cfg.geom.ascans = 16; cfg.geom.lines = 1;
    cfg.geom.sample_type = OCT_SAMPLE_U16;
    oct_error e;
    oct_ring_producer *p;
    if (argc < 5 || oct_ring_producer_create(&p, argv[1], &cfg, &e) != OCT_OK) { fprintf(stderr, "create: %s\n", argc < 5 ? "usage" : e.msg); return 1; }
    if (argv[4][0] == '1' && oct_ring_producer_heartbeat_thread(p, true, &e) != OCT_OK) { fprintf(stderr, "%s\n", e.msg); return 1; }
    int frames = atoi(argv[2]), pause_s = atoi(argv[3]);
    sleep(1); /* octd attaches */
    for (int n = 0; n < frames; n++) {
        unsigned short *f = oct_ring_producer_begin(p);
        for (int i = 0; i < 256 * 16; i++) f[i] = (unsigned short)(1000 + (i * 37 + n) % 900);
        oct_ring_producer_commit(p, 500 + n, oct_time_realtime_ns());
        fprintf(stderr, "committed %d\n", n);
        if (n + 1 < frames) sleep(pause_s);
    }
    sleep(1);
    oct_ring_producer_close(p, true);
    return 0;
}
CEOF
sed -i 's/#include <stdio.h>/#include <stdio.h>\n#include <stdlib.h>/' "$T/prod.c"
"$CC" -std=c11 -Wall -Werror -Iipc -o "$T/prod" "$T/prod.c" "$BUILD/liboctipc.a" -lrt -pthread 2>"$T/cc.log" ||
    fail "cc -Iipc prod.c: $(head -3 "$T/cc.log")"
pause_run() { # THREAD LABEL
    local r0 p0 pid
    p0=$(st frames_processed)
    "$T/prod" "$N-frames" 3 3 "$1" 2>>"$T/prod.log" &
    pid=$!
    PIDS+=($pid)
    wait_for 5 '[ "$(st frames_processed)" -gt $p0 ]' || fail "$2: octd does not attach"
    r0=$(st ring_reattaches) # a new ring counts once; the pauses must not add any
    wait $pid || fail "producer ($2): $(tail -2 "$T/prod.log")"
    wait_for 5 '[ "$(st frames_processed)" -ge $((p0 + 3)) ]' ||
        fail "$2: frames_processed $p0 -> $(st frames_processed), expected +3"
    [ "$(st ring_reattaches)" = "$r0" ] ||
        fail "$2: octd re-attached $(( $(st ring_reattaches) - r0 )) time(s) during the pauses"
    grep -q "heartbeat is" "$T/octd.log" && fail "$2: octd saw a stale heartbeat"
}
pause_run 1 "heartbeat thread"
echo "ok   a. producer pausing 3 s between frames with oct_ring_producer_heartbeat_thread(): 3 frames, no re-attach"
ini "stale_ms = 6000"
kill -HUP $OCTD
wait_for 5 'grep -q "reloaded" "$T/octd.log"' || fail "SIGHUP"
pause_run 0 "[ring] stale_ms = 6000"
echo "ok   a. the same without the thread, [ring] stale_ms = 6000: no re-attach"

# ---- b. counters add up ----
"$BIN/octsim" --ring "$N-frames" --samples 256 --ascans 16 --lines 1 --rate 4000 --quiet 2>"$T/sim.log" &
SIM=$!
PIDS+=($SIM)
wait_for 10 '[ "$(st ring_state)" = attached ] && [ "$(st frames_processed)" -gt 5 ] 2>/dev/null' || fail "octd does not process octsim's ring"
"${CTL[@]}" review >/dev/null || fail "review"
sleep 1.5
"${CTL[@]}" online >/dev/null || fail "online"
sleep 0.5
kill $SIM; wait $SIM 2>/dev/null
sleep 0.5
read -r seen proc skip torn repro < <("${CTL[@]}" status | awk -F= '
    $1 == "frames_seen" {a=$2} $1 == "frames_processed" {b=$2} $1 == "frames_skipped" {c=$2}
    $1 == "frames_torn" {d=$2} $1 == "frames_reprocessed" {e=$2} END {print a, b, c, d, e}')
[ "$seen" -gt 0 ] && [ "$seen" = $((proc + skip + torn)) ] ||
    fail "frames_seen $seen != processed $proc + skipped $skip + torn $torn"
[ "$repro" -ge 1 ] || fail "review re-processing not counted in frames_reprocessed ($repro)"
[ "$skip" -ge 1 ] || fail "ring frames during review not counted as skipped ($skip)"
echo "ok   b. frames_seen $seen = processed $proc + skipped $skip + torn $torn; reprocessed $repro apart"

# ---- c. warnings: products the ring cannot produce, enface.start past the last depth ----
"$BIN/octsim" --ring "$N-frames" --samples 256 --ascans 16 --lines 1 --rate 4000 --quiet 2>"$T/sim.log" &
SIM=$!
PIDS+=($SIM)
wait_for 10 '[ "$(st ring_state)" = attached ]' || fail "no ring"
profile "enface, confocal"
kill -HUP $OCTD
wait_for 10 '[ "$(st warning_count)" -ge 1 ] 2>/dev/null' ||
    fail "products [enface, confocal] on a B-scan ring: no warning ($(st warnings))"
pub0=$(st images_published) p0=$(st frames_processed)
sleep 1
[ "$(st images_published)" = "$pub0" ] && [ "$(st frames_processed)" -gt "$p0" ] ||
    fail "expected frames processed and no image published"
st warnings | grep -q "products \[enface, confocal\] need a volume ring" || fail "warnings: $(st warnings)"
st summary | grep -q "1 warning: products \[enface, confocal\]" || fail "summary: $(st summary)"
grep -q "<4>octd: products \[enface, confocal\] need a volume ring" "$T/octd.log" || fail "warning not logged"
profile bscan
kill -HUP $OCTD
wait_for 10 '[ "$(st warning_count)" = 0 ]' || fail "the warning stays after a good profile: $(st warnings)"
echo "ok   c. products the B-scan ring cannot produce: warned in status, summary and log; cleared after a good profile"
kill $SIM; wait $SIM 2>/dev/null
profile "enface, confocal"
kill -HUP $OCTD
"$BIN/octsim" --ring "$N-frames" --samples 256 --ascans 16 --lines 4 --rate 4000 --quiet 2>"$T/sim.log" &
SIM=$!
PIDS+=($SIM)
wait_for 10 '[ "$(st ring_geometry)" = "4x16x256 u16" ] && [ "$(st warning_count)" = 0 ]' ||
    fail "volume ring: $(st ring_geometry), warnings $(st warnings)"
out=$("${CTL[@]}" set enface.start=200 2>&1) || fail "enface.start=200 (past the last depth 128) refused: $out"
wait_for 5 'st warnings | grep -q "enface.start 200 is past the last depth of cfd (128)"' ||
    fail "enface.start past the last depth: no warning ($(st warnings))"
"${CTL[@]}" set enface.start=4 >/dev/null || fail "enface.start=4"
wait_for 5 '[ "$(st warning_count)" = 0 ]' || fail "warning stays: $(st warnings)"
echo "ok   c. enface.start past the last depth: applied, warned ('$(grep -o 'enface.start 200 is past[^;]*' "$T/octd.log" | head -1)'), cleared"

# ---- d. a control block that went back (re-created by a writer) ----
g0=$("$PYTHON" - "/dev/shm$N-control" <<'PYEOF'
import mmap, struct, sys
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 4096)
    s = struct.unpack_from("<Q", m, 64)[0]
    if s // 2 > 1:
        struct.pack_into("<Q", m, 64, 2)  # seq 2: generation 1, the fields as they are
    print(s // 2)
PYEOF
)
[ "${g0:-0}" -gt 1 ] || fail "control generation ${g0:-?}: expected > 1 after the sets above"
wait_for 5 'grep -q "<4>octd: control block went back from generation $g0 to 1 (re-created?)" "$T/octd.log"' ||
    fail "control seq back at generation 1 from $g0: no warning logged ($(st warnings))"
wait_for 5 '[ "$(st applied_gen)" = 1 ]' || fail "generation 1 never taken: applied_gen $(st applied_gen)"
grep -q "<5>octd: control block went back from generation $g0 to 1 and stayed there for 1 s" "$T/octd.log" ||
    fail "taking generation 1 not logged"
wait_for 5 '[ "$(st warning_count)" = 0 ]' || fail "warning stays after generation 1 was taken: $(st warnings)"
"${CTL[@]}" set enface.start=6 >/dev/null || fail "enface.start=6 after the block went back"
echo "ok   d. control block back from generation $g0 to 1: warned while ignored, taken after 1 s (logged), set works on"
exit 0
