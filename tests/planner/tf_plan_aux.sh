#!/usr/bin/env bash
# tf-plan with aux work in the bubbles: the summary's aux lines, the plan's
# placement checked here from the file (every piece inside a bubble of its
# rank, after its action ends, none overlapping), --compare-aux, and bad
# aux input refused with the plan kept.  Run by ctest with TF_PLAN and
# TF_SOURCE_DIR set.
. "$(dirname "$0")/../lib.sh"
need TF_PLAN TF_SOURCE_DIR
trace=$TF_SOURCE_DIR/traces/examples/1f1b-p4-m8.profile.json

# with_aux IN OUT: IN's stages with K-FAC-like work after F and B and once
# per step, as fractions of each stage's forward time.
with_aux() {
    python3 - "$@" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for s in p["stages"]:
    f = s["forward_ms"]
    s["aux"] = [{"name": "factor_A", "after": "F", "ms": 0.15 * f},
                {"name": "factor_G", "after": "B", "ms": 0.27 * f},
                {"name": "inverse", "after": "step", "ms": 2.6 * f, "divisible": True}]
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
}
with_aux "$trace" "$work/aux.json"

expect_status 0 "aux work" "$TF_PLAN" "$work/aux.json" -o "$work/plan.json"
expect_stdout "aux work" "aux work      placed"
expect_stdout "aux work" "5% of each bubble kept free"
check "aux work: every piece in a bubble of its rank, after it is ready, none overlapping" \
    python3 - "$work/plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
margin = plan["aux"]["margin"]
ends = {}
for a in plan["actions"]:
    ends[(a["rank"], a["type"], a["stage"], a["microbatch"])] = a["start_ms"] + a["ms"]
after = {w["name"]: w["after"] for w in plan["aux"]["work"]}
by_rank = {}
for piece in plan["aux"]["placed"]:
    by_rank.setdefault((piece["rank"], piece["step"]), []).append(piece)
    windows = plan["per_rank"][piece["rank"]]["bubbles"]
    s, e = piece["start_ms"], piece["start_ms"] + piece["ms"]
    assert any(a <= s + 1e-9 and e <= b - margin * (b - a) + 1e-9 for a, b in windows), piece
    kind = after[piece["name"]]
    if piece["step"] == 0 and kind in ("F", "B"):
        ready = ends[(piece["rank"], kind, piece["stage"], piece["microbatch"])]
        assert s >= ready - 1e-9, (piece, ready)
for pieces in by_rank.values():
    pieces.sort(key=lambda x: x["start_ms"])
    for x, y in zip(pieces, pieces[1:]):
        assert x["start_ms"] + x["ms"] <= y["start_ms"] + 1e-9, (x, y)
for r in plan["per_rank"]:
    a = r["aux"]
    assert abs(a["demand_ms"] - a["placed_ms"] - a["spilled_ms"]) < 1e-6
    assert a["placed_ms"] <= a["exact_ms"] + 1e-9
PY

expect_status 0 "--compare-aux" "$TF_PLAN" "$work/aux.json" --compare-aux
expect_stdout "--compare-aux" "no freezing"
expect_stdout "--compare-aux" "as fresh as unfrozen"

# Bad input.
printf 'precious' >"$work/kept.json"
expect_refused_with 2 "--aux-margin 0.7" '--aux-margin: expected a number in [0, 0.5], got "0.7"' \
    "$work/kept.json" -- "$TF_PLAN" "$work/aux.json" --aux-margin 0.7 -o "$work/kept.json"
expect_refused_with 1 "--compare-aux without aux work" "declares no aux work" \
    "$work/kept.json" -- "$TF_PLAN" "$trace" --compare-aux
sed 's/"after": "step"/"after": "steps"/' "$work/aux.json" >"$work/bad.json"
expect_refused_with 1 "an unknown after" \
    '$.stages[0].aux[2].after: expected "F", "B", "W" or "step", got "steps"' \
    "$work/kept.json" -- "$TF_PLAN" "$work/bad.json" -o "$work/kept.json"
finish "tf-plan aux"
