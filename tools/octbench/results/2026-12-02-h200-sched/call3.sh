#!/bin/bash
# call 3 (H200): the B-scan 10k/s runs again with the machine's irq/softirq/
# steal time per run and --trace; the engine's B-scan stream rate with the
# MSI GEMM output in L2-sized chunks (does the sink get faster?).
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS; mkdir -p $O/tr
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|^# tails [-a-z]+ +[0-9]|^(volume|bscan)[-a-z]* +cuda|waiting for a CPU" $1 | cut -c1-400; }
grep -i -E "nvidia|CPU0" /proc/interrupts | cut -c1-200 | head -5
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s bscan 10k x5 shm trace; timeout 80 $B/bin/octbench $B10 --trace $O/tr > $O/b10k_tr.log 2>&1; g $O/b10k_tr.log
cd $O/tr && for f in *.csv; do gzip -9 $f; done; cd - >/dev/null
for c in 0 4 8 12; do s engine stream chunk $c; timeout 60 $B/bin/octbench --backend cuda --only bscan-cfd+msi --no-seed --gemm-chunk-mb $c > $O/eng_c$c.log 2>&1; grep -E "^stream|gemm picks|^bscan" $O/eng_c$c.log | cut -c1-250; done
grep -i -E "nvidia" /proc/interrupts | cut -c1-200 | head -3
s done
