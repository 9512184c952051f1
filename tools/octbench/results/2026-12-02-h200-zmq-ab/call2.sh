#!/bin/bash
# call 2 (H200): call 1 showed the slow campaigns' producer (a spinning thread)
# late by up to 1.5-5.8 ms in the same runs. Is the machine (hypervisor steal,
# interrupts) stopping threads? vmstat every second and /proc/stat's steal
# over each campaign; the subscriber on ipc:// (as before), on loopback TCP
# (--sub-tcp) and on the shm endpoint, alternating.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped" $1 | cut -c1-300; grep "due time" $1 | sed 's/.*max //; s/;.*//' | tr '\n' ' '; echo; }
st() { awk '/^cpu /{print "cpu user", $2, "nice", $3, "sys", $4, "idle", $5, "iowait", $6, "irq", $7, "softirq", $8, "steal", $9}' /proc/stat; }
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
(vmstat -w 1 2>&1 || echo "no vmstat") > $O/vmstat.log &
VP=$!
for c in 1 2; do
  for m in zmq tcp shm; do
    x=; [ $m = shm ] && x=--sub-shm; [ $m = tcp ] && x=--sub-tcp
    s "$m $c"; st; timeout 90 $B/bin/octbench $K $x > $O/${m}$c.log 2>&1; st; g $O/${m}$c.log
  done
done
kill $VP
s done
