#!/usr/bin/env bash
# Launched mode of tf-exec: one process per rank (or per block of ranks) on
# loopback, started by hand with RANK / WORLD_SIZE as mpirun or srun would.
#
#  1. Per-step losses and dW GEMM counts of process 0 equal those of the same
#     run in one process (1F1B with 2 and 4 processes, 4 ranks on 2
#     processes, ZBVZeroBubble with a plan).  Every rank computes exactly the
#     same float operations whether its peers are threads or processes, the
#     tensors travel as raw bytes, and the loss is reduced by the same code in
#     the same order, so the runs are bitwise identical; the check allows
#     1e-6 relative only so that the last printed digit of "%.6f" can never
#     make it flaky.  Other processes print nothing.
#  2. --profile-out in launched mode writes a profile tf-plan accepts, and a
#     launched run trains with the resulting plan; --auto-plan launched
#     shares process 0's plan with every process.
#  3. Failures end every process non-zero with a message naming the cause
#     within a few seconds: an injected failure, a killed process, a process
#     that hangs (SIGSTOP, TFX_TIMEOUT=3), a peer that never starts.
#  4. Bad launch variables and options: clear errors, no signal, no hang.
# Run by ctest with TF_EXEC and TF_PLAN.  Argument: "runs" (1, 2),
# "failures" (3, 4) or nothing for all (ctest runs the two halves as two
# tests).
. "$(dirname "$0")/../lib.sh"
need TF_EXEC TF_PLAN

# Processes still running when the script ends (a victim's peers).
pids=()
on_exit 'for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done'
# Never wait long for anything: a hang must fail the test, not stall it.
export TFX_TIMEOUT=20
unset RANK WORLD_SIZE LOCAL_RANK OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE \
    SLURM_PROCID SLURM_NTASKS SLURM_LOCALID TFX_RUN_ID

model=(--layers 4 --hidden 32 --context 16 --microbatch-size 2)
part=${1:-all}

# launch NAME NPROC ARGS...: starts NPROC processes (RANK=0..NPROC-1) with a
# fresh rendezvous folder, waits (at most 60 s) and sets $rcs to their exit
# statuses.  Process r writes $work/NAME.r.out / .err.
launch() {
    local name=$1 n=$2
    shift 2
    local dir
    dir=$(mktemp -d "$work/rdv.XXXXXX")
    local started=()
    for ((r = n - 1; r >= 0; r--)); do
        RANK=$r WORLD_SIZE=$n TFX_RENDEZVOUS_DIR=$dir timeout -s KILL 60 "$TF_EXEC" "$@" \
            >"$work/$name.$r.out" 2>"$work/$name.$r.err" &
        started[r]=$!
    done
    rcs=""
    for ((r = 0; r < n; r++)); do
        wait "${started[r]}"
        rcs="$rcs $?"
    done
    rcs=${rcs# }
}

# same_losses NAME REF LOG: per-step loss within 1e-6 relative, equal dw_gemms.
same_losses() {
    local name=$1 ref=$2 log=$3
    if [ ! -s "$log" ]; then
        fail "$name: no log written by process 0"
        return
    fi
    pass
    local verdict
    verdict=$(python3 - "$ref" "$log" <<'EOF'
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
if len(ref) != len(got):
    print("%d steps, expected %d" % (len(got), len(ref))); sys.exit()
for a, b in zip(ref, got):
    if abs(a["loss"] - b["loss"]) > 1e-6 * abs(a["loss"]):
        print("step %d: loss %r, single process %r" % (a["step"], b["loss"], a["loss"])); sys.exit()
    if a["dw_gemms"] != b["dw_gemms"]:
        print("step %d: dw_gemms %d, single process %d" % (a["step"], b["dw_gemms"], a["dw_gemms"])); sys.exit()
print("ok")
EOF
)
    if [ "$verdict" = ok ]; then
        pass
        echo "ok: $name: losses and dW GEMM counts equal the single-process run"
    else
        fail "$name: $verdict"
    fi
}

# quiet NAME N: processes 1..N-1 printed nothing (stdout) and nothing on stderr.
quiet() {
    local name=$1 n=$2
    for ((r = 1; r < n; r++)); do
        if [ -s "$work/$name.$r.out" ] || [ -s "$work/$name.$r.err" ]; then
            fail "$name: process $r printed something:"
            cat "$work/$name.$r.out" "$work/$name.$r.err"
        else
            pass
        fi
    done
}

all_zero() { [ "$(echo "$rcs" | tr -d ' 0')" = "" ]; }

# launched_ok NAME: every process of the last launch exited 0 (else their
# stderr is shown).
launched_ok() {
    if all_zero; then
        pass
        return 0
    fi
    fail "$1: exit statuses $rcs"
    cat "$work/$1".*.err
    return 1
}

# single NAME ARGS...: a single-process run of tf-exec must succeed.
single() {
    local name=$1
    shift
    expect_status 0 "$name" "$TF_EXEC" "$@"
}

# seconds T0 T1: the time between two `date +%s.%N`, to one decimal.
seconds() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }
# below SECS LIMIT: SECS < LIMIT.
below() { awk -v s="$1" -v l="$2" 'BEGIN {exit !(s < l)}'; }

train=(--steps 6 --warmup 1 --ramp 2 --freeze-ratio 0.5 --progress lines "${model[@]}")

# 1. single process vs launched, 1F1B, 2 and 4 processes, and 4 ranks on 2.
same_as_one_process() {
    local ranks n name t0 t1
    for ranks in 2 4; do
        single "single-process 1F1B $ranks ranks" --schedule 1F1B --ranks "$ranks" \
            --microbatches 4 "${train[@]}" --log "$work/ref1f1b$ranks.jsonl"
    done
    for case in "2 2" "4 4" "4 2"; do
        read -r ranks n <<<"$case"
        name=1f1b_r${ranks}_p$n
        t0=$(date +%s.%N)
        launch "$name" "$n" --schedule 1F1B --ranks "$ranks" --microbatches 4 "${train[@]}" \
            --log "$work/$name.jsonl"
        t1=$(date +%s.%N)
        launched_ok "$name" || continue
        same_losses "1F1B, $ranks ranks on $n processes" "$work/ref1f1b$ranks.jsonl" \
            "$work/$name.jsonl"
        check "$name: process 0 printed the summary" grep -q "final loss" "$work/$name.0.out"
        quiet "$name" "$n"
        echo "   ($(seconds "$t0" "$t1") s)"
    done
}

# launched_plan ARGS...: training with a plan, in one process and in two,
# gives the same losses.
launched_plan() {
    single "single-process ZBV with the plan" "$@" --log "$work/refzbv.jsonl"
    launch zbv 2 "$@" --log "$work/zbv.jsonl"
    if launched_ok zbv; then
        same_losses "ZBVZeroBubble with a plan, 2 processes" "$work/refzbv.jsonl" \
            "$work/zbv.jsonl"
        quiet zbv 2
    fi
}

# 2. profile in launched mode -> tf-plan -> launched and single-process
#    training with the plan (ZBVZeroBubble: split backward, V-shaped stages).
launched_profiles() {
    local zbv=(--schedule ZBVZeroBubble --ranks 2 --microbatches 4)
    local plan=(--plan "$work/zbv-plan.json" --steps 6 --warmup 1 --ramp 2 --progress lines
                "${model[@]}")
    launch zbvprof 2 "${zbv[@]}" "${model[@]}" --profile-steps 2 --profile-out "$work/zbv.json"
    if ! launched_ok zbvprof; then
        :
    elif [ ! -s "$work/zbv.json" ]; then
        fail "launched profiling wrote no profile"
    else
        quiet zbvprof 2
        check "launched ZBV profile has W times" \
            grep -q '"backward_weight_frozen_ms"' "$work/zbv.json"
        expect_status 0 "tf-plan accepts the profile measured by 2 processes" \
            "$TF_PLAN" "$work/zbv.json" -o "$work/zbv-plan.json"
        [ "$rc" -eq 0 ] && launched_plan "${plan[@]}"
    fi
    # A 1F1B profile from 4 processes is valid too.
    launch prof4 4 --schedule 1F1B --ranks 4 --microbatches 4 "${model[@]}" --profile-steps 2 \
        --profile-warmup 1 --profile-out "$work/p4.json"
    launched_ok prof4 &&
        expect_status 0 "4-process 1F1B profile -> tf-plan" \
            "$TF_PLAN" "$work/p4.json" -o "$work/p4-plan.json"

    # The socket transport in one process (no socket opened) gives the same run.
    single "--transport socket in one process" --schedule 1F1B --ranks 4 --microbatches 4 \
        "${train[@]}" --transport socket --log "$work/sock1.jsonl"
    same_losses "--transport socket in one process" "$work/ref1f1b4.jsonl" "$work/sock1.jsonl"
}

# 2b. --auto-plan launched: process 0 measures, solves and sends the plan to
#     the other process; the plan is tf-plan's of the profile (which carries
#     the lag measured between the processes), and both processes train with
#     it: from the plan on, the dW GEMM counts (merged over both) equal those
#     of a single-process --plan run with the same warm-up, whose freezing
#     masks are a function of the seed, the step and the plan's ratios.
launched_auto_plan() {
    local auto=(--schedule 1F1B --ranks 2 --microbatches 4 "${model[@]}" --auto-plan --warmup 1
                --profile-steps 2 --ramp 1 --steps 8 --progress lines)
    launch autoplan 2 "${auto[@]}" --plan-out "$work/auto-plan.json" \
        --profile-out "$work/auto-profile.json" --log "$work/auto.jsonl"
    launched_ok autoplan || return
    quiet autoplan 2
    check "process 0 announced the plan" \
        grep -q "auto-plan: plan 1 from step 6" "$work/autoplan.0.out"
    expect_status 0 "tf-plan on the launched auto-plan's profile" "$TF_PLAN" \
        "$work/auto-profile.json" -o "$work/auto-tf.json" -q
    local verdict
    verdict=$(python3 - "$work/auto-plan.json" "$work/auto-tf.json" \
        "$work/auto-profile.json" <<'EOF2'
import json, sys
a, b, prof = (json.load(open(p)) for p in sys.argv[1:4])
a["solver"].pop("seconds"); b["solver"].pop("seconds")
if a != b:
    print("--plan-out differs from tf-plan's plan in", [k for k in a if a[k] != b.get(k)])
elif not prof["p2p_ms"] > 0:
    print("the profile's p2p_ms is %r, expected the measured lag" % prof["p2p_ms"])
else:
    print("ok")
EOF2
)
    check "launched --auto-plan: $verdict" [ "$verdict" = ok ]
    single "--plan with the launched run's plan" --plan "$work/auto-plan.json" "${model[@]}" \
        --warmup 5 --ramp 1 --steps 8 --progress lines --log "$work/auto-ref.jsonl"
    local got want
    local gemms='import json,sys; print([json.loads(l)["dw_gemms"] for l in open(sys.argv[1])][5:])'
    got=$(python3 -c "$gemms" "$work/auto.jsonl")
    want=$(python3 -c "$gemms" "$work/auto-ref.jsonl")
    check "launched --auto-plan: dW GEMMs of steps 6-8 $got, with --plan $want" [ "$got" = "$want" ]
    # Re-planning: both processes decide it at the same step (or they would
    # wait for each other until the timeout), and process 0's new plan puts
    # the whole critical path on the slowed rank (as in one process).
    launch replan 2 "${auto[@]}" --steps 16 --test-slow-rank 1:10:8 \
        --replan-threshold 0.5 --replan-patience 2 --replan-interval 2 \
        --plan-out "$work/replan-plan.json" --profile-out "$work/replan-profile.json" \
        --log "$work/replan.jsonl"
    launched_ok replan || return
    quiet replan 2
    check "launched re-plan: process 0 logged it" grep -q '"event": "re-plan 1 at step' \
        "$work/replan.jsonl"
    # The slowed stage at its cap, the other freezing far less, with its last
    # backward frozen whole exactly when the profile measured a saving for it
    # (replan_plan.py; across two processes sharing 2 cores with other tests,
    # the measurements are noisier still than in one).
    local verdict
    verdict=$(python3 "$(dirname "$0")/replan_plan.py" "$work/replan-plan.json" \
        "$work/replan-profile.json")
    check "launched re-plan: $verdict" [ "$verdict" = ok ]
}

# 3. failures.
# expect_all_fail NAME N NEEDLE [SKIP]: every process but SKIP exited
# non-zero (not killed by the watchdog), each stderr names NEEDLE.  Returns
# non-zero when one did not.
expect_all_fail() {
    local name=$1 n=$2 needle=$3 skip=${4:--1} r rc bad=0
    for ((r = 0; r < n; r++)); do
        [ "$r" = "$skip" ] && continue
        rc=$(echo "$rcs" | awk -v i=$((r + 1)) '{print $i}')
        if [ "$rc" = 0 ]; then
            fail "$name: process $r exited 0"
        elif [ "$rc" -ge 128 ]; then
            fail "$name: process $r was killed (exit $rc): it hung"; cat "$work/$name.$r.err"
        elif ! grep -qF -- "$needle" "$work/$name.$r.err"; then
            fail "$name: process $r's error lacks \"$needle\":"; cat "$work/$name.$r.err"
        else
            pass
            continue
        fi
        bad=1
    done
    return $bad
}

injected_failure() {
    local t0 t1 secs
    t0=$(date +%s.%N)
    launch inject 4 --schedule 1F1B --ranks 4 --steps 3 "${model[@]}" --inject-failure 2:3
    t1=$(date +%s.%N)
    secs=$(seconds "$t0" "$t1")
    expect_all_fail inject 4 "rank 2 failed" &&
        echo "ok: an injected failure on rank 2 ended all 4 processes with its message ($secs s)"
    check "injected failure: processes took $secs s to end (limit 15)" below "$secs" 15
}

# A process killed (SIGKILL) in the middle of training, and one that hangs
# (SIGSTOP: only the timeout can tell).  Process 2 is the victim.
# victim NAME SIGNAL NEEDLE: starts 4 processes for many steps, waits until
# process 0 logged a step, sends SIGNAL to process 2, then expects the others
# to end non-zero with NEEDLE within 15 s (killed after 30 s otherwise).
victim() {
    local name=$1 sig=$2 needle=$3
    local dir r waited t0 t1 secs
    dir=$(mktemp -d "$work/rdv.XXXXXX")
    for ((r = 3; r >= 0; r--)); do
        rm -f "$work/$name.$r.rc"
        # The subshell records tf-exec's own pid (to signal it) and its status.
        (
            RANK=$r WORLD_SIZE=4 TFX_RENDEZVOUS_DIR=$dir TFX_TIMEOUT=3 "$TF_EXEC" \
                --schedule 1F1B --ranks 4 --steps 100000 --progress lines "${model[@]}" \
                >"$work/$name.$r.out" 2>"$work/$name.$r.err" &
            echo $! >"$work/$name.$r.pid"
            wait $!
            echo $? >"$work/$name.$r.rc"
        ) 2>/dev/null &
    done
    waited=0
    until grep -q "^step 2/" "$work/$name.0.out" 2>/dev/null || [ $waited -ge 300 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    for r in 0 1 2 3; do pids+=("$(cat "$work/$name.$r.pid")"); done
    t0=$(date +%s.%N)
    kill -s "$sig" "$(cat "$work/$name.2.pid")"
    waited=0
    until [ -e "$work/$name.0.rc" ] && [ -e "$work/$name.1.rc" ] && [ -e "$work/$name.3.rc" ] ||
        [ $waited -ge 300 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    t1=$(date +%s.%N)
    for r in 0 1 2 3; do kill -9 "$(cat "$work/$name.$r.pid")" 2>/dev/null; done
    wait
    rcs=""
    for r in 0 1 2 3; do rcs="$rcs $(cat "$work/$name.$r.rc" 2>/dev/null || echo 999)"; done
    rcs=${rcs# }
    secs=$(seconds "$t0" "$t1")
    expect_all_fail "$name" 4 "$needle" 2 &&
        echo "ok: $name: processes 0, 1, 3 ended with \"$needle\" ($secs s after SIG$sig)"
    check "$name: the others took $secs s to end (limit 15)" below "$secs" 15
}

# A peer that never starts: the set-up gives up after TFX_TIMEOUT.
missing_peer() {
    local dir
    dir=$(mktemp -d "$work/rdv.XXXXXX")
    expect_refused "a process whose peer never starts" \
        "process(es) 1 did not connect to process 0 within 2 s" -- \
        env RANK=0 WORLD_SIZE=2 TFX_RENDEZVOUS_DIR="$dir" TFX_TIMEOUT=2 \
        timeout -s KILL 30 "$TF_EXEC" --steps 1 "${model[@]}"
}

# 4. bad variables and options: a clear error naming the variable or flag.
# refused NAME NEEDLE VAR=VALUE... -- ARGS...: tf-exec with those variables
# must exit non-zero within 30 s, not by a signal, naming NEEDLE.
refused() {
    local name=$1 needle=$2
    shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    expect_refused "$name" "$needle" -- env "${envs[@]}" timeout -s KILL 30 "$TF_EXEC" "$@"
}

bad_launches() {
    local rdv one=(--steps 1 "${model[@]}")
    rdv=$(mktemp -d "$work/rdv.XXXXXX")
    # A plan for 2 ranks, to launch with a process count that does not fit.
    plan_for_2() {
        "$TF_EXEC" --schedule 1F1B --ranks 2 "${model[@]}" --profile-warmup 0 --profile-steps 1 \
            --profile-out "$work/p2.json" && "$TF_PLAN" "$work/p2.json" -o "$work/p2-plan.json"
    }
    expect_status 0 "making a plan" plan_for_2
    refused rank_not_below "RANK=4 is not below WORLD_SIZE=4" RANK=4 WORLD_SIZE=4 -- "${one[@]}"
    refused rank_not_number 'RANK="one"' RANK=one WORLD_SIZE=2 -- "${one[@]}"
    refused size_missing "RANK is set but WORLD_SIZE is not" RANK=0 -- "${one[@]}"
    refused rank_missing "WORLD_SIZE=2 is set but RANK is not" WORLD_SIZE=2 -- "${one[@]}"
    # A malformed address file is named as such, not as one that "did not
    # appear" (process 1 reads process 0's).
    local bad_rdv
    bad_rdv=$(mktemp -d "$work/rdv.XXXXXX")
    echo "not an address" >"$bad_rdv/tfx-sock-badfile-0.addr"
    refused malformed_address 'tfx-sock-badfile-0.addr holds "not an address"' RANK=1 \
        WORLD_SIZE=2 TFX_RENDEZVOUS_DIR="$bad_rdv" TFX_RUN_ID=badfile TFX_TIMEOUT=2 -- "${one[@]}"
    refused slurm_bad "SLURM_PROCID=5 is not below SLURM_NTASKS=2" SLURM_PROCID=5 \
        SLURM_NTASKS=2 -- "${one[@]}"
    refused size_vs_ranks "WORLD_SIZE=3: 3 processes cannot run the 4 pipeline ranks of --ranks 4" \
        RANK=0 WORLD_SIZE=3 TFX_RENDEZVOUS_DIR="$rdv" -- --ranks 4 "${one[@]}"
    refused size_vs_plan \
        "4 processes cannot run the 2 pipeline ranks of the plan $work/p2-plan.json" \
        RANK=0 WORLD_SIZE=4 TFX_RENDEZVOUS_DIR="$rdv" -- --plan "$work/p2-plan.json" "${one[@]}"
    refused no_rdv_dir "rendezvous folder $work/none (TFX_RENDEZVOUS_DIR)" RANK=0 WORLD_SIZE=2 \
        TFX_RENDEZVOUS_DIR="$work/none" -- "${one[@]}"
    : >"$work/a-file"
    refused rdv_not_dir "rendezvous folder $work/a-file (TFX_RENDEZVOUS_DIR): not a directory" \
        RANK=0 WORLD_SIZE=2 TFX_RENDEZVOUS_DIR="$work/a-file" -- "${one[@]}"
    refused bad_timeout 'TFX_TIMEOUT="soon"' RANK=0 WORLD_SIZE=2 TFX_RENDEZVOUS_DIR="$rdv" \
        TFX_TIMEOUT=soon -- "${one[@]}"
    refused checkpoint "--checkpoint $work/ck: not supported with one process per rank" \
        RANK=0 WORLD_SIZE=2 TFX_RENDEZVOUS_DIR="$rdv" -- --checkpoint "$work/ck" "${one[@]}"
    refused local_transport "--transport local: in-process only" RANK=0 WORLD_SIZE=2 \
        TFX_RENDEZVOUS_DIR="$rdv" TFX_TIMEOUT=2 -- --transport local "${one[@]}"
    check "failed runs left no files in the rendezvous folder: $(ls "$rdv")" \
        [ -z "$(ls -A "$rdv")" ]
}

if [ "$part" != failures ]; then
    same_as_one_process
    launched_profiles
    launched_auto_plan
fi
if [ "$part" != runs ]; then
    injected_failure
    victim killed KILL "process 2 (rank 2) closed its connection"
    victim stopped STOP "within 3 s"
    missing_peer
    bad_launches
fi
finish "tf-exec launched mode ($part)"
