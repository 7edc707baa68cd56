/* plan_json_aux.c - a plan's aux work in plan.json (formats.md): the
 * items and margin it was placed with, where each piece went, and each
 * rank's totals. */
#include "plan_json_aux.h"

#include "aux_json.h"

static const char *const aux_fields[] = {"margin", "work", "placed", NULL};

static cJSON *slice_object(const tf_plan *plan, const tf_aux_slice *s)
{
    const tf_aux_work *w = &plan->aux_work[s->work];
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "rank", s->rank);
    cJSON_AddNumberToObject(o, "stage", w->stage);
    cJSON_AddStringToObject(o, "name", w->name);
    if (s->microbatch < 0)
        cJSON_AddNullToObject(o, "microbatch");
    else
        cJSON_AddNumberToObject(o, "microbatch", s->microbatch);
    cJSON_AddNumberToObject(o, "step", s->step);
    tfj_add_number(o, "start_ms", s->start_ms);
    tfj_add_number(o, "ms", s->ms);
    return o;
}

static int add_rank_figures(cJSON *root, const tf_plan *plan)
{
    cJSON *ranks = cJSON_GetObjectItemCaseSensitive(root, "per_rank");
    for (int r = 0; r < plan->aux.ranks; r++) {
        const tf_aux_rank *a = &plan->aux.per_rank[r];
        cJSON *o = cJSON_AddObjectToObject(cJSON_GetArrayItem(ranks, r), "aux");
        if (!o)
            return TF_ENOMEM;
        tfj_add_number(o, "demand_ms", a->demand_ms);
        tfj_add_number(o, "placed_ms", a->placed_ms);
        tfj_add_number(o, "spilled_ms", a->spilled_ms);
        tfj_add_number(o, "exact_ms", a->exact_ms);
        cJSON_AddNumberToObject(o, "refresh_steps", a->refresh_steps);
    }
    return 0;
}

int tf_plan_json_add_aux(cJSON *root, const tf_plan *plan)
{
    if (!plan->n_aux_work)
        return 0;
    cJSON *aux = cJSON_AddObjectToObject(root, "aux");
    if (!aux)
        return TF_ENOMEM;
    tfj_add_number(aux, "margin", plan->aux_margin);
    tf_aux_list_to_json(plan->aux_work, plan->n_aux_work, -1, aux, "work");
    cJSON *placed = cJSON_AddArrayToObject(aux, "placed");
    for (int k = 0; placed && k < plan->aux.n_slices; k++) {
        cJSON *o = slice_object(plan, &plan->aux.slices[k]);
        if (!o)
            return TF_ENOMEM;
        cJSON_AddItemToArray(placed, o);
    }
    return placed ? add_rank_figures(root, plan) : TF_ENOMEM;
}

int tf_plan_json_parse_aux(const tfj_ctx *ctx, const cJSON *root, tf_plan *plan,
                           tf_error *err)
{
    const cJSON *aux, *placed;
    int rc = tfj_object(ctx, root, "aux", 0, &aux, err);
    if (rc || !aux)
        return rc;
    tfj_ctx at;
    tfj_child(ctx, "aux", &at);
    tf_aux_list list = {0};
    if ((rc = tfj_check_fields(&at, aux, aux_fields, err)) ||
        (rc = tfj_number(&at, aux, "margin", 1, 0, 0, TF_AUX_MAX_MARGIN, &plan->aux_margin,
                         err)) ||
        (rc = tfj_array(&at, aux, "placed", 0, &placed, err)))
        return rc;
    rc = tf_aux_list_parse(&at, aux, "work", -1, plan->schedule.stages, &list, err);
    plan->aux_work = list.work;
    plan->n_aux_work = list.n;
    return rc;
}
