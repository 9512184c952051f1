#!/bin/bash
# call 4 (H200): the MSI sink's tiles filled by cp.async (setup.cuda.sink
# tile, the new default) against the register staging (tile-reg, before):
# test_cuda_engine (all of it), ncu per kernel, the engine stream, and octd
# end to end at 10,000 B-scans/s, new octd against the one before (old/octd).
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped" $1 | cut -c1-300; }
s test_cuda_engine; (cd $B/tests && timeout 220 ./test_cuda_engine > $O/test_cuda.log 2>&1); tail -1 $O/test_cuda.log; grep -E "Failure|failed|Error" $O/test_cuda.log | head -8
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1); echo "ncu=$NCU"
for v in tile tile-reg; do s ncu $v
  timeout 60 $NCU --clock-control none --launch-skip 400 --launch-count 20 --print-summary per-kernel --metrics gpu__time_duration.sum \
    $B/bin/octbench --backend cuda --only bscan-cfd+msi --no-seed --cuda-graph off --cuda-sink $v > $O/ncu_$v.txt 2>&1; echo rc=$?
  grep -E "^  [a-zA-Z_].*\(|gpu__time_duration.sum" $O/ncu_$v.txt | paste - - | sed -E 's/ +/ /g' | cut -c1-90,200-300 | head -8
done
for v in tile tile-reg tile tile-reg; do s stream $v; timeout 40 $B/bin/octbench --backend cuda --only bscan-cfd+msi --cuda-sink $v > $O/stream_$v.txt 2>&1; grep -E "^stream .*depth 3" $O/stream_$v.txt | head -1 | cut -c1-120; done
B10="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm"
U="--e2e --backend cuda --only bscan --producer commit --seconds 3 --topics bscan/cfd,bscan/msi --sub-sockets 2 --sub-shm --window octd"
i=0; for k in new old new old; do i=$((i+1)); s "$i unpaced $k"; v=""; [ $k = old ] && v="OCTBENCH_OCTD=$B/old/octd"
  env $v timeout 40 $B/bin/octbench $U > $O/unp_${i}_$k.log 2>&1; grep -E "^bscan +cuda" $O/unp_${i}_$k.log | head -1 | cut -c1-110; done
i=0; for k in new old new; do i=$((i+1)); s "$i b10k x5 $k"; v=""; [ $k = old ] && v="OCTBENCH_OCTD=$B/old/octd"
  env $v timeout 75 $B/bin/octbench $B10 > $O/b10k_${i}_$k.log 2>&1; g $O/b10k_${i}_$k.log; done
s done
