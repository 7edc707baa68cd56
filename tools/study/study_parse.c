/* study_parse.c - reading and validating study.json. */
#include "study.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json_util.h"
#include "study_shape.h"
#include "tf/profile.h"
#include "tf/schedule.h"
#include "tf/util.h"

/* The reference implementation's defaults when a frozen time is not given
 * (docs/tf-study.md). */
#define DEFAULT_B_FROZEN 0.5
#define DEFAULT_W_FROZEN 0.01
#define DEFAULT_CAP 0.9

/* The per-layer fields of "model", in the order of tf_stage_times. */
enum {
    FIELD_FORWARD,
    FIELD_BACKWARD,
    FIELD_BACKWARD_FROZEN,
    FIELD_INPUT,
    FIELD_WEIGHT,
    FIELD_WEIGHT_FROZEN,
    FIELD_PARAMETERS,
    FIELD_COUNT
};

static const struct {
    const char *layer_key; /* key in "model" (per layer) */
    const char *stage_key; /* key in "embedding"/"head" and in profile stages */
    size_t offset;         /* in tf_stage_times */
} fields[FIELD_COUNT] = {
    {"layer_forward_ms", "forward_ms", offsetof(tf_stage_times, forward_ms)},
    {"layer_backward_ms", "backward_ms", offsetof(tf_stage_times, backward_ms)},
    {"layer_backward_frozen_ms", "backward_frozen_ms",
     offsetof(tf_stage_times, backward_frozen_ms)},
    {"layer_backward_input_ms", "backward_input_ms", offsetof(tf_stage_times, backward_input_ms)},
    {"layer_backward_weight_ms", "backward_weight_ms",
     offsetof(tf_stage_times, backward_weight_ms)},
    {"layer_backward_weight_frozen_ms", "backward_weight_frozen_ms",
     offsetof(tf_stage_times, backward_weight_frozen_ms)},
    {"layer_parameters", "parameters", offsetof(tf_stage_times, parameters)},
};

/* The newest version of study.json this reader reads. */
enum { STUDY_VERSION = 1 };

/* The fields of each object of a study (docs/tf-study.md); "model" also
 * takes the layer_* keys of fields[], "embedding" and "head" its stage
 * keys (known_fields). */
static const char *const study_fields[] = {"name", "model", "sweep", "gpu_memory_bytes",
                                           "memory_headroom_bytes", NULL};
static const char *const model_fields[] = {
    "layers", "profile", "embedding", "head", "partition", "microbatch_tokens", NULL};
static const char *const sweep_fields[] = {
    "schedule", "ranks", "stages_per_rank", "microbatches", "max_freeze_ratio", "p2p_ms", NULL};

static const tfj_format study_format = {
    .name = "tf-study", .required = 0, .version = STUDY_VERSION, .fields = study_fields};

/* Fills out (FIELD_COUNT + the names of every list in lists + 1) with the
 * layer keys (layer 1) or the stage keys (layer 0) of fields[], then the
 * names of each list of lists (NULL-ended; may be NULL). */
static void known_fields(int layer, const char *const *const *lists, const char **out)
{
    int n = 0;
    for (int f = 0; f < FIELD_COUNT; f++)
        out[n++] = layer ? fields[f].layer_key : fields[f].stage_key;
    for (; lists && *lists; lists++)
        for (const char *const *name = *lists; *name; name++)
            out[n++] = *name;
    out[n] = NULL;
}

static double *field_ptr(tf_stage_times *t, int f)
{
    return (double *)((char *)t + fields[f].offset);
}

/* Where a per-layer field's values came from. */
typedef enum { SOURCE_NONE = 0, SOURCE_PROFILE, SOURCE_EXPLICIT } field_source;

/* A per-layer field being resolved: explicit values beat the profile's;
 * defaults fill the rest. */
typedef struct layer_values {
    field_source source[FIELD_COUNT];
    const cJSON *json[FIELD_COUNT]; /* the explicit value (number or list) */
} layer_values;

/* ---- model ------------------------------------------------------------ */

/* Reads model.<key>: a number for every layer, or a list of `layers`
 * numbers.  Stores into s->layer[*].<field>. */
static int read_layer_field(const tfj_ctx *model_at, const cJSON *model, int f, tf_study *s,
                            layer_values *lv, tf_error *err)
{
    const char *key = fields[f].layer_key;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    tfj_ctx at;
    tfj_child(model_at, key, &at);
    /* Times are bounded by the planner's largest duration; counts are not. */
    const double max = strstr(key, "_ms") ? TF_MAX_DURATION_MS : HUGE_VAL;
    if (cJSON_IsArray(v)) {
        if (cJSON_GetArraySize(v) != s->layers) {
            char what[96];
            snprintf(what, sizeof what, "expected a number or a list of %d numbers (one per layer)",
                     s->layers);
            return tfj_fail(&at, v, what, err);
        }
        int i = 0;
        const cJSON *item;
        cJSON_ArrayForEach(item, v)
        {
            tfj_ctx item_at;
            tfj_index(&at, i, &item_at);
            int rc = tfj_number_value(&item_at, item, 0.0, max, field_ptr(&s->layer[i], f), err);
            if (rc)
                return rc;
            i++;
        }
    } else {
        double value;
        if (!cJSON_IsNumber(v))
            return tfj_fail(&at, v, "expected a number or a list of numbers (one per layer)", err);
        int rc = tfj_number_value(&at, v, 0.0, max, &value, err);
        if (rc)
            return rc;
        for (int i = 0; i < s->layers; i++)
            *field_ptr(&s->layer[i], f) = value;
    }
    lv->source[f] = SOURCE_EXPLICIT;
    lv->json[f] = v;
    return 0;
}

/* Splits `layers` into `stages` runs by count (the last layers % stages
 * stages get one more, as in an "even" partition of uniform layers): how
 * the profiled model's layers are assumed to sit on its stages. */
static int layers_in_stage(int layers, int stages, int k)
{
    return layers / stages + (k >= stages - layers % stages ? 1 : 0);
}

/* Derives per-layer times from a measured profile: each stage's times
 * divided evenly over the layers it is assumed to hold. */
static int read_profile(const tfj_ctx *model_at, const cJSON *model, tf_study *s,
                        layer_values *lv, double *profile_tokens, tf_error *err)
{
    const char *path;
    int rc = tfj_string(model_at, model, "profile", 1, NULL, &path, err);
    if (rc)
        return rc;
    /* A relative path is relative to the study file, not the working dir. */
    const char *slash = strrchr(s->source, '/');
    if (path[0] != '/' && slash)
        snprintf(s->profile_path, sizeof s->profile_path, "%.*s/%s", (int)(slash - s->source),
                 s->source, path);
    else
        snprintf(s->profile_path, sizeof s->profile_path, "%s", path);

    tf_profile p;
    tf_error inner = {0};
    rc = tf_profile_load(s->profile_path, &p, &inner);
    if (rc) {
        tfj_ctx at;
        tfj_child(model_at, "profile", &at);
        return tf_fail(err, rc, "%s: %s: cannot use the profile: %s", s->source, at.path,
                       inner.msg);
    }
    const int stages = p.schedule.stages;
    if (stages > s->layers) {
        tfj_ctx at;
        tfj_child(model_at, "layers", &at);
        tf_fail(err, TF_EINVAL,
                "%s: %s: the profile %s has %d stages but the model only %d %s (each "
                "stage holds at least one layer)",
                s->source, at.path, s->profile_path, stages, s->layers,
                tf_plural(s->layers, "layer", "layers"));
        tf_profile_free(&p);
        return TF_EINVAL;
    }
    /* I/W times are usable only if every stage has them. */
    int split = 1;
    for (int k = 0; k < stages; k++)
        split &= p.stages[k].backward_input_ms + p.stages[k].backward_weight_ms > 0;
    int layer = 0;
    for (int k = 0; k < stages; k++) {
        tf_stage_times st = p.stages[k];
        if (st.backward_ms <= 0 && split) {
            /* A split-schedule profile need not measure the full backward. */
            st.backward_ms = st.backward_input_ms + st.backward_weight_ms;
            st.backward_frozen_ms = st.backward_input_ms + st.backward_weight_frozen_ms;
        }
        int count = layers_in_stage(s->layers, stages, k);
        for (int j = 0; j < count; j++, layer++)
            for (int f = 0; f < FIELD_COUNT; f++)
                *field_ptr(&s->layer[layer], f) = *field_ptr(&st, f) / count;
    }
    for (int f = 0; f < FIELD_COUNT; f++)
        lv->source[f] = SOURCE_PROFILE;
    if (!split)
        lv->source[FIELD_INPUT] = lv->source[FIELD_WEIGHT] = lv->source[FIELD_WEIGHT_FROZEN] =
            SOURCE_NONE;
    *profile_tokens = p.microbatch_tokens;
    tf_profile_free(&p);
    return 0;
}

/* Checks layer i's frozen field against its full time; names the frozen
 * field's explicit JSON (only explicit frozen times can exceed the full). */
static int check_frozen(const tfj_ctx *model_at, const tf_study *s, const layer_values *lv,
                        int frozen_field, const char *full_name, tf_error *err)
{
    int full_field = frozen_field == FIELD_BACKWARD_FROZEN ? FIELD_BACKWARD : FIELD_WEIGHT;
    for (int i = 0; i < s->layers; i++) {
        tf_stage_times *t = &s->layer[i];
        double frozen = *field_ptr(t, frozen_field), full = *field_ptr(t, full_field);
        if (frozen <= full)
            continue;
        tfj_ctx at;
        tfj_child(model_at, fields[frozen_field].layer_key, &at);
        const cJSON *v = lv->json[frozen_field];
        if (cJSON_IsArray(v)) {
            tfj_ctx item_at;
            tfj_index(&at, i, &item_at);
            at = item_at;
            v = cJSON_GetArrayItem(v, i);
        }
        char what[160];
        snprintf(what, sizeof what, "a frozen time must not exceed %s (%g ms for layer %d)",
                 full_name, full, i);
        return tfj_fail(&at, v, what, err);
    }
    return 0;
}

/* Fills defaults for the fields neither the model nor the profile gave. */
static int resolve_layers(const tfj_ctx *model_at, tf_study *s, layer_values *lv, tf_error *err)
{
    field_source *src = lv->source;
    tfj_ctx at;
    if (!src[FIELD_FORWARD]) {
        tfj_child(model_at, fields[FIELD_FORWARD].layer_key, &at);
        return tfj_fail(&at, NULL, "expected a number or a list (or a \"profile\")", err);
    }
    if (!src[FIELD_INPUT] != !src[FIELD_WEIGHT]) {
        int missing = src[FIELD_INPUT] ? FIELD_WEIGHT : FIELD_INPUT;
        int present = missing == FIELD_INPUT ? FIELD_WEIGHT : FIELD_INPUT;
        tfj_child(model_at, fields[missing].layer_key, &at);
        char what[160];
        snprintf(what, sizeof what, "expected together with %s (a split backward needs both)",
                 fields[present].layer_key);
        return tfj_fail(&at, NULL, what, err);
    }
    s->has_split_backward = src[FIELD_INPUT] && src[FIELD_WEIGHT];
    /* A frozen time follows its full time's source: an explicit full time
     * with no explicit frozen time gets the reference default, not a
     * profile's frozen time measured against a different full time. */
    if (src[FIELD_WEIGHT] == SOURCE_EXPLICIT && src[FIELD_WEIGHT_FROZEN] != SOURCE_EXPLICIT)
        src[FIELD_WEIGHT_FROZEN] = SOURCE_NONE;
    if (s->has_split_backward && !src[FIELD_WEIGHT_FROZEN])
        for (int i = 0; i < s->layers; i++)
            s->layer[i].backward_weight_frozen_ms =
                DEFAULT_W_FROZEN * s->layer[i].backward_weight_ms;
    if (!s->has_split_backward)
        for (int i = 0; i < s->layers; i++)
            s->layer[i].backward_input_ms = s->layer[i].backward_weight_ms =
                s->layer[i].backward_weight_frozen_ms = 0.0;

    if (src[FIELD_BACKWARD] == SOURCE_EXPLICIT && src[FIELD_BACKWARD_FROZEN] != SOURCE_EXPLICIT)
        src[FIELD_BACKWARD_FROZEN] = SOURCE_NONE;
    if (!src[FIELD_BACKWARD]) {
        if (!s->has_split_backward) {
            tfj_child(model_at, fields[FIELD_BACKWARD].layer_key, &at);
            return tfj_fail(&at, NULL,
                           "expected a number or a list (or layer_backward_input_ms and "
                           "layer_backward_weight_ms, or a \"profile\")",
                           err);
        }
        /* The full backward is the input part plus the weight part; frozen,
         * only the weight part shrinks. */
        for (int i = 0; i < s->layers; i++) {
            tf_stage_times *t = &s->layer[i];
            t->backward_ms = t->backward_input_ms + t->backward_weight_ms;
            if (!src[FIELD_BACKWARD_FROZEN])
                t->backward_frozen_ms = t->backward_input_ms + t->backward_weight_frozen_ms;
        }
    } else if (!src[FIELD_BACKWARD_FROZEN]) {
        for (int i = 0; i < s->layers; i++)
            s->layer[i].backward_frozen_ms = DEFAULT_B_FROZEN * s->layer[i].backward_ms;
    }
    int rc = check_frozen(model_at, s, lv, FIELD_BACKWARD_FROZEN, "the layer's backward time",
                          err);
    if (!rc && s->has_split_backward)
        rc = check_frozen(model_at, s, lv, FIELD_WEIGHT_FROZEN,
                          "the layer's backward-weight time", err);
    return rc;
}

/* Reads "embedding" or "head": extra stage costs with the profile's field
 * names and the same defaults as layers. */
static int read_extra_cost(const tfj_ctx *model_at, const cJSON *model, const char *key,
                           tf_stage_times *out, tf_error *err)
{
    const cJSON *o;
    int rc = tfj_object(model_at, model, key, 0, &o, err);
    memset(out, 0, sizeof *out);
    if (rc || !o)
        return rc;
    tfj_ctx at;
    tfj_child(model_at, key, &at);
    const char *known[FIELD_COUNT + 1];
    known_fields(0, NULL, known);
    if ((rc = tfj_check_fields(&at, o, known, err)))
        return rc;
    int given[FIELD_COUNT] = {0};
    for (int f = 0; f < FIELD_COUNT; f++) {
        const double max = strstr(fields[f].stage_key, "_ms") ? TF_MAX_DURATION_MS : HUGE_VAL;
        given[f] = tfj_has(o, fields[f].stage_key);
        if ((rc = tfj_number(&at, o, fields[f].stage_key, 0, 0.0, 0.0, max, field_ptr(out, f),
                             err)))
            return rc;
    }
    if (!given[FIELD_WEIGHT_FROZEN])
        out->backward_weight_frozen_ms = DEFAULT_W_FROZEN * out->backward_weight_ms;
    if (!given[FIELD_BACKWARD]) {
        out->backward_ms = out->backward_input_ms + out->backward_weight_ms;
        if (!given[FIELD_BACKWARD_FROZEN])
            out->backward_frozen_ms = out->backward_input_ms + out->backward_weight_frozen_ms;
    } else if (!given[FIELD_BACKWARD_FROZEN]) {
        out->backward_frozen_ms = DEFAULT_B_FROZEN * out->backward_ms;
    }
    tfj_ctx field_at;
    if (out->backward_frozen_ms > out->backward_ms) {
        tfj_child(&at, "backward_frozen_ms", &field_at);
        return tfj_fail(&field_at, cJSON_GetObjectItemCaseSensitive(o, "backward_frozen_ms"),
                       "a frozen time must not exceed backward_ms", err);
    }
    if (out->backward_weight_frozen_ms > out->backward_weight_ms) {
        tfj_child(&at, "backward_weight_frozen_ms", &field_at);
        return tfj_fail(&field_at,
                       cJSON_GetObjectItemCaseSensitive(o, "backward_weight_frozen_ms"),
                       "a frozen time must not exceed backward_weight_ms", err);
    }
    return 0;
}

static int parse_model(const tfj_ctx *root_at, const cJSON *root, tf_study *s, tf_error *err)
{
    const cJSON *model;
    int rc = tfj_object(root_at, root, "model", 1, &model, err);
    if (rc)
        return rc;
    tfj_ctx at;
    tfj_child(root_at, "model", &at);
    const char *known[FIELD_COUNT + sizeof model_fields / sizeof *model_fields + 40];
    const char *const *const lists[] = {model_fields, study_shape_fields, study_bytes_fields,
                                        study_measured_fields, NULL};
    known_fields(1, lists, known);
    if ((rc = tfj_check_fields(&at, model, known, err)) ||
        (rc = tfj_int(&at, model, "layers", 1, 0, 1, TF_STUDY_MAX_LAYERS, &s->layers, err)))
        return rc;
    s->layer = calloc((size_t)s->layers, sizeof *s->layer);
    if (!s->layer)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", s->source);

    layer_values lv;
    memset(&lv, 0, sizeof lv);
    double profile_tokens = 0.0;
    if (cJSON_GetObjectItemCaseSensitive(model, "profile") &&
        (rc = read_profile(&at, model, s, &lv, &profile_tokens, err)))
        return rc;
    for (int f = 0; f < FIELD_COUNT; f++)
        if ((rc = read_layer_field(&at, model, f, s, &lv, err)))
            return rc;
    if ((rc = resolve_layers(&at, s, &lv, err)) ||
        (rc = read_extra_cost(&at, model, "embedding", &s->embedding, err)) ||
        (rc = read_extra_cost(&at, model, "head", &s->head, err)) ||
        (rc = study_parse_shape(&at, model, lv.source[FIELD_PARAMETERS] != SOURCE_NONE, s,
                                err)))
        return rc;
    const char *partition;
    if ((rc = tfj_string(&at, model, "partition", 0, "even", &partition, err)))
        return rc;
    if (strcmp(partition, "even") != 0 && strcmp(partition, "balanced") != 0) {
        tfj_ctx partition_at;
        tfj_child(&at, "partition", &partition_at);
        return tfj_fail(&partition_at, cJSON_GetObjectItemCaseSensitive(model, "partition"),
                       "expected \"even\" or \"balanced\"", err);
    }
    s->balanced_partition = strcmp(partition, "balanced") == 0;

    int given = tfj_has(model, "microbatch_tokens");
    /* A shape's microbatch holds s x b tokens. */
    double tokens = s->has_shape ? s->shape.sequence_length * s->shape.microbatch_size
                                 : profile_tokens;
    if ((rc = tfj_number(&at, model, "microbatch_tokens", 0, tokens, 1e-9, HUGE_VAL,
                         &s->microbatch_tokens, err)))
        return rc;
    if (!given && !(tokens > 0)) {
        tfj_ctx tokens_at;
        tfj_child(&at, "microbatch_tokens", &tokens_at);
        return tfj_fail(&tokens_at, NULL,
                       "expected the tokens per microbatch (throughput needs it; a profile "
                       "without microbatch_tokens does not give it)",
                       err);
    }
    return 0;
}

/* ---- sweep ------------------------------------------------------------- */

/* The canonical spelling of a built-in schedule (names match
 * case-insensitively, as PyTorch's do); 0 if name is not built in. */
static int canonical_schedule(const char *name, char *out, size_t size)
{
    const char *canonical = tf_schedule_canonical_name(name);
    if (!canonical)
        return 0;
    snprintf(out, size, "%s", canonical);
    return 1;
}

/* Values of one sweep list, sorted with their positions, to find repeats
 * in O(n log n): a pairwise check took 17 s for 2e5 entries. */
typedef struct sweep_value {
    double value;
    int index;
} sweep_value;

static int compare_sweep_values(const void *pa, const void *pb)
{
    const sweep_value *a = pa, *b = pb;
    if (a->value != b->value)
        return a->value < b->value ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The first value (in list order) that repeats an earlier one: *repeat its
 * index, *first the earlier one's; returns 0 when all differ, 1 when one
 * repeats, TF_ENOMEM. */
static int find_repeat(const double *values, int n, int *repeat, int *first)
{
    sweep_value *sorted = malloc(((size_t)n + 1) * sizeof *sorted);
    if (!sorted)
        return TF_ENOMEM;
    for (int i = 0; i < n; i++)
        sorted[i] = (sweep_value){values[i], i};
    qsort(sorted, (size_t)n, sizeof *sorted, compare_sweep_values);
    *repeat = n;
    /* Within a run of equal values the first is the original and the
     * second the earliest repeat of it. */
    for (int k = 1; k < n; k++)
        if (sorted[k].value == sorted[k - 1].value &&
            (k < 2 || sorted[k - 2].value != sorted[k].value) && sorted[k].index < *repeat) {
            *repeat = sorted[k].index;
            *first = sorted[k - 1].index;
        }
    free(sorted);
    return *repeat < n;
}

/* How many values sweep.<key> holds: 0 when absent, 1 for a scalar. */
static int list_count(const cJSON *sweep, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sweep, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    return cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
}

/* Reads the values of sweep.<key> (count of them, v the array or the one
 * value) into values, checked for type and range. */
static int read_list_values(const tfj_ctx *at, const cJSON *v, int count, char kind, double min,
                            double max, double *values, tf_error *err)
{
    const cJSON *item = cJSON_IsArray(v) ? v->child : v;
    for (int i = 0; i < count; i++, item = item->next) {
        tfj_ctx item_at = *at;
        if (cJSON_IsArray(v))
            tfj_index(at, i, &item_at);
        int as_int = 0, rc;
        if (kind == 'i')
            rc = tfj_int_value(&item_at, item, (int)min, (int)max, &as_int, err);
        else
            rc = tfj_number_value(&item_at, item, min, max, &values[i], err);
        if (rc)
            return rc;
        if (kind == 'i')
            values[i] = as_int;
    }
    return 0;
}

/* Reads sweep.<key>: one value or a non-empty list of distinct values.
 * kind 'i': integers in [min, max] into *ints; 'n': numbers into *nums. */
static int read_list(const tfj_ctx *sweep_at, const cJSON *sweep, const char *key, int required,
                     char kind, double min, double max, int **ints, double **nums, int *n,
                     tf_error *err)
{
    tfj_ctx at;
    tfj_child(sweep_at, key, &at);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sweep, key);
    *n = 0;
    const char *what = kind == 'i' ? "expected an integer or a non-empty list of integers"
                                   : "expected a number or a non-empty list of numbers";
    if (!v || cJSON_IsNull(v))
        return required ? tfj_fail(&at, NULL, what, err) : 0;
    int count = list_count(sweep, key);
    if (count == 0)
        return tfj_fail(&at, v, "the sweep needs at least one value here", err);
    if (!cJSON_IsArray(v) && !cJSON_IsNumber(v))
        return tfj_fail(&at, v, what, err);
    double *values = calloc((size_t)count, sizeof *values);
    int *as_ints = kind == 'i' ? calloc((size_t)count, sizeof *as_ints) : NULL;
    if (!values || (kind == 'i' && !as_ints)) {
        free(values);
        free(as_ints);
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", sweep_at->where);
    }
    int repeat = 0, first = 0;
    int rc = read_list_values(&at, v, count, kind, min, max, values, err);
    if (!rc && (rc = find_repeat(values, count, &repeat, &first)) == 1) {
        tfj_ctx item_at;
        tfj_index(&at, repeat, &item_at);
        char text[64];
        snprintf(text, sizeof text, "repeats the value of %s[%d]", key, first);
        rc = tfj_fail(&item_at, cJSON_GetArrayItem(v, repeat), text, err);
    } else if (rc == TF_ENOMEM) {
        rc = tf_fail(err, TF_ENOMEM, "%s: out of memory", sweep_at->where);
    }
    if (rc) {
        free(values);
        free(as_ints);
        return rc;
    }
    if (kind == 'i') {
        for (int i = 0; i < count; i++)
            as_ints[i] = (int)values[i];
        free(values);
        *ints = as_ints;
    } else {
        *nums = values;
    }
    *n = count;
    return 0;
}

/* The configurations a sweep makes, from the lengths of its lists alone,
 * so that the cap applies before any list is read or checked. */
static int check_config_count(const tfj_ctx *at, const cJSON *sweep, tf_study *s,
                              tf_error *err)
{
    static const char *const keys[] = {"schedule", "ranks", "stages_per_rank", "microbatches",
                                       "max_freeze_ratio", "p2p_ms"};
    /* The model's recompute and sequence_parallel lists sweep too. */
    double configs = (s->n_recompute ? s->n_recompute : 1) *
                     (double)(s->n_sequence_parallel ? s->n_sequence_parallel : 1);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        int count = list_count(sweep, keys[k]);
        configs *= count > 0 ? count : 1;
    }
    if (configs > TF_STUDY_MAX_CONFIGS)
        return tf_fail(err, TF_EINVAL, "%s: %s: %.0f configurations, at most %d are allowed",
                       s->source, at->path, configs, TF_STUDY_MAX_CONFIGS);
    return 0;
}

static int read_schedules(const tfj_ctx *sweep_at, const cJSON *sweep, tf_study *s, tf_error *err)
{
    tfj_ctx at;
    tfj_child(sweep_at, "schedule", &at);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sweep, "schedule");
    const char *what = "expected a schedule name or a non-empty list of names";
    if (!v || cJSON_IsNull(v))
        return tfj_fail(&at, NULL, what, err);
    if (!cJSON_IsArray(v) && !cJSON_IsString(v))
        return tfj_fail(&at, v, what, err);
    int count = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (count == 0)
        return tfj_fail(&at, v, "the sweep needs at least one schedule", err);
    s->schedule = calloc((size_t)count, sizeof *s->schedule);
    if (!s->schedule)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", s->source);
    const cJSON *item = cJSON_IsArray(v) ? v->child : v;
    for (int i = 0; i < count; i++, item = item->next) {
        tfj_ctx item_at = at;
        if (cJSON_IsArray(v))
            tfj_index(&at, i, &item_at);
        const char *name;
        int rc = tfj_string_value(&item_at, item, &name, err);
        if (rc)
            return rc;
        if (!canonical_schedule(name, s->schedule[i], sizeof s->schedule[i])) {
            char unknown[256];
            snprintf(unknown, sizeof unknown, "unknown schedule (built-in: %s)",
                     tf_schedule_builtin_names());
            return tfj_fail(&item_at, item, unknown, err);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(s->schedule[j], s->schedule[i]) == 0) {
                char repeat[64];
                snprintf(repeat, sizeof repeat, "repeats schedule[%d]", j);
                return tfj_fail(&item_at, item, repeat, err);
            }
        if (tf_schedule_splits_backward(s->schedule[i]) && !s->has_split_backward) {
            char what_missing[256];
            snprintf(what_missing, sizeof what_missing,
                     "%s splits the backward into I and W, so the model needs "
                     "layer_backward_input_ms and layer_backward_weight_ms",
                     s->schedule[i]);
            return tfj_fail(&item_at, item, what_missing, err);
        }
        s->n_schedule++;
    }
    return 0;
}

static int parse_sweep(const tfj_ctx *root_at, const cJSON *root, tf_study *s, tf_error *err)
{
    const cJSON *sweep;
    int rc = tfj_object(root_at, root, "sweep", 1, &sweep, err);
    if (rc)
        return rc;
    tfj_ctx at;
    tfj_child(root_at, "sweep", &at);
    if ((rc = tfj_check_fields(&at, sweep, sweep_fields, err)) ||
        (rc = check_config_count(&at, sweep, s, err)) ||
        (rc = read_schedules(&at, sweep, s, err)) ||
        (rc = read_list(&at, sweep, "ranks", 1, 'i', 1, TF_MAX_RANKS, &s->ranks, NULL,
                        &s->n_ranks, err)) ||
        (rc = read_list(&at, sweep, "stages_per_rank", 0, 'i', 1, TF_MAX_STAGES_PER_RANK,
                        &s->stages_per_rank, NULL, &s->n_stages_per_rank, err)) ||
        (rc = read_list(&at, sweep, "microbatches", 1, 'i', 1, TF_MAX_MICROBATCHES,
                        &s->microbatches, NULL, &s->n_microbatches, err)) ||
        (rc = read_list(&at, sweep, "max_freeze_ratio", 0, 'n', 0.0, 1.0, NULL,
                        &s->max_freeze_ratio, &s->n_max_freeze_ratio, err)) ||
        (rc = read_list(&at, sweep, "p2p_ms", 0, 'n', 0.0, TF_MAX_DURATION_MS, NULL, &s->p2p_ms,
                        &s->n_p2p_ms, err)))
        return rc;
    if (!s->n_max_freeze_ratio) {
        if (!(s->max_freeze_ratio = malloc(sizeof *s->max_freeze_ratio)))
            return tf_fail(err, TF_ENOMEM, "%s: out of memory", s->source);
        s->max_freeze_ratio[0] = DEFAULT_CAP;
        s->n_max_freeze_ratio = 1;
    }
    if (!s->n_p2p_ms) {
        if (!(s->p2p_ms = malloc(sizeof *s->p2p_ms)))
            return tf_fail(err, TF_ENOMEM, "%s: out of memory", s->source);
        s->p2p_ms[0] = 0.0;
        s->n_p2p_ms = 1;
    }
    return 0;
}

static int parse_study(const cJSON *root, tf_study *s, tf_error *err)
{
    tfj_ctx at = {.where = s->source, .path = "$"};
    const char *name = NULL;
    int version, rc;
    if ((rc = tfj_check_document(&at, root, &study_format, &version, err)) ||
        (rc = tfj_string(&at, root, "name", 0, NULL, &name, err)))
        return rc;
    if (name) {
        snprintf(s->name, sizeof s->name, "%s", name);
    } else {
        const char *base = strrchr(s->source, '/');
        base = base ? base + 1 : s->source;
        size_t len = strcspn(base, ".");
        snprintf(s->name, sizeof s->name, "%.*s", (int)(len ? len : strlen(base)), base);
    }
    if ((rc = parse_model(&at, root, s, err)) ||
        (rc = study_parse_gpu_memory(&at, root, s, err)))
        return rc;
    return parse_sweep(&at, root, s, err);
}

int tf_study_parse(const char *json, const char *where, tf_study *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "%s", where ? where : "study");
    cJSON *root;
    int rc = tfj_parse(json, out->source, &root, err);
    if (rc) {
        tf_study_free(out);
        return rc;
    }
    rc = parse_study(root, out, err);
    cJSON_Delete(root);
    if (rc)
        tf_study_free(out);
    return rc;
}

int tf_study_load(const char *path, tf_study *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    char *text;
    int rc = tf_read_file_limit(path, TF_STUDY_MAX_BYTES, &text, NULL, err);
    if (rc)
        return rc;
    rc = tf_study_parse(text, path, out, err);
    free(text);
    return rc;
}

void tf_study_free(tf_study *s)
{
    free(s->layer);
    free(s->schedule);
    free(s->ranks);
    free(s->stages_per_rank);
    free(s->microbatches);
    free(s->max_freeze_ratio);
    free(s->p2p_ms);
    free(s->recompute);
    free(s->sequence_parallel);
    memset(s, 0, sizeof *s);
}
