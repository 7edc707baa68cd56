/* json_util.c - typed cJSON access with path-naming errors (json_util.h). */
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

/* An upper bound on the values in a JSON text: one per container opened
 * and one more per comma, outside strings.  One pass, no allocation. */
static long count_values(const char *text)
{
    long values = 1;
    int in_string = 0;
    for (const char *c = text; *c; c++) {
        if (in_string) {
            if (*c == '\\' && c[1])
                c++;
            else if (*c == '"')
                in_string = 0;
        } else if (*c == '"') {
            in_string = 1;
        } else if (*c == ',' || *c == '[' || *c == '{') {
            values++;
        }
    }
    return values;
}

int tfj_parse(const char *text, const char *where, cJSON **root, tf_error *err)
{
    *root = NULL;
    long values = count_values(text);
    if (values > TFJ_MAX_VALUES)
        return tf_fail(err, TF_EINVAL,
                       "%s: about %ld JSON values, more than the %d the toolkit reads "
                       "(docs/robustness.md)",
                       where, values, TFJ_MAX_VALUES);
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

int tfj_has(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v);
}

/* Field key of o: NULL when absent or null (JSON null reads as absent);
 * *at names it for messages either way. */
static const cJSON *lookup(const tfj_ctx *obj, const cJSON *o, const char *key, tfj_ctx *at)
{
    tfj_child(obj, key, at);
    return tfj_has(o, key) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* A missing field: an error when required, else 0 (the caller stores its
 * default). */
static int missing(const tfj_ctx *at, int required, const char *what, tf_error *err)
{
    return required ? tfj_fail(at, NULL, what, err) : 0;
}

int tfj_number_value(const tfj_ctx *ctx, const cJSON *v, double min, double max, double *out,
                     tf_error *err)
{
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= min &&
        v->valuedouble <= max) {
        *out = v->valuedouble;
        return 0;
    }
    char what[128];
    if (isinf(max))
        snprintf(what, sizeof what, "expected a finite number >= %g", min);
    else
        snprintf(what, sizeof what, "expected a finite number in [%g, %g]", min, max);
    return tfj_fail(ctx, v, what, err);
}

int tfj_int_value(const tfj_ctx *ctx, const cJSON *v, int min, int max, int *out, tf_error *err)
{
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (isfinite(d) && d == floor(d) && d >= min && d <= max) {
        *out = (int)d;
        return 0;
    }
    char what[128];
    snprintf(what, sizeof what, "expected an integer in [%d, %d]", min, max);
    return tfj_fail(ctx, v, what, err);
}

int tfj_string_value(const tfj_ctx *ctx, const cJSON *v, const char **out, tf_error *err)
{
    if (!cJSON_IsString(v))
        return tfj_fail(ctx, v, "expected a string", err);
    *out = v->valuestring;
    return 0;
}

int tfj_number(const tfj_ctx *obj, const cJSON *o, const char *key, int required, double def,
               double min, double max, double *out, tf_error *err)
{
    tfj_ctx at;
    const cJSON *v = lookup(obj, o, key, &at);
    if (v)
        return tfj_number_value(&at, v, min, max, out, err);
    *out = def;
    return missing(&at, required, "a number is required", err);
}

int tfj_int(const tfj_ctx *obj, const cJSON *o, const char *key, int required, int def, int min,
            int max, int *out, tf_error *err)
{
    tfj_ctx at;
    const cJSON *v = lookup(obj, o, key, &at);
    if (v)
        return tfj_int_value(&at, v, min, max, out, err);
    *out = def;
    return missing(&at, required, "an integer is required", err);
}

int tfj_string(const tfj_ctx *obj, const cJSON *o, const char *key, int required,
               const char *def, const char **out, tf_error *err)
{
    tfj_ctx at;
    const cJSON *v = lookup(obj, o, key, &at);
    if (v)
        return tfj_string_value(&at, v, out, err);
    *out = def;
    return missing(&at, required, "a string is required", err);
}

int tfj_bool(const tfj_ctx *obj, const cJSON *o, const char *key, int required, int def,
             int *out, tf_error *err)
{
    tfj_ctx at;
    const cJSON *v = lookup(obj, o, key, &at);
    *out = def;
    if (!v)
        return missing(&at, required, "true or false is required", err);
    if (!cJSON_IsBool(v))
        return tfj_fail(&at, v, "expected true or false", err);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* tfj_array and tfj_object: a field of one cJSON type. */
static int typed_field(const tfj_ctx *obj, const cJSON *o, const char *key, int required,
                       cJSON_bool (*is_type)(const cJSON *), const char *type,
                       const cJSON **out, tf_error *err)
{
    tfj_ctx at;
    const cJSON *v = lookup(obj, o, key, &at);
    char what[64];
    *out = NULL;
    if (!v) {
        snprintf(what, sizeof what, "%s is required", type);
        return missing(&at, required, what, err);
    }
    if (!is_type(v)) {
        snprintf(what, sizeof what, "expected %s", type);
        return tfj_fail(&at, v, what, err);
    }
    *out = v;
    return 0;
}

int tfj_array(const tfj_ctx *obj, const cJSON *o, const char *key, int required,
              const cJSON **out, tf_error *err)
{
    return typed_field(obj, o, key, required, cJSON_IsArray, "an array", out, err);
}

int tfj_object(const tfj_ctx *obj, const cJSON *o, const char *key, int required,
               const cJSON **out, tf_error *err)
{
    return typed_field(obj, o, key, required, cJSON_IsObject, "an object", out, err);
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
