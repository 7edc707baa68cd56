/* freeze_common.h - what the two freeze solvers share beyond tf/freeze.h
 * (freeze_common.c).  Internal to the planner library.
 *
 * Every solver (freeze_lpsolve.c, freeze_clp.c, freeze_fast.c) includes
 * this and nothing of the fast one's or the general ones' insides; the
 * dispatcher (solver.c) is the only file that knows them all, and none
 * calls it.
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

/* A solve's bounds, from its tf_freeze_control: `deadline` is the
 * tf_now_seconds() past which a solver gives up (0: none).  Solvers never
 * fall back; the dispatcher does. */
typedef struct tf_freeze_limits {
    double deadline;
    double time_limit_s;   /* for messages */
    tf_progress *progress;
    int max_rounds;        /* the fast solver's (tf_freeze_control) */
} tf_freeze_limits;

/* The three solvers, on a problem tf_freeze_solve has checked (its solver
 * field is ignored), under limits lim (NULL: none).  Same returns as
 * tf_freeze_solve, without the fallback: 0 with *out filled, or TF_ESOLVER
 * / TF_ENOMEM (TF_EINVAL: the fast solver's network came out miscounted)
 * with *out freed.  out->seconds is the solver's own time. */
int tf_freeze_lpsolve_run(const tf_freeze_problem *p, const tf_freeze_limits *lim,
                          tf_freeze_result *out, tf_error *err);
int tf_freeze_clp_run(const tf_freeze_problem *p, const tf_freeze_limits *lim,
                      tf_freeze_result *out, tf_error *err);
int tf_freeze_fast_run(const tf_freeze_problem *p, const tf_freeze_limits *lim,
                       tf_freeze_result *out, tf_error *err);

/* The libraries' versions ("5.5.2.5", "1.17.6") into buf[size]; return buf. */
char *tf_freeze_lpsolve_version(char *buf, size_t size);
char *tf_freeze_clp_version(char *buf, size_t size);

/* lp_solve's process-wide state, set up before threads solve in parallel
 * (tf_planner_init says why).  Returns 0 or TF_ENOMEM. */
int tf_freeze_lpsolve_init(void);

/* Has the deadline of lim passed?  Never with lim NULL or no deadline. */
int tf_freeze_past_deadline(const tf_freeze_limits *lim);

/* Turns solved ratios (g->n of them) into a plan, as every solver does:
 * snaps ratio[i] within 1e-9 of 0 or 1 to it (solver round-off), sets
 * duration[i] = max - ratio (max - min), and returns the longest path under
 * those durations with the start times in start.  All arrays are the
 * caller's; NAN if start is NULL and no scratch memory is available. */
double tf_freeze_apply_ratios(const tf_dag *g, const double *max_ms, const double *min_ms,
                              double *ratio, double *duration, double *start);

/* Does p's memory limit bind: a model, limits, and some rank over its
 * limit with nothing frozen or recomputed? */
int tf_freeze_memory_binds(const tf_freeze_problem *p);

/* With a binding limit, each rank's smallest achievable peak (every ratio
 * free within the caps) against its limit: 0 when every rank can fit, else
 * TF_EINVAL naming the ranks that cannot, their smallest peaks and limits
 * (TF_ESOLVER, TF_ENOMEM if that cannot be found).  freeze_memory.c. */
int tf_freeze_memory_check(const tf_freeze_problem *p, tf_error *err);

/* peaks[r] for every rank of p (a memory model, and limits, which only
 * scale the LP): the smallest peak freezing and recomputing within the
 * caps can reach.  Returns 0, TF_ESOLVER or TF_ENOMEM.  freeze_memory.c. */
int tf_freeze_memory_floor(const tf_freeze_problem *p, double *peaks, tf_error *err);

/* served[i] for every action of p's schedule: -1, or for an R action the
 * backward whose recompute ratio sets its duration (no R without
 * p->recompute_ms).  recomputed[j] (may be NULL) is set for each such
 * backward.  Returns 0 or TF_ENOMEM. */
int tf_freeze_recompute_targets(const tf_freeze_problem *p, int *served, unsigned char *recomputed);

/* Turns out's solved ratio and recompute arrays into the plan every solver
 * reports: each snapped within 1e-9 of 0 or 1 (solver round-off), except on
 * a rank that snapping would push over a binding memory limit, which
 * keeps the solver's values clamped to [0, 1]; out->duration (max - ratio
 * x (max - min); an R's recompute_ms x the q of the backward it serves)
 * and out->start.  Returns the longest path of those durations, NAN when
 * no scratch memory is available. */
double tf_freeze_apply(const tf_freeze_problem *p, tf_freeze_result *out);

/* Allocates out's per-action arrays (ratio, duration, start, recompute) for n actions,
 * zeroed, over whatever pointers they held.  Returns 0, or TF_ENOMEM with
 * out holding what was allocated, which tf_freeze_result_free releases. */
int tf_freeze_result_alloc(tf_freeze_result *out, int n);

#endif
