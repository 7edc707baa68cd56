/* freeze_common.c - what both freeze solvers share: which precedence rows
 * the LP can leave out, the time limit, turning solved ratios into
 * durations and start times, and the result's memory.  It calls no other
 * file of solve/, so the solvers depend on it and on nothing above. */
#include "freeze_common.h"

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

int tf_freeze_result_alloc(tf_freeze_result *out, int n)
{
    /* One spare entry, so that n = 0 still allocates. */
    out->ratio = calloc((size_t)n + 1, sizeof *out->ratio);
    out->duration = calloc((size_t)n + 1, sizeof *out->duration);
    out->start = calloc((size_t)n + 1, sizeof *out->start);
    return out->ratio && out->duration && out->start ? 0 : TF_ENOMEM;
}

void tf_freeze_result_free(tf_freeze_result *r)
{
    free(r->ratio);
    free(r->duration);
    free(r->start);
    r->ratio = r->duration = r->start = NULL;
}
