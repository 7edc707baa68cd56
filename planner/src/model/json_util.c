/* json_util.c - typed cJSON access with path-naming errors. */
#include "json_util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tfj_child(const tfj_ctx *ctx, const char *key, tfj_ctx *out)
{
    out->where = ctx->where;
    snprintf(out->path, sizeof out->path, "%s.%s", ctx->path, key);
}

void tfj_index(const tfj_ctx *ctx, int index, tfj_ctx *out)
{
    out->where = ctx->where;
    snprintf(out->path, sizeof out->path, "%s[%d]", ctx->path, index);
}

int tfj_fail(const tfj_ctx *ctx, const cJSON *value, const char *what, tf_error *err)
{
    if (!value)
        return tf_fail(err, TF_EINVAL, "%s: %s: %s, but it is missing", ctx->where, ctx->path,
                       what);
    char *text = cJSON_PrintUnformatted(value);
    const char *shown = text ? text : "?";
    /* Long values (a whole object) are cut so the message stays one line. */
    int cut = (int)strlen(shown) > 60;
    tf_fail(err, TF_EINVAL, "%s: %s: %s, got %.60s%s", ctx->where, ctx->path, what, shown,
            cut ? "..." : "");
    free(text);
    return TF_EINVAL;
}

static void line_and_column(const char *text, size_t offset, int *line, int *column)
{
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < offset && text[i]; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *column = 1;
        } else {
            (*column)++;
        }
    }
}

int tfj_parse(const char *text, const char *where, cJSON **root, tf_error *err)
{
    const char *end = NULL;
    *root = cJSON_ParseWithOpts(text, &end, 1);
    if (*root)
        return 0;
    size_t offset = end ? (size_t)(end - text) : 0;
    int line, column;
    line_and_column(text, offset, &line, &column);
    if (text[0] == '\0')
        return tf_fail(err, TF_EINVAL, "%s: empty file, expected a JSON object", where);
    return tf_fail(err, TF_EINVAL,
                   "%s: not valid JSON at line %d, column %d (truncated, malformed, or nested "
                   "deeper than %d levels)",
                   where, line, column, CJSON_NESTING_LIMIT);
}

static const cJSON *field(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

int tfj_number(const tfj_ctx *obj, const cJSON *o, const char *key, int required, double def,
               double min, double max, double *out, tf_error *err)
{
    tfj_ctx at;
    tfj_child(obj, key, &at);
    const cJSON *v = field(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return tfj_fail(&at, NULL, "a number is required", err);
        *out = def;
        return 0;
    }
    char what[128];
    snprintf(what, sizeof what, "expected a finite number in [%g, %g]", min, max);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < min ||
        v->valuedouble > max)
        return tfj_fail(&at, v, what, err);
    *out = v->valuedouble;
    return 0;
}

int tfj_int(const tfj_ctx *obj, const cJSON *o, const char *key, int required, int def, int min,
            int max, int *out, tf_error *err)
{
    tfj_ctx at;
    tfj_child(obj, key, &at);
    const cJSON *v = field(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return tfj_fail(&at, NULL, "an integer is required", err);
        *out = def;
        return 0;
    }
    char what[128];
    snprintf(what, sizeof what, "expected an integer in [%d, %d]", min, max);
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!isfinite(d) || d != floor(d) || d < min || d > max)
        return tfj_fail(&at, v, what, err);
    *out = (int)d;
    return 0;
}

int tfj_string(const tfj_ctx *obj, const cJSON *o, const char *key, int required,
               const char *def, const char **out, tf_error *err)
{
    tfj_ctx at;
    tfj_child(obj, key, &at);
    const cJSON *v = field(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return tfj_fail(&at, NULL, "a string is required", err);
        *out = def;
        return 0;
    }
    if (!cJSON_IsString(v))
        return tfj_fail(&at, v, "expected a string", err);
    *out = v->valuestring;
    return 0;
}

int tfj_bool(const tfj_ctx *obj, const cJSON *o, const char *key, int required, int def,
             int *out, tf_error *err)
{
    tfj_ctx at;
    tfj_child(obj, key, &at);
    const cJSON *v = field(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return tfj_fail(&at, NULL, "true or false is required", err);
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v))
        return tfj_fail(&at, v, "expected true or false", err);
    *out = cJSON_IsTrue(v);
    return 0;
}

int tfj_array(const tfj_ctx *obj, const cJSON *o, const char *key, int required,
              const cJSON **out, tf_error *err)
{
    tfj_ctx at;
    tfj_child(obj, key, &at);
    const cJSON *v = field(o, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return tfj_fail(&at, NULL, "an array is required", err);
        return 0;
    }
    if (!cJSON_IsArray(v))
        return tfj_fail(&at, v, "expected an array", err);
    *out = v;
    return 0;
}

cJSON *tfj_create_number(double value)
{
    if (!isfinite(value))
        return cJSON_CreateNull(); /* what cJSON prints for them too */
    char text[32];
    snprintf(text, sizeof text, "%.12g", value);
    return cJSON_CreateRaw(text);
}

cJSON *tfj_add_number(cJSON *obj, const char *key, double value)
{
    cJSON *item = tfj_create_number(value);
    if (item && !cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return NULL;
    }
    return item;
}

char *tfj_print_document(const cJSON *root)
{
    char *text = cJSON_Print(root);
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *with_newline = realloc(text, n + 2);
    if (!with_newline) {
        free(text);
        return NULL;
    }
    with_newline[n] = '\n';
    with_newline[n + 1] = '\0';
    return with_newline;
}
