#!/bin/bash
# issue 17 live registration (helper reg), call 2 (final): test_register (CPU = CUDA, both fine
# paths), register-live A/B (window vs full fine path, 1..4 handles), reglive_rate workers 1 vs 3
# (commit producer) and the copy producer, register / register-512 accuracy and time, ncu kernels
B=$PWD/.bundle/reg
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date +%T))"; }
s info; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; date -u
s test_register; timeout 60 $B/tests/test_register > $O/test_register.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%|cuda|flagged' $O/test_register.log | head; grep -E ':[EF]:' $O/test_register.log | head
s register-live; timeout 60 $B/bin/octbench --backend cuda --only register-live --reps 20 > $O/register_live.txt 2>&1; echo "exit $?"; cut -c1-230 $O/register_live.txt
s sim; SIM=/tmp/reg_sim; timeout 40 $B/bin/octsim motion --output $SIM --lines 192 --ascans 200 --samples 1024 --volumes 4 --saccades 1 --frames > $O/sim.txt 2>&1; echo "exit $?"
s reglive_rate
export BIN=$B/bin SIM
for v in "1 commit" "3 commit" "3 copy"; do set -- $v; echo "== workers $1, producer $2"; WORKERS=$1 PRODUCER=$2 timeout 50 bash $B/scripts/reglive_rate.sh 192 200 1024 cuda 100 8 > $O/rate_w$1_$2.txt 2>&1; echo "exit $?"; grep -E "with a reference|no reference, \+|reference, \+|registration:" $O/rate_w$1_$2.txt | tail -4 | cut -c1-400; done
s register; timeout 30 $B/bin/octbench --backend cuda --only register > $O/register.txt 2>&1; echo "exit $?"; grep -E "within|RMS|flagged|SNR|time per" $O/register.txt | cut -c1-200
s profile
NCU=/usr/local/cuda/bin/ncu
timeout 40 $NCU --clock-control none --launch-skip 200 --launch-count 150 --print-summary per-kernel --metrics gpu__time_duration.sum \
    $B/bin/octbench --backend cuda --only register-live --reps 2 > $O/ncu_live.txt 2>&1; echo "ncu rc=$?"
python3 - $O/ncu_live.txt <<'PY'
import re, sys
t = open(sys.argv[1], errors="replace").read().splitlines()
name = None; inv = 0; agg = {}
for l in t:
    m = re.match(r"\s{2}(\S.*?)\s+\((\d+), (\d+), (\d+)\)x\((\d+), \d+, \d+\), Device.*Invocations (\d+)", l)
    if m: name = m.group(1)[:45]; inv = int(m.group(6)); continue
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)\s+([\d.,]+)\s+([\d.,]+)", l)
    if m and name:
        f = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(m.group(1), 1.0)
        a = agg.setdefault(name, [0, 0.0]); a[0] += inv; a[1] += inv * float(m.group(4).replace(",", "")) * f; name = None
print("total %.0f us over %d launches" % (sum(v[1] for v in agg.values()), sum(v[0] for v in agg.values())))
for k, (n, us) in sorted(agg.items(), key=lambda x: -x[1][1])[:14]: print("%8.0f us %4d x  %s" % (us, n, k))
PY
s register-512; timeout 60 $B/bin/octbench --backend cuda --only register-512 > $O/register512.txt 2>&1; echo "exit $?"; tail -2 $O/register512.txt
s done
