#!/bin/bash
# fuzz.sh - builds and runs octd's libFuzzer targets (tests/fuzz/, issue 8).
#
#   tools/build/fuzz.sh [--seconds N] [--total-seconds T] [--regress] [--build-only]
#                       [--check] [TARGET...]
#
#   --seconds N        fuzz each target N seconds (default $FUZZ_SECONDS or 60)
#   --total-seconds T  share T seconds among the targets instead
#   --regress          only run every seed and regression input once
#   --build-only       only build build/fuzz/fuzz_<target>
#   --coverage         line coverage of the target's sources reached by its
#                      seeds, regression inputs and working corpus (llvm-cov)
#   --check            for `make check`: exit 77 ("SKIP ...") when clang's
#                      libFuzzer is missing instead of failing
#   TARGET             ini, profile, npy, spectra, ring, control, keys, jsonhdr
#                      (default: all)
#
# Each run first replays tests/fuzz/corpus/<t>/ and tests/fuzz/regress/<t>/
# (any crash there is a regression), then fuzzes with that corpus plus the
# working corpus build/fuzz/corpus/<t>/, which keeps what earlier runs found.
# A crash leaves its input in build/fuzz/artifacts/<t>/; once fixed, copy it
# to tests/fuzz/regress/<t>/.  Exit 0 when nothing crashed.
set -u
cd "$(dirname "$0")/../.." || exit 1
FUZZ_CC=${FUZZ_CC:-clang}
FUZZ_BUILD=${FUZZ_BUILD:-build/fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
TOTAL=""
MODE=fuzz
CHECK=0
TARGETS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --seconds=*) SECONDS_EACH=${1#*=}; shift ;;
    --total-seconds) TOTAL=$2; shift 2 ;;
    --total-seconds=*) TOTAL=${1#*=}; shift ;;
    --regress) MODE=regress; shift ;;
    --build-only) MODE=build; shift ;;
    --coverage) MODE=coverage; shift ;;
    --check) CHECK=1; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
    esac
done

skip_or_fail() {
    if [ $CHECK = 1 ]; then
        echo "SKIP e2e_fuzz: $*"
        exit 77
    fi
    echo "fuzz.sh: $* (install clang and libclang-rt-14-dev: tools/build/deps.sh --fuzz)" >&2
    exit 1
}

# ---- toolchain -------------------------------------------------------------
command -v "${FUZZ_CC%% *}" >/dev/null 2>&1 || skip_or_fail "no $FUZZ_CC (the fuzzers need clang)"
probe=$(mktemp -d /tmp/octd-fuzzprobe.XXXXXX)
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
$FUZZ_CC -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1 ||
    skip_or_fail "$FUZZ_CC -fsanitize=fuzzer,address,undefined does not link ($(head -c 200 "$probe/log" | tr '\n' ' '))"
printf 'int main(void) { return 0; }\n' >"$probe/o.c"
$FUZZ_CC -fopenmp "$probe/o.c" -o "$probe/o" >/dev/null 2>&1 ||
    skip_or_fail "$FUZZ_CC -fopenmp does not link (libomp-14-dev missing)"

# ---- build -----------------------------------------------------------------
# a make of our own (also under `make check`/`make fuzz`: not the parent's jobserver)
unset MAKEFLAGS MFLAGS MAKELEVEL
ALL=$(make -s --no-print-directory -f tests/fuzz/fuzz.mk FUZZ_BUILD="$FUZZ_BUILD" list)
[ ${#TARGETS[@]} -eq 0 ] && read -r -a TARGETS <<<"$ALL"
for t in "${TARGETS[@]}"; do
    case " $ALL " in *" $t "*) ;; *) echo "fuzz.sh: unknown target '$t' (have: $ALL)" >&2; exit 2 ;; esac
done
JOBS=$(nproc 2>/dev/null || echo 2)
if [ "$MODE" = coverage ]; then
    # a separate build, instrumented for llvm-cov instead of the sanitizers
    COV_BUILD=${FUZZ_BUILD}-cov
    LLVM_COV=$(command -v llvm-cov-14 || command -v llvm-cov) || skip_or_fail "no llvm-cov"
    LLVM_PROFDATA=$(command -v llvm-profdata-14 || command -v llvm-profdata) || skip_or_fail "no llvm-profdata"
    make -s --no-print-directory -j"$JOBS" -f tests/fuzz/fuzz.mk FUZZ_CC="$FUZZ_CC" FUZZ_COV=1 \
        FUZZ_BUILD="$COV_BUILD" "${TARGETS[@]/#/$COV_BUILD/fuzz_}" >"$probe/build.log" 2>&1 ||
        { cat "$probe/build.log"; echo "fuzz.sh: coverage build failed" >&2; exit 1; }
    mkdir -p "$COV_BUILD/prof"
    printf '%-8s %-26s %8s %8s %8s\n' target file lines missed cover
    for t in "${TARGETS[@]}"; do
        case $t in
        ini) srcs="config/ini.c" ;;
        profile) srcs="config/profile.c" ;;
        npy) srcs="config/npy.c" ;;
        spectra) srcs="config/npy.c" ;;
        ring) srcs="ipc/ring.c" ;;
        control) srcs="ipc/control.c config/control_keys.c kernels/engine.c" ;;
        keys) srcs="config/control_keys.c" ;;
        jsonhdr) srcs="tools/octgrab/jsonhdr.c" ;;
        *) srcs="" ;;
        esac
        dirs=()
        for d in "$FUZZ_BUILD/corpus/$t" "tests/fuzz/corpus/$t" "tests/fuzz/regress/$t"; do
            [ -d "$d" ] && dirs+=("$d")
        done
        rm -f "$COV_BUILD/prof/$t".*
        LLVM_PROFILE_FILE="$COV_BUILD/prof/$t.profraw" "$COV_BUILD/fuzz_$t" -runs=0 "${dirs[@]}" \
            >"$COV_BUILD/prof/$t.log" 2>&1
        "$LLVM_PROFDATA" merge -o "$COV_BUILD/prof/$t.profdata" "$COV_BUILD/prof/$t.profraw" || exit 1
        for s in $srcs; do
            # columns of `llvm-cov report`: ... Lines Missed Cover (8-10)
            "$LLVM_COV" report "$COV_BUILD/fuzz_$t" -instr-profile="$COV_BUILD/prof/$t.profdata" \
                "$s" 2>/dev/null | awk -v t="$t" -v s="$s" '$1 ~ /\.c$/ {
                    printf "%-8s %-26s %8s %8s %8s\n", t, s, $8, $9, $10 }'
        done
    done
    exit 0
fi
if ! make -s --no-print-directory -j"$JOBS" -f tests/fuzz/fuzz.mk FUZZ_CC="$FUZZ_CC" \
    FUZZ_BUILD="$FUZZ_BUILD" "${TARGETS[@]/#/$FUZZ_BUILD/fuzz_}" >"$probe/build.log" 2>&1; then
    cat "$probe/build.log"
    echo "fuzz.sh: build failed" >&2
    exit 1
fi
grep -E ':[0-9]+:[0-9]+: warning' "$probe/build.log" && echo "fuzz.sh: (build warnings above)"
[ "$MODE" = build ] && { echo "fuzz.sh: built ${TARGETS[*]} in $FUZZ_BUILD/"; exit 0; }

if [ -n "$TOTAL" ]; then
    SECONDS_EACH=$((TOTAL / ${#TARGETS[@]}))
    [ "$SECONDS_EACH" -lt 1 ] && SECONDS_EACH=1
fi

# ---- run -------------------------------------------------------------------
# leaks and UB are findings too; libFuzzer's own limits bound each input
export ASAN_OPTIONS=${FUZZ_ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
LIMITS=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048)
failed=()
printf '%-8s %8s %10s %8s %6s %6s  %s\n' target seconds execs exec/s cov ft result
for t in "${TARGETS[@]}"; do
    bin="$FUZZ_BUILD/fuzz_$t"
    seeds="tests/fuzz/corpus/$t"
    regress="tests/fuzz/regress/$t"
    art="$FUZZ_BUILD/artifacts/$t"
    work="$FUZZ_BUILD/corpus/$t"
    log="$FUZZ_BUILD/logs/$t.log"
    mkdir -p "$art" "$work" "$(dirname "$log")"
    # 1. replay: every seed and regression input once
    inputs=()
    for d in "$seeds" "$regress"; do
        [ -d "$d" ] || continue
        while IFS= read -r -d '' f; do inputs+=("$f"); done < <(find "$d" -type f ! -name '.*' -print0)
    done
    if [ ${#inputs[@]} -gt 0 ]; then
        if ! "$bin" "${LIMITS[@]}" "${inputs[@]}" >"$log.replay" 2>&1; then
            grep -E 'Running:|ERROR|FUZZ_CHECK|runtime error' "$log.replay" | tail -5
            printf '%-8s %8s %10s %8s %6s %6s  %s\n' "$t" - - - - - "REGRESSION (log: $log.replay)"
            failed+=("$t")
            continue
        fi
    fi
    [ "$MODE" = regress ] && {
        printf '%-8s %8s %10s %8s %6s %6s  %s\n' "$t" - "${#inputs[@]}" - - - "replayed ok"
        continue
    }
    # 2. fuzz
    dict=()
    [ -f "tests/fuzz/dict/$t.dict" ] && dict=(-dict="tests/fuzz/dict/$t.dict")
    dirs=("$work")
    [ -d "$seeds" ] && dirs+=("$seeds")
    [ -d "$regress" ] && dirs+=("$regress")
    "$bin" "${LIMITS[@]}" "${dict[@]}" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
        -artifact_prefix="$art/" "${dirs[@]}" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
    c=$(echo "$cov" | awk '{print $2}')
    ft=$(echo "$cov" | awk '{print $4}')
    if [ $rc -eq 0 ]; then
        result=ok
    else
        crash=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
        result="CRASH rc=$rc ${crash:+input: $crash} (log: $log)"
        grep -E 'ERROR: |FUZZ_CHECK|runtime error' "$log" | head -3
        failed+=("$t")
    fi
    printf '%-8s %8s %10s %8s %6s %6s  %s\n' "$t" "$SECONDS_EACH" "${execs:--}" "${rate:--}" \
        "${c:--}" "${ft:--}" "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz.sh: findings in: ${failed[*]}"
    exit 1
fi
echo "fuzz.sh: no findings"
exit 0
