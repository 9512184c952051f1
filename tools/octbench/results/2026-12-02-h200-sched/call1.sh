#!/bin/bash
# call 1 (H200): where the B-scan 10k/s misses come from (octd's threads'
# time runnable but without a CPU, schedstat), default vs the frame loop at
# SCHED_FIFO ([engine] priority = 50), and the k-lin volume through ZeroMQ.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|^# tails [-a-z]+ +[0-9]|^(volume|bscan)[-a-z]* +cuda|waiting for a CPU" $1 | cut -c1-330; }
s env; id -u; ulimit -r; nproc; cat /proc/sys/kernel/sched_rt_runtime_us; cat /proc/self/schedstat; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s bscan 10k x5 shm default; timeout 80 $B/bin/octbench $B10 > $O/b10k_def.log 2>&1; g $O/b10k_def.log
s bscan 10k x5 shm priority=50; timeout 80 $B/bin/octbench $B10 --engine-keys priority=50 > $O/b10k_fifo.log 2>&1; g $O/b10k_fifo.log; grep -i "sched_fifo\|priority" $O/b10k_fifo.log | head -3
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
s klin x5 zmq default; timeout 80 $B/bin/octbench $K > $O/klin_def.log 2>&1; g $O/klin_def.log
s klin x5 zmq priority=50; timeout 80 $B/bin/octbench $K --engine-keys priority=50 > $O/klin_fifo.log 2>&1; g $O/klin_fifo.log
s done
