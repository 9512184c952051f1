# e2e_lib.sh - the common part of the end-to-end scripts, sourced once T
# (their temporary directory) and N (their shared-memory prefix) are set:
#   PIDS, OCTD    processes to stop at exit (OCTD: the octd under test)
#   E2E_LOGS      logs whose tail `fail` prints (default: $T/octd.log)
#   E2E_TAIL      lines of each (default 20)
#   e2e_cleanup_extra   a script's own clean-up, run before the files go
#   fail MSG      prints FAIL: MSG and the logs' tails, exits 1
#   wait_for SECONDS 'shell condition'   polls every 50 ms; 1 on timeout
#   alive         octd ($OCTD) still runs
# At exit every process is stopped, /dev/shm$N-* removed and $T removed
# (KEEP=1 keeps it).
PIDS=()
OCTD=""
E2E_LOGS=("$T/octd.log")
E2E_TAIL=20
e2e_cleanup_extra() { :; }
cleanup() {
    for p in "${PIDS[@]}" $OCTD; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}" $OCTD; do wait "$p" 2>/dev/null; done
    e2e_cleanup_extra
    rm -f /dev/shm"$N"-*
    [ -n "${KEEP:-}" ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in "${E2E_LOGS[@]}"; do
        [ -s "$f" ] && { echo "--- $(basename "$f") (tail)"; tail -"$E2E_TAIL" "$f"; }
    done
    exit 1
}
wait_for() {
    local end=$((SECONDS + $1))
    while ! eval "$2"; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.05
    done
}
alive() { kill -0 "$OCTD" 2>/dev/null; }
