#!/bin/bash
# mid round, call 2: end to end
B=$PWD/.bundle/mid
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
O=$OUT
s() { echo "=== $* ($(date +%T))"; }
s e2e bscan commit; timeout 150 $B/bin/octbench --e2e --backend cuda --only bscan --producer commit 2>&1 | tee $O/e2e_bscan.log | grep -E "^bscan|^# bscan"
s e2e angio commit; timeout 150 $B/bin/octbench --e2e --backend cuda --only angio --producer commit --seconds 5 2>&1 | tee $O/e2e_angio.log | grep -E "^angio|^# angio|rror"
s reglive rate; BIN=$B/bin timeout 120 bash $B/scripts/reglive_rate.sh 192 200 1024 cuda 100 15 > $O/reglive100.log 2>&1; echo "exit $?"; tail -12 $O/reglive100.log
s tails; OUT=$O timeout 240 bash $B/scripts/tails.sh $B > $O/tails_out.log 2>&1; echo "exit $?"; tail -10 $O/tails_out.log
s done
