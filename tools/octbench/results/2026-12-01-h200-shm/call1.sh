#!/bin/bash
# call 1 (H200): the CUDA suite (products in an image-area slot among them),
# then issue 19's two latency targets with the measuring subscriber on ZeroMQ
# (as in round 9) and on the shm endpoint, interleaved.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
g() { grep -E "^# tails [-a-z]*: (p99|all)|^# tails [-a-z]+ +[0-9]|published->received|submitted->done|lost in shm|loss" $1 | cut -c1-220; }
s info; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; df -h /dev/shm | tail -1
s test_cuda_engine; timeout 200 $B/tests/test_cuda_engine > $O/test_cuda.log 2>&1; echo "exit $?"; grep -E '^[0-9]+%|:[EF]:' $O/test_cuda.log | head
for v in zmq shm; do
  x=; [ $v = shm ] && x=--sub-shm
  s klin x5 $v; timeout 80 $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp $x > $O/klin_$v.log 2>&1; g $O/klin_$v.log
done
for v in zmq shm; do
  x="--sub-sockets 2"; [ $v = shm ] && x="--sub-shm --sub-sockets 2"
  s bscan 10k x5 $v; timeout 80 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit --seconds 3 --frame-rate 10000 --runs 5 --producer-cpu 15 --topics bscan/cfd,bscan/msi $x > $O/b10k_$v.log 2>&1; g $O/b10k_$v.log
done
s done
