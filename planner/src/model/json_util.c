/* json_util.c - typed cJSON access with path-naming errors (json_util.h). */
#include "json_util.h"

#include <ctype.h>
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

/* ---- unknown fields ---------------------------------------------------- */

/* Names longer than this are never near a known one (the longest known
 * name has 31 characters). */
enum { NAME_COMPARED = 63 };

static int same_folded(char a, char b)
{
    return tolower((unsigned char)a) == tolower((unsigned char)b);
}

static int min_of(int a, int b)
{
    return a < b ? a : b;
}

/* The optimal-string-alignment distance between a and b, case ignored;
 * anything above limit comes back as limit + 1, and the length difference
 * alone settles most pairs without a table. */
static int edit_distance(const char *a, const char *b, int limit)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > NAME_COMPARED || m > NAME_COMPARED || (n > m ? n - m : m - n) > (size_t)limit)
        return limit + 1;
    int rows[3][NAME_COMPARED + 1];
    int *before = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= m; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int d = min_of(min_of(prev[j], cur[j - 1]) + 1,
                           prev[j - 1] + !same_folded(a[i - 1], b[j - 1]));
            if (i > 1 && j > 1 && same_folded(a[i - 1], b[j - 2]) &&
                same_folded(a[i - 2], b[j - 1]))
                d = min_of(d, before[j - 2] + 1);
            cur[j] = d;
        }
        int *spare = before;
        before = prev;
        prev = cur;
        cur = spare;
    }
    return min_of(prev[m], limit + 1);
}

/* How far a key may be from a known name and still be taken for a
 * misspelling of it: a quarter of the name, from 1 to 3 edits ("ms" is
 * one edit from "m" but two from "id"). */
static int plausible_distance(const char *name)
{
    int quarter = (int)(strlen(name) / 4);
    return quarter < 1 ? 1 : quarter > 3 ? 3 : quarter;
}

/* The known name nearest to key within its plausible distance (the first
 * of equally near ones), or NULL. */
static const char *nearest_name(const char *key, const char *const *known)
{
    const char *best = NULL;
    int best_distance = INT_MAX;
    for (const char *const *name = known; *name; name++) {
        int limit = plausible_distance(*name);
        int d = edit_distance(key, *name, limit);
        if (d <= limit && d < best_distance) {
            best = *name;
            best_distance = d;
        }
    }
    return best;
}

/* key as it may be shown in a path: printable ASCII, other bytes as '?',
 * cut to 60 characters. */
static void shown_key(const char *key, char out[64])
{
    size_t n = 0;
    for (; key[n] && n < 60; n++)
        out[n] = isprint((unsigned char)key[n]) ? key[n] : '?';
    if (key[n]) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

static int unknown_field(const tfj_ctx *ctx, const char *key, const char *const *known,
                         tf_error *err)
{
    char shown[64];
    shown_key(key, shown);
    tfj_ctx at;
    tfj_child(ctx, shown, &at);
    const char *near = nearest_name(key, known);
    if (near)
        return tf_fail(err, TF_EINVAL, "%s: %s: unknown field (did you mean %s?)", ctx->where,
                       at.path, near);
    char list[640] = "";
    size_t used = 0;
    for (const char *const *name = known; *name && used < sizeof list; name++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                 name == known ? "" : ", ", *name);
    return tf_fail(err, TF_EINVAL,
                   "%s: %s: unknown field (known fields here: %s; notes belong in the top "
                   "level's \"meta\")",
                   ctx->where, at.path, list);
}

/* Index of key in known, or -1. */
static int known_index(const char *key, const char *const *known)
{
    for (int k = 0; known[k]; k++)
        if (!strcmp(key, known[k]))
            return k;
    return -1;
}

int tfj_check_fields(const tfj_ctx *ctx, const cJSON *o, const char *const *known,
                     tf_error *err)
{
    if (!cJSON_IsObject(o))
        return tfj_fail(ctx, o, "expected an object", err);
    unsigned char seen[TFJ_MAX_FIELDS] = {0};
    const cJSON *field;
    cJSON_ArrayForEach(field, o)
    {
        int k = known_index(field->string, known);
        if (k < 0)
            return unknown_field(ctx, field->string, known, err);
        if (k >= TFJ_MAX_FIELDS)
            continue;
        if (seen[k]++) {
            tfj_ctx at;
            tfj_child(ctx, field->string, &at);
            return tf_fail(err, TF_EINVAL,
                           "%s: %s: the field is given twice (an object names each field once)",
                           ctx->where, at.path);
        }
    }
    return 0;
}

/* The top level's known fields: the header's and the format's own. */
static void document_fields(const tfj_format *f, const char **all)
{
    static const char *const header[] = {"format", "version", "meta"};
    int n = 0;
    for (size_t k = 0; k < sizeof header / sizeof *header; k++)
        all[n++] = header[k];
    for (const char *const *name = f->fields; *name && n < TFJ_MAX_FIELDS; name++)
        all[n++] = *name;
    all[n] = NULL;
}

/* "format" and "version" where a format requires them, checked last so
 * that a misspelling of either is named as one. */
static int required_header(const tfj_ctx *ctx, const cJSON *root, tf_error *err)
{
    const char *format;
    int version;
    int rc = tfj_string(ctx, root, "format", 1, NULL, &format, err);
    return rc ? rc : tfj_int(ctx, root, "version", 1, 1, 1, INT_MAX, &version, err);
}

int tfj_check_document(const tfj_ctx *ctx, const cJSON *root, const tfj_format *f,
                       int *version, tf_error *err)
{
    char what[128];
    *version = f->version;
    if (!cJSON_IsObject(root)) {
        snprintf(what, sizeof what, "expected a JSON object (a %s file)", f->name);
        return tfj_fail(ctx, root, what, err);
    }
    const char *format;
    int rc = tfj_string(ctx, root, "format", 0, f->name, &format, err);
    tfj_ctx at;
    if (!rc && strcmp(format, f->name) != 0) {
        tfj_child(ctx, "format", &at);
        snprintf(what, sizeof what, "expected \"%s\"", f->name);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(root, "format"), what, err);
    }
    if (rc || (rc = tfj_int(ctx, root, "version", 0, f->version, 1, INT_MAX, version, err)))
        return rc;
    /* Before the fields: a newer version may well have fields this reader
     * does not know, and the version says why. */
    if (*version > f->version) {
        tfj_child(ctx, "version", &at);
        return tf_fail(err, TF_EINVAL,
                       "%s: %s: version %d is newer than the %s version this toolkit reads "
                       "(%d): upgrade the toolkit",
                       ctx->where, at.path, *version, f->name, f->version);
    }
    const cJSON *meta;
    const char *all[TFJ_MAX_FIELDS + 1];
    document_fields(f, all);
    if ((rc = tfj_object(ctx, root, "meta", 0, &meta, err)) ||
        (rc = tfj_check_fields(ctx, root, all, err)))
        return rc;
    return f->required ? required_header(ctx, root, err) : 0;
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
