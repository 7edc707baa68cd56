/* plan.h - freeze plans (plan.json, docs/formats.md): what a plan holds,
 * plan files, and the summary printed by tf-plan.  Making one from a
 * profile is the planner's job (tf/planner.h).
 */
#ifndef TF_PLAN_H
#define TF_PLAN_H

#include <stdio.h>
#include "tf/aux.h"
#include "tf/error.h"
#include "tf/memory.h"
#include "tf/objective.h"
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
    double recompute_ratio; /* a backward an R serves: the share it recomputes; else 0 */
    int critical;         /* on a critical path of the planned schedule */
} tf_plan_action;

/* What one rank does with its step: idle time and, with memory, its bytes. */
typedef struct tf_plan_rank {
    double idle_ms_unfrozen;   /* batch time - busy time, unfrozen */
    double idle_ms_planned;    /* the same, planned */
    double *bubbles;           /* 2 x n_bubbles: the planned step's idle windows
                                * [start_ms, end_ms], leading and trailing ones
                                * included, in time order; they sum to idle_ms_planned */
    int n_bubbles;
    double static_bytes;       /* with memory: the rank's stages' static bytes */
    tf_memory_peak peak_unfrozen; /* with memory: the peak with nothing frozen or
                                   * recomputed (action: an index into the plan's
                                   * actions, -1 at the start) */
    tf_memory_peak peak_planned;  /* with memory: the peak under the plan */
} tf_plan_rank;

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
                                   * other one produced the plan (tf/freeze.h) */
    int solver_variables, solver_constraints;
    double solver_seconds;
    tf_plan_action *actions;      /* schedule.n_actions, same order as schedule.actions */
    tf_plan_rank *per_rank;       /* schedule.ranks */
    /* Memory (tf/memory.h): NULL when the profile had none. */
    tf_stage_memory *memory;      /* schedule.stages: the profile's bytes */
    int freeze_saves_memory;      /* 0: planned with tf-plan --no-freeze-memory */
    double *memory_limit;         /* schedule.ranks bytes; NULL: no limit */
    /* Aux work (tf/aux.h): the profile's items, the margin kept free in
     * each window, and where the work went; n_aux_work 0: none. */
    tf_aux_work *aux_work;
    int n_aux_work;
    double aux_margin;
    tf_aux_placement aux;
} tf_plan;

/* Serialises the plan as JSON (malloc'd, caller frees). */
int tf_plan_to_json(const tf_plan *plan, char **json, tf_error *err);

/* Writes plan.json atomically (temporary file + rename). */
int tf_plan_save(const tf_plan *plan, const char *path, tf_error *err);

/* How long action a lasts with nothing frozen or recomputed: its max_ms,
 * except an R (recomputation), which then does not run. */
double tf_plan_action_unfrozen_ms(const tf_plan_action *a);

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
