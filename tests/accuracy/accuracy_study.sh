#!/usr/bin/env bash
# tools/accuracy-study --quick: the machinery of both accuracy studies (not
# their conclusions): data, pretraining, profiles, plans, every arm of every
# pipeline for every seed, the predictions, the CSVs, the charts, the window
# check; and the refusals.
# Run by ctest with TF_EXEC, TF_PLAN and TF_SOURCE_DIR.
. "$(dirname "$0")/../lib.sh"
need TF_EXEC TF_PLAN TF_SOURCE_DIR
study=("$TF_SOURCE_DIR/tools/accuracy-study" --tf-exec "$TF_EXEC" --tf-plan "$TF_PLAN")

# check_study DIR ARMS SCHEDULES: the files, rows and lines every study writes.
check_study() {
    local out=$1 arms=$2 schedules=$3
    local n_arms n_sched
    n_arms=$(wc -w <<<"$arms")
    n_sched=$(wc -w <<<"$schedules")
    for f in evaluations.csv summary.csv runs.csv speed.csv config.json; do
        check "wrote $f" [ -s "$out/$f" ]
    done
    # arms x schedules x 2 seeds x 4 evaluations; one summary row per arm and schedule.
    local rows=$(($(wc -l <"$out/evaluations.csv") - 1))
    check "evaluations.csv has $rows rows, expected $((n_arms * n_sched * 8))" \
        [ "$rows" -eq $((n_arms * n_sched * 8)) ]
    rows=$(($(wc -l <"$out/runs.csv") - 1))
    check "runs.csv has $rows runs, expected $((n_arms * n_sched * 2))" \
        [ "$rows" -eq $((n_arms * n_sched * 2)) ]
    # One speed round (--rounds 1): every arm of every schedule once.
    rows=$(($(wc -l <"$out/speed.csv") - 1))
    check "speed.csv has $rows runs, expected $((n_arms * n_sched))" \
        [ "$rows" -eq $((n_arms * n_sched)) ]
    for s in $schedules; do
        for arm in $arms; do
            check "summary has $s $arm" grep -q "^$s,$arm," "$out/summary.csv"
            check "stdout has $arm" grep -q "^$arm " "$work/out"
        done
        # Three panels, a line per arm in each.
        local lines
        lines=$(grep -c '<polyline' "$out/validation-loss-$s.svg")
        check "$s: chart has $lines lines, expected $((3 * n_arms))" \
            [ "$lines" -eq $((3 * n_arms)) ]
        # The per-action cap holds in its plan.
        check "$s: no action of plan-$s-actcap.json above the cap" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
cap = p["max_action_ratio"]
sys.exit(not (cap < 1 and all(a.get("freeze_ratio", 0) <= cap + 1e-9 for a in p["actions"])))' \
            "$out/plan-$s-actcap.json"
    done
}

# check_figures DIR SCHEDULE: what the summary's figures must satisfy.
check_figures() {
    python3 - "$1/summary.csv" "$1/plan-$2-lf.json" "$1/config.json" "$2" <<'PY'
import csv, json, sys
rows = {r["arm"]: r for r in csv.DictReader(open(sys.argv[1])) if r["schedule"] == sys.argv[4]}
plan, config = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
fail = []
def expect(ok, what):
    if not ok:
        fail.append(what)
f = lambda arm, key: float(rows[arm][key])
# The arms really differ in freezing: none, the plan's mean, the cap.
expect(f("no-freeze", "freeze_ratio") == 0, "no-freeze froze something")
expect(abs(f("plan-lf-random", "freeze_ratio") - f("uniform", "freeze_ratio")) < 0.05,
       "the plan and uniform freeze about the same share")
expect(f("cap", "freeze_ratio") >= f("plan-lf-random", "freeze_ratio"), "cap froze the most")
# Predictions: the DAG without freezing is the plan's unfrozen batch time,
# under the plan's ratios its planned one; the random and stable choices
# share the plan, so their prediction.
expect(abs(f("no-freeze", "predicted_batch_ms") - plan["batch_ms"]["unfrozen"]) < 1e-3,
       "no-freeze's prediction is the plan's unfrozen batch time")
expect(abs(f("plan-lf-random", "predicted_batch_ms") - plan["batch_ms"]["planned"]) < 1e-3,
       "the plan's prediction is its batch time")
expect(f("plan-lf-stable", "predicted_batch_ms") == f("plan-lf-random", "predicted_batch_ms"),
       "stable and random share the plan's prediction")
# No-freeze is its own reference: gap 0, and it reaches both targets.
expect(f("no-freeze", "gap_mean") == 0 and rows["no-freeze"]["reached_50"] == "2",
       "no-freeze's gap is 0 and it reaches the 50% target in both seeds")
# The seeds draw other windows: each seed's are nearly all distinct, and
# two seeds share no more than chance gives (a handful).
w = config["windows"]
expect(all(d >= 0.99 * w["draws_per_seed"] for d in w["distinct_per_seed"].values()),
       "windows distinct within a seed")
expect(all(n <= 5 + 3 * w["expected_shared"] for n in w["shared_between_seeds"].values()),
       "seeds share few windows")
print("\n".join(fail))
sys.exit(1 if fail else 0)
PY
}

# 1. The 2-rank study on the built-in sources.
expect_status 0 "quick study (shifted)" python3 "${study[@]}" --quick --rounds 1 -o "$work/q"
check_study "$work/q" "no-freeze plan-lf-random plan-lf-rotate plan-lf-stable plan-spread-random
plan-spread-rotate uniform cap plan-lf-rescaled plan-actcap-random" 1F1B
check "shifted: the summary's figures hold" check_figures "$work/q" 1F1B
check "config names the seeds" grep -q '"seeds"' "$work/q/config.json"

# 2. The 4-rank text study: two schedules, data from Debian's files.
expect_status 0 "quick study (text)" python3 "${study[@]}" --study text --quick --rounds 1 \
    -o "$work/t"
check_study "$work/t" "no-freeze plan-lf-random plan-lf-stable plan-actcap-random uniform cap" \
    "1F1B ZBVZeroBubble"
for s in 1F1B ZBVZeroBubble; do
    check "text $s: the summary's figures hold" check_figures "$work/t" "$s"
done
check "text: 3,000,000 bytes of Python to pretrain on" \
    grep -q '"bytes": 3000000' "$work/t/config.json"
check "text: the fine-tuning file's digest is recorded" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["data"]["finetune"]
sys.exit(not (len(d["sha256"]) == 64 and d["files"] > 50))' "$work/t/config.json"

# --speed: the rounds again for a finished study, speed.csv rewritten.
rm "$work/q/speed.csv"
expect_status 0 "--speed on the shifted study" python3 "${study[@]}" --speed "$work/q" --rounds 1
rows=$(($(wc -l <"$work/q/speed.csv") - 1))
check "speed.csv has $rows runs, expected 10" [ "$rows" -eq 10 ]
expect_stdout "--speed prints the medians" "medians over 1 round;"

# --report: the study's own summary again from its logs, then a part of it
# (two arms, seed 2) when config.json names only that part.
cp "$work/q/summary.csv" "$work/q-summary.csv"
expect_status 0 "--report on the shifted study" python3 "${study[@]}" --report "$work/q"
check "--report writes the study's summary again" cmp -s "$work/q/summary.csv" "$work/q-summary.csv"
python3 - "$work/q/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["arms"], c["seeds"] = ["no-freeze", "cap"], [2]
json.dump(c, open(sys.argv[1], "w"))
PY
expect_status 0 "--report on two arms and one seed" python3 "${study[@]}" --report "$work/q"
check "the part's summary has the 2 arms" [ "$(cut -d, -f2 "$work/q/summary.csv" | tail -n +2 | tr '\n' ' ')" = "no-freeze cap " ]
check "the part's evaluations are seed 2's, 4 per arm" [ "$(cut -d, -f2,3 "$work/q/evaluations.csv" | tail -n +2 | sort | uniq -c | awk '{print $1, $2}' | tr '\n' ' ')" = "4 cap,2 4 no-freeze,2 " ]

# Refusals: a non-empty output folder is never overwritten; a failing run
# stops the study with the command that failed; missing data files are
# named with what to install, before anything runs.
expect_refused "non-empty output" "is not empty" "$work/q/summary.csv" -- \
    python3 "${study[@]}" --quick -o "$work/q"
expect_refused "failing tf-exec" "failed" -- python3 "$TF_SOURCE_DIR/tools/accuracy-study" \
    --tf-exec /bin/false --tf-plan "$TF_PLAN" --quick -o "$work/f"
expect_refused "no Python sources" "no files match /nonexistent/usr/lib/python3.11/*.py" -- \
    python3 "${study[@]}" --study text --quick --system-root /nonexistent -o "$work/n"
check "no pretraining without data" [ ! -e "$work/n/pretrained" ]
finish "accuracy-study --quick"
