#!/usr/bin/env bash
# tf-import on large traces generated here (make_large.py; none is
# committed): many profiler steps, a step over the planner's action limit,
# many receives, and memory running out.  What is asserted is the answer
# and the message; the times are docs/results.md's, measured by hand
# (no timing assertion here: the test's timeout only stops a hang).
. "$(dirname "$0")/../lib.sh"
need TF_IMPORT TF_SOURCE_DIR

gen=$TF_SOURCE_DIR/tests/import/make_large.py
out=$work/existing.json
printf 'precious\n' > "$out"

# 160,000 steps of 0F0 (3 us) and 0B0 (3 us): every median is 3 us.
python3 "$gen" steps 160000 "$work/steps.json" || fail "make_large.py steps"
expect_status 0 "160,000 steps" "$TF_IMPORT" "$work/steps.json" -o "$work/steps.profile.json"
expect_stderr "160,000 steps: all used" "160000 steps (ProfilerStep#0 to ProfilerStep#159999)"
check "160,000 steps: F and B are 0.003 ms" python3 -c "import json,sys
p = json.load(open(sys.argv[1]))
assert [(a['type'], a['ms']) for a in p['actions']] == [('F', 0.003), ('B', 0.003)], p['actions']" \
    "$work/steps.profile.json"

# 262,144 actions in one step: refused at the first action past the
# planner's 131,072, while counting.
python3 "$gen" actions 262144 "$work/actions.json" || fail "make_large.py actions"
expect_refused "262,144 actions in a step" \
    "ProfilerStep#0 holds more than 131072 actions, the most the planner accepts in one step (event 131073)" \
    "$out" -- "$TF_IMPORT" "$work/actions.json" -o "$out"

# 100,000 receive spans, each lasting to the end of its step (so each
# holds every later receive of the step): every wait is found.
python3 "$gen" receives 100000 "$work/recv" || fail "make_large.py receives"
expect_status 0 "100,000 receive spans" "$TF_IMPORT" "$work/recv-rank0.json" \
    "$work/recv-rank1.json" -o "$work/recv.profile.json"
expect_stderr "100,000 receives: every wait taken off" \
    "100000 action spans started before their input arrived"
expect_stderr "100,000 receives: 4 steps of GPipe" "12500 microbatches, schedule GPipe; 4 steps"

# Out of memory (a 16 MB address space) is said as such, and nothing is
# written.  Sanitizers reserve terabytes of address space: not there.
if [ -n "${TF_IMPORT_SANITIZED:-}" ]; then
    echo "skipped: out of memory under a sanitizer"
else
    expect_refused "out of memory" "steps.json: out of memory" "$out" -- \
        bash -c 'ulimit -v 16000 && exec "$@"' sh "$TF_IMPORT" "$work/steps.json" -o "$out"
fi

finish "tf-import large"
