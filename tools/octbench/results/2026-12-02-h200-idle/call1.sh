#!/bin/bash
# call 1 (H200): are the millisecond stops of the k-lin volume's tail (and of
# the benchmark's own spinning producer) idle vCPUs that wake late?  The
# machine's idle and scheduling set-up first, then the same campaign with and
# without /dev/cpu_dma_latency held at 0 (cyclictest's habit: CPUs stay in
# their shallowest idle state), interleaved; cgroup CPU throttling and steal
# around each campaign.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|octd skipped" $1 | cut -c1-300; grep "due time" $1 | sed 's/.*max //; s/;.*//' | tr '\n' ' '; echo; }
st() { awk '/^cpu /{print "cpu user", $2, "sys", $4, "idle", $5, "irq", $7, "softirq", $8, "steal", $9}' /proc/stat
       for f in /sys/fs/cgroup/cpu.stat; do [ -r $f ] && tr '\n' ' ' < $f; done; echo; }
{
s diag
uname -r; nproc; cat /proc/cmdline
for f in /sys/devices/system/cpu/cpuidle/current_driver /sys/devices/system/cpu/cpuidle/current_governor \
         /sys/devices/system/cpu/cpuidle/current_governor_ro /sys/kernel/mm/transparent_hugepage/enabled \
         /sys/kernel/mm/transparent_hugepage/defrag /proc/sys/kernel/timer_migration \
         /proc/sys/kernel/sched_rt_runtime_us /sys/fs/cgroup/cpu.max /proc/sys/kernel/numa_balancing; do
  echo "$f: $(cat $f 2>&1)"; done
ls /sys/devices/system/cpu/cpu0/cpuidle/ 2>&1
for d in /sys/devices/system/cpu/cpu0/cpuidle/state*; do [ -d $d ] && echo "$d $(cat $d/name) lat=$(cat $d/latency) usage=$(cat $d/usage) time=$(cat $d/time)"; done
ls /sys/module/haltpoll/parameters/ 2>&1 && grep . /sys/module/haltpoll/parameters/* 2>&1
ls -l /dev/cpu_dma_latency 2>&1
grep -E "clocksource|tsc" /proc/cpuinfo | sort -u | head -3; cat /sys/devices/system/clocksource/clocksource0/current_clocksource
grep -E "^ *(LOC|RES|CAL|TLB|HYP)" /proc/interrupts | cut -c1-120
} > $O/diag.txt 2>&1
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
for c in 1 2; do
  for m in zmq dma; do
    s "$m $c"; st
    if [ $m = dma ]; then
      exec 9>/dev/cpu_dma_latency && echo 0 >&9 && echo "holding cpu_dma_latency = 0"
    fi
    timeout 90 $B/bin/octbench $K > $O/${m}$c.log 2>&1
    [ $m = dma ] && exec 9>&-
    st; g $O/${m}$c.log
    for d in /sys/devices/system/cpu/cpu0/cpuidle/state*; do [ -d $d ] && echo "cpu0 $(cat $d/name) usage=$(cat $d/usage) time=$(cat $d/time)"; done
  done
done
s done
