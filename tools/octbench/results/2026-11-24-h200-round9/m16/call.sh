#!/bin/bash
B=$PWD/.bundle/m16 A=$PWD/.bundle/base5
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS; H="--hostile-cpus 12-15"
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|published->received|submitted->done|commit->take" $1 | cut -c1-220; }
s bscan 10k x5 2 sockets; timeout 75 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 > $O/b10k.log 2>&1; g $O/b10k.log
s klin x5; timeout 75 $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp > $O/klin.log 2>&1; g $O/klin.log
s hostile bscan; timeout 130 bash $B/scripts/hostile_ab.sh /tmp/hb 3 "old|OCTBENCH_OCTD=$A/bin/octd $H --publish-keys stats=1" "new|$H --publish-keys stats=1" -- --e2e --backend cuda --only bscan --producer commit --seconds 1 --hostile 50:100 > $O/hostile_bscan.txt 2>&1; tail -4 $O/hostile_bscan.txt | cut -c1-300
s hostile volume; timeout 150 bash $B/scripts/hostile_ab.sh /tmp/hv 3 "old|OCTBENCH_OCTD=$A/bin/octd $H --publish-keys stats=1" "new|$H --publish-keys stats=1" -- --e2e --backend cuda --only volume --producer commit --seconds 1 --hostile 50:100 > $O/hostile_volume.txt 2>&1; tail -4 $O/hostile_volume.txt | cut -c1-300
cd /tmp && tar czf $O/logs.tgz hb hv 2>/dev/null
s done
