#!/bin/bash
# e2e_fuzz.sh - a short run of every libFuzzer target (issue 8): each seed and
# regression input of tests/fuzz/ once, then FUZZ_CHECK_TOTAL seconds
# (default 48) shared among the targets, under ASan + UBSan.
# Exit 0 pass, 77 skip (no clang libFuzzer), else fail.
set -u
cd "$(dirname "$0")/.." || exit 1
exec tools/build/fuzz.sh --check --total-seconds "${FUZZ_CHECK_TOTAL:-48}"
