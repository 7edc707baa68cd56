/* plan_json_ranks.c - plan.json's "per_rank" (idle time, bubbles, peak
 * bytes) and "memory" (the stages' bytes, whether freezing saves memory,
 * the limit), written and read (formats.md). */
#include "plan_json_ranks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "memory_json.h"

static const char *const rank_fields[] = {
    "rank", "idle_ms", "bubbles", "static_bytes", "peak_bytes", "peak_action", "limit_bytes",
    "aux", NULL};
static const char *const pair_fields[] = {"unfrozen", "planned", NULL};
static const char *const memory_fields[] = {"stages", "freeze_saves_memory", "limit_bytes",
                                            NULL};

/* {"unfrozen": u, "planned": p} under key. */
static cJSON *add_pair(cJSON *o, const char *key, double unfrozen, double planned)
{
    cJSON *pair = cJSON_AddObjectToObject(o, key);
    if (pair) {
        tfj_add_number(pair, "unfrozen", unfrozen);
        tfj_add_number(pair, "planned", planned);
    }
    return pair;
}

/* The cell of action i, or null for the start of the step (-1). */
static cJSON *action_cell(const tf_plan *plan, int i)
{
    char cell[32];
    return i < 0 ? cJSON_CreateNull()
                 : cJSON_CreateString(tf_action_format(&plan->actions[i].action, cell));
}

static cJSON *rank_object(const tf_plan *plan, int r)
{
    const tf_plan_rank *pr = &plan->per_rank[r];
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "rank", r);
    add_pair(o, "idle_ms", pr->idle_ms_unfrozen, pr->idle_ms_planned);
    cJSON *bubbles = cJSON_AddArrayToObject(o, "bubbles");
    for (int b = 0; bubbles && b < pr->n_bubbles; b++) {
        cJSON *window = cJSON_CreateArray();
        cJSON_AddItemToArray(window, tfj_create_number(pr->bubbles[2 * b]));
        cJSON_AddItemToArray(window, tfj_create_number(pr->bubbles[2 * b + 1]));
        cJSON_AddItemToArray(bubbles, window);
    }
    if (plan->memory) {
        tfj_add_number(o, "static_bytes", pr->static_bytes);
        add_pair(o, "peak_bytes", pr->peak_unfrozen.bytes, pr->peak_planned.bytes);
        cJSON *at = cJSON_AddObjectToObject(o, "peak_action");
        if (at) {
            cJSON_AddItemToObject(at, "unfrozen", action_cell(plan, pr->peak_unfrozen.action));
            cJSON_AddItemToObject(at, "planned", action_cell(plan, pr->peak_planned.action));
        }
    }
    if (plan->memory_limit)
        tfj_add_number(o, "limit_bytes", plan->memory_limit[r]);
    return o;
}

int tf_plan_json_add_ranks(cJSON *root, const tf_plan *plan)
{
    const tf_schedule *s = &plan->schedule;
    cJSON *ranks = cJSON_AddArrayToObject(root, "per_rank");
    if (!ranks)
        return TF_ENOMEM;
    for (int r = 0; r < s->ranks; r++) {
        cJSON *o = rank_object(plan, r);
        if (!o)
            return TF_ENOMEM;
        cJSON_AddItemToArray(ranks, o);
    }
    if (!plan->memory)
        return 0;
    cJSON *memory = cJSON_AddObjectToObject(root, "memory");
    cJSON *stages = memory ? cJSON_AddArrayToObject(memory, "stages") : NULL;
    if (!stages)
        return TF_ENOMEM;
    for (int st = 0; st < s->stages; st++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            return TF_ENOMEM;
        tf_stage_memory_to_json(&plan->memory[st], o);
        cJSON_AddItemToArray(stages, o);
    }
    cJSON_AddBoolToObject(memory, "freeze_saves_memory", plan->freeze_saves_memory);
    if (plan->memory_limit)
        tf_memory_limit_to_json(memory, "limit_bytes", plan->memory_limit, s->ranks);
    return 0;
}

/* Each entry of "per_rank" holds only known fields (the figures are
 * recomputed, so their values are not read). */
static int check_rank_fields(const tfj_ctx *ctx, const cJSON *root, tf_error *err)
{
    const cJSON *ranks;
    int rc = tfj_array(ctx, root, "per_rank", 0, &ranks, err);
    if (rc || !ranks)
        return rc;
    tfj_ctx list;
    tfj_child(ctx, "per_rank", &list);
    int i = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, ranks)
    {
        tfj_ctx at;
        tfj_index(&list, i++, &at);
        if (!cJSON_IsObject(o))
            return tfj_fail(&at, o, "expected an object of one rank's figures", err);
        if ((rc = tfj_check_fields(&at, o, rank_fields, err)))
            return rc;
        const char *const pairs[] = {"idle_ms", "peak_bytes", "peak_action"};
        for (int k = 0; k < 3; k++) {
            const cJSON *pair;
            tfj_ctx pair_at;
            tfj_child(&at, pairs[k], &pair_at);
            if ((rc = tfj_object(&at, o, pairs[k], 0, &pair, err)) ||
                (pair && (rc = tfj_check_fields(&pair_at, pair, pair_fields, err))))
                return rc;
        }
    }
    return 0;
}

/* "memory.limit_bytes": a number, or one per rank. */
static int parse_limit(const tfj_ctx *ctx, const cJSON *memory, tf_plan *plan, tf_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(memory, "limit_bytes");
    if (!v || cJSON_IsNull(v))
        return 0;
    tfj_ctx at;
    tfj_child(ctx, "limit_bytes", &at);
    return tf_memory_limit_parse(&at, v, plan->schedule.ranks, &plan->memory_limit, err);
}

/* "memory.stages": one object of byte fields per stage. */
static int parse_stages(const tfj_ctx *ctx, const cJSON *memory, tf_plan *plan, tf_error *err)
{
    const int stages = plan->schedule.stages;
    const cJSON *list;
    int rc = tfj_array(ctx, memory, "stages", 1, &list, err);
    if (rc)
        return rc;
    tfj_ctx list_at;
    tfj_child(ctx, "stages", &list_at);
    if (cJSON_GetArraySize(list) != stages)
        return tfj_fail(&list_at, list, "expected one entry per stage", err);
    plan->memory = calloc((size_t)stages + 1, sizeof *plan->memory);
    if (!plan->memory)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", ctx->where);
    int st = 0, given;
    const cJSON *o;
    cJSON_ArrayForEach(o, list)
    {
        tfj_ctx at;
        tfj_index(&list_at, st, &at);
        if (!cJSON_IsObject(o))
            return tfj_fail(&at, o, "expected an object of a stage's bytes", err);
        if ((rc = tf_stage_memory_parse(&at, o, &plan->memory[st++], &given, err)))
            return rc;
    }
    return 0;
}

int tf_plan_json_parse_ranks(const tfj_ctx *ctx, const cJSON *root, tf_plan *plan,
                             tf_error *err)
{
    int rc = check_rank_fields(ctx, root, err);
    const cJSON *memory = NULL;
    if (!rc)
        rc = tfj_object(ctx, root, "memory", 0, &memory, err);
    plan->freeze_saves_memory = 1;
    if (rc || !memory)
        return rc;
    tfj_ctx at;
    tfj_child(ctx, "memory", &at);
    if ((rc = tfj_check_fields(&at, memory, memory_fields, err)) ||
        (rc = parse_stages(&at, memory, plan, err)) ||
        (rc = tfj_bool(&at, memory, "freeze_saves_memory", 0, 1, &plan->freeze_saves_memory,
                       err)))
        return rc;
    return parse_limit(&at, memory, plan, err);
}

int tf_plan_check_limits(const tf_plan *plan, const char *where, tf_error *err)
{
    if (!plan->memory || !plan->memory_limit)
        return 0;
    for (int r = 0; r < plan->schedule.ranks; r++) {
        double peak = plan->per_rank[r].peak_planned.bytes, limit = plan->memory_limit[r];
        /* A plan written by tf-plan keeps below its limit by a margin far
         * larger than the 12 digits a file keeps. */
        if (peak > limit * (1.0 + 1e-11))
            return tf_fail(err, TF_EINVAL,
                           "%s: rank %d holds %.17g bytes at its peak under the plan's "
                           "ratios, above its memory limit %.17g: the plan does not fit",
                           where, r, peak, limit);
    }
    return 0;
}
