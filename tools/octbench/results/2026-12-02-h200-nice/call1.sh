#!/bin/bash
# call 1 (H200): [engine] nice = auto (0523507) on the GPU machine: does it
# apply there, the B-scan 10k campaign with it and without it (nice=0), the
# k-lin volume through ZeroMQ, and issue 21's crowd with the defaults.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|^# tails [-a-z]+ +[0-9]|^(volume|bscan)[-a-z]* +cuda|octd skipped" $1 | cut -c1-300; }
s machine; nproc; lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node"; grep -E "^Cap(Eff|Bnd)" /proc/self/status; echo "ulimit -e $(ulimit -e) -r $(ulimit -r)"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
s test_numa; (cd $B/tests && timeout 60 ./test_numa > $O/test_numa.log 2>&1); tail -2 $O/test_numa.log; grep SKIP $O/test_numa.log
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s bscan 10k x5 defaults; timeout 80 $B/bin/octbench $B10 > $O/b10k_auto.log 2>&1; g $O/b10k_auto.log; grep -ah "frame loop at nice\|nice = auto" $O/b10k_auto.log | head -2
s bscan 10k x5 nice=0; timeout 80 $B/bin/octbench $B10 --engine-keys nice=0 > $O/b10k_n0.log 2>&1; g $O/b10k_n0.log
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
s klin x5 zmq defaults; timeout 80 $B/bin/octbench $K > $O/klin_zmq.log 2>&1; g $O/klin_zmq.log
for w in bscan volume; do
  s hostile $w; timeout 150 bash tools/octbench/hostile_ab.sh $O/h$w 2 "auto|" "n0|--engine-keys nice=0" -- --e2e --backend cuda --only $w --producer commit --seconds 1 --hostile 50:100 > $O/hostile_$w.txt 2>&1; tail -3 $O/hostile_$w.txt | cut -c1-300
done
s bscan 10k x5 defaults again; timeout 80 $B/bin/octbench $B10 > $O/b10k_auto2.log 2>&1; g $O/b10k_auto2.log
s done
