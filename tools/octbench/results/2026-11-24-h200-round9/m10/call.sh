#!/bin/bash
B=$PWD/.bundle/m9
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
id; nproc; sysctl net.core.wmem_max net.core.rmem_max net.core.wmem_default net.ipv4.tcp_wmem 2>&1
E="--e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 3 --producer-cpu 15"
V="--e2e --backend cuda --producer commit --frame-rate 256 --runs 3 --seconds 3 --only volume-klin-disp"
s bscan 10k all, default; timeout 60 $B/bin/octbench $E > $O/b_def.log 2>&1; grep -E "^# tails|^# stages" $O/b_def.log | cut -c1-400
s raise wmem_max; sysctl -w net.core.wmem_max=33554432 net.core.rmem_max=33554432 2>&1; sysctl net.core.wmem_max
s bscan 10k all, sndbuf 4M; timeout 60 $B/bin/octbench $E --publish-keys sndbuf=4194304 > $O/b_4m.log 2>&1; grep -E "^# tails|^# stages|publisher:" $O/b_4m.log | cut -c1-400
s bscan 10k all, sndbuf 16M; timeout 60 $B/bin/octbench $E --publish-keys sndbuf=16777216 > $O/b_16m.log 2>&1; grep -E "^# tails|^# stages" $O/b_16m.log | cut -c1-400
s bscan 10k all, sndbuf 4M 2 sockets; timeout 60 $B/bin/octbench $E --publish-keys sndbuf=4194304 --topics bscan/cfd,bscan/msi --sub-sockets 2 > $O/b_4m2.log 2>&1; grep -E "^# tails|^# stages" $O/b_4m2.log | cut -c1-400
s klin sndbuf 8M; timeout 60 $B/bin/octbench $V --publish-keys sndbuf=8388608 > $O/k_8m.log 2>&1; grep -E "^# tails|^# stages" $O/k_8m.log | cut -c1-400
s klin sndbuf 8M copies=frame; timeout 60 $B/bin/octbench $V --publish-keys sndbuf=8388608,copies=frame > $O/k_8mf.log 2>&1; grep -E "^# tails|^# stages" $O/k_8mf.log | cut -c1-400
s klin default; timeout 60 $B/bin/octbench $V > $O/k_def.log 2>&1; grep -E "^# tails|^# stages" $O/k_def.log | cut -c1-400
s done
