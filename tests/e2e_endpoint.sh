#!/bin/bash
# e2e_endpoint.sh - ownership of an ipc:// publish endpoint (issue 14.3), CPU
# backend, ~10 s:
#  a. octd A binds ipc://$T/pub (lock file $T/pub.lock holds its pid);
#  b. octd B, other blocks, same endpoint: exits 69 naming the endpoint and
#     A's pid; A goes on and a subscriber still gets A's images;
#  c. a socket some other live process listens on (not an octd): refused, 69;
#  d. A killed with SIGKILL (stale socket and lock file left behind): octd C
#     takes the endpoint over and a subscriber gets C's images; at a clean
#     stop the lock file goes.
# Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octd octsim octctl octgrab; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_endpoint: $BIN/$p not built"; exit 77; }
done
T=$(mktemp -d /tmp/octd-e2e-ep.XXXXXX)
N=/octe2e-ep$$
. tests/helpers/e2e_lib.sh
E2E_LOGS=("$T/a.log" "$T/b.log" "$T/c.log" "$T/d.log")
printf 'methods: [cfd]\nfreq_cutoff: 2\nproducts: [bscan]\n' >"$T/profile.yaml"
ini() { # TAG ENDPOINT
    printf '[engine]\nbackend = cpu\nthreads = 1\n[ring]\nframes = %s-frames\ncontrol = %s-%s-control\nstatus = %s-%s-status\n[publish]\nendpoint = %s\n[profile]\npath = %s/profile.yaml\n' \
        "$N" "$N" "$1" "$N" "$1" "$2" "$T" >"$T/$1.ini"
}
st() { "$BIN/octctl" --control "$N-$1-control" --status "$N-$1-status" --timeout 5 status 2>/dev/null | sed -n "s/^$2=//p"; }
EP="ipc://$T/pub"
"$BIN/octsim" --ring "$N-frames" --samples 256 --ascans 32 --lines 1 --rate 3200 --quiet 2>"$T/sim.log" &
PIDS+=($!)

# ---- a. A owns the endpoint ----
ini a "$EP"
"$BIN/octd" --config "$T/a.ini" 2>"$T/a.log" &
A=$!
PIDS+=($A)
wait_for 10 '[ "$(st a frames_processed)" -gt 2 ] 2>/dev/null' || fail "octd A does not process"
[ "$(head -1 "$T/pub.lock" 2>/dev/null)" = "$A" ] || fail "lock file $T/pub.lock does not hold A's pid $A: $(cat "$T/pub.lock" 2>&1)"
echo "ok   a. octd A (pid $A) owns $EP (lock file $T/pub.lock)"

# ---- b. B on the same endpoint ----
ini b "$EP"
timeout 20 "$BIN/octd" --config "$T/b.ini" 2>"$T/b.log"
rc=$?
[ $rc = 69 ] || fail "octd B on A's endpoint: exit $rc, expected 69"
grep -q "publish endpoint $EP is owned by a running octd (pid $A" "$T/b.log" ||
    fail "B's error does not name the endpoint and A's pid: $(grep '<[0-3]>' "$T/b.log" | head -2)"
kill -0 $A 2>/dev/null || fail "octd A died"
"$BIN/octgrab" --endpoint "$EP" --topic bscan/ --count 3 --timeout 10 --save-max 0 >"$T/grab1.txt" 2>&1 ||
    fail "no images from A after B was refused: $(tail -2 "$T/grab1.txt")"
echo "ok   b. octd B refused (exit 69): $(grep -o 'publish endpoint.*' "$T/b.log" | head -1)"

# ---- c. a socket of another (non-octd) live process ----
"$PYTHON" - "$T/other.sock" <<'PYEOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(4)
time.sleep(30)
PYEOF
PIDS+=($!)
wait_for 5 '[ -S "$T/other.sock" ]' || fail "listener socket"
ini c "ipc://$T/other.sock"
timeout 20 "$BIN/octd" --config "$T/c.ini" 2>"$T/c.log"
rc=$?
[ $rc = 69 ] || fail "octd on a socket another process listens on: exit $rc, expected 69"
grep -q "a live process .* listens on $T/other.sock" "$T/c.log" || fail "c: $(grep '<[0-3]>' "$T/c.log" | head -2)"
echo "ok   c. a socket another live process listens on is not taken over (exit 69)"

# ---- d. stale socket ----
kill -9 $A
wait $A 2>/dev/null
[ -S "$T/pub" ] && [ -f "$T/pub.lock" ] || fail "no stale socket / lock file after SIGKILL"
ini d "$EP"
"$BIN/octd" --config "$T/d.ini" 2>"$T/d.log" &
D=$!
PIDS+=($D)
wait_for 10 '[ "$(st d frames_processed)" -gt 2 ] 2>/dev/null' || fail "octd D does not take over the stale endpoint"
[ "$(head -1 "$T/pub.lock")" = "$D" ] || fail "lock file holds $(cat "$T/pub.lock"), not D's pid $D"
"$BIN/octgrab" --endpoint "$EP" --topic bscan/ --count 3 --timeout 10 --save-max 0 >"$T/grab2.txt" 2>&1 ||
    fail "no images from D: $(tail -2 "$T/grab2.txt")"
kill $D
wait $D
[ ! -e "$T/pub.lock" ] || fail "lock file left after a clean stop"
echo "ok   d. stale socket (owner killed) taken over by octd D (pid $D); lock file removed at its stop"
exit 0
