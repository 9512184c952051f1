#!/bin/bash
# perfb call 2: issue 19 B-scans 500x1024 CFD+MSI R=512; old (main cb7fb57, $B/old) vs new (r3-perfb) in one call
B=$PWD/.bundle/perfb
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date +%T))"; }
s info; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s test_cuda_engine; timeout 120 $B/tests/test_cuda_engine > $O/test_cuda.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/test_cuda.log; grep -E ':[EF]:' $O/test_cuda.log | head -12; grep -E 't_graph|3xfp16: M' $O/test_cuda.log | head -8
s stream old / new graph off / new graph on
for r in 1 2; do
  echo "== old run $r"; timeout 30 $B/old/octbench --backend cuda --only bscan-cfd+msi --no-seed 2>&1 | tee -a $O/stream_old.log | grep -E "^stream"
  for g in off on; do echo "== new graph $g run $r"; timeout 30 $B/bin/octbench --backend cuda --only bscan-cfd+msi --no-seed --cuda-graph $g 2>&1 | tee -a $O/stream_$g.log | grep -E "^stream"; done
done
s engine device ms old / new off / new on
for w in bscan-msi bscan-cfd volume-msi; do
  echo "== $w old"; OCTBENCH_STREAM=0 timeout 30 $B/old/octbench --backend cuda --only $w --no-seed --warmup 5 --reps 30 2>&1 | tee -a $O/engine_old.log | grep -E "^ *$w"
  for g in off on; do [ $w = volume-msi ] && [ $g = off ] && continue; echo "== $w new graph $g"; OCTBENCH_STREAM=0 timeout 30 $B/bin/octbench --backend cuda --only $w --no-seed --warmup 5 --reps 30 --cuda-graph $g 2>&1 | tee -a $O/engine_$g.log | grep -E "^ *$w"; done
done
s e2e bscan commit
E="--e2e --backend cuda --only bscan --producer commit"
echo "== old 10000/s"; timeout 40 $B/old/octbench $E --frame-rate 10000 2>&1 | tee -a $O/e2e_old.log | grep -E "^bscan|^# bscan: (no|high|lost)|rror"
for g in off on; do echo "== new graph $g unpaced"; timeout 40 $B/bin/octbench $E --engine-keys cuda_graph=$g 2>&1 | tee -a $O/e2e_$g.log | grep -E "^bscan|^# bscan: (no|high|lost)|rror"; done
for r in 1 2; do echo "== new graph on 10000/s run $r"; timeout 40 $B/bin/octbench $E --frame-rate 10000 2>&1 | tee -a $O/e2e_on10k.log | grep -E "^bscan|^# bscan: (no|high|lost)|rror"; done
echo "== new graph off 10000/s"; timeout 40 $B/bin/octbench $E --frame-rate 10000 --engine-keys cuda_graph=off 2>&1 | tee -a $O/e2e_off.log | grep -E "^bscan|^# bscan: (no|high|lost)|rror"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); echo "ncu=$NCU"
if [ -n "$NCU" ]; then s ncu new graph off
timeout 40 $NCU --clock-control none --launch-skip 400 --launch-count 40 --print-summary per-kernel --metrics gpu__time_duration.sum \
  $B/bin/octbench --backend cuda --only bscan-cfd+msi --no-seed --cuda-graph off > $O/ncu_bscan.txt 2>&1; echo rc=$?
grep -E "^  [a-zA-Z_].*\(|gpu__time_duration.sum" $O/ncu_bscan.txt | paste - - | awk '{print}' | cut -c1-160 | head -24
fi
s done
