#!/bin/bash
# call 5 (H200): octd's unpaced B-scan ceiling (commit producer, the window
# on octd's published count) with and without the CUDA graph, then 10k/s x5
# without it: is the drain rate after a pause better without the graph's
# device time?
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|^# tails [-a-z]+ +[0-9]|^(volume|bscan)[-a-z]* +cuda|octd skipped|busy" $1 | cut -c1-300; }
U="--e2e --backend cuda --only bscan --producer commit --seconds 3 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm --window octd"
for k in on off on off; do s unpaced graph $k; timeout 40 $B/bin/octbench $U --engine-keys cuda_graph=$k > $O/unp_$k.log 2>&1; g $O/unp_$k.log; done
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s bscan 10k x5 graph off; timeout 80 $B/bin/octbench $B10 --engine-keys cuda_graph=off > $O/b10k_off.log 2>&1; g $O/b10k_off.log
s done
