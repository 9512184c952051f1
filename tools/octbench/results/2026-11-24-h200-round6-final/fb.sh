#!/bin/bash
# final round, call B: end to end benchmarks
B=$PWD/.bundle/final
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date +%T))"; }
s e2e bscan commit unpaced; timeout 100 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --json $O/e2e.json 2>&1 | tee $O/e2e_bscan.log | grep -E "^bscan|^# bscan: (no|high)"
s e2e bscan commit 8000/s; timeout 100 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --frame-rate 8000 --json $O/e2e.json 2>&1 | tee $O/e2e_bscan8000.log | grep -E "^bscan"
s e2e angio commit 1500/s; timeout 100 $B/bin/octbench --e2e --backend cuda --only angio --producer commit --frame-rate 1500 --seconds 5 --json $O/e2e.json 2>&1 | tee $O/e2e_angio1500.log | grep -E "^angio|rror"
s e2e angio commit unpaced; timeout 100 $B/bin/octbench --e2e --backend cuda --only angio --producer commit --seconds 5 --json $O/e2e.json 2>&1 | tee $O/e2e_angio.log | grep -E "^angio|rror"
s tails; OUT=$O timeout 280 bash $B/scripts/tails.sh $B > $O/tails_out.log 2>&1; echo "exit $?"; grep -E "^# tails .*(p99 over|all [0-9]+ frames)" $O/tails_out.log
s hostile bscan; timeout 200 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --hostile 50:100,0:200 --json $O/e2e.json 2>&1 | tee $O/hostile_bscan.log | grep -E "^# hostile|publisher|     bscan"
s done
