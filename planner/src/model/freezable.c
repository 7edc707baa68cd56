/* freezable.c - which actions a plan may freeze (freezable.h). */
#include "freezable.h"

int tf_action_freezable(const tf_action *a, double max_ms, double min_ms)
{
    return (a->type == TF_ACT_B || a->type == TF_ACT_W) && min_ms < max_ms;
}

void tf_freezable_mark(const tf_schedule *s, const double *max_ms, const double *min_ms,
                       const tf_memory_model *memory, unsigned char *out)
{
    for (int i = 0; i < s->n_actions; i++)
        out[i] = (unsigned char)tf_action_freezable(&s->actions[i], max_ms[i], min_ms[i]);
    for (int k = 0; memory && k < memory->n_events; k++)
        if (memory->events[k].freeze_action >= 0)
            out[memory->events[k].freeze_action] = 1;
}
