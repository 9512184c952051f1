#!/bin/bash
# e2e_refuse.sh - meaningless values are refused with the key named (issue
# 14.2; the rules live in the option table and the engine's validation), CPU
# backend, ~5 s:
#  - profile: `products: []` and `display.<class>.gsc` <= 0 fail
#    --check-config (78) naming FILE:LINE and the key;
#  - live: `octctl set products=` (nothing) and display.*.gsc = 0 / -1 are
#    rejected (exit 1) with the key in the reason, the status block's
#    rejected_reason names it, the values in use stay and octd goes on
#    publishing.
# Exit 0 pass, 77 skip, else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
for p in octd octsim octctl; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_refuse: $BIN/$p not built"; exit 77; }
done
T=$(mktemp -d /tmp/octd-e2e-refuse.XXXXXX)
N=/octe2e-r$$
. tests/helpers/e2e_lib.sh
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
st() { "${CTL[@]}" status 2>/dev/null | sed -n "s/^$1=//p"; }
ini() { # PROFILE
    printf '[engine]\nbackend = cpu\nthreads = 1\n[ring]\nframes = %s-frames\ncontrol = %s-control\nstatus = %s-status\n[publish]\nendpoint = ipc://%s/pub\n[profile]\npath = %s\n' \
        "$N" "$N" "$N" "$T" "$1" >"$T/octd.ini"
}

# ---- profile ----
check_profile() { # NAME TEXT KEY
    printf '%s\n' "$2" >"$T/$1.yaml"
    ini "$T/$1.yaml"
    "$BIN/octd" --config "$T/octd.ini" --check-config >"$T/$1.out" 2>&1
    local rc=$?
    [ $rc = 78 ] || fail "profile $1 ($2): --check-config exit $rc, expected 78: $(cat "$T/$1.out")"
    grep -q "$1.yaml:[0-9]*: $3" "$T/$1.out" || fail "profile $1: the message does not name FILE:LINE: $3: $(cat "$T/$1.out")"
}
check_profile empty_products "$(printf 'methods: [cfd]\nproducts: []')" "products"
check_profile zero_gsc "$(printf 'methods: [cfd]\ndisplay:\n  bscan: {gsc: 0}')" "display.bscan.gsc"
check_profile negative_gsc "$(printf 'methods: [cfd]\ndisplay:\n  enface: {gsc: -1.5}')" "display.enface.gsc"
echo "ok   profile: products: [] and gsc <= 0 refused by --check-config (78) with FILE:LINE: key"

# ---- live ----
printf 'methods: [cfd]\nfreq_cutoff: 2\nproducts: [bscan]\n' >"$T/good.yaml"
ini "$T/good.yaml"
"$BIN/octsim" --ring "$N-frames" --samples 256 --ascans 16 --lines 1 --rate 3200 --quiet 2>"$T/sim.log" &
PIDS+=($!)
"$BIN/octd" --config "$T/octd.ini" 2>"$T/octd.log" &
OCTD=$!
wait_for 10 '[ "$(st images_published)" -gt 2 ] 2>/dev/null' || fail "octd publishes nothing"
for kv in "products=" "display.bscan.gsc=0" "display.confocal.gsc=-1"; do
    key=${kv%%=*}
    out=$("${CTL[@]}" set "$kv" 2>&1) && fail "octctl set $kv was applied: $out"
    echo "$out" | grep -q "$key" || fail "octctl set $kv: the reason does not name $key: $out"
    reason=$(st rejected_reason)
    case $kv in products=) ;; *) echo "$reason" | grep -q "$key" || fail "rejected_reason does not name $key: $reason" ;; esac
done
"${CTL[@]}" get | grep -q "^products=bscan$" || fail "products in use changed: $("${CTL[@]}" get | grep '^products=')"
"${CTL[@]}" get | grep -q "^display.bscan.gsc=1$" || fail "gsc in use changed: $("${CTL[@]}" get | grep '^display.bscan.gsc=')"
p0=$(st images_published)
wait_for 5 '[ "$(st images_published)" -gt $((p0 + 2)) ]' || fail "octd stopped publishing after the rejections"
echo "ok   live: products= and gsc <= 0 rejected with the key named; values in use kept; images go on"
exit 0
