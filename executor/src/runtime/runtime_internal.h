/* runtime_internal.h - the pipeline and the parts of a step that the
 * runtime's files share (internal to the executor):
 *
 *   pipeline.c  creation (backends and transport from the registry, the
 *               control connection of a launched run), tensor access, and
 *               which of the two kinds of step runs
 *   step.c      the rank threads of one step: actions, then AdamW
 *   launched.c  a step of a launched run: the same threads, then the
 *               exchange of the results through process 0
 */
#ifndef TFX_RUNTIME_INTERNAL_H
#define TFX_RUNTIME_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "tfx/runtime.h"

struct tfx_pipeline {
    tf_schedule schedule;
    tfx_model_layout layout;
    tfx_pipeline_options opts;
    int split_backward;
    tfx_backend *backends;    /* ranks (those of this process are set) */
    tfx_transport transport;
    tfx_stage *stages;        /* schedule.stages (those of this process are set) */
    double *action_ms;        /* n_actions */
    double *action_start_ms;  /* n_actions */
    double *action_enter_ms;  /* n_actions: when the action began, before its receive */
    double *rank_clock_ms;    /* ranks: the step start of the rank's process minus process
                                 0's on the monotonic clock; 0 in one process, NaN for a
                                 process on another machine (clocks not comparable) */
    double *action_bytes;     /* n_actions: change of its stage's held bytes (last step) */
    double *action_rise;      /* n_actions: what its start added to them (last step) */
    double *recompute_ms;     /* n_actions: a backward's recomputation at its start */
    tfx_mem_meter *meters;    /* ranks: microbatch bytes each local rank holds */
    uint64_t clock_id;        /* which monotonic clock this process reads (boot id) */
    int slow_rank;            /* testing: rank whose compute is stretched, -1 none */
    double slow_factor;       /* by this factor (tfx_pipeline_set_slowdown) */
    /* Launched mode: this process runs ranks [first_local, first_local +
     * n_local) (all ranks in the single-process mode). */
    int processes, process, first_local, n_local;
    tfx_transport control;    /* launched: socket transport between processes */
    int control_shared;       /* control is also the data transport (registry.h) */
    atomic_int data_ready;    /* transport is set (for the remote-abort hook) */
    struct tfx_kfac *kfac;    /* K-FAC statistics in the waits (kfac/kfac.h); NULL: off */
    int broken;               /* launched: a step failed; later steps repeat it */
    tf_error broken_err;
};

/* What one rank thread needs for one phase of a step. */
typedef struct tfx_rank_job {
    tfx_pipeline *p;
    int rank;
    const tfx_step_input *in;
    double t0;                /* step start (seconds) */
    atomic_int *first_failure;
    int rc;
    tf_error err;
} tfx_rank_job;

/* One step on this process's ranks. */
typedef struct tfx_step_run {
    tfx_pipeline *p;
    const tfx_step_input *in;
    tfx_rank_job *jobs;       /* n_local */
    atomic_int first_failure; /* rank that failed first, -1 */
    double t0, t1;            /* start and end of the actions (seconds) */
    tfx_rank_job *cause;      /* after a failed phase: the first rank's job, or NULL */
} tfx_step_run;

/* Whether `rank` runs in this process. */
static inline int tfx_pipeline_is_local(const tfx_pipeline *p, int rank)
{
    return rank >= p->first_local && rank < p->first_local + p->n_local;
}

/* Prepares a step: zeroes the stages' dW counts, allocates the jobs.
 * Returns 0 or TF_ENOMEM; release with tfx_step_end either way. */
int tfx_step_begin(tfx_step_run *sr, tfx_pipeline *p, const tfx_step_input *in,
                   tf_error *err);

/* Runs every local rank's actions on its own thread.  Returns 0, or
 * "rank R failed (all ranks stopped): ..." for the rank that failed first
 * (sr->cause), or a thread that could not start. */
int tfx_step_actions(tfx_step_run *sr, tf_error *err);

/* Applies AdamW on every local rank and counts, over the whole model, the
 * tensors it updated into res.  Returns 0 or the first rank's error. */
int tfx_step_optimizer(tfx_step_run *sr, tfx_step_result *res, tf_error *err);

void tfx_step_end(tfx_step_run *sr);

/* The step's loss (when this process hosts the last stage) and the dW work
 * of this process's stages. */
typedef struct tfx_step_totals {
    int has_loss;
    double loss;
    tfx_dw_counts counts;
    double flops;
} tfx_step_totals;

void tfx_step_totals_local(const tfx_pipeline *p, tfx_step_totals *t);

/* tfx_pipeline_step in one process (step.c) and in a launched run
 * (launched.c); pipeline.c picks one. */
int tfx_step_single(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                    tf_error *err);
int tfx_launched_step(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                      tf_error *err);

#endif
