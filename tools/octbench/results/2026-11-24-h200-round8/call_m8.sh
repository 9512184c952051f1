#!/bin/bash
B=$PWD/.bundle/m8
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
s record on the GPU; OCTD_LIB=$B/lib/liboct.so.0 PYTHONPATH=tools/python timeout 130 python3 tools/python/bench.py --bin $B/bin --backend cuda --dir /tmp --only record --record-fps 1000 --seconds 4 --record-repeats 3 > $O/record.log 2>&1; grep -v "^bench:" $O/record.log | tail -12 | cut -c1-400
s bscan unpaced; timeout 40 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --seconds 3 > $O/bscan.log 2>&1; grep -E "^bscan|frame loop" $O/bscan.log | cut -c1-300
s done
