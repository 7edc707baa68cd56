/* runtime.h - the pipeline runtime: one thread per rank executing its actions.
 *
 * A pipeline owns the model's stages (each on the backend instance of the
 * rank hosting it), one transport, and the schedule.  A step runs every
 * rank's actions in the schedule's order on its own thread:
 *   F  receives the stage input from the previous stage (unless stage 0),
 *      runs the forward, sends the output on (unless the last stage);
 *   B  receives the output gradient (unless the last stage), runs dX then
 *      dW of the unfrozen tensors, sends the input gradient back;
 *   I  as B without the dW part;  W  the dW part only;
 *   R  re-runs the forward of the blocks its microbatch's forward did not
 *      keep (tfx_step_input.recompute_blocks).
 * Each action holds its microbatch's buffers from before its receive and
 * releases what nothing later reads after its send (model.h's
 * tfx_stage_hold), counted per rank (tfx_pipeline_rank_memory).
 * Any order whose DAG is acyclic runs; others are refused at creation.  When
 * a rank fails, it aborts the transport, every blocked rank returns, and the
 * step reports the failing rank's error.  After all ranks finished cleanly,
 * each rank applies AdamW to the tensors of its stages that were unfrozen in
 * at least one microbatch.
 *
 * Launched mode (processes > 1): the run is spread over several processes
 * started by mpirun, srun or by hand, each driving a contiguous block of
 * R / processes ranks (R a multiple of processes; normally one rank each).
 * A process creates backends, stages and threads only for its own ranks.
 * The processes talk over a socket transport (transport.h): the CPU
 * backend's tensors go over it, the CUDA backend's over NCCL; in both cases
 * the socket transport carries the control messages.  After the actions of
 * a step, every process sends its part of the result (loss if it hosts the
 * last stage, dW counts, per-action times, its pipeline time) to process 0,
 * which merges them and sends the merged result back to everyone before
 * AdamW runs: every process then has the same tfx_step_result and action
 * times as one process running every rank.  A failure anywhere aborts the
 * socket transport, which tells every process; in launched mode an error is
 * final for the pipeline (later steps return it again).
 */
#ifndef TFX_RUNTIME_H
#define TFX_RUNTIME_H

#include <stdint.h>
#include "tf/error.h"
#include "tf/schedule.h"
#include "tfx/backend.h"
#include "tfx/kfac.h"
#include "tfx/model.h"
#include "tfx/transport.h"

typedef struct tfx_pipeline_options {
    const char *backend;        /* "cpu" (default when NULL) or "cuda" (tfx/registry.h) */
    const char *devices;        /* cuda: GPU of each rank, e.g. "0,1" or "0" (all on GPU 0,
                                   one stream each); NULL: rank mod GPU count */
    const char *transport;      /* NULL: the backend's default; cpu: "local" (in-process)
                                   or "socket"; cuda: "cuda" (in-process copies) or "nccl" */
    int tf32;                   /* cuda: TF32 tensor-core GEMMs (FP32 accumulation) */
    uint64_t seed;              /* initial weights */
    tfx_adamw_config adamw;
    int recompute;              /* stages can recompute (tfx_step_input.recompute_blocks):
                                   each holds one block's buffers more; also on when
                                   the schedule has R actions */
    int fail_rank;              /* testing: rank that fails, -1 for none */
    int fail_action;            /* testing: at its fail_action-th action */
    /* Launched mode (see above); processes 0 or 1 is the single-process
     * mode, where the fields below are ignored. */
    int processes;              /* processes of the run */
    int process_rank;           /* this process, 0 .. processes-1 */
    int local_rank;             /* cuda: this process's index on its node (LOCAL_RANK);
                                   its GPUs are local_rank * ranks-per-process + i mod
                                   the GPU count unless devices lists them (entry i for
                                   its i-th rank); -1: use process_rank */
    const char *rendezvous_dir; /* NULL: $TFX_RENDEZVOUS_DIR, else /tmp */
    const char *run_id;         /* NULL: $TFX_RUN_ID, else the launcher's job id */
    double timeout_s;           /* receives, sends and the set-up fail after this long
                                   (<= 0: $TFX_TIMEOUT for the socket transport,
                                   $TFX_NCCL_TIMEOUT for NCCL; else 600 s) */
    tfx_kfac_config kfac;       /* K-FAC statistics in the ranks' waits (off by default;
                                   one process only) */
} tfx_pipeline_options;

/* Defaults: cpu backend, seed 1, default AdamW, no injected failure, one
 * process. */
void tfx_pipeline_options_default(tfx_pipeline_options *o);

typedef struct tfx_pipeline tfx_pipeline;

/* Creates the pipeline for schedule s (copied) and model c.  Checks that the
 * model splits into s->stages stages and that the order cannot deadlock.
 * In launched mode it first connects to the other processes (waiting up to
 * the timeout for them), and a failure after that tells them.
 * Returns 0 with *out (free with tfx_pipeline_destroy), or TF_EINVAL /
 * TF_ECYCLE naming the problem, TF_EIO / TF_ERUNTIME (launched: rendezvous,
 * connections), or TF_ENOMEM. */
int tfx_pipeline_create(const tf_schedule *s, const tfx_model_config *c,
                        const tfx_pipeline_options *o, tfx_pipeline **out, tf_error *err);
void tfx_pipeline_destroy(tfx_pipeline *p);

typedef struct tfx_step_input {
    const int32_t *tokens;       /* microbatches * N inputs, microbatch-major */
    const int32_t *targets;      /* microbatches * N next bytes */
    const unsigned char *frozen; /* microbatches * n_tensors (global tensor index),
                                    1 = skip that tensor's dW; NULL = none */
    int apply_optimizer;         /* run AdamW after the actions */
    int forward_only;            /* only the F actions: the loss, no gradients (an
                                    evaluation; apply_optimizer must be 0) */
    const int *recompute_blocks; /* stages x microbatches (stage-major), NULL: none: how
                                    many first blocks of (stage, microbatch) its forward
                                    keeps only the input of, to re-run them at its R
                                    action, or without one at the start of its
                                    backward (needs options.recompute or R actions) */
    int frozen_saves_memory;     /* a forward does not keep what only the dW of its
                                    microbatch's frozen tensors would read (0: it keeps
                                    everything; the results are the same bit for bit) */
    int rescale_frozen;          /* after the actions, scale the gradient of a tensor
                                    frozen in k of the M microbatches by M / (M - k), so
                                    that it estimates the mean gradient, not a shrunk one */
} tfx_step_input;

typedef struct tfx_step_result {
    double loss;           /* mean token loss of the batch */
    double pipeline_ms;    /* wall time of the actions (the batch time the plan models) */
    double step_ms;        /* pipeline_ms plus gradient zeroing and optimizer */
    tfx_dw_counts counts;  /* dW work executed in this step, all stages */
    double flops;          /* GEMM-equivalent FLOPs executed in this step, all stages */
    int tensors_updated;   /* tensors AdamW changed */
} tfx_step_result;

/* Runs one training step (or, forward_only, an evaluation: the loss of the
 * batch and nothing else).  Returns 0, TF_EINVAL for a forward-only step
 * that asks for AdamW, or the error of the first rank that
 * failed (its message says which rank and why); after an error the
 * pipeline's gradients are undefined but it may run further steps (not in
 * launched mode, where the error is final).  In launched mode every process
 * must call it for every step; results are those of the whole pipeline. */
int tfx_pipeline_step(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                      tf_error *err);

/* The pipeline's model layout (its stages' share of the model). */
const tfx_model_layout *tfx_pipeline_layout(const tfx_pipeline *p);

/* Per-action timing of the last training step (forward-only steps leave it
 * as it was; indices of the schedule's actions):
 * compute time in ms (receives excluded) and start offset from the step
 * start.  Pointers stay valid until destroy.  In launched mode every
 * process has every action's figures; a start offset is relative to the
 * step start of the process running the action (clocks of different
 * processes are not compared). */
const double *tfx_pipeline_action_ms(const tfx_pipeline *p);
const double *tfx_pipeline_action_start_ms(const tfx_pipeline *p);

/* When each action of the last training step began, in ms from the step
 * start of the process running it: before its receive, so start - enter is
 * the time it waited for its input (and copied it).  Same validity and
 * launched-mode rules as tfx_pipeline_action_start_ms. */
const double *tfx_pipeline_action_enter_ms(const tfx_pipeline *p);

/* Per rank (schedule.ranks entries): the step start of the process running
 * the rank minus that of process 0, in ms, for the last training step; add
 * it to a rank's offsets to put every rank on one time line.  0 in one
 * process; NaN for a process whose monotonic clock is not process 0's (it
 * runs on another machine).  Valid until destroy. */
const double *tfx_pipeline_rank_clock_ms(const tfx_pipeline *p);

/* Testing: from the next step on, every action of `rank` takes `factor`
 * times its compute time (the rank sleeps for the difference after the
 * compute, inside the timed part), as a slower device would; factor 1 or a
 * rank not run by this process leaves it alone.  Not during a step. */
void tfx_pipeline_set_slowdown(tfx_pipeline *p, int rank, double factor);

/* The change of the held bytes of its stage (model.h's tfx_stage_hold to
 * tfx_stage_release) that each action of the last step made: what a
 * forward kept, minus what a backward freed (n_actions; 0 for actions of
 * other processes). */
const double *tfx_pipeline_action_bytes(const tfx_pipeline *p);

/* What each action of the last step added to its stage's held bytes at
 * its start, before it ran (its buffers held from start to end): with
 * tfx_pipeline_action_bytes, an I's transient above its end's change
 * (n_actions; 0 for actions of other processes). */
const double *tfx_pipeline_action_rise(const tfx_pipeline *p);

/* Per action of the last training step: the wall time (ms) a B or I spent
 * at its start recomputing what its forward did not keep (no R action
 * served it); 0 otherwise.  Part of the action's own time. */
const double *tfx_pipeline_recompute_ms(const tfx_pipeline *p);

/* A rank's bytes: static (parameters, gradients, optimizer state, scratch:
 * held all the time), the microbatch buffers held now (after a step: 0),
 * and the most of those held at once during the last step. */
typedef struct tfx_rank_memory {
    long long static_bytes, held_bytes, peak_bytes;
} tfx_rank_memory;

/* Fills *out for `rank`; returns 1, or 0 (and zeroes) for a rank of
 * another process. */
int tfx_pipeline_rank_memory(const tfx_pipeline *p, int rank, tfx_rank_memory *out);

/* The static bytes of stage `stage` (0 for a stage of another process). */
long long tfx_pipeline_stage_static_bytes(const tfx_pipeline *p, int stage);

typedef enum {
    TFX_BUF_PARAM = 0, TFX_BUF_GRAD = 1, TFX_BUF_ADAM_M = 2, TFX_BUF_ADAM_V = 3
} tfx_buffer_kind;

/* Whether this process holds stage `stage` (always, but in launched mode). */
int tfx_pipeline_has_stage(const tfx_pipeline *p, int stage);

/* Stage `stage` when this process holds it, else NULL.  Not during a step. */
tfx_stage *tfx_pipeline_local_stage(tfx_pipeline *p, int stage);

/* Launched mode: process 0 gives every other process the len bytes at
 * *text (e.g. a plan it solved); every process must call it at the same
 * point, between steps.  On the others, *text and *len receive a malloc'd
 * copy (NUL-terminated; the caller frees it) and what was there is not
 * freed.  Does nothing in the single-process mode.  Returns 0, or the
 * control transport's error (a process that died, the timeout), or
 * TF_ENOMEM. */
int tfx_pipeline_share(tfx_pipeline *p, char **text, size_t *len, tf_error *err);

/* Launched mode: tells every other process that this one stops because of
 * msg (their next wait fails with it), e.g. after an error outside the
 * pipeline.  Does nothing in the single-process mode or when the run was
 * already aborted. */
void tfx_pipeline_abort(tfx_pipeline *p, const char *msg);

/* Copies a global tensor's buffer to host memory (count floats) or from it.
 * Not during a step.  In launched mode, tensors of stages of other
 * processes read as zeros and writes to them are ignored. */
void tfx_pipeline_read_tensor(tfx_pipeline *p, int tensor, tfx_buffer_kind kind,
                              float *host);
void tfx_pipeline_write_tensor(tfx_pipeline *p, int tensor, tfx_buffer_kind kind,
                               const float *host);
/* Optimizer steps taken by a tensor (AdamW bias correction), get and set
 * (0 and ignored for tensors of other processes). */
long tfx_pipeline_tensor_steps(const tfx_pipeline *p, int tensor);
void tfx_pipeline_set_tensor_steps(tfx_pipeline *p, int tensor, long steps);

#endif
