#!/bin/bash
# fl call 2 (issue 19 B-scans): main (base4) vs r4-fl octd, the same (r4-fl) octbench producer
B=$PWD/.bundle/fl; A=$PWD/.bundle/base4
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date -u +%T))"; }
s info; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
E="--e2e --backend cuda --only bscan --producer commit --seconds 3"
P="--producer-cpu 15"
k() { grep -E "^bscan|^volume|^# bscan at|frame loop|product buffers|^# tails|no frame lost|highest" "$1" | cut -c1-1700; }
s new unpaced; timeout 30 $B/bin/octbench $E > $O/new_unpaced.log 2>&1; k $O/new_unpaced.log
s old unpaced; OCTBENCH_OCTD=$A/bin/octd timeout 30 $B/bin/octbench $E > $O/old_unpaced.log 2>&1; k $O/old_unpaced.log
s new 10000 x5; timeout 60 $B/bin/octbench $E --frame-rate 10000 --runs 5 $P > $O/new_10k.log 2>&1; k $O/new_10k.log
s old 10000 x5; OCTBENCH_OCTD=$A/bin/octd timeout 60 $B/bin/octbench $E --frame-rate 10000 --runs 5 $P > $O/old_10k.log 2>&1; k $O/old_10k.log
s new 9500 x5; timeout 60 $B/bin/octbench $E --frame-rate 9500 --runs 5 $P > $O/new_9500.log 2>&1; k $O/new_9500.log
s old 9500 x3; OCTBENCH_OCTD=$A/bin/octd timeout 40 $B/bin/octbench $E --frame-rate 9500 --runs 3 $P > $O/old_9500.log 2>&1; k $O/old_9500.log
s new overlap_input=no 10000 x2; timeout 30 $B/bin/octbench $E --frame-rate 10000 --runs 2 $P --engine-keys overlap_input=no > $O/new_noov_10k.log 2>&1; k $O/new_noov_10k.log
s new priority=50 10000 x3; timeout 40 $B/bin/octbench $E --frame-rate 10000 --runs 3 $P --engine-keys priority=50 > $O/new_prio_10k.log 2>&1; k $O/new_prio_10k.log
s new volume; timeout 35 $B/bin/octbench --e2e --backend cuda --only volume --producer commit --seconds 3 > $O/new_volume.log 2>&1; k $O/new_volume.log
s old volume; OCTBENCH_OCTD=$A/bin/octd timeout 35 $B/bin/octbench --e2e --backend cuda --only volume --producer commit --seconds 3 > $O/old_volume.log 2>&1; k $O/old_volume.log
s done
