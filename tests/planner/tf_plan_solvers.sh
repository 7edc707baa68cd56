#!/usr/bin/env bash
# tf-plan --solver: lp_solve, clp and fast must give the same plan (batch
# time within 1e-9 relative, total freeze within 1e-6) on every bundled trace,
# the plan and the summary must name the solver that ran, auto must pick one
# and say so, and an unknown solver is a usage error that writes nothing.
# Run by ctest with TF_PLAN and TF_SOURCE_DIR set.
. "$(dirname "$0")/../lib.sh"
need TF_PLAN TF_SOURCE_DIR
src=$TF_SOURCE_DIR

# compare LP_PLAN OTHER_PLAN NAME: same batch time and total freeze, each
# plan names its solver (and the general solvers' plans their versions).
compare() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, re, sys
lp, fast = (json.load(open(p)) for p in sys.argv[1:3])
name = sys.argv[3]
def total(plan):
    return sum(a["freeze_ratio"] for a in plan["actions"])
assert lp["solver"]["name"] == "lp_solve", lp["solver"]
assert lp["solver"]["requested"] == "lp_solve", lp["solver"]
assert re.fullmatch(r"\d+(\.\d+)+", lp["solver"]["version"]), lp["solver"]
assert fast["solver"]["name"] == name, fast["solver"]
assert fast["solver"]["requested"] == name, fast["solver"]
if name == "clp":
    assert re.fullmatch(r"\d+(\.\d+)+", fast["solver"]["version"]), fast["solver"]
for plan in (lp, fast):
    assert plan["solver"]["status"] == "optimal", plan["solver"]
t_lp, t_fast = lp["batch_ms"]["planned"], fast["batch_ms"]["planned"]
assert abs(t_fast - t_lp) <= 1e-9 * abs(t_lp), ("batch_ms.planned", t_lp, t_fast)
assert abs(total(fast) - total(lp)) <= 1e-6, ("total freeze", total(lp), total(fast))
PY
}

traces=("$src"/traces/*.profile.json "$src"/traces/examples/*.json)
check "expected the bundled traces, found ${#traces[@]}" [ "${#traces[@]}" -ge 6 ]
for trace in "${traces[@]}"; do
    name=$(basename "$trace")
    expect_status 0 "$name: fast" "$TF_PLAN" "$trace" --solver fast -o "$work/fast.json"
    cp "$work/out" "$work/fast.out"
    expect_status 0 "$name: lp_solve" "$TF_PLAN" "$trace" --solver lp_solve -o "$work/lp.json"
    check "$name: lp_solve and fast differ" compare "$work/lp.json" "$work/fast.json" fast
    # The summary names the solver that ran and its time.
    check "$name: lp_solve summary" grep -Eq '^solver +lp_solve [0-9.]+: optimal, .* [0-9.]+ s$' \
        "$work/out"
    check "$name: fast summary" grep -Eq '^solver +fast [0-9.]+: optimal, .* [0-9.]+ s$' \
        "$work/fast.out"
    expect_status 0 "$name: clp" "$TF_PLAN" "$trace" --solver clp -o "$work/clp.json"
    check "$name: clp summary" grep -Eq '^solver +clp [0-9.]+: optimal, .* [0-9.]+ s$' "$work/out"
    check "$name: lp_solve and clp differ" compare "$work/lp.json" "$work/clp.json" clp
done

# auto (the default) records what it chose, and the summary says it chose.
trace="$src/traces/examples/zbv-p4-m8.profile.json"
expect_status 0 "--solver auto" "$TF_PLAN" "$trace" -o "$work/auto.json"
check "--solver auto: the plan records the choice" python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["solver"]
assert s["requested"] == "auto" and s["name"] in ("lp_solve", "clp", "fast"), s' "$work/auto.json"
check "--solver auto: the summary says auto" \
    grep -Eq '^solver +(lp_solve|clp|fast) [0-9.]+ \(auto\): optimal' "$work/out"
expect_status 0 "explicit --solver auto" "$TF_PLAN" "$trace" --solver auto -q -o "$work/auto2.json"
check "explicit --solver auto: recorded" grep -Eq '"requested":[[:space:]]*"auto"' "$work/auto2.json"

# One backward of 1e6 ms beside times of a few ms makes the ratios coarse
# (4.6e-8), and the total-ratio stage's penalty drives the cap prices to
# thousands: the fast solver's proof is then within its round-off (it had
# returned a total freeze 0.011 above the optimum, found by fuzz_profile).
# It says so and lp_solve plans it, to lp_solve's own answer.
coarse="$src/tests/planner/regressions/coarse-ratios-large-prices.profile.json"
expect_status 0 "coarse ratios: fast" "$TF_PLAN" "$coarse" --solver fast -o "$work/coarse-fast.json"
check "coarse ratios: the fallback says why" \
    grep -Eq "^fallback +lp_solve solved it after: fast solver: .*too coarse to prove it" "$work/out"
expect_status 0 "coarse ratios: lp_solve" "$TF_PLAN" "$coarse" --solver lp_solve \
    -o "$work/coarse-lp.json"
check "coarse ratios: the fallback's plan is lp_solve's" python3 -c '
import json, sys
lp, fast = (json.load(open(p)) for p in sys.argv[1:3])
assert fast["solver"]["name"] == "lp_solve" and fast["solver"]["requested"] == "fast", fast["solver"]
total = lambda plan: sum(a["freeze_ratio"] for a in plan["actions"])
assert abs(total(fast) - total(lp)) <= 1e-9, (total(lp), total(fast))' \
    "$work/coarse-lp.json" "$work/coarse-fast.json"

# One backward of 997,375 ms beside times of a few ms prices the makespan at
# 1.3e-7 per ms, and every demand of the fast solver's pricing network is as
# small: a flow tolerance of 1e-13 absolute, not relative to them, took a
# negative flow for zero, and the fast solver planned 1596586.08 ms, 2.6 ms
# above the optimum (found by fuzz_profile).  lp_solve and CLP plan
# 1596583.4801 ms; the fast solver must too (its total-ratio stage then
# hands over to lp_solve, too coarse to prove), and so must its curve of
# least batch times, which has no total-ratio stage.
tiny="$src/tests/planner/regressions/tiny-demands.profile.json"
for solver in fast lp_solve clp; do
    expect_status 0 "tiny demands: $solver" "$TF_PLAN" "$tiny" --solver "$solver" \
        -o "$work/tiny-$solver.json"
done
check "tiny demands: every solver plans the least batch time" python3 -c '
import json, sys
for path in sys.argv[1:]:
    batch = json.load(open(path))["batch_ms"]["planned"]
    assert abs(batch - 1596583.4801) <= 1e-9 * batch, (path, batch)' \
    "$work/tiny-fast.json" "$work/tiny-lp_solve.json" "$work/tiny-clp.json"
for solver in fast lp_solve; do
    expect_status 0 "tiny demands: $solver --pareto" "$TF_PLAN" "$tiny" --solver "$solver" --pareto
    grep -E '^[0-9.]+ +[0-9.]+ +[0-9.]+x ' "$work/out" >"$work/tiny-pareto-$solver.txt"
done
check "tiny demands: the curve has its three points" \
    [ "$(wc -l <"$work/tiny-pareto-fast.txt")" -eq 3 ]
check "tiny demands: fast's curve is lp_solve's" \
    cmp -s "$work/tiny-pareto-fast.txt" "$work/tiny-pareto-lp_solve.txt"

# Megatron's 530B layout (35 ranks x 3 stages, 35 microbatches, equal layer
# times; tf-study's 530b.json with a cap of 0.8): CLP with its default
# tolerance, 1e-7 per row, planned a batch time 2.2e-8 relative above the
# optimum, 13537/45 ms as the fast solver finds it (every time a multiple of
# 1/45 ms), and froze less than its 22715/9.
equal="$src/tests/planner/regressions/interleaved-35x3-equal-times.profile.json"
expect_status 0 "530B layout: clp" "$TF_PLAN" "$equal" --solver clp -q -o "$work/equal.json"
check "530B layout: clp's plan is the optimum" python3 -c '
import json, sys
plan = json.load(open(sys.argv[1]))
batch, total = plan["batch_ms"]["planned"], sum(a["freeze_ratio"] for a in plan["actions"])
assert abs(batch - 13537 / 45) <= 1e-9 * batch, batch
assert abs(total - 22715 / 9) <= 1e-6, total' "$work/equal.json"

# --help documents the option.
expect_status 0 "--help" "$TF_PLAN" --help
expect_stdout "--help lacks --solver" '--solver NAME'

# Unknown or missing solver: usage errors naming the flag and the value,
# and an existing plan left as it was.
printf 'precious' >"$work/plan.json"
expect_refused_with 2 "unknown solver" '--solver: expected auto, lp_solve, clp or fast, got "bogus"' \
    "$work/plan.json" -- "$TF_PLAN" "$trace" --solver bogus -o "$work/plan.json"
# (-o after --solver would be taken as its value.)
expect_status 2 "solver without value" "$TF_PLAN" "$trace" --solver
expect_stderr "solver without value" '--solver: missing value'

finish "tf-plan --solver"
