/* kfac.h - the per-rank queue of K-FAC statistics items and the factors
 * they update (internal to the executor; tfx/kfac.h says what is computed).
 *
 * The runtime calls, on each rank's own thread:
 *   tfx_kfac_step_begin / _end   around the rank's actions of a step;
 *   tfx_kfac_after               after the action: F queues the A items of
 *                                the stage's layers, B and I the G items,
 *                                each with a copy of its input;
 *   tfx_kfac_run_one             while a receive would block.
 * A rank's queue and the factors of its stages are touched only by that
 * rank's thread, so nothing here locks.  The runtime's (lazy) stages free
 * or reuse a microbatch's buffers when the action ends, and on any stage a
 * later action rewrites the slot, so every item reads a copy taken when it
 * is queued. */
#ifndef TFX_KFAC_INTERNAL_H
#define TFX_KFAC_INTERNAL_H

#include <stdio.h>

#include "tf/error.h"
#include "tf/schedule.h"
#include "tfx/kfac.h"
#include "tfx/model.h"
#include "tfx/transport.h"

typedef struct tfx_kfac tfx_kfac;

typedef enum { TFX_KFAC_A = 0, TFX_KFAC_G = 1 } tfx_kfac_factor;

/* Creates the statistics of the stages in stages[0..n_stages) whose
 * backend is set (the others belong to another process), stage st run by
 * rank stage_rank[st] of `ranks`.  The stages must outlive k.  Opens
 * c->log_path for writing when set.  Returns 0 with *out (free with
 * tfx_kfac_destroy), TF_EINVAL naming --kfac-decay, --kfac-sample or
 * --kfac-queue and the value, TF_EIO naming --kfac-log and the path, or TF_ENOMEM. */
int tfx_kfac_create(const tfx_kfac_config *c, tfx_stage *stages, int n_stages,
                    const int *stage_rank, int ranks, tfx_kfac **out, tf_error *err);

/* Frees everything, pending items included (accepts NULL).  Does not
 * report a log write error: tfx_kfac_step_report does. */
void tfx_kfac_destroy(tfx_kfac *k);

/* A step of `rank` starts at t0 (tf_now_seconds); training 0 (an
 * evaluation) queues nothing and does not count as a step: what runs in
 * its waits goes into the next report's figures (tfx_kfac_step_report). */
void tfx_kfac_step_begin(tfx_kfac *k, int rank, double t0, int training);

/* The rank's last action of the step is done: leftovers stay queued. */
void tfx_kfac_step_end(tfx_kfac *k, int rank);

/* After action (type, stage, mb) of `rank`, before its buffers are
 * released: queues its items (F: A of each layer, B and I: G of each
 * layer), dropping the oldest not yet started beyond the bound, each with
 * a copy of its input (the action's buffers do not outlive it on a lazy
 * stage, model.h).  Returns 0 or an allocation error. */
int tfx_kfac_after(tfx_kfac *k, int rank, tf_action_type type, int stage, int mb,
                   tf_error *err);

/* Runs the next chunk of rows of the oldest pending item of `rank` (about
 * a millisecond of work; the item is done with its last chunk).  Returns 1
 * when a chunk ran, 0 when nothing is pending, or the backend's error. */
int tfx_kfac_run_one(tfx_kfac *k, int rank, tf_error *err);

/* A receive of `rank` from (from, tag) on tr: until tr's ready says the
 * message is there, runs chunks (tfx_kfac_run_one); returns when it is there
 * or nothing is pending.  The message may have arrived during the last
 * chunk: that chunk's time counts into the step's `late_ms`, a bound on
 * what the work added to the rank's path.  Returns 0 or the backend's
 * error. */
int tfx_kfac_fill_wait(tfx_kfac *k, int rank, const tfx_transport *tr, int from, long tag,
                       tf_error *err);

/* Testing: runs every pending item of `rank`.  Returns 0 or an error. */
int tfx_kfac_drain(tfx_kfac *k, int rank, tf_error *err);

/* Linear layers of `stage` (4 per block, plus the head on the last stage),
 * and layer i's factor: *dim its side (A: in, plus 1 with a bias; G: out),
 * *updates the microbatches folded into it; host (may be NULL) gets the
 * dim x dim values.  Returns 0, or TF_EINVAL for a stage or layer that is
 * not here. */
int tfx_kfac_layers(const tfx_kfac *k, int stage);
int tfx_kfac_read(const tfx_kfac *k, int stage, int layer, tfx_kfac_factor f, float *host,
                  int *dim, long *updates, tf_error *err);

/* After a training step: writes the figures gathered since the last
 * report (the step, and evaluations since the previous one), one JSON line
 * for each rank in [first_rank, first_rank + n_ranks), and starts new ones: step, items run and their
 * ms, pending and dropped items, items whose input was copied out before
 * an action overwrote it (work on the step's path), late_ms
 * (tfx_kfac_fill_wait), the refresh interval (steps from the
 * step that queued the set completed last to this one, counting both;
 * null when none completed) and the spans in ms from the step start (the
 * training step's only).  Returns 0 or TF_EIO naming --kfac-log; without
 * a log it only starts new figures. */
int tfx_kfac_step_report(tfx_kfac *k, int first_rank, int n_ranks, tf_error *err);

#endif
