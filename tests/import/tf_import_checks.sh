#!/usr/bin/env bash
# tf-import accepts only what tf-plan can plan truthfully: each way a set of
# traces can fail to be one run (make_bad_runs.py writes one of each) is
# refused with a message naming the files, and an existing profile is left
# as it was; what can be corrected (rank files out of order) is, and the
# lag of traces without a shared clock equals trace_lag.py's independent
# reading of them.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/traces.sh"
python3 "$here/make_bad_runs.py" "$gen" || { fail "make_bad_runs.py"; finish "tf-import checks"; }
out=$work/existing.json
printf 'precious\n' > "$out"
hint="the traces look like different runs, or their clocks are not synchronised"

# 1. Orders that deadlock: refused before anything is written, naming the
# step, the traces and the cycle; tf-plan plans the run they came from.
expect_refused "B before its F" "the order the traces ran in ProfilerStep#1 deadlocks" "$out" -- \
    "$TF_IMPORT" "$gen/1f1b-rank0.json" "$gen/b-before-f-rank1.json" -o "$out"
expect_stderr "B before its F: the trace and the cycle" \
    "b-before-f-rank1.json): these actions wait on each other in a cycle: 1B0(rank 1) -> 1F0(rank 1) -> 1B0(rank 1)"
expect_refused "F1 before F0" "0F1(rank 0) -> 0F0(rank 0) -> 0F1(rank 0)" "$out" -- \
    "$TF_IMPORT" "$gen/f1-before-f0-rank0.json" "$gen/1f1b-rank1.json" -o "$out"
expect_refused "ranks of two runs (1F1B and GPipe)" "deadlocks" "$out" -- \
    "$TF_IMPORT" "$gen/1f1b-rank0.json" "$gen/gpipe-rank1.json" -o "$out"
expect_stderr "two runs: both traces named" "1f1b-rank0.json, $gen/gpipe-rank1.json"

# 2. Clocks that disagree with the data the ranks exchange: an error that
# names both traces (never the output), not a lag.
expect_refused "clocks an hour apart" "do not overlap in time (they are 3599.98 s apart" "$out" -- \
    "$TF_IMPORT" "$gen/kineto-rank0.json" "$gen/hour-rank1.json" -o "$out"
expect_stderr "an hour apart: why" "$hint"
expect_refused "clocks 5 ms apart" "kineto-rank0.json's PP:0B0 (rank 0) starts computing 4.75 ms before" \
    "$out" -- "$TF_IMPORT" "$gen/kineto-rank0.json" "$gen/5ms-rank1.json" -o "$out"
expect_stderr "5 ms apart: the sender named" "5ms-rank1.json's PP:1B0 (rank 1), whose output it takes"
expect_refused "clocks ten hours apart" "they are 36000 s apart" "$out" -- \
    "$TF_IMPORT" "$gen/kineto-rank0.json" "$gen/10h-rank1.json" -o "$out"
check "ten hours apart: the output is not named" lacks "$out" "$work/err"
expect_status 0 "--p2p-ms imports unsynchronised clocks" "$TF_IMPORT" "$gen/kineto-rank0.json" \
    "$gen/5ms-rank1.json" --p2p-ms 0.25 -o "$work/forced.json"
expect_stderr "--p2p-ms said" "p2p_ms = 0.25, as given by --p2p-ms"
check "--p2p-ms: the lag written" python3 -c \
    "import json,sys; assert json.load(open(sys.argv[1]))['p2p_ms'] == 0.25" "$work/forced.json"

# Legacy traces have no shared clock, but their messages still tell two
# runs apart: rank 0 of the trained run with rank 1 of the frozen one.
expect_refused "legacy ranks of two runs" "no offset between them puts every action after the data it takes" \
    "$out" -- "$TF_IMPORT" "$r0" "$f1" -o "$out"
expect_stderr "legacy ranks of two runs: both named" "$f1's PP:1B0 (rank 1), whose output it takes"

# 3. Infinite clocks never reach a file.
for which in inf neg-inf; do
    expect_refused "baseTimeNanoseconds $which" \
        "$which-rank1.json: baseTimeNanoseconds: expected a time in nanoseconds" "$out" -- \
        "$TF_IMPORT" "$gen/kineto-rank0.json" "$gen/$which-rank1.json" -o "$out"
done

# A lag that is a third of the step: refused as implausible, imported
# with --p2p-ms when it is what the user means.
expect_refused "a lag of a third of the step" "p2p_ms would be 5 ms, 13% of a step" "$out" -- \
    "$TF_IMPORT" "$gen/slow-rank0.json" "$gen/slow-rank1.json" -o "$out"
expect_status 0 "the slow run with --p2p-ms 5" "$TF_IMPORT" "$gen/slow-rank0.json" \
    "$gen/slow-rank1.json" --p2p-ms 5 -o "$work/slow.json"
expect_status 0 "tf-plan plans the slow run" "$TF_PLAN" "$work/slow.json" -q -o "$work/slow-plan.json"

# 4. Two actions of one rank at once.
expect_refused "overlapping spans" "overlap-rank0.json: event 6 \"PP:0F1\" (500.000 to 1500.000 us) overlaps event 3 \"PP:0F0\"" \
    "$out" -- "$TF_IMPORT" "$gen/overlap-rank0.json" "$gen/kineto-rank1.json" -o "$out"

# 5. Rank files out of order are put in order by the stages they run: the
# profile is the one the files in order give.
expect_status 0 "ranks in order" "$TF_IMPORT" "$r0" "$r1" -q -o "$work/in-order.json"
expect_status 0 "ranks reversed" "$TF_IMPORT" "$r1" "$r0" -o "$work/reversed.json"
expect_stderr "reversed: said" "the traces were not given in rank order: rank 0 is $r0"
expect_stderr "reversed: the schedule found" "schedule 1F1B"
check "reversed: the same profile" cmp -s "$work/in-order.json" "$work/reversed.json"
expect_refused "a trace given twice" "$r0 is given twice" "$out" -- \
    "$TF_IMPORT" "$r0" "$r0" -o "$out"
expect_refused "a trace copied under another name" "hold the same events: one rank's trace given twice" \
    "$out" -- "$TF_IMPORT" "$gen/kineto-rank0.json" "$gen/copy-rank0.json" -o "$out"
expect_refused "the run given as its frozen run" "--frozen $r0 is also given as a trace of the run measured" \
    "$out" -- "$TF_IMPORT" "$r0" "$r1" --frozen "$r0" "$f1" -o "$out"
expect_status 0 "the real frozen run" "$TF_IMPORT" "$r0" "$r1" --frozen "$f0" "$f1" -q \
    -o "$work/real-frozen.json"
check "the real frozen run: no doubt about it" lacks "was every parameter frozen" "$work/err"
expect_status 0 "another run as the frozen run" "$TF_IMPORT" "$gen/1f1b-rank0.json" \
    "$gen/1f1b-rank1.json" --frozen "$gen/1f1b-again-rank1.json" "$gen/1f1b-again-rank0.json" \
    -q -o "$work/frozen.json"
expect_stderr "another run as the frozen run: its backwards are no shorter" \
    "warning: the --frozen run's B and W take 100% of the run's: was every parameter frozen in it?"
expect_refused "a frozen run whose clocks disagree" \
    "--frozen ProfilerStep#5: $gen/kineto-rank0.json's PP:0B0 (rank 0) starts computing" "$out" -- \
    "$TF_IMPORT" "$gen/1f1b-rank0.json" "$gen/1f1b-rank1.json" \
    --frozen "$gen/kineto-rank0.json" "$gen/5ms-rank1.json" -o "$out"
expect_refused "a copy of the run as its frozen run" "--frozen $gen/copy-rank0.json holds the same events as" \
    "$out" -- "$TF_IMPORT" "$gen/kineto-rank0.json" "$gen/kineto-rank1.json" \
    --frozen "$gen/copy-rank0.json" "$gen/kineto-rank1.json.gz" -o "$out"

# Traces without a shared clock: aligned by their messages, the lag equals
# an independent computation of it.
for run in "$r0 $r1" "$f0 $f1"; do
    # shellcheck disable=SC2086 # two paths
    want=$(python3 "$here/trace_lag.py" $run)
    # shellcheck disable=SC2086
    expect_status 0 "legacy lag: $run" "$TF_IMPORT" $run -q -o "$work/lag.json"
    check "legacy lag: $want ms" python3 -c "import json,sys
got = json.load(open(sys.argv[1]))['p2p_ms']
assert abs(got - float(sys.argv[2])) <= 1e-9 and got > 0, (got, sys.argv[2])" \
        "$work/lag.json" "$want"
done

# A pipe is refused by name (a trace is opened twice: for its kind, and to
# place an error).
expect_refused "a pipe" "not a regular file (a pipe or a device)" "$out" -- \
    bash -c '"$1" <(cat "$2") "$3" -o "$4"' sh "$TF_IMPORT" "$r0" "$r1" "$out"

# --p2p-ms is checked like every number of the option layer; -o may not
# name a trace.
for bad in -1 nan abc 1e8; do
    expect_status 2 "--p2p-ms $bad" "$TF_IMPORT" "$r0" "$r1" --p2p-ms "$bad" -o "$out"
done
expect_stderr "--p2p-ms: the range said" "--p2p-ms: expected"
cp "$r0" "$work/r0.json"
expect_refused_with 2 "-o naming a trace" "are the same file" "$work/r0.json" -- \
    "$TF_IMPORT" "$work/r0.json" "$r1" -o "$work/r0.json"
check "refusals leave the output" grep -qx precious "$out"

finish "tf-import checks"
