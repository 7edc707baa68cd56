#!/usr/bin/env bash
# gpu-checks.sh - the checks of the CUDA backend that need a GPU.
#
# Run from the repository root on a machine with one or more NVIDIA GPUs:
#     executor/cuda/gpu-checks.sh [RESULTS_DIR]
# It builds with TF_CUDA=ON into $BUILD (default build-gpu), runs every check
# below, keeps going when one fails, and writes one file per check plus
# summary.txt (PASS / FAIL / SKIP per check) into RESULTS_DIR (default
# gpu-results).  Exit status: 0 when nothing failed.
#
# Checks (docs/cuda.md, "Pending GPU checks"):
#   env           nvidia-smi, nvcc, NCCL version
#   ctest         tests/cuda: every kernel vs the CPU, transports, the model
#                 on 2 CUDA stages vs 1 CPU stage (loss and gradients)
#   loss          tf-exec cpu vs cuda, same seed: per-step losses agree
#   closed_loop   --profile-out on the GPU -> tf-plan -> --plan on the GPU,
#                 and the --no-freeze baseline: tokens/s with and without
#   gemm          tf-cuda-bench: GEMM TFLOP/s vs the device's peak
#   freeze_sweep  backward time vs --freeze-ratio 0 .. 1
#   failure       an injected failure ends every rank with a message, no hang
#   multi_gpu     (2+ GPUs) NCCL in one process, and two processes (RANK=...)
#   launched_*    launched mode (one process per GPU, tf-exec runs only its own
#                 rank; docs/cuda.md "Running"): RANK/WORLD_SIZE by hand vs one
#                 process (losses), profile -> plan -> train, a killed process,
#                 mpirun and srun when present, and one GPU shared by two
#                 processes with NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL >= 2.30)
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${1:-gpu-results}
BUILD=${BUILD:-build-gpu}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
failures=0

record() { # record NAME STATUS NOTE
    printf '%-13s %-5s %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY"
    [ "$2" = FAIL ] && failures=$((failures + 1))
    return 0
}

TF_EXEC=$BUILD/executor/tf-exec
TF_PLAN=$BUILD/planner/tf-plan
BENCH=$BUILD/tf-cuda-bench
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
# A model large enough for the GPU to matter, small enough to run in minutes.
MODEL="--layers 8 --hidden 1024 --context 256 --microbatch-size 16"
PIPE="--schedule 1F1B --ranks 4 --microbatches 8"

# ---- env --------------------------------------------------------------------
{
    nvidia-smi || true
    nvcc --version || /usr/local/cuda/bin/nvcc --version || true
    grep -E '#define NCCL_(MAJOR|MINOR|PATCH) ' /usr/local/cuda/include/nccl.h || true
} > "$OUT/env.txt" 2>&1
if [ "$NGPU" -lt 1 ]; then
    record env SKIP "no GPU visible (nvidia-smi -L): nothing to check"
    exit 0
fi
record env PASS "$NGPU GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

# ---- build ------------------------------------------------------------------
if ! { cmake -S . -B "$BUILD" -DTF_CUDA=ON -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$BUILD" -j"$(nproc)"; } > "$OUT/build.txt" 2>&1; then
    record build FAIL "see build.txt"
    exit 1
fi
record build PASS "$BUILD"

# ---- ctest ------------------------------------------------------------------
if (cd "$BUILD" && ctest -R cuda --output-on-failure) > "$OUT/ctest.txt" 2>&1; then
    if grep -q "Skipped" "$OUT/ctest.txt"; then
        record ctest FAIL "a CUDA test skipped on a GPU machine (see ctest.txt)"
    else
        record ctest PASS "tests/cuda: kernels, transports, model vs CPU"
    fi
else
    record ctest FAIL "see ctest.txt"
fi

# ---- tf-exec knows the cuda backend? ------------------------------------------
if ! "$TF_EXEC" --help 2>&1 | grep -q "cuda"; then
    record tf-exec FAIL "tf-exec --help does not list the cuda backend (not wired yet?)"
fi

# ---- loss: CPU vs CUDA, same seed ------------------------------------------------
# Small model (the CPU runs it too), every rank on GPU 0 (streams).
small="--layers 4 --hidden 128 --context 64 --microbatch-size 8 --schedule 1F1B --ranks 2"
small="$small --microbatches 4 --steps 20 --warmup 20 --seed 7 --progress lines"
"$TF_EXEC" --backend cpu $small --log "$OUT/loss_cpu.jsonl" > "$OUT/loss_cpu.txt" 2>&1
rc_cpu=$?
"$TF_EXEC" --backend cuda --devices 0 --transport cuda $small --log "$OUT/loss_cuda.jsonl" \
    > "$OUT/loss_cuda.txt" 2>&1
rc_cuda=$?
if [ $rc_cpu -ne 0 ] || [ $rc_cuda -ne 0 ]; then
    record loss FAIL "tf-exec failed (cpu rc $rc_cpu, cuda rc $rc_cuda): loss_*.txt"
else
    # Per step |loss_cuda - loss_cpu| / loss_cpu; FP32 in another order over 20
    # AdamW steps: expect < 1e-3 (docs/cuda.md).
    worst=$(paste -d' ' <(grep -o '"loss": [0-9.eE+-]*' "$OUT/loss_cpu.jsonl" | awk '{print $2}') \
                        <(grep -o '"loss": [0-9.eE+-]*' "$OUT/loss_cuda.jsonl" | awk '{print $2}') |
            awk '{d = ($1 > $2 ? $1 - $2 : $2 - $1) / $1; if (d > w) w = d} END {printf "%.3g", w}')
    echo "largest relative loss difference over 20 steps: $worst" > "$OUT/loss.txt"
    if awk -v w="$worst" 'BEGIN {exit !(w < 1e-3)}'; then
        record loss PASS "cpu vs cuda, 20 steps: largest relative difference $worst"
    else
        record loss FAIL "cpu vs cuda: largest relative loss difference $worst >= 1e-3"
    fi
fi

# ---- closed loop: profile -> plan -> train, and the baseline --------------------------
devices=0
[ "$NGPU" -ge 4 ] && devices=0,1,2,3
cl_ok=1
"$TF_EXEC" --backend cuda --devices $devices $PIPE $MODEL --profile-out "$OUT/profile.json" \
    > "$OUT/closed_loop_profile.txt" 2>&1 || cl_ok=0
[ $cl_ok = 1 ] && { "$TF_PLAN" "$OUT/profile.json" -o "$OUT/plan.json" \
    > "$OUT/closed_loop_plan.txt" 2>&1 || cl_ok=0; }
[ $cl_ok = 1 ] && { "$TF_EXEC" --backend cuda --devices $devices --plan "$OUT/plan.json" $MODEL \
    --steps 60 --progress lines --log "$OUT/train_plan.jsonl" > "$OUT/closed_loop_train.txt" 2>&1 || cl_ok=0; }
[ $cl_ok = 1 ] && { "$TF_EXEC" --backend cuda --devices $devices $PIPE $MODEL --no-freeze \
    --steps 60 --progress lines --log "$OUT/train_nofreeze.jsonl" > "$OUT/closed_loop_nofreeze.txt" 2>&1 || cl_ok=0; }
if [ $cl_ok = 1 ]; then
    with=$(grep -o 'tokens/s with freezing: *[0-9]*' "$OUT/closed_loop_train.txt" | grep -o '[0-9]*$')
    without=$(grep -o 'tokens/s without freezing: *[0-9]*' "$OUT/closed_loop_nofreeze.txt" | grep -o '[0-9]*$')
    speed=$(grep -o 'speedup: measured [0-9.]*x, planned [0-9.]*x' "$OUT/closed_loop_train.txt")
    record closed_loop PASS "tokens/s with plan ${with:-?}, without ${without:-?}; ${speed:-no speedup line}"
else
    record closed_loop FAIL "see closed_loop_*.txt"
fi

# ---- GEMM throughput ---------------------------------------------------------------------
if "$BENCH" --device 0 > "$OUT/gemm.txt" 2>&1; then
    record gemm PASS "$(grep 'square 8192' "$OUT/gemm.txt" | awk '{print $4": "$6" TFLOP/s, "$7}' | paste -sd';')"
else
    record gemm FAIL "see gemm.txt"
fi

# ---- backward time vs freeze ratio -------------------------------------------------------------
{
    echo "freeze_ratio backward_ms(median of frozen-phase steps) batch_ms"
    for r in 0 0.25 0.5 0.75 1; do
        log="$OUT/freeze_$r.jsonl"
        if [ "$r" = 0 ]; then fr="--no-freeze"; else fr="--freeze-ratio $r"; fi
        "$TF_EXEC" --backend cuda --devices 0 $PIPE $MODEL $fr --steps 30 --warmup 5 --ramp 5 \
            --progress lines --log "$log" > "$OUT/freeze_$r.txt" 2>&1 || { echo "$r FAILED"; continue; }
        # medians over the last 15 steps (after warm-up and ramp)
        b=$(tail -n 15 "$log" | grep -o '"backward_ms": [0-9.]*' | awk '{print $2}' | sort -n |
            awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
        t=$(tail -n 15 "$log" | grep -o '"batch_ms": [0-9.]*' | awk '{print $2}' | sort -n |
            awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
        echo "$r $b $t"
    done
} > "$OUT/freeze_sweep.txt" 2>&1
if grep -q FAILED "$OUT/freeze_sweep.txt"; then
    record freeze_sweep FAIL "see freeze_sweep.txt"
else
    record freeze_sweep PASS "$(tail -n +2 "$OUT/freeze_sweep.txt" | awk '{printf "r=%s:%sms ", $1, $2}')"
fi

# ---- failure: an injected failure ends the run with a message, never a hang ----------------------
timeout 300 "$TF_EXEC" --backend cuda --devices 0 --transport cuda $small --inject-failure 1:3 \
    > "$OUT/failure.txt" 2>&1
rc=$?
if [ $rc = 124 ]; then
    record failure FAIL "tf-exec hung after an injected failure (killed after 300 s)"
elif [ $rc -ne 0 ] && grep -q "rank 1 failed" "$OUT/failure.txt"; then
    record failure PASS "exit $rc: $(grep -m1 'rank 1 failed' "$OUT/failure.txt" | cut -c1-100)"
else
    record failure FAIL "exit $rc without the failing rank's message (failure.txt)"
fi

# ---- several GPUs: NCCL in one process, and one process per GPU ----------------------------------
if [ "$NGPU" -ge 2 ]; then
    two="--layers 4 --hidden 1024 --context 256 --microbatch-size 8 --schedule 1F1B --ranks 2"
    two="$two --microbatches 4 --steps 20 --seed 7 --progress lines"
    if timeout 600 "$TF_EXEC" --backend cuda --devices 0,1 --transport nccl $two \
        --log "$OUT/nccl_1proc.jsonl" > "$OUT/nccl_1proc.txt" 2>&1; then
        record nccl_1proc PASS "2 GPUs, one process, NCCL"
    else
        record nccl_1proc FAIL "see nccl_1proc.txt"
    fi
    # One process per GPU, as mpirun / srun would start them (launch_env.c
    # reads RANK / WORLD_SIZE / LOCAL_RANK; ids meet in TFX_RENDEZVOUS_DIR).
    export TFX_RENDEZVOUS_DIR=$OUT TFX_RUN_ID=gpu-checks-$$
    for r in 0 1; do
        RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r timeout 600 "$TF_EXEC" --backend cuda $two \
            --log "$OUT/nccl_2proc_$r.jsonl" > "$OUT/nccl_2proc_$r.txt" 2>&1 &
    done
    ok=1
    for job in $(jobs -p); do wait "$job" || ok=0; done
    if [ $ok = 1 ]; then
        record nccl_2proc PASS "2 processes x 1 GPU, NCCL, file rendezvous"
    else
        record nccl_2proc FAIL "see nccl_2proc_*.txt"
    fi
    # A peer that dies: the other process must end with a message.
    RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 TFX_NCCL_TIMEOUT=60 timeout 300 "$TF_EXEC" --backend cuda \
        $two --inject-failure 0:2 > "$OUT/nccl_fail_0.txt" 2>&1 &
    RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 TFX_NCCL_TIMEOUT=60 timeout 300 "$TF_EXEC" --backend cuda \
        $two > "$OUT/nccl_fail_1.txt" 2>&1 &
    rcs=""
    for job in $(jobs -p); do wait "$job"; rcs="$rcs $?"; done
    if echo "$rcs" | grep -q 124; then
        record nccl_fail FAIL "a process hung after its peer failed (exit codes$rcs)"
    elif grep -q "rank 0 failed" "$OUT/nccl_fail_1.txt"; then
        record nccl_fail PASS "the peer ended with rank 0's message (exit codes$rcs)"
    else
        record nccl_fail FAIL "exit codes$rcs; see nccl_fail_*.txt"
    fi
else
    record multi_gpu SKIP "one GPU: NCCL needs a GPU per rank (NCCL 2.28)"
fi

# ---- launched mode: one process per GPU ---------------------------------------------------------
# Every process runs only its own rank; data over NCCL, the gathers (loss,
# counts, action times) and failures over the socket transport (loopback).
NCCL_H=${NCCL_H:-/usr/local/cuda/include/nccl.h}
nccl_ver=$(awk '/#define NCCL_MAJOR /{a=$3} /#define NCCL_MINOR /{b=$3} END {print a * 100 + b}' \
    "$NCCL_H" 2>/dev/null)
lsmall="--layers 4 --hidden 256 --context 64 --microbatch-size 8 --schedule 1F1B --microbatches 4"
lsmall="$lsmall --steps 20 --warmup 5 --ramp 5 --freeze-ratio 0.5 --seed 7 --progress lines"
# launch NAME NPROC [VAR=VALUE...] -- ARGS...: RANK=r WORLD_SIZE=NPROC LOCAL_RANK=r, a fresh
# rendezvous folder; sets $lrcs to the exit statuses (process 0 first).
launch() {
    local name=$1 n=$2
    shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local dir pids=()
    dir=$(mktemp -d "$OUT/rdv.XXXXXX")
    for ((r = 0; r < n; r++)); do
        env "${envs[@]}" RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r TFX_RENDEZVOUS_DIR=$dir \
            TFX_TIMEOUT=120 timeout 600 "$TF_EXEC" "$@" >"$OUT/$name.$r.txt" 2>&1 &
        pids+=($!)
    done
    lrcs=""
    for pid in "${pids[@]}"; do wait "$pid"; lrcs="$lrcs $?"; done
    lrcs=${lrcs# }
}
# worst_loss_diff A.jsonl B.jsonl: largest per-step relative loss difference
worst_loss_diff() {
    paste -d' ' <(grep -o '"loss": [0-9.eE+-]*' "$1" | awk '{print $2}') \
                <(grep -o '"loss": [0-9.eE+-]*' "$2" | awk '{print $2}') |
        awk '{d = ($1 > $2 ? $1 - $2 : $2 - $1) / $1; if (d > w) w = d} END {printf "%.3g", w}'
}
if [ "$NGPU" -ge 2 ]; then
    NP=$NGPU
    [ "$NP" -gt 4 ] && NP=4
    devs=$(seq -s, 0 $((NP - 1)))
    # One process driving every GPU (the reference), then one process per GPU.
    "$TF_EXEC" --backend cuda --transport nccl --devices "$devs" --ranks $NP $lsmall \
        --log "$OUT/launched_ref.jsonl" > "$OUT/launched_ref.txt" 2>&1
    rc_ref=$?
    launch launched_nccl $NP -- --backend cuda --transport nccl --ranks $NP $lsmall \
        --log "$OUT/launched_nccl.jsonl"
    if [ $rc_ref -ne 0 ] || [ "$(echo "$lrcs" | tr -d ' 0')" != "" ]; then
        record launched_nccl FAIL "exit one process $rc_ref, launched $lrcs: launched_*.txt"
    else
        # Same kernels on the same GPUs; only atomics (embedding backward) may
        # add in another order: 1e-3 as for cpu vs cuda.
        worst=$(worst_loss_diff "$OUT/launched_ref.jsonl" "$OUT/launched_nccl.jsonl")
        if awk -v w="$worst" 'BEGIN {exit !(w < 1e-3)}'; then
            record launched_nccl PASS "$NP processes x 1 GPU vs one process: loss difference $worst"
        else
            record launched_nccl FAIL "$NP processes vs one process: loss difference $worst"
        fi
    fi
    # profile -> plan -> train, all launched
    launch launched_prof $NP -- --backend cuda --ranks $NP $MODEL --schedule 1F1B \
        --microbatches 8 --profile-out "$OUT/launched_profile.json"
    lp_ok=0
    if [ "$(echo "$lrcs" | tr -d ' 0')" = "" ] &&
        "$TF_PLAN" "$OUT/launched_profile.json" -o "$OUT/launched_plan.json" \
            > "$OUT/launched_plan.txt" 2>&1; then
        launch launched_train $NP -- --backend cuda --plan "$OUT/launched_plan.json" $MODEL \
            --steps 60 --progress lines
        [ "$(echo "$lrcs" | tr -d ' 0')" = "" ] && lp_ok=1
    fi
    if [ $lp_ok = 1 ]; then
        record launched_loop PASS "$(grep -o 'speedup: measured [0-9.]*x, planned [0-9.]*x' \
            "$OUT/launched_train.0.txt")"
    else
        record launched_loop FAIL "see launched_prof.*.txt, launched_plan.txt, launched_train.*.txt"
    fi
    # A process killed in the middle: the others end with a message naming it.
    dir=$(mktemp -d "$OUT/rdv.XXXXXX")
    kpids=()
    for ((r = 0; r < NP; r++)); do
        RANK=$r WORLD_SIZE=$NP LOCAL_RANK=$r TFX_RENDEZVOUS_DIR=$dir TFX_TIMEOUT=60 \
            "$TF_EXEC" --backend cuda --ranks $NP $lsmall --steps 100000 \
            > "$OUT/launched_kill.$r.txt" 2>&1 &
        kpids+=($!)
    done
    for _ in $(seq 600); do grep -q "^step 5/" "$OUT/launched_kill.0.txt" && break; sleep 0.1; done
    t0=$(date +%s)
    kill -9 "${kpids[1]}"
    krcs=""
    for ((r = 0; r < NP; r++)); do
        [ $r = 1 ] && continue
        # bounded: 90 s, then it counts as a hang (an exited child stays a
        # zombie until waited for, which kill -0 does not tell apart)
        for _ in $(seq 900); do
            ps -o stat= -p "${kpids[r]}" 2>/dev/null | grep -qv Z || break
            sleep 0.1
        done
        kill -9 "${kpids[r]}" 2>/dev/null
        wait "${kpids[r]}"
        krcs="$krcs $?"
    done
    wait "${kpids[1]}" 2>/dev/null
    t1=$(date +%s)
    if echo "$krcs" | grep -qw 137; then
        record launched_kill FAIL "a process hung after its peer was killed (exit codes$krcs)"
    elif grep -q "process 1 (rank 1) closed its connection" "$OUT/launched_kill.0.txt"; then
        record launched_kill PASS "the others ended in $((t1 - t0)) s naming process 1 (exit codes$krcs)"
    else
        record launched_kill FAIL "exit codes$krcs; see launched_kill.*.txt"
    fi
    # mpirun and srun, when this machine has them.
    if command -v mpirun > /dev/null; then
        dir=$(mktemp -d "$OUT/rdv.XXXXXX")
        if TFX_RENDEZVOUS_DIR=$dir timeout 600 mpirun --allow-run-as-root --oversubscribe -np $NP \
            -x TFX_RENDEZVOUS_DIR -x PATH -x LD_LIBRARY_PATH "$TF_EXEC" --backend cuda \
            --ranks $NP $lsmall > "$OUT/launched_mpirun.txt" 2>&1 &&
            grep -q "final loss" "$OUT/launched_mpirun.txt"; then
            record launched_mpirun PASS "mpirun -np $NP (OMPI_COMM_WORLD_* / PMI_* variables)"
        else
            record launched_mpirun FAIL "see launched_mpirun.txt"
        fi
    else
        record launched_mpirun SKIP "no mpirun on this machine"
    fi
    if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun > /dev/null; then
        if timeout 600 srun --ntasks $NP --gpus-per-task 1 "$TF_EXEC" --backend cuda \
            --ranks $NP $lsmall > "$OUT/launched_srun.txt" 2>&1 &&
            grep -q "final loss" "$OUT/launched_srun.txt"; then
            record launched_srun PASS "srun --ntasks $NP --gpus-per-task 1"
        else
            record launched_srun FAIL "see launched_srun.txt"
        fi
    else
        record launched_srun SKIP "not inside a Slurm allocation"
    fi
fi
# Two processes sharing GPU 0: NCCL refuses two ranks of a communicator on
# one GPU before 2.30; from 2.30 NCCL_MULTI_RANK_GPU_ENABLE=1 allows it.
if [ "${nccl_ver:-0}" -ge 230 ]; then
    "$TF_EXEC" --backend cuda --transport cuda --devices 0 --ranks 2 $lsmall \
        --log "$OUT/launched_1gpu_ref.jsonl" > "$OUT/launched_1gpu_ref.txt" 2>&1
    rc_ref=$?
    launch launched_1gpu 2 NCCL_MULTI_RANK_GPU_ENABLE=1 -- --backend cuda --transport nccl \
        --devices 0 --ranks 2 $lsmall --log "$OUT/launched_1gpu.jsonl"
    if [ $rc_ref -ne 0 ] || [ "$(echo "$lrcs" | tr -d ' 0')" != "" ]; then
        record launched_1gpu FAIL "exit one process $rc_ref, launched $lrcs: launched_1gpu*.txt"
    else
        worst=$(worst_loss_diff "$OUT/launched_1gpu_ref.jsonl" "$OUT/launched_1gpu.jsonl")
        if awk -v w="$worst" 'BEGIN {exit !(w < 1e-3)}'; then
            record launched_1gpu PASS "2 processes on GPU 0 (NCCL_MULTI_RANK_GPU_ENABLE=1): loss difference $worst"
        else
            record launched_1gpu FAIL "2 processes on GPU 0: loss difference $worst"
        fi
    fi
else
    record launched_1gpu SKIP "NCCL ${nccl_ver:-?} (major*100+minor) < 2.30: one GPU per rank only"
fi

echo "results in $OUT ($failures failed)"
[ $failures -eq 0 ]
