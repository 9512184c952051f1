#!/bin/bash
B=$PWD/.bundle/m2
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date -u +%T))"; }
s test_register; timeout 120 $B/tests/test_register > $O/test_register.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%|agree' $O/test_register.log | head -4; grep -E ':[EF]:' $O/test_register.log | head -5
s register-live; timeout 100 $B/bin/octbench --backend cuda --only register-live --reps 20 2>&1 | tee $O/register_live.log | tail -12
s register; timeout 100 $B/bin/octbench --backend cuda --only register 2>&1 | tee $O/register.log | tail -6
s register-512; timeout 100 $B/bin/octbench --backend cuda --only register-512 2>&1 | tee $O/register512.log | tail -4
s octsim motion; timeout 60 $B/bin/octsim motion --output /tmp/reg_sim --lines 192 --ascans 200 --samples 1024 --volumes 4 --saccades 1 --frames > /dev/null 2>&1; echo "exit $?"
for w in 3 4; do s reglive workers $w; BIN=$B/bin SIM=/tmp/reg_sim WORKERS=$w timeout 90 bash $B/scripts/reglive_rate.sh 192 200 1024 cuda 100 10 2>&1 | tee $O/reglive_w$w.log | tail -8; done
for g in on off; do s bscan 9500 graph $g; timeout 60 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --frame-rate 9500 --engine-keys cuda_graph=$g 2>&1 | tee $O/bscan9500_$g.log | grep -E "^bscan|lost|skipp" | head -4; done
s e2e_reglive; BACKEND=cuda BIN=$B/bin timeout 150 bash tests/e2e_reglive.sh > $O/e2e_reglive.log 2>&1; echo "exit $?"; tail -3 $O/e2e_reglive.log
s done
