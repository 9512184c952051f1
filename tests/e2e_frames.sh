#!/bin/bash
# e2e_frames.sh - octd's frame path (issue 21): the frame review uses, memory
# after large work, and subscribers that stall or churn.  CPU backend by
# default; BACKEND=cuda runs the same on a GPU machine.  Producers are paced
# (tests/helpers/octfault.py, constant-valued frames per frame_id) or paced
# by octd itself (octbench's commit producer); no timing is asserted except
# one generous with-vs-without ratio measured in the same run.
#  1. review: without a snapshot, the newest frame; a second review (after
#     `online` and newer frames) a newer frame, and `save raw` saves that one
#     (its values are those of its frame_id); a snapshot is what review shows
#     until the next `online`; after a producer restart with a new geometry,
#     review and save raw use the new ring's frame
#  2. memory: after a 16 MiB-frame geometry, review and an image save of it,
#     back on a small geometry, octd's RSS is within 10 % of its level before;
#     ring messages in the log name the ring once
#  3. subscribers: `octbench --e2e --quick --producer commit --hostile ...`:
#     unpaced rate and p99 without and with 1 / 50 / 200 stalled and 200
#     churning / 50 stalled + 100 churning subscribers (the frame loop's rate
#     and commit -> published p99 and the delivery's, r5); pass: with stalled
#     ones octd's frame loop keeps at least half its rate without them in one
#     of three tries (before issue 21: 15-21 %), the rest is printed (octd CPU per frame, p99, loss
#     at 90 %)
# PARTS="review memory subscribers" (the default) picks sections.
# Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
BACKEND=${BACKEND:-cpu}
PARTS=${PARTS:-review memory subscribers}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
FAULT=(tests/helpers/octfault.py)
for p in octd octctl octbench; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_frames: $BIN/$p not built"; exit 77; }
done
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP e2e_frames: no numpy for $PYTHON"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-frames.XXXXXX)
N=/octe2e-fr$$
. tests/helpers/e2e_lib.sh
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 20)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$OCTD/status"; }
bg_produce() { # in the background: PROD is the producer's own pid
    "$PYTHON" "${FAULT[@]}" produce --ring "$N-frames" "$@" 2>>"$T/prod.log" &
    PROD=$!
    PIDS+=($PROD)
}
stop_produce() { kill $PROD 2>/dev/null; wait $PROD 2>/dev/null; }
processing() { # SECONDS [FRAMES]: frames_processed grows by FRAMES (1)
    local want
    want=$(($(st frames_processed) + ${2:-1}))
    wait_for "$1" '[ "$(st frames_processed)" -ge "$want" ]'
}
cmd() { # octctl command; prints its message, fails unless ok
    local out
    out=$("${CTL[@]}" "$@" 2>&1) || fail "octctl $*: $out"
    echo "$out"
}
frame_of() { sed -n 's/.*\(reviewing\|kept\) frame \([0-9]*\).*/\2/p'; }
# SAVED-ACK FRAME_ID L N M: the saved raw frame is that frame (shape, values)
check_raw() {
    local f
    f=$(echo "$1" | grep -o '[^ ]*\.npy' | head -1)
    "$PYTHON" - "$T/save/$(basename "$f")" "$2" "$3" "$4" "$5" <<'EOF' || fail "save raw: $1 is not frame $2 ($3x$4x$5)"
import sys, numpy as np
f, fid, L, N, M = sys.argv[1], *map(int, sys.argv[2:])
a = np.load(f)
want = 100 + (fid * 37) % 3900  # octfault.py value_of
assert a.shape == (L, N, M), (a.shape, (L, N, M))
assert (a == want).all(), ("values", np.unique(a)[:5], want)
EOF
}
t_start=$SECONDS

cat >"$T/profile.yaml" <<EOF
methods: [cfd]
window: {type: rect}
freq_cutoff: 0
scale: linear
products: [bscan, enface, confocal, f32]
EOF
mkdir -p "$T/save"
cat >"$T/octd.ini" <<EOF
[engine]
backend = $BACKEND
threads = 1
[ring]
frames = $N-frames
control = $N-control
status = $N-status
policy = latest
[publish]
endpoint = ipc://$T/pub
[profile]
path = $T/profile.yaml
[save]
directory = $T/save
[log]
level = info
EOF
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 10 '[ "$(st state)" = online ] 2>/dev/null' || fail "octd did not start"

# ---- 1. review uses the right frame -------------------------------------------------
if part review; then
bg_produce --geom 256,32,1 --fps 50 --id0 1000
processing 10 3 || fail "no frames"
r1=$(cmd review | frame_of)
[ -n "$r1" ] && [ "$r1" -ge 1000 ] || fail "review without a snapshot: frame '$r1'"
check_raw "$(cmd save raw)" "$r1" 1 32 256
cmd online >/dev/null
wait_for 10 '[ "$(st last_frame_id)" -ge $((r1 + 10)) ]' || fail "no newer frames after online"
r2=$(cmd review | frame_of)
[ "$r2" -ge $((r1 + 10)) ] || fail "second review (after online and 10 newer frames) shows frame $r2, the first was $r1"
check_raw "$(cmd save raw)" "$r2" 1 32 256
cmd online >/dev/null
# a snapshot is what review shows, however many frames come after it
s1=$(cmd snapshot | frame_of)
wait_for 10 '[ "$(st last_frame_id)" -ge $((s1 + 10)) ]' || fail "no frames after the snapshot"
r3=$(cmd review | frame_of)
[ "$r3" = "$s1" ] || fail "review after snapshot $s1 shows frame $r3"
check_raw "$(cmd save raw)" "$s1" 1 32 256
cmd online >/dev/null
wait_for 10 '[ "$(st last_frame_id)" -ge $((s1 + 10)) ]' || fail "no frames after online"
# a producer restart with a new geometry: the new ring's frames
stop_produce
bg_produce --geom 128,16,1 --fps 50 --id0 50000
wait_for 10 '[ "$(st ring_geometry)" = "1x16x128 u16" ]' || fail "new geometry: $(st ring_geometry)"
wait_for 10 '[ "$(st last_frame_id)" -ge 50003 ]' || fail "no frames of the new ring"
r4=$(cmd review | frame_of)
[ "$r4" -ge 50000 ] || fail "review after a producer restart shows frame $r4 (first ring's: $s1)"
check_raw "$(cmd save raw)" "$r4" 1 16 128
cmd online >/dev/null
echo "ok   review: newest frame $r1, after online a newer one $r2, snapshot $s1 kept until online," \
    "after a restart with a new geometry $r4; save raw saved each (shape, values)"
stop_produce
fi

# ---- 2. memory comes back ---------------------------------------------------------------
cycle() { # snapshot, review, save images + raw, online
    cmd snapshot >/dev/null && cmd review >/dev/null && cmd save images >/dev/null &&
        cmd save raw >/dev/null && cmd online >/dev/null
}
if part memory; then
bg_produce --geom 256,32,8 --fps 50
processing 10 5 || fail "no frames (small volume)"
cycle || fail "small cycle"
processing 10 20 || fail "no frames after the small cycle"
sleep 1
rss0=$(rss_kb)
stop_produce
bg_produce --geom 2048,512,8 --fps 4 # a 16 MiB frame
wait_for 20 '[ "$(st ring_geometry)" = "8x512x2048 u16" ]' || fail "large geometry: $(st ring_geometry)"
processing 30 3 || fail "no frames (16 MiB frames)"
cycle || fail "large cycle"
processing 30 2 || fail "no frames after the large cycle"
rss_big=$(rss_kb)
stop_produce
bg_produce --geom 256,32,8 --fps 50
wait_for 20 '[ "$(st ring_geometry)" = "8x32x256 u16" ]' || fail "back to small: $(st ring_geometry)"
processing 10 20 || fail "no frames after the large work"
cycle || fail "small cycle after the large work"
processing 10 20 || fail "no frames after the last cycle"
sleep 1
rss1=$(rss_kb)
echo "     RSS: $((rss0 / 1024)) MiB before, $((rss_big / 1024)) MiB with 16 MiB frames, $((rss1 / 1024)) MiB after"
[ "$rss1" -le $((rss0 + rss0 / 10)) ] ||
    fail "RSS $rss1 kB after the large work, more than 10 % above $rss0 kB before it"
echo "ok   memory: RSS back within 10 % after a 16 MiB-frame geometry, its review and image save" \
    "($((rss0 / 1024)) -> $((rss_big / 1024)) -> $((rss1 / 1024)) MiB)"
stop_produce
fi
kill -TERM $OCTD
wait $OCTD 2>/dev/null
OCTD=""
# ring messages name the ring once (issue 21.5): detaches above were logged
if part review || part memory; then
    grep -q "ring $N-frames.*; waiting for it" "$T/octd.log" || fail "no ring detach logged"
    grep "ring $N-frames.*ring $N-frames" "$T/octd.log" && fail "a ring message names the ring twice"
fi

# ---- 3. stalled and churning subscribers ------------------------------------------------
# Unpaced (the commit producer stays a few frames ahead of what the
# subscriber received): the rate with hostile subscribers beside the rate
# without them, in the same run, item by item.  A stalled subscriber used to
# make every frame wait ~2 ms for a product buffer (15-21 % of the rate).
if part subscribers; then
HOSTILE=${HOSTILE:-1:0,50:0,200:0,0:200,50:100}
hostile_run() { # ITEMS -> $T/hostile.txt
    timeout 300 "$BIN/octbench" --e2e --quick --backend "$BACKEND" --threads 1 --only bscan \
        --seconds 1 --producer commit --hostile "$1" >"$T/hostile.txt" 2>&1
}
hostile_run "$HOSTILE" || { cat "$T/hostile.txt"; fail "octbench --hostile exit $?"; }
grep '^# bscan: [0-9]' "$T/hostile.txt" | sed 's/^# /     /'
[ "$(grep -c '^# hostile bscan' "$T/hostile.txt")" = "$(echo "$HOSTILE" | tr ',' '\n' | wc -l)" ] ||
    { cat "$T/hostile.txt"; fail "--hostile: not every item measured"; }
# the subscribers in their own process (their CPU is not the measuring subscriber's), and
# octd's own rate and CPU per thread reported (issue 21.2)
grep -q "subscribers (in a child process, " "$T/hostile.txt" &&
    grep -q "octd's own count" "$T/hostile.txt" && grep -q "^# bscan: octd CPU ms per frame.*frame loop" "$T/hostile.txt" ||
    { cat "$T/hostile.txt"; fail "--hostile: no child process, octd rate or CPU per thread reported"; }
# stalled only: octd's frame loop (fl_rate_ratio: the producer follows
# octd's published count) keeps at least half its rate without them in one of
# three tries (the machine may be busy during one of the two phases of a try).
# The delivery to the measuring subscriber (rate_ratio) is printed, not
# asserted: on this 2-core machine it swung from 18 % to 56 % between runs of
# the same code (main 73bfcb4 too, 2026-12-01), a measurement of the machine.
fl_rate() { awk '{ for (i = 6; i < NF; i++) if ($i == "fl_rate_ratio") print $(i + 1) }'; }
for item in $(awk '$1 == "#" && $2 == "hostile" && $5 ~ /:0$/' "$T/hostile.txt" |
              while read -r line; do r=$(echo "$line" | fl_rate)
                  awk -v r="$r" 'BEGIN { exit !(r < 0.5) }' && echo "$line" | awk '{ print $5 }'; done); do
    ok=""
    for try in 2 3; do
        hostile_run "$item" || fail "octbench --hostile $item (try $try) exit $?"
        grep '^# bscan: [0-9]' "$T/hostile.txt" | sed "s/^# /     try $try: /"
        r=$(grep '^# hostile' "$T/hostile.txt" | fl_rate)
        awk -v r="$r" 'BEGIN { exit !(r >= 0.5) }' && { ok=1; break; }
    done
    [ -n "$ok" ] || fail "stalled subscribers $item: octd's frame loop below half its rate without them in 3 tries"
done
echo "ok   stalled subscribers: the frame loop's rate stays (>= 50 % asserted); the delivery and churning ones reported"
fi
echo "PASS e2e_frames ($((SECONDS - t_start)) s)"
