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

# Counts of one read in the singular.
cat >"$work/one.json" <<'JSON'
{"schedule": "GPipe", "ranks": 1, "microbatches": 1,
 "stages": [{"forward_ms": 1, "backward_ms": 2, "backward_frozen_ms": 1}]}
JSON
expect_status 0 "one rank" "$TF_PLAN" "$work/one.json"
expect_stdout "one rank: singular counts" "GPipe: 1 rank x 1 stage, 1 microbatch, 2 actions"

# --objective spread and a cap override change the plan's header.
expect_status 0 "spread" "$TF_PLAN" "$trace" --objective spread --max-freeze-ratio 0.5 -q \
    -o "$work/spread.json"
check "spread: objective" grep -Eq '"objective":[[:space:]]*"spread"' "$work/spread.json"
check "spread: cap" grep -Eq '"max_freeze_ratio":[[:space:]]*0.5,' "$work/spread.json"

# Options as getopt takes them: "-oFILE" and "--option=value".
expect_status 0 "-oFILE" "$TF_PLAN" "$trace" -q -o"$work/attached.json"
check "-oFILE: no plan written" [ -s "$work/attached.json" ]
expect_status 0 "--option=value" "$TF_PLAN" "$trace" --quiet --output="$work/equals.json" \
    --objective=spread --max-freeze-ratio=0.5 --solver=fast
check "--output=FILE: no plan written" [ -s "$work/equals.json" ]
check "--objective=spread not taken" grep -Eq '"objective":[[:space:]]*"spread"' "$work/equals.json"
check "--max-freeze-ratio=0.5 not taken" \
    grep -Eq '"max_freeze_ratio":[[:space:]]*0.5,' "$work/equals.json"
check "--solver=fast not taken" grep -Eq '"name":[[:space:]]*"fast"' "$work/equals.json"
expect_status 2 "--max-freeze-ratio=2" "$TF_PLAN" "$trace" -q --max-freeze-ratio=2
expect_stderr "--max-freeze-ratio=2" '--max-freeze-ratio: expected a number in [0, 1], got "2"'
# A per-action cap: said in the summary, kept in the plan, never exceeded.
expect_status 0 "--max-action-ratio 0.5" "$TF_PLAN" "$trace" --max-action-ratio 0.5 \
    -o "$work/action-cap.json"
expect_stdout "--max-action-ratio 0.5" "cap           0.80 on every stage, at most 0.50 on each action"
check "--max-action-ratio 0.5: a ratio above 0.5 in the plan" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
r = [a.get("freeze_ratio", 0) for a in p["actions"]]
sys.exit(not (p["max_action_ratio"] == 0.5 and max(r) <= 0.5 + 1e-9 and max(r) > 0.49))' \
    "$work/action-cap.json"
expect_status 2 "--max-action-ratio 0" "$TF_PLAN" "$trace" -q --max-action-ratio 0
expect_stderr "--max-action-ratio 0" '--max-action-ratio: expected a number in (0, 1], got "0"'

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

# PyTorch's own CSVs plan as PyTorch writes them (tests/planner/golden/pytorch-artifacts),
# with a profile that names no schedule: the CSV gives the shape.
artifacts=$src/tests/planner/golden/pytorch-artifacts
stage_iw='{"forward_ms": 2, "backward_input_ms": 2, "backward_weight_ms": 2}'
cat >"$work/zb1p.json" <<JSON
{"ranks": 2, "microbatches": 8, "stages": [$stage_iw, $stage_iw, $stage_iw, $stage_iw]}
JSON
# same_plan A B: the same batch times and actions, pairs included (not the solver's seconds).
same_plan() {
    python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["batch_ms"] == b["batch_ms"], (a["batch_ms"], b["batch_ms"])
assert a["actions"] == b["actions"]
PY
}
expect_status 0 "ZB1P artifact" "$TF_PLAN" "$work/zb1p.json" \
    --schedule-csv "$artifacts/zb1p_2rank_2stagep_compute.csv" -q -o "$work/zb1p-plan.json"
expect_stderr "ZB1P artifact: the older notation is noted" \
    "32 cells in PyTorch's older notation (B followed by a W of the same stage and microbatch, first 2B0) read as backward-input I"
check "ZB1P artifact: one note line" [ "$(wc -l <"$work/err")" -eq 1 ]
expect_status 0 "ZB1P artifact, newer notation" "$TF_PLAN" "$work/zb1p.json" \
    --schedule-csv "$artifacts/zb1p_2rank_2stagep_compute.a8e954a.csv" -q -o "$work/zb1p-new.json"
check "ZB1P artifact: no note for the newer notation" [ ! -s "$work/err" ]
check "ZB1P artifact: both notations give the same plan" same_plan "$work/zb1p-plan.json" \
    "$work/zb1p-new.json"
stage_all='{"forward_ms": 2, "backward_ms": 4, "backward_input_ms": 2, "backward_weight_ms": 2}'
stages8="$stage_all, $stage_all, $stage_all, $stage_all, $stage_all, $stage_all, $stage_all, $stage_all"
printf '{"stages": [%s]}' "$stages8" >"$work/dpv-timings.json"
expect_status 0 "DualPipeV artifact, a profile of timings alone" "$TF_PLAN" "$work/dpv-timings.json" \
    --schedule-csv "$artifacts/dualpipev_4rank_10mb.csv" -q -o "$work/dpv-csv.json"
check "DualPipeV artifact: pairs in the plan" grep -q '"pair":[[:space:]]*"(0F7;7B3)OVERLAP_F_B"' \
    "$work/dpv-csv.json"
# A profile that names another schedule plans the CSV's order all the same.
printf '{"schedule": "ZBVZeroBubble", "ranks": 4, "microbatches": 10, "stages": [%s]}' "$stages8" \
    >"$work/dpv-zbv.json"
expect_status 0 "DualPipeV artifact, a ZBVZeroBubble profile" "$TF_PLAN" "$work/dpv-zbv.json" \
    --schedule-csv "$artifacts/dualpipev_4rank_10mb.csv" -q -o "$work/dpv-zbv-plan.json"
check "DualPipeV artifact: the CSV's order, not the profile's" same_plan "$work/dpv-csv.json" \
    "$work/dpv-zbv-plan.json"
printf '{"schedule": "DualPipeV", "ranks": 4, "microbatches": 10, "stages": [%s]}' "$stages8" \
    >"$work/dpv.json"
# tf-plan's own CSV of DualPipeV is PyTorch's artifact byte for byte, and plans back the same.
expect_status 0 "--write-csv" "$TF_PLAN" "$work/dpv.json" -q -o "$work/dpv-plan.json" \
    --write-csv "$work/dpv.csv"
check "--write-csv: PyTorch's DualPipeV CSV, byte for byte" cmp -s "$work/dpv.csv" \
    "$artifacts/dualpipev_4rank_10mb.csv"
expect_status 0 "--write-csv round trip" "$TF_PLAN" "$work/dpv.json" -q -o "$work/dpv-back.json" \
    --schedule-csv "$work/dpv.csv" --write-csv "$work/dpv-back.csv"
check "--write-csv round trip: the same CSV" cmp -s "$work/dpv.csv" "$work/dpv-back.csv"
check "--write-csv round trip: the same plan" same_plan "$work/dpv-plan.json" "$work/dpv-back.json"
printf '0F0,(0F1;0B0)OVERLAP_F_B,0B1\n1F0,1B0,1F1,1B1\n' >"$work/pair.csv"
expect_status 0 "--write-csv of a CSV order" "$TF_PLAN" "$work/two.json" -q \
    --schedule-csv "$work/pair.csv" --write-csv "$work/pair-back.csv"
check "--write-csv of a CSV order: unchanged" cmp -s "$work/pair.csv" "$work/pair-back.csv"
# A shape the profile states must be the CSV's.
printf '{"ranks": 2, "stages": [%s]}' "$stages8" >"$work/dpv-two-ranks.json"
expect_error "csv ranks" 1 '$.ranks' "$work/dpv-two-ranks.json" \
    --schedule-csv "$artifacts/dualpipev_4rank_10mb.csv"
printf '{"stages": [%s, %s]}' "$stage_all" "$stage_all" >"$work/two-stages.json"
expect_error "csv stages" 1 '$.stages' "$work/two-stages.json" \
    --schedule-csv "$artifacts/dualpipev_4rank_10mb.csv"
printf '{"schedule": "DualPipeV", "ranks": 4, "microbatches": 6, "stages": [%s]}' "$stages8" \
    >"$work/dpv6.json"
expect_error "DualPipeV needs 2P microbatches" 1 'microbatches = 6 is fewer than the 8 stages' \
    "$work/dpv6.json"
printf '0F0,(0F1;0W0)OVERLAP_F_B,0B1\n1F0,1B0,1F1,1B1\n' >"$work/bad-pair.csv"
expect_error "csv bad pair" 1 'line 1, cell 2' "$work/two.json" --schedule-csv "$work/bad-pair.csv"

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
# A misspelled field is refused by its path with the nearest known name,
# not planned with its default (backward_frozn_ms: half the backward).
llama=$src/traces/llama8b-1f1b-h200.profile.json
sed '0,/"backward_frozen_ms"/s//"backward_frozn_ms"/' "$llama" >"$work/typo.json"
expect_error "misspelled stage field" 1 \
    "typo.json: \$.stages[0].backward_frozn_ms: unknown field (did you mean backward_frozen_ms?)" \
    "$work/typo.json"
sed 's/"max_freeze_ratio"/"max_freeze_ratios"/' "$llama" >"$work/typo-cap.json"
expect_error "misspelled cap" 1 \
    '$.max_freeze_ratios: unknown field (did you mean max_freeze_ratio?)' "$work/typo-cap.json"
sed 's/"version": 1/"version": 3/' "$llama" >"$work/v3.json"
expect_error "newer version" 1 \
    '$.version: version 3 is newer than the tf-profile version this toolkit reads (2)' \
    "$work/v3.json"
# Notes go under "meta", which holds anything and changes nothing.
python3 - "$llama" "$work/meta.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["meta"] = {"comment": "by hand", "backward_frozn_ms": [1, {"x": None}], "": {}}
json.dump(p, open(sys.argv[2], "w"))
PY
expect_status 0 "meta" "$TF_PLAN" "$work/meta.json"
expect_stdout "meta: the same plan" "planned 426.67 ms"

printf '{"schedule": "1F1B", "ranks": 1, "microbatches": 2, "stages": [{"forward_ms": 1e12, "backward_ms": 2e12}]}' >"$work/huge.json"
expect_error "huge time" 1 '$.stages[0].forward_ms' "$work/huge.json"
# The plan and its timeline are one unit: an unwritable timeline keeps the plan untouched.
expect_error "unwritable timeline" 1 'no/such/dir/t.svg' "$work/two.json" --timeline "$work/no/such/dir/t.svg"

# Size limits (docs/robustness.md): an endless or huge input is refused
# after reading at most its limit, naming the file and the limit; counts
# that are each within their limits are refused when their product is not.
# Each must end within 20 s of CPU time (before, /dev/zero was read until
# memory ran out; the largest, the 8 x 65536 order cells, takes 0.5 s with
# AddressSanitizer, 0.15 s optimised): expect_quick_error runs
# expect_error's checks under cpu_bounded, which would show as exit 137.
expect_quick_error() {
    local name=$1 code=$2 part=$3
    shift 3
    printf 'precious' >"$work/plan.json"
    expect_refused_with "$code" "$name" "$part" "$work/plan.json" -- \
        cpu_bounded 20 "$TF_PLAN" "$@" -o "$work/plan.json"
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
# Devices are written into, never replaced: two outputs on /dev/null are fine.
expect_status 0 "-o and --write-csv both /dev/null" "$TF_PLAN" "$trace" -q -o /dev/null \
    --write-csv /dev/null

# A summary that cannot be written (a full disk) is an error, not a
# silent success; the plan itself is written (atomically) before it.
if [ -w /dev/full ]; then
    run bash -c '"$1" "$2" -o "$3" >/dev/full' _ "$TF_PLAN" "$trace" "$work/full.json"
    check "summary to /dev/full: exit 1" [ "$rc" -eq 1 ]
    expect_stderr "summary to /dev/full" "cannot write the summary to stdout"
fi

# --plot draws the --pareto curve: one marked point per row of the table,
# one piece between neighbours; without a trade-off, or with a name that
# is no picture, it is refused and nothing is written.
expect_status 0 "--pareto --plot" "$TF_PLAN" "$trace" --pareto --plot "$work/pareto.svg"
expect_stdout "--pareto --plot names the chart" "plot          $work/pareto.svg"
points=$(sed -n 's/^\([0-9][0-9]*\) points* (the ends.*/\1/p' "$work/out")
check "--plot: one mark per point ($points)" \
    [ "$(grep -c 'id="pt_[0-9]*" class="node"' "$work/pareto.svg")" = "$points" ]
check "--plot: one piece between neighbours" \
    [ "$(grep -c 'id="seg_[0-9]*" class="edge"' "$work/pareto.svg")" = "$((points - 1))" ]
check "--plot: the x axis is titled" grep -q 'largest freeze ratio of any action' "$work/pareto.svg"
run "$TF_PLAN" "$trace" --plot "$work/lone.svg"
check "--plot without --pareto: exit 2" [ "$rc" -eq 2 ]
expect_stderr "--plot without --pareto" '--plot: expected --pareto or --pareto-memory with it'
check "--plot without --pareto: no chart" [ ! -e "$work/lone.svg" ]
run "$TF_PLAN" "$trace" --pareto --plot "$work/pareto.gif"
check "--plot pareto.gif: exit 2" [ "$rc" -eq 2 ]
expect_stderr "--plot pareto.gif" 'a file name ending in .svg, .png or .pdf'
check "--plot pareto.gif: nothing written" [ ! -e "$work/pareto.gif" ]
cp "$trace" "$work/chart-input.json"
cp "$work/chart-input.json" "$work/chart-input.kept"
run "$TF_PLAN" "$work/chart-input.json" --pareto --plot "$work/./chart-input.json"
check "--plot over the profile: exit 2" [ "$rc" -eq 2 ]
check "--plot over the profile: the profile kept" cmp -s "$work/chart-input.json" \
    "$work/chart-input.kept"

# --time-limit bounds the solve: past it, exit 3 naming the limit.
expect_error "bad --time-limit" 2 'time-limit' "$trace" --time-limit -1
expect_error "time limit reached" 3 'stopped at the time limit (1e-09 s)' \
    "$trace" --time-limit 1e-9

# An unwritable output location fails cleanly.
run "$TF_PLAN" "$work/two.json" -q -o "$work/no/such/dir/plan.json"
check "unwritable output refused" [ "$rc" -ne 0 ]
expect_stderr "unwritable output message" 'no/such/dir/plan.json'

finish "tf-plan CLI"
