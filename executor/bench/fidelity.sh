#!/usr/bin/env bash
# How well plans agree with the clock (CPU backend).  Usage:
#   executor/bench/fidelity.sh BUILD_DIR [OUT_DIR] [REPEATS] [-- TF-EXEC OPTIONS...]
# For 2 ranks (1F1B, 4 microbatches) and 4 ranks (1F1B, 8 microbatches), on
# whatever cores the machine has, REPEATS times (default 3), interleaved:
#   loop  tf-exec --profile-out, tf-plan, tf-exec --plan (three commands)
#   auto  tf-exec --auto-plan (one command; re-planning off, to measure the
#         first plan)
# and prints (fidelity_table.py), from each run's own summary and log,
# planned vs measured batch time unfrozen and with the plan, planned vs
# measured speedup and their ratio, and where the difference comes from:
# the action times (the plan's DAG replayed under each step's measured
# action times; F and B/W times against the plan's) and the clock beyond
# the DAG.  Then the range of every figure over the repeats.  It asserts
# nothing.
# Options after -- go to every tf-exec (e.g. a smaller model).
set -eu
build=${1:?usage: fidelity.sh BUILD_DIR [OUT_DIR] [REPEATS] [-- TF-EXEC OPTIONS...]}
shift
out=
repeats=3
if [ $# -gt 0 ] && [ "$1" != -- ]; then out=$1; shift; fi
[ -n "$out" ] || out=$(mktemp -d /tmp/tf_fidelity.XXXXXX)
if [ $# -gt 0 ] && [ "$1" != -- ]; then repeats=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift
extra=("$@")
mkdir -p "$out"
exec_bin="$build/executor/tf-exec"
plan_bin="$build/planner/tf-plan"
steps=60

run_loop() {
    local ranks=$1 mbs=$2 tag=$3
    "$exec_bin" --schedule 1F1B --ranks "$ranks" --microbatches "$mbs" "${extra[@]}" \
        --profile-out "$out/$tag.profile.json" >"$out/$tag.profile.out"
    "$plan_bin" "$out/$tag.profile.json" -o "$out/$tag.plan.json" >"$out/$tag.plan.out"
    "$exec_bin" --plan "$out/$tag.plan.json" --steps "$steps" "${extra[@]}" \
        --progress lines --log "$out/$tag.jsonl" >"$out/$tag.out"
}

run_auto() {
    local ranks=$1 mbs=$2 tag=$3
    "$exec_bin" --schedule 1F1B --ranks "$ranks" --microbatches "$mbs" "${extra[@]}" \
        --auto-plan --steps $((steps + 10)) --replan-threshold 0 --progress lines \
        --plan-out "$out/$tag.plan.json" --profile-out "$out/$tag.profile.json" \
        --log "$out/$tag.jsonl" >"$out/$tag.out"
}

for ((k = 1; k <= repeats; k++)); do
    for shape in "2 4" "4 8"; do
        read -r ranks mbs <<<"$shape"
        for mode in loop auto; do
            "run_$mode" "$ranks" "$mbs" "r$ranks-$mode-$k"
        done
    done
done

echo "## planned vs measured: 1F1B, $(nproc) cores, ${extra[*]:-default model}, $repeats runs"
echo
python3 "$(dirname "$0")/fidelity_table.py" "$out"
echo
echo "(runs, profiles and plans in $out)"
