#!/bin/bash
B=$PWD/.bundle/m6
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
E="--e2e --backend cuda --only bscan --producer commit --seconds 3"; P="--producer-cpu 15"
s bscan 10000 x5, bscan/cfd only; timeout 75 $B/bin/octbench $E --frame-rate 10000 --runs 5 $P --topics bscan/cfd > $O/bscan10k_cfd.log 2>&1; grep -E "^# tails|^# stages" $O/bscan10k_cfd.log | cut -c1-300
V="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
s klin default; timeout 85 $B/bin/octbench $V > $O/klin_def.log 2>&1; grep -E "^# tails|^# stages" $O/klin_def.log | cut -c1-300
s klin sndbuf 8M; timeout 85 $B/bin/octbench $V --publish-keys sndbuf=8388608 > $O/klin_sndbuf.log 2>&1; grep -E "^# tails|^# stages" $O/klin_sndbuf.log | cut -c1-300
s klin copies=frame; timeout 85 $B/bin/octbench $V --publish-keys copies=frame > $O/klin_frame.log 2>&1; grep -E "^# tails|^# stages" $O/klin_frame.log | cut -c1-300
s done
