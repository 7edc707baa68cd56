/* plan_aux.c - a plan's aux work as items ready at its actions' ends,
 * placed rank by rank into its bubbles (aux_place.c). */
#include <stdlib.h>

#include "aux_place.h"
#include "plan_internal.h"

/* Whether aux work `after` follows action a (of the work's stage).  A
 * microbatch's backward is a B or an I and a W, never both, so "after B"
 * is its B or I and "after W" its W or B. */
static int follows(tf_aux_after after, const tf_action *a)
{
    switch (after) {
    case TF_AUX_AFTER_F: return a->type == TF_ACT_F;
    case TF_AUX_AFTER_B: return a->type == TF_ACT_B || a->type == TF_ACT_I;
    case TF_AUX_AFTER_W: return a->type == TF_ACT_W || a->type == TF_ACT_B;
    default: return 0;
    }
}

/* The end of the last backward of `stage` on the rank's actions
 * [first, last), where once-per-step work becomes ready. */
static double last_backward_end(const tf_plan *plan, int first, int last, int stage)
{
    double end = 0.0;
    for (int i = first; i < last; i++) {
        const tf_plan_action *a = &plan->actions[i];
        if (a->action.stage == stage && a->action.type != TF_ACT_F && a->action.type != TF_ACT_R &&
            a->start_ms + a->ms > end)
            end = a->start_ms + a->ms;
    }
    return end;
}

/* Rank r's items: each work item of a stage on r, once per action it
 * follows or once per step.  Returns the count, or -1 out of memory. */
static int rank_items(const tf_plan *plan, int r, tf_aux_item **out)
{
    const tf_schedule *s = &plan->schedule;
    const int first = s->rank_offset[r], last = s->rank_offset[r + 1];
    int n = 0, cap = 0;
    tf_aux_item *items = NULL;
    for (int k = 0; k < plan->n_aux_work; k++) {
        const tf_aux_work *w = &plan->aux_work[k];
        if (s->stage_rank[w->stage] != r)
            continue;
        for (int i = first; i <= last; i++) {
            int once = w->after == TF_AUX_AFTER_STEP;
            if (once ? i != last
                     : i == last || plan->actions[i].action.stage != w->stage ||
                           !follows(w->after, &plan->actions[i].action))
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                tf_aux_item *grown = realloc(items, (size_t)cap * sizeof *grown);
                if (!grown) {
                    free(items);
                    return -1;
                }
                items = grown;
            }
            const tf_plan_action *a = &plan->actions[i < last ? i : first];
            items[n++] = (tf_aux_item){
                k, once ? -1 : a->action.microbatch,
                once ? last_backward_end(plan, first, last, w->stage) : a->start_ms + a->ms,
                w->ms, w->divisible};
        }
    }
    *out = items;
    return n;
}

int tf_plan_place_aux(tf_plan *plan, tf_error *err)
{
    const int ranks = plan->schedule.ranks;
    int capacity = 0, rc = 0;
    tf_aux_placement_free(&plan->aux);
    plan->aux.ranks = ranks;
    plan->aux.per_rank = calloc((size_t)ranks + 1, sizeof *plan->aux.per_rank);
    if (!plan->aux.per_rank)
        return tf_fail(err, TF_ENOMEM, "out of memory placing the aux work");
    for (int r = 0; r < ranks && !rc; r++) {
        tf_aux_item *items = NULL;
        int n = rank_items(plan, r, &items);
        if (n < 0)
            return tf_fail(err, TF_ENOMEM, "out of memory placing the aux work");
        const tf_plan_rank *pr = &plan->per_rank[r];
        tf_aux_rank_input in = {r, items, n, pr->bubbles, pr->n_bubbles, plan->aux_margin,
                                TF_AUX_MAX_STEPS};
        rc = tf_aux_place_rank(&in, &plan->aux, &capacity, err);
        free(items);
    }
    return rc;
}
