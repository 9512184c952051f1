#!/bin/bash
# call 1 (H200): what the k-lin volume's ZeroMQ delivery tail depends on. Same
# campaign as 2026-12-02-h200-klin-tail, alternating: as is; the subscriber's
# (and octd's) large message buffers kept by glibc malloc instead of mapped and
# unmapped per message (page faults); [publish] sndbuf 4 MiB; both.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped" $1 | cut -c1-300; }
echo "wmem_max $(cat /proc/sys/net/core/wmem_max) rmem_max $(cat /proc/sys/net/core/rmem_max) nproc $(nproc)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
M="env MALLOC_MMAP_THRESHOLD_=67108864 MALLOC_TRIM_THRESHOLD_=268435456 MALLOC_TOP_PAD_=16777216"
for c in 1 2; do
  s "as-is $c";   timeout 90 $B/bin/octbench $K > $O/asis$c.log 2>&1; g $O/asis$c.log
  s "malloc $c";  timeout 90 $M $B/bin/octbench $K > $O/malloc$c.log 2>&1; g $O/malloc$c.log
  s "sndbuf $c";  timeout 90 $B/bin/octbench $K --publish-keys sndbuf=4194304 > $O/sndbuf$c.log 2>&1; g $O/sndbuf$c.log
done
s done
