#!/usr/bin/env bash
# Command-line tests of tf-exec: the loop profile -> tf-plan -> train end to
# end, and bad input (plans, data, options) failing cleanly.
# Needs TF_EXEC and TF_PLAN (paths of the programs).
set -u
: "${TF_EXEC:?set TF_EXEC to the tf-exec binary}"
: "${TF_PLAN:?set TF_PLAN to the tf-plan binary}"

work=$(mktemp -d /tmp/tf_exec_cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# A small model keeps the run short on 2 cores, also under ASan.
model=(--layers 2 --hidden 64 --context 32 --microbatch-size 4)

# expect_error NAME NEEDLE ARGS...: tf-exec must exit non-zero (not by a
# signal), print NEEDLE on stderr and leave no output file behind.
expect_error() {
    local name=$1 needle=$2
    shift 2
    "$TF_EXEC" "$@" >"$work/$name.out" 2>"$work/$name.err"
    local rc=$?
    if [ "$rc" -eq 0 ]; then
        fail "$name: exit status 0, expected an error"
    elif [ "$rc" -ge 128 ]; then
        fail "$name: killed by a signal (exit $rc)"; cat "$work/$name.err"
    elif ! grep -qF -- "$needle" "$work/$name.err"; then
        fail "$name: stderr lacks \"$needle\":"; cat "$work/$name.err"
    else
        echo "ok: $name"
    fi
}

# 1. profile -> plan -> train for 60 steps; the loss must fall by > 10%.
if ! "$TF_EXEC" --backend cpu --schedule 1F1B --ranks 2 --microbatches 4 "${model[@]}" \
        --profile-out "$work/profile.json" >"$work/profile.out" 2>&1; then
    fail "profiling"; cat "$work/profile.out"
fi
grep -q '"microbatch_tokens":[[:space:]]*128' "$work/profile.json" || fail "profile lacks microbatch_tokens 128"
grep -q '"parameters"' "$work/profile.json" || fail "profile lacks parameters"
grep -q '"frozen_ms"' "$work/profile.json" || fail "profile lacks per-action frozen times"
if ! "$TF_PLAN" "$work/profile.json" -o "$work/plan.json" >"$work/plan.out" 2>&1; then
    fail "tf-plan on the measured profile"; cat "$work/plan.out"
fi
if ! "$TF_EXEC" --backend cpu --plan "$work/plan.json" --steps 60 "${model[@]}" \
        --log "$work/log.jsonl" --progress lines >"$work/train.out" 2>&1; then
    fail "training with the plan"; cat "$work/train.out"
fi
lines=$(wc -l <"$work/log.jsonl")
[ "$lines" -eq 60 ] || fail "log has $lines lines, expected 60"
for key in step loss batch_ms tokens_per_s freeze_ratio; do
    grep -q "\"$key\": " "$work/log.jsonl" || fail "log lacks $key"
done
first=$(head -1 "$work/log.jsonl" | sed 's/.*"loss": \([0-9.eE+-]*\).*/\1/')
last=$(tail -1 "$work/log.jsonl" | sed 's/.*"loss": \([0-9.eE+-]*\).*/\1/')
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.9 * a) }'; then
    echo "ok: loss fell from $first to $last"
else
    fail "loss did not fall by 10%: $first -> $last"
fi
# Freezing happened after warm-up and ramp, and the summary compares with the plan.
tail -1 "$work/log.jsonl" | grep -q '"phase": "frozen"' || fail "last step not in the frozen phase"
grep -q "planned" "$work/train.out" || fail "summary lacks the planned batch time"
grep -q "final loss" "$work/train.out" || fail "summary lacks the final loss"

# The loop with a split-backward schedule (I and W actions, V-shaped stages).
small=(--layers 4 --hidden 32 --context 16 --microbatch-size 2)
if "$TF_EXEC" --schedule ZBVZeroBubble --ranks 2 --microbatches 4 "${small[@]}" --profile-steps 2 \
        --profile-out "$work/zbv.json" >"$work/zbv.out" 2>&1 &&
    "$TF_PLAN" "$work/zbv.json" -o "$work/zbv-plan.json" >>"$work/zbv.out" 2>&1 &&
    "$TF_EXEC" --plan "$work/zbv-plan.json" --steps 4 --warmup 1 --ramp 1 "${small[@]}" \
        --freeze-select rotate --log "$work/zbv.jsonl" >>"$work/zbv.out" 2>&1; then
    grep -q '"backward_weight_frozen_ms"' "$work/zbv.json" || fail "ZBV profile lacks W times"
    echo "ok: ZBVZeroBubble profile -> plan -> train"
else
    fail "ZBVZeroBubble loop"; cat "$work/zbv.out"
fi

# 2. bad plans and options: clear errors naming the field and value.
expect_error wrong_ranks "ranks = 2, but --ranks 3" --plan "$work/plan.json" --ranks 3 "${model[@]}"
expect_error other_schedule 'schedule = "1F1B", but --schedule GPipe' \
    --plan "$work/plan.json" --schedule GPipe "${model[@]}"
expect_error other_model "microbatch_tokens = 128" --plan "$work/plan.json" --steps 1
expect_error missing_plan "$work/none.json" --plan "$work/none.json"
printf '{"format": "tf-plan", "version": 1, "schedule": ' >"$work/broken.json"
expect_error broken_plan "broken.json" --plan "$work/broken.json"
sed 's/"ranks":[[:space:]]*2,/"ranks": "two",/' "$work/plan.json" >"$work/typed.json"
expect_error wrong_type "ranks" --plan "$work/typed.json" "${model[@]}"
expect_error unreadable_data "--data $work/no-such-file" --plan "$work/plan.json" \
    --data "$work/no-such-file" "${model[@]}"
printf 'abc' >"$work/tiny.txt"
expect_error tiny_data "has 3 bytes" --plan "$work/plan.json" --data "$work/tiny.txt" "${model[@]}"
expect_error unknown_schedule '--schedule "Wavy"' --schedule Wavy --steps 1
expect_error bad_number '--steps "ten"' --steps ten
expect_error too_many_stages "--layers 2" --schedule 1F1B --ranks 4 --steps 1 "${model[@]}"
expect_error unknown_backend '--backend "tpu"' --backend tpu --steps 1
expect_error cpu_nccl_transport '--transport "nccl"' --transport nccl --steps 1 "${model[@]}"
# --help names the cuda backend, and says so when this build has none.
if ! "$TF_EXEC" --help | grep -q -- '--backend cpu|cuda'; then
    fail "--help does not list the cuda backend"
fi
if ! "$TF_EXEC" --help | grep -q -- '--transport cuda|nccl' &&
   ! "$TF_EXEC" --help | grep -q 'cuda: *not built'; then
    fail "--help says neither how to use cuda nor that it was not built"
fi
expect_error rank_failure "rank 1 failed" --schedule 1F1B --ranks 2 --steps 2 "${model[@]}" \
    --inject-failure 1:3
# A failed profiling run leaves no profile behind.
expect_error failed_profile "rank 0 failed" --profile-out "$work/failed.json" "${model[@]}" \
    --inject-failure 0:2
[ ! -e "$work/failed.json" ] || fail "a failed profiling run left $work/failed.json"

# 3. training on a file, resuming from a checkpoint.
head -c 20000 "$TF_EXEC" >"$work/data.bin"
if ! "$TF_EXEC" --schedule GPipe --ranks 2 --microbatches 2 --steps 3 "${model[@]}" \
        --data "$work/data.bin" --checkpoint "$work/ckpt" >"$work/file.out" 2>&1; then
    fail "training on a file"; cat "$work/file.out"
fi
if ! "$TF_EXEC" --schedule GPipe --ranks 2 --microbatches 2 --steps 5 "${model[@]}" \
        --data "$work/data.bin" --checkpoint "$work/ckpt" >"$work/resume.out" 2>&1; then
    fail "resuming"; cat "$work/resume.out"
fi
grep -q "resuming from $work/ckpt at step 3" "$work/resume.out" || fail "did not resume at step 3"

# A run that stopped after its last checkpoint logged steps the resumed run
# repeats: the resumed log keeps one line per step.
"$TF_EXEC" --steps 3 "${model[@]}" --checkpoint "$work/ck2" --log "$work/l.jsonl" >/dev/null 2>&1
printf '{"step": 4, "loss": 99}\n{"step": 5, "loss": 99}\n' >>"$work/l.jsonl"
"$TF_EXEC" --steps 5 "${model[@]}" --checkpoint "$work/ck2" --log "$work/l.jsonl" >/dev/null 2>&1
steps=$(python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["step"]) for l in open(sys.argv[1])))' "$work/l.jsonl")
[ "$steps" = "1 2 3 4 5" ] || fail "resumed log has steps \"$steps\", expected 1 2 3 4 5"
grep -q '"loss": 99' "$work/l.jsonl" && fail "resumed log kept the lines of the lost steps"

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "all tf-exec command-line tests passed"
