/* measure.c - the samples of measuring steps and the profile they make (see
 * measure.h). */
#include "measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tf/util.h"

/* The action whose message action i receives when that comes from another
 * rank: the forward of the previous stage for an F, the backward (B or I)
 * of the next stage for a B or I; else -1. */
static int sender_of(const tf_schedule *s, const int *index, int i)
{
    const tf_action *a = &s->actions[i];
    int u = -1;
    if (a->type == TF_ACT_F && a->stage > 0) {
        u = tf_schedule_lookup(s, index, TF_ACT_F, a->stage - 1, a->microbatch);
    } else if ((a->type == TF_ACT_B || a->type == TF_ACT_I) && a->stage < s->stages - 1) {
        u = tf_schedule_lookup(s, index, TF_ACT_B, a->stage + 1, a->microbatch);
        if (u < 0)
            u = tf_schedule_lookup(s, index, TF_ACT_I, a->stage + 1, a->microbatch);
    }
    return u >= 0 && s->actions[u].rank != a->rank ? u : -1;
}

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
    if (!(index = tf_schedule_index(s)))
        TFX_TRY(tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__));
    for (int i = 0; i < s->n_actions; i++)
        m->sender[i] = sender_of(s, index, i);
fail:
    free(index);
    return rc;
}

void tfx_measure_reset(tfx_measure *m)
{
    m->n_full = m->n_frozen = m->n_lag = m->n_clock = 0;
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

/* Per action: the median full and frozen time.  F and I do not depend on
 * freezing, so the samples of both kinds count for them. */
static int action_medians(const tfx_measure *m, tf_profile *prof, tf_error *err)
{
    int rc = 0;
    const tf_schedule *s = m->s;
    const int S = m->steps;
    double *sample = NULL;
    TFX_CALLOC(sample, 2 * S);
    TFX_CALLOC(prof->overrides, s->n_actions);
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        tf_action_time *ov = &prof->overrides[prof->n_overrides++];
        ov->type = a->type;
        ov->stage = a->stage;
        ov->microbatch = a->microbatch;
        const int fi = a->type == TF_ACT_F || a->type == TF_ACT_I;
        int c = 0;
        for (int k = 0; k < m->n_full; k++)
            sample[c++] = m->full[(size_t)i * S + k];
        for (int k = 0; fi && k < m->n_frozen; k++)
            sample[c++] = m->frozen[(size_t)i * S + k];
        ov->ms = tf_median(sample, c);
        ov->frozen_ms = -1.0;
        if (a->type == TF_ACT_B || a->type == TF_ACT_W) {
            for (int k = 0; k < m->n_frozen; k++)
                sample[k] = m->frozen[(size_t)i * S + k];
            /* Noise can make a frozen median exceed the full one; never let it. */
            ov->frozen_ms = fmin(tf_median(sample, m->n_frozen), ov->ms);
        }
    }
fail:
    free(sample);
    return rc;
}

/* Mean action times of one stage, by kind. */
typedef struct stage_sums {
    double f, b, b_frozen, i, w, w_frozen;
    int nf, nb, ni, nw;
} stage_sums;

static void add_action(stage_sums *sum, const tf_action_time *ov)
{
    switch (ov->type) {
    case TF_ACT_F: sum->f += ov->ms; sum->nf++; break;
    case TF_ACT_B: sum->b += ov->ms; sum->b_frozen += ov->frozen_ms; sum->nb++; break;
    case TF_ACT_I: sum->i += ov->ms; sum->ni++; break;
    case TF_ACT_W: sum->w += ov->ms; sum->w_frozen += ov->frozen_ms; sum->nw++; break;
    }
}

static void stage_means(const stage_sums *sum, tf_stage_times *t)
{
    t->forward_ms = sum->nf ? sum->f / sum->nf : 0.0;
    t->backward_input_ms = sum->ni ? sum->i / sum->ni : 0.0;
    t->backward_weight_ms = sum->nw ? sum->w / sum->nw : 0.0;
    t->backward_weight_frozen_ms = sum->nw ? sum->w_frozen / sum->nw : 0.0;
    if (sum->nb) {
        t->backward_ms = sum->b / sum->nb;
        t->backward_frozen_ms = sum->b_frozen / sum->nb;
    } else { /* split stage: a full backward is I + W */
        t->backward_ms = t->backward_input_ms + t->backward_weight_ms;
        t->backward_frozen_ms = t->backward_input_ms + t->backward_weight_frozen_ms;
    }
}

/* The per-stage part of the profile from its per-action times, one line
 * each on the run's output. */
static int stage_times(const tfx_exec_run *r, tf_profile *prof, tf_error *err)
{
    int rc = 0;
    const tf_schedule *s = &r->sched;
    stage_sums *sums = NULL;
    TFX_CALLOC(sums, s->stages);
    TFX_CALLOC(prof->max_freeze_ratio, s->stages);
    TFX_CALLOC(prof->stages, s->stages);
    for (int i = 0; i < prof->n_overrides; i++)
        add_action(&sums[prof->overrides[i].stage], &prof->overrides[i]);
    for (int st = 0; st < s->stages; st++) {
        tf_stage_times *t = &prof->stages[st];
        stage_means(&sums[st], t);
        t->parameters = tfx_model_parameter_count(tfx_pipeline_layout(r->p), st);
        prof->max_freeze_ratio[st] = r->o->max_freeze_ratio;
        fprintf(r->out,
                "  stage %d (rank %d): F %.3f ms, B %.3f ms, B frozen %.3f ms%s, %.0f "
                "parameters\n",
                st, s->stage_rank[st], t->forward_ms, t->backward_ms, t->backward_frozen_ms,
                sums[st].ni ? " (split I/W)" : "", t->parameters);
    }
fail:
    free(sums);
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
    out->microbatch_tokens = r->tokens;
    out->p2p_ms = c.lag_ms;
    if (tf_schedule_copy(m->s, &out->schedule) < 0)
        TFX_TRY(tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__));
    TFX_TRY(action_medians(m, out, err));
    TFX_TRY(stage_times(r, out, err));
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
    memset(m, 0, sizeof *m);
}
