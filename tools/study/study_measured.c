/* study_measured.c - a study's bytes given directly, measured per layer
 * (docs/tf-study.md, "Measured bytes"). */
#include "study_shape.h"

#include <string.h>

#include "tf/memory.h"

const char *const study_measured_fields[] = {
    "activation_bytes_per_layer", "activation_frozen_bytes_per_layer",
    "weight_grad_bytes_per_layer", "checkpoint_bytes_per_layer", "static_bytes_per_layer",
    "first_stage_extra_bytes", "last_stage_extra_bytes", NULL};

/* The fields of first_stage_extra_bytes and last_stage_extra_bytes: the
 * profile's names for a stage's bytes. */
static const char *const extra_fields[] = {"static_bytes", "activation_bytes", NULL};

/* model.<key> >= 0 bytes into *out (def when absent). */
static int read_bytes(const tfj_ctx *at, const cJSON *o, const char *key, double def,
                      double *out, tf_error *err)
{
    return tfj_number(at, o, key, 0, def, 0.0, TF_MAX_BYTES, out, err);
}

/* Fails at model.<key> (its value, or missing) with what. */
static int fail_at(const tfj_ctx *model_at, const cJSON *model, const char *key,
                   const char *what, tf_error *err)
{
    tfj_ctx at;
    tfj_child(model_at, key, &at);
    return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(model, key), what, err);
}

/* A stage's extra bytes, model.<key>: {static_bytes, activation_bytes},
 * both optional, 0 when absent. */
static int read_extra(const tfj_ctx *model_at, const cJSON *model, const char *key,
                      double *static_bytes, double *activation, tf_error *err)
{
    const cJSON *o;
    int rc = tfj_object(model_at, model, key, 0, &o, err);
    *static_bytes = *activation = 0.0;
    if (rc || !o)
        return rc;
    tfj_ctx at;
    tfj_child(model_at, key, &at);
    if ((rc = tfj_check_fields(&at, o, extra_fields, err)) ||
        (rc = read_bytes(&at, o, "static_bytes", 0.0, static_bytes, err)))
        return rc;
    return read_bytes(&at, o, "activation_bytes", 0.0, activation, err);
}

/* One layer's A, A_f (default A), G (default A) and C (default 0). */
static int read_layer(const tfj_ctx *at, const cJSON *model, tf_activation_bytes *b,
                      tf_error *err)
{
    int rc;
    if ((rc = read_bytes(at, model, "activation_bytes_per_layer", 0.0, &b->activation, err)) ||
        (rc = read_bytes(at, model, "activation_frozen_bytes_per_layer", b->activation,
                         &b->activation_frozen, err)) ||
        (rc = read_bytes(at, model, "weight_grad_bytes_per_layer", b->activation,
                         &b->weight_grad, err)) ||
        (rc = read_bytes(at, model, "checkpoint_bytes_per_layer", 0.0, &b->checkpoint, err)))
        return rc;
    if (b->activation_frozen > b->activation)
        return fail_at(at, model, "activation_frozen_bytes_per_layer",
                       "frozen bytes must not exceed activation_bytes_per_layer", err);
    if (b->checkpoint > b->activation)
        return fail_at(at, model, "checkpoint_bytes_per_layer",
                       "a checkpoint must not exceed activation_bytes_per_layer", err);
    return 0;
}

/* Measured bytes hold whatever the measured run recomputed: "selective"
 * has no tensors to drop from them, and "full" and "auto" need the
 * checkpoint a recomputed layer keeps. */
static int check_recompute(const tfj_ctx *at, const cJSON *model, const tf_study *s,
                           tf_error *err)
{
    for (int i = 0; i < s->n_recompute; i++) {
        if (s->recompute[i] == TF_RECOMPUTE_SELECTIVE)
            return fail_at(at, model, "recompute",
                           "\"selective\" needs the model's shape (hidden, ...): measured "
                           "bytes already hold what the measured run kept",
                           err);
        if (s->recompute[i] != TF_RECOMPUTE_NONE && !tfj_has(model, "checkpoint_bytes_per_layer"))
            return fail_at(at, model, "checkpoint_bytes_per_layer",
                           "expected the bytes a recomputed layer keeps (recompute \"full\" "
                           "or \"auto\")",
                           err);
    }
    return 0;
}

/* Static bytes per layer, or parameters x bytes_per_parameter (then the
 * model must give parameters); *static_bytes < 0 selects the latter. */
static int read_static_source(const tfj_ctx *at, const cJSON *model,
                              int layer_parameters_given, double *static_bytes, tf_error *err)
{
    *static_bytes = -1.0;
    if (!tfj_has(model, "static_bytes_per_layer")) {
        if (!layer_parameters_given)
            return fail_at(at, model, "static_bytes_per_layer",
                           "expected the static bytes per layer (or layer_parameters, for "
                           "bytes_per_parameter to multiply)",
                           err);
        return 0;
    }
    static const char *const per_parameter[] = {"bytes_per_parameter", "distributed_optimizer",
                                                "data_parallel", NULL};
    for (const char *const *f = per_parameter; *f; f++)
        if (tfj_has(model, *f))
            return fail_at(at, model, *f, "give static_bytes_per_layer or bytes per parameter, "
                                          "not both",
                           err);
    return read_bytes(at, model, "static_bytes_per_layer", 0.0, static_bytes, err);
}

int study_parse_measured(const tfj_ctx *model_at, const cJSON *model,
                         int layer_parameters_given, tf_study *s, tf_error *err)
{
    int rc;
    if ((rc = read_layer(model_at, model, &s->measured, err)) ||
        (rc = check_recompute(model_at, model, s, err)) ||
        (rc = read_static_source(model_at, model, layer_parameters_given, &s->measured_static,
                                 err)) ||
        (rc = read_extra(model_at, model, "first_stage_extra_bytes", &s->first_static,
                         &s->first_activation, err)))
        return rc;
    return read_extra(model_at, model, "last_stage_extra_bytes", &s->last_static,
                      &s->last_activation, err);
}
