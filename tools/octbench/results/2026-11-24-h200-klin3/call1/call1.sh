#!/bin/bash
# klin3 call 1 (issue 19, volume-klin-disp tails): tests of the parts graph and the CFD matrix
# product, engine A/B (main's octbench of base5 vs this branch: default, --cuda-cfd fft,
# --cuda-graph off), e2e at 256 volumes/s x 5 runs (this octd vs base5's octd, same driver).
B=$PWD/.bundle/klin3; A=$PWD/.bundle/base5
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT; T0=$SECONDS
s() { echo "=== $* ($(date -u +%T), $((SECONDS - T0))s)"; }
left() { echo $((285 - (SECONDS - T0))); }
s info; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
s "test_cuda_engine case parts"
CK_RUN_CASE=parts CK_VERBOSITY=verbose timeout 75 $B/tests/test_cuda_engine > $O/test_parts.log 2>&1; echo "exit $?"
grep -E '^[0-9]+%|t_graph_parts|t_cfd_gemm' $O/test_parts.log | head -8; grep -E ':[EF]:' $O/test_parts.log | cut -c1-400 | head -8
s "test_cuda_engine case graph"
CK_RUN_CASE=graph timeout 40 $B/tests/test_cuda_engine > $O/test_graph.log 2>&1; echo "exit $?"
grep -E '^[0-9]+%' $O/test_graph.log; grep -E ':[EF]:' $O/test_graph.log | cut -c1-300 | head -5
eng() { # LABEL OCTBENCH [ARGS]
    local l=$1; shift
    echo "== engine $l: ${*#$PWD/}"
    timeout 40 "$@" --backend cuda --only volume-klin-disp --json $O/eng_$l.json > $O/eng_$l.log 2>&1; echo "exit $?"
    grep -E "^stream .*registered|medians|rror|^volume-klin-disp" $O/eng_$l.log | cut -c1-330
}
s "engine A/B volume-klin-disp"
eng old $A/bin/octbench
eng new $B/bin/octbench
eng fft $B/bin/octbench --cuda-cfd fft
eng nograph $B/bin/octbench --cuda-graph off
e2e() { # LABEL OCTD WORKLOAD
    local l=$1 d=$2 w=$3 t
    t=$(left); [ $t -gt 80 ] && t=80
    [ $t -lt 30 ] && { echo "=== e2e $w $l: skipped, ${t}s left"; return; }
    s "e2e $w $l (limit ${t}s)"
    OCTBENCH_OCTD=$d timeout $t $B/bin/octbench --e2e --backend cuda --producer commit --frame-rate 256 \
        --runs 5 --seconds 3 --only $w --json $O/e2e_${w}_$l.json > $O/e2e_${w}_$l.log 2>&1; echo "exit $?"
    grep -E "^# (tails|stages) " $O/e2e_${w}_$l.log | grep -v "bucket"
}
e2e new $B/bin/octd volume-klin-disp
e2e old $A/bin/octd volume-klin-disp
e2e new $B/bin/octd volume
s done
