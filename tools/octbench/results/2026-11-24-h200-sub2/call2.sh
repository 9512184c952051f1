#!/bin/bash
# sub2 call 2 (issue 21 on the H200): A/B of main (base4's octd: zero-copy,
# the frame loop copies when subscribers hold the pool) against this
# branch's default ([publish] copies = publisher, kept copy buffers), same
# octbench (this branch's), 50 stalled + 100 churning subscribers in a child
# process on CPUs 12-15, 3 runs each, interleaved, medians.
B=$PWD/.bundle/sub2 A=$PWD/.bundle/base4
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT
s() { echo "=== $* ($(date -u +%T))"; }
H="--hostile-cpus 12-15"
s hostile bscan
timeout 125 bash $B/scripts/hostile_ab.sh /tmp/hb 3 "old|OCTBENCH_OCTD=$A/bin/octd $H" "new|$H --publish-keys stats=1" -- --e2e --backend cuda --only bscan --producer commit --seconds 2 --hostile 50:100 2>&1 | tee $O/hostile_bscan.txt | tail -4
s hostile volume
timeout 155 bash $B/scripts/hostile_ab.sh /tmp/hv 3 "old|OCTBENCH_OCTD=$A/bin/octd $H" "new|$H --publish-keys stats=1" -- --e2e --backend cuda --only volume --producer commit --seconds 2 --hostile 50:100 2>&1 | tee $O/hostile_volume.txt | tail -4
for f in /tmp/hb/*.txt /tmp/hv/*.txt; do echo "--- $f"; grep -E "per frame with|octd CPU ms|unpaced |all product|hostile .*rate_ratio" $f | cut -c1-900; done > $O/detail.txt
for f in /tmp/hb/*.txt /tmp/hv/*.txt; do echo "$f $(grep -E 'unpaced +-  ' $f | awk '{print $7, $10, $11}' | tr '\n' ' ')"; done
cd /tmp && tar czf $O/runs.tgz hb hv 2>/dev/null
s done
