#!/bin/bash
# mid round, call 1: tests + engine benchmarks
B=$PWD/.bundle/mid
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; cd $PWD
s() { echo "=== $* ($(date +%T))"; }
s info; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s test_cuda_engine; timeout 240 $B/tests/test_cuda_engine > $O/test_cuda.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/test_cuda.log; grep -E ':[EF]:' $O/test_cuda.log | head -12; grep -E 'relative L2|gemm pick' $O/test_cuda.log | head -6
s test_angio; timeout 240 $B/tests/test_angio > $O/test_angio.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/test_angio.log; grep -E ':[EF]:' $O/test_angio.log | head -12
s test_register; timeout 200 $B/tests/test_register > $O/test_register.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%|of 26|flagged' $O/test_register.log | head; grep -E ':[EF]:' $O/test_register.log | head
for t in test_engine_api test_engine_plan; do s $t; OCT_TEST_BACKEND=cuda timeout 120 $B/tests/$t > $O/$t.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/$t.log; grep -E ':[EF]:' $O/$t.log | head -5; done
s stream A/B
for v in "" "--cuda-sink warp --gemm-algo default"; do echo "== stream $v"; timeout 90 $B/bin/octbench --backend cuda --only bscan-cfd+msi $v 2>&1 | grep -E "stream|gemm picks"; done
s engine A/B
for w in bscan-msi bscan-cfd volume-cfd+msi msi-volume-full; do for v in "" "--cuda-sink warp --gemm-algo default"; do echo "== $w $v"; OCTBENCH_STREAM=0 timeout 60 $B/bin/octbench --backend cuda --only $w --no-seed --warmup 5 --reps 30 $v 2>&1 | grep -E "^$w|gemm picks"; done; done
s angio-slab A/B
for v in "" "--angio-path legacy" "--angio-path fused"; do echo "== angio-slab $v"; timeout 90 $B/bin/octbench --backend cuda --only angio-slab $v 2>&1 | grep -E "angio-slab|error|refused"; done
s angio-align; timeout 90 $B/bin/octbench --backend cuda --only angio-align 2>&1 | tail -4
s register; timeout 120 $B/bin/octbench --backend cuda --only register 2>&1 | tail -8
s register-512; timeout 120 $B/bin/octbench --backend cuda --only register-512 2>&1 | tail -4
s done
