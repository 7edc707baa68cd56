/* planner.h - the planner: from a profile to a freeze plan, in one call.
 *
 * tf_plan_from_profile does what tf-plan does between reading the profile
 * and writing the plan: the durations, the DAG, the unfrozen and all-frozen
 * bounds, the freeze LP (tf/freeze.h) and the plan's figures (tf/plan.h).
 */
#ifndef TF_PLANNER_H
#define TF_PLANNER_H

#include "tf/error.h"
#include "tf/freeze.h"
#include "tf/objective.h"
#include "tf/plan.h"
#include "tf/profile.h"

typedef struct tf_plan_options {
    tf_objective objective;
    double max_freeze_ratio;      /* < 0: use the profile's caps */
    /* In (0, 1]: no action's ratio above it (1, the default: none).  A
     * stage cap alone lets the LP freeze some microbatches' backwards
     * entirely, which drops those microbatches' weight gradients: in
     * fine-tuning that costs far more accuracy than the same mean ratio
     * spread out (docs/accuracy.md). */
    double max_action_ratio;
    tf_solver solver;             /* TF_SOLVER_AUTO: picked by size (tf/freeze.h) */
    tf_freeze_control control;    /* time limit, fallback to another solver, progress */
    /* > 0: every rank's memory limit in bytes, over the profile's
     * memory_limit_bytes (which needs the profile's memory fields); 0: the
     * profile's, if any. */
    double memory_limit;
    /* 1 (the default): a frozen backward's forward keeps only what its
     * input gradient needs (tf/memory.h); 0: freezing saves no memory, to
     * see what it buys. */
    int freeze_saves_memory;
    /* The share of each bubble kept free when aux work is placed in it
     * (tf/aux.h), in [0, TF_AUX_MAX_MARGIN]. */
    double aux_margin;
} tf_plan_options;

/* Defaults: least-freeze, caps from the profile, no per-action cap, solver
 * auto, tf_freeze_control_init's control (no time limit, fallback,
 * silent), the profile's memory limit, freezing saving memory, aux work
 * placed with TF_AUX_DEFAULT_MARGIN. */
void tf_plan_options_init(tf_plan_options *o);

/* Builds the DAG of p->schedule, computes the unfrozen and all-frozen
 * bounds, solves the freeze LP with o->solver (o may be NULL: the
 * defaults) through tf_freeze_solve and fills *out (tf_plan_free);
 * out->solver_name is the solver that actually ran.  With the profile's
 * memory fields the plan carries each rank's peak bytes; with a limit that
 * some rank exceeds unfrozen, the LP keeps every rank within it, freezing
 * and, for stages that can recompute, placing R actions before their
 * backwards (docs/planner.md, "Memory").  Returns 0, TF_ECYCLE
 * (deadlocking order), TF_EINVAL (max_action_ratio outside (0, 1]; a
 * memory limit without memory fields, below a rank's static bytes, or
 * that no plan meets: the message names the rank, its smallest achievable
 * peak and the limit), TF_ESOLVER or TF_ENOMEM; *out is zeroed on error. */
int tf_plan_from_profile(const tf_profile *p, const tf_plan_options *o, tf_plan *out,
                         tf_error *err);

/* The smallest memory limit, the same on every rank, under which o's plan
 * of p exists: the largest over the ranks of the smallest peak freezing
 * (within the caps, o's per-action cap and whether freezing saves memory)
 * and recomputation can reach, and at least every rank's static bytes.
 * Returns 0 with *bytes, TF_EINVAL (a profile without memory fields),
 * TF_ESOLVER or TF_ENOMEM. */
int tf_plan_memory_floor(const tf_profile *p, const tf_plan_options *o, double *bytes,
                         tf_error *err);

/* The unfrozen schedule of a profile as a plan (every ratio 0, no LP), for
 * drawing a profile.  Same returns as tf_plan_from_profile. */
int tf_plan_unfrozen(const tf_profile *p, tf_plan *out, tf_error *err);

/* The least batch time as a function of one limit (a trade-off curve):
 * the largest freeze ratio an action may take (o's max_action_ratio, from
 * 0 to 1), or the memory limit of every rank (from the smallest any plan
 * meets, tf_plan_memory_floor, to the largest unfrozen peak, above which
 * it binds nowhere).  Either is a right-hand side of the freeze LP, so the
 * curve is convex and piecewise linear; points holds its two ends and
 * every breakpoint between, in increasing x, each the plan at that x. */
typedef enum { TF_PARETO_ACTION_RATIO = 0, TF_PARETO_MEMORY = 1 } tf_pareto_axis;

typedef struct tf_pareto_point {
    double x;                 /* the per-action cap, or the memory limit in bytes */
    double batch_ms;          /* the least batch time there */
    double freeze_ratio_mean; /* the plan's mean freeze ratio there (least freezing) */
    double recompute_sum;     /* the plan's total recompute ratio there */
} tf_pareto_point;

typedef struct tf_pareto {
    tf_pareto_axis axis;
    tf_pareto_point *points;
    int n;
    int solves;               /* plans solved to find them */
    double batch_ms_unfrozen; /* nothing frozen or recomputed, for speedups */
} tf_pareto;

/* Fills *out (tf_pareto_free) for profile p planned with options o (NULL:
 * the defaults; its value of the swept limit is ignored).  Returns 0,
 * TF_EINVAL (the memory axis without memory fields), TF_ESOLVER (a solve
 * failed, or more than 400 were needed) or TF_ENOMEM. */
int tf_plan_pareto(const tf_profile *p, const tf_plan_options *o, tf_pareto_axis axis,
                   tf_pareto *out, tf_error *err);

void tf_pareto_free(tf_pareto *pa);

/* Aux work (tf/aux.h) against freezing: how much of it each step's
 * bubbles take, and how often it completes. */
typedef struct tf_aux_arm {
    double max_action_ratio; /* the per-action cap it was planned with (0: no freezing) */
    double batch_ms;
    double demand_ms;        /* one step's aux work, all ranks */
    double placed_ms;        /* placed in the step itself, all ranks */
    int refresh_steps;       /* the slowest rank's (tf_aux_rank); 0: never completes */
} tf_aux_arm;

typedef struct tf_aux_comparison {
    /* [0] no freezing; [1] o's plan; [2] the most freezing (the largest
     * per-action cap, by bisection) whose refresh interval is no longer
     * than [0]'s, or [1] when it already is */
    tf_aux_arm arm[3];
    int never_completes;     /* 1: an item fits no bubble, at any cap ([2] = [0]) */
} tf_aux_comparison;

/* Fills *out for profile p planned with options o (NULL: the defaults).
 * Returns 0, TF_EINVAL (p declares no aux work), or tf_plan_from_profile's
 * errors. */
int tf_plan_compare_aux(const tf_profile *p, const tf_plan_options *o, tf_aux_comparison *out,
                        tf_error *err);

/* Sets up lp_solve's process-wide state: call it once, from one thread,
 * before threads that plan or solve in parallel start (tf-study's workers
 * do).  Every solve builds its own lp_solve model, but the first model
 * lp_solve ever builds, and its first basis factorisation, set the library's
 * BLAS function pointers; two threads doing that at once race.  One tiny
 * solve here does it, so later solves only read them.  Calling it again is
 * harmless; single-threaded programs need not call it.  Returns 0, or
 * TF_ENOMEM when lp_solve could not build that model (then nothing was set
 * up). */
int tf_planner_init(void);

#endif
