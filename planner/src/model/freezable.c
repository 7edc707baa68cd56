/* freezable.c - which actions a plan may freeze (freezable.h). */
#include "freezable.h"

int tf_action_freezable(const tf_action *a, double max_ms, double min_ms)
{
    return (a->type == TF_ACT_B || a->type == TF_ACT_W) && min_ms < max_ms;
}
