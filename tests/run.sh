#!/bin/bash
# run.sh - runs every test of `make check` and prints one closing line
# "N passed, N failed, N skipped" (counting Check test cases and scripts).
#  - build/san/tests/test_*   unit tests under ASan + UBSan (CPU backend)
#  - build/tests/test_cuda_*  CUDA tests (they skip, saying so, without a GPU)
#  - tests/e2e_*.sh           end-to-end scripts: exit 0 pass, 77 skip, else fail
set -u
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
export BUILD BIN PYTHON=${PYTHON:-/usr/bin/python3}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Check runs each test in a forked child; CUDA tests set CK_NOFORK themselves.
passed=0 failed=0 skipped=0
failures=()
LOG=$(mktemp -d /tmp/octd-check.XXXXXX)

run_check_binary() {
    local bin=$1 name out rc
    name=$(basename "$bin")
    out="$LOG/$name.log"
    echo "== $name"
    "$bin" >"$out" 2>&1
    rc=$?
    cat "$out"
    # Check's summary: "NN%: Checks: C, Failures: F, Errors: E"
    local line c f er sk
    line=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$out" | tail -1)
    sk=$(grep -c '^SKIP' "$out")
    if [ -n "$line" ]; then
        c=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
        f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
        er=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
        passed=$((passed + c - f - er - sk))
        failed=$((failed + f + er))
        skipped=$((skipped + sk))
        if [ $((f + er)) -gt 0 ] || [ $rc -ne 0 ]; then
            failures+=("$name")
            [ $((f + er)) -eq 0 ] && failed=$((failed + 1))
        fi
    else
        echo "$name: no Check summary (exit $rc)"
        failed=$((failed + 1))
        failures+=("$name")
    fi
}

for t in "$BUILD"/san/tests/test_*; do
    [ -x "$t" ] || continue
    case "$(basename "$t")" in test_cuda*) continue ;; esac
    run_check_binary "$t"
done
for t in "$BUILD"/tests/test_cuda*; do
    [ -x "$t" ] || continue
    run_check_binary "$t"
done
for s in tests/e2e_*.sh; do
    [ -f "$s" ] || continue
    name=$(basename "$s" .sh)
    echo "== $name"
    bash "$s" >"$LOG/$name.log" 2>&1
    rc=$?
    cat "$LOG/$name.log"
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS $name"
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); echo "SKIP $name"
    else
        failed=$((failed + 1)); failures+=("$name"); echo "FAIL $name (exit $rc)"
    fi
done
echo
[ ${#failures[@]} -gt 0 ] && echo "failing: ${failures[*]}"
echo "logs: $LOG"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
