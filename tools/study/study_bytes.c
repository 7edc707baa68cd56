/* study_bytes.c - a configuration's bytes per stage, and the memory
 * figures of its plan (docs/tf-study.md, "Memory"). */
#include "study_bytes.h"

#include <stdlib.h>
#include <string.h>

/* Adds n copies of b to a stage's activation bytes. */
static void add_activation(tf_stage_memory *m, const tf_activation_bytes *b, double n)
{
    m->activation_bytes += n * b->activation;
    m->activation_frozen_bytes += n * b->activation_frozen;
    m->weight_grad_bytes += n * b->weight_grad;
    m->checkpoint_bytes += n * b->checkpoint;
}

/* One layer's bytes per microbatch under c: the shape's count, or the
 * measured bytes (of which full recomputation keeps the checkpoint). */
static void layer_bytes(const tf_study *s, const tf_study_config *c, tf_activation_bytes *out)
{
    if (s->has_shape) {
        tf_transformer_layer_bytes(&s->shape, c->sequence_parallel, (tf_recompute)c->recompute,
                                   out);
        return;
    }
    *out = s->measured;
    if (c->recompute == TF_RECOMPUTE_FULL)
        tf_activation_keep_checkpoint(out);
}

/* The first and the last stage's extra bytes: kept through freezing and
 * recomputation (checkpointed), as the layers' recomputation does not
 * re-run them. */
static void add_ends(const tf_study *s, const tf_study_config *c, int k, int stages,
                     tf_stage_memory *m)
{
    const tf_transformer_shape *shape = &s->shape;
    if (k == 0) {
        double e = s->has_shape ? tf_transformer_embedding_bytes(shape, c->sequence_parallel)
                                : s->first_activation;
        tf_activation_bytes b = {e, e, 0.0, e};
        add_activation(m, &b, 1.0);
        m->static_bytes += s->first_static;
    }
    if (k == stages - 1) {
        tf_activation_bytes b = {s->last_activation, s->last_activation, 0.0, 0.0};
        if (s->has_shape)
            tf_transformer_head_bytes(shape, c->sequence_parallel, &b);
        b.checkpoint = b.activation_frozen;
        add_activation(m, &b, 1.0);
        m->static_bytes += s->last_static;
    }
}

/* Bytes a stage of `layers` layers holding `parameters` holds all step:
 * the measured static bytes per layer, else the parameters' bytes (and,
 * with a shape, the p2p receive buffers). */
static double stage_static(const tf_study *s, const tf_study_config *c, int layers,
                           double parameters)
{
    if (s->has_measured && s->measured_static >= 0)
        return layers * s->measured_static;
    return parameters * s->bytes_per_parameter +
           (s->has_shape ? tf_transformer_p2p_bytes(&s->shape, c->sequence_parallel) : 0.0);
}

void study_stage_bytes(const tf_study *s, const tf_study_config *c, const int *first_layer,
                       int stages, int layers_only, tf_stage_memory *out)
{
    tf_activation_bytes layer;
    layer_bytes(s, c, &layer);
    for (int k = 0; k < stages; k++) {
        tf_stage_memory *m = &out[k];
        memset(m, 0, sizeof *m);
        double forward_ms = 0.0, parameters = 0.0;
        for (int i = first_layer[k]; i < first_layer[k + 1]; i++) {
            forward_ms += s->layer[i].forward_ms;
            parameters += s->layer[i].parameters;
        }
        const int layers = first_layer[k + 1] - first_layer[k];
        add_activation(m, &layer, layers);
        m->recomputes = c->recompute == TF_RECOMPUTE_AUTO;
        m->recompute_ms = m->recomputes ? forward_ms : 0.0;
        if (layers_only)
            continue;
        parameters += (k == 0 ? s->embedding.parameters : 0.0) +
                      (k == stages - 1 ? s->head.parameters : 0.0);
        m->static_bytes = stage_static(s, c, layers, parameters);
        add_ends(s, c, k, stages, m);
    }
}

void study_full_recompute_times(const tf_study *s, const int *first_layer, int stages,
                                tf_stage_times *st)
{
    for (int k = 0; k < stages; k++) {
        double forward_ms = 0.0;
        for (int i = first_layer[k]; i < first_layer[k + 1]; i++)
            forward_ms += s->layer[i].forward_ms;
        st[k].backward_ms += forward_ms;
        st[k].backward_frozen_ms += forward_ms;
        if (st[k].backward_input_ms > 0)
            st[k].backward_input_ms += forward_ms;
    }
}

/* The largest peak over the ranks of model m under ratios f and q. */
static double largest_peak(const tf_memory_model *m, const double *f, const double *q,
                           tf_memory_peak *peaks)
{
    tf_memory_peaks(m, f, q, peaks);
    double most = 0.0;
    for (int r = 0; r < m->ranks; r++)
        most = peaks[r].bytes > most ? peaks[r].bytes : most;
    return most;
}

/* Does some rank exceed its limit under ratios f and q? */
static int over_limit(const tf_memory_model *m, const double *limit, const double *f,
                      const double *q, tf_memory_peak *peaks)
{
    tf_memory_peaks(m, f, q, peaks);
    for (int r = 0; r < m->ranks; r++)
        if (peaks[r].bytes > limit[r] * (1.0 + 1e-9))
            return 1;
    return 0;
}

int study_memory_figures(const tf_plan *plan, const tf_stage_memory *layers, tf_study_row *row,
                         tf_error *err)
{
    const int n = plan->schedule.n_actions, ranks = plan->schedule.ranks;
    double *f = malloc(((size_t)2 * n + 1) * sizeof *f);
    tf_memory_peak *peaks = malloc(((size_t)ranks + 1) * sizeof *peaks);
    tf_memory_options o = {plan->freeze_saves_memory, plan->max_freeze_ratio};
    tf_memory_model all = {0}, only = {0};
    int rc = !f || !peaks ? TF_ENOMEM : 0;
    if (!rc)
        rc = tf_memory_model_build(&plan->schedule, plan->memory, &o, &all, err);
    if (!rc)
        rc = tf_memory_model_build(&plan->schedule, layers, &o, &only, err);
    if (!rc) {
        double *q = f + n;
        for (int i = 0; i < n; i++) {
            f[i] = plan->actions[i].freeze_ratio;
            q[i] = plan->actions[i].recompute_ratio;
        }
        row->peak_memory_bytes = largest_peak(&all, f, q, peaks);
        row->peak_activation_bytes = largest_peak(&only, f, q, peaks);
        /* What fitting needed: the plan without its freezing, or without
         * its recomputation, would break the limit. */
        if (plan->memory_limit) {
            row->fit_freezes = over_limit(&all, plan->memory_limit, NULL, q, peaks);
            row->fit_recomputes = over_limit(&all, plan->memory_limit, f, NULL, peaks);
        }
    }
    tf_memory_model_free(&all);
    tf_memory_model_free(&only);
    free(f);
    free(peaks);
    if (rc == TF_ENOMEM)
        return tf_fail(err, rc, "out of memory counting the bytes of %d actions", n);
    return rc;
}
