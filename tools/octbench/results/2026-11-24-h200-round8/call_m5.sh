#!/bin/bash
# lead's call after merging round 8 (reg2, fl, sub2, klin + recording changes)
B=$PWD/.bundle/m5; A=$PWD/.bundle/old
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
left() { [ $((SECONDS-T0)) -lt $1 ] || { echo "skipped: $((SECONDS-T0)) s gone"; false; }; }
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
s tests; (timeout 150 $B/tests/test_cuda_engine > $O/test_cuda.log 2>&1; echo "test_cuda_engine exit $?" >> $O/test_cuda.log) &
(timeout 150 $B/tests/test_angio > $O/test_angio.log 2>&1; echo "test_angio exit $?" >> $O/test_angio.log) &
wait
for f in test_cuda test_angio; do tail -1 $O/$f.log; grep -E '^[0-9]+%' $O/$f.log; grep -E ':[EF]:' $O/$f.log | head -8; done
E="--e2e --backend cuda --only bscan --producer commit --seconds 3"; P="--producer-cpu 15"
s bscan 10000 x5, 2 sockets; timeout 75 $B/bin/octbench $E --frame-rate 10000 --runs 5 $P --topics bscan/cfd,bscan/msi --sub-sockets 2 > $O/bscan10k_2s.log 2>&1; grep -E "^bscan|^# bscan at|^# tails|frame loop" $O/bscan10k_2s.log | cut -c1-300

export OCTBENCH=$B/bin/octbench; H="--hostile-cpus 12-15"
left 420 && s hostile bscan; timeout 100 bash $B/scripts/hostile_ab.sh $O/hb 2 "old|OCTBENCH_OCTD=$A/octd $H" "new|$H --publish-keys stats=1" -- --e2e --backend cuda --only bscan --producer commit --seconds 2 --hostile 50:100 2>&1 | tail -4
left 460 && s hostile volume; timeout 110 bash $B/scripts/hostile_ab.sh $O/hv 2 "old|OCTBENCH_OCTD=$A/octd $H" "new|$H --publish-keys stats=1" -- --e2e --backend cuda --only volume --producer commit --seconds 2 --hostile 50:100 2>&1 | tail -4
left 520 && s tails volume; timeout 45 $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume > $O/tails_vol.log 2>&1; grep -E "^# tails|^# stages" $O/tails_vol.log | cut -c1-300
left 540 && s tails klin; timeout 45 $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp > $O/tails_klin.log 2>&1; grep -E "^# tails|^# stages" $O/tails_klin.log | cut -c1-300
left 545 && s record on the GPU; df -h /tmp | tail -1; OCTD_LIB=$B/lib/liboct.so.0 PYTHONPATH=tools/python timeout 110 python3 tools/python/bench.py --bin $B/bin --backend cuda --dir /tmp --only record --record-fps 1000 --seconds 4 --record-repeats 2 > $O/record.log 2>&1; grep -v "^bench:" $O/record.log | tail -12 | cut -c1-400
s done
