#!/bin/bash
# call 2 (H200, same machine as call 1): B-scans at 10,000/s, [engine] nice
# auto (the frame loop at -20: CAP_SYS_NICE is there) against nice=0 (the old
# default), interleaved, 5 runs each; the k-lin volume through the shm endpoint.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped" $1 | cut -c1-300; }
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s log check; OCTBENCH_KEEP_LOGS=1 timeout 40 $B/bin/octbench $B10 --runs 1 --seconds 1 > $O/logcheck.log 2>&1; l=$(grep -o "octd log kept: .*" $O/logcheck.log | head -1 | cut -d' ' -f4); grep -h "nice" $l | head -3
i=0; for k in n0 auto n0 auto n0 auto; do i=$((i+1)); s "$i bscan 10k x5 $k"
  a=""; [ $k = n0 ] && a="--engine-keys nice=0"
  timeout 75 $B/bin/octbench $B10 $a > $O/b10k_${i}_$k.log 2>&1; g $O/b10k_${i}_$k.log; done
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
s klin x5 shm defaults; timeout 75 $B/bin/octbench $K --sub-shm > $O/klin_shm.log 2>&1; g $O/klin_shm.log
s done
