#!/usr/bin/env bash
# tf-import's memory fields, from the [memory] events of real traces made
# with profile_memory=True (tests/import/fixtures/pp2-1f1b-mem-*): each
# stage's static and activation bytes equal what trace_memory.py computes
# from the same traces, tf-plan reads them and its peaks follow from them;
# synthetic GPU traces give the bytes put in them; implausible events give
# a note and no memory fields; a broken [memory]
# event is refused; traces without memory events say nothing about memory.
. "$(dirname "$0")/../lib.sh"
need TF_IMPORT TF_PLAN TF_SOURCE_DIR

here=$TF_SOURCE_DIR/tests/import
fx=$here/fixtures
m0=$fx/pp2-1f1b-mem-rank0.json.gz
m1=$fx/pp2-1f1b-mem-rank1.json.gz
mf0=$fx/pp2-1f1b-mem-frozen-rank0.json.gz
mf1=$fx/pp2-1f1b-mem-frozen-rank1.json.gz

# same_bytes PROFILE WANT: every stage's byte fields equal WANT's.
same_bytes() {
    python3 - "$1" "$2" <<'PY'
import json, sys
stages = json.load(open(sys.argv[1]))["stages"]
want = json.load(open(sys.argv[2]))
assert len(stages) == len(want), (len(stages), sorted(want))
for s, fields in want.items():
    for key, value in fields.items():
        got = stages[int(s)][key]
        assert abs(got - value) <= 1e-9 * max(1, value), (s, key, got, value)
    # Not measured: a full backward leaves no weight-gradient bytes, so
    # the default (activation_bytes) stands.
    assert stages[int(s)]["weight_grad_bytes"] == stages[int(s)]["activation_bytes"]
PY
}

python3 "$here/trace_memory.py" "$m0" "$m1" --frozen "$mf0" "$mf1" > "$work/want.json"
expect_status 0 "memory traces import" "$TF_IMPORT" "$m0" "$m1" --frozen "$mf0" "$mf1" \
    -o "$work/p.json"
expect_stderr "memory: said where it comes from" "memory: from the [memory] events"
expect_stderr "memory: the CPU's count said" "measured on the CPU"
check "memory: the stages' bytes are the traces' medians" same_bytes "$work/p.json" \
    "$work/want.json"

# tf-plan reads them: 1F1B on 2 ranks holds two forwards at once on rank 0
# and one on rank 1 before any backward, so unfrozen peaks are static + 2A
# and static + A.
expect_status 0 "tf-plan plans the profile with memory" "$TF_PLAN" "$work/p.json" \
    -o "$work/plan.json"
expect_stdout "tf-plan reports the peaks" "peak GiB per rank"
check "plan: peaks follow from the imported bytes" python3 - "$work/plan.json" \
    "$work/want.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))
for rank, held in ((0, 2), (1, 1)):
    w = want[str(rank)]
    r = plan["per_rank"][rank]
    expect = w["static_bytes"] + held * w["activation_bytes"]
    assert r["static_bytes"] == w["static_bytes"], (rank, r["static_bytes"])
    assert abs(r["peak_bytes"]["unfrozen"] - expect) <= 1e-6 * expect, (rank, r, expect)
PY

# Without --frozen: activation_frozen_bytes is left at activation_bytes.
expect_status 0 "memory traces without --frozen" "$TF_IMPORT" "$m0" "$m1" -o "$work/nf.json"
check "no --frozen: no frozen saving" python3 -c '
import json, sys
for s in json.load(open(sys.argv[1]))["stages"]:
    assert s["activation_frozen_bytes"] == s["activation_bytes"], s
' "$work/nf.json"

# Hand-made: a free of 1 TB inside every forward of stage 0 (a total that
# cannot be) makes its activation growth negative: a note, no memory fields.
# An allocation of 1 TB in each, larger than any total the trace records,
# likewise.
python3 - "$m0" "$work/bad0.json" "$work/nomem1.json" "$m1" "$work/badbytes0.json" \
    "$work/huge0.json" <<'PY'
import gzip, json, sys
doc = json.loads(gzip.open(sys.argv[1]).read())
def with_forward_events(nbytes):
    extra = [dict(e, name="[memory]", ph="i", cat="cpu_instant_event", ts=e["ts"] + 1,
                  args={"Bytes": nbytes, "Total Allocated": 0, "Device Type": 0,
                        "Device Id": -1, "Addr": 1})
             for e in doc["traceEvents"]
             if e.get("ph") == "X" and e.get("name", "").startswith("PP:0F")]
    for e in extra:
        e.pop("dur", None)
    return dict(doc, traceEvents=doc["traceEvents"] + extra)
json.dump(with_forward_events(-10**12), open(sys.argv[2], "w"))
json.dump(with_forward_events(10**12), open(sys.argv[6], "w"))
other = json.loads(gzip.open(sys.argv[4]).read())
other["traceEvents"] = [e for e in other["traceEvents"] if e.get("name") != "[memory]"]
json.dump(other, open(sys.argv[3], "w"))
bad = next(e for e in doc["traceEvents"] if e.get("name") == "[memory]")
bad["args"]["Bytes"] = "many"
json.dump(doc, open(sys.argv[5], "w"))
PY
expect_status 0 "implausible memory events import" "$TF_IMPORT" "$work/bad0.json" "$m1" \
    -o "$work/bad.json"
expect_stderr "implausible: the note names the stage" "stage 0's activation_bytes would be"
check "implausible: no memory fields" python3 -c '
import json, sys
for s in json.load(open(sys.argv[1]))["stages"]:
    assert "static_bytes" not in s and "activation_bytes" not in s, s
' "$work/bad.json"

expect_status 0 "a growth above every total imports" "$TF_IMPORT" "$work/huge0.json" "$m1" \
    -o "$work/huge.json"
expect_stderr "a growth above every total: the note" "stage 0's activation_bytes would be 1000000"
check "a growth above every total: no memory fields" lacks activation_bytes "$work/huge.json"

expect_status 0 "one trace without memory events" "$TF_IMPORT" "$m0" "$work/nomem1.json" \
    -o "$work/half.json"
expect_stderr "one trace without memory events: said" "only 1 of the 2 traces hold [memory]"
check "one trace without memory events: no memory fields" lacks activation_bytes "$work/half.json"

echo '{}' > "$work/keep.json"
expect_refused_with 1 "a [memory] event with a bad Bytes" "args.Bytes: expected a number" \
    "$work/keep.json" -- "$TF_IMPORT" "$work/badbytes0.json" "$m1" -o "$work/keep.json"

# Synthetic GPU traces with known answers (make_traces.py): the GPU's events
# are used, the CPU's small ones beside them ignored.
mkdir -p "$work/gen"
python3 "$here/make_traces.py" "$fx" "$work/gen" || fail "make_traces.py"
expect_status 0 "synthetic GPU memory traces import" "$TF_IMPORT" \
    "$work/gen/kineto-mem-rank0.json" "$work/gen/kineto-mem-rank1.json" -o "$work/k.json"
check "GPU memory: the bytes make_traces.py put in" python3 -c '
import json, sys
got = [(s["static_bytes"], s["activation_bytes"]) for s in json.load(open(sys.argv[1]))["stages"]]
assert got == [(3e9, 5e7), (2e9, 7e7)], got
' "$work/k.json"
check "GPU memory: no CPU warning" lacks "measured on the CPU" "$work/err"

# Split backwards: what an I leaves for its W is the forward's bytes plus
# the I's growth (make_traces.py: MEM_ACT + MEM_WG_NEW - MEM_I_FREES).
expect_status 0 "synthetic split-backward memory traces import" "$TF_IMPORT" \
    "$work/gen/kineto-split-mem-rank0.json" "$work/gen/kineto-split-mem-rank1.json" \
    -o "$work/split.json"
check "split: weight_grad_bytes from the I" python3 -c '
import json, sys
got = [(s["activation_bytes"], s["weight_grad_bytes"])
       for s in json.load(open(sys.argv[1]))["stages"]]
assert got == [(5e7, 3.8e7), (7e7, 4.9e7)], got
' "$work/split.json"
expect_status 0 "tf-plan plans the split profile with memory" "$TF_PLAN" "$work/split.json" \
    -o "$work/split-plan.json"

# The traces without memory events import as before, saying nothing of memory.
expect_status 0 "traces without memory events" "$TF_IMPORT" "$fx/pp2-1f1b-rank0.json" \
    "$fx/pp2-1f1b-rank1.json.gz" -o "$work/plain.json"
check "no memory events: no memory note" lacks "memory:" "$work/err"
check "no memory events: no memory fields" lacks activation_bytes "$work/plain.json"

finish "tf-import memory"
