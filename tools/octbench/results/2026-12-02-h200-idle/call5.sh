#!/bin/bash
# call 5 (H200): the sink choice of call 4's finding (tiles only where every
# spectrum wants every depth or for the gathered cross-sections; the en-face
# pass reads the GEMM output directly): test_cuda_engine, then the engine
# workloads against --cuda-sink warp / tile-reg as in call 4, the CuPy
# anchor, and the k-lin volume end to end (shm) as a check of the e2e path.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 OCTBENCH=$B/bin/octbench
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), +$((SECONDS-T0)) s)"; }
s test_cuda_engine; (cd $B/tests && timeout 220 ./test_cuda_engine > $O/test_cuda.log 2>&1); tail -1 $O/test_cuda.log; grep -E "Failure|failed|Error" $O/test_cuda.log | head -12
s engine
for w in bscan-msi volume-msi volume-cfd+msi msi-volume-full volume-klin-disp; do
  for v in "" "--cuda-sink warp" "--cuda-sink tile-reg"; do
    rm -f $O/x.json
    timeout 60 $B/bin/octbench --backend cuda --warmup 3 --reps 20 --no-seed --only $w $v --json $O/x.json > $O/x.txt 2>&1
    python3 -c "
import json,sys
for l in open('$O/x.json'):
    r=json.loads(l)
    if r.get('part')=='engine': print('%-16s %-22s dev %.3f conv %.3f cfd %.3f msi %.3f %s' % (r['workload'], sys.argv[1] or 'default', r['device_ms'], r['convert_ms'], r['cfd_ms'], r['msi_ms'], r['msi_path']))
" "$v" 2>&1 || tail -3 $O/x.txt
  done
done | tee $O/ab.txt
rm -f $O/x.json $O/x.txt
s cupy; timeout 200 bash tools/octbench/cupy_compare.sh $B $O/cupy > $O/cupy.txt 2>&1; tail -7 $O/cupy.txt
rm -rf $O/cupy
K="--e2e --backend cuda --producer commit --frame-rate 256 --runs 5 --seconds 3 --only volume-klin-disp"
s klin shm; timeout 90 $B/bin/octbench $K --sub-shm > $O/klin_shm.log 2>&1; grep -E "^# tails [-a-z]*: (p99|all)|submitted->done" $O/klin_shm.log
s done
