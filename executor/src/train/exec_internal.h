/* exec_internal.h - what the two jobs of tf-exec (profile.c, train.c)
 * share: a run of training steps on a pipeline, and the checks and words
 * around it (internal to the executor).
 */
#ifndef TFX_EXEC_INTERNAL_H
#define TFX_EXEC_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "tf/error.h"
#include "tf/schedule.h"
#include "tfx/corpus.h"
#include "tfx/exec.h"
#include "tfx/runtime.h"

/* A pipeline with its data and the buffers of one batch. */
typedef struct tfx_exec_run {
    const tfx_exec_options *o;
    tf_schedule sched;         /* set by the caller before tfx_exec_run_open */
    tfx_pipeline *p;
    tfx_corpus corpus;
    FILE *out;                 /* progress and summaries (/dev/null for launched
                                  processes other than 0) */
    FILE *null_out;            /* that /dev/null, closed by tfx_exec_run_close */
    int microbatches;          /* M */
    int tokens;                /* N per microbatch */
    int32_t *batch_tokens, *batch_targets; /* M x N */
    const int *recompute_blocks; /* stages x M, or NULL: the steps' recomputation
                                    (tfx_step_input.recompute_blocks; the caller's) */
} tfx_exec_run;

/* Whether o describes one process of several (a launched run). */
int tfx_exec_launched(const tfx_exec_options *o);

/* Builds the schedule the options name (without a plan): the order of
 * --schedule-csv (checked against the pipeline options given), else
 * --schedule, --ranks, --stages-per-rank, --microbatches or their defaults.
 * Returns 0 or TF_EINVAL / TF_EIO naming the option, file or range. */
int tfx_exec_options_schedule(const tfx_exec_options *o, tf_schedule *out, tf_error *err);

/* Opens everything a job needs for r->sched: checks the launch against it,
 * picks the output stream, loads the corpus, creates the pipeline and the
 * batch buffers.  Returns 0 or the first error (naming the option, file or
 * variable); r is released by tfx_exec_run_close either way. */
int tfx_exec_run_open(tfx_exec_run *r, const tfx_exec_options *o, tf_error *err);

/* Loads the batch of `step` and runs one step with the freezing mask
 * `frozen` (NULL: none) and AdamW.  Returns 0 or the pipeline's error. */
int tfx_exec_run_step(tfx_exec_run *r, long step, const unsigned char *frozen,
                      tfx_step_result *res, tf_error *err);

/* The mean loss over o->eval_batches batches of held-out data (the same
 * windows every time), forward only: the weights, gradients and optimizer
 * are left as they were.  Returns 0 or the pipeline's error. */
int tfx_exec_run_evaluate(tfx_exec_run *r, double *loss, tf_error *err);

/* Releases r.  After a failure (rc < 0) it first tells the other processes
 * of a launched run why this one stops (err's message). */
void tfx_exec_run_close(tfx_exec_run *r, int rc, const tf_error *err);

/* Prints "<what> S: R ranks x V stages per rank, M microbatches x N tokens,
 * P parameters" for the run, without a line end. */
void tfx_exec_run_describe(const tfx_exec_run *r, const char *what);

/* Could path be written: the file, or its folder when it does not exist
 * yet?  Checked before a run starts, so that a typo in an output's name
 * costs nothing.  Process 0 alone writes outputs: other launched processes
 * skip the check (their machine may not have the folder).  Returns 0 or
 * TF_EIO "FLAG PATH: cannot write there: REASON". */
int tfx_exec_check_writable(const tfx_exec_options *o, const char *flag, const char *path,
                            tf_error *err);

#endif
