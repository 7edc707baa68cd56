/* aux_json.c - aux work items in JSON, read and written alike by
 * profile.json's stages and plan.json's "aux" (formats.md). */
#include "aux_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/profile.h"

static const char *const item_fields[] = {"name", "after", "ms", "divisible", NULL};
static const char *const plan_item_fields[] = {"stage", "name", "after", "ms", "divisible",
                                               NULL};

static int parse_after(const tfj_ctx *ctx, const cJSON *o, tf_aux_after *after, tf_error *err)
{
    const char *name;
    int rc = tfj_string(ctx, o, "after", 1, NULL, &name, err);
    if (rc)
        return rc;
    for (int a = TF_AUX_AFTER_F; a <= TF_AUX_AFTER_STEP; a++)
        if (strcmp(name, tf_aux_after_name((tf_aux_after)a)) == 0) {
            *after = (tf_aux_after)a;
            return 0;
        }
    tfj_ctx at;
    tfj_child(ctx, "after", &at);
    return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "after"),
                    "expected \"F\", \"B\", \"W\" or \"step\"", err);
}

static int parse_item(const tfj_ctx *ctx, const cJSON *o, int stage, int stages,
                      tf_aux_work *w, tf_error *err)
{
    const char *name;
    int rc;
    if ((rc = tfj_check_fields(ctx, o, stage < 0 ? plan_item_fields : item_fields, err)) ||
        (stage < 0 && (rc = tfj_int(ctx, o, "stage", 1, 0, 0, stages - 1, &w->stage, err))) ||
        (rc = tfj_string(ctx, o, "name", 1, NULL, &name, err)) ||
        (rc = parse_after(ctx, o, &w->after, err)) ||
        (rc = tfj_number(ctx, o, "ms", 1, 0, 0, TF_MAX_DURATION_MS, &w->ms, err)) ||
        (rc = tfj_bool(ctx, o, "divisible", 0, 0, &w->divisible, err)))
        return rc;
    tfj_ctx at;
    if (w->ms <= 0.0) {
        tfj_child(ctx, "ms", &at);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "ms"),
                        "expected a duration above 0", err);
    }
    if (name[0] == '\0' || strlen(name) >= sizeof w->name) {
        tfj_child(ctx, "name", &at);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "name"),
                        "expected a name of 1 to 47 bytes", err);
    }
    snprintf(w->name, sizeof w->name, "%s", name);
    if (stage >= 0)
        w->stage = stage;
    return 0;
}

int tf_aux_list_parse(const tfj_ctx *ctx, const cJSON *o, const char *key, int stage,
                      int stages, tf_aux_list *list, tf_error *err)
{
    const cJSON *array;
    int rc = tfj_array(ctx, o, key, 0, &array, err);
    if (rc || !array)
        return rc;
    tfj_ctx at;
    tfj_child(ctx, key, &at);
    int n = cJSON_GetArraySize(array);
    if (list->n + n > TF_AUX_MAX_WORK)
        return tfj_fail(&at, array, "more aux work items than the 256 a profile may declare",
                        err);
    tf_aux_work *grown = realloc(list->work, ((size_t)list->n + n + 1) * sizeof *grown);
    if (!grown)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", ctx->where);
    list->work = grown;
    int k = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, array)
    {
        tfj_ctx item;
        tfj_index(&at, k++, &item);
        memset(&list->work[list->n], 0, sizeof list->work[list->n]);
        if ((rc = parse_item(&item, entry, stage, stages, &list->work[list->n], err)))
            return rc;
        list->n++;
    }
    return 0;
}

void tf_aux_list_to_json(const tf_aux_work *work, int n, int stage, cJSON *o, const char *key)
{
    cJSON *array = NULL;
    for (int k = 0; k < n; k++) {
        const tf_aux_work *w = &work[k];
        if (stage >= 0 && w->stage != stage)
            continue;
        if (!array && !(array = cJSON_AddArrayToObject(o, key)))
            return;
        cJSON *item = cJSON_CreateObject();
        if (!item)
            return;
        if (stage < 0)
            cJSON_AddNumberToObject(item, "stage", w->stage);
        cJSON_AddStringToObject(item, "name", w->name);
        cJSON_AddStringToObject(item, "after", tf_aux_after_name(w->after));
        tfj_add_number(item, "ms", w->ms);
        cJSON_AddBoolToObject(item, "divisible", w->divisible);
        cJSON_AddItemToArray(array, item);
    }
}
