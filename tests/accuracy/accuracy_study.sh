#!/usr/bin/env bash
# tools/accuracy-study --quick: the machinery of the accuracy study (not its
# conclusion): pretraining, profiling, both plans, every arm for every seed,
# the CSVs, the plot and the summary; and its refusals.
# Run by ctest with TF_EXEC, TF_PLAN and TF_SOURCE_DIR.
. "$(dirname "$0")/../lib.sh"
need TF_EXEC TF_PLAN TF_SOURCE_DIR
study=("$TF_SOURCE_DIR/tools/accuracy-study" --tf-exec "$TF_EXEC" --tf-plan "$TF_PLAN")

expect_status 0 "quick study" python3 "${study[@]}" --quick -o "$work/q"
out=$work/q
for f in evaluations.csv summary.csv config.json validation-loss.svg; do
    check "wrote $f" [ -s "$out/$f" ]
done
arms="no-freeze plan-lf-random plan-lf-rotate plan-spread-random plan-spread-rotate uniform cap
plan-lf-rescaled plan-actcap-random"
# 9 arms x 2 seeds x 4 evaluations, and one summary row per arm.
rows=$(($(wc -l <"$out/evaluations.csv") - 1))
check "evaluations.csv has $rows rows, expected 72" [ "$rows" -eq 72 ]
for arm in $arms; do
    check "summary has $arm" grep -q "^$arm," "$out/summary.csv"
    check "stdout has $arm" grep -q "^$arm " "$work/out"
done
# The arms really differ in freezing: none, the plan's mean, the cap.
python3 - "$out/summary.csv" >"$work/ratios" <<'PY'
import csv, sys
rows = {r["arm"]: float(r["freeze_ratio"]) for r in csv.DictReader(open(sys.argv[1]))}
print("%.3f %.3f %.3f %.3f" % (rows["no-freeze"], rows["plan-lf-random"], rows["uniform"], rows["cap"]))
PY
read -r none plan uniform cap <"$work/ratios"
check "no-freeze froze $none" awk -v v="$none" 'BEGIN { exit !(v == 0) }'
check "the plan froze $plan, the uniform arm $uniform: about the same mean" \
    awk -v a="$plan" -v b="$uniform" 'BEGIN { d = a - b; exit !(a > 0 && d < 0.05 && d > -0.05) }'
check "the cap arm froze $cap, the most" awk -v c="$cap" -v a="$plan" 'BEGIN { exit !(c >= a) }'
# Two panels, a line per arm in each.
lines=$(grep -c '<polyline' "$out/validation-loss.svg")
check "plot has $lines lines, expected 18" [ "$lines" -eq 18 ]
# The per-action cap holds in its plan.
check "no action of plan-actcap.json above the cap" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
cap = p["max_action_ratio"]
sys.exit(not (cap < 1 and all(a.get("freeze_ratio", 0) <= cap + 1e-9 for a in p["actions"])))' \
    "$out/plan-actcap.json"
check "config names the seeds" grep -q '"seeds"' "$out/config.json"

# Refusals: a non-empty output folder is never overwritten; a failing run
# stops the study with the command that failed.
expect_refused "non-empty output" "is not empty" "$out/summary.csv" -- \
    python3 "${study[@]}" --quick -o "$out"
expect_refused "failing tf-exec" "failed" -- python3 "$TF_SOURCE_DIR/tools/accuracy-study" \
    --tf-exec /bin/false --tf-plan "$TF_PLAN" --quick -o "$work/f"
finish "accuracy-study --quick"
