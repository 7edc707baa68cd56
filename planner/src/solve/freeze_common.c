/* freeze_common.c - the freeze LP's vocabulary, shared by both solvers and
 * by the plan: objectives, which actions are freezable, turning solved
 * ratios into durations and start times, and the result's memory. */
#include "freeze_common.h"

#include <stdlib.h>
#include <string.h>

const char *tf_objective_name(tf_objective o)
{
    return o == TF_OBJECTIVE_SPREAD ? "spread" : "least-freeze";
}

int tf_objective_parse(const char *name, tf_objective *o)
{
    if (strcmp(name, "least-freeze") == 0)
        *o = TF_OBJECTIVE_LEAST_FREEZE;
    else if (strcmp(name, "spread") == 0)
        *o = TF_OBJECTIVE_SPREAD;
    else
        return TF_EINVAL;
    return 0;
}

int tf_freeze_is_freezable(const tf_action *a, double max_ms, double min_ms)
{
    return (a->type == TF_ACT_B || a->type == TF_ACT_W) && min_ms < max_ms;
}

int tf_freeze_edge_implied(const tf_schedule *s, const tf_dag *g, int u, int e)
{
    return !(g->rule[e] & TF_EDGE_RANK_ORDER) &&
           s->actions[u].rank == s->actions[g->succ[e]].rank;
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
