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
    tf_freeze_control control;    /* time limit, fallback to the other solver, progress */
} tf_plan_options;

/* Defaults: least-freeze, caps from the profile, no per-action cap, solver
 * auto, and tf_freeze_control_init's control (no time limit, fallback,
 * silent). */
void tf_plan_options_init(tf_plan_options *o);

/* Builds the DAG of p->schedule, computes the unfrozen and all-frozen
 * bounds, solves the freeze LP with o->solver (o may be NULL: the
 * defaults) through tf_freeze_solve and fills *out (tf_plan_free);
 * out->solver_name is the solver that actually ran.  Returns 0, TF_ECYCLE
 * (deadlocking order), TF_EINVAL (max_action_ratio outside (0, 1]),
 * TF_ESOLVER or TF_ENOMEM; *out is zeroed on error. */
int tf_plan_from_profile(const tf_profile *p, const tf_plan_options *o, tf_plan *out,
                         tf_error *err);

/* The unfrozen schedule of a profile as a plan (every ratio 0, no LP), for
 * drawing a profile.  Same returns as tf_plan_from_profile. */
int tf_plan_unfrozen(const tf_profile *p, tf_plan *out, tf_error *err);

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
