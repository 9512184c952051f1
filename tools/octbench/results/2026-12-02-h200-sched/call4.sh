#!/bin/bash
# call 4 (H200): when octd skips frames at 10,000 B-scans/s (warm-up,
# measured window or after: the status block's count at each edge), and
# whether the GPU's clocks can be locked here.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|^# tails [-a-z]+ +[0-9]|^(volume|bscan)[-a-z]* +cuda|octd skipped" $1 | cut -c1-300; }
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s bscan 10k x5 shm; timeout 80 $B/bin/octbench $B10 > $O/b10k.log 2>&1; g $O/b10k.log
s lgc; nvidia-smi -lgc 1980,1980 2>&1 | head -3; nvidia-smi -pm 1 2>&1 | head -2
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,persistence_mode,power.draw,power.limit --format=csv
s bscan 10k x5 shm after lgc; timeout 80 $B/bin/octbench $B10 > $O/b10k_lgc.log 2>&1; g $O/b10k_lgc.log
nvidia-smi -rgc 2>&1 | head -2
s done
