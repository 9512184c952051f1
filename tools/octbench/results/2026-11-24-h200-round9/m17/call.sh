#!/bin/bash
B=$PWD/.bundle/m16
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|published->received|commit->take" $1 | cut -c1-220; }
E="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2"
s bscan 10k x5 copies=frame; timeout 60 $B/bin/octbench $E --publish-keys copies=frame > $O/b_frame.log 2>&1; g $O/b_frame.log
s bscan 10k x5 auto again; timeout 60 $B/bin/octbench $E > $O/b_auto.log 2>&1; g $O/b_auto.log
s done
