/* aux_json.h - aux work items (tf/aux.h) in JSON (aux_json.c): the one
 * reader and writer of profile.json's per-stage "aux" lists and
 * plan.json's "aux" section.  Internal to the planner library. */
#ifndef TF_AUX_JSON_H
#define TF_AUX_JSON_H

#include "json_util.h"
#include "tf/aux.h"

/* A growing list of aux work items. */
typedef struct tf_aux_list {
    tf_aux_work *work;
    int n;
} tf_aux_list;

/* Reads array `key` of object o at ctx (absent: nothing), each entry
 * {"name", "after", "ms", "divisible"} and, when stage < 0, its "stage"
 * (below `stages`); otherwise every entry gets `stage`.  Appends to *list.
 * TF_EINVAL naming the field: an unknown field, a name empty or over 47
 * bytes, an `after` other than F, B, W or step, ms not in (0,
 * TF_MAX_DURATION_MS], more than TF_AUX_MAX_WORK items in all. */
int tf_aux_list_parse(const tfj_ctx *ctx, const cJSON *o, const char *key, int stage,
                      int stages, tf_aux_list *list, tf_error *err);

/* The items of `stage` (stage < 0: all, each with its "stage") as a JSON
 * array under key of o; nothing when there are none. */
void tf_aux_list_to_json(const tf_aux_work *work, int n, int stage, cJSON *o,
                         const char *key);

#endif
