/* plan_json_ranks.h - plan.json's per-rank figures and its memory section
 * (plan_json_ranks.c), beside the rest of the plan's JSON (plan_json.c).
 * Internal to the planner library. */
#ifndef TF_PLAN_JSON_RANKS_H
#define TF_PLAN_JSON_RANKS_H

#include "json_util.h"
#include "tf/plan.h"

/* Adds "per_rank" (always) and, when the plan has memory, "memory" to
 * root.  Returns 0 or TF_ENOMEM. */
int tf_plan_json_add_ranks(cJSON *root, const tf_plan *plan);

/* Reads "memory" (absent: a plan without memory) into plan->memory,
 * freeze_saves_memory and memory_limit; plan->schedule must be read.
 * "per_rank" is recomputed from the actions, so only its fields are
 * checked.  Errors name the field. */
int tf_plan_json_parse_ranks(const tfj_ctx *ctx, const cJSON *root, tf_plan *plan,
                             tf_error *err);

/* After the figures are recomputed: every rank's planned peak within its
 * limit, else TF_EINVAL naming the rank (a plan edited by hand, or run
 * against other bytes, must not be executed as if it fitted). */
int tf_plan_check_limits(const tf_plan *plan, const char *where, tf_error *err);

#endif
