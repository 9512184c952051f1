#!/bin/bash
B=$PWD/.bundle/hw
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
for h in 16 4 1; do
  echo "=== bscan 50:100 sndhwm $h priority 50 ($(date +%T))"
  timeout 120 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --hostile 50:100 --sndhwm $h --engine-keys priority=50 2>&1 | tee $OUT/hostile_bscan_hwm$h.log | grep -E "^# hostile|     bscan"
done
echo "=== volume 50:100 sndhwm 2 priority 50"
timeout 150 $B/bin/octbench --e2e --backend cuda --only volume --producer commit --hostile 50:100 --sndhwm 2 --engine-keys priority=50 2>&1 | tee $OUT/hostile_volume_hwm2.log | grep -E "^# hostile|     volume"
