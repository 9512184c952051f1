#!/bin/bash
# sub3 (issue 21, r5) call 2: final A/B, 50 stalled + 100 churning: old octd (main 29b65b4, copies = publisher)
# vs this branch (default copies = auto, copy-only buffers up front), 3 runs each, B-scans and volumes
# (volume-klin-disp tails, copies = publisher vs auto: call 1)
B=$PWD/.bundle/sub3; A=$PWD/.bundle/base5/bin
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
left() { [ $((SECONDS-T0)) -lt $1 ] || { echo "skipped: $((SECONDS-T0)) s gone"; false; }; }
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
export OCTBENCH=$B/bin/octbench; H="--hostile-cpus 12-15"
s hostile bscan; timeout 125 bash $B/scripts/hostile_ab.sh $O/hb 3 "old|OCTBENCH_OCTD=$A/octd $H --publish-keys stats=1" "new|$H --publish-keys stats=1" -- --e2e --backend cuda --only bscan --producer commit --seconds 1 --hostile 50:100 2>&1 | tail -3
left 128 && s hostile volume; timeout 150 bash $B/scripts/hostile_ab.sh $O/hv 3 "old|OCTBENCH_OCTD=$A/octd $H --publish-keys stats=1" "new|$H --publish-keys stats=1" -- --e2e --backend cuda --only volume --producer commit --seconds 1 --hostile 50:100 2>&1 | tail -3
left 252 && s "hostile bscan, non-temporal memcpy (one run: do the publisher's copies get cheaper?)"; timeout 30 bash $B/scripts/hostile_ab.sh $O/hn 1 "nt|GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x20000 $H --publish-keys stats=1" -- --e2e --backend cuda --only bscan --producer commit --seconds 1 --hostile 50:100 2>&1 | tail -1; grep -h "publisher stats" $O/hn/*.txt | sed -n "8,12p" | cut -c40-330
s done
cd $O && tar czf logs.tgz hb hv hn 2>/dev/null && rm -rf hb hv hn; ls -la $O
