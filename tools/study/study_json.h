/* study_json.h - typed cJSON access for study files, with errors that name
 * the file, the JSON path and the bad value (private to tools/study).
 *
 * Every reader returns 0 and stores the value, or TF_EINVAL with a message
 * like `study.json: $.sweep.ranks[1]: expected an integer in [1, 4096], got
 * "4"`.  A missing optional field leaves the default and returns 0.
 */
#ifndef TF_STUDY_JSON_H
#define TF_STUDY_JSON_H

#include <cjson/cJSON.h>

#include "tf/error.h"

/* The source (file name) and the JSON path of the value being read. */
typedef struct sj_at {
    const char *where;
    char path[256];
} sj_at;

/* out = at.key / at[index]. */
void sj_child(const sj_at *at, const char *key, sj_at *out);
void sj_index(const sj_at *at, int index, sj_at *out);

/* Fails with "<where>: <path>: <what>, got <value>" (value cut to one
 * line), or "..., but it is missing" when value is NULL.  Returns TF_EINVAL. */
int sj_fail(const sj_at *at, const cJSON *value, const char *what, tf_error *err);

/* Parses text; a syntax error names the line and column.  *root is freed
 * with cJSON_Delete.  Not thread-safe (cJSON records errors globally). */
int sj_parse(const char *text, const char *where, cJSON **root, tf_error *err);

/* Checks that v (at `at`) is a finite number in [min, max] / an integer in
 * [min, max] / a string. */
int sj_number_value(const sj_at *at, const cJSON *v, double min, double max, double *out,
                    tf_error *err);
int sj_int_value(const sj_at *at, const cJSON *v, int min, int max, int *out, tf_error *err);
int sj_string_value(const sj_at *at, const cJSON *v, const char **out, tf_error *err);

/* Field readers on object o at `at`: missing (or null) and required fails,
 * missing and optional leaves *out untouched and sets *given (may be NULL)
 * to 0. */
int sj_number(const sj_at *at, const cJSON *o, const char *key, int required, double min,
              double max, double *out, int *given, tf_error *err);
int sj_int(const sj_at *at, const cJSON *o, const char *key, int required, int min, int max,
           int *out, tf_error *err);
int sj_string(const sj_at *at, const cJSON *o, const char *key, int required, const char **out,
              tf_error *err);
/* An object field (NULL in *out when optional and missing). */
int sj_object(const sj_at *at, const cJSON *o, const char *key, int required, const cJSON **out,
              tf_error *err);

#endif
