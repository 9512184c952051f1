#!/bin/bash
# sub3 (issue 21, r5) call: the frame loop's rate / p99 beside the delivery's with 50 stalled + 100 churning,
# old octd (main 29b65b4) vs this branch (copy-only buffers up front) with [publish] copies = publisher and auto; volume-klin-disp tails auto vs publisher
B=$PWD/.bundle/sub3; A=$PWD/.bundle/base5/bin
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
left() { [ $((SECONDS-T0)) -lt $1 ] || { echo "skipped: $((SECONDS-T0)) s gone"; false; }; }
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
export OCTBENCH=$B/bin/octbench; H="--hostile-cpus 12-15"
s hostile bscan; timeout 165 bash $B/scripts/hostile_ab.sh $O/hb 2 "old|OCTBENCH_OCTD=$A/octd $H --publish-keys stats=1" "auto|$H --publish-keys copies=auto,stats=1" "pub|$H --publish-keys stats=1" -- --e2e --backend cuda --only bscan --producer commit --seconds 2 --hostile 50:100 2>&1 | tail -4
left 168 && s hostile volume; timeout 62 bash $B/scripts/hostile_ab.sh $O/hv 1 "old|OCTBENCH_OCTD=$A/octd $H --publish-keys stats=1" "auto|$H --publish-keys copies=auto,stats=1" -- --e2e --backend cuda --only volume --producer commit --seconds 2 --hostile 50:100 2>&1 | tail -3
for c in publisher auto; do left 258 && s klin $c; timeout 26 $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 2 --seconds 2 --only volume-klin-disp --publish-keys copies=$c > $O/klin_$c.log 2>&1; grep -E "^# tails|^# stages" $O/klin_$c.log | cut -c1-260; done
s done
