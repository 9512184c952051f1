#!/bin/bash
# call 8 (H200): 10,000 B-scans/s, the old default (graph on) against the new
# (auto: launch by launch for B-scans), interleaved, 3 runs each, twice.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT
B10="--e2e --backend cuda --only bscan --producer commit --seconds 2 --frame-rate 10000 --runs 3 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
i=0; for k in on auto on auto; do i=$((i+1)); echo "=== $i graph $k ($(date -u +%T))"; timeout 60 $B/bin/octbench $B10 --engine-keys cuda_graph=$k > $O/b10k_${i}_$k.log 2>&1; grep -E "^# tails bscan( |: p99)" $O/b10k_${i}_$k.log | cut -c1-200; done
