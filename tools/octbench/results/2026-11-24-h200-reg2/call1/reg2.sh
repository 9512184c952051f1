#!/bin/bash
# issue 17 (helper reg2), call 1: test_register (CUDA suite), register-live A/B (base4 = main
# before vs reg2), reglive_rate A/B (default workers), accuracy, ncu kernel summary of reg2
B=$PWD/.bundle/reg2 A=$PWD/.bundle/base4
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
T0=$(date +%s)
s() { echo "=== $* ($(date -u +%T), +$(( $(date +%s) - T0 ))s)"; }
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
s info; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
s test_register cuda; CK_RUN_SUITE=register-cuda timeout 60 $B/tests/test_register > $O/test_register.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%|agree|window|SKIP' $O/test_register.log | head; grep -E ':[EF]:' $O/test_register.log | head -5
for v in reg2:$B base4:$A; do n=${v%%:*} d=${v#*:}; s register-live $n; timeout 50 $d/bin/octbench --backend cuda --only register-live --reps 20 > $O/register_live_$n.txt 2>&1; echo "exit $?"; grep -E "handle|accuracy|error" $O/register_live_$n.txt | cut -c1-250; done
s sim; SIM=/tmp/reg_sim; timeout 40 $B/bin/octsim motion --output $SIM --lines 192 --ascans 200 --samples 1024 --volumes 4 --saccades 1 --frames > $O/sim.txt 2>&1; echo "exit $?"
for v in base4:$A reg2:$B; do n=${v%%:*} d=${v#*:}; s reglive_rate $n; BIN=$d/bin SIM=$SIM timeout 60 bash $B/scripts/reglive_rate.sh 192 200 1024 cuda 100 10 > $O/reglive_$n.txt 2>&1; echo "exit $?"; grep -E "with a reference|\+10s|registration:|workers" $O/reglive_$n.txt | tail -6 | cut -c1-300; done
left 200 && { s register accuracy reg2; timeout 45 $B/bin/octbench --backend cuda --only register > $O/register.txt 2>&1; echo "exit $?"; grep -E "within|RMS|flagged|SNR|time per" $O/register.txt | cut -c1-200; }
left 235 && { s ncu reg2
NCU=/usr/local/cuda/bin/ncu
timeout 40 $NCU --clock-control none --launch-skip 120 --launch-count 200 --print-summary per-kernel --metrics gpu__time_duration.sum \
    $B/bin/octbench --backend cuda --only register-live --reps 3 > $O/ncu_live.txt 2>&1; echo "ncu rc=$?"
python3 - $O/ncu_live.txt <<'PY'
import re, sys
t = open(sys.argv[1], errors="replace").read().splitlines()
name = None; inv = 0; agg = {}
for l in t:
    m = re.match(r"\s{2}(\S.*?)\s+\((\d+), (\d+), (\d+)\)x\((\d+), \d+, \d+\), Device.*Invocations (\d+)", l)
    if m: name = m.group(1)[:60]; inv = int(m.group(6)); continue
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)\s+([\d.,]+)\s+([\d.,]+)", l)
    if m and name:
        f = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(m.group(1), 1.0)
        a = agg.setdefault(name, [0, 0.0]); a[0] += inv; a[1] += inv * float(m.group(4).replace(",", "")) * f; name = None
vols = sum(v[0] for k, v in agg.items() if k.startswith("k_transform")) or 1
print("total %.0f us over %d launches, %d volumes (k_transform): %.0f us per volume" % (sum(v[1] for v in agg.values()), sum(v[0] for v in agg.values()), vols, sum(v[1] for v in agg.values()) / vols))
for k, (n, us) in sorted(agg.items(), key=lambda x: -x[1][1])[:22]: print("%8.0f us %4d x  %s" % (us, n, k))
PY
} 
s done
