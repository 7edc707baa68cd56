#!/usr/bin/env bash
# Command-line behaviour of tf-plan: a good run, and bad input that must
# exit non-zero with a message naming the problem while leaving an existing
# plan untouched.  Run by ctest with TF_PLAN and TF_SOURCE_DIR set.
. "$(dirname "$0")/../lib.sh"
need TF_PLAN TF_SOURCE_DIR
src=$TF_SOURCE_DIR
trace=$src/traces/examples/1f1b-p4-m8.profile.json

# expect_error NAME EXIT_CODE MESSAGE_PART ARGS...: runs tf-plan with -o on a
# plan that already exists, and checks the exit code, the message on stderr,
# that the plan is unchanged and that no temporary file is left behind.
expect_error() {
    local name=$1 code=$2 part=$3
    shift 3
    printf 'precious' >"$work/plan.json"
    expect_refused_with "$code" "$name" "$part" "$work/plan.json" -- \
        "$TF_PLAN" "$@" -o "$work/plan.json"
}

# A good run writes a plan and prints the summary.
expect_status 0 "good run" "$TF_PLAN" "$trace" -o "$work/good.json"
check "good run: the plan says tf-plan" grep -Eq '"format":[[:space:]]*"tf-plan"' "$work/good.json"
expect_stdout "good run" "speedup"
expect_stdout "good run" "lp_solve"

# --objective spread and a cap override change the plan's header.
expect_status 0 "spread" "$TF_PLAN" "$trace" --objective spread --max-freeze-ratio 0.5 -q \
    -o "$work/spread.json"
check "spread: objective" grep -Eq '"objective":[[:space:]]*"spread"' "$work/spread.json"
check "spread: cap" grep -Eq '"max_freeze_ratio":[[:space:]]*0.5,' "$work/spread.json"

# --schedule-csv replaces the order: GPipe's order on a 1F1B profile.
printf '0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n' >"$work/gpipe.csv"
cat >"$work/two.json" <<'JSON'
{"schedule": "1F1B", "ranks": 2, "microbatches": 2,
 "stages": [{"forward_ms": 1, "backward_ms": 2}, {"forward_ms": 1, "backward_ms": 2}]}
JSON
# (1F1B would run 1B0 before 1F1 on rank 1; the plan must keep the CSV's order.)
expect_status 0 "schedule csv" "$TF_PLAN" "$work/two.json" --schedule-csv "$work/gpipe.csv" -q \
    -o "$work/csv.json"
check "schedule csv: the plan keeps the CSV's order" python3 - "$work/csv.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
rank1 = [f"{a['stage']}{a['type']}{a['microbatch']}" for a in plan["actions"] if a["rank"] == 1]
assert rank1 == ["1F0", "1F1", "1B0", "1B1"], rank1
assert plan["batch_ms"]["unfrozen"] == 9, plan["batch_ms"]  # by hand: F 1, B 2
PY

# --timeline draws the plan from the same library call as tf-dot.
expect_status 0 "--timeline svg" "$TF_PLAN" "$trace" -q -o "$work/t.json" --timeline "$work/t.svg"
check "--timeline svg: an SVG" grep -q '<svg' "$work/t.svg"
check "--timeline svg: 64 boxes" [ "$(grep -c 'class="node action ' "$work/t.svg")" -eq 64 ]
expect_status 0 "--timeline chrome trace" "$TF_PLAN" "$src/traces/examples/zbv-p4-m8.profile.json" \
    -q --timeline "$work/t.json"
check "--timeline chrome trace: 192 events" python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
assert sum(e["ph"] == "X" for e in t["traceEvents"]) == 192' "$work/t.json"

# Input from a pipe, and a schedule name in another letter case.
expect_status 0 "profile from a pipe" \
    bash -c 'sed "s/\"1F1B\"/\"1f1b\"/" "$1" | "$2" /dev/stdin -q -o "$3"' _ "$trace" "$TF_PLAN" \
    "$work/pipe.json"
check "profile from a pipe: canonical name" \
    grep -Eq '"schedule":[[:space:]]*"1F1B"' "$work/pipe.json"

# Help and version.
expect_status 0 "--help" "$TF_PLAN" --help
expect_stdout "--help" "usage: tf-plan"
expect_status 0 "--version" "$TF_PLAN" --version
expect_stdout "--version" "tf-plan"

# Bad input.
expect_error "missing file" 1 "$work/none.json" "$work/none.json"
printf '{"schedule": "1F1B", "ranks": 2, "microb' >"$work/truncated.json"
expect_error "truncated" 1 "not valid JSON" "$work/truncated.json"
printf '{"schedule": "1F1B", "ranks": "four", "microbatches": 2, "stages": []}' >"$work/type.json"
expect_error "wrong type" 1 '$.ranks' "$work/type.json"
printf '{"schedule": "1F1B", "ranks": 1, "microbatches": 2, "stages": [{"forward_ms": -1, "backward_ms": 2}]}' >"$work/neg.json"
expect_error "negative time" 1 '$.stages[0].forward_ms' "$work/neg.json"
printf '{"schedule": "1F1B", "ranks": 1, "microbatches": 2, "stages": [{"forward_ms": 1e400, "backward_ms": 2}]}' >"$work/inf.json"
expect_error "non-finite time" 1 'finite' "$work/inf.json"
printf '{"schedule": "1F1B", "ranks": 2, "microbatches": 2, "stages": [{"forward_ms": 1, "backward_ms": 2}]}' >"$work/count.json"
expect_error "counts" 1 '$.stages' "$work/count.json"
printf '{"schedule": "Zigzag", "ranks": 1, "microbatches": 2, "stages": [{"forward_ms": 1, "backward_ms": 2}]}' >"$work/unknown.json"
expect_error "unknown schedule" 1 'Zigzag' "$work/unknown.json"
cat >"$work/cycle.json" <<'JSON'
{"schedule": "custom", "ranks": 2, "microbatches": 2,
 "stages": [{"forward_ms": 1, "backward_ms": 2}, {"forward_ms": 1, "backward_ms": 2}],
 "order": [["0F0", "0F1", "0B0", "0B1"], ["1F1", "1B1", "1F0", "1B0"]]}
JSON
expect_error "cyclic order" 1 'deadlocks' "$work/cycle.json"
python3 -c 'print("[" * 200000 + "]" * 200000)' >"$work/deep.json"
expect_error "deep nesting" 1 'nested deeper' "$work/deep.json"
printf '0F0,0B0\n1F0,1B0\n' >"$work/short.csv"
expect_error "csv microbatches" 1 'microbatches' "$work/two.json" --schedule-csv "$work/short.csv"
expect_error "bad cap" 2 'max-freeze-ratio' "$work/two.json" --max-freeze-ratio 1.5
expect_error "bad objective" 2 'objective' "$work/two.json" --objective fastest
expect_error "unknown option" 2 '--frobnicate' "$work/two.json" --frobnicate
expect_error "timeline format" 2 'timeline.txt' "$work/two.json" --timeline "$work/timeline.txt"
printf '{"schedule": "1F1B", "ranks": 1, "microbatches": 2, "stages": [{"forward_ms": 1e12, "backward_ms": 2e12}]}' >"$work/huge.json"
expect_error "huge time" 1 '$.stages[0].forward_ms' "$work/huge.json"
# The plan and its timeline are one unit: an unwritable timeline keeps the plan untouched.
expect_error "unwritable timeline" 1 'no/such/dir/t.svg' "$work/two.json" --timeline "$work/no/such/dir/t.svg"

# Size limits (docs/robustness.md): an endless or huge input is refused
# after reading at most its limit, naming the file and the limit; counts
# that are each within their limits are refused when their product is not.
# Each must end within 60 s (it takes a second even on a loaded machine;
# before, /dev/zero was read until memory ran out): expect_quick_error runs
# expect_error's checks under timeout, which would show as exit 124.
expect_quick_error() {
    local name=$1 code=$2 part=$3
    shift 3
    printf 'precious' >"$work/plan.json"
    expect_refused_with "$code" "$name" "$part" "$work/plan.json" -- \
        timeout 60 "$TF_PLAN" "$@" -o "$work/plan.json"
}
expect_quick_error "/dev/zero as profile" 1 '/dev/zero: larger than the 64 MiB limit' \
    /dev/zero
expect_quick_error "/dev/zero as schedule CSV" 1 '/dev/zero: larger than the 16 MiB limit' \
    "$work/two.json" --schedule-csv /dev/zero
truncate -s 65M "$work/sparse.json"
expect_quick_error "a 65 MiB profile" 1 'sparse.json: larger than the 64 MiB limit' \
    "$work/sparse.json"
printf '{"schedule": "1F1B", "ranks": 512, "microbatches": 65536, "stages": []}' >"$work/many.json"
expect_quick_error "ranks x microbatches" 1 \
    '512 x 1 x 65536 x 2 = 67108864 actions, more than the 131072' \
    "$work/many.json"
printf '{"schedule": "Interleaved1F1B", "ranks": 512, "stages_per_rank": 2, %s}' \
    '"microbatches": 1, "stages": []' >"$work/stages.json"
expect_quick_error "ranks x stages_per_rank" 1 '1024 stages, more than the 512' \
    "$work/stages.json"
python3 - "$work/cells.json" <<'PY'
import json, sys
order = [[f"{r}F{m}" for m in range(65536)] for r in range(8)]
stages = [{"forward_ms": 1, "backward_ms": 2}] * 8
json.dump({"schedule": "custom", "ranks": 8, "microbatches": 8, "stages": stages,
           "order": order}, open(sys.argv[1], "w"))
PY
expect_quick_error "8 x 65536 order cells" 1 'more than 131072 actions' \
    "$work/cells.json"

# Two outputs, or an output and an input, that are one file under any
# spelling are refused before anything is read or written (the picture
# replaced the plan before).
mkdir -p "$work/sub"
printf 'precious' >"$work/same.json"
expect_refused_with 2 "-o and --timeline the same file" "-o and --timeline are the same file" \
    "$work/same.json" -- "$TF_PLAN" "$trace" -o "$work/same.json" --timeline "$work/same.json"
expect_refused_with 2 "-o and --timeline, other spellings" "the same file" "$work/same.json" -- \
    "$TF_PLAN" "$trace" -o "$work/same.json" --timeline "$work/sub/../././same.json"
ln -s "$work/same.json" "$work/link.json"
expect_refused_with 2 "-o and --timeline through a link" "the same file" "$work/same.json" -- \
    "$TF_PLAN" "$trace" -o "$work/link.json" --timeline "$work/same.json"
rm -f "$work/new.json"
expect_refused_with 2 "-o and --timeline, a new file" "the same file" -- \
    "$TF_PLAN" "$trace" -o "$work/new.json" --timeline "$work/sub/../new.json"
check "-o and --timeline, a new file: nothing written" [ ! -e "$work/new.json" ]
cp "$work/two.json" "$work/input.json"
expect_refused_with 2 "-o over the profile" "-o and the profile are the same file" \
    "$work/input.json" -- "$TF_PLAN" "$work/input.json" -o "$work/./input.json"

# A summary that cannot be written (a full disk) is an error, not a
# silent success; the plan itself is written (atomically) before it.
if [ -w /dev/full ]; then
    run bash -c '"$1" "$2" -o "$3" >/dev/full' _ "$TF_PLAN" "$trace" "$work/full.json"
    check "summary to /dev/full: exit 1" [ "$rc" -eq 1 ]
    expect_stderr "summary to /dev/full" "cannot write the summary to stdout"
fi

# --time-limit bounds the solve: past it, exit 3 naming the limit.
expect_error "bad --time-limit" 2 'time-limit' "$trace" --time-limit -1
expect_error "time limit reached" 3 'stopped at the time limit (1e-09 s)' \
    "$trace" --time-limit 1e-9

# An unwritable output location fails cleanly.
run "$TF_PLAN" "$work/two.json" -q -o "$work/no/such/dir/plan.json"
check "unwritable output refused" [ "$rc" -ne 0 ]
expect_stderr "unwritable output message" 'no/such/dir/plan.json'

finish "tf-plan CLI"
