#!/bin/bash
B=$PWD/.bundle/m9
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
echo "=== test_register (CUDA suites) $(date -u +%T)"; timeout 150 $B/tests/test_register > $OUT/test_register.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%' $OUT/test_register.log; grep -E ':[EF]:' $OUT/test_register.log | head
echo "=== register-live $(date -u +%T)"; timeout 60 $B/bin/octbench --backend cuda --only register-live --reps 20 2>&1 | tail -4 | cut -c1-250
