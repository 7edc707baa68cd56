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
 * same actions (an order that differs is noted); every stage that an event
 * names must be run by some trace (else a rank's trace is missing); and
 * the order of every step must be one tf-plan can plan: tf_dag_build finds
 * no cycle in it.  The schedule takes a built-in name when its order is
 * that schedule's, else "imported".  Returns 0 with *out owning its arrays
 * (tf_schedule_free), or TF_EINVAL naming the file, step and action,
 * TF_ECYCLE naming the step, the traces and the actions on the cycle, or
 * TF_ENOMEM. */
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

/* How the ranks' clocks were put on one time line. */
typedef enum {
    TFI_CLOCK_ONE_RANK,  /* nothing to align */
    TFI_CLOCK_SHARED,    /* every trace has baseTimeNanoseconds */
    TFI_CLOCK_MESSAGES,  /* none has: aligned by the data the ranks exchange */
    TFI_CLOCK_UNALIGNED  /* neither: some rank pair exchanges data one way only */
} tfi_clock_kind;

/* A receiver's action may seem to start this long before the data it
 * takes was sent (microseconds): the clocks of ranks on one machine agree
 * to well within it, and traces of different runs, or of clocks set apart,
 * miss by far more. */
#define TFI_CLOCK_SLACK_US 50.0

/* The largest lag accepted, as a share of the step (the median time from
 * the first action of any rank to the last): messages between ranks that
 * took more would leave the pipeline mostly waiting. */
#define TFI_MAX_LAG_SHARE 0.1

typedef struct tfi_clock {
    tfi_clock_kind kind;
    double lag_ms;   /* the median gap between a sender's end and the start of a
                        receiver that waited for it alone; 0 when none was seen */
    int samples;     /* gaps measured */
    int timed;       /* messages whose receiver's compute start is known (GPU side, or a
                        receive event seen): the only ones a gap is measured on */
    double step_ms;  /* median length of a step, every rank together */
} tfi_clock;

/* Puts the ranks of run (schedule s) on one time line: by their
 * baseTimeNanoseconds when every trace has one, else (the legacy
 * profiler's traces, each timed from its own start) by the messages:
 * between two ranks data flows both ways (activations forward, gradients
 * back), so the offset that makes the quickest message as quick each way
 * is taken.  Then checks that the traces are one run: every action that
 * takes another rank's data starts (or, where its wait is not known, ends)
 * after that data was sent, within TFI_CLOCK_SLACK_US; with shared clocks
 * the steps of ranks that exchange data overlap in time; and the lag is at
 * most TFI_MAX_LAG_SHARE of the step.  Returns 0 with *out filled, or
 * TF_EINVAL saying which check failed, with the step, the files and the
 * actions, and that the traces look like different runs or unsynchronised
 * clocks (--p2p-ms sets the lag without reading the clocks); TF_ENOMEM. */
int tfi_clock_check(const tfi_run *run, const tf_schedule *s, tfi_clock *out, tf_error *err);

#endif
