/* plan_internal.h - what the plan's files (plan.c, plan_json.c) and the
 * planner (pipeline/plan_from_profile.c) share.  Internal to the planner
 * library. */
#ifndef TF_PLAN_INTERNAL_H
#define TF_PLAN_INTERNAL_H

#include "tf/dag.h"
#include "tf/plan.h"

/* Fills plan->actions from the schedule and the per-action arrays (g->n
 * each), then the critical flags, the freeze statistics and the
 * throughput.  plan->schedule, the caps and the three batch times must be
 * set, and plan's arrays allocated; critical is the caller's scratch of n
 * bytes.  A plan read from a file and one just solved get their figures
 * from this one place, so both say the same.  Returns 0 or TF_ENOMEM. */
int tf_plan_fill(tf_plan *plan, const tf_dag *g, const double *max_ms, const double *min_ms,
                 const double *ratio, const double *duration, const double *start,
                 unsigned char *critical);

#endif
