/* bench_profile.h - synthetic profiles for the benchmarks (bench-plan,
 * bench-solvers): a built-in schedule with measured-looking per-action
 * times, as tf-exec --profile-out would write them.
 *
 * Times are seeded (the same arguments give the same profile on every
 * machine) and vary by stage and by action, so the freeze LP has no large
 * families of tied vertices: stage s has forward 14-16 ms and backward
 * 40-46 ms (frozen: 0.45 x backward); each action's time is its stage's
 * x 0.95-1.05, a B's frozen time 0.40-0.50 x its time.  Split-backward
 * schedules get I = W = backward / 2, each W's frozen time 0.01-0.05 x its
 * time.  Every stage's freeze cap is 0.8, p2p lag 0, 8,192 tokens per
 * microbatch.  For 1F1B these are exactly bench-plan's historical profiles.
 */
#ifndef TF_BENCH_PROFILE_H
#define TF_BENCH_PROFILE_H

#include "tf/error.h"
#include "tf/plan.h"
#include "tf/profile.h"

/* The microbatch count that gives about `actions` actions for the built-in
 * schedule `schedule` on ranks x stages_per_rank stages: actions / (stages x
 * actions per microbatch and stage: 2, or 3 when the backward is split),
 * rounded down to a multiple of ranks for the interleaved schedules (which
 * PyTorch requires once there are more microbatches than ranks).  Returns 0
 * with *microbatches set, or TF_EINVAL naming the schedule and the count when
 * `actions` is too small for one microbatch or the name is not built in. */
int bench_microbatches_for(const char *schedule, int ranks, int stages_per_rank, int actions,
                           int *microbatches, tf_error *err);

/* Builds the profile described at the top of this file for the built-in
 * schedule (any letter case) with the given shape.  On success *p owns its
 * memory (tf_profile_free) and has one override per action.  Returns 0,
 * TF_EINVAL from tf_schedule_build (a shape the schedule cannot run, with
 * the reason) or TF_ENOMEM; on error *p is freed and zeroed. */
int bench_make_profile(const char *schedule, int ranks, int stages_per_rank, int microbatches,
                       tf_profile *p, tf_error *err);

/* Drops the per-action times of a bench_make_profile profile: every action
 * then takes its stage's time, the shape tf-study and stage-level profiles
 * give (every microbatch alike, so the LP is far more degenerate). */
void bench_stage_times_only(tf_profile *p);

/* Gives p memory (tf/memory.h) and a limit that binds: every stage holds
 * 20 GiB static, 2 GiB of activations per microbatch (1.2 GiB when its
 * backward is fully frozen), 1 GiB of weight gradients from I to W, a
 * 0.25 GiB checkpoint and recompute_ms = its forward_ms; every rank's
 * limit lies `share` (in (0, 1)) of the way from the smallest limit any
 * plan meets (tf_plan_memory_floor) to the largest unfrozen peak, so the
 * deeper ranks must freeze or recompute.  Returns 0, or the planner's
 * error; on error p keeps no memory. */
int bench_add_memory(tf_profile *p, double share, tf_error *err);

/* A planned memory limit's rows, counted from the plan (its schedule,
 * bytes, caps and ratios: the events the LP builds its rows from; R actions
 * that recompute nothing are left out of a plan, and so are their rows).
 * The LP keeps a running sum of each rank's changes, one equality row per
 * event, and bounds it by the limit at every event that can raise it: those
 * bounds are the rows counted. */
typedef struct bench_memory_rows {
    int rows;          /* events that can raise a rank's live bytes: one bound each */
    int at_limit;      /* of those, the ones the plan's ratios leave within 1e-7 of the
                        * limit (relative): the rows that can bind at its optimum */
    int most_on_rank;  /* the largest at_limit of one rank */
} bench_memory_rows;

/* Counts plan's memory rows into *out (all zero when the plan has no
 * limit, or one that every unfrozen peak meets: the LP then has no memory
 * rows).  Returns 0, or TF_ENOMEM / the model's error. */
int bench_count_memory_rows(const tf_plan *plan, bench_memory_rows *out, tf_error *err);

#endif
