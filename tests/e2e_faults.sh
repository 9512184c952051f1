#!/bin/bash
# e2e_faults.sh - octd under faults (issue 8.2, CPU backend, policy all).
# Hostile peers come from tests/helpers/octfault.py, written from SPEC 3
# (not from the C library).  Every frame a helper writes is constant-valued
# per frame_id, so a subscriber can tell a torn image from a legitimate one.
#  1. producer SIGKILLed inside begin/commit and restarted 20x (same / new
#     geometry) + octsim SIGKILLed 3x: re-attach, go on, no torn image
#  2. producer lapping a 2-slot ring during the copies: torn counted, never
#     published; consumer lapped: counted (seen = processed + skipped + torn)
#  3. producer truncating the ring under octd's mapping (to 0 and to the
#     header): no SIGBUS death, detach, re-attach to the next ring
#  4. control writer dying inside a write (odd seq, garbage methods and a NaN
#     gsc half-written): octd goes on; the next writer's generation is built
#     on top of those fields (ipc/control.c), so octd rejects it as a whole;
#     octd writes the last good values back and the writer's next one applies
#  5. FAULT_CTL_GENS [100000] random control generations: each applied or rejected
#  6. subscribers that connect, stall and vanish (200)
#  7. save directory renamed away during saves: ok or failed, nothing partial
#     anywhere (neither in the new directory nor in the renamed ones)
#  8. masks replaced by a bad file before SIGHUP: refused, config stays
#  9. SIGHUP storm (100): alive, values intact, no fd leak
# 10. SIGTERM while waiting for the ring, processing, in review, saving (sent
#     once the save's temporary file exists): exit 0 within 1 s, the save
#     complete or absent
# 11. security: modes of the shared objects (none world-writable)
# Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
GENS=${FAULT_CTL_GENS:-100000}
FAULT=(tests/helpers/octfault.py)
for p in octd octsim octctl octgrab; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_faults: $BIN/$p not built"; exit 77; }
done
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP e2e_faults: no numpy for $PYTHON"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-faults.XXXXXX)
N=/octe2e-f$$
. tests/helpers/e2e_lib.sh
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }
nfd() { ls "/proc/$OCTD/fd" | wc -l; }
fault() { "$PYTHON" "${FAULT[@]}" "$@"; }
produce() { fault produce --ring "$N-frames" "$@"; }
# in the background: PROD is the producer's own pid (a backgrounded function
# would be a subshell whose kill leaves the producer running)
bg_produce() {
    "$PYTHON" "${FAULT[@]}" produce --ring "$N-frames" "$@" 2>>"$T/prod.log" &
    PROD=$!
    PIDS+=($PROD)
}
processing() { # SECONDS: frames_processed grows
    local p0
    p0=$(st frames_processed)
    wait_for "$1" '[ "$(st frames_processed)" -gt "$p0" ]'
}
t_start=$SECONDS

M=256 R=8
"$PYTHON" - "$T" $M $R <<'EOF' || fail "test data"
import sys, numpy as np
t, M, R = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = np.arange(M)
np.save(f"{t}/masks.npy", np.stack([1000 * np.cos(2 * np.pi * (4 + 5 * r) * n / M)
                                    for r in range(R)]).astype(np.float32))
np.save(f"{t}/badmasks.npy", np.zeros((R, M // 2), np.float32))
EOF
cat >"$T/profile.yaml" <<EOF
methods: [cfd, msi]
window: {type: rect}
freq_cutoff: 0
msi:
  masks: {file: masks.npy, count: $R}
  lag_window: [-2, 2]
scale: linear
products: [bscan, f32]
EOF
mkdir -p "$T/save"
octd_ini() { # NAME-PREFIX
    cat <<EOF
[engine]
backend = cpu
threads = 1
[ring]
frames = $1-frames
control = $1-control
status = $1-status
policy = all
[publish]
endpoint = ipc://$T/pub
[profile]
path = $T/profile.yaml
[save]
directory = $T/save
[log]
level = info
EOF
}
octd_ini "$N" >"$T/octd.ini"
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 20 '[ "$(st state)" = online ] 2>/dev/null' || fail "octd did not start"

# ---- 1. producer killed inside begin/commit, restarted 20 times -------------
fault check --endpoint "ipc://$T/pub" --seconds 600 --timeout 4 --min 20 >"$T/check1.txt" 2>&1 &
CHECK=$!
PIDS+=($CHECK)
sleep 0.3
r_prev=$(st ring_reattaches)
for i in $(seq 1 20); do
    g=$([ $((i % 2)) = 1 ] && echo "256,32,1" || echo "256,16,1")
    p0=$(st frames_processed)
    produce --geom $g --fps 100 --frames 30 --id0 $((i * 1000)) --die-mid-frame 2>>"$T/prod.log"
    rc=$?
    [ $rc = 137 ] || fail "producer $i: exit $rc, not killed inside a frame"
    wait_for 20 '[ "$(st frames_processed)" -gt "$p0" ]' || fail "producer $i: no frame processed"
    # first attach is not a re-attach
    if [ $i -gt 1 ]; then
        wait_for 20 '[ "$(st ring_reattaches)" -gt "$r_prev" ]' || fail "producer $i: ring_reattaches stays $r_prev"
        r=$(st ring_reattaches)
        r_prev=$r
    fi
    alive || fail "octd died after producer $i"
done
n16=$(st ring_geometry)
wait $CHECK
rc=$?
[ $rc = 0 ] || fail "torn or foreign images after producer deaths: $(cat "$T/check1.txt")"
echo "ok   20 producers SIGKILLed inside a frame: re-attached each time (reattaches $(st ring_reattaches)," \
    "last $n16), $(cut -d: -f2 "$T/check1.txt" | head -1)"
for i in 1 2 3; do
    # the count before the producer starts: read after it, octd may already
    # have re-attached (seen on a loaded machine)
    r0=$(st ring_reattaches)
    "$BIN/octsim" --ring "$N-frames" --samples 128 --ascans $((8 * i)) --lines 1 --quiet 2>/dev/null &
    SIM=$!
    wait_for 20 '[ "$(st ring_reattaches)" -gt "$r0" ]' || fail "octsim $i: no re-attach"
    processing 5 || fail "octsim $i: no frames"
    kill -KILL $SIM; wait $SIM 2>/dev/null
done
echo "ok   octsim SIGKILLed 3x while unpaced: re-attached (geometry $(st ring_geometry))"

# ---- 2. torn reads and a lapped consumer -------------------------------------
# unpaced: the producer laps the 2-slot ring all the time, so copies get torn
bg_produce --geom 2048,128,1 --slots 2 --fps 0 --frames 0
processing 10 || fail "no frames from the 2-slot producer"
t0=$(st frames_torn) s0=$(st frames_skipped)
fault check --endpoint "ipc://$T/pub" --seconds 3 --timeout 4 --min 5 >"$T/check2.txt" 2>&1 &
CHECK=$!
PIDS+=($CHECK)
wait $CHECK || fail "torn images published: $(cat "$T/check2.txt")"
# tearing is a race: under heavy load it can take longer to catch one
wait_for 20 '[ "$(st frames_torn)" -gt "$t0" ]' || fail "no torn read detected ($t0 -> $(st frames_torn))"
wait_for 20 '[ "$(st frames_skipped)" -gt "$s0" ]' || fail "lapped (policy all) but nothing counted as skipped"
kill $PROD; wait $PROD 2>/dev/null
wait_for 20 '[ "$(st frames_seen)" = "$(($(st frames_processed) + $(st frames_skipped) + $(st frames_torn)))" ]' ||
    fail "counters: seen $(st frames_seen) != processed $(st frames_processed) + skipped $(st frames_skipped) + torn $(st frames_torn)"
t1=$(st frames_torn) s1=$(st frames_skipped)
echo "ok   2-slot ring lapped during copies: torn $((t1 - t0)), lapped/skipped $((s1 - s0))," \
    "seen = processed + skipped + torn; $(cut -d: -f2 "$T/check2.txt" | head -1)"

# ---- 3. ring truncated under octd's mapping --------------------------------------
for size in 0 4096 8192; do
    rm -f "$T/trunc" "$T/go"
    # truncate only once octd has attached to this ring and reads it (on a
    # loaded machine it may attach after a fixed count of frames: the object
    # it then finds is already short, refused at open, and no read faults)
    r0=$(st ring_reattaches)
    bg_produce --geom 256,32,1 --fps 200 --frames 0 --truncate $size --truncate-go "$T/go" --ready "$T/trunc"
    wait_for 20 '[ "$(st ring_reattaches)" -gt "$r0" ]' || fail "octd did not attach the truncating producer's ring"
    processing 5 || fail "no frames from the truncating producer"
    touch "$T/go"
    wait_for 20 '[ -f "$T/trunc" ]' || fail "truncating producer"
    sleep 0.6
    alive || fail "octd died (SIGBUS?) when the ring shrank to $size bytes"
    wait_for 20 '[ "$(st ring_geometry)" = "" ] || grep -q "shrank" "$T/octd.log"' || true
    kill $PROD; wait $PROD 2>/dev/null
    produce --geom 256,32,1 --fps 100 --frames 10 2>>"$T/prod.log" || fail "producer after truncation"
    alive || fail "octd died after the ring shrank to $size bytes"
done
# Which detection comes first (a read faulting, or the consumer's size check
# every 200 ms) is a race: beside other work only the size check may be met.
# test_ipc ring_sigbus_truncated takes the SIGBUS path for certain.
grep -q "shrank to [0-9]* bytes\|shrank under" "$T/octd.log" || fail "no shrink detected"
grep -q "shrank under its mapping (SIGBUS" "$T/octd.log" ||
    echo "note the SIGBUS path was not met this time (the size check came first; test_ipc covers it)"
echo "ok   ring truncated to 0 / 4096 / 8192 bytes under the mapping: octd alive," \
    "$(grep -c shrank "$T/octd.log") detach(es) logged, re-attached after"

# ---- 4. a control writer dies inside a write --------------------------------------
bg_produce --geom 256,32,1 --fps 200
processing 5 || fail "no frames before the dead writer"
g0=$(st applied_gen)
v_good=$("${CTL[@]}" get methods display.bscan.gsc display.enface.gsc | tr "\n" " ")
fault ctl-die --control "$N-control"
[ $? = 137 ] || fail "ctl-die did not die"
p0=$(st frames_processed)
sleep 1.2
alive || fail "octd died after a dead control writer"
hb=$(st heartbeat_age_ms)
[ "${hb%.*}" -lt 500 ] || fail "status heartbeat is $hb ms old (octd hangs on the odd seq)"
[ "$(st frames_processed)" -gt $((p0 + 20)) ] || fail "frames stopped after a dead control writer"
[ "$(st applied_gen)" = "$g0" ] || fail "a half-written generation was applied"
# Recovery.  A writer that finds the odd seq completes a new generation on
# top of the block as it is (ipc/control.c write_locked): the dead writer's
# half-written fields (methods = 0xffffffff, gsc[bscan] = NaN) stay in it,
# although this writer only changes an unrelated key.  octd validates the
# generation as a whole and rejects it (nothing of it is applied), then
# writes the last good values back as a new generation; the writer's next
# generation is applied.
out=$("${CTL[@]}" set display.enface.gsc=0.5)
rc=$?
[ $rc = 1 ] || fail "generation over the dead writer's fields: exit $rc ($out), not a rejection"
echo "$out" | grep -q "^rejected (generation [0-9]*): methods = 0xffffffff" ||
    fail "generation over the dead writer's fields: $out"
wait_for 20 '[ "$("${CTL[@]}" get methods display.bscan.gsc display.enface.gsc | tr "\n" " ")" = "$v_good" ]' ||
    fail "last good values not written back: $("${CTL[@]}" get methods display.bscan.gsc display.enface.gsc | tr '\n' ' ') (want $v_good)"
out2=$("${CTL[@]}" set display.enface.gsc=0.5) || fail "recovery write: $out2"
[ "$("${CTL[@]}" get display.enface.gsc)" = "display.enface.gsc=0.5" ] || fail "recovered generation not in use"
[ "$(st applied_gen)" -gt "$g0" ] || fail "recovered generation not applied"
processing 3 || fail "no frames after the recovery"
echo "ok   dead control writer (odd seq): heartbeat and frames go on with the last good values;" \
    "the next generation (over its fields) $out; then $out2"

# ---- 5. random control generations -------------------------------------------------
kill $PROD; wait $PROD 2>/dev/null
"$BIN/octsim" --ring "$N-frames" --samples 64 --ascans 4 --lines 1 --quiet 2>/dev/null &
SIM=$!
PIDS+=($SIM)
wait_for 20 '[ "$(st ring_geometry)" = "1x4x64 u16" ]' || fail "tiny ring: $(st ring_geometry)"
# settle the geometry clamping first (octd writes clamped values back)
"${CTL[@]}" set methods=cfd >/dev/null || fail "set methods=cfd"
processing 3 || fail "no frames on the tiny ring"
out=$(fault ctl-random --control "$N-control" --status "$N-status" --count "$GENS" --seed $$ 2>&1) ||
    fail "random control blocks: $out"
alive || fail "octd died under random control blocks"
processing 3 || fail "no frames after the random control blocks"
echo "ok   $out"
kill $SIM; wait $SIM 2>/dev/null

# ---- 6. subscribers that connect, stall and vanish ---------------------------------
bg_produce --geom 256,32,1 --fps 200
processing 5 || fail "no frames"
f0=$(nfd)
out=$(fault subs --endpoint "ipc://$T/pub" --count 200) || fail "subs: $out"
alive || fail "octd died with vanishing subscribers"
fault check --endpoint "ipc://$T/pub" --seconds 1 --min 5 >"$T/check6.txt" 2>&1 ||
    fail "a live subscriber after the vanishing ones: $(cat "$T/check6.txt")"
wait_for 20 '[ "$(nfd)" -le "$f0" ]' || fail "fds $f0 -> $(nfd) after 200 subscribers"
echo "ok   $out; octd alive, fds $f0 -> $(nfd), a live subscriber gets images"

# ---- 7. save directory renamed away during saves ------------------------------------
"${CTL[@]}" snapshot >/dev/null && "${CTL[@]}" review >/dev/null || fail "snapshot/review"
# The mover stops on its own (a flag file) rather than being killed: a kill
# could land while its `mv` runs, and that orphaned mv would then move away
# the directory recreated below.
(i=0; while [ ! -e "$T/stop-mover" ]; do mv "$T/save" "$T/gone.$i" 2>/dev/null; mkdir -p "$T/save"; i=$((i + 1)); sleep 0.003; done) &
MOVER=$!
PIDS+=($MOVER)
ok=0 failed=0
for i in $(seq 1 12); do
    what=$([ $((i % 2)) = 1 ] && echo raw || echo images)
    out=$("${CTL[@]}" save $what 2>&1)
    case "$out" in *failed*) failed=$((failed + 1)) ;; *ok*) ok=$((ok + 1)) ;; *) fail "save $what: $out" ;; esac
done
touch "$T/stop-mover"; wait $MOVER 2>/dev/null; mkdir -p "$T/save"
alive || fail "octd died during saves into a vanishing directory"
# save.c works through a directory fd: a temporary entry renamed away
# together with the save directory is still removed (or completed) by octd
left=$(find "$T"/save "$T"/gone.* -name '*.tmp*' 2>/dev/null)
[ -z "$left" ] || fail "partial files left behind: $left"
"$PYTHON" - "$T" <<'EOF' || fail "a saved file is incomplete"
import glob, sys, numpy as np
for f in glob.glob(sys.argv[1] + "/gone.*/**/*.npy", recursive=True) + glob.glob(sys.argv[1] + "/save/**/*.npy", recursive=True):
    np.load(f)
EOF
"${CTL[@]}" online >/dev/null || fail "online"
echo "ok   12 saves while the directory was renamed away: $ok ok, $failed failed, nothing partial left anywhere"

# ---- 8. masks replaced by a bad file before SIGHUP ---------------------------------
m0=$("${CTL[@]}" get)
cp "$T/masks.npy" "$T/masks.good"
cp "$T/badmasks.npy" "$T/masks.npy"
kill -HUP $OCTD
wait_for 20 'grep -q "reload refused" "$T/octd.log"' || fail "bad masks not refused"
grep "reload refused" "$T/octd.log" | tail -1 | grep -q "masks.npy" || fail "refusal does not name the file: $(grep "reload refused" "$T/octd.log" | tail -1)"
alive || fail "octd died on bad masks"
[ "$("${CTL[@]}" get)" = "$m0" ] || fail "values changed by a refused reload: $("${CTL[@]}" get | tr '\n' ' ')"
processing 3 || fail "no frames after refused masks"
cp "$T/masks.good" "$T/masks.npy"
echo "ok   bad masks before SIGHUP: refused ($(grep "reload refused" "$T/octd.log" | tail -1 | cut -c1-100)...)"

# ---- 9. SIGHUP storm ------------------------------------------------------------------
kill -HUP $OCTD
sleep 1
v0=$("${CTL[@]}" get) f0=$(nfd)
for i in $(seq 1 100); do kill -HUP $OCTD; done
sleep 2
alive || fail "octd died in a SIGHUP storm"
processing 5 || fail "no frames after a SIGHUP storm"
[ "$("${CTL[@]}" get)" = "$v0" ] || fail "values changed by a SIGHUP storm"
wait_for 20 '[ "$(nfd)" -le "$f0" ]' || fail "fds $f0 -> $(nfd) after 100 SIGHUPs"
echo "ok   100 SIGHUPs: alive, values intact, fds $f0 -> $(nfd), $(grep -c "reload" "$T/octd.log") reload lines"

# ---- 11. security: modes of the shared objects ----------------------------------------
for o in frames:660 control:660 status:664; do
    m=$(stat -c %a "/dev/shm$N-${o%%:*}")
    [ "$m" = "${o##*:}" ] || fail "$N-${o%%:*}: mode $m, not ${o##*:}"
done
ww=$(find /dev/shm -maxdepth 1 -name "${N#/}-*" -perm -o+w)
[ -z "$ww" ] || fail "world-writable: $ww"
ls -la /dev/shm/octe2e-f$$-* | awk '{print "     " $1, $3, $4, $NF}'
echo "ok   shared objects 0660/0660/0664, none world-writable"

# ---- 10. SIGTERM in each phase ----------------------------------------------------------
term() { # PHASE: SIGTERM to $OCTD, exit 0 within 3 s (under 0.5 s on an idle machine)
    local t0 t1 rc
    t0=$(date +%s%N)
    kill -TERM $OCTD
    wait $OCTD
    rc=$?
    t1=$(date +%s%N)
    OCTD=""
    [ $rc = 0 ] || fail "SIGTERM $1: exit $rc"
    [ $(((t1 - t0) / 1000000)) -lt 3000 ] || fail "SIGTERM $1: $(((t1 - t0) / 1000000)) ms"
    echo -n " $1 $(((t1 - t0) / 1000000)) ms;"
}
start_octd() {
    "$BIN/octd" --config "$T/octd.ini" 2>>"$T/octd.log" &
    OCTD=$!
    # planning an 8 x 256 x 2048 geometry took 3.8 s on a loaded 2-core machine
    wait_for 30 '[ "$(st pid)" = "$OCTD" ] && [ "$(st state)" = online ] 2>/dev/null' || fail "octd restart"
}
echo -n "ok   SIGTERM:"
term processing
kill $PROD; wait $PROD 2>/dev/null
rm -f "/dev/shm$N-frames"
start_octd
term waiting-for-ring
bg_produce --geom 2048,256,8 --fps 20
start_octd
processing 10 || fail "no frames (large geometry)"
"${CTL[@]}" snapshot >/dev/null && "${CTL[@]}" review >/dev/null || fail "review"
term review
start_octd
processing 10 || fail "no frames (large geometry)"
"${CTL[@]}" snapshot >/dev/null && "${CTL[@]}" review >/dev/null || fail "review"
# SIGTERM while a save is in progress: octctl save raw (an 8 MiB frame),
# SIGTERM as soon as its temporary file exists; retried if the save was done
# before it could be seen
caught=""
for try in 1 2 3 4 5 6 7 8 9 10; do
    caught=$("$PYTHON" - "$T/save" "$OCTD" "${CTL[@]}" <<'EOF'
import os, signal, subprocess, sys, time
d, pid, ctl = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
p = subprocess.Popen(ctl + ["save", "raw"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while p.poll() is None:
    tmp = [n for n in os.listdir(d) if ".tmp" in n]
    if tmp:
        t0 = time.time_ns()
        os.kill(pid, signal.SIGTERM)
        print(t0, tmp[0])
        p.wait()
        sys.exit(0)
sys.exit(3)
EOF
) && break
    caught=""
done
[ -n "$caught" ] || fail "SIGTERM saving: 10 saves finished before their temporary file was seen"
wait $OCTD
rc=$?
t1=$(date +%s%N)
OCTD=""
ms=$(((t1 - ${caught%% *}) / 1000000))
[ $rc = 0 ] || fail "SIGTERM saving: exit $rc"
[ $ms -lt 3000 ] || fail "SIGTERM saving: $ms ms"
echo -n " saving (during ${caught#* }, try $try) $ms ms;"
find "$T/save" -name '*.tmp*' | grep -q . && fail "a save interrupted by SIGTERM left $(find "$T/save" -name '*.tmp*')"
# the interrupted save: complete (frame + sidecar) or absent
"$PYTHON" - "$T/save" "${caught#* }" <<'EOF' || fail "a save interrupted by SIGTERM is partial"
import os, sys, numpy as np
d, tmp = sys.argv[1], sys.argv[2]
base = os.path.join(d, tmp[:tmp.index(".tmp")].rsplit(".", 1)[0])
have = [os.path.exists(base + x) for x in (".npy", ".yaml")]
assert have[0] == have[1], f"{base}: .npy {have[0]}, .yaml {have[1]}"
if have[0]:
    assert np.load(base + ".npy").shape == (8, 256, 2048), base
EOF
echo " exit 0 each"
echo "PASS e2e_faults ($((SECONDS - t_start)) s)"
