#!/bin/bash
# e2e_cli.sh - one command-line convention for every program (issue 14
# item 8) and the option schema (SPEC 10.1, issue 13 item 3):
#  every program: --version prints "PROG VERSION" and exits 0; an unknown
#  option, a missing value and an extra argument exit 64 naming the argument;
#  unknown --only / --topic names exit 64 with the known names; rates say
#  their unit (octsim --ascan-rate, octbench --frame-rate; --rate still
#  works with a warning on stderr); octctl schema is JSON that lists every
#  key of `octctl get`; octctl help names unknown keys with "did you mean";
#  octctl record/reference write command and arguments in one generation;
#  a mode already in effect answers ok the same way (online, review).
#  Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
PROGS="octd octctl octsim octgrab octproc octbench"
for p in $PROGS; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_cli: $BIN/$p not built"; exit 77; }
done
T=$(mktemp -d /tmp/octd-e2e-cli.XXXXXX)
N=/octe2e-cli$$
. tests/helpers/e2e_lib.sh
version=$(sed -n 's/^VERSION *:= *//p' Makefile)

# ---- --version and usage errors, every program --------------------------------
usage_error() { # PROG FRAGMENT ARGS... : exit 64 and FRAGMENT on stderr
    local p=$1 frag=$2 out rc
    shift 2
    out=$("$BIN/$p" "$@" 2>&1 >/dev/null)
    rc=$?
    [ $rc = 64 ] || fail "$p $*: exit $rc, not 64 ($out)"
    echo "$out" | grep -qF -- "$frag" || fail "$p $*: stderr does not name '$frag': $out"
}
for p in $PROGS; do
    out=$("$BIN/$p" --version) || fail "$p --version: exit $?"
    [ "$out" = "$p $version" ] || fail "$p --version printed '$out', not '$p $version'"
    usage_error "$p" "--frobnicate" --frobnicate
done
usage_error octd "--config" --check-config
usage_error octd "'stray'" --config x.ini stray
usage_error octctl "--timeout" --timeout
usage_error octctl "'frob'" frob
usage_error octctl "'extra'" status extra
usage_error octctl "--frames" record --frames
usage_error octctl "'later'" reference later
usage_error octsim "--samples" --ascans 4 --lines 1
usage_error octsim "--ascan-rate" --ascan-rate fast
usage_error octgrab "--count" --count 0
usage_error octproc "required" --input x.npy
usage_error octbench "--reps" --reps x
echo "ok   every program: --version = '$version', exit 64 naming the argument"

# ---- unknown names: --only, --topic, keys, commands ---------------------------
usage_error octbench "did you mean 'volume-cfd'" --only volume-cdf
usage_error octgrab "did you mean 'bscan'" --topic bscn --count 1
usage_error octgrab "did you mean 'msi'" --topic enface/mis --count 1
usage_error octgrab "only /f32" --topic enface/msi/u8 --count 1
usage_error octctl "did you mean 'enface.start'" help enface.strat
usage_error octctl "did you mean 'window'" --control "$N-none" set windw=hann
echo "ok   unknown --only/--topic names, keys and commands: exit 64 with the known names"

# ---- rates: the unit in the name, old spellings warned ------------------------
"$BIN/octsim" --ring "$N-r1" --samples 64 --ascans 4 --lines 1 --ascan-rate 400 --frames 3 \
    --quiet --unlink 2>"$T/new.txt" || fail "octsim --ascan-rate: $(cat "$T/new.txt")"
[ ! -s "$T/new.txt" ] || fail "octsim --ascan-rate wrote to stderr: $(cat "$T/new.txt")"
"$BIN/octsim" --ring "$N-r2" --samples 64 --ascans 4 --lines 1 --rate=400 --frames 3 \
    --quiet --unlink 2>"$T/old.txt" || fail "octsim --rate (old spelling): $(cat "$T/old.txt")"
grep -q "warning: --rate is now --ascan-rate" "$T/old.txt" || fail "octsim --rate: no warning: $(cat "$T/old.txt")"
out=$("$BIN/octbench" --rate 5 --only nosuch 2>&1 >/dev/null)
[ $? = 64 ] || fail "octbench --rate --only nosuch: not 64"
echo "$out" | grep -q "warning: --rate is now --frame-rate" || fail "octbench --rate: no warning: $out"
"$BIN/octsim" --help | grep -q -- "--ascan-rate" || fail "octsim --help lacks --ascan-rate"
"$BIN/octbench" --help | grep -q -- "--frame-rate" || fail "octbench --help lacks --frame-rate"
echo "ok   rates: octsim --ascan-rate, octbench --frame-rate; --rate accepted with a warning"

# ---- octctl schema: JSON with every key ---------------------------------------
"$BIN/octctl" schema >"$T/schema.json" || fail "octctl schema: exit $?"
"$BIN/octctl" help >"$T/help.txt" || fail "octctl help: exit $?"
"$PYTHON" - "$T/schema.json" "$T/help.txt" <<'PY' || fail "octctl schema"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "octd-options-1", d["schema"]
assert d["abi"] == {"major": 1, "minor": 2}, d["abi"]
keys = [o["key"] for o in d["options"]]
assert len(keys) == len(set(keys)), "a key twice"
helped = [l.split(" ")[0] for l in open(sys.argv[2]) if not l.startswith(" ")]
assert helped == keys, (helped, keys)
need = ["window", "window.param", "freq_cutoff", "lag_window", "methods", "scale", "background",
        "background.param", "enface.start", "enface.step", "enface.count", "xsec.h_index",
        "xsec.v_index", "products", "klin", "klin.taps", "klin.source", "klin.c0", "klin.c3",
        "dispersion.a2", "dispersion.a3", "dispersion.k0", "slab.start", "slab.end",
        "angio.metrics", "angio.bands", "angio.band_width", "angio.align", "reg.average",
        "reg.stripe", "reg.search_xy", "reg.search_z"]
need += ["display.%s.%s" % (c, w) for c in ("bscan", "enface", "confocal")
         for w in ("gsc", "contrast", "brightness")]
missing = [k for k in need if k not in keys]
assert not missing, missing
for o in d["options"]:
    for f in ("key", "kind", "default", "unit", "help", "offset", "ctype", "abi_minor"):
        assert f in o, (o["key"], f)
    assert o["kind"] in ("int", "float", "enum", "set", "pair", "bool"), o
    if o["kind"] in ("enum", "set"):
        assert o["values"], o
        dv = o["default"] if o["kind"] == "set" else [o["default"]]
        assert all(v in o["values"] for v in dv), o
    if o["kind"] in ("int", "float", "pair"):
        assert o["min"] <= o["max"], o
assert [c["name"] for c in d["commands"]] == ["online", "snapshot", "review", "save_raw",
        "save_images", "record", "record_stop", "reference"], d["commands"]
assert [c["code"] for c in d["commands"]] == list(range(1, 9))
byk = {o["key"]: o for o in d["options"]}
assert byk["window"]["default"] == "hann" and byk["window"]["offset"] == 132
assert byk["lag_window"]["default"] == [0, 0] and byk["methods"]["default"] == ["cfd"]
assert byk["freq_cutoff"]["max_rule"] == "samples/2"
print("octctl schema: %d options, %d commands" % (len(keys), len(d["commands"])))
PY
echo "ok   octctl schema: JSON octd-options-1, every key (as octctl help lists them) once"

# ---- an older octd's 1.1 control block: keys it does not know are refused --------
"$PYTHON" - "/dev/shm$N-old-control" "/dev/shm$N-old-status" <<'PY' || fail "making 1.1 blocks"
import struct, sys
c = bytearray(4096); c[0:8] = b"OCTCTRL\0"; struct.pack_into("<III", c, 8, 1, 1, 4096)
s = bytearray(4096); s[0:8] = b"OCTSTAT\0"; struct.pack_into("<III", s, 8, 1, 0, 4096)
open(sys.argv[1], "wb").write(c); open(sys.argv[2], "wb").write(s)
PY
OLD=("$BIN/octctl" --control "$N-old-control" --status "$N-old-status" --timeout 1)
out=$("${OLD[@]}" set slab.start=3 2>&1)
[ $? = 1 ] && echo "$out" | grep -q "slab.start: .*ABI 1.1 (an older octd), slab.start needs 1.2" ||
    fail "set slab.start on a 1.1 block: $out"
out=$("${OLD[@]}" record 2>&1)
[ $? = 1 ] && echo "$out" | grep -q "needs 1.2" || fail "record on a 1.1 block: $out"
echo "ok   a 1.1 block (older octd): 1.2 keys and commands refused by octctl ($out)"

# ---- issue 14 item 7: the example profile with the geometry its comment suggests
bgeom=$(sed -n 's/.*A B-scan system: \({[^}]*}\).*/\1/p' systemd/profile.yaml)
[ -n "$bgeom" ] || fail "systemd/profile.yaml no longer suggests a B-scan geometry"
sed "s/^geometry: .*/geometry: $bgeom/" systemd/profile.yaml >"$T/bscan.yaml"
for prof in systemd/profile.yaml "$T/bscan.yaml"; do
    case $prof in /*) path=$prof ;; *) path=$PWD/$prof ;; esac
    printf '[profile]\npath = %s\n' "$path" >"$T/check.ini"
    out=$("$BIN/octd" --config "$T/check.ini" --check-config 2>&1) ||
        fail "octd --check-config with $prof ($(grep '^geometry' "$prof")): $out"
done
echo "ok   example profile: --check-config passes as shipped and with the B-scan geometry $bgeom"

# ---- octd: the commands with arguments and modes already in effect ------------
M=64 A=8
cat >"$T/profile.yaml" <<EOF
geometry: {samples: $M, ascans: $A, lines: 1, sample_type: u16}
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
endpoint = ipc://$T/pub
[profile]
path = $T/profile.yaml
[save]
directory = $T
[log]
level = info
EOF
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
wait_for 10 '"${CTL[@]}" status >/dev/null 2>&1' || fail "octd did not start"
"$BIN/octsim" --ring "$N-frames" --samples $M --ascans $A --lines 1 --ascan-rate $((A * 50)) \
    --quiet 2>"$T/sim.log" &
PIDS+=($!)
wait_for 10 '[ "$("${CTL[@]}" status | sed -n "s/^frames_processed=//p")" -gt 2 ]' || fail "no frames processed"
o1=$("${CTL[@]}" online) || fail "online when online: exit $? ($o1)"
"${CTL[@]}" review >/dev/null || fail "review"
o2=$("${CTL[@]}" review) || fail "review in review: exit $? ($o2)"
[ "$o1" = "online: ok: already online" ] || fail "online when online: '$o1'"
[ "$o2" = "review: ok: already in review" ] || fail "review in review: '$o2'"
"${CTL[@]}" online >/dev/null || fail "back online"
echo "ok   a mode already in effect: '$o1', '$o2' (exit 0 both)"
# record / reference: whatever octd answers (the recorder is another part),
# the block holds command and arguments of one generation
"${CTL[@]}" --timeout 1 record --frames 7 --seconds 1.5 raw products >/dev/null 2>&1
"$PYTHON" - "/dev/shm$N-control" <<'PY' || fail "record arguments in the control block"
import struct, sys
b = open(sys.argv[1], "rb").read(4096)
cmd, = struct.unpack_from("<I", b, 232)
flags, frames = struct.unpack_from("<II", b, 336)
secs, = struct.unpack_from("<d", b, 344)
assert (cmd, flags, frames, secs) == (6, 3, 7, 1.5), (cmd, flags, frames, secs)
PY
"${CTL[@]}" --timeout 1 reference auto >/dev/null 2>&1
"$PYTHON" - "/dev/shm$N-control" <<'PY' || fail "reference arguments in the control block"
import struct, sys
b = open(sys.argv[1], "rb").read(4096)
assert struct.unpack_from("<I", b, 232)[0] == 8
assert struct.unpack_from("<IId", b, 336) == (2, 0, 0.0), struct.unpack_from("<IId", b, 336)
PY
alive || fail "octd died"
echo "ok   octctl record --frames 7 --seconds 1.5 raw products / reference auto: one generation each"
# values octctl writes but octd's option table refuses, named by key
for kv in display.bscan.gsc=0 products= window=tukey:1.5; do
    out=$("${CTL[@]}" set "$kv")
    rc=$?
    [ $rc = 1 ] || fail "set $kv: exit $rc ($out)"
    echo "$out" | grep -q "^rejected (generation [0-9]*): ${kv%%=*}: " || fail "set $kv: $out"
done
echo "ok   gsc=0, products= and tukey:1.5 rejected by octd, the message names the key"
echo "PASS e2e_cli"
