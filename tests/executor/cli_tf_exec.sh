#!/usr/bin/env bash
# Command-line tests of tf-exec: the loop profile -> tf-plan -> train end to
# end, and bad input (plans, data, options) failing cleanly.
# Run by ctest with TF_EXEC and TF_PLAN (paths of the programs).
. "$(dirname "$0")/../lib.sh"
need TF_EXEC TF_PLAN

# A small model keeps the run short on 2 cores, also under ASan.
model=(--layers 2 --hidden 64 --context 32 --microbatch-size 4)

# refused NAME NEEDLE ARGS...: tf-exec must exit non-zero (not by a
# signal) and print NEEDLE on stderr.
refused() {
    local name=$1 needle=$2
    shift 2
    expect_refused "$name" "$needle" -- "$TF_EXEC" "$@"
}

# loss_of LINE: the "loss" field of a log line.
loss_of() { sed 's/.*"loss": \([0-9.eE+-]*\).*/\1/' <<<"$1"; }

# lacks NEEDLE FILE: FILE does not contain NEEDLE.

# 1. profile -> plan -> train for 60 steps; the loss must fall by > 10%.
expect_status 0 "profiling" "$TF_EXEC" --backend cpu --schedule 1F1B --ranks 2 --microbatches 4 \
    "${model[@]}" --profile-out "$work/profile.json"
check "profile has microbatch_tokens 128" \
    grep -q '"microbatch_tokens":[[:space:]]*128' "$work/profile.json"
check "profile has parameters" grep -q '"parameters"' "$work/profile.json"
check "profile has per-action frozen times" grep -q '"frozen_ms"' "$work/profile.json"
expect_status 0 "tf-plan on the measured profile" "$TF_PLAN" "$work/profile.json" \
    -o "$work/plan.json"
expect_status 0 "training with the plan" "$TF_EXEC" --backend cpu --plan "$work/plan.json" \
    --steps 60 "${model[@]}" --log "$work/log.jsonl" --progress lines
# The summary compares with the plan.
expect_stdout "summary" "planned"
expect_stdout "summary" "final loss"
lines=$(wc -l <"$work/log.jsonl")
check "log has $lines lines, expected 60" [ "$lines" -eq 60 ]
for key in step loss batch_ms tokens_per_s freeze_ratio; do
    check "log has $key" grep -q "\"$key\": " "$work/log.jsonl"
done
first=$(loss_of "$(head -1 "$work/log.jsonl")")
last=$(loss_of "$(tail -1 "$work/log.jsonl")")
check "loss fell by 10%: $first -> $last" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.9 * a) }'
# Freezing happened after warm-up and ramp.
check "last step in the frozen phase" grep -q '"phase": "frozen"' <(tail -1 "$work/log.jsonl")

# The loop with a split-backward schedule (I and W actions, V-shaped stages).
small=(--layers 4 --hidden 32 --context 16 --microbatch-size 2)
zbv_loop() {
    "$TF_EXEC" --schedule ZBVZeroBubble --ranks 2 --microbatches 4 "${small[@]}" \
        --profile-steps 2 --profile-out "$work/zbv.json" &&
        "$TF_PLAN" "$work/zbv.json" -o "$work/zbv-plan.json" &&
        "$TF_EXEC" --plan "$work/zbv-plan.json" --steps 4 --warmup 1 --ramp 1 "${small[@]}" \
            --freeze-select rotate --log "$work/zbv.jsonl"
}
expect_status 0 "ZBVZeroBubble profile -> plan -> train" zbv_loop
check "ZBV profile has W times" grep -q '"backward_weight_frozen_ms"' "$work/zbv.json"

# DualPipeV: overlapped pairs through the whole loop, and a plan that carries them.
dualpipev_loop() {
    "$TF_EXEC" --schedule DualPipeV --ranks 2 --microbatches 4 "${small[@]}" \
        --profile-steps 2 --profile-out "$work/dpv.json" &&
        "$TF_PLAN" "$work/dpv.json" -o "$work/dpv-plan.json" &&
        "$TF_EXEC" --plan "$work/dpv-plan.json" --steps 3 --warmup 1 --ramp 1 "${small[@]}"
}
expect_status 0 "DualPipeV profile -> plan -> train" dualpipev_loop
check "DualPipeV plan has its pairs" grep -q '"pair":' "$work/dpv-plan.json"

# 2. bad plans and options: clear errors naming the field and value.
refused wrong_ranks "ranks = 2, but --ranks 3" --plan "$work/plan.json" --ranks 3 "${model[@]}"
refused other_schedule 'schedule = "1F1B", but --schedule GPipe' \
    --plan "$work/plan.json" --schedule GPipe "${model[@]}"
refused other_model "microbatch_tokens = 128" --plan "$work/plan.json" --steps 1
refused missing_plan "$work/none.json" --plan "$work/none.json"
printf '{"format": "tf-plan", "version": 1, "schedule": ' >"$work/broken.json"
refused broken_plan "broken.json" --plan "$work/broken.json"
sed 's/"ranks":[[:space:]]*2,/"ranks": "two",/' "$work/plan.json" >"$work/typed.json"
refused wrong_type "ranks" --plan "$work/typed.json" "${model[@]}"
sed '0,/"start_ms"/s//"strat_ms"/' "$work/plan.json" >"$work/typo.json"
refused misspelled_field '$.actions[0].strat_ms: unknown field (did you mean start_ms?)' \
    --plan "$work/typo.json" "${model[@]}"
refused unreadable_data "--data $work/no-such-file" --plan "$work/plan.json" \
    --data "$work/no-such-file" "${model[@]}"
printf 'abc' >"$work/tiny.txt"
refused tiny_data "has 3 bytes" --plan "$work/plan.json" --data "$work/tiny.txt" "${model[@]}"
# A bad command line is a usage error (exit 2) that says what was wrong with it.
usage_error() {
    local name=$1 needle=$2
    shift 2
    expect_refused_with 2 "$name" "$needle" -- "$TF_EXEC" "$@"
}
usage_error unknown_schedule '--schedule: expected a built-in schedule (GPipe 1F1B' \
    --schedule Wavy --steps 1
usage_error bad_number '--steps: expected an integer in [1, 2147483646], got "ten"' --steps ten
usage_error no_steps '--steps: expected an integer in [1, 2147483646], got "0"' --steps 0
usage_error nothing_to_do 'nothing to do: give --steps N to train, --plan FILE, --auto-plan, --profile-out FILE or --write-source FILE' \
    "${model[@]}"
expect_status 2 "no arguments" "$TF_EXEC"
check "no arguments: the usage on stderr" grep -q '^usage: tf-exec --steps N' "$work/err"
check "no arguments: nothing trained" [ ! -s "$work/out" ]
refused too_many_stages "--layers 2" --schedule 1F1B --ranks 4 --steps 1 "${model[@]}"
usage_error unknown_backend '--backend "tpu"' --backend tpu --steps 1
usage_error cpu_nccl_transport '--transport "nccl"' --transport nccl --steps 1 "${model[@]}"
# --help names the cuda backend, and says so when this build has none.
expect_status 0 "--help" "$TF_EXEC" --help
expect_stdout "--help lists the cuda backend" '--backend cpu|cuda'
check "--help says whether this build has the cuda backend" \
    grep -q -e '^cuda backend: in this build' -e '^cuda backend: not built' "$work/out"
refused rank_failure "rank 1 failed" --schedule 1F1B --ranks 2 --steps 2 "${model[@]}" \
    --inject-failure 1:3
# A failed profiling run leaves no profile behind.
refused failed_profile "rank 0 failed" --profile-out "$work/failed.json" "${model[@]}" \
    --inject-failure 0:2
check "a failed profiling run left no $work/failed.json" [ ! -e "$work/failed.json" ]

# 3. training on a file, resuming from a checkpoint.
head -c 20000 "$TF_EXEC" >"$work/data.bin"
on_file=(--schedule GPipe --ranks 2 --microbatches 2 "${model[@]}" --data "$work/data.bin"
         --checkpoint "$work/ckpt")
expect_status 0 "training on a file" "$TF_EXEC" --steps 3 "${on_file[@]}"
expect_status 0 "resuming" "$TF_EXEC" --steps 5 "${on_file[@]}"
expect_stdout "resuming at step 3" "resuming from $work/ckpt at step 3"

# A run that stopped after its last checkpoint logged steps the resumed run
# repeats: the resumed log keeps one line per step.
run "$TF_EXEC" --steps 3 "${model[@]}" --checkpoint "$work/ck2" --log "$work/l.jsonl"
printf '{"step": 4, "loss": 99}\n{"step": 5, "loss": 99}\n' >>"$work/l.jsonl"
run "$TF_EXEC" --steps 5 "${model[@]}" --checkpoint "$work/ck2" --log "$work/l.jsonl"
steps=$(python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["step"]) for l in open(sys.argv[1])))' "$work/l.jsonl")
check "resumed log has steps \"$steps\", expected 1 2 3 4 5" [ "$steps" = "1 2 3 4 5" ]
check "resumed log dropped the lines of the lost steps" lacks '"loss": 99' "$work/l.jsonl"

# The log loses nothing: a run that fails before its first step leaves an
# old log as it was; a log that cannot be written (a full disk) fails the
# run with the reason, at the first line or later; a typo fails at once.
printf '{"step": 1, "loss": 7}\n' >"$work/old.jsonl"
expect_refused "a failed run's --log" "injected failure" "$work/old.jsonl" -- \
    "$TF_EXEC" --steps 3 "${model[@]}" --log "$work/old.jsonl" --inject-failure 0:2
expect_refused "--log /dev/full" "--log /dev/full: cannot write" -- \
    "$TF_EXEC" --steps 2 "${model[@]}" --log /dev/full
expect_refused "--log in a missing folder" "--log $work/none/l.jsonl: cannot write there" -- \
    "$TF_EXEC" --steps 2 "${model[@]}" --log "$work/none/l.jsonl"
# Endless inputs are refused at their limits: --data and a checkpoint on /dev/zero.
expect_refused "--data /dev/zero" "/dev/zero: larger than the 1024 MiB limit" -- \
    "$TF_EXEC" --steps 1 "${model[@]}" --data /dev/zero
mkdir -p "$work/zero-ckpt"
ln -s /dev/zero "$work/zero-ckpt/tf-exec.ckpt"
expect_refused "a checkpoint on /dev/zero" "tf-exec.ckpt: larger than the" -- \
    "$TF_EXEC" --steps 1 "${model[@]}" --checkpoint "$work/zero-ckpt"
expect_refused "--init from /dev/zero" "tf-exec.ckpt: larger than the" -- \
    "$TF_EXEC" --steps 1 "${model[@]}" --init "$work/zero-ckpt"
# A disk that fills after the first lines: files over 1 KiB fail with EFBIG.
run bash -c 'trap "" XFSZ; ulimit -f 1; exec "$@" >/dev/null' sh "$TF_EXEC" --steps 40 \
    "${model[@]}" --log "$work/full.jsonl" --progress lines
check "a log that fills up mid-run: exit status $rc, expected 1" [ "$rc" -eq 1 ]
expect_stderr "a log that fills up mid-run" "--log $work/full.jsonl: cannot write: File too large"

# 4. The model uses context: on the built-in source (order 2) the loss goes
# well below the best bigram, which no model of the current byte alone can
# reach.  Floor and bigram are exact (corpus.h).  A small model and lr
# that cross it in about 120 steps; 200 leave a margin (also under ASan).
expect_status 0 "training on the built-in source" "$TF_EXEC" --schedule 1F1B --ranks 2 \
    --microbatches 4 --layers 2 --hidden 64 --context 32 --microbatch-size 8 --steps 200 \
    --no-freeze --eval-every 50 --eval-batches 2 --log "$work/ctx.jsonl" --progress lines
expect_stdout "summary names the floor and the best bigram" "entropy floor"
expect_stdout "summary prints GFLOP/s" "GFLOP/s"
bigram=$(sed -n 's/.*best bigram \([0-9.]*\).*/\1/p' "$work/out")
val=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["val_loss"])' \
    "$work/ctx.jsonl")
check "validation loss $val below the best bigram $bigram by 0.3 nats" \
    awk -v v="$val" -v b="$bigram" 'BEGIN { exit !(v < b - 0.3) }'
evals=$(grep -c '"val_loss"' "$work/ctx.jsonl")
check "4 evaluations logged (every 50 steps), got $evals" [ "$evals" -eq 4 ]
phases=$(grep -c '"phase": "unfrozen"' "$work/ctx.jsonl")
check "a --no-freeze run is unfrozen in all 200 steps, got $phases" [ "$phases" -eq 200 ]

# 5. Fine-tuning: pretrain on base, start from that checkpoint on the
# shifted source with another pipeline shape.  The first loss of the
# fine-tune is that of the pretrained model (far below a fresh model's).
small_gpt=(--layers 2 --hidden 32 --context 16)
expect_status 0 "pretraining" "$TF_EXEC" --schedule 1F1B --ranks 2 --microbatches 4 \
    "${small_gpt[@]}" --microbatch-size 4 --steps 40 --no-freeze --checkpoint "$work/pre"
expect_status 0 "fine-tuning with --init, another shape" "$TF_EXEC" --schedule GPipe --ranks 1 \
    --microbatches 2 "${small_gpt[@]}" --microbatch-size 2 --steps 2 --source shifted \
    --init "$work/pre" --log "$work/ft.jsonl"
expect_stdout "--init says where the weights come from" "starting from the weights in $work/pre"
expect_status 0 "a fresh run for comparison" "$TF_EXEC" --schedule GPipe --ranks 1 \
    --microbatches 2 "${small_gpt[@]}" --microbatch-size 2 --steps 2 --source shifted \
    --log "$work/fresh.jsonl"
ft=$(loss_of "$(head -1 "$work/ft.jsonl")")
fresh=$(loss_of "$(head -1 "$work/fresh.jsonl")")
check "fine-tune starts at $ft, below a fresh model's $fresh" \
    awk -v a="$ft" -v b="$fresh" 'BEGIN { exit !(a < b - 1.0) }'
refused init_other_model "hidden = 32, but this run has hidden = 64" --init "$work/pre" \
    --layers 2 --hidden 64 --context 16 --steps 1
refused init_missing "--init $work/nothing: no checkpoint there" --init "$work/nothing" --steps 1
refused heads_not_dividing "--heads 5: --hidden 64 is not a multiple of it" --heads 5 \
    "${model[@]}" --steps 1
usage_error data_and_source "--data and --source: give one of them" --data "$work/data.bin" \
    --source shifted --steps 1
usage_error unknown_source '--source: expected base or shifted, got "other"' --source other \
    "${model[@]}" --steps 1

# 6. --write-source: the built-in bytes in a file, on which --data trains
# exactly as --source does (the same windows, the same held-out part).
expect_status 0 "--write-source" "$TF_EXEC" --write-source "$work/shifted.txt" --source shifted
expect_stdout "--write-source says what it wrote" "wrote $work/shifted.txt: the built-in source shifted"
check "the source is 1 MiB" [ "$(wc -c <"$work/shifted.txt")" -eq 1048576 ]
for how in source data; do
    from=(--source shifted)
    [ "$how" = data ] && from=(--data "$work/shifted.txt")
    run "$TF_EXEC" "${small_gpt[@]}" --microbatch-size 2 --steps 3 --eval-every 1 \
        "${from[@]}" --log "$work/$how.jsonl"
done
strip_timing() { sed 's/"batch_ms.*"freeze_ratio"/"freeze_ratio"/; s/, "forward_ms.*"val_loss"/, "val_loss"/' "$1"; }
check "--data on the written source trains as --source" \
    diff <(strip_timing "$work/source.jsonl") <(strip_timing "$work/data.jsonl")
usage_error write_source_and_data "--write-source and --data: give one of them" \
    --write-source "$work/x.txt" --data "$work/data.bin"

# 7. Memory: the bytes held per rank in the summary and the log; freezing
# that saves memory and recomputation leave every loss as it was, bit for
# bit, while holding less; a profile with the measured bytes plans under a
# limit with recomputation (R actions), which tf-exec runs within it.
# losses FILE: the log's losses, one per line.
losses() { sed 's/.*"loss": \([0-9.eE+-]*\),.*/\1/' "$1"; }
# peak_of FILE RANK: the largest static + peak bytes of RANK in the log.
peak_of() {
    python3 -c 'import json,sys; print(max(json.loads(l)["static_bytes"][int(sys.argv[2])] + json.loads(l)["peak_bytes"][int(sys.argv[2])] for l in open(sys.argv[1])))' "$1" "$2"
}
mem=(--schedule 1F1B --ranks 2 --microbatches 4 "${small[@]}" --steps 3 --warmup 0 --ramp 0)
for arm in plain saving keep full selective; do
    opts=()
    case $arm in
        saving) opts=(--freeze-ratio 0.5) ;;
        keep) opts=(--freeze-ratio 0.5 --no-freeze-memory) ;;
        full | selective) opts=(--recompute "$arm") ;;
    esac
    expect_status 0 "memory arm $arm" "$TF_EXEC" "${mem[@]}" "${opts[@]}" \
        --log "$work/mem-$arm.jsonl" --progress lines
done
expect_stdout "the summary gives each rank's bytes" "memory rank 1: static"
check "the log has peak_bytes" grep -q '"peak_bytes": \[' "$work/mem-plain.jsonl"
check "freezing that saves memory: the same losses" \
    diff <(losses "$work/mem-saving.jsonl") <(losses "$work/mem-keep.jsonl")
check "freezing that saves memory holds less on rank 0" \
    [ "$(peak_of "$work/mem-saving.jsonl" 0)" -lt "$(peak_of "$work/mem-keep.jsonl" 0)" ]
for arm in full selective; do
    check "--recompute $arm: the same losses" \
        diff <(losses "$work/mem-plain.jsonl") <(losses "$work/mem-$arm.jsonl")
    check "--recompute $arm holds less on rank 0" \
        [ "$(peak_of "$work/mem-$arm.jsonl" 0)" -lt "$(peak_of "$work/mem-plain.jsonl" 0)" ]
done
usage_error memory_limit_alone "--memory-limit" --memory-limit 1GiB "${model[@]}" --steps 1
usage_error recompute_bad "--recompute" --recompute some "${model[@]}" --steps 1
expect_status 0 "profile with the bytes" "$TF_EXEC" --schedule 1F1B --ranks 2 --microbatches 4 \
    "${small[@]}" --profile-steps 2 --profile-out "$work/mem-profile.json"
for key in static_bytes activation_bytes activation_frozen_bytes checkpoint_bytes recompute_ms; do
    check "the profile has $key" grep -q "\"$key\"" "$work/mem-profile.json"
done
# A limit below what freezing alone reaches: 40% of the way from the
# smallest peak recomputation and freezing can reach (rank r of 1F1B holds
# 2 - r forwards, all but one recomputed) to the unfrozen one.
limit=$(python3 - "$work/mem-profile.json" <<'EOF2'
import json, sys
p = json.load(open(sys.argv[1]))
s = p["stages"]
low = max(st["static_bytes"] + (1 - r) * st["checkpoint_bytes"] + st["activation_frozen_bytes"]
          for r, st in enumerate(s))
high = max(st["static_bytes"] + (2 - r) * st["activation_bytes"] for r, st in enumerate(s))
print(int(low + 0.4 * (high - low)))
EOF2
)
expect_status 0 "a plan under $limit bytes" "$TF_PLAN" "$work/mem-profile.json" \
    --memory-limit "$limit" -o "$work/mem-plan.json"
check "the plan recomputes (R actions)" grep -q '"type":[[:space:]]*"R"' "$work/mem-plan.json"
expect_status 0 "training with R actions" "$TF_EXEC" --plan "$work/mem-plan.json" "${small[@]}" \
    --steps 3 --warmup 0 --ramp 0 --log "$work/mem-plan.jsonl" --progress lines
# Under a plan made for a limit, tf-exec rounds its choices towards less
# memory: no rank holds more than the plan counts, nor more than the limit.
within_plan() {
    python3 - "$work/mem-plan.json" "$work/mem-plan.jsonl" <<'EOF2'
import json, sys
plan = json.load(open(sys.argv[1]))
want = [r["peak_bytes"]["planned"] for r in plan["per_rank"]]
for line in open(sys.argv[2]):
    d = json.loads(line)
    for r, (s, p) in enumerate(zip(d["static_bytes"], d["peak_bytes"])):
        if s + p > want[r] or not d["within_limit"]:
            sys.exit(f"step {d['step']} rank {r}: {s + p} bytes, the plan {want[r]}")
EOF2
}
check "every step within the plan's peak on every rank" within_plan

finish "tf-exec command line"
