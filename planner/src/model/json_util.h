/* json_util.h - typed field access on cJSON objects with errors that name
 * the file, the JSON path and the bad value: the one JSON helper of the
 * planner's files (profile, plan, timeline input) and tf-study's study files.
 *
 * Internal, not a tf/ header: its types are cJSON's, and a public header
 * would make cJSON part of the installed API for a helper that only the
 * toolkit's own readers use.  tf-study, built in this tree, includes it
 * from here (tools/CMakeLists.txt).
 *
 * Every object read is first checked for unknown fields (tfj_check_fields,
 * tfj_check_document): a misspelled field is an error, never a default.
 *
 * Every getter returns 0 and stores the value, or TF_EINVAL with a message
 * like `profile.json: $.stages[2].backward_ms: expected a finite number >= 0,
 * got "abc"`.  A missing (or null) optional field stores def and returns 0;
 * a missing required one fails with "..., but it is missing".
 */
#ifndef TF_JSON_UTIL_H
#define TF_JSON_UTIL_H

#include <cjson/cJSON.h>
#include "tf/error.h"

/* Where the document came from (file name) and the path of the object read. */
typedef struct tfj_ctx {
    const char *where;
    char path[256];
} tfj_ctx;

/* Formats the child path path.key or path[index] into out[256]. */
void tfj_child(const tfj_ctx *ctx, const char *key, tfj_ctx *out);
void tfj_index(const tfj_ctx *ctx, int index, tfj_ctx *out);

/* Fails with "<where>: <path>: <what>, got <value JSON>" (the value cut to
 * 60 characters), or "<where>: <path>: <what>, but it is missing" when
 * value is NULL.  Returns TF_EINVAL. */
int tfj_fail(const tfj_ctx *ctx, const cJSON *value, const char *what, tf_error *err);

/* The most values (numbers, strings, objects, arrays...) a parsed file may
 * hold.  A parse tree costs about 40 times its text (a cJSON node per value
 * of a few bytes), so the byte limits alone would let a 64 MiB file take
 * gigabytes; the largest plan or profile the toolkit accepts (131,072
 * actions) has under 2 million values. */
enum { TFJ_MAX_VALUES = 4 << 20 };

/* Parses text; a syntax error names the line and column, and a text of
 * more than TFJ_MAX_VALUES values is refused before any node is made.
 * *root must be freed with cJSON_Delete.  Not thread-safe (cJSON records
 * errors globally). */
int tfj_parse(const char *text, const char *where, cJSON **root, tf_error *err);

/* Refuses a field of object o (at ctx) that is not in known (a
 * NULL-terminated list of names, at most TFJ_MAX_FIELDS), and a field
 * given twice (cJSON would read the first and drop the second unseen).
 * Call it once per object read, before its fields, so that a misspelled
 * field is named rather than taken as missing:
 *   `p.json: $.stages[0].backward_frozn_ms: unknown field (did you mean
 *   backward_frozen_ms?)`
 * The suggestion is the known name nearest by Damerau-Levenshtein distance
 * (optimal string alignment: an insertion, deletion, substitution or swap
 * of neighbours costs 1; case ignored), when that distance is at most a
 * quarter of the name's length, at least 1 and at most 3; otherwise the
 * message lists the known fields.  Returns 0, or TF_EINVAL (also when o is
 * not an object). */
int tfj_check_fields(const tfj_ctx *ctx, const cJSON *o, const char *const *known,
                     tf_error *err);

/* The most names a list of known fields may hold (the longest, a plan's
 * top level, has 18). */
enum { TFJ_MAX_FIELDS = 64 };

/* What a format's top level declares about itself. */
typedef struct tfj_format {
    const char *name;    /* the value of "format": "tf-profile", "tf-plan"... */
    int required;        /* must "format" and "version" be given? */
    int version;         /* the newest version this reader reads */
    const char *const *fields; /* the top level's own fields (NULL-terminated),
                                  besides "format", "version" and "meta" */
} tfj_format;

/* Checks a document's top level, in this order: root is an object;
 * "format", when given, is f->name; "version", when given, is an integer
 * from 1 to f->version (a newer one fails, before any field is looked at,
 * with `$.version: version 3 is newer than the tf-plan version this
 * toolkit reads (1): upgrade the toolkit`); "meta", when given, is an
 * object, whose contents are never checked (notes and provenance that
 * other tools write); every other field is in f->fields
 * (tfj_check_fields); last, "format" and "version" are present when
 * f->required (so that a misspelling of either is named as one).  Stores
 * the version (f->version when absent).  Returns 0 or TF_EINVAL. */
int tfj_check_document(const tfj_ctx *ctx, const cJSON *root, const tfj_format *f,
                       int *version, tf_error *err);

/* Is o's field key present and not null? */
int tfj_has(const cJSON *o, const char *key);

/* Checks a value itself (a list item, say) at ctx: a finite number in
 * [min, max] (max may be HUGE_VAL), an integer in [min, max], a string
 * (*out then points into the cJSON tree).  A NULL v fails as missing. */
int tfj_number_value(const tfj_ctx *ctx, const cJSON *v, double min, double max, double *out,
                     tf_error *err);
int tfj_int_value(const tfj_ctx *ctx, const cJSON *v, int min, int max, int *out,
                  tf_error *err);
int tfj_string_value(const tfj_ctx *ctx, const cJSON *v, const char **out, tf_error *err);

int tfj_number(const tfj_ctx *obj, const cJSON *o, const char *key, int required, double def,
               double min, double max, double *out, tf_error *err);
int tfj_int(const tfj_ctx *obj, const cJSON *o, const char *key, int required, int def, int min,
            int max, int *out, tf_error *err);
/* *out points into the cJSON tree (or to def). */
int tfj_string(const tfj_ctx *obj, const cJSON *o, const char *key, int required,
               const char *def, const char **out, tf_error *err);
int tfj_bool(const tfj_ctx *obj, const cJSON *o, const char *key, int required, int def,
             int *out, tf_error *err);
/* Fetches an array / object field (NULL in *out when optional and
 * missing). */
int tfj_array(const tfj_ctx *obj, const cJSON *o, const char *key, int required,
              const cJSON **out, tf_error *err);
int tfj_object(const tfj_ctx *obj, const cJSON *o, const char *key, int required,
               const cJSON **out, tf_error *err);

/* Prints root indented, with a final newline, as a malloc'd string (NULL
 * when out of memory). */
char *tfj_print_document(const cJSON *root);

/* A number rounded to 12 significant digits (about 1e-12 relative), so
 * files stay readable while every figure keeps far more precision than
 * any timer has; null if it is not finite.  The item holds its text (a raw
 * item): printing copies it, where a cJSON number would be formatted and
 * read back twice, which took most of the time to write a large plan.
 * For trees that are printed, not read.  NULL when out of memory. */
cJSON *tfj_create_number(double value);

/* Adds tfj_create_number(value) to obj under key.  Returns the item, or
 * NULL when out of memory. */
cJSON *tfj_add_number(cJSON *obj, const char *key, double value);

#endif
