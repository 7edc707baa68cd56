/* bench_lp.c - the work around a general solver's LP in bench-solvers
 * (see bench_lp.h). */
#include "bench_lp.h"

#include <stdlib.h>
#include <string.h>

#include "solve/freeze_common.h"

int bench_lp_begin(const tf_profile *p, bench_lp_plan *w, tf_error *err)
{
    memset(w, 0, sizeof *w);
    w->s = &p->schedule;
    w->n = w->s->n_actions;
    const size_t n = (size_t)w->n + 1;
    w->max_ms = malloc(n * sizeof *w->max_ms);
    w->min_ms = malloc(n * sizeof *w->min_ms);
    w->ratio = calloc(n, sizeof *w->ratio);
    w->duration = malloc(n * sizeof *w->duration);
    w->start = malloc(n * sizeof *w->start);
    w->critical = malloc(n);
    int rc = 0;
    if (!w->max_ms || !w->min_ms || !w->ratio || !w->duration || !w->start || !w->critical)
        rc = tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", w->n);
    else {
        tf_profile_durations(p, w->max_ms, w->min_ms);
        rc = tf_dag_build(w->s, p->p2p_ms, &w->g, err);
    }
    if (rc) {
        bench_lp_free(w);
        return rc;
    }
    /* The bounds tf_plan_from_profile reports, so the work matches. */
    (void)tf_dag_longest_path(&w->g, w->min_ms, w->start);
    (void)tf_dag_longest_path(&w->g, w->max_ms, w->start);
    return 0;
}

int bench_lp_finish(bench_lp_plan *w, bench_lp_result *out, tf_error *err)
{
    out->batch_ms =
        tf_freeze_apply_ratios(&w->g, w->max_ms, w->min_ms, w->ratio, w->duration, w->start);
    out->total_freeze = 0.0;
    for (int i = 0; i < w->n; i++)
        out->total_freeze += w->ratio[i];
    if (tf_dag_critical(&w->g, w->duration, w->critical))
        return tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", w->n);
    return 0;
}

void bench_lp_free(bench_lp_plan *w)
{
    tf_dag_free(&w->g);
    free(w->max_ms);
    free(w->min_ms);
    free(w->ratio);
    free(w->duration);
    free(w->start);
    free(w->critical);
    memset(w, 0, sizeof *w);
}
