#!/bin/bash
# call 3 (H200): [engine] nice = auto now octd's own nice with a GPU engine
# (-20 only with CPU engines): the log says so, a B-scan 10k campaign with it,
# and a CPU-backend octd on the same machine takes -20.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped" $1 | cut -c1-300; }
s test_numa; (cd $B/tests && timeout 60 ./test_numa > $O/test_numa.log 2>&1); tail -1 $O/test_numa.log
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
for be in cuda cpu; do s "log check $be"; OCTBENCH_KEEP_LOGS=1 timeout 40 $B/bin/octbench --e2e --backend $be --only bscan --quick --runs 1 --seconds 1 > $O/logcheck_$be.log 2>&1; l=$(grep -o "octd log kept: .*" $O/logcheck_$be.log | head -1 | cut -d' ' -f4); echo "log $l"; grep -h "nice\|engine planned" $l | head -3; done
s bscan 10k x5 defaults; timeout 75 $B/bin/octbench $B10 > $O/b10k.log 2>&1; g $O/b10k.log
s done
