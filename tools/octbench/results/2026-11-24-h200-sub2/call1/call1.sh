# call 1 ran the script below with the bundle of commit 6a3960f (copies = publisher
# WITHOUT the kept copy buffers: each copy malloc'd by zmq_msg_init_size)
#!/bin/bash
# sub2 call 1 (issue 21 on the H200): where churning subscribers cost octd.
# Configs of this branch's octd (all with [publish] stats = 1): frame = the
# pre-r4 path (frame loop copies when the pool is dry), pub = publisher thread
# copies, pub_io6 = + 6 I/O threads, pub_malloc = + glibc malloc without
# trimming/mmap of the copies.
B=$PWD/.bundle/sub2 A=$PWD/.bundle/base4
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT
s() { echo "=== $* ($(date -u +%T))"; }
nproc; grep -m1 "model name" /proc/cpuinfo; grep -c TLB /proc/interrupts
H="--hostile-cpus 12-15"
M="GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824:glibc.malloc.top_pad=67108864"
s hostile bscan
timeout 175 bash $B/scripts/hostile_ab.sh /tmp/hb 2 "frame|$H --publish-keys copies=frame,stats=1" "pub|$H --publish-keys copies=publisher,stats=1" "pub_io6|$H --publish-keys copies=publisher,io_threads=6,stats=1" "pub_malloc|$M $H --publish-keys copies=publisher,stats=1" -- --e2e --backend cuda --only bscan --producer commit --seconds 2 --hostile 50:100 2>&1 | tee $O/hostile_bscan.txt | tail -7
s hostile volume
timeout 85 bash $B/scripts/hostile_ab.sh /tmp/hv 1 "frame|$H --publish-keys copies=frame,stats=1" "pub|$H --publish-keys copies=publisher,stats=1" "pub_io6|$H --publish-keys copies=publisher,io_threads=6,stats=1" -- --e2e --backend cuda --only volume --producer commit --seconds 2 --hostile 50:100 2>&1 | tee $O/hostile_volume.txt | tail -5
for f in /tmp/hb/*.txt /tmp/hv/*.txt; do echo "--- $f"; grep -E "per frame with|octd CPU ms|unpaced .*frames/s|all product|hostile .*rate_ratio" $f | cut -c1-900; done > $O/detail.txt
grep -h "per frame with" /tmp/hb/*.1.txt /tmp/hv/*.1.txt | cut -c1-700
cd /tmp && tar czf $O/runs.tgz hb hv 2>/dev/null
s done
