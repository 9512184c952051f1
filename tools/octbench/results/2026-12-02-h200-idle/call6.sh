#!/bin/bash
# call 6 (H200): the k-lin volume through ZeroMQ with call 5's sink choice
# (octd's part, submitted -> done, 2.17 -> 1.99 ms): two campaigns.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
for c in 1 2; do s "zmq $c"; timeout 90 $B/bin/octbench $K > $O/zmq$c.log 2>&1
  grep -E "^# tails [-a-z]*: (p99|all)|submitted->done|published->received" $O/zmq$c.log; done
s done
