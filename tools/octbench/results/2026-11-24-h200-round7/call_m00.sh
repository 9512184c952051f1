#!/bin/bash
B=$PWD/.bundle/base3
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date -u +%T))"; }
s e2e_multi 0,0; DEVICES=0,0 BACKEND=cuda BIN=$B/bin timeout 150 bash tests/e2e_multi.sh > $O/e2e_multi00.log 2>&1; echo "exit $?"; grep -E "PASS|FAIL|check-order|compare|taken out|torn" $O/e2e_multi00.log | head -12
s volume commit 0,0; timeout 120 $B/bin/octbench --e2e --backend cuda --only volume --producer commit --devices 0,0 2>&1 | tee $O/v00.log | grep -E "^volume|devices 0|engine [01] \("
s bscan commit 0,0; timeout 100 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --devices 0,0 2>&1 | tee $O/b00.log | grep -E "^bscan|devices 0|engine [01] \("
s done
