#!/bin/bash
B=$PWD/.bundle/m3
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT
s() { echo "=== $* ($(date -u +%T))"; }
s hostile bscan; timeout 200 bash $B/scripts/hostile_ab.sh /tmp/hb 3 "child|--hostile-cpus 12-15" "fifo|--hostile-cpus 12-15 --publish-keys cpus=8-11 --engine-keys priority=50" -- --e2e --backend cuda --only bscan --producer commit --seconds 2 --hostile 50:100 2>&1 | tee $O/hostile_bscan.txt | tail -8
s hostile volume; timeout 150 bash $B/scripts/hostile_ab.sh /tmp/hv 2 "child|--hostile-cpus 12-15" "fifo|--hostile-cpus 12-15 --publish-keys cpus=8-11 --engine-keys priority=50" -- --e2e --backend cuda --only volume --producer commit --seconds 2 --hostile 50:100 2>&1 | tee $O/hostile_volume.txt | tail -8
cd /tmp && tar czf $O/hostile_runs.tgz hb hv 2>/dev/null
s done
