#!/bin/bash
# call 1 (H200): where the k-lin + dispersion volume's slowest frames lose their time
# (--trace: six stamps per frame), through ZeroMQ and through the shm endpoint, two
# campaigns of 5 runs each; then one B10 campaign for the B-scan tally.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped" $1 | cut -c1-300; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; nproc
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
for c in 1 2; do
  s "klin zmq $c"; mkdir -p $O/tz$c; timeout 90 $B/bin/octbench $K --trace $O/tz$c > $O/klin_zmq$c.log 2>&1; g $O/klin_zmq$c.log
  s "klin shm $c"; mkdir -p $O/ts$c; timeout 90 $B/bin/octbench $K --sub-shm --trace $O/ts$c > $O/klin_shm$c.log 2>&1; g $O/klin_shm$c.log
done
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s "bscan 10k x5"; timeout 90 $B/bin/octbench $B10 > $O/b10k.log 2>&1; g $O/b10k.log
s done
