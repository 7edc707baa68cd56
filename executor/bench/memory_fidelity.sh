#!/usr/bin/env bash
# How well plans agree with the bytes the executor holds (CPU backend).
# Usage:
#   executor/bench/memory_fidelity.sh BUILD_DIR [OUT_DIR] [STEPS] [-- TF-EXEC OPTIONS...]
# For 1F1B, GPipe, Interleaved1F1B and ZBVZeroBubble on 2 ranks (4
# microbatches): tf-exec --profile-out (which counts each stage's bytes:
# static, what a forward keeps unfrozen and fully frozen, what an I leaves
# for its W, a fully recomputed forward's checkpoint), then three runs of
# STEPS steps (default 6) with --warmup 0 --ramp 0:
#   unfrozen  the plan without a limit, --no-freeze
#   plan      the plan without a limit
#   limit     the plan under --memory-limit, set a third of the way from the
#             smallest peak any plan reaches (tf-plan --pareto-memory) to
#             the plan's own largest peak, so that freezing and
#             recomputation both bind
# and prints per rank the plan's predicted peak (per_rank.peak_bytes)
# against the measured one: static bytes plus the most microbatch bytes the
# rank held at once in any step (the log's static_bytes and peak_bytes:
# the high-water mark of the buffers allocated), and for the limit run the
# planned against measured batch time.  It asserts nothing.
# Options after -- go to every tf-exec (e.g. a smaller model).
set -eu
build=${1:?usage: memory_fidelity.sh BUILD_DIR [OUT_DIR] [STEPS] [-- TF-EXEC OPTIONS...]}
shift
out=
steps=6
if [ $# -gt 0 ] && [ "$1" != -- ]; then out=$1; shift; fi
[ -n "$out" ] || out=$(mktemp -d /tmp/tf_memfid.XXXXXX)
if [ $# -gt 0 ] && [ "$1" != -- ]; then steps=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift
extra=("$@")
mkdir -p "$out"
exec_bin="$build/executor/tf-exec"
plan_bin="$build/planner/tf-plan"
here=$(cd "$(dirname "$0")" && pwd)

# The limit a third of the way from the memory floor to the plan's peak.
limit_for() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
floor = float(open(sys.argv[1]).read().split()[0])
plan = json.load(open(sys.argv[2]))
peak = max(r["peak_bytes"]["planned"] for r in plan["per_rank"])
print(int(floor + (peak - floor) / 3))
EOF
}

run_schedule() {
    local sched=$1 per_rank=$2 tag=$1
    local shape=(--schedule "$sched" --ranks 2 --stages-per-rank "$per_rank" --microbatches 4)
    "$exec_bin" "${shape[@]}" "${extra[@]}" --profile-steps 3 \
        --profile-out "$out/$tag.profile.json" >"$out/$tag.profile.out"
    "$plan_bin" "$out/$tag.profile.json" -o "$out/$tag.plan.json" >"$out/$tag.plan.out"
    "$plan_bin" "$out/$tag.profile.json" --pareto-memory >"$out/$tag.pareto.out"
    # The first point of the curve: the smallest limit any plan meets.
    awk '$1 ~ /^[0-9.]+$/ {print $1 * 1073741824; exit}' "$out/$tag.pareto.out" \
        >"$out/$tag.floor"
    "$plan_bin" "$out/$tag.profile.json" -o "$out/$tag.limit.plan.json" \
        --memory-limit "$(limit_for "$out/$tag.floor" "$out/$tag.plan.json")" \
        >"$out/$tag.limit.plan.out"
    local common=(--steps "$steps" --warmup 0 --ramp 0 --progress lines "${extra[@]}")
    "$exec_bin" --plan "$out/$tag.plan.json" --no-freeze "${common[@]}" \
        --log "$out/$tag.unfrozen.jsonl" >"$out/$tag.unfrozen.out"
    "$exec_bin" --plan "$out/$tag.plan.json" "${common[@]}" \
        --log "$out/$tag.plan.jsonl" >"$out/$tag.plan.run.out"
    "$exec_bin" --plan "$out/$tag.limit.plan.json" "${common[@]}" \
        --log "$out/$tag.limit.jsonl" >"$out/$tag.limit.out"
}

uptime >"$out/uptime.before"
run_schedule 1F1B 1
run_schedule GPipe 1
run_schedule Interleaved1F1B 2
run_schedule ZBVZeroBubble 2
uptime >"$out/uptime.after"
python3 "$here/memory_fidelity_table.py" "$out"
echo "load: $(cat "$out/uptime.before")"
echo "      $(cat "$out/uptime.after")"
echo "files in $out"
