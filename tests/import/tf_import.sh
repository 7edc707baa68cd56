#!/usr/bin/env bash
# tf-import on real torch.profiler traces (tests/import/fixtures) and on
# synthetic Kineto traces with known answers: every action's time equals
# the median computed from the trace's own events by trace_medians.py,
# tf-plan plans the result, and every kind of bad input is refused with a
# message naming the file and value, leaving an existing profile untouched.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/traces.sh"

# compare PROFILE UNFROZEN_MEDIANS [FROZEN_MEDIANS|defaults]: every action's
# ms (and B's frozen_ms) equals the independent medians.
compare() {
    python3 - "$@" <<'PY'
import json, sys
profile = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))
frozen = None if sys.argv[3] == "defaults" else json.load(open(sys.argv[3]))
cells = {f"{a['stage']}{a['type']}{a['microbatch']}": a for a in profile["actions"]}
assert set(cells) == set(want), (sorted(cells), sorted(want))
for cell, a in cells.items():
    assert abs(a["ms"] - want[cell]) <= 1e-9 * max(1, want[cell]), (cell, a["ms"], want[cell])
    if a["type"] in "BW":
        expect = (want[cell] * (0.5 if a["type"] == "B" else 0.01) if frozen is None
                  else min(frozen[cell], want[cell]))
        assert abs(a["frozen_ms"] - expect) <= 1e-9 * max(1, expect), (cell, a, expect)
PY
}

# The real fixtures, with their frozen run: medians match (F and I over
# both runs), tf-plan plans.
python3 "$here/trace_medians.py" "$r0" "$r1" > "$work/want.json"
python3 "$here/trace_medians.py" "$r0" "$r1" --frozen "$f0" "$f1" > "$work/want-pooled.json"
python3 "$here/trace_medians.py" "$f0" "$f1" > "$work/want-frozen.json"
expect_status 0 "real traces import" "$TF_IMPORT" "$r0" "$r1" --frozen "$f0" "$f1" \
    -o "$work/profile.json"
expect_stderr "real traces: the order is 1F1B" "schedule 1F1B"
expect_stderr "real traces: no shared clock, aligned by the messages" \
    "the traces share no clock: aligned by their messages"
check "real traces: times are the traces' medians" \
    compare "$work/profile.json" "$work/want-pooled.json" "$work/want-frozen.json"
expect_status 0 "tf-plan plans the imported profile" "$TF_PLAN" "$work/profile.json" \
    -o "$work/plan.json"
expect_stdout "tf-plan's summary" "speedup"

# Without frozen traces: the reference's defaults, and a warning.
expect_status 0 "no --frozen" "$TF_IMPORT" "$r0" "$r1" -o "$work/defaults.json"
expect_stderr "no --frozen warns" "warning: no --frozen traces"
check "defaults: B frozen = 0.5 x B" compare "$work/defaults.json" "$work/want.json" defaults

# DualPipeV: each overlapped pair is one PP:(...)OVERLAP_F_B span, timed whole; the
# order, with its pairs, is PyTorch's DualPipeV; tf-plan plans it, the pair's two
# halves adding up to the pair's time.
expect_status 0 "DualPipeV traces import" "$TF_IMPORT" "$gen/dualpipev-rank0.json" \
    "$gen/dualpipev-rank1.json" -o "$work/dpv.json"
expect_stderr "DualPipeV: the order is DualPipeV" "schedule DualPipeV"
expect_stderr "DualPipeV: pairs said" "6 overlapped pairs (OVERLAP_F_B) timed as one span each"
expect_stderr "DualPipeV: a stage whose B all pair up" "1 stage has no full backward of its own"
check "DualPipeV: lone actions and pairs are the traces' medians" python3 - "$work/dpv.json" \
    "$gen/dualpipev-expected.json" <<'PY'
import json, sys
profile, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert profile["schedule"] == "DualPipeV", profile["schedule"]
cells = {f"{a['stage']}{a['type']}{a['microbatch']}": a["ms"] for a in profile["actions"]}
assert set(cells) == set(want["actions"]), (sorted(cells), sorted(want["actions"]))
for cell, ms in cells.items():
    assert abs(ms - want["actions"][cell]) <= 1e-9, (cell, ms)
pairs = {p["pair"]: p for p in profile["pairs"]}
assert set(pairs) == set(want["pairs"]), (sorted(pairs), sorted(want["pairs"]))
for name, p in pairs.items():
    assert abs(p["ms"] - want["pairs"][name]) <= 1e-9, (name, p["ms"])
    assert "frozen_ms" not in p  # no frozen run: the planner's default
PY
expect_status 0 "tf-plan plans the imported DualPipeV profile" "$TF_PLAN" "$work/dpv.json" -q \
    -o "$work/dpv-plan.json"
check "DualPipeV plan: a pair's halves add up to its measured time" python3 - \
    "$work/dpv-plan.json" "$gen/dualpipev-expected.json" <<'PY'
import json, sys
plan, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
acts = plan["actions"]
seen = 0
for a, b in zip(acts, acts[1:]):
    if "pair" in a and a.get("pair") == b.get("pair") and a["type"] == "F":
        assert abs(a["max_ms"] + b["max_ms"] - want["pairs"][a["pair"]]) <= 1e-9, a["pair"]
        assert abs(b["start_ms"] - (a["start_ms"] + a["ms"])) <= 1e-9
        seen += 1
assert seen == 6, seen
PY

# --steps: only ProfilerStep#2..#3.
python3 "$here/trace_medians.py" --steps 2:3 "$r0" "$r1" > "$work/want23.json"
expect_status 0 "--steps 2:3" "$TF_IMPORT" "$r0" "$r1" --steps 2:3 -q -o "$work/p23.json"
check "--steps 2:3: medians of those steps" compare "$work/p23.json" "$work/want23.json" defaults

# Kineto traces: ranks from distributedInfo (given in reverse), GPU side,
# the lag between ranks measured on the shared clock.
expect_status 0 "kineto traces" "$TF_IMPORT" "$gen/kineto-rank1.json.gz" \
    "$gen/kineto-rank0.json" -o "$work/kineto.json"
expect_stderr "kineto: ranks from distributedInfo" "from distributedInfo.rank"
expect_stderr "kineto: GPU-side annotations" "GPU-side annotations"
check "kineto: known times and lag" python3 - "$work/kineto.json" "$gen/kineto-expected.json" <<'PY'
import json, sys
p, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert abs(p["p2p_ms"] - e["p2p_ms"]) < 1e-6, p["p2p_ms"]
for a in p["actions"]:
    cell = f"{a['stage']}{a['type']}{a['microbatch']}"
    assert abs(a["ms"] - e["actions"][cell]) < 1e-9, (cell, a["ms"])
    assert a["rank"] == a["stage"]
PY
expect_status 0 "tf-plan plans the kineto profile" "$TF_PLAN" "$work/kineto.json" -q \
    -o "$work/kplan.json"

# Bad input: exit 1 (2 for usage), a message naming the problem, and the
# existing profile left as it was.
out=$work/existing.json
printf 'precious\n' > "$out"
g=$gen
expect_refused "no PP: events" "no-pp.json: no PP: events" "$out" -- \
    "$TF_IMPORT" "$g/no-pp.json" -o "$out"
expect_refused "missing rank (file order)" "missing rank" "$out" -- \
    "$TF_IMPORT" "$r0" -o "$out"
expect_refused "missing rank (world_size)" "missing rank 2" "$out" -- \
    "$TF_IMPORT" "$g/world3-rank0.json" "$g/world3-rank1.json" -o "$out"
expect_refused "two traces of one rank" "both rank 0" "$out" -- \
    "$TF_IMPORT" "$g/kineto-rank0.json" "$g/dup-rank0.json" -o "$out"
expect_refused "action missing from a step" \
    "action PP:0B2 is missing from ProfilerStep#2" "$out" -- \
    "$TF_IMPORT" "$g/missing-step-rank0.json" "$r1" -o "$out"
expect_refused "frozen run lacks an action" "--frozen $g/missing-step-rank0.json" "$out" -- \
    "$TF_IMPORT" "$r0" "$r1" --frozen "$g/missing-step-rank0.json" "$f1" -o "$out"
expect_refused "not a trace (JSON)" "not-a-trace.json: not a trace" "$out" -- \
    "$TF_IMPORT" "$g/not-a-trace.json" -o "$out"
expect_refused "not a trace (text)" "text.json: not a trace: invalid JSON at line 1" "$out" -- \
    "$TF_IMPORT" "$g/text.json" -o "$out"
expect_refused "truncated gzip" "truncated.json.gz: broken gzip data" "$out" -- \
    "$TF_IMPORT" "$r0" "$g/truncated.json.gz" -o "$out"
expect_refused "garbage gzip" "garbage.json.gz: broken gzip data" "$out" -- \
    "$TF_IMPORT" "$r0" "$g/garbage.json.gz" -o "$out"
expect_refused "no such file" "nothing.json: cannot open" "$out" -- \
    "$TF_IMPORT" "$work/nothing.json" -o "$out"
expect_refused "bad event field" "\"PP:0F1\"): dur: expected a number >= 0, got \"abc\"" \
    "$out" -- "$TF_IMPORT" "$g/bad-dur.json" "$g/kineto-rank1.json" -o "$out"
expect_refused "unknown PP: name" "\"PP:0X1\": not an action name" "$out" -- \
    "$TF_IMPORT" "$g/unknown-name.json" "$g/kineto-rank1.json" -o "$out"
expect_refused "malformed overlapped pair" "\"PP:(0F3;0W1)OVERLAP_F_B\": not an action name" \
    "$out" -- "$TF_IMPORT" "$g/overlap.json" "$g/kineto-rank1.json" -o "$out"
expect_refused "--steps outside the traces" "--steps 7:9" "$out" -- \
    "$TF_IMPORT" "$r0" "$r1" --steps 7:9 -o "$out"
expect_refused "frozen traces of another size" "--frozen: 1 traces given" "$out" -- \
    "$TF_IMPORT" "$r0" "$r1" --frozen "$f0" -o "$out"

# Usage errors exit 2, output untouched.
for args in "--steps 2-3" "--steps 3:2" "--steps :3" "--steps x:y" "--frozen" "--bogus"; do
    expect_status 2 "usage: $args" "$TF_IMPORT" "$r0" "$r1" $args -o "$out"
done
expect_status 2 "usage: no -o" "$TF_IMPORT" "$r0" "$r1"
expect_status 2 "usage: no trace" "$TF_IMPORT" -o "$out"
check "usage errors leave the output" grep -qx precious "$out"
expect_status 0 "--help" "$TF_IMPORT" --help
expect_stdout "--help names --frozen" "--frozen TRACE"

finish "tf-import"
