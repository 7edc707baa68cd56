/* memory_json.c - a stage's memory fields in JSON, read and written alike
 * by profile.json's stages and plan.json's "memory" (formats.md). */
#include "memory_json.h"

#include <stdio.h>
#include <stdlib.h>

#include "tf/profile.h"

/* Fails naming field `key` of stage object o at ctx: "WHAT". */
static int stage_field_fails(const tfj_ctx *ctx, const cJSON *o, const char *key,
                             const char *what, tf_error *err)
{
    tfj_ctx at;
    tfj_child(ctx, key, &at);
    return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, key), what, err);
}

/* A byte field of a stage: a number in [0, TF_MAX_BYTES], def if absent. */
static int stage_bytes(const tfj_ctx *ctx, const cJSON *o, const char *key, double def,
                       double *out, tf_error *err)
{
    return tfj_number(ctx, o, key, 0, def, 0, TF_MAX_BYTES, out, err);
}

int tf_stage_memory_parse(const tfj_ctx *ctx, const cJSON *o, tf_stage_memory *m,
                              int *given, tf_error *err)
{
    int rc;
    const int has_a = tfj_has(o, "activation_bytes");
    *given = has_a || tfj_has(o, "static_bytes");
    if ((rc = stage_bytes(ctx, o, "static_bytes", 0, &m->static_bytes, err)) ||
        (rc = stage_bytes(ctx, o, "activation_bytes", 0, &m->activation_bytes, err)))
        return rc;
    const char *const needs_a[] = {"activation_frozen_bytes", "weight_grad_bytes",
                                   "backward_input_transient_bytes", "checkpoint_bytes"};
    for (int k = 0; k < 4; k++)
        if (!has_a && tfj_has(o, needs_a[k]))
            return stage_field_fails(ctx, o, needs_a[k], "needs activation_bytes beside it",
                                     err);
    const double a = m->activation_bytes;
    if ((rc = stage_bytes(ctx, o, "activation_frozen_bytes", a, &m->activation_frozen_bytes,
                          err)) ||
        (rc = stage_bytes(ctx, o, "weight_grad_bytes", a, &m->weight_grad_bytes, err)) ||
        (rc = stage_bytes(ctx, o, "backward_input_transient_bytes", 0,
                          &m->backward_input_transient_bytes, err)) ||
        (rc = stage_bytes(ctx, o, "checkpoint_bytes", 0, &m->checkpoint_bytes, err)) ||
        (rc = tfj_number(ctx, o, "recompute_ms", 0, 0, 0, TF_MAX_DURATION_MS, &m->recompute_ms,
                         err)))
        return rc;
    char what[160];
    snprintf(what, sizeof what, "must not exceed activation_bytes (%.17g)", a);
    if (m->activation_frozen_bytes > a)
        return stage_field_fails(ctx, o, "activation_frozen_bytes", what, err);
    if (m->checkpoint_bytes > a)
        return stage_field_fails(ctx, o, "checkpoint_bytes", what, err);
    m->recomputes = tfj_has(o, "recompute_ms");
    if (m->recomputes != tfj_has(o, "checkpoint_bytes"))
        return stage_field_fails(ctx, o, m->recomputes ? "recompute_ms" : "checkpoint_bytes",
                                 "recomputation needs both checkpoint_bytes and recompute_ms",
                                 err);
    return 0;
}

int tf_memory_limit_parse(const tfj_ctx *ctx, const cJSON *v, int ranks, double **limit,
                          tf_error *err)
{
    const int per_rank = cJSON_IsArray(v);
    if (per_rank && cJSON_GetArraySize(v) != ranks) {
        char what[96];
        snprintf(what, sizeof what, "expected one limit per rank (%d numbers)", ranks);
        return tfj_fail(ctx, v, what, err);
    }
    *limit = calloc((size_t)ranks + 1, sizeof **limit);
    if (!*limit)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", ctx->where);
    for (int r = 0; r < ranks; r++) {
        tfj_ctx item = *ctx;
        if (per_rank)
            tfj_index(ctx, r, &item);
        int rc = tfj_number_value(&item, per_rank ? cJSON_GetArrayItem(v, r) : v, 1,
                                  TF_MAX_BYTES, &(*limit)[r], err);
        if (rc)
            return rc;
    }
    return 0;
}

void tf_memory_limit_to_json(cJSON *o, const char *key, const double *limit, int ranks)
{
    int same = 1;
    for (int r = 1; r < ranks; r++)
        same &= limit[r] == limit[0];
    if (same) {
        tfj_add_number(o, key, limit[0]);
        return;
    }
    cJSON *array = cJSON_AddArrayToObject(o, key);
    for (int r = 0; array && r < ranks; r++)
        cJSON_AddItemToArray(array, tfj_create_number(limit[r]));
}

void tf_stage_memory_to_json(const tf_stage_memory *m, cJSON *o)
{
    tfj_add_number(o, "static_bytes", m->static_bytes);
    tfj_add_number(o, "activation_bytes", m->activation_bytes);
    tfj_add_number(o, "activation_frozen_bytes", m->activation_frozen_bytes);
    tfj_add_number(o, "weight_grad_bytes", m->weight_grad_bytes);
    if (m->backward_input_transient_bytes > 0) /* absent means 0: older files read alike */
        tfj_add_number(o, "backward_input_transient_bytes", m->backward_input_transient_bytes);
    if (m->recomputes) {
        tfj_add_number(o, "checkpoint_bytes", m->checkpoint_bytes);
        tfj_add_number(o, "recompute_ms", m->recompute_ms);
    }
}

