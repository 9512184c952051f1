#!/bin/bash
# call 2 (H200): call 1 showed octd's own part steady (submitted -> done p99
# 2.20-2.24 ms) and the tail in the delivery of 3.55 MB of images per volume
# through one ZeroMQ connection (published -> received p50 0.91, p99 1.6-1.7
# ms).  The same campaign with the subscriber's topics dealt to two
# connections (octd's PUB serves each from its own I/O thread: 4 on 16 cores),
# interleaved with one connection; then the B-scan target's campaign.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped|published->received|submitted->done" $1 | cut -c1-300; grep "due time" $1 | sed 's/.*max //; s/;.*//' | tr '\n' ' '; echo; }
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
T=enface/cfd,enface/msi,confocal/cfd,confocal/msi,xsec_h/cfd,xsec_h/msi,xsec_v/cfd,xsec_v/msi
for c in 1 2; do
  for m in one two; do
    x=; [ $m = two ] && x="--topics $T --sub-sockets 2"
    s "$m $c"; timeout 90 $B/bin/octbench $K $x > $O/${m}$c.log 2>&1; g $O/${m}$c.log
  done
done
s "bscan 10000/s"
timeout 90 $B/bin/octbench --e2e --backend cuda --producer commit --only bscan --frame-rate 10000 --runs 5 \
  --seconds 3 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 > $O/bscan.log 2>&1; g $O/bscan.log
s done
