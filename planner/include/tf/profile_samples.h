/* profile_samples.h - a profile from measured samples: what tf-import makes
 * of torch.profiler traces and tf-exec of its own timed steps, built one
 * way (docs/formats.md, "Measured profiles").
 *
 * A sample is one duration of one action (or of one overlapped pair, timed
 * as one span) in one step of a run that froze every weight or none.  Per
 * action the builder takes the median of its samples, unfrozen and frozen;
 * per stage, the median of its actions' figures.  The median, not the
 * mean: on a shared machine a step now and then runs long for reasons that
 * have nothing to do with the action (another process, a page fault), and
 * the mean carries that delay into the plan while the median ignores it.
 */
#ifndef TF_PROFILE_SAMPLES_H
#define TF_PROFILE_SAMPLES_H

#include <stddef.h>

#include "tf/error.h"
#include "tf/profile.h"
#include "tf/schedule.h"

/* One measured duration. */
typedef struct tf_sample {
    int action;  /* index in the schedule's actions; with pair_spans, the first
                    action of an overlapped pair stands for the whole pair */
    int frozen;  /* 1: measured in a step with every weight frozen; 0: none frozen */
    double ms;   /* finite, >= 0 */
} tf_sample;

/* What the builder reads: the samples of runs of one schedule and how they
 * were timed.  Every pointer is the caller's, read only during the call. */
typedef struct tf_sample_set {
    const tf_schedule *schedule;
    const tf_sample *samples; /* n of them */
    size_t n;
    double max_freeze_ratio;  /* the cap written for every stage, in [0, 1] */
    int pair_spans;           /* 1: an overlapped pair is timed as one span, its
                                 samples on its first action (a profiler's view);
                                 0: each action of a pair is timed alone */
} tf_sample_set;

/* No schedule and no samples, cap TF_DEFAULT_CAP, pairs timed action by
 * action (pair_spans 0). */
void tf_sample_set_init(tf_sample_set *in);

/* What the builder had to decide for itself, for the caller to report. */
typedef struct tf_sample_report {
    int capped;       /* frozen figures above their unfrozen one, set equal to it
                         (noise inverts them) */
    int defaulted;    /* freezable actions and pairs without a frozen sample:
                         B x 0.5 and W x 0.01 (the reference's defaults; a pair
                         is left for the planner to split, profile.h) */
    int split_stages; /* stages without a full backward of their own (split,
                         or every B in a pair span): backward_ms = I + W */
} tf_sample_report;

/* The median of x[0..n-1] (sorting x), the one statistic the builder uses
 * over steps and over a stage's actions; 0 when n < 1. */
double tf_sample_statistic(double *x, int n);

/* Builds *out from in->samples[0..in->n - 1] of in->schedule:
 *  - out->schedule: a copy of in->schedule;
 *  - per action, an override with the median of its unfrozen samples and,
 *    for B and W, of its frozen ones; F and I do not change when frozen,
 *    so their samples of both kinds count together (so do a pair span's
 *    whose backward is an I).  With pair_spans, a pair becomes a measured
 *    pair (out->pairs) instead of two overrides, its frozen time -1 when
 *    it has no frozen sample;
 *  - per stage, the median of the per-action figures of each type over
 *    the actions timed alone (not in a pair span), and every cap
 *    in->max_freeze_ratio; p2p_ms, microbatch_tokens and parameters are 0,
 *    the caller's to fill.
 * report (may be NULL) receives the counts it describes.  Returns 0 with
 * *out owning its memory (tf_profile_free), or TF_EINVAL naming the field,
 * the sample index or the action (no schedule, samples NULL with n > 0, a
 * cap outside [0, 1], an action out of range, a negative or non-finite ms,
 * a sample on the second action of a pair with pair_spans, an action or
 * pair without an unfrozen sample, a median above TF_MAX_DURATION_MS), or
 * TF_ENOMEM; *out is zeroed on error. */
int tf_profile_from_samples(const tf_sample_set *in, tf_profile *out, tf_sample_report *report,
                            tf_error *err);

#endif
