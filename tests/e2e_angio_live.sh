#!/bin/bash
# e2e_angio_live.sh - angiography controls through octd (issue 18, SPEC 10.2/10.3),
# ~15 s: octsim flow (G = 4 positions x R = 4 repeats, 1.5 bins of axial
# motion per repeat) replayed into the ring
# of an octd whose profile has geometry.repeats and slab products but no
# metric.  Then:
#  - `octctl schema` describes angio.metrics/bands/band_width/align and
#    slab.start/end (octweb builds its controls from it);
#  - no angiography topic before; `octctl set angio.metrics=decor,ssada` is
#    applied and ssada/cfd [G][N][D] and the en-face angiograms
#    slab_max/ssada, slab_mean/decor [G][N] arrive (octgrab), with the slab
#    depths of the profile as indices; slab_max/ssada/f32 equals octproc's
#    slab_max_ssada.npy for the same frame and values;
#  - invalid values (angio.bands=0, angio.band_width=9, an empty slab) are
#    rejected naming the key, in octctl's message and the status block, and
#    the old values stay; octd stays alive and keeps publishing;
#  - `octctl set angio.align=lateral` is applied: slab_max/ssada/f32 equals
#    octproc's with the same values and differs from the unaligned one;
#  - a second octd on the same ring whose profile has no geometry.repeats
#    accepts angio.metrics but says in its status warnings why nothing comes.
# BACKEND=cuda on a GPU machine.  Exit 0 pass, 77 skip, else fail.
set -u
BIN=$(cd "${BIN:-bin}" 2>/dev/null && pwd) || { echo "SKIP e2e_angio_live: no bin directory"; exit 77; }
BACKEND=${BACKEND:-cpu}
PYTHON=${PYTHON:-/usr/bin/python3}
for p in octd octsim octctl octgrab octproc; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_angio_live: $BIN/$p not built"; exit 77; }
done
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "SKIP e2e_angio_live: no numpy for $PYTHON"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-angiolive.XXXXXX)
N=/octe2e-al-$$
. tests/helpers/e2e_lib.sh
M=256 A=32 G=4 R=4
D=$((M / 2 + 1))
cd "$T" || exit 1

"$BIN/octsim" flow --samples $M --ascans $A --positions $G --repeats $R --output f.npy \
    --seed 5 --motion 1.5 >sim.log 2>&1 || fail "octsim flow: $(cat sim.log)"
cat >p.yaml <<EOF
geometry: {samples: $M, ascans: $A, lines: $((G * R)), sample_type: u16, repeats: $R}
window: {type: hann}
background: {mode: frame_mean}
freq_cutoff: 4
products: [slab_mean, slab_max]
slab: {start: 20, end: 100}
EOF
sed '/^geometry:/s/, repeats: [0-9]*//' p.yaml >p1.yaml
ini() { # SUFFIX PROFILE
    cat <<EOF
[engine]
backend = $BACKEND
threads = 1
[ring]
frames = $N-frames
control = $N-control$1
status = $N-status$1
[publish]
endpoint = ipc://$T/pub$1
[profile]
path = $T/$2
EOF
}
ini "" p.yaml >octd.ini
ini 1 p1.yaml >octd1.ini
E2E_LOGS=("$T/octd.log" "$T/octd1.log")
"$BIN/octd" --config octd.ini 2>octd.log &
PIDS+=($!)
OCTD=$!
"$BIN/octd" --config octd1.ini 2>octd1.log &
PIDS+=($!)
OCTD1=$!
"$BIN/octsim" replay f.npy --ring "$N-frames" --loop --ascan-rate $((G * R * A * 20)) --quiet 2>>sim.log &
PIDS+=($!)
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }
wait_for 20 '[ "$(st frames_processed)" -gt 2 ] 2>/dev/null' || fail "octd processes no frames"

# the option schema (octweb's controls) has the keys, with their kinds
"${CTL[@]}" schema >schema.json 2>&1 || fail "octctl schema: $(head -3 schema.json)"
"$PYTHON" - <<'EOF' || fail "octctl schema lacks the angiography keys"
import json
s = json.load(open("schema.json"))
opts = s["options"] if isinstance(s, dict) else s
by = {o["key"]: o for o in opts}
for k in ("angio.metrics", "angio.bands", "angio.band_width", "angio.align", "slab.start", "slab.end"):
    assert k in by, f"{k} not in the schema"
assert by["angio.metrics"]["kind"] == "set", by["angio.metrics"]
assert set(by["angio.metrics"]["values"]) == {"struct", "median", "sv", "decor", "ssada"}, by["angio.metrics"]
EOF
echo "ok   octctl schema: angio.* and slab.* described"

grab() { # OUT TOPIC... : one image of each topic
    local out=$1 args=()
    shift
    for t in "$@"; do args+=(--topic "$t"); done
    "$BIN/octgrab" --endpoint "ipc://$T/pub" "${args[@]}" --count $(($# * 2)) --timeout 10 --save-max 4 \
        --output "$out" >"$out.txt" 2>&1
}
# no metric yet: no angiography topic (a short look at everything published)
"$BIN/octgrab" --endpoint "ipc://$T/pub" --count 6 --timeout 10 >all0.txt 2>&1 ||
    fail "octgrab: $(tail -3 all0.txt)"
grep -q "^slab_max/cfd" all0.txt || fail "no slab_max/cfd before: $(head all0.txt)"
grep -Eq "^(ssada|decor|struct|sv|median)/|^slab_[a-z]*/(ssada|decor|sv)" all0.txt &&
    fail "angiography topics before angio.metrics was set: $(cat all0.txt)"

out=$("${CTL[@]}" set angio.metrics=decor,ssada products=slab_mean,slab_max,f32 2>&1) || fail "octctl set angio.metrics: $out"
echo "$out" | grep -q "^applied" || fail "set angio.metrics: $out"
[ "$("${CTL[@]}" get angio.metrics)" = "angio.metrics=decor,ssada" ] ||
    fail "get angio.metrics: $("${CTL[@]}" get angio.metrics)"
grab g1 slab_max/ssada/f32 slab_mean/decor ssada/cfd || fail "angiography topics after set: $(tail -5 g1.txt)"
grep -q "^slab_max/ssada/f32 .*shape \[$G,$A\]" g1.txt || fail "slab_max/ssada/f32 shape: $(cat g1.txt)"
grep -q "^slab_mean/decor .*shape \[$G,$A\]" g1.txt || fail "slab_mean/decor shape: $(cat g1.txt)"
grep -q "^ssada/cfd .*shape \[$G,$A,$D\]" g1.txt || fail "ssada/cfd shape: $(cat g1.txt)"
echo "ok   set angio.metrics=decor,ssada: ssada/cfd [$G,$A,$D], slab_max/ssada and slab_mean/decor [$G,$A]"

# octd's en-face angiogram = octproc's with the same frame and values
"$BIN/octproc" --backend "$BACKEND" --profile p.yaml --input f.npy --output po \
    --set angio.metrics=decor,ssada --set products=slab_mean,slab_max,f32 >proc.log 2>&1 || fail "octproc: $(cat proc.log)"
"$PYTHON" - "$(ls g1/slab_max_ssada_f32_*.npy | head -1)" po/slab_max_ssada.npy <<'EOF' ||
import sys, numpy as np
x, y = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
assert x.shape == y.shape, (x.shape, y.shape)
err = np.linalg.norm(x - y) / np.linalg.norm(y)
assert err < 1e-5 and y.max() > 0, f"relative L2 {err}"
EOF
    fail "octd's slab_max/ssada differs from octproc's slab_max_ssada.npy"
echo "ok   octd's slab_max/ssada/f32 equals octproc's slab_max_ssada.npy"

reject() { # fragment KEY=VALUE...
    local frag=$1 out rc
    shift
    out=$("${CTL[@]}" set "$@" 2>&1)
    rc=$?
    [ $rc -ne 0 ] || fail "octctl set $* was accepted: $out"
    echo "$out" | grep -q -- "$frag" || fail "octctl set $*: message lacks '$frag': $out"
    if echo "$out" | grep -q "rejected"; then
        "${CTL[@]}" status | grep "^rejected_reason=" | grep -q -- "$frag" ||
            fail "set $*: status rejected_reason: $("${CTL[@]}" status | grep rejected_reason)"
    fi
    echo "ok   rejected (exit $rc): set $* -> $(echo "$out" | head -1)"
}
before=$("${CTL[@]}" get)
reject angio.bands angio.bands=0
reject angio.band_width angio.band_width=9
reject angio.metrics angio.metrics=ssada,flow
reject slab.end slab.start=90 slab.end=90
[ "$("${CTL[@]}" get)" = "$before" ] || fail "rejected values changed the control values"
alive || fail "octd died"
grab g2 slab_max/ssada || fail "no slab_max/ssada after the rejections: $(tail -3 g2.txt)"
echo "ok   octd alive, old values kept, slab_max/ssada keeps coming"

# repeat alignment live (the frame has 1.5 bins of axial motion per repeat): applied, and
# octd's aligned en-face angiogram equals octproc's with the same values (and is not the
# unaligned one); both backends
out=$("${CTL[@]}" set angio.align=lateral 2>&1) || fail "octctl set angio.align: $out"
echo "$out" | grep -q "^applied" || fail "set angio.align: $out"
"$BIN/octgrab" --endpoint "ipc://$T/pub" --topic slab_max/ssada/f32 --count 6 --timeout 10 \
    --save-max 6 --output g3 >g3.txt 2>&1 || fail "no slab_max/ssada/f32 after angio.align: $(tail -3 g3.txt)"
"$BIN/octproc" --backend "$BACKEND" --profile p.yaml --input f.npy --output pa \
    --set angio.metrics=decor,ssada --set products=slab_mean,slab_max,f32 --set angio.align=lateral \
    >proca.log 2>&1 || fail "octproc angio.align=lateral: $(cat proca.log)"
"$PYTHON" - "$(ls g3/slab_max_ssada_f32_*.npy | sort | tail -1)" pa/slab_max_ssada.npy po/slab_max_ssada.npy <<'EOF' ||
import sys, numpy as np
x, y, u = (np.load(a).astype(np.float64) for a in sys.argv[1:4])
assert x.shape == y.shape, (x.shape, y.shape)
err = np.linalg.norm(x - y) / np.linalg.norm(y)
diff = np.linalg.norm(y - u) / np.linalg.norm(u)
assert err < 1e-5 and y.max() > 0, f"relative L2 {err}"
assert diff > 1e-2, f"aligned = unaligned (relative L2 {diff})"
EOF
    fail "octd's aligned slab_max/ssada differs from octproc's (or alignment changed nothing)"
echo "ok   set angio.align=lateral: octd's slab_max/ssada/f32 equals octproc's, not the unaligned one"

# no repeats in the profile: accepted, nothing made, and the status says why
CTL1=("$BIN/octctl" --control "$N-control1" --status "$N-status1" --timeout 5)
wait_for 20 '[ "$("${CTL1[@]}" status 2>/dev/null | sed -n "s/^frames_processed=//p")" -gt 0 ] 2>/dev/null' ||
    fail "the second octd processes no frames"
out=$("${CTL1[@]}" set angio.metrics=ssada 2>&1) || fail "octd without repeats: set angio.metrics: $out"
wait_for 10 '"${CTL1[@]}" status | grep "^warnings=" | grep -q "geometry.repeats"' ||
    fail "no warning about geometry.repeats: $("${CTL1[@]}" status | grep -i warn)"
"$BIN/octgrab" --endpoint "ipc://$T/pub1" --count 6 --timeout 10 >all1.txt 2>&1 ||
    fail "octgrab (second octd): $(tail -3 all1.txt)"
grep -Eq "^(ssada|slab_[a-z]*/ssada)" all1.txt && fail "angiography without repeats: $(cat all1.txt)"
kill -0 "$OCTD1" 2>/dev/null || fail "the second octd died"
echo "ok   without geometry.repeats: angio.metrics accepted, no angiography, warning: $("${CTL1[@]}" status | sed -n 's/^warnings=//p' | head -c 120)"
echo "e2e_angio_live: all checks passed"
