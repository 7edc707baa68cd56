/* freeze_common.h - what the two freeze solvers share beyond tf/freeze.h
 * (freeze_common.c).  Internal to the planner library.
 *
 * Both solvers (freeze_lpsolve.c, freeze_fast.c) include this and nothing of
 * each other; the dispatcher (solver.c) is the only file that knows both.
 */
#ifndef TF_FREEZE_COMMON_H
#define TF_FREEZE_COMMON_H

#include "tf/dag.h"
#include "tf/freeze.h"
#include "tf/schedule.h"

/* Is edge e (out of action u) of g implied by the rank-order chain, so the
 * LP needs no constraint for it?  True for an edge between two actions of
 * one rank that is not itself a rank-order edge: the graph is acyclic, so
 * the later action comes later in the rank's order, lags on one rank are 0
 * and durations are non-negative.  Leaving such rows out shrinks the LP by
 * about a third without changing its feasible set. */
int tf_freeze_edge_implied(const tf_schedule *s, const tf_dag *g, int u, int e);

/* The two solvers under a control (tf_freeze_solve_ctl): tf_freeze_solve
 * and tf_freeze_solve_fast are these with ctl NULL.  `deadline` is the
 * tf_now_seconds() past which they give up (0: none); they never fall
 * back, the dispatcher does. */
typedef struct tf_freeze_limits {
    double deadline;
    double time_limit_s;   /* for messages */
    tf_progress *progress;
    int max_rounds;        /* the fast solver's (tf_freeze_control) */
} tf_freeze_limits;

int tf_freeze_lpsolve_run(const tf_freeze_limits *lim, const tf_schedule *s, const tf_dag *g,
                          const double *max_ms, const double *min_ms, const double *cap,
                          tf_objective objective, tf_freeze_result *out, tf_error *err);
int tf_freeze_fast_run(const tf_freeze_limits *lim, const tf_schedule *s, const tf_dag *g,
                       const double *max_ms, const double *min_ms, const double *cap,
                       tf_objective objective, tf_freeze_result *out, tf_error *err);

/* Has the deadline of lim passed?  Never with lim NULL or no deadline. */
int tf_freeze_past_deadline(const tf_freeze_limits *lim);

/* Allocates out's per-action arrays (ratio, duration, start) for n actions,
 * zeroed, over whatever pointers they held.  Returns 0, or TF_ENOMEM with
 * out holding what was allocated, which tf_freeze_result_free releases. */
int tf_freeze_result_alloc(tf_freeze_result *out, int n);

#endif
