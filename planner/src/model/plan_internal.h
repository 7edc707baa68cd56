/* plan_internal.h - what the plan's files (plan.c, plan_json.c) and the
 * planner (pipeline/plan_from_profile.c) share.  Internal to the planner
 * library. */
#ifndef TF_PLAN_INTERNAL_H
#define TF_PLAN_INTERNAL_H

#include "tf/dag.h"
#include "tf/memory.h"
#include "tf/plan.h"

/* A plan's per-action arrays (g->n each; recompute may be NULL: none). */
typedef struct tf_plan_arrays {
    const double *max_ms, *min_ms;  /* an R's: its duration at q = 1, and 0 */
    const double *ratio, *recompute, *duration, *start;
} tf_plan_arrays;

/* Fills plan->actions from the schedule and the arrays, then the critical
 * flags, the freeze statistics, the throughput and plan->per_rank (idle
 * time, bubbles, with plan->memory the peaks, with aux work its
 * placement).  plan->schedule, the
 * caps, the memory fields and the three batch times must be set, and
 * plan->actions allocated; critical is the caller's scratch of n bytes.  A
 * plan read from a file and one just solved get their figures from this
 * one place, so both say the same.  Returns 0, TF_EINVAL (a memory model
 * that cannot be built: a forward without its backward) or TF_ENOMEM. */
int tf_plan_fill(tf_plan *plan, const tf_dag *g, const tf_plan_arrays *a,
                 unsigned char *critical, tf_error *err);

/* Places plan->aux_work into the ranks' bubbles (plan->per_rank must be
 * filled) into plan->aux (tf/aux.h says how).  Returns 0 or TF_ENOMEM. */
int tf_plan_place_aux(tf_plan *plan, tf_error *err);

/* The memory model of a plan's schedule, as the planner built it: the
 * stages' bytes, freeze_saves_memory, and the caps (a stage capped at 0
 * never freezes).  Returns as tf_memory_model_build. */
int tf_plan_memory_model(const tf_plan *plan, tf_memory_model *out, tf_error *err);

#endif
