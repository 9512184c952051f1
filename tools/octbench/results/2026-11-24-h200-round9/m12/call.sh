#!/bin/bash
B=$PWD/.bundle/m9
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
V="--e2e --backend cuda --producer commit --frame-rate 256 --runs 3 --seconds 3 --only volume-klin-disp"
g() { grep -E "^# tails volume[-a-z]*: (p99|all)|published->received|take->submitted|submitted->done|commit->take" $1 | cut -c1-200; }
T="--topics enface/cfd,enface/msi,confocal,xsec"
s klin frame 2 sockets; timeout 60 $B/bin/octbench $V --publish-keys copies=frame $T --sub-sockets 2 > $O/k_f2.log 2>&1; g $O/k_f2.log
s klin frame 4 sockets io 4; timeout 60 $B/bin/octbench $V --publish-keys copies=frame,io_threads=4 $T --sub-sockets 4 > $O/k_f4.log 2>&1; g $O/k_f4.log
s volume frame 2 sockets; timeout 60 $B/bin/octbench ${V/volume-klin-disp/volume} --publish-keys copies=frame $T --sub-sockets 2 > $O/v_f2.log 2>&1; g $O/v_f2.log
s done
