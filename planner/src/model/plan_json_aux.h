/* plan_json_aux.h - plan.json's "aux" section and per-rank aux figures
 * (plan_json_aux.c).  Internal to the planner library. */
#ifndef TF_PLAN_JSON_AUX_H
#define TF_PLAN_JSON_AUX_H

#include "json_util.h"
#include "tf/plan.h"

/* With aux work, adds "aux" {margin, work, placed} to root and an "aux"
 * object of figures to each of per_rank's entries.  Returns 0 or
 * TF_ENOMEM. */
int tf_plan_json_add_aux(cJSON *root, const tf_plan *plan);

/* Reads "aux" (absent: none) into plan->aux_work, n_aux_work and
 * aux_margin; plan->schedule must be read.  "placed" and the per-rank
 * figures are recomputed from the plan, so only their shape is checked.
 * Errors name the field. */
int tf_plan_json_parse_aux(const tfj_ctx *ctx, const cJSON *root, tf_plan *plan,
                           tf_error *err);

#endif
