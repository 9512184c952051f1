#!/bin/bash
# call 4 (H200): call 3's CuPy comparison had octd's volume MSI slower than
# on 2026-11-23 (volume-msi 0.753 vs 0.569 ms device, volume-cfd+msi 0.956
# vs 0.780; CuPy's own times unchanged).  Which later engine setting moved
# it: the engine workloads with each A/B knob in turn.
B=$PWD/.bundle/s1
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
for w in volume-msi volume-cfd+msi msi-volume-full; do
  for v in "" "--cuda-sink warp" "--cuda-sink tile-reg" "--gemm-algo auto" "--cuda-graph off" "--cuda-parts 1" "--gemm-chunk-mb -1" "--gemm 3xtf32"; do
    rm -f $O/x.json
    timeout 60 $B/bin/octbench --backend cuda --warmup 3 --reps 20 --no-seed --only $w $v --json $O/x.json > $O/x.txt 2>&1
    python3 -c "
import json,sys
for l in open('$O/x.json'):
    r=json.loads(l)
    if r.get('part')=='engine': print('%-16s %-22s dev %.3f conv %.3f cfd %.3f msi %.3f prod %.3f %s' % (r['workload'], sys.argv[1] or 'default', r['device_ms'], r['convert_ms'], r['cfd_ms'], r['msi_ms'], r['products_ms'], r['msi_path']))
" "$v" 2>&1 || tail -3 $O/x.txt
    grep -h "gemm pick\|picks" $O/x.txt | head -2
  done
done | tee $O/ab.txt
echo "+$((SECONDS-T0)) s"
