/* plan_batch_time.c - a program a user might write against the installed
 * planner library: plans a profile and prints its planned batch time. */
#include <stdio.h>

#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/profile.h"

int main(int argc, char **argv)
{
    tf_profile profile;
    tf_plan plan;
    tf_plan_options options;
    tf_error err = {0};
    if (argc != 2 || tf_profile_load(argv[1], &profile, &err) != 0) {
        fprintf(stderr, "plan_batch_time: %s\n", argc == 2 ? err.msg : "usage: PROFILE");
        return 1;
    }
    tf_plan_options_init(&options);
    if (tf_plan_from_profile(&profile, &options, &plan, &err) != 0) {
        fprintf(stderr, "plan_batch_time: %s\n", err.msg);
        return 1;
    }
    printf("%.6f\n", plan.batch_ms_planned);
    tf_plan_free(&plan);
    tf_profile_free(&profile);
    return 0;
}
