#!/bin/bash
B=$PWD/.bundle/m3
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT
s() { echo "=== $* ($(date -u +%T))"; }
s hostile bscan window octd; timeout 120 bash $B/scripts/hostile_ab.sh /tmp/hb 2 "child|--hostile-cpus 12-15" "fifo|--hostile-cpus 12-15 --publish-keys cpus=8-11 --engine-keys priority=50" -- --e2e --backend cuda --only bscan --producer commit --seconds 2 --window octd --hostile 50:100 2>&1 | tee $O/hostile_bscan_wo.txt | tail -5
s hostile volume window octd; timeout 80 bash $B/scripts/hostile_ab.sh /tmp/hv 1 "child|--hostile-cpus 12-15" "fifo|--hostile-cpus 12-15 --publish-keys cpus=8-11 --engine-keys priority=50" -- --e2e --backend cuda --only volume --producer commit --seconds 2 --window octd --hostile 50:100 2>&1 | tee $O/hostile_volume_wo.txt | tail -5
s done
