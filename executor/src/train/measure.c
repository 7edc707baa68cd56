/* measure.c - the samples of measuring steps and the profile they make (see
 * measure.h). */
#include "measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tf/profile_samples.h"
#include "tf/util.h"

int tfx_measure_init(tfx_measure *m, const tf_schedule *s, int steps, tf_error *err)
{
    int rc = 0;
    int *index = NULL;
    const size_t n = (size_t)s->n_actions;
    memset(m, 0, sizeof *m);
    m->s = s;
    m->steps = steps;
    TFX_CALLOC(m->full, n * steps);
    TFX_CALLOC(m->frozen, n * steps);
    TFX_CALLOC(m->sender, n);
    TFX_CALLOC(m->lag, 2 * n * steps);
    TFX_CALLOC(m->startup, 2 * steps);
    TFX_CALLOC(m->tail, 2 * steps);
    TFX_CALLOC(m->optimizer, 2 * steps);
    TFX_CALLOC(m->memory, s->stages);
    TFX_CALLOC(m->recompute, (size_t)s->stages * steps);
    if (!(index = tf_schedule_index(s)))
        TFX_TRY(tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__));
    for (int i = 0; i < s->n_actions; i++)
        m->sender[i] = tf_schedule_sender(s, index, i);
fail:
    free(index);
    return rc;
}

void tfx_measure_reset(tfx_measure *m)
{
    m->n_full = m->n_frozen = m->n_lag = m->n_clock = 0;
    m->memory_seen[0] = m->memory_seen[1] = 0;
    m->n_recompute = 0;
}

/* The bytes of the step just run, counted as the stages held them: a
 * forward's change is what it kept, an I's what it freed less what it left
 * for the W, and its transient what its start added.  Each step gives the same counts (the buffers depend only on
 * the mask), so the last one stands. */
static void add_memory(tfx_measure *m, const tfx_pipeline *p, int frozen)
{
    const tf_schedule *s = m->s;
    for (int st = 0; st < s->stages; st++)
        if (!tfx_pipeline_has_stage(p, st))
            return;
    const double *bytes = tfx_pipeline_action_bytes(p);
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        tf_stage_memory *mem = &m->memory[a->stage];
        mem->static_bytes = (double)tfx_pipeline_stage_static_bytes(p, a->stage);
        if (a->type == TF_ACT_F)
            *(frozen ? &mem->activation_frozen_bytes : &mem->activation_bytes) = bytes[i];
    }
    const double *rise = tfx_pipeline_action_rise(p);
    for (int i = 0; !frozen && i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        tf_stage_memory *mem = &m->memory[a->stage];
        if (a->type == TF_ACT_I) {
            mem->weight_grad_bytes = bytes[i] + mem->activation_bytes;
            /* Held on top of the forward's bytes until the I ends. */
            mem->backward_input_transient_bytes = rise[i];
        }
    }
    m->memory_seen[frozen != 0] = 1;
}

/* The lag of every message whose receiver was waiting before its sender's
 * compute ended, on one time line (the ranks' clock offsets added); a rank
 * on another machine's clock gives none. */
static void add_lags(tfx_measure *m, const tfx_step_times *t)
{
    const tf_schedule *s = m->s;
    const double *ms = t->ms, *start = t->start, *enter = t->enter, *clock = t->clock;
    for (int v = 0; v < s->n_actions; v++) {
        const int u = m->sender[v];
        if (u < 0)
            continue;
        const double sent = start[u] + ms[u] + clock[s->actions[u].rank];
        const double off_v = clock[s->actions[v].rank];
        if (isfinite(sent) && isfinite(off_v) && enter[v] + off_v <= sent)
            m->lag[m->n_lag++] = start[v] + off_v - sent;
    }
}

/* When the first rank began and how long the step ran on after the last
 * compute ended. */
static void add_clock(tfx_measure *m, const tfx_step_times *t)
{
    const tf_schedule *s = m->s;
    const double *ms = t->ms, *start = t->start, *enter = t->enter, *clock = t->clock;
    double first = INFINITY, last = -INFINITY;
    for (int i = 0; i < s->n_actions; i++) {
        const double off = clock[s->actions[i].rank];
        if (!isfinite(off))
            continue;
        first = fmin(first, enter[i] + off);
        last = fmax(last, start[i] + ms[i] + off);
    }
    m->startup[m->n_clock] = isfinite(first) ? first : 0.0;
    m->tail[m->n_clock] = isfinite(last) ? fmax(t->pipeline_ms - last, 0.0) : 0.0;
    m->optimizer[m->n_clock++] = fmax(t->step_ms - t->pipeline_ms, 0.0);
}

void tfx_measure_add_times(tfx_measure *m, const tfx_step_times *t, int frozen)
{
    int *count = frozen ? &m->n_frozen : &m->n_full;
    double *into = frozen ? m->frozen : m->full;
    if (*count >= m->steps)
        return;
    for (int i = 0; i < m->s->n_actions; i++)
        into[(size_t)i * m->steps + *count] = t->ms[i];
    (*count)++;
    add_lags(m, t);
    add_clock(m, t);
}

void tfx_measure_add(tfx_measure *m, const tfx_pipeline *p, int frozen,
                     const tfx_step_result *res)
{
    const tfx_step_times t = {.ms = tfx_pipeline_action_ms(p),
                              .start = tfx_pipeline_action_start_ms(p),
                              .enter = tfx_pipeline_action_enter_ms(p),
                              .clock = tfx_pipeline_rank_clock_ms(p),
                              .pipeline_ms = res->pipeline_ms,
                              .step_ms = res->step_ms};
    tfx_measure_add_times(m, &t, frozen);
    add_memory(m, p, frozen);
}

/* Median of n values copied into scratch (the samples keep their order). */
static double median_of(const double *v, int n, double *scratch)
{
    memcpy(scratch, v, (size_t)n * sizeof *v);
    return tf_median(scratch, n);
}

int tfx_measure_clock(const tfx_measure *m, tfx_clock_figures *c, tf_error *err)
{
    const int n = m->n_clock;
    double *scratch = malloc(((size_t)(m->n_lag > n ? m->n_lag : n) + 1) * sizeof *scratch);
    memset(c, 0, sizeof *c);
    if (!scratch)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    c->n_lag = m->n_lag;
    c->lag_ms = median_of(m->lag, m->n_lag, scratch);
    c->startup_ms = median_of(m->startup, n, scratch);
    c->tail_ms = median_of(m->tail, n, scratch);
    c->optimizer_ms = median_of(m->optimizer, n, scratch);
    free(scratch);
    return 0;
}

void tfx_measure_print_clock(const tfx_clock_figures *c, FILE *out)
{
    if (c->n_lag)
        fprintf(out, "  messages between ranks: lag %.3f ms (median of %d %s), in the DAG as "
                     "p2p_ms\n",
                c->lag_ms, c->n_lag, tf_plural(c->n_lag, "wait", "waits"));
    else
        fprintf(out, "  messages between ranks: no rank waited for one; p2p_ms 0\n");
    fprintf(out,
            "  outside the DAG: first rank starts %.3f ms into the step, the step ends %.3f ms "
            "after the last compute; optimizer %.3f ms after the batch\n",
            c->startup_ms, c->tail_ms, c->optimizer_ms);
}

/* Every action's compute time in every step added, as samples. */
static tf_sample *samples_of(const tfx_measure *m, size_t *n)
{
    const tf_schedule *s = m->s;
    const size_t per_action = (size_t)m->n_full + (size_t)m->n_frozen;
    tf_sample *x = malloc(((size_t)s->n_actions * per_action + 1) * sizeof *x);
    *n = 0;
    for (int i = 0; x && i < s->n_actions; i++) {
        for (int k = 0; k < m->n_full; k++)
            x[(*n)++] = (tf_sample){i, 0, m->full[(size_t)i * m->steps + k]};
        for (int k = 0; k < m->n_frozen; k++)
            x[(*n)++] = (tf_sample){i, 1, m->frozen[(size_t)i * m->steps + k]};
    }
    return x;
}

/* The profile of the steps added (tf/profile_samples.h), with each stage's
 * parameter count, and a line per stage on the run's output. */
static int build_profile(const tfx_measure *m, const tfx_exec_run *r, tf_profile *prof,
                         tf_error *err)
{
    size_t n;
    tf_sample *x = samples_of(m, &n);
    if (!x)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    tf_sample_set in;
    tf_sample_set_init(&in);
    in.schedule = m->s;
    in.samples = x;
    in.n = n;
    in.max_freeze_ratio = r->o->max_freeze_ratio;
    int rc = tf_profile_from_samples(&in, prof, NULL, err);
    free(x);
    const tf_schedule *s = m->s;
    for (int st = 0; rc == 0 && st < s->stages; st++) {
        tf_stage_times *t = &prof->stages[st];
        t->parameters = tfx_model_parameter_count(tfx_pipeline_layout(r->p), st);
        fprintf(r->out,
                "  stage %d (rank %d): F %.3f ms, B %.3f ms, B frozen %.3f ms%s, %.0f "
                "parameters\n",
                st, s->stage_rank[st], t->forward_ms, t->backward_ms, t->backward_frozen_ms,
                t->backward_input_ms > 0 ? " (split I/W)" : "", t->parameters);
    }
    return rc;
}

void tfx_measure_add_recompute(tfx_measure *m, const tfx_pipeline *p)
{
    const tf_schedule *s = m->s;
    if (m->n_recompute >= m->steps)
        return;
    const double *bytes = tfx_pipeline_action_bytes(p), *ms = tfx_pipeline_recompute_ms(p);
    double *sum = m->recompute + (size_t)m->n_recompute++ * s->stages;
    int *count = calloc((size_t)s->stages, sizeof *count);
    for (int i = 0; count && i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        if (a->type == TF_ACT_F)
            m->memory[a->stage].checkpoint_bytes = bytes[i];
        if (a->type == TF_ACT_B || a->type == TF_ACT_I) {
            sum[a->stage] += ms[i];
            count[a->stage]++;
        }
    }
    for (int st = 0; count && st < s->stages; st++)
        sum[st] = count[st] ? sum[st] / count[st] : 0.0;
    free(count);
}

/* Per stage the median over the recomputing steps of their mean
 * recomputation time (ms). */
static void put_recompute(const tfx_measure *m, tf_stage_memory *mem)
{
    const int S = m->s->stages, n = m->n_recompute;
    double v[64];
    for (int st = 0; st < S; st++) {
        int k = 0;
        for (int j = 0; j < n && k < 64; j++)
            v[k++] = m->recompute[(size_t)j * S + st];
        mem[st].recompute_ms = tf_median(v, k);
        mem[st].recomputes = 1;
    }
}

/* The bytes counted, as the profile's memory fields, once both kinds of
 * step were seen. */
static int put_memory(const tfx_measure *m, tf_profile *out, tf_error *err)
{
    int rc = 0;
    if (!m->memory_seen[0] || !m->memory_seen[1])
        return 0;
    TFX_CALLOC(out->memory, m->s->stages);
    memcpy(out->memory, m->memory, (size_t)m->s->stages * sizeof *out->memory);
    if (m->n_recompute > 0)
        put_recompute(m, out->memory);
fail:
    return rc;
}

int tfx_measure_profile(const tfx_measure *m, const tfx_exec_run *r, tf_profile *out,
                        tf_error *err)
{
    int rc = 0;
    tfx_clock_figures c;
    memset(out, 0, sizeof *out);
    if (m->n_full < 1 || m->n_frozen < 1)
        return tf_fail(err, TF_EINVAL, "a profile needs an unfrozen and a frozen step (%d, %d)",
                       m->n_full, m->n_frozen);
    TFX_TRY(tfx_measure_clock(m, &c, err));
    TFX_TRY(build_profile(m, r, out, err));
    out->microbatch_tokens = r->tokens;
    TFX_TRY(put_memory(m, out, err));
    out->p2p_ms = c.lag_ms;
    tfx_measure_print_clock(&c, r->out);
    return 0;
fail:
    tf_profile_free(out);
    return rc;
}

void tfx_measure_free(tfx_measure *m)
{
    free(m->full);
    free(m->frozen);
    free(m->sender);
    free(m->lag);
    free(m->startup);
    free(m->tail);
    free(m->optimizer);
    free(m->memory);
    free(m->recompute);
    memset(m, 0, sizeof *m);
}
