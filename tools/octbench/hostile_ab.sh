#!/bin/bash
# hostile_ab.sh - issue 21: configurations of `octbench --e2e --hostile`
# side by side, interleaved (A B C A B C ...: a busy machine's slow spell
# hits every configuration alike), RUNS runs each, and the medians of each
# configuration's script lines ("# hostile WORK PROD S:C rate_ratio ...").
#
#   hostile_ab.sh OUTDIR RUNS "LABEL|ARGS" ["LABEL|ARGS" ...] -- OCTBENCH ARGS
#
# e.g. hostile_ab.sh /tmp/ab 3 "before|--hostile-in-process" "child|" \
#        "nice|--publish-keys nice=10" -- --e2e --only bscan --producer commit --hostile 50:100
# OCTBENCH (default: octbench beside this script's ../../bin, else on PATH)
# is the binary; ARGS may begin with NAME=VALUE words, set in octbench's
# environment (OCTBENCH_OCTD=OLD/bin/octd: another build's octd).  Each
# run's output stays in OUTDIR/LABEL.N.txt.
set -u
[ $# -ge 4 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
out=$1 runs=$2
shift 2
cfgs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do cfgs+=("$1"); shift; done
[ "${1:-}" = "--" ] || { echo "hostile_ab.sh: no -- before octbench's arguments" >&2; exit 2; }
shift
here=$(cd "$(dirname "$0")" && pwd)
OCTBENCH=${OCTBENCH:-$here/../../bin/octbench}
[ -x "$OCTBENCH" ] || OCTBENCH=octbench
mkdir -p "$out" || exit 1
for r in $(seq 1 "$runs"); do
    for c in "${cfgs[@]}"; do
        label=${c%%|*} vars=() args=()
        # shellcheck disable=SC2206 # ARGS are words; leading NAME=VALUE ones are environment
        words=(${c#*|})
        for w in "${words[@]}"; do
            if [ ${#args[@]} -eq 0 ] && [[ $w =~ ^[A-Za-z_][A-Za-z_0-9]*= ]]; then vars+=("$w"); else args+=("$w"); fi
        done
        env "${vars[@]}" "$OCTBENCH" "$@" "${args[@]}" >"$out/$label.$r.txt" 2>&1 ||
            echo "hostile_ab.sh: $label run $r: octbench exit $? (see $out/$label.$r.txt)" >&2
        echo "$(date -u +%FT%TZ) $label run $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
    done
done
echo "medians over $runs runs (ratios: with / without the hostile subscribers; the frame loop's (r5):"
echo "fl-rate octd's rate with the producer following octd's published count, fl-p99 commit -> published"
echo "p99 (headers' stamps), fl-p99@90 the same paced at 90 %; lost90: frames lost at 90 % with them;"
echo "the delivery to the measuring subscriber: rate, octd (octd's count in that phase), p99 commit ->"
echo "received, p99_90 paced at 90 %; zmq ms: octd's ZeroMQ threads' CPU per frame with / without)"
printf '%-12s %-7s %-8s %7s %7s %8s %7s | %6s %6s %6s %8s %13s\n' config work S:C fl-rate fl-p99 fl-p99@90 lost90 \
    rate octd p99 p99_90 "zmq ms"
for c in "${cfgs[@]}"; do
    label=${c%%|*}
    cat "$out/$label".*.txt 2>/dev/null | awk -v L="$label" '
        $1 == "#" && $2 == "hostile" && $6 == "rate_ratio" {
            k = $3 " " $5; keys[k] = 1; n[k]++
            for (i = 6; i < NF; i++) if ($i ~ /^[a-z_0-9]+$/ && $(i + 1) ~ /^-?[0-9.]+$/) v[k, $i, n[k]] = $(i + 1)
            for (i = 6; i <= NF; i++) if ($i == "zmq_cpu_per_frame_ms") { v[k, "zw", n[k]] = $(i + 1); v[k, "zo", n[k]] = $(i + 2) }
        }
        function med(k, name,   m, i, j, t, a) {
            m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, name, i] + 0
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        }
        END {
            for (k in keys) {
                split(k, w, " ")
                printf "%-12s %-7s %-8s %6.0f%% %6.0f%% %8.0f%% %7g | %5.0f%% %5.0f%% %5.0f%% %7.0f%% %6.3f/%.3f\n", L, w[1], w[2],
                       100 * med(k, "fl_rate_ratio"), 100 * med(k, "fl_p99_ratio"), 100 * med(k, "fl_p99_90_ratio"),
                       med(k, "lost90"), 100 * med(k, "rate_ratio"), 100 * med(k, "octd_rate_ratio"),
                       100 * med(k, "p99_ratio"), 100 * med(k, "p99_90_ratio"), med(k, "zw"), med(k, "zo")
            }
        }'
done
