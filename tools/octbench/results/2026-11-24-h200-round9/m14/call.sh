#!/bin/bash
B=$PWD/.bundle/m9
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
cat /sys/devices/system/cpu/cpuidle/current_driver /sys/devices/system/cpu/cpuidle/current_governor* 2>&1 | head -3
for d in /sys/devices/system/cpu/cpu0/cpuidle/state*; do echo "$(cat $d/name) lat $(cat $d/latency) usage $(cat $d/usage)"; done 2>&1 | head -8
cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>&1; grep -m1 MHz /proc/cpuinfo; ls -l /dev/cpu_dma_latency
V="--e2e --backend cuda --producer commit --frame-rate 256 --runs 3 --seconds 3 --only volume-klin-disp --publish-keys copies=frame"
g() { grep -E "^# tails [-a-z]*: (p99|all)|published->received|take->submitted|submitted->done|commit->take" $1 | cut -c1-200; }
s klin frame; timeout 60 $B/bin/octbench $V > $O/k_f.log 2>&1; g $O/k_f.log
s klin frame, cpu_dma_latency 0
python3 -c "
import os,struct,time,sys
f=os.open('/dev/cpu_dma_latency',os.O_WRONLY); os.write(f,struct.pack('i',0)); print('held',flush=True); time.sleep(120)" &
H=$!; sleep 1
timeout 60 $B/bin/octbench $V > $O/k_fq.log 2>&1; g $O/k_fq.log
for d in /sys/devices/system/cpu/cpu0/cpuidle/state*; do echo "$(cat $d/name) usage $(cat $d/usage)"; done 2>&1 | head -8
V2="--e2e --backend cuda --producer commit --frame-rate 256 --runs 3 --seconds 3 --only volume --publish-keys copies=frame"
s volume frame, cpu_dma_latency 0; timeout 60 $B/bin/octbench $V2 > $O/v_fq.log 2>&1; g $O/v_fq.log
kill $H
s done
