#!/usr/bin/env bash
# Measurements for docs/executor.md (CPU backend).  Usage:
#   executor/bench/measure.sh BUILD_DIR [OUT_DIR]
# 1. backward time vs freeze ratio on one rank (no other rank competing for
#    the cores): median over steps of the mean B action time, for the rotate
#    and the random (front-biased) selection;
# 2. the loop profile -> tf-plan -> train on 2 ranks, 1F1B, 4 microbatches,
#    printing measured vs planned batch time.
set -eu
build=${1:?usage: measure.sh BUILD_DIR [OUT_DIR]}
out=${2:-$(mktemp -d /tmp/tf_exec_measure.XXXXXX)}
mkdir -p "$out"
exec_bin="$build/executor/tf-exec"
plan_bin="$build/planner/tf-plan"

# median of the JSON field $1 over the log lines after the first $2
median_field() {
    tail -n +"$(($2 + 1))" "$3" | sed "s/.*\"$1\": \([0-9.eE+-]*\).*/\1/" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "## backward time vs freeze ratio (1 rank, GPipe, 4 microbatches, default model)"
echo
# Three rounds over the ratios, so that drifts of a shared machine's load
# spread over every ratio instead of biasing one; the first 2 steps of each
# run (cold caches) are dropped; the median over all remaining steps is shown.
ratios="0 0.25 0.5 0.75 1"
rm -f "$out"/b-*.txt "$out"/f-*.txt
for round in 1 2 3; do
    for r in $ratios; do
        for sel in rotate random; do
            "$exec_bin" --schedule GPipe --ranks 1 --microbatches 4 --steps 8 --warmup 0 \
                --ramp 0 --freeze-ratio "$r" --freeze-select "$sel" --seed "$round" \
                --log "$out/run.jsonl" --progress lines >/dev/null
            tail -n +3 "$out/run.jsonl" | sed 's/.*"backward_ms": \([0-9.eE+-]*\).*/\1/' >>"$out/b-$r-$sel.txt"
            tail -n +3 "$out/run.jsonl" | sed 's/.*"forward_ms": \([0-9.eE+-]*\).*/\1/' >>"$out/f-$r.txt"
        done
    done
done
median() {
    sort -g "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
b0=$(median "$out/b-0-rotate.txt")
b1=$(median "$out/b-1-rotate.txt")
echo "| ratio r | B ms, rotate | linear model b0 - r (b0 - b1) | B ms, random | F ms |"
echo "|---|---|---|---|---|"
for r in $ratios; do
    lin=$(awk -v a="$b0" -v b="$b1" -v r="$r" 'BEGIN { printf "%.2f", a - r * (a - b) }')
    echo "| $r | $(median "$out/b-$r-rotate.txt") | $lin | $(median "$out/b-$r-random.txt") | $(median "$out/f-$r.txt") |"
done
echo
echo "## profile -> plan -> train (2 ranks, 1F1B, 4 microbatches, 60 steps)"
echo
echo '```'
"$exec_bin" --backend cpu --schedule 1F1B --ranks 2 --microbatches 4 \
    --profile-out "$out/profile.json"
"$plan_bin" "$out/profile.json" -o "$out/plan.json"
"$exec_bin" --backend cpu --plan "$out/plan.json" --steps 60 --log "$out/train.jsonl" \
    --progress lines | grep -v '^step '
"$exec_bin" --backend cpu --plan "$out/plan.json" --steps 60 --no-freeze \
    --log "$out/baseline.jsonl" --progress lines | grep -E '^(final|tokens)'
echo '```'
echo "(files in $out)"
