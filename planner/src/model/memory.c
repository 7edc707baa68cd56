/* memory.c - the live bytes of each rank over a step as linear events
 * (tf/memory.h), and their peaks. */
#include "tf/memory.h"

#include <stdlib.h>
#include <string.h>

/* Where a stage's microbatch is freed and re-materialised: the action
 * whose freeze ratio governs its bytes (the B, or the W of a split
 * stage), the one whose recompute ratio does (the B, or the I), and its R
 * action if the order has one. */
typedef struct backward_actions {
    int freeze;
    int recompute;
    int r;
} backward_actions;

static backward_actions backward_of(const tf_schedule *s, const int *index, int stage,
                                    int microbatch)
{
    backward_actions b;
    int full = tf_schedule_lookup(s, index, TF_ACT_B, stage, microbatch);
    b.freeze = full >= 0 ? full : tf_schedule_lookup(s, index, TF_ACT_W, stage, microbatch);
    b.recompute = tf_schedule_backward_of(s, index, stage, microbatch);
    b.r = tf_schedule_lookup(s, index, TF_ACT_R, stage, microbatch);
    return b;
}

/* The bytes a stage's forward keeps, as the model sees them: with
 * freezing not saving memory, a frozen backward keeps what an unfrozen
 * one does. */
typedef struct stage_bytes {
    double a, a_frozen, g, x, dropped; /* A, A_f, G, X, D = max(A_f - C, 0) */
    int recomputes;
} stage_bytes;

static stage_bytes bytes_of(const tf_stage_memory *m, int saves)
{
    stage_bytes b;
    b.a = m->activation_bytes;
    b.a_frozen = saves ? m->activation_frozen_bytes : m->activation_bytes;
    b.g = m->weight_grad_bytes;
    b.x = m->backward_input_transient_bytes;
    b.recomputes = m->recomputes;
    b.dropped = b.recomputes && b.a_frozen > m->checkpoint_bytes
                    ? b.a_frozen - m->checkpoint_bytes : 0.0;
    return b;
}

typedef struct builder {
    const tf_schedule *s;
    const int *index;
    const tf_stage_memory *stages;
    int saves;
    const double *cap;
    tf_memory_event *events;
    int n;
} builder;

/* Appends an event at the end of its action unless it never changes
 * anything; returns it, or NULL when left out. */
static tf_memory_event *push(builder *b, int action, double constant, int freeze_action,
                             double freeze_coef, int recompute_action, double recompute_coef)
{
    if (freeze_coef == 0.0)
        freeze_action = -1;
    if (recompute_coef == 0.0)
        recompute_action = -1;
    if (constant == 0.0 && freeze_action < 0 && recompute_action < 0)
        return NULL;
    tf_memory_event *e = &b->events[b->n++];
    e->action = action;
    e->at_start = 0;
    e->constant = constant;
    e->freeze_action = freeze_action;
    e->freeze_coef = freeze_action >= 0 ? freeze_coef : 0.0;
    e->recompute_action = recompute_action;
    e->recompute_coef = recompute_action >= 0 ? recompute_coef : 0.0;
    return e;
}

/* Marks an event (or none) as taking effect when its action starts. */
static void at_start(tf_memory_event *e)
{
    if (e)
        e->at_start = 1;
}

/* The events of action i (at most three: a re-materialisation, an I's
 * transient, then the action's own change). */
static int push_action(builder *b, int i, tf_error *err)
{
    const tf_action *a = &b->s->actions[i];
    const int saves = b->saves && !(b->cap && b->cap[a->stage] == 0.0);
    stage_bytes st = bytes_of(&b->stages[a->stage], saves);
    backward_actions bw = backward_of(b->s, b->index, a->stage, a->microbatch);
    double saved = st.a - st.a_frozen; /* what freezing the whole backward saves */
    if (a->type != TF_ACT_F && a->type != TF_ACT_R && a->type != TF_ACT_W && st.recomputes &&
        bw.r < 0)
        at_start(push(b, i, 0.0, -1, 0.0, bw.recompute, st.dropped));
    switch (a->type) {
    case TF_ACT_F:
        if (bw.freeze < 0 || bw.recompute < 0) {
            char cell[32];
            return tf_fail(err, TF_EINVAL, "memory: forward %s has no backward in the order",
                           tf_action_format(a, cell));
        }
        push(b, i, st.a, bw.freeze, -saved, bw.recompute, st.recomputes ? -st.dropped : 0.0);
        break;
    case TF_ACT_R: push(b, i, 0.0, -1, 0.0, bw.recompute, st.dropped); break;
    case TF_ACT_B: push(b, i, -st.a, i, saved, -1, 0.0); break;
    case TF_ACT_I: {
        /* The transient is an event of its own: it raises the peak before
         * the I's end frees anything. */
        const double g_coef = saves ? -st.g : 0.0, x_coef = saves ? -st.x : 0.0;
        at_start(push(b, i, st.x, bw.freeze, x_coef, -1, 0.0));
        push(b, i, st.g - st.a - st.x, bw.freeze, saved + g_coef - x_coef, -1, 0.0);
        break;
    }
    case TF_ACT_W: push(b, i, -st.g, i, saves ? st.g : 0.0, -1, 0.0); break;
    }
    return 0;
}

int tf_memory_model_build(const tf_schedule *s, const tf_stage_memory *stages,
                          const tf_memory_options *o, tf_memory_model *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    builder b = {s, tf_schedule_index(s), stages, o ? o->freeze_saves_memory : 1,
                 o ? o->cap : NULL, NULL, 0};
    out->ranks = s->ranks;
    out->static_bytes = calloc((size_t)s->ranks + 1, sizeof *out->static_bytes);
    out->event_offset = calloc((size_t)s->ranks + 1, sizeof *out->event_offset);
    b.events = malloc(((size_t)3 * s->n_actions + 1) * sizeof *b.events);
    int rc = 0;
    if (!b.index || !out->static_bytes || !out->event_offset || !b.events)
        rc = tf_fail(err, TF_ENOMEM, "out of memory modelling memory for %d actions",
                     s->n_actions);
    for (int st = 0; st < s->stages && !rc; st++)
        out->static_bytes[s->stage_rank[st]] += stages[st].static_bytes;
    for (int r = 0; r < s->ranks && !rc; r++) {
        out->event_offset[r] = b.n;
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1] && !rc; i++)
            rc = push_action(&b, i, err);
    }
    free((void *)b.index);
    if (rc) {
        free(b.events);
        tf_memory_model_free(out);
        return rc;
    }
    out->event_offset[s->ranks] = b.n;
    out->events = b.events;
    out->n_events = b.n;
    return 0;
}

double tf_memory_event_delta(const tf_memory_event *e, const double *f, const double *q)
{
    double d = e->constant;
    if (e->freeze_action >= 0 && f)
        d += e->freeze_coef * f[e->freeze_action];
    if (e->recompute_action >= 0 && q)
        d += e->recompute_coef * q[e->recompute_action];
    return d;
}

int tf_memory_event_can_rise(const tf_memory_event *e)
{
    double most = e->constant;
    if (e->freeze_coef > 0)
        most += e->freeze_coef;
    if (e->recompute_coef > 0)
        most += e->recompute_coef;
    return most > 0.0;
}

/* Rank r's peak under ratios f and q (NULL: all 0), and where. */
static tf_memory_peak rank_peak(const tf_memory_model *m, int r, const double *f,
                                const double *q)
{
    double live = m->static_bytes[r];
    tf_memory_peak peak = {live, -1};
    for (int k = m->event_offset[r]; k < m->event_offset[r + 1]; k++) {
        live += tf_memory_event_delta(&m->events[k], f, q);
        if (live > peak.bytes) {
            peak.bytes = live;
            peak.action = m->events[k].action;
        }
    }
    return peak;
}

void tf_memory_peaks(const tf_memory_model *m, const double *f, const double *q,
                     tf_memory_peak *peaks)
{
    for (int r = 0; r < m->ranks; r++)
        peaks[r] = rank_peak(m, r, f, q);
}

int tf_memory_first_over(const tf_memory_model *m, const double *limit)
{
    for (int r = 0; r < m->ranks; r++)
        if (rank_peak(m, r, NULL, NULL).bytes > limit[r])
            return r;
    return -1;
}

void tf_memory_model_free(tf_memory_model *m)
{
    free(m->static_bytes);
    free(m->event_offset);
    free(m->events);
    memset(m, 0, sizeof *m);
}
