/* study_shape.c - reading a study's model shape, which source its bytes
 * come from, recomputation and GPU memory (docs/tf-study.md, "Memory from
 * the model's shape"). */
#include "study_shape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tf/memory.h"

const char *const study_shape_fields[] = {
    "hidden", "heads", "kv_heads", "sequence_length", "microbatch_size", "ffn_hidden", "vocab",
    "bytes_per_value", "tensor_parallel", "sequence_parallel", "gated_ffn", "dropout",
    "flash_attention", NULL};

const char *const study_bytes_fields[] = {"recompute", "bytes_per_parameter",
                                          "distributed_optimizer", "data_parallel", NULL};

/* A dimension bounded far above any real model, so every product of them
 * stays exact in a double. */
#define MAX_DIMENSION 1e7

/* One value of a swept choice (a string mode or a bool) at ctx into *out:
 * returns 0 or TF_EINVAL. */
static int choice_value(const tfj_ctx *at, const cJSON *v, int is_mode, int *out, tf_error *err)
{
    if (!is_mode) {
        if (!cJSON_IsBool(v))
            return tfj_fail(at, v, "expected true or false", err);
        *out = cJSON_IsTrue(v);
        return 0;
    }
    const char *name;
    int rc = tfj_string_value(at, v, &name, err);
    if (rc)
        return rc;
    if ((*out = tf_recompute_parse(name)) < 0)
        return tfj_fail(at, v, "expected \"none\", \"selective\", \"full\" or \"auto\"", err);
    return 0;
}

/* model.<key>: one choice or a non-empty list of distinct ones, swept;
 * def when absent.  *values is malloc'd. */
static int read_choices(const tfj_ctx *model_at, const cJSON *model, const char *key,
                        int is_mode, int def, int **values, int *n, tf_error *err)
{
    tfj_ctx at;
    tfj_child(model_at, key, &at);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, key);
    int count = !v || cJSON_IsNull(v) ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (count == 0)
        return tfj_fail(&at, v, "the sweep needs at least one value here", err);
    if (!(*values = calloc((size_t)count, sizeof **values)))
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", at.where);
    *n = count;
    if (!v || cJSON_IsNull(v)) {
        (*values)[0] = def;
        return 0;
    }
    const cJSON *item = cJSON_IsArray(v) ? v->child : v;
    for (int i = 0; i < count; i++, item = item->next) {
        tfj_ctx item_at = at;
        if (cJSON_IsArray(v))
            tfj_index(&at, i, &item_at);
        int rc = choice_value(&item_at, item, is_mode, &(*values)[i], err);
        if (rc)
            return rc;
        for (int j = 0; j < i; j++)
            if ((*values)[j] == (*values)[i]) {
                char what[64];
                snprintf(what, sizeof what, "repeats the value of %s[%d]", key, j);
                return tfj_fail(&item_at, item, what, err);
            }
    }
    return 0;
}

/* The dimensions: hidden, heads, sequence and microbatch required. */
static int read_dimensions(const tfj_ctx *at, const cJSON *model, tf_transformer_shape *m,
                           tf_error *err)
{
    int rc;
    if ((rc = tfj_number(at, model, "hidden", 1, 0, 1, MAX_DIMENSION, &m->hidden, err)) ||
        (rc = tfj_number(at, model, "heads", 1, 0, 1, MAX_DIMENSION, &m->heads, err)) ||
        (rc = tfj_number(at, model, "kv_heads", 0, m->heads, 1, m->heads, &m->kv_heads, err)) ||
        (rc = tfj_number(at, model, "sequence_length", 1, 0, 1, MAX_DIMENSION,
                         &m->sequence_length, err)) ||
        (rc = tfj_number(at, model, "microbatch_size", 1, 0, 1, MAX_DIMENSION,
                         &m->microbatch_size, err)) ||
        (rc = tfj_number(at, model, "ffn_hidden", 0, 4.0 * m->hidden, 1, MAX_DIMENSION,
                         &m->ffn_hidden, err)) ||
        (rc = tfj_number(at, model, "vocab", 0, 0.0, 0, MAX_DIMENSION, &m->vocab, err)) ||
        (rc = tfj_number(at, model, "bytes_per_value", 0, 2.0, 0.125, 16, &m->bytes_per_value,
                         err)))
        return rc;
    return 0;
}

/* Tensor parallelism, the layer's variant (gating, dropout, flash). */
static int read_variant(const tfj_ctx *at, const cJSON *model, tf_transformer_shape *m,
                        tf_error *err)
{
    int rc;
    if ((rc = tfj_int(at, model, "tensor_parallel", 0, 1, 1, 4096, &m->tensor_parallel, err)) ||
        (rc = tfj_bool(at, model, "gated_ffn", 0, 0, &m->gated_ffn, err)) ||
        (rc = tfj_bool(at, model, "dropout", 0, 1, &m->dropout, err)) ||
        (rc = tfj_bool(at, model, "flash_attention", 0, 0, &m->flash_attention, err)))
        return rc;
    return 0;
}

/* Static bytes per parameter: bytes_per_parameter, or the distributed
 * optimizer's 6 + 12/d; not both. */
static int read_static(const tfj_ctx *at, const cJSON *model, tf_study *s, tf_error *err)
{
    int distributed, d, rc;
    if ((rc = tfj_bool(at, model, "distributed_optimizer", 0, 0, &distributed, err)) ||
        (rc = tfj_int(at, model, "data_parallel", 0, 1, 1, 1 << 20, &d, err)))
        return rc;
    if (distributed && tfj_has(model, "bytes_per_parameter")) {
        tfj_ctx field_at;
        tfj_child(at, "bytes_per_parameter", &field_at);
        return tfj_fail(&field_at, cJSON_GetObjectItemCaseSensitive(model, "bytes_per_parameter"),
                        "give bytes_per_parameter or distributed_optimizer, not both", err);
    }
    return tfj_number(at, model, "bytes_per_parameter", 0, tf_bytes_per_parameter(distributed, d),
                      0, 1024, &s->bytes_per_parameter, err);
}

/* Refuses the first field of list that model gives, saying what; 0 when
 * it gives none. */
static int refuse_given(const tfj_ctx *model_at, const cJSON *model, const char *const *list,
                        const char *what, tf_error *err)
{
    for (const char *const *f = list; *f; f++)
        if (tfj_has(model, *f)) {
            tfj_ctx at;
            tfj_child(model_at, *f, &at);
            return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(model, *f), what, err);
        }
    return 0;
}

/* One source of bytes: the shape's fields, the measured ones, and those
 * either needs, each only where its source is given. */
static int check_bytes_source(const tfj_ctx *model_at, const cJSON *model, const tf_study *s,
                              tf_error *err)
{
    static const char *const both = "one source of bytes: give the model's shape (hidden, "
                                    "heads, ...) or measured bytes "
                                    "(activation_bytes_per_layer, ...), not both";
    if (s->has_shape)
        return refuse_given(model_at, model, study_measured_fields, both, err);
    if (s->has_measured)
        return refuse_given(model_at, model, study_shape_fields, both, err);
    int rc = refuse_given(model_at, model, study_shape_fields,
                          "a shape field needs the model's shape (hidden, heads, "
                          "sequence_length, microbatch_size)",
                          err);
    if (!rc)
        rc = refuse_given(model_at, model, study_measured_fields,
                          "a measured byte field needs activation_bytes_per_layer", err);
    if (!rc)
        rc = refuse_given(model_at, model, study_bytes_fields,
                          "needs the model's bytes: its shape (hidden, heads, "
                          "sequence_length, microbatch_size) or activation_bytes_per_layer",
                          err);
    return rc;
}

/* Fills the parameters a shape implies where the model gave none: given
 * per-layer counts (or a profile's, which spread the embedding and head
 * over their stages' layers) are kept whole. */
static void apply_shape(int layer_parameters_given, tf_study *s)
{
    const tf_transformer_shape *m = &s->shape;
    if (layer_parameters_given)
        return;
    for (int i = 0; i < s->layers; i++)
        s->layer[i].parameters = tf_transformer_layer_parameters(m);
    /* The embedding and the output projection are vocab-parallel. */
    const double table = m->vocab * m->hidden / m->tensor_parallel;
    if (s->embedding.parameters == 0.0)
        s->embedding.parameters = table;
    if (s->head.parameters == 0.0)
        s->head.parameters = table + m->hidden;
}

int study_parse_shape(const tfj_ctx *model_at, const cJSON *model, int layer_parameters_given,
                      tf_study *s, tf_error *err)
{
    s->has_shape = tfj_has(model, "hidden");
    s->has_measured = tfj_has(model, "activation_bytes_per_layer");
    s->has_bytes = s->has_shape || s->has_measured;
    int rc;
    if ((rc = check_bytes_source(model_at, model, s, err)) ||
        (rc = read_choices(model_at, model, "recompute", 1, TF_RECOMPUTE_NONE, &s->recompute,
                           &s->n_recompute, err)) ||
        (rc = read_choices(model_at, model, "sequence_parallel", 0, 0, &s->sequence_parallel,
                           &s->n_sequence_parallel, err)))
        return rc;
    if (s->has_measured) {
        if ((rc = study_parse_measured(model_at, model, layer_parameters_given, s, err)))
            return rc;
        /* Without static bytes per layer, the parameters' bytes, as a shape's. */
        return s->measured_static >= 0 ? 0 : read_static(model_at, model, s, err);
    }
    if (!s->has_shape)
        return 0;
    if ((rc = read_dimensions(model_at, model, &s->shape, err)) ||
        (rc = read_variant(model_at, model, &s->shape, err)) ||
        (rc = read_static(model_at, model, s, err)))
        return rc;
    apply_shape(layer_parameters_given, s);
    return 0;
}

int tf_study_set_gpu_memory(tf_study *s, double bytes, tf_error *err)
{
    if (!s->has_bytes)
        return tf_fail(err, TF_EINVAL,
                       "--gpu-memory: %s: the model has no bytes to count: neither a shape "
                       "(model.hidden, heads, sequence_length, microbatch_size) nor "
                       "model.activation_bytes_per_layer",
                       s->source);
    if (s->memory_headroom_bytes >= bytes)
        return tf_fail(err, TF_EINVAL,
                       "--gpu-memory: %.0f bytes is not above the study's "
                       "memory_headroom_bytes (%.0f)",
                       bytes, s->memory_headroom_bytes);
    s->gpu_memory_bytes = bytes;
    return 0;
}

int study_parse_gpu_memory(const tfj_ctx *root_at, const cJSON *root, tf_study *s,
                           tf_error *err)
{
    int rc;
    if ((rc = tfj_number(root_at, root, "gpu_memory_bytes", 0, 0.0, 1.0, TF_MAX_BYTES,
                         &s->gpu_memory_bytes, err)) ||
        (rc = tfj_number(root_at, root, "memory_headroom_bytes", 0, 0.0, 0.0, TF_MAX_BYTES,
                         &s->memory_headroom_bytes, err)))
        return rc;
    if (s->gpu_memory_bytes > 0 && !s->has_bytes) {
        tfj_ctx at;
        tfj_child(root_at, "gpu_memory_bytes", &at);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(root, "gpu_memory_bytes"),
                        "a memory limit needs the model's bytes: its shape (model.hidden, "
                        "heads, sequence_length, microbatch_size) or "
                        "model.activation_bytes_per_layer",
                        err);
    }
    if (s->gpu_memory_bytes > 0 && s->memory_headroom_bytes >= s->gpu_memory_bytes) {
        tfj_ctx at;
        tfj_child(root_at, "memory_headroom_bytes", &at);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(root, "memory_headroom_bytes"),
                        "the headroom must be less than gpu_memory_bytes", err);
    }
    return 0;
}
