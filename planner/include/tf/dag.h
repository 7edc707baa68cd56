/* dag.h - the dependency graph of one training batch (docs/planner.md).
 *
 * Nodes are the schedule's actions (same indices).  Edges u -> v:
 *  1. consecutive actions of one rank;
 *  2. same (type, stage), microbatch m -> m+1;
 *  3. F(m,s) -> B(m,s) or I(m,s); I(m,s) -> W(m,s);
 *  4. F(m,s) -> F(m,s+1);
 *  5. B or I of (m,s) -> B or I of (m,s-1).
 * An edge between actions on different ranks carries a lag (p2p time).
 *
 * Rule 2 runs m+1 -> m instead for a stage whose forwards run in microbatch
 * order and whose backwards of one type all run from the last microbatch
 * down (PyTorch's LoopedBFS): the edge follows the order the rank runs
 * them in, as it does everywhere else.
 *
 * An overlapped pair (schedule.h) is one node of the graph in all but
 * storage: its two actions stay two nodes, joined back to back by their
 * rank-order edge, and every other edge into the second enters the first
 * instead, every other edge out of the first leaves the second.  So the
 * pair starts once the inputs of both have arrived, its outputs leave when
 * both are done, and it lasts the sum of its parts: the longest path and
 * the freeze LP are those of one node of that duration, while each part
 * keeps its own duration (and the backward its freeze ratio).
 */
#ifndef TF_DAG_H
#define TF_DAG_H

#include "tf/error.h"
#include "tf/schedule.h"

/* Bit set of the rules that produced an edge (an edge may come from several). */
enum {
    TF_EDGE_RANK_ORDER = 1 << 0,
    TF_EDGE_MICROBATCH = 1 << 1,
    TF_EDGE_BACKWARD_AFTER_FORWARD = 1 << 2,
    TF_EDGE_FORWARD_NEXT_STAGE = 1 << 3,
    TF_EDGE_BACKWARD_PREV_STAGE = 1 << 4,
    TF_EDGE_PAIR = 1 << 5 /* joins a pair, or was moved to its start or end */
};

typedef struct tf_dag {
    int n;            /* nodes = schedule actions */
    int n_edges;
    /* CSR successor lists: edges out of u are succ[succ_offset[u] .. succ_offset[u+1]-1] */
    int *succ_offset; /* n + 1 */
    int *succ;        /* n_edges: target node */
    double *lag;      /* n_edges: p2p lag in ms (0 on one rank) */
    unsigned char *rule; /* n_edges: TF_EDGE_* bits */
    int *topo;        /* n: a topological order */
} tf_dag;

/* Builds the DAG of schedule s with lag p2p_ms on cross-rank edges.
 * Returns 0, TF_ENOMEM, TF_EINVAL (a pair whose two actions are not
 * consecutive on one rank, forward first), or TF_ECYCLE with a message
 * naming the actions on one cycle ("0F1 -> 1F1 -> ... -> 0F1"): such an
 * order deadlocks.
 * On success *out owns its arrays (tf_dag_free). */
int tf_dag_build(const tf_schedule *s, double p2p_ms, tf_dag *out, tf_error *err);

/* Longest path with node durations dur[n]: start[i] (n, may be NULL) gets the
 * earliest start of each action when every action starts as soon as its
 * predecessors finish (plus lags).  Returns the batch time (makespan), or
 * NaN when start is NULL and no scratch memory could be allocated. */
double tf_dag_longest_path(const tf_dag *g, const double *dur, double *start);

/* Marks critical[i] = 1 for actions with zero slack (relative tolerance
 * 1e-9 of the makespan) in the schedule with durations dur, else 0.
 * Returns 0, or TF_ENOMEM with every mark 0. */
int tf_dag_critical(const tf_dag *g, const double *dur, unsigned char *critical);

/* Frees the arrays of g and zeroes it. */
void tf_dag_free(tf_dag *g);

#endif
