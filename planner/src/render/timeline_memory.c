/* timeline_memory.c - each rank's live bytes over a drawn step: the
 * plan's memory events (tf/memory.h) placed on the panel's time axis, for
 * the memory lanes of the timeline and the counters of the Chrome trace.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/plan_internal.h"
#include "timeline_internal.h"

/* When event e takes effect on panel p's time axis: the model counts an
 * action's change as done once it has run, except what a backward brings
 * back or holds on top before it frees anything (tf/memory.h). */
static double event_ms(const tl_panel *p, const tf_memory_event *e)
{
    return p->start[e->action] + (e->at_start ? 0.0 : p->ms[e->action]);
}

/* Rank r's curve under ratios f and q (NULL: none) into *curve. */
static int rank_curve(const tl_panel *p, const tf_memory_model *mm, int r,
                      const double *f, const double *q, tl_memory_curve *curve)
{
    int first = mm->event_offset[r], count = mm->event_offset[r + 1] - first;
    curve->t = malloc(((size_t)count + 1) * sizeof *curve->t);
    curve->bytes = malloc(((size_t)count + 1) * sizeof *curve->bytes);
    if (!curve->t || !curve->bytes)
        return TF_ENOMEM;
    curve->t[0] = 0.0;
    curve->bytes[0] = mm->static_bytes[r];
    curve->n = count + 1;
    curve->peak = 0;
    for (int k = 1; k <= count; k++) {
        const tf_memory_event *e = &mm->events[first + k - 1];
        curve->t[k] = fmax(curve->t[k - 1], event_ms(p, e));
        curve->bytes[k] = curve->bytes[k - 1] + tf_memory_event_delta(e, f, q);
        if (curve->bytes[k] > curve->bytes[curve->peak])
            curve->peak = k;
    }
    return 0;
}

/* The plan's recompute ratios (malloc'd; NULL when out of memory). */
static double *recompute_ratios(const tf_plan *plan)
{
    int n = plan->schedule.n_actions;
    double *q = malloc(((size_t)n + 1) * sizeof *q);
    for (int i = 0; q && i < n; i++)
        q[i] = plan->actions[i].recompute_ratio;
    return q;
}

int tl_memory_build(const tl_model *m, tl_panel *p, tf_error *err)
{
    const tf_plan *plan = m->plan;
    p->memory = NULL;
    if (!plan->memory)
        return 0;
    tf_memory_model mm;
    int rc = tf_plan_memory_model(plan, &mm, err);
    if (rc)
        return rc;
    int planned = !strcmp(p->id_prefix, "p");
    double *q = planned ? recompute_ratios(plan) : NULL;
    p->memory = calloc((size_t)plan->schedule.ranks + 1, sizeof *p->memory);
    rc = !p->memory || (planned && !q) ? TF_ENOMEM : 0;
    for (int r = 0; r < plan->schedule.ranks && !rc; r++)
        rc = rank_curve(p, &mm, r, planned ? p->ratio : NULL, q, &p->memory[r]);
    free(q);
    tf_memory_model_free(&mm);
    return rc ? tf_fail(err, rc, "out of memory drawing the memory of %d ranks",
                        plan->schedule.ranks)
              : 0;
}

void tl_memory_free(tl_panel *p, int ranks)
{
    for (int r = 0; p->memory && r < ranks; r++) {
        free(p->memory[r].t);
        free(p->memory[r].bytes);
    }
    free(p->memory);
    p->memory = NULL;
}

double tl_memory_max_bytes(const tl_model *m)
{
    const tf_plan *plan = m->plan;
    double most = 0.0;
    for (int r = 0; plan->memory && r < plan->schedule.ranks; r++) {
        for (int k = 0; k < m->n_panels; k++) {
            const tl_memory_curve *c = &m->panels[k].memory[r];
            most = fmax(most, c->bytes[c->peak]);
        }
        if (plan->memory_limit)
            most = fmax(most, plan->memory_limit[r]);
    }
    return most;
}

/* The backward on action i's rank that its R serves (the B or I of the
 * same stage and microbatch), or -1. */
static int served_backward(const tl_model *m, int i)
{
    const tf_schedule *s = &m->plan->schedule;
    const tf_action *a = &s->actions[i];
    for (int k = s->rank_offset[a->rank]; k < s->rank_offset[a->rank + 1]; k++) {
        const tf_action *b = &s->actions[k];
        if ((b->type == TF_ACT_B || b->type == TF_ACT_I) && b->stage == a->stage &&
            b->microbatch == a->microbatch)
            return k;
    }
    return -1;
}

double tl_recompute_ratio(const tl_model *m, const tl_panel *p, int i)
{
    if (p != &m->panels[m->n_panels - 1])
        return 0.0;
    int served = m->plan->actions[i].action.type == TF_ACT_R ? served_backward(m, i) : i;
    return served >= 0 ? m->plan->actions[served].recompute_ratio : 0.0;
}
