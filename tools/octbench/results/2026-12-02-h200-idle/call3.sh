#!/bin/bash
# call 3 (H200): octbench's ring now holds >= 128 MiB of frames (B-scans
# 500x1024: 128 slots instead of 32).  Issue 21's crowd on B-scans with the
# old 32-slot ring and the new default, interleaved; the B-scan 10,000/s
# campaign with the new ring (ZeroMQ, then shm); the CuPy anchor (issue 19.5).
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped|published->received" $1 | cut -c1-300; }
s hostile bscan
timeout 200 bash tools/octbench/hostile_ab.sh $O/hb 3 "s32|--hostile-cpus 12-15 --ring-slots 32" "new|--hostile-cpus 12-15" \
  -- --e2e --backend cuda --only bscan --producer commit --seconds 1 --hostile 50:100 > $O/hostile_bscan.txt 2>&1
tail -3 $O/hostile_bscan.txt | cut -c1-300
for f in $O/hb/*.txt; do echo "$(basename $f) $(grep -o '[0-9]* slots' $f | head -1) $(grep '^# hostile ' $f | head -1 | grep -o 'lost90 [0-9]* lost90_without [0-9]*\|fl_rate_ratio [0-9.]*\|fl_p99_ratio [0-9.]*\|fl_p99_90_ratio [0-9.]*' | tr '\n' ' ')"; done
tar czf $O/hb.tgz -C $O hb && rm -rf $O/hb
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2"
s "bscan 10k zmq"; timeout 80 $B/bin/octbench $B10 > $O/b10k_zmq.log 2>&1; g $O/b10k_zmq.log; grep -o "[0-9]* slots" $O/b10k_zmq.log | head -1
s "bscan 10k shm"; timeout 80 $B/bin/octbench $B10 --sub-shm > $O/b10k_shm.log 2>&1; g $O/b10k_shm.log
s cupy; timeout 200 bash tools/octbench/cupy_compare.sh $B $O/cupy > $O/cupy.txt 2>&1; tail -12 $O/cupy.txt
tar czf $O/cupy.tgz -C $O cupy && rm -rf $O/cupy
s done
