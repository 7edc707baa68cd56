/* freeze_common.c - what both freeze solvers share: which precedence rows
 * the LP can leave out, the time limit, turning solved ratios into
 * durations and start times, and the result's memory.  It calls no other
 * file of solve/, so the solvers depend on it and on nothing above. */
#include "freeze_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tf_freeze_edge_implied(const tf_schedule *s, const tf_dag *g, int u, int e)
{
    return !(g->rule[e] & TF_EDGE_RANK_ORDER) &&
           s->actions[u].rank == s->actions[g->succ[e]].rank;
}

int tf_freeze_past_deadline(const tf_freeze_limits *lim)
{
    return lim && lim->deadline > 0.0 && tf_now_seconds() > lim->deadline;
}

double tf_freeze_apply_ratios(const tf_dag *g, const double *max_ms, const double *min_ms,
                              double *ratio, double *duration, double *start)
{
    for (int i = 0; i < g->n; i++) {
        double r = ratio[i];
        if (r < 1e-9)
            r = 0.0;
        if (r > 1.0 - 1e-9)
            r = 1.0;
        ratio[i] = r;
        duration[i] = max_ms[i] - r * (max_ms[i] - min_ms[i]);
    }
    return tf_dag_longest_path(g, duration, start);
}

int tf_freeze_memory_binds(const tf_freeze_problem *p)
{
    return p->memory && p->memory_limit && tf_memory_first_over(p->memory, p->memory_limit) >= 0;
}

int tf_freeze_recompute_targets(const tf_freeze_problem *p, int *served, unsigned char *recomputed)
{
    const tf_schedule *s = p->schedule;
    int *index = p->recompute_ms ? tf_schedule_index(s) : NULL;
    if (p->recompute_ms && !index)
        return TF_ENOMEM;
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        served[i] = index && a->type == TF_ACT_R
                        ? tf_schedule_backward_of(s, index, a->stage, a->microbatch) : -1;
        if (recomputed && served[i] >= 0)
            recomputed[served[i]] = 1;
    }
    free(index);
    return 0;
}

static double snapped(double r)
{
    return r < 1e-9 ? 0.0 : r > 1.0 - 1e-9 ? 1.0 : r;
}

static double clamped(double r)
{
    return r < 0.0 ? 0.0 : r > 1.0 ? 1.0 : r;
}

/* Snaps ratio and recompute; a rank that snapping would push over its
 * limit keeps its clamped values instead. */
static int snap_within_limits(const tf_freeze_problem *p, double *ratio, double *recompute)
{
    const int n = p->schedule->n_actions, ranks = p->schedule->ranks;
    const int memory = tf_freeze_memory_binds(p);
    double *raw = memory ? malloc(((size_t)2 * n + 1) * sizeof *raw) : NULL;
    tf_memory_peak *peaks = memory ? malloc(((size_t)ranks + 1) * sizeof *peaks) : NULL;
    if (memory && (!raw || !peaks)) {
        free(raw);
        free(peaks);
        return TF_ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        if (raw) {
            raw[i] = clamped(ratio[i]);
            raw[n + i] = clamped(recompute[i]);
        }
        ratio[i] = snapped(ratio[i]);
        recompute[i] = snapped(recompute[i]);
    }
    if (memory) {
        tf_memory_peaks(p->memory, ratio, recompute, peaks);
        for (int i = 0; i < n; i++)
            if (peaks[p->schedule->actions[i].rank].bytes > p->memory_limit[p->schedule->actions[i].rank]) {
                ratio[i] = raw[i];
                recompute[i] = raw[n + i];
            }
    }
    free(raw);
    free(peaks);
    return 0;
}

double tf_freeze_apply(const tf_freeze_problem *p, tf_freeze_result *out)
{
    const tf_schedule *s = p->schedule;
    int *index = p->recompute_ms ? tf_schedule_index(s) : NULL;
    if ((p->recompute_ms && !index) || snap_within_limits(p, out->ratio, out->recompute)) {
        free(index);
        return NAN;
    }
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        out->duration[i] = p->max_ms[i] - out->ratio[i] * (p->max_ms[i] - p->min_ms[i]);
        if (a->type == TF_ACT_R && index) {
            int served = tf_schedule_backward_of(s, index, a->stage, a->microbatch);
            out->duration[i] = served >= 0 ? p->recompute_ms[i] * out->recompute[served] : 0.0;
        }
    }
    free(index);
    return tf_dag_longest_path(p->dag, out->duration, out->start);
}

int tf_freeze_result_alloc(tf_freeze_result *out, int n)
{
    /* One spare entry, so that n = 0 still allocates. */
    out->ratio = calloc((size_t)n + 1, sizeof *out->ratio);
    out->duration = calloc((size_t)n + 1, sizeof *out->duration);
    out->start = calloc((size_t)n + 1, sizeof *out->start);
    out->recompute = calloc((size_t)n + 1, sizeof *out->recompute);
    return out->ratio && out->duration && out->start && out->recompute ? 0 : TF_ENOMEM;
}

void tf_freeze_result_free(tf_freeze_result *r)
{
    free(r->ratio);
    free(r->duration);
    free(r->start);
    free(r->recompute);
    r->ratio = r->duration = r->start = r->recompute = NULL;
}
