#!/bin/bash
# call 2 (H200): B-scans at 10,000/s x5 through shm with --trace (every
# measured frame's acquired/taken/submitted/done/published/received stamps)
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS; mkdir -p $O/tr
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|^# tails [-a-z]+ +[0-9]|^(volume|bscan)[-a-z]* +cuda|waiting for a CPU" $1 | cut -c1-330; }
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s bscan 10k x5 shm trace; timeout 80 $B/bin/octbench $B10 --trace $O/tr > $O/b10k_tr.log 2>&1; g $O/b10k_tr.log
cd $O/tr && for f in *.csv; do gzip -9 $f; done; ls -la $O/tr
nvidia-smi -q -d PERFORMANCE,CLOCK | head -60
s done
