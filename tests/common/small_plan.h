/* small_plan.h - a real plan from the planner for the executor's tests
 * (cmocka; include test_util.h first). */
#ifndef TF_SMALL_PLAN_H
#define TF_SMALL_PLAN_H

#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/profile.h"

/* The plan tf-plan makes for 1F1B on 2 ranks with 4 microbatches, stage
 * times F/B/B-frozen 1/3/1.5 and 2/4/2 ms and a freeze cap of 0.8.  Fails
 * the test when the planner refuses.  Free with tf_plan_free. */
static inline void small_1f1b_plan(tf_plan *plan)
{
    const char *json =
        "{\"format\": \"tf-profile\", \"version\": 1, \"schedule\": \"1F1B\", \"ranks\": 2,"
        " \"stages_per_rank\": 1, \"microbatches\": 4, \"max_freeze_ratio\": 0.8,"
        " \"stages\": [{\"forward_ms\": 1, \"backward_ms\": 3, \"backward_frozen_ms\": 1.5},"
        "              {\"forward_ms\": 2, \"backward_ms\": 4, \"backward_frozen_ms\": 2}]}";
    tf_profile prof;
    tf_plan_options po;
    tf_error err = {0};
    tf_plan_options_init(&po);
    if (tf_profile_parse(json, "profile", &prof, &err))
        fail_msg("profile: %s", err.msg);
    if (tf_plan_from_profile(&prof, &po, plan, &err))
        fail_msg("plan: %s", err.msg);
    tf_profile_free(&prof);
}

#endif
