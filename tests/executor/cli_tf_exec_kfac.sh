#!/usr/bin/env bash
# tf-exec --kfac-stats: the statistics change nothing of the training (same
# weights, byte for byte, as without them), every item queued is accounted
# for in --kfac-log (run, dropped or pending), the aux spans lie inside the
# step, and bad options are refused naming the option.
# Run by ctest with TF_EXEC.
. "$(dirname "$0")/../lib.sh"
need TF_EXEC

# 2 ranks, 1 block per stage: rank 0 has 4 Linear layers (qkv, proj, fc1,
# fc2), rank 1 the same and the head: 2 factors x layers x 4 microbatches
# = 32 and 40 items a step.
model=(--layers 2 --hidden 64 --context 32 --microbatch-size 4 --schedule 1F1B --ranks 2
       --microbatches 4 --progress lines)
steps=4

expect_status 0 "without statistics" "$TF_EXEC" "${model[@]}" --steps $steps \
    --checkpoint "$work/off" --log "$work/off.jsonl"
expect_status 0 "with statistics" "$TF_EXEC" "${model[@]}" --steps $steps --kfac-stats \
    --kfac-log "$work/kfac.jsonl" --checkpoint "$work/on" --log "$work/on.jsonl"
check "the statistics leave the weights byte for byte" \
    cmp -s "$work/off/tf-exec.ckpt" "$work/on/tf-exec.ckpt"

# Per rank, items run + dropped over the steps + pending after the last
# step = items queued; spans inside [0, the step's batch time], adding up
# to aux_ms plus the gaps they join; one line per rank and step.
check "every item is run, dropped or pending; spans inside the step" python3 - \
    "$work/kfac.jsonl" "$work/on.jsonl" $steps <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
batch = {json.loads(l)["step"]: json.loads(l)["batch_ms"] for l in open(sys.argv[2])}
steps = int(sys.argv[3])
queued = {0: 32, 1: 40}
ok = len(lines) == 2 * steps
for r in (0, 1):
    mine = [l for l in lines if l["rank"] == r]
    ok &= [l["step"] for l in mine] == list(range(1, steps + 1))
    done = sum(l["aux_items"] + l["dropped"] for l in mine) + mine[-1]["pending"]
    if done != queued[r] * steps:
        print(f"rank {r}: {done} items accounted for, {queued[r] * steps} queued")
        ok = False
    for l in mine:
        for a, b in l["spans_ms"]:
            # the log's batch time is printed to 1 us
            if not (0 <= a <= b <= batch[l["step"]] + 0.001):
                print(f"rank {r} step {l['step']}: span {a}..{b} outside 0..{batch[l['step']]}")
                ok = False
        # spans join chunks less than 0.05 ms apart, gap included; 1e-4 ms rounding each
        extra = sum(b - a for a, b in l["spans_ms"]) - l["aux_ms"]
        if l["spans_ms"] and not (-1e-3 <= extra <= 0.05 * l["aux_chunks"] + 1e-3 * len(l["spans_ms"])):
            print(f"rank {r} step {l['step']}: spans exceed aux_ms by {extra} ms")
            ok = False
sys.exit(0 if ok else 1)
PY

# A queue of 8 items on ranks that queue 32 and 40 a step must drop.
expect_status 0 "small queue" "$TF_EXEC" "${model[@]}" --steps 2 --kfac-stats --kfac-queue 8 \
    --kfac-log "$work/small.jsonl"
check "a full queue drops and counts" python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if all(l["pending"] <= 8 for l in lines) and sum(l["dropped"] for l in lines) > 0 else 1)
' "$work/small.jsonl"

expect_refused_with 2 "decay 1" "--kfac-decay" -- "$TF_EXEC" "${model[@]}" --steps 1 \
    --kfac-stats --kfac-decay 1
expect_refused_with 2 "log without stats" "--kfac-log" -- "$TF_EXEC" "${model[@]}" --steps 1 \
    --kfac-log "$work/x.jsonl"
expect_refused_with 1 "log in a missing folder" "--kfac-log $work/none/k.jsonl" -- \
    "$TF_EXEC" "${model[@]}" --steps 1 --kfac-stats --kfac-log "$work/none/k.jsonl"

finish cli_tf_exec_kfac
