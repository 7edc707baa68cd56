/* observe.h - what a run's traces show: the per-rank order, each action's
 * time, and the lag between ranks (internal to tf-import). */
#ifndef TFI_OBSERVE_H
#define TFI_OBSERVE_H

#include "import.h"
#include "run.h"
#include "tf/profile_samples.h"
#include "tf/schedule.h"

/* The schedule the run executed: each rank's compute actions in the order
 * they started in the run's first step.  Every other step must hold the
 * same actions (an order that differs is only noted); every stage that an
 * event names must be run by some trace (else a rank's trace is missing).
 * The schedule takes a built-in name when its order is that schedule's,
 * else "imported".  Returns 0 with *out owning its arrays
 * (tf_schedule_free), or TF_EINVAL naming the file, step and action. */
int tfi_observed_schedule(const tfi_run *run, const tfi_options *o, tf_schedule *out,
                          tf_error *err);

/* Appends to into[*n ...] one sample per step of the run for every action
 * of s (a pair's on its first action: the pair's one span), with `frozen`
 * set as given; into has room for n_actions x n_steps more.  An action's
 * time is its span less the wait for its input (see steps.h).  Fails with
 * TF_EINVAL naming the file, step and action when a step lacks one of s's
 * actions (a --frozen run that ran another schedule). */
int tfi_action_samples(const tfi_run *run, const tf_schedule *s, int frozen, tf_sample *into,
                       size_t *n, tf_error *err);

/* The p2p lag in ms: the median of (receiver's start - sender's end) over
 * the cross-rank dependencies of s where the receiving rank was idle until
 * the sender ended, so that it waited for nothing else.  Needs the traces
 * to share a clock (Kineto's baseTimeNanoseconds); *samples receives how
 * many gaps were measured, and *lag_ms is 0 when none were (or -1 when the
 * clocks are not comparable, with *samples 0). */
void tfi_p2p_lag(const tfi_run *run, const tf_schedule *s, double *lag_ms, int *samples);

#endif
