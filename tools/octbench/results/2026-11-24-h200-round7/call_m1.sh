#!/bin/bash
B=$PWD/.bundle/m1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date -u +%T))"; }
s test_cuda_engine; timeout 280 $B/tests/test_cuda_engine > $O/test_cuda.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/test_cuda.log; grep -E ':[EF]:' $O/test_cuda.log | head -12
s bscan e2e unpaced; timeout 60 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit 2>&1 | tee $O/bscan.log | grep -E "^bscan"
s bscan e2e 9500/s; timeout 60 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --frame-rate 9500 2>&1 | tee $O/bscan9500.log | grep -E "^bscan"
s tails klin-disp; timeout 100 $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 4 --only volume-klin-disp 2>&1 | tee $O/tails_klin.log | grep -E "^# tails"
s tails volume; timeout 100 $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 4 --only volume 2>&1 | tee $O/tails_vol.log | grep -E "^# tails"
s test_angio; timeout 100 $B/tests/test_angio > $O/test_angio.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/test_angio.log; grep -E ':[EF]:' $O/test_angio.log | head -5
s done
