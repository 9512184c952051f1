#!/bin/bash
# final round, call A: tests on the GPU
B=$PWD/.bundle/final
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date +%T))"; }
s info; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s test_cuda_engine; timeout 240 $B/tests/test_cuda_engine > $O/test_cuda.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/test_cuda.log; grep -E ':[EF]:' $O/test_cuda.log | head -8; grep -E 'relative L2' $O/test_cuda.log | head -3
s test_angio; timeout 200 $B/tests/test_angio > $O/test_angio.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/test_angio.log; grep -E ':[EF]:' $O/test_angio.log | head -8; grep -E "align (axial|lateral): ssada" $O/test_angio.log
s test_register; timeout 120 $B/tests/test_register > $O/test_register.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/test_register.log; grep -E ':[EF]:' $O/test_register.log | head
for t in test_engine_api test_engine_plan; do s $t; OCT_TEST_BACKEND=cuda timeout 120 $B/tests/$t > $O/$t.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $O/$t.log; grep -E ':[EF]:' $O/$t.log | head -5; done
s memcheck test_angio cuda; CK_RUN_CASE=cuda timeout 150 compute-sanitizer --tool memcheck $B/tests/test_angio > $O/memcheck_angio.log 2>&1; echo "exit $?"; grep -E "ERROR SUMMARY|^[0-9]+%" $O/memcheck_angio.log
for sc in e2e_reglive e2e_angio_live e2e_issue7 e2e_frames; do s "$sc cuda"; BACKEND=cuda BUILD=$B BIN=$B/bin PYTHON=python3 timeout 150 bash tests/$sc.sh > $O/$sc.log 2>&1; echo "exit $?"; grep -E '^FAIL|^PASS|all checks' $O/$sc.log | tail -3; grep -c "Segmentation" $O/$sc.log; done
s "e2e_multi 0,0"; DEVICES=0,0 BACKEND=cuda BIN=$B/bin PYTHON=python3 timeout 200 bash tests/e2e_multi.sh > $O/e2e_multi.log 2>&1; echo "exit $?"; tail -2 $O/e2e_multi.log
s done
