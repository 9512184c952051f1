#!/bin/bash
# e2e_security.sh - octd's security properties (issue 8.4), CPU backend, ~15 s:
#  a. publishing binds loopback by default: octd with no [publish] section
#     listens on 127.0.0.1:5556 and nowhere else (ss); if that port is taken
#     by someone else, only the default octd tries to bind is checked
#  b. octd runs as an unprivileged user: when root, octsim + octd + octgrab +
#     octctl run as nobody (65534, no groups, no capabilities); images arrive,
#     the shared objects are owned by 65534 with modes 0660/0660/0664, a save
#     works; when not root, the same as the current user (uid part SKIPped)
#  c. rings with inconsistent header sizes (written from SPEC 3.1 by Python,
#     not by the C library) are refused with a reason, octd stays alive and
#     never attaches them; the full header validation is fuzzed by
#     tests/fuzz/fuzz_ring.c (tests/e2e_fuzz.sh)
# Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octd octsim octctl octgrab; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_security: $BIN/$p not built"; exit 77; }
done
command -v ss >/dev/null || { echo "SKIP e2e_security: no ss (iproute2)"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-sec.XXXXXX)
chmod 0755 "$T"
N=/octe2e-s$$
. tests/helpers/e2e_lib.sh

# who runs the programs
if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null || { echo "SKIP e2e_security: root without setpriv"; exit 77; }
    U=65534 G=65534
    AS=(setpriv --reuid=$U --regid=$G --clear-groups --inh-caps=-all --)
    chown $U:$G "$T"
    # the binaries and the tree must be reachable for nobody
    "${AS[@]}" test -x "$BIN/octd" || { echo "SKIP e2e_security: $BIN not readable by uid $U"; exit 77; }
else
    U=$(id -u) G=$(id -g)
    AS=()
    echo "SKIP (part) not root: the unprivileged-user check runs as uid $U itself"
fi
# background jobs start "${AS[@]}" directly (setpriv execs: $! is the
# program); a backgrounded shell function would be a subshell
as() { "${AS[@]}" "$@"; }
CTL=(as "$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }

cat >"$T/profile.yaml" <<EOF
methods: [cfd]
window: {type: hann}
freq_cutoff: 2
scale: log
products: [bscan]
EOF
mkdir -p "$T/save" "$T/grab"
[ -n "${AS[*]}" ] && chown $U:$G "$T/save" "$T/grab"
ini() { # [PUBLISH-SECTION]
    cat <<EOF
[engine]
backend = cpu
threads = 1
[ring]
frames = $N-frames
control = $N-control
status = $N-status
[profile]
path = $T/profile.yaml
[save]
directory = $T/save
$1
EOF
}

# ---- a. loopback by default -----------------------------------------------------
# Someone else on 5556 (a running octd, say): then octd cannot bind the
# default, and its error names the endpoint it tried.
if ss -Hltn 'sport = :5556' | grep -q .; then
    ini "" >"$T/octd.ini"
    "${AS[@]}" "$BIN/octd" --config "$T/octd.ini" >"$T/octd.log" 2>&1 &
    OCTD=$!
    wait $OCTD
    grep -q "tcp://127.0.0.1:5556" "$T/octd.log" ||
        fail "port 5556 is taken; octd's failure does not name tcp://127.0.0.1:5556: $(tail -2 "$T/octd.log")"
    OCTD=""
    rm -f /dev/shm"$N"-*
    echo "SKIP (part) port 5556 is in use here: checked only that the default endpoint is tcp://127.0.0.1:5556"
    ini "[publish]
endpoint = ipc://$T/pub" >"$T/octd.ini"
    EP="ipc://$T/pub"
    DEFAULT=0
else
    ini "" >"$T/octd.ini"
    EP="tcp://127.0.0.1:5556"
    DEFAULT=1
fi
[ -n "${AS[*]}" ] && chown $U:$G "$T/octd.ini" "$T/profile.yaml"
"${AS[@]}" "$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 5 '[ "$(st state)" = online ] 2>/dev/null' || fail "octd did not start"
if [ $DEFAULT = 1 ]; then
    # every listening socket of octd, TCP and UDP, v4 and v6
    socks=$(ss -Hlntup | grep "pid=$OCTD," | awk '{print $1, $5}')
    [ "$socks" = "tcp 127.0.0.1:5556" ] ||
        fail "octd with no [publish] section listens on: ${socks:-nothing} (expected tcp 127.0.0.1:5556 only)"
    echo "ok   a. no [publish] section: octd listens on 127.0.0.1:5556 only"
fi

# ---- b. unprivileged user ---------------------------------------------------------------
"${AS[@]}" "$BIN/octsim" --ring "$N-frames" --samples 256 --ascans 32 --lines 1 --rate 3200 --quiet \
    2>"$T/octsim.log" &
SIM=$!
PIDS+=($SIM)
as "$BIN/octgrab" --endpoint "$EP" --topic bscan/ --count 5 --timeout 10 --save-max 2 \
    --output "$T/grab" >"$T/grab.txt" 2>&1 || fail "octgrab as uid $U: $(tail -3 "$T/grab.txt")"
pngs=$(find "$T/grab" -name '*.png' | wc -l)
[ "$pngs" -ge 1 ] || fail "octgrab saved no PNG"
read -r _ uid _ < <(grep '^Uid:' /proc/$OCTD/status)
cap=$(sed -n 's/^CapEff:\s*//p' /proc/$OCTD/status)
[ "$uid" = "$U" ] || fail "octd runs as uid $uid, not $U"
for o in frames:660 control:660 status:664; do
    got=$(stat -c '%u:%g %a' "/dev/shm$N-${o%%:*}")
    [ "$got" = "$U:$G ${o##*:}" ] || fail "$N-${o%%:*}: $got, expected $U:$G ${o##*:}"
done
ww=$(find /dev/shm -maxdepth 1 -name "${N#/}-*" -perm -o+w)
[ -z "$ww" ] || fail "world-writable: $ww"
"${CTL[@]}" snapshot >/dev/null && "${CTL[@]}" review >/dev/null || fail "snapshot/review as uid $U"
out=$("${CTL[@]}" save raw 2>&1) || fail "save raw as uid $U: $out"
saved=$(find "$T/save" -name 'raw_*.npy' -uid "$U" | wc -l)
[ "$saved" = 1 ] || fail "save raw: $saved files owned by uid $U in $T/save ($out)"
"${CTL[@]}" online >/dev/null || fail "online"
if [ -n "${AS[*]}" ]; then
    echo "ok   b. octsim, octd, octgrab, octctl as uid $U (no groups, CapEff $cap): $pngs PNGs received, shared objects $U:$G 0660/0660/0664, save owned by $U"
else
    echo "ok   b. as uid $U: $pngs PNGs received, shared objects 0660/0660/0664, save works"
fi

# ---- c. rings with inconsistent header sizes --------------------------------------------
kill $SIM; wait $SIM 2>/dev/null
wait_for 5 '! [ -e /dev/shm$N-frames ]' || rm -f /dev/shm"$N"-frames
for bad in frame_bytes slot_stride truncated slot_count; do
    as "$PYTHON" - "$N-frames" $bad <<'EOF' || fail "writing a $bad ring"
import os, struct, sys, time
name, bad = sys.argv[1], sys.argv[2]
M, N, L, K = 256, 32, 1, 4
fb = M * N * L * 2
stride = 4096 + (fb + 4095) // 4096 * 4096
size = 4096 + K * stride
h = bytearray(4096)
struct.pack_into("<8sIIIIQQIIIIII", h, 0, b"OCTRING\0", 1, 0, 4096, K, stride, 4096,
                 M, N, L, 1, 0, 0)
if bad == "frame_bytes": fb += 2                 # not M*N*L*2
if bad == "slot_stride": struct.pack_into("<Q", h, 24, 4096 + 4096)   # < header + frame
if bad == "truncated": size = 4096 + (K - 1) * stride                  # last slot missing
if bad == "slot_count": struct.pack_into("<I", h, 20, 3)               # not a power of two
struct.pack_into("<QQQQ", h, 64, 0x5ec0000 + len(bad), os.getpid(), time.time_ns(), fb)
struct.pack_into("<Q", h, 192, time.monotonic_ns())
struct.pack_into("<I", h, 256, 1)                # READY
path = "/dev/shm/" + name.lstrip("/")
fd = os.open(path + ".new", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o660)
os.ftruncate(fd, size)
os.pwrite(fd, bytes(h), 0)
os.close(fd)
os.rename(path + ".new", path)
EOF
    sleep 0.6
    alive || fail "octd died on a ring with a bad $bad"
    [ "$(st ring_epoch)" != "$((0x5ec0000 + ${#bad}))" ] || fail "octd attached a ring with a bad $bad"
    rm -f "/dev/shm$N-frames"
done
for why in "frame_bytes = " "slot_stride = " "(truncated ring)" "slot_count = 3"; do
    grep -qF "$why" "$T/octd.log" || fail "no refusal naming '$why' in the log"
done
echo "ok   c. rings with a bad frame_bytes / slot_stride / size / slot_count refused with a reason, octd alive"
grep "ring $N-frames: " "$T/octd.log" | sed 's/^/     /' | head -4
exit 0
