#!/bin/bash
# call 5 (H200): after the cuda.sink range fix (2 = tile-reg was refused in
# call 4, and that cascaded through test_cuda_engine's shared g_sink):
# test_cuda_engine whole, ncu and the engine stream with tile-reg, and one
# more 10,000/s campaign with the new default.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped" $1 | cut -c1-300; }
s test_cuda_engine; (cd $B/tests && timeout 220 ./test_cuda_engine > $O/test_cuda.log 2>&1); tail -1 $O/test_cuda.log; grep -E "Failure|failed|Error|:F:|:E:" $O/test_cuda.log | head -8
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
s ncu tile-reg; timeout 60 $NCU --clock-control none --launch-skip 400 --launch-count 20 --print-summary per-kernel --metrics gpu__time_duration.sum \
    $B/bin/octbench --backend cuda --only bscan-cfd+msi --no-seed --cuda-graph off --cuda-sink tile-reg > $O/ncu_tile-reg.txt 2>&1; echo rc=$?
grep -A7 "sink_tile_kernel<SrcGemm" $O/ncu_tile-reg.txt | grep -E "kernel<|duration" | cut -c1-120
for v in tile-reg tile tile-reg tile; do s stream $v; timeout 40 $B/bin/octbench --backend cuda --only bscan-cfd+msi --cuda-sink $v > $O/stream_${v}_$SECONDS.txt 2>&1; grep -E "^stream .*registered depth 3" $O/stream_${v}_*.txt | tail -1 | cut -c1-110; done
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
s b10k x5 new; timeout 75 $B/bin/octbench $B10 > $O/b10k_new.log 2>&1; g $O/b10k_new.log
s done
