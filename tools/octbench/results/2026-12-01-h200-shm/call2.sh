#!/bin/bash
# call 2 (H200): issue 19's k-lin volume and B-scan targets again with the
# shm subscriber (octbench waits for its untimed frame now), then issue 21's
# crowd: 50 stalled + 100 churning on the normal endpoint, the measuring
# subscriber on ZeroMQ (as in round 9) or on the shm endpoint, interleaved.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS; H="--hostile-cpus 12-15"
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|^# tails [-a-z]+ +[0-9]|published->received|^(volume|bscan)[-a-z]* +cuda" $1 | cut -c1-200; }
s klin x5 shm; timeout 80 $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp --sub-shm > $O/klin_shm.log 2>&1; g $O/klin_shm.log
s bscan 10k x5 shm; timeout 80 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm > $O/b10k_shm.log 2>&1; g $O/b10k_shm.log
for w in bscan volume; do
  s hostile $w; timeout 170 bash tools/octbench/hostile_ab.sh /tmp/h$w 3 "zmq|$H" "shm|$H --sub-shm" -- --e2e --backend cuda --only $w --producer commit --seconds 1 --hostile 50:100 > $O/hostile_$w.txt 2>&1; tail -4 $O/hostile_$w.txt | cut -c1-400
done
cd /tmp && tar czf $O/hostile_logs.tgz hbscan hvolume 2>/dev/null
s done
