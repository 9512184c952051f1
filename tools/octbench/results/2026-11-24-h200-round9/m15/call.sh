#!/bin/bash
B=$PWD/.bundle/m15 A=$PWD/.bundle/base5
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
s test_cuda_engine all; timeout 330 $B/tests/test_cuda_engine > $O/tce.log 2>&1; echo "exit $?"; grep -E "^[0-9]+%|Failures|fail|FAIL" $O/tce.log | head -20
s test_angio; timeout 60 $B/tests/test_angio > $O/angio.log 2>&1; echo "exit $?"; tail -1 $O/angio.log
g() { grep -E "^# tails [-a-z]*: (p99|all)|published->received|take->submitted|submitted->done|commit->take" $1 | cut -c1-200; }
V="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
s klin new copies=frame; timeout 70 $B/bin/octbench $V --publish-keys copies=frame > $O/k_f.log 2>&1; g $O/k_f.log
s klin new default; timeout 70 $B/bin/octbench $V > $O/k_d.log 2>&1; g $O/k_d.log
s done
