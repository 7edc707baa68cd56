/* freeze_fast_nsx.h - primal network simplex for uncapacitated transshipment,
 * the pricing step of the fast freeze solver (freeze_fast.c).
 *
 * Problem, in the form the freeze LP needs it: arcs e = (tail -> head) with a
 * length len_e, node demands b_v summing to 0,
 *
 *     maximise  sum_e len_e f_e
 *     s.t.      inflow_v - outflow_v = b_v  for every node,  f >= 0,
 *
 * whose dual is the difference-constraint LP
 *
 *     minimise  sum_v b_v pi_v   s.t.  pi_head - pi_tail >= len_e.
 *
 * Node 0 is the root: pi_0 = 0.  The caller gives a spanning tree (one arc
 * per non-root node joining it to its parent) whose tree flows are
 * non-negative and that is strongly feasible (a tree arc with zero flow
 * points away from the root); the simplex keeps it strongly feasible
 * (Cunningham's leaving-arc rule), so it cannot cycle.  On return pi holds
 * optimal potentials: every arc satisfies pi_head - pi_tail >= len_e (within
 * tolerance) and the tree arcs hold with equality.
 */
#ifndef TF_FREEZE_FAST_NSX_H
#define TF_FREEZE_FAST_NSX_H

/* Arcs listed by one of their ends (CSR), for the dual ratio test.  Node
 * v's entries are positions first[v] .. first[v+1]-1: its non-tree arcs
 * before split[v], its tree arcs from there on. */
typedef struct tf_nsx_adjacency {
    int *first, *split;  /* nodes + 1 each (split's last entry unused) */
    int *arc, *far;      /* by position: the arc and its other end */
    double *len;         /* by position: its length, read from the caller's
                          * lengths by each solve and by the first resolve
                          * after they change */
    int *at;             /* arcs: the position of each */
} tf_nsx_adjacency;

/* An entry of the tournament that picks the dual pivots' leaving arc: a
 * node and its key (see tf_nsx.tournament). */
typedef struct tf_nsx_entry {
    double key;
    int node;
} tf_nsx_entry;

typedef struct tf_nsx {
    int nodes, arcs;
    /* Problem data, owned by the caller.  Lengths may change between
     * solves (not during one): tf_nsx_solve reads them afresh, and
     * tf_nsx_resolve after tf_nsx_lengths_changed. */
    const int *tail, *head;
    const double *len;
    /* State, owned here (tf_nsx_init / tf_nsx_free). */
    double *flow;        /* arcs */
    double *pi;          /* nodes */
    int *parent;         /* nodes: parent in the tree, -1 for the root */
    int *pred;           /* nodes: tree arc joining the node to its parent */
    unsigned char *up;   /* nodes: pred arc points from the node to its parent */
    unsigned char *in_tree; /* arcs */
    int *thread, *rev_thread; /* preorder thread (circular through the root) */
    int *size;           /* nodes: nodes in the subtree under each node */
    int *last;           /* nodes: the last node of that subtree in the thread */
    int *child, *sibling, *stack; /* scratch for building the first tree */
    int *order;          /* the side of a pivot's cut whose potentials shift */
    int *segment;        /* 2 * nodes: the thread pieces of a re-hung subtree */
    double *excess;      /* nodes: scratch for tree flows */
    int *mark, stamp;    /* nodes: membership of the side of the cut a pivot lists */
    /* The dual pivots' choice of leaving arc: a tournament over the nodes
     * (leaves >= nodes, a power of two) keyed by the flow on each one's
     * tree arc over the square root of the smaller side of its cut, or
     * infinity where that flow is at least -negative_tol (and for the root
     * and the padding).  Entry leaves + v is node v's; match i, 1 <= i <
     * leaves, holds the least-keyed node below it (children 2i and
     * 2i + 1), match 1 the winner; entry 0 is unused. */
    int leaves;
    tf_nsx_entry *tournament; /* 2 * leaves */
    unsigned char *queued; /* by match: waiting to be replayed (entry 0 unused) */
    /* nodes, scratch: the last push_around_cycle's cycle (join left out),
     * then note_cycle's queue of matches. */
    int *cycle, cycle_length;
    double negative_tol;
    tf_nsx_adjacency out, in; /* arcs by tail and by head */
    int next_arc;        /* where the block search resumes */
    long pivots;         /* primal pivots in the last solve */
    long dual_pivots;    /* dual pivots in the last resolve */
    long listed;         /* nodes their walks listed (each pivot lists the
                          * smaller side of its cut) */
    int stale;           /* the lists' lengths or the potentials may not fit
                          * len and the tree: after tf_nsx_lengths_changed
                          * or a failed solve */
} tf_nsx;

/* Allocates the state for a network of `nodes` nodes and `arcs` arcs whose
 * arrays tail/head/len stay valid while m is used.  Returns 0 or TF_ENOMEM. */
int tf_nsx_init(tf_nsx *m, int nodes, int arcs, const int *tail, const int *head,
                const double *len);

/* Solves for demands b[nodes] starting from the spanning tree tree_arc[v]
 * (v = 1 .. nodes-1; tree_arc[0] ignored).  alt_arc (may be NULL) gives for
 * each node an arc joining the same two nodes the other way round, or -1:
 * it replaces tree_arc[v] where that arc would carry negative flow, or zero
 * flow towards the root.  Returns 0, TF_EINVAL if the start tree is not a
 * feasible spanning tree, or TF_ESOLVER if the problem is unbounded (a
 * positive-length cycle: the difference constraints are infeasible) or the
 * pivot guard trips: 200 per node, or max_pivots if that is positive and
 * smaller.  tol: reduced costs above -tol count as optimal. */
int tf_nsx_solve(tf_nsx *m, const double *b, const int *tree_arc, const int *alt_arc,
                 double tol, long max_pivots);

/* Re-solves for new demands b from the optimal tree of the previous solve
 * (which must have succeeded).  The tree stays dual feasible when only the
 * demands change (a changed length can break that; the answer is still
 * optimal, because the primal pivots that follow repair any reduced cost
 * left negative, but the dual pivots may take longer or trip their guard),
 * so dual pivots (a tree arc with flow below -flow_tol
 * leaves, the one of most negative flow per square root of the smaller
 * side of its cut; the cheapest arc across its cut enters) restore primal
 * feasibility, usually in far fewer pivots than a fresh solve; primal
 * pivots then clear any reduced cost below -tol left by round-off.  Returns
 * 0, or TF_ESOLVER when the dual pivots find no feasible flow, exceed
 * their guard (4 per node) or, if max_listed is positive, have listed more
 * than max_listed nodes (their work: see `listed`).  After a failure the
 * caller solves afresh or loads a tree. */
int tf_nsx_resolve(tf_nsx *m, const double *b, double tol, double flow_tol, long max_listed);

/* Makes tree_arc[v] (v = 1 .. nodes-1; tree_arc[0] ignored) the tree from
 * which the next tf_nsx_resolve starts, in place of the last solve's (the
 * caller keeps a tree as a copy of pred).  For the resolve's dual pivots to
 * be exact the tree must be dual feasible under the lengths it sees (its
 * potentials meet every arc), as an optimal tree of an earlier solve under
 * the same lengths is, and so is the tree where a resolve stopped (dual
 * pivots keep dual feasibility).  Returns 0, or TF_EINVAL if tree_arc is
 * not a spanning tree (m must then be solved afresh). */
int tf_nsx_load_tree(tf_nsx *m, const int *tree_arc);

/* Tells m that the caller changed some of len since the last solve, so
 * the next tf_nsx_resolve reads them again and recomputes the potentials
 * (O(arcs)); a resolve that follows only a change of demands skips both.
 * tf_nsx_solve reads them anyway.  Correctness does not hang on it: stale
 * lengths only mislead the dual pivots (more of them, or their guard trips
 * and the caller solves afresh), and the primal pivots, which read len
 * itself from freshly computed potentials, repair what they leave. */
void tf_nsx_lengths_changed(tf_nsx *m);

void tf_nsx_free(tf_nsx *m);

#endif
