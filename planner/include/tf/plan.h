/* plan.h - freeze plans (plan.json, docs/formats.md): the planner's pipeline
 * from profile to plan, plan files, and the summary printed by tf-plan.
 */
#ifndef TF_PLAN_H
#define TF_PLAN_H

#include <stdio.h>
#include "tf/error.h"
#include "tf/freeze.h"
#include "tf/profile.h"
#include "tf/schedule.h"

/* The largest plan.json read: tf-plan writes about 280 bytes per action,
 * 37 MB for TF_MAX_ACTIONS. */
#define TF_MAX_PLAN_BYTES ((size_t)64 << 20)

typedef struct tf_plan_action {
    tf_action action;     /* type, stage, microbatch, rank */
    double start_ms;      /* planned start */
    double ms;            /* planned duration */
    double max_ms;        /* unfrozen duration */
    double min_ms;        /* fully frozen duration */
    double freeze_ratio;  /* 0 for F, I and fixed-duration actions */
    int critical;         /* on a critical path of the planned schedule */
} tf_plan_action;

typedef struct tf_plan {
    tf_schedule schedule;         /* actions in plan order (rank by rank) */
    double microbatch_tokens;     /* 0 if unknown */
    double p2p_ms;
    double *max_freeze_ratio;     /* schedule.stages caps */
    double max_action_ratio;      /* no action's ratio above it; 1: no such cap */
    tf_objective objective;
    double batch_ms_unfrozen, batch_ms_all_frozen, batch_ms_planned;
    double speedup;               /* unfrozen / planned */
    double tokens_per_s_unfrozen, tokens_per_s_planned; /* 0 if tokens unknown */
    double freeze_ratio_mean;     /* mean over freezable actions */
    double *freeze_ratio_stage;   /* schedule.stages: mean over each stage's freezable actions */
    char solver_name[32];         /* solver that produced the plan: "lp_solve" or "fast";
                                   * "none" for an unfrozen plan */
    char solver_version[32];      /* lp_solve's version for "lp_solve"; the planner's
                                   * (TF_VERSION) for "fast"; "" for "none" */
    char solver_requested[32];    /* the --solver asked for: "auto", "lp_solve" or "fast";
                                   * "" when unknown (plans written before it existed) */
    char solver_status[32];
    char solver_fallback[512];    /* "" or why the solver tried first failed, when the
                                   * other one produced the plan (tf_freeze_solve) */
    int solver_variables, solver_constraints;
    double solver_seconds;
    tf_plan_action *actions;      /* schedule.n_actions, same order as schedule.actions */
} tf_plan;

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

/* The planner: builds the DAG of p->schedule, computes the unfrozen and
 * all-frozen bounds, solves the freeze LP with o->solver (o may be NULL:
 * the defaults) through tf_freeze_solve and fills *out (tf_plan_free);
 * out->solver_name is the solver that actually ran.  Returns 0, TF_ECYCLE
 * (deadlocking order), TF_ESOLVER or TF_ENOMEM; *out is zeroed on error. */
int tf_plan_from_profile(const tf_profile *p, const tf_plan_options *o, tf_plan *out,
                         tf_error *err);

/* The unfrozen schedule of a profile as a plan (every ratio 0, no LP), for
 * drawing a profile.  Same returns as tf_plan_from_profile. */
int tf_plan_unfrozen(const tf_profile *p, tf_plan *out, tf_error *err);

/* Serialises the plan as JSON (malloc'd, caller frees). */
int tf_plan_to_json(const tf_plan *plan, char **json, tf_error *err);

/* Writes plan.json atomically (temporary file + rename). */
int tf_plan_save(const tf_plan *plan, const char *path, tf_error *err);

/* Parses and validates plan JSON: format/version, counts, every action
 * present once and consistent with the schedule shape, times finite and
 * non-negative, min <= ms <= max, ratios in [0,1].  Errors name the path. */
int tf_plan_parse(const char *json, const char *where, tf_plan *out, tf_error *err);
/* Reads path (at most TF_MAX_PLAN_BYTES) and parses it. */
int tf_plan_load(const char *path, tf_plan *out, tf_error *err);

/* Prints the human-readable summary tf-plan shows. */
void tf_plan_print_summary(const tf_plan *plan, FILE *f);

void tf_plan_free(tf_plan *plan);

#endif
