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

/* Allocates out's per-action arrays (ratio, duration, start) for n actions,
 * zeroed, over whatever pointers they held.  Returns 0, or TF_ENOMEM with
 * out holding what was allocated, which tf_freeze_result_free releases. */
int tf_freeze_result_alloc(tf_freeze_result *out, int n);

#endif
