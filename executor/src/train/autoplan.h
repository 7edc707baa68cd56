/* autoplan.h - tf-exec --auto-plan: which phase each step of a run is in,
 * the measurements that make its plans, the LP solved inside the run, and
 * the re-plans when the clock drifts from the plan (internal to the
 * executor; train.c runs the steps).
 *
 * Phases, by step: `warmup` (--warmup steps unfrozen), `measure-unfrozen` and
 * `measure-frozen` alternating (--profile-steps of each, every tensor frozen
 * in the second kind), then the plan: `ramp` (its ratios scaled up over
 * --ramp steps) and `frozen`.  After the last measuring step the profile is
 * built as --profile-out builds it, solved by the planner library as tf-plan
 * solves it (process 0 of a launched run solves and sends the plan to the
 * others), and written with --profile-out / --plan-out.
 *
 * Re-planning: after each step with a plan, every stage's measured compute
 * time is compared with what the plan expects for the tensors that step
 * really froze; when some stage is off by more than --replan-threshold (a
 * share of the expected time) for --replan-patience steps in a row, and the
 * plan has been in use for --replan-interval steps, the next --replan-steps
 * pairs of steps measure again and a new plan replaces the old one (no ramp).
 * Every process of a launched run has the same action times and masks, so
 * all take the same decisions at the same step.
 */
#ifndef TFX_AUTOPLAN_H
#define TFX_AUTOPLAN_H

#include "exec_internal.h"
#include "measure.h"
#include "tf/plan.h"

typedef enum {
    TFX_PHASE_WARMUP = 0,
    TFX_PHASE_MEASURE_UNFROZEN,
    TFX_PHASE_MEASURE_FROZEN,
    TFX_PHASE_RAMP,
    TFX_PHASE_FROZEN
} tfx_phase;

/* The phase's name in the log and the progress ("measure-frozen", ...). */
const char *tfx_phase_name(tfx_phase ph);

typedef struct tfx_autoplan {
    const tfx_exec_options *o;
    tfx_measure m;
    long measure_from;    /* first step of the measurement under way, -1 none */
    int measure_pairs;    /* its steps of each kind */
    long plan_step;       /* the first step with a plan, -1 before */
    long last_plan_step;  /* the step from which the plan in use applies */
    int plans;            /* plans solved */
    int drifting;         /* steps in a row beyond the threshold */
    double drift;         /* the last step's: measured / expected - 1 of ... */
    int drift_stage;      /* ... this stage, the one furthest from the plan (-1: none) */
    double *measured, *expected; /* per stage: scratch of the drift */
    char reason[256];     /* why the measurement under way started */
    char event[512];      /* what the last step led to, for the log ("" nothing) */
} tfx_autoplan;

/* Checks the auto-plan options against the run (enough --steps for the
 * warm-up and the measuring, a cap in [0, 1]) and prepares the first
 * measurement for schedule s (kept by reference).  Returns 0, TF_EINVAL
 * naming the options, or TF_ENOMEM; release with tfx_autoplan_close. */
int tfx_autoplan_open(tfx_autoplan *a, const tfx_exec_options *o, const tf_schedule *s,
                      tf_error *err);
void tfx_autoplan_close(tfx_autoplan *a);

/* The phase of `step` (0-based) and the share of the plan's ratios it
 * applies (0 while warming up or measuring). */
tfx_phase tfx_autoplan_phase(const tfx_autoplan *a, long step, double *factor);

/* After `step` ran in phase ph with result res, the freezing `mask`
 * (microbatch x tensor) and the plan in use (NULL before the first):
 * measures, or watches the drift from the plan and starts a re-plan's
 * measurement, or, after the last measuring step, solves and shares a plan:
 * then *solved = 1 and *out holds it (the caller's, tf_plan_free), else
 * *solved = 0.  a->event says what happened.  Returns 0 or the first error
 * (the solver's TF_ESOLVER, a file, the launched run's transport). */
int tfx_autoplan_after_step(tfx_autoplan *a, tfx_exec_run *r, long step, tfx_phase ph,
                            const tfx_step_result *res, const tf_plan *plan,
                            const unsigned char *mask, tf_plan *out, int *solved,
                            tf_error *err);

#endif
