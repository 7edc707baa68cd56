#!/usr/bin/env bash
# tf-plan --solver: lp_solve and fast must give the same plan (batch time
# within 1e-9 relative, total freeze within 1e-6) on every bundled trace,
# the plan and the summary must name the solver that ran, auto must pick one
# and say so, and an unknown solver is a usage error that writes nothing.
# Run by ctest with TF_PLAN and TF_SOURCE_DIR set.
set -u
plan_bin=${TF_PLAN:?}
src=${TF_SOURCE_DIR:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect_error NAME EXIT_CODE MESSAGE_PART ARGS...: as in tf_plan.sh: exit
# code, message on stderr, existing plan untouched, no temporary file left.
expect_error() {
  local name=$1 code=$2 part=$3
  shift 3
  printf 'precious' > "$work/plan.json"
  "$plan_bin" "$@" -o "$work/plan.json" > "$work/out" 2> "$work/err"
  local rc=$?
  if [ "$rc" -ne "$code" ]; then bad "$name: exit $rc, expected $code"; cat "$work/err"; return; fi
  if ! grep -qF -- "$part" "$work/err"; then bad "$name: stderr lacks '$part':"; cat "$work/err"; return; fi
  if [ "$(cat "$work/plan.json")" != precious ]; then bad "$name: existing plan overwritten"; return; fi
  if ls "$work"/plan.json.* > /dev/null 2>&1; then bad "$name: temporary file left"; return; fi
  ok
}

# compare LP_PLAN FAST_PLAN: same batch time and total freeze, each plan
# names its solver (and lp_solve's plan its version).
compare() {
  python3 - "$1" "$2" <<'PY'
import json, re, sys
lp, fast = (json.load(open(p)) for p in sys.argv[1:3])
def total(plan):
    return sum(a["freeze_ratio"] for a in plan["actions"])
assert lp["solver"]["name"] == "lp_solve", lp["solver"]
assert lp["solver"]["requested"] == "lp_solve", lp["solver"]
assert re.fullmatch(r"\d+(\.\d+)+", lp["solver"]["version"]), lp["solver"]
assert fast["solver"]["name"] == "fast", fast["solver"]
assert fast["solver"]["requested"] == "fast", fast["solver"]
for plan in (lp, fast):
    assert plan["solver"]["status"] == "optimal", plan["solver"]
t_lp, t_fast = lp["batch_ms"]["planned"], fast["batch_ms"]["planned"]
assert abs(t_fast - t_lp) <= 1e-9 * abs(t_lp), ("batch_ms.planned", t_lp, t_fast)
assert abs(total(fast) - total(lp)) <= 1e-6, ("total freeze", total(lp), total(fast))
PY
}

traces=("$src"/traces/*.profile.json "$src"/traces/examples/*.json)
[ "${#traces[@]}" -ge 6 ] && ok || bad "expected the bundled traces, found ${#traces[@]}"
for trace in "${traces[@]}"; do
  name=$(basename "$trace")
  if "$plan_bin" "$trace" --solver lp_solve -o "$work/lp.json" > "$work/lp.out" 2>&1 &&
     "$plan_bin" "$trace" --solver fast -o "$work/fast.json" > "$work/fast.out" 2>&1; then
    if compare "$work/lp.json" "$work/fast.json"; then ok; else bad "$name: lp_solve and fast differ"; fi
    # The summary names the solver that ran and its time.
    grep -Eq '^solver +lp_solve [0-9.]+: optimal, .* [0-9.]+ s$' "$work/lp.out" && ok ||
      { bad "$name: lp_solve summary"; cat "$work/lp.out"; }
    grep -Eq '^solver +fast [0-9.]+: optimal, .* [0-9.]+ s$' "$work/fast.out" && ok ||
      { bad "$name: fast summary"; cat "$work/fast.out"; }
  else
    bad "$name: a solver failed"; cat "$work/lp.out" "$work/fast.out"
  fi
done

# auto (the default) records what it chose, and the summary says it chose.
trace="$src/traces/examples/zbv-p4-m8.profile.json"
if "$plan_bin" "$trace" -o "$work/auto.json" > "$work/auto.out" 2>&1 &&
   python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["solver"]
assert s["requested"] == "auto" and s["name"] in ("lp_solve", "fast"), s' "$work/auto.json" &&
   grep -Eq '^solver +(lp_solve|fast) [0-9.]+ \(auto\): optimal' "$work/auto.out"
then ok; else bad "--solver auto"; cat "$work/auto.out"; fi
"$plan_bin" "$trace" --solver auto -q -o "$work/auto2.json" &&
  grep -Eq '"requested":[[:space:]]*"auto"' "$work/auto2.json" && ok || bad "explicit --solver auto"

# --help documents the option.
"$plan_bin" --help | grep -q -- '--solver NAME' && ok || bad "--help lacks --solver"

# Unknown or missing solver: usage errors naming the flag and the value.
expect_error "unknown solver" 2 '--solver: unknown solver "bogus" (auto, lp_solve, fast)' \
  "$trace" --solver bogus
# (expect_error adds -o after the arguments, which --solver would take as its value.)
"$plan_bin" "$trace" --solver > "$work/out" 2> "$work/err"
[ $? -eq 2 ] && grep -qF -- '--solver: unknown option or missing value' "$work/err" && ok ||
  { bad "solver without value"; cat "$work/err"; }

echo "tf-plan --solver: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
