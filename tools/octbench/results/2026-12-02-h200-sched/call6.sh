#!/bin/bash
# call 6 (H200): [engine] cuda_graph = auto now leaves B-scans launch by
# launch: test_cuda_engine, then issue 19's targets with the defaults.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|^# tails [-a-z]+ +[0-9]|^(volume|bscan)[-a-z]* +cuda|octd skipped" $1 | cut -c1-300; }
s test_cuda_engine; (cd $B/tests && timeout 200 ./test_cuda_engine > $O/test_cuda.log 2>&1); tail -1 $O/test_cuda.log; grep -E "t_graph|Failure|failed" $O/test_cuda.log | head -12
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s bscan 10k x5 shm defaults; timeout 80 $B/bin/octbench $B10 > $O/b10k.log 2>&1; g $O/b10k.log; grep -m1 graphs $O/b10k.log
U="--e2e --backend cuda --only bscan --producer commit --seconds 3 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm --window octd"
s unpaced defaults; timeout 40 $B/bin/octbench $U > $O/unp.log 2>&1; g $O/unp.log
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
s klin x5 shm defaults; timeout 80 $B/bin/octbench $K --sub-shm > $O/klin_shm.log 2>&1; g $O/klin_shm.log
s bscan 10k x5 shm defaults again; timeout 80 $B/bin/octbench $B10 > $O/b10k_2.log 2>&1; g $O/b10k_2.log
s done
