/* study_json.c - typed cJSON access with path-naming errors. */
#include "study_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sj_child(const sj_at *at, const char *key, sj_at *out)
{
    out->where = at->where;
    snprintf(out->path, sizeof out->path, "%s.%s", at->path, key);
}

void sj_index(const sj_at *at, int index, sj_at *out)
{
    out->where = at->where;
    snprintf(out->path, sizeof out->path, "%s[%d]", at->path, index);
}

int sj_fail(const sj_at *at, const cJSON *value, const char *what, tf_error *err)
{
    if (!value)
        return tf_fail(err, TF_EINVAL, "%s: %s: %s, but it is missing", at->where, at->path,
                       what);
    char *text = cJSON_PrintUnformatted(value);
    const char *shown = text ? text : "?";
    /* A whole object or list is cut so the message stays on one line. */
    int cut = strlen(shown) > 60;
    tf_fail(err, TF_EINVAL, "%s: %s: %s, got %.60s%s", at->where, at->path, what, shown,
            cut ? "..." : "");
    free(text);
    return TF_EINVAL;
}

int sj_parse(const char *text, const char *where, cJSON **root, tf_error *err)
{
    const char *end = NULL;
    *root = cJSON_ParseWithOpts(text, &end, 1);
    if (*root)
        return 0;
    if (text[0] == '\0')
        return tf_fail(err, TF_EINVAL, "%s: empty file, expected a JSON object", where);
    int line = 1, column = 1;
    for (const char *p = text; end && p < end && *p; p++) {
        if (*p == '\n') {
            line++;
            column = 1;
        } else {
            column++;
        }
    }
    return tf_fail(err, TF_EINVAL, "%s: not valid JSON at line %d, column %d", where, line,
                   column);
}

int sj_number_value(const sj_at *at, const cJSON *v, double min, double max, double *out,
                    tf_error *err)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < min ||
        v->valuedouble > max) {
        char what[96];
        if (isinf(max))
            snprintf(what, sizeof what, "expected a finite number >= %g", min);
        else
            snprintf(what, sizeof what, "expected a number in [%g, %g]", min, max);
        return sj_fail(at, v, what, err);
    }
    *out = v->valuedouble;
    return 0;
}

int sj_int_value(const sj_at *at, const cJSON *v, int min, int max, int *out, tf_error *err)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < min ||
        v->valuedouble > max || v->valuedouble != floor(v->valuedouble)) {
        char what[96];
        snprintf(what, sizeof what, "expected an integer in [%d, %d]", min, max);
        return sj_fail(at, v, what, err);
    }
    *out = (int)v->valuedouble;
    return 0;
}

int sj_string_value(const sj_at *at, const cJSON *v, const char **out, tf_error *err)
{
    if (!cJSON_IsString(v))
        return sj_fail(at, v, "expected a string", err);
    *out = v->valuestring;
    return 0;
}

/* The field's value, NULL when missing or null (JSON null reads as absent). */
static const cJSON *field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNull(v) ? NULL : v;
}

int sj_number(const sj_at *at, const cJSON *o, const char *key, int required, double min,
              double max, double *out, int *given, tf_error *err)
{
    sj_at child;
    sj_child(at, key, &child);
    const cJSON *v = field(o, key);
    if (given)
        *given = v != NULL;
    if (!v)
        return required ? sj_fail(&child, NULL, "expected a number", err) : 0;
    return sj_number_value(&child, v, min, max, out, err);
}

int sj_int(const sj_at *at, const cJSON *o, const char *key, int required, int min, int max,
           int *out, tf_error *err)
{
    sj_at child;
    sj_child(at, key, &child);
    const cJSON *v = field(o, key);
    if (!v)
        return required ? sj_fail(&child, NULL, "expected an integer", err) : 0;
    return sj_int_value(&child, v, min, max, out, err);
}

int sj_string(const sj_at *at, const cJSON *o, const char *key, int required, const char **out,
              tf_error *err)
{
    sj_at child;
    sj_child(at, key, &child);
    const cJSON *v = field(o, key);
    if (!v)
        return required ? sj_fail(&child, NULL, "expected a string", err) : 0;
    return sj_string_value(&child, v, out, err);
}

int sj_object(const sj_at *at, const cJSON *o, const char *key, int required, const cJSON **out,
              tf_error *err)
{
    sj_at child;
    sj_child(at, key, &child);
    const cJSON *v = field(o, key);
    *out = NULL;
    if (!v)
        return required ? sj_fail(&child, NULL, "expected an object", err) : 0;
    if (!cJSON_IsObject(v))
        return sj_fail(&child, v, "expected an object", err);
    *out = v;
    return 0;
}
