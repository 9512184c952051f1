#!/bin/bash
B=$PWD/.bundle/m9
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
V="--e2e --backend cuda --producer commit --frame-rate 256 --runs 3 --seconds 3 --only volume-klin-disp"
g() { grep -E "^# tails [-a-z]*: (p99|all)|published->received|take->submitted|submitted->done|commit->take" $1 | cut -c1-200; }
M="glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=1073741824"
s klin frame tunables; GLIBC_TUNABLES=$M timeout 60 $B/bin/octbench $V --publish-keys copies=frame > $O/k_fm.log 2>&1; g $O/k_fm.log
s klin frame tunables arena1; GLIBC_TUNABLES=$M:glibc.malloc.arena_max=1 timeout 60 $B/bin/octbench $V --publish-keys copies=frame > $O/k_fma.log 2>&1; g $O/k_fma.log
E="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 3 --producer-cpu 15"
s bscan 10k frame tunables; GLIBC_TUNABLES=$M timeout 60 $B/bin/octbench $E --publish-keys copies=frame > $O/b_fm.log 2>&1; g $O/b_fm.log
s done
