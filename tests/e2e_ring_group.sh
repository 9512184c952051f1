#!/bin/bash
# e2e_ring_group.sh - the README's set-up followed literally, with two real
# uids (issue 14.1 and 14.4), CPU backend, ~10 s; needs root (useradd,
# setpriv), else SKIP:
#  a. group `octd` (created here if absent, removed at the end then); the
#     daemon user runs octd with group octd (as the unit: User=, Group=octd);
#     the acquisition user has a primary group of its own and is added to
#     group octd ("Add the acquisition user ... to group octd").  octsim,
#     as that user, creates the ring: liboctipc gives it group octd, and
#     octd attaches and processes (ring_state=attached).
#  b. an acquirer NOT in group octd: its ring keeps the acquirer's group, octd
#     cannot open it, and the status block (ring_state=error, ring_message
#     with owner, group and mode), `octctl status` (summary=) and systemd's
#     STATUS= (sd_notify datagrams on an abstract socket) all say so, with
#     the same text.
# Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octd octsim octctl; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_ring_group: $BIN/$p not built"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP e2e_ring_group: needs root (creates users and group octd)"; exit 77; }
for c in useradd userdel groupadd groupdel usermod setpriv; do
    command -v $c >/dev/null || { echo "SKIP e2e_ring_group: no $c"; exit 77; }
done
BIN=$(cd "$BIN" && pwd)
T=$(mktemp -d /tmp/octd-e2e-grp.XXXXXX)
chmod 0755 "$T"
N=/octe2e-g$$
. tests/helpers/e2e_lib.sh
E2E_LOGS=("$T/octd.log" "$T/sim.log" "$T/sim2.log" "$T/notify.txt")
DU=octtd$$ AU=octta$$ XU=octtx$$ # daemon, acquirer (in octd), outsider
MADE_GROUP=""
e2e_cleanup_extra() {
    for u in $DU $AU $XU; do userdel "$u" >/dev/null 2>&1; done
    for g in $AU $XU; do groupdel "$g" >/dev/null 2>&1; done
    [ -n "$MADE_GROUP" ] && groupdel octd >/dev/null 2>&1
}
if ! getent group octd >/dev/null; then
    groupadd --system octd || fail "groupadd octd"
    MADE_GROUP=1
fi
useradd --system --no-create-home --gid octd --shell /usr/sbin/nologin $DU || fail "useradd $DU"
useradd --no-create-home --user-group --shell /usr/sbin/nologin $AU || fail "useradd $AU"
usermod -a -G octd $AU || fail "usermod -a -G octd $AU" # the README's step
useradd --no-create-home --user-group --shell /usr/sbin/nologin $XU || fail "useradd $XU"
[ "$(id -gn $AU)" = $AU ] || fail "$AU's primary group is $(id -gn $AU)"
# AS_u: setpriv for user u (background jobs start it directly: setpriv execs,
# so $! is the program; a backgrounded shell function would be a subshell)
AS_D=(setpriv --reuid=$DU --regid=octd --init-groups --)
AS_A=(setpriv --reuid=$AU --regid=$AU --init-groups --)
AS_X=(setpriv --reuid=$XU --regid=$XU --init-groups --)
"${AS_D[@]}" test -x "$BIN/octd" || { echo "SKIP e2e_ring_group: $BIN not reachable by other users"; exit 77; }

cat >"$T/profile.yaml" <<EOF
methods: [cfd]
freq_cutoff: 2
products: [bscan]
EOF
cat >"$T/octd.ini" <<EOF
[engine]
backend = cpu
threads = 1
[ring]
frames = $N-frames
control = $N-control
status = $N-status
[publish]
endpoint = ipc://$T/run/pub
[profile]
path = $T/profile.yaml
EOF
chmod 0644 "$T"/*.yaml "$T"/*.ini
mkdir -m 0770 "$T/run" && chgrp octd "$T/run" # the ipc:// endpoint, writable by octd
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }

# sd_notify listener (abstract socket: reachable by any uid)
"$PYTHON" - "$T/notify.txt" "octe2e-grp-$$" <<'PYEOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + sys.argv[2])
s.settimeout(60)
open(sys.argv[1] + ".ready", "w").close()
with open(sys.argv[1], "w") as f:
    while True:
        try:
            m = s.recv(4096).decode()
        except socket.timeout:
            break
        f.write(m.replace("\n", "|") + "\n")
        f.flush()
PYEOF
PIDS+=($!)
wait_for 5 '[ -f "$T/notify.txt.ready" ]' || fail "notify listener"
NOTIFY_SOCKET="@octe2e-grp-$$" "${AS_D[@]}" "$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 10 '[ "$(st state)" = online ]' || fail "octd (uid $DU) did not start"
wait_for 5 'grep -q "READY=1" "$T/notify.txt"' || fail "no READY=1"
[ "$(st ring_state)" = waiting ] || fail "ring_state before any ring: $(st ring_state)"

# ---- a. the documented set-up ------------------------------------------------------
"${AS_A[@]}" "$BIN/octsim" --ring "$N-frames" --samples 256 --ascans 32 --lines 1 --rate 3200 --quiet \
    2>"$T/sim.log" &
SIM=$!
PIDS+=($SIM)
wait_for 5 '[ -e /dev/shm$N-frames ]' || fail "octsim as $AU made no ring"
got=$(stat -c '%U:%G %a' /dev/shm$N-frames)
[ "$got" = "$AU:octd 660" ] || fail "ring of $AU (primary group $AU, member of octd): $got, expected $AU:octd 660"
wait_for 10 '[ "$(st frames_processed)" -gt 3 ] 2>/dev/null' ||
    fail "octd (uid $DU, group octd) does not process $AU's ring: ring_state=$(st ring_state) ring_message=$(st ring_message)"
[ "$(st ring_state)" = attached ] || fail "ring_state=$(st ring_state)"
echo "ok   a. README set-up: acquirer $AU (primary group $AU, added to octd) -> ring $got; octd as $DU:octd processes it ($(st frames_processed) frames)"
kill $SIM; wait $SIM 2>/dev/null
rm -f /dev/shm$N-frames

# the Python acquirer (tools/python/octring.py) does the same
if "$PYTHON" -c 'import numpy' 2>/dev/null; then
    got=$("${AS_A[@]}" "$PYTHON" -c '
import os, sys
sys.path.insert(0, sys.argv[1])
from octring import RingProducer
with RingProducer(sys.argv[2], samples=256, ascans=8, lines=1, sample_type="u16") as r:
    st = os.stat("/dev/shm" + sys.argv[2])
    print(st.st_gid, oct(st.st_mode & 0o777))
' "$(pwd)/tools/python" "$N-py" 2>&1) || fail "Python producer as $AU: $got"
    rm -f /dev/shm$N-py
    [ "$got" = "$(getent group octd | cut -d: -f3) 0o660" ] || fail "Python producer's ring: gid/mode $got"
    echo "ok   a. the Python producer (octring.py) as $AU also gives its ring group octd"
fi

# ---- b. an acquirer outside group octd ---------------------------------------------
"${AS_X[@]}" "$BIN/octsim" --ring "$N-frames" --samples 256 --ascans 32 --lines 1 --rate 3200 --quiet \
    2>"$T/sim2.log" &
SIM=$!
PIDS+=($SIM)
wait_for 5 '[ -e /dev/shm$N-frames ]' || fail "octsim as $XU made no ring"
got=$(stat -c '%U:%G %a' /dev/shm$N-frames)
[ "$got" = "$XU:$XU 660" ] || fail "ring of $XU (not in octd): $got"
wait_for 10 '[ "$(st ring_state)" = error ]' ||
    fail "octd cannot open $XU's ring but ring_state=$(st ring_state) ($(st ring_message))"
msg=$(st ring_message)
echo "$msg" | grep -q "permission denied" || fail "ring_message: $msg"
echo "$msg" | grep -q "group $XU" || fail "ring_message does not name the ring's group: $msg"
sum=$(st summary)
echo "$sum" | grep -q "ring error: ring $N-frames: permission denied" || fail "summary: $sum"
grep -q "permission denied" "$T/octd.log" || fail "the log does not say permission denied"
# systemd STATUS= (sent once a second) is the same text as summary=
wait_for 5 'grep -qF "STATUS=$sum" "$T/notify.txt"' ||
    fail "STATUS= differs from octctl status summary=$sum: $(grep STATUS= "$T/notify.txt" | tail -1)"
echo "ok   b. acquirer $XU outside octd: ring $got; ring_state=error; summary= and STATUS= agree: $sum"
kill $SIM; wait $SIM 2>/dev/null
exit 0
