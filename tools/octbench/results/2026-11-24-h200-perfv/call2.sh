#!/bin/bash
# perfv call 2: MSI deferred too. cuda suite tests, engine stream, e2e tails new vs old octd (issue 19, k-lin + dispersion)
B=$PWD/.bundle/perfv
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date -u +%T), ${SECONDS}s)"; }
s info; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s test_cuda_engine cuda suite
CK_RUN_SUITE=cuda timeout 130 $B/tests/test_cuda_engine > $O/test_cuda.log 2>&1; echo "exit $?"
grep -E '^[0-9]+%' $O/test_cuda.log; grep -E ':[EF]:' $O/test_cuda.log | head -12
s stream volume-klin-disp
timeout 35 $B/bin/octbench --backend cuda --only volume-klin-disp --json $O/stream.json 2>&1 | grep -E "stream|rror"
s tails new volume-klin-disp
timeout 100 $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 4 --only volume-klin-disp --json $O/tails_new.json > $O/tails_klin_new.log 2>&1; echo "exit $?"
grep -E "^# tails" $O/tails_klin_new.log | head -12
left=$((290 - SECONDS))
if [ $left -gt 60 ]; then
  s tails old octd volume-klin-disp "(${left}s left)"
  OCTBENCH_OCTD=$B/old/octd timeout $left $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 4 --only volume-klin-disp --json $O/tails_old.json > $O/tails_klin_old.log 2>&1; echo "exit $?"
  grep -E "^# tails" $O/tails_klin_old.log | head -12
fi
s done
