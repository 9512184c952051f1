#!/bin/bash
# call 2 (H200, same machine as call 1): the k-lin volume through ZeroMQ, three
# campaigns with --trace (tarred: the device tool returns at most 8 files), to see
# in which stage the slowest frames lose their time.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS; W=$(mktemp -d)
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped" $1 | cut -c1-300; }
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
for c in 1 2 3; do
  s "klin zmq $c"; mkdir -p $W/tz$c; timeout 90 $B/bin/octbench $K --trace $W/tz$c > $O/klin_zmq$c.log 2>&1; g $O/klin_zmq$c.log
done
tar -C $W -czf $O/traces.tgz .
s done
