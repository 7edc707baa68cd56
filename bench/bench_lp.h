/* bench_lp.h - what the general LP solvers' rows of bench-solvers share
 * (bench_pylp.c): the work around the LP, done as
 * tf_plan_from_profile does it so that the rows time the same pipeline, and
 * the result they report.
 *
 * bench_lp_begin takes the durations, builds the DAG and computes the
 * unfrozen and all-frozen bounds; the solver then fills `ratio`;
 * bench_lp_finish snaps the ratios (tf_freeze_apply_ratios), takes the
 * planned longest path and the critical actions, and sums the freezing.
 */
#ifndef TF_BENCH_LP_H
#define TF_BENCH_LP_H

#include "tf/dag.h"
#include "tf/error.h"
#include "tf/profile.h"

typedef struct bench_lp_result {
    double batch_ms;       /* longest path of the planned durations */
    double total_freeze;   /* sum of the freeze ratios */
    double solve_seconds;  /* the solver's share (see each solver's header) */
    int rows, columns;     /* LP size */
} bench_lp_result;

typedef struct bench_lp_plan {
    const tf_schedule *s;
    int n;                    /* actions */
    double *max_ms, *min_ms;  /* n: unfrozen and frozen durations */
    double *ratio;            /* n, zeroed: the solver writes the ratios here */
    double *duration, *start; /* n: the planned durations and starts */
    unsigned char *critical;  /* n */
    tf_dag g;
} bench_lp_plan;

/* Sets up w for profile p (w's arrays are owned by w: bench_lp_free).
 * Returns 0, TF_ECYCLE from tf_dag_build or TF_ENOMEM, each with a message
 * in err; on error w holds nothing to free. */
int bench_lp_begin(const tf_profile *p, bench_lp_plan *w, tf_error *err);

/* The plan from w->ratio into out->batch_ms and out->total_freeze (the
 * other fields are the solver's).  Returns 0 or TF_ENOMEM. */
int bench_lp_finish(bench_lp_plan *w, bench_lp_result *out, tf_error *err);

/* Frees what bench_lp_begin allocated; safe on a zeroed w. */
void bench_lp_free(bench_lp_plan *w);

#endif
