#!/bin/bash
B=$PWD/.bundle/m9
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
E="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 3 --producer-cpu 15"
g() { grep -E "^# tails bscan: (p99|all)|published->received|submitted->done" $1 | cut -c1-200; grep -h "publisher stats" $1 | tail -2 | cut -c1-300; }
s bscan 10k all, copies=frame; timeout 60 $B/bin/octbench $E --publish-keys copies=frame,stats=1 > $O/b_frame.log 2>&1; g $O/b_frame.log
s bscan 10k all, copies=frame, 2 sockets; timeout 60 $B/bin/octbench $E --publish-keys copies=frame --topics bscan/cfd,bscan/msi --sub-sockets 2 > $O/b_frame2.log 2>&1; g $O/b_frame2.log
s bscan 10k all, copies=frame, io_threads 4, 2 sockets; timeout 60 $B/bin/octbench $E --publish-keys copies=frame,io_threads=4 --topics bscan/cfd,bscan/msi --sub-sockets 2 > $O/b_frame2io.log 2>&1; g $O/b_frame2io.log
s bscan 10k all, copies=publisher stats; timeout 60 $B/bin/octbench $E --publish-keys stats=1 > $O/b_pub.log 2>&1; g $O/b_pub.log
s bscan 8k all, copies=frame; timeout 60 $B/bin/octbench ${E/10000/8000} --publish-keys copies=frame > $O/b8_frame.log 2>&1; g $O/b8_frame.log
s done
