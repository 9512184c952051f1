#!/bin/bash
# perfb call 1 (01:52 UTC), as run (reconstructed from the session; nsys was not on the machine)
B=$PWD/.bundle/perfb
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date +%T))"; }
s info; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s t_graph; CK_RUN_CASE=graph timeout 60 $B/tests/test_cuda_engine > $O/t_graph.log 2>&1; echo "exit $?"
s stream A/B
for g in off on; do timeout 60 $B/bin/octbench --backend cuda --only bscan-cfd+msi --no-seed --cuda-graph $g 2>&1 | tee -a $O/stream_$g.log; done
s e2e A/B
for g in off on; do for rate in "" "--frame-rate 10000"; do timeout 45 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --engine-keys cuda_graph=$g $rate 2>&1 | tee -a $O/e2e_$g.log; done; done
s test_cuda_engine full; timeout 90 $B/tests/test_cuda_engine > $O/test_cuda.log 2>&1; echo "exit $?"
