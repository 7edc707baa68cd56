/* freeze_fast.c - the freeze LP by Dantzig-Wolfe decomposition: a network
 * simplex for the precedence part, a small dense simplex
 * (freeze_fast_master.c) for the few coupling rows.
 *
 * Split every freezable action u into a start node a_u and an end node b_u
 * (a fixed action is one node; its end is start + max).  With potentials pi
 * (start and end times, pi_O = 0 at a root O, pi_T = the makespan) every
 * constraint of the freeze LP except the stage caps is a difference
 * constraint pi_head - pi_tail >= len:
 *
 *   b_u -> a_v   len lag (+ max_u if u is fixed)   precedence u -> v
 *   a_u -> b_u   len min_u                          w_u >= min_u  (r_u <= 1)
 *   b_u -> a_u   len -max_u                         w_u <= max_u  (r_u >= 0)
 *   O -> a_u     len 0                              t_u >= 0 (sources)
 *   b_u -> T     len 0 (+ max_u if fixed)           T >= finish (sinks)
 *
 * and r_u = (max_u - (pi_b - pi_a)) / (max_u - min_u) is affine in pi.  Any
 * objective nu T + sum c_u r_u with nu >= 0 over that polyhedron X is the
 * dual of an uncapacitated transshipment problem (the time-cost trade-off of
 * Fulkerson 1961), solved exactly by tf_nsx.
 *
 * The caps (sum r over a stage <= cap * count) are kept in a small master
 * LP over convex weights alpha_j of points x_j of X (Dantzig-Wolfe); the
 * bounds that keep earlier objectives optimal are arcs of the network
 * (T <= T*, and for spread r_u <= z*, found by Newton's method).  Minimise
 * sum alpha_j obj(x_j) subject to the coupling rows and sum alpha_j = 1.
 * The master's duals price the coupling rows into the network objective; the
 * network simplex returns the most improving point of X; when its reduced
 * cost is non-negative (within 1e-11 relative) the master's optimum is the
 * LP optimum, and the plan is x = sum alpha_j x_j, which satisfies every
 * constraint of the full LP because X is convex and the master enforces the
 * rest.  See docs/fast-solver.md.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "freeze_common.h"
#include "freeze_fast_master.h"
#include "freeze_fast_nsx.h"
#include "model/freezable.h"
#include "tf/util.h"

/* The network form of the LP's precedence part. */
typedef struct fast_net {
    int n, k, stages;
    int nodes, arcs;
    int node_T;              /* the makespan node; node 0 is the root O */
    int *start_node;         /* n */
    int *end_node;           /* n: == start_node for fixed actions */
    double *end_offset;      /* n: pi_end + offset = finish (max for fixed, 0 split) */
    int *action_of;          /* nodes: the action whose start or end a node is (-1: O, T) */
    int *freezable;          /* k: action of the j-th freezable action */
    int *freeze_index;       /* n: j, or -1 */
    double *span;            /* n: max - min */
    int *tail, *head;        /* arcs */
    double *len;             /* arcs */
    int *in_arc_first;       /* n + 1: CSR of arcs into each start node ... */
    int *in_arc;             /* ... (precedence and source arcs) */
    int *sink_arc;           /* n: arc end -> T, or -1 */
    int *short_arc;          /* n: a -> b (len min), or -1 */
    int *long_arc;           /* n: b -> a (len -max), or -1 */
    int bound_arc;           /* T -> O: len -(makespan bound), slack until bounded */
} fast_net;

static void net_free(fast_net *g)
{
    free(g->start_node);
    free(g->end_node);
    free(g->end_offset);
    free(g->action_of);
    free(g->freezable);
    free(g->freeze_index);
    free(g->span);
    free(g->tail);
    free(g->head);
    free(g->len);
    free(g->in_arc_first);
    free(g->in_arc);
    free(g->sink_arc);
    free(g->short_arc);
    free(g->long_arc);
    memset(g, 0, sizeof *g);
}

/* Numbers the nodes: 0 = O, 1 = T, then each action's start, followed by
 * its end if it is freezable (a fixed action's end is its start plus max),
 * in topological order.  The spanning trees follow the schedule's chains,
 * so this order keeps a walk along the tree's thread, which every pivot
 * makes, in nearby memory: on 1F1B with 131,072 actions the same dual
 * pivots took 9.5-12 ns per node their walks listed, against 17-26 ns with
 * the starts in action order and the ends after them. */
static int net_place_nodes(const tf_schedule *s, const tf_dag *d, const double *max_ms,
                           const double *min_ms, fast_net *g)
{
    const int n = s->n_actions;
    size_t nn = (size_t)n + 1;
    g->start_node = malloc(nn * sizeof *g->start_node);
    g->end_node = malloc(nn * sizeof *g->end_node);
    g->end_offset = malloc(nn * sizeof *g->end_offset);
    g->freezable = malloc(nn * sizeof *g->freezable);
    g->freeze_index = malloc(nn * sizeof *g->freeze_index);
    g->span = malloc(nn * sizeof *g->span);
    if (!g->start_node || !g->end_node || !g->end_offset || !g->freezable ||
        !g->freeze_index || !g->span)
        return TF_ENOMEM;
    g->k = 0;
    for (int u = 0; u < n; u++) {
        g->span[u] = max_ms[u] - min_ms[u];
        g->freeze_index[u] = -1;
        if (tf_action_freezable(&s->actions[u], max_ms[u], min_ms[u])) {
            g->freeze_index[u] = g->k;
            g->freezable[g->k++] = u;
        }
    }
    g->node_T = 1;
    g->nodes = 2 + n + g->k;
    g->action_of = malloc((size_t)g->nodes * sizeof *g->action_of);
    if (!g->action_of)
        return TF_ENOMEM;
    g->action_of[0] = g->action_of[1] = -1;
    int next = 2;
    for (int i = 0; i < n; i++) {
        const int u = d->topo[i];
        g->action_of[next] = u;
        g->start_node[u] = g->end_node[u] = next++;
        if (g->freeze_index[u] >= 0) {
            g->action_of[next] = u;
            g->end_node[u] = next++;
        }
        g->end_offset[u] = g->freeze_index[u] >= 0 ? 0.0 : max_ms[u];
    }
    return 0;
}

/* Counts the arcs (kept precedence edges, sources, sinks, two per
 * freezable action, and the makespan bound T -> O) into g->arcs, and the
 * arcs into each start node as the CSR offsets g->in_arc_first. */
static int net_count_arcs(const tf_schedule *s, const tf_dag *d, fast_net *g)
{
    const int n = s->n_actions;
    g->in_arc_first = calloc((size_t)n + 2, sizeof *g->in_arc_first);
    if (!g->in_arc_first)
        return TF_ENOMEM;
    int *indegree = g->in_arc_first; /* counts into [v + 1] first */
    int arcs = 2 * g->k + 1;
    for (int u = 0; u < n; u++) {
        int first = d->succ_offset[u], last = d->succ_offset[u + 1];
        if (first == last)
            arcs++;
        for (int e = first; e < last; e++)
            if (!tf_freeze_edge_implied(s, d, u, e)) {
                indegree[d->succ[e] + 1]++;
                arcs++;
            }
    }
    for (int v = 0; v < n; v++)
        if (indegree[v + 1] == 0) {
            indegree[v + 1] = 1; /* the source arc O -> a_v */
            arcs++;
        }
    for (int v = 0; v < n; v++)
        g->in_arc_first[v + 1] += g->in_arc_first[v];
    g->arcs = arcs;
    return 0;
}

/* Sets arc *a to tail -> head with length len; returns its index and
 * moves *a on. */
static int net_arc(fast_net *g, int *a, int tail, int head, double len)
{
    g->tail[*a] = tail;
    g->head[*a] = head;
    g->len[*a] = len;
    return (*a)++;
}

/* The arcs out of action u: its kept precedence edges (listed into their
 * heads' in_arc by fill), its sink arc, and for a freezable action the
 * pair bounding its duration. */
static void net_action_arcs(const tf_schedule *s, const tf_dag *d, const double *max_ms,
                            const double *min_ms, int u, fast_net *g, int *fill, int *a)
{
    int first = d->succ_offset[u], last = d->succ_offset[u + 1];
    g->sink_arc[u] = g->short_arc[u] = g->long_arc[u] = -1;
    for (int e = first; e < last; e++) {
        if (tf_freeze_edge_implied(s, d, u, e))
            continue;
        int v = d->succ[e];
        g->in_arc[fill[v]++] =
            net_arc(g, a, g->end_node[u], g->start_node[v], g->end_offset[u] + d->lag[e]);
    }
    if (first == last)
        g->sink_arc[u] = net_arc(g, a, g->end_node[u], g->node_T, g->end_offset[u]);
    if (g->freeze_index[u] >= 0) {
        g->short_arc[u] = net_arc(g, a, g->start_node[u], g->end_node[u], min_ms[u]);
        g->long_arc[u] = net_arc(g, a, g->end_node[u], g->start_node[u], -max_ms[u]);
    }
}

/* Allocates and fills the arcs counted by net_count_arcs.  Returns 0,
 * TF_ENOMEM, or TF_EINVAL if the count and the arcs disagree. */
static int net_fill_arcs(const tf_schedule *s, const tf_dag *d, const double *max_ms,
                         const double *min_ms, fast_net *g)
{
    const int n = s->n_actions;
    size_t arcs = (size_t)g->arcs + 1, nn = (size_t)n + 1;
    g->tail = malloc(arcs * sizeof *g->tail);
    g->head = malloc(arcs * sizeof *g->head);
    g->len = malloc(arcs * sizeof *g->len);
    g->in_arc = malloc(((size_t)g->in_arc_first[n] + 1) * sizeof *g->in_arc);
    g->sink_arc = malloc(nn * sizeof *g->sink_arc);
    g->short_arc = malloc(nn * sizeof *g->short_arc);
    g->long_arc = malloc(nn * sizeof *g->long_arc);
    int *fill = malloc(nn * sizeof *fill);
    if (!g->tail || !g->head || !g->len || !g->in_arc || !g->sink_arc || !g->short_arc ||
        !g->long_arc || !fill) {
        free(fill);
        return TF_ENOMEM;
    }
    memcpy(fill, g->in_arc_first, (size_t)n * sizeof *fill);
    int a = 0;
    for (int u = 0; u < n; u++)
        net_action_arcs(s, d, max_ms, min_ms, u, g, fill, &a);
    for (int v = 0; v < n; v++)
        if (fill[v] == g->in_arc_first[v])
            g->in_arc[fill[v]++] = net_arc(g, &a, 0, g->start_node[v], 0.0);
    /* No bound yet: a length far below any path, so the arc never binds. */
    double total = 0.0;
    for (int u = 0; u < n; u++)
        total += max_ms[u];
    for (int e = 0; e < a; e++)
        total += fabs(g->len[e]);
    g->bound_arc = net_arc(g, &a, g->node_T, 0, -4.0 * (total + 1.0));
    free(fill);
    return a == g->arcs ? 0 : TF_EINVAL;
}

/* The network of the LP's precedence part for schedule s with DAG d.
 * Returns 0, TF_ENOMEM or TF_EINVAL (an internal miscount); g then holds
 * what was allocated, for net_free. */
static int net_build(const tf_schedule *s, const tf_dag *d, const double *max_ms,
                     const double *min_ms, fast_net *g)
{
    memset(g, 0, sizeof *g);
    g->n = s->n_actions;
    g->stages = s->stages;
    int rc = net_place_nodes(s, d, max_ms, min_ms, g);
    if (!rc)
        rc = net_count_arcs(s, d, g);
    if (!rc)
        rc = net_fill_arcs(s, d, max_ms, min_ms, g);
    return rc;
}

/* Dantzig-Wolfe state: the network, its simplex, and the master LP.
 *
 * Master columns: t = T / scale (the makespan, scaled to about 1), one
 * weight alpha_j per point x_j of X, and in the stages after the first one
 * slack per cap row.  Rows, all scaled to entries of about 1:
 *   cap rows      sum_j alpha_j U_s(x_j) / count_s - slack_s <= cap_s
 *   convexity     sum_j alpha_j = 1
 *   makespan      sum_j alpha_j T(x_j) / scale - t <= 0
 * The bounds that fix earlier stages' optima live in the network: T <= T*
 * is the arc T -> O, and spread's largest ratio z is the length
 * max_u - z (max_u - min_u) of every arc a_u -> b_u.
 * Objectives: t; sum_j alpha_j sum r(x_j) / k. */
typedef struct dw_state {
    fast_net *g;
    const tf_schedule *s;
    const tf_dag *d;
    const double *max_ms, *min_ms;
    double scale;          /* unfrozen makespan */
    double ratio_eps;      /* round-off of a priced point's ratios (ratio_resolution) */
    int fresh_pricing;     /* arc lengths changed: the last tree is stale */
    tf_nsx nsx;
    double *demand;        /* nodes */
    int *tree_arc, *alt_arc; /* nodes: the warm-start tree */
    int *walk_tree;        /* nodes: where a re-solve stopped (LAST_OR_GUESS) */
    /* The optimal tree of the fastest point priced (least T) since the
     * lengths last changed: dual feasible under a bound T <= fastest_T or
     * a looser one, so a start for the stage that bounds T
     * (price_within_bound).  fastest_T is INFINITY while none is kept. */
    int *fastest_tree;     /* nodes */
    double fastest_T;
    double *duration;      /* n: durations at the last priced point */
    double *finish;        /* n: scratch for the warm-start longest path */
    double *late;          /* n: scratch for relax_point's latest finish times */
    double *cost_r;        /* n: pricing cost per unit of ratio */
    double *cost_master;   /* n: cost_r at the master's duals */
    double *dual_centre, *dual_smooth; /* n_caps: smoothing centre, duals priced;
                                        * after dw_run, dual_centre proves the optimum */
    double *point_r;       /* k: ratios of the last priced point */
    double point_T;
    /* master rows */
    int n_caps;
    int *cap_stage;        /* n_caps */
    double *cap_count, *cap_value; /* n_caps */
    int *cap_of_stage;     /* stages: index into the cap rows, or -1 */
    int makespan_fixed;    /* the network's bound arc holds T <= T*: no T row bound */
    double penalty;        /* cost of the cap rows' slack columns; 0: none */
    double floor;          /* a known lower bound on the stage's optimum, or -inf */
    /* the batch-time stage's proof (keep_batch_proof): nu T(x) + sum_c
     * lambda_c (mean_c(x) - cap_c) >= bound for every point x of X */
    double *proof_lambda;  /* n_caps, >= 0 */
    double proof_nu, proof_bound;
    double proof_slope;    /* of t at z = 1 at those duals (ratio_bound_slope) */
    double slack_used;     /* largest slack in the last master solution */
    double slack_cost;     /* what all its slack adds to the master's value */
    int proof_noisy;       /* a stage failed: its proof was within round-off */
    double slack_last;     /* slack_used one round before */
    int slack_rounds;      /* rounds in a row with slack_used unchanged and real */
    int may_give_up;       /* a pass may end early on settled slack (dw_run_bounded) */
    /* columns: the points x_j */
    int cols, cols_alloc;
    double *col_r;         /* cols_alloc * k */
    double *col_cap;       /* cols_alloc * n_caps: each cap row's mean ratio */
    double *col_T, *col_sum, *alpha;
    /* master solution */
    double master_t, master_objective;
    double nu_sigma[2];    /* pricing cost of T per ms, dual of the convexity row */
    double *dual;          /* rows */
    int *basis;            /* rows: the last optimal basis, coded by basis_code */
    int have_basis;        /* 0 once columns are dropped: the next master starts cold */
    tf_master_inverse kept; /* the basis's inverse, for the next warm start */
    int pricings, master_solves;
    int rounds;            /* of column generation, every stage together */
    const tf_freeze_limits *lim; /* time limit and progress (may be NULL) */
} dw_state;

static const double *column_r(const dw_state *w, int j)
{
    return w->col_r + (size_t)j * (size_t)w->g->k;
}

/* Ratios of a point of X from its potentials: clipped to [0, 1] against
 * round-off (the potentials meet the duration arcs within tolerance). */
static double ratio_from(const fast_net *g, const double *pi, const double *max_ms, int u)
{
    double w = pi[g->end_node[u]] - pi[g->start_node[u]];
    double r = (max_ms[u] - w) / g->span[u];
    return r < 0.0 ? 0.0 : r > 1.0 ? 1.0 : r;
}

/* How finely a priced point's ratios are known: a ratio is
 * (max_u - (pi_b - pi_a)) / span_u, with potentials up to the makespan
 * (scale), so each carries round-off of a few units of DBL_EPSILON x scale
 * / span_u.  16 units of the worst action's, and never below 1e-12: what
 * the master's slack and a repeated point are judged against. */
static double ratio_resolution(const fast_net *g, double scale)
{
    double smallest = INFINITY;
    for (int j = 0; j < g->k; j++)
        smallest = fmin(smallest, g->span[g->freezable[j]]);
    double eps = g->k ? 16.0 * DBL_EPSILON * scale / smallest : 0.0;
    return eps > 1e-12 ? eps : 1e-12;
}

/* The worst round-off of the ratios this solver can live with: a cap may
 * be exceeded by that much of a mean ratio. */
#define FAST_RATIO_EPS_MAX 1e-6

/* Refuses (TF_ESOLVER, for the dispatcher's fallback) durations so far
 * apart that the ratios would be round-off: a freezable span of 1e-20 ms
 * beside a makespan of 370 ms made the pricing's demands (cost / span)
 * 1e20 and the plan 2% slower than lp_solve's, reported as optimal. */
static int check_resolution(const fast_net *g, double ratio_eps, double makespan,
                            tf_error *err)
{
    if (ratio_eps <= FAST_RATIO_EPS_MAX)
        return 0;
    double smallest = INFINITY;
    for (int j = 0; j < g->k; j++)
        smallest = fmin(smallest, g->span[g->freezable[j]]);
    return tf_fail(err, TF_ESOLVER,
                   "fast solver: durations too far apart for its precision (makespan %.6g ms, "
                   "smallest freezable span %.3g ms): ratios would carry round-off of %.3g",
                   makespan, smallest, ratio_eps);
}

/* Warm start: the tree of a longest path under the durations of the last
 * priced point (each start hangs from the predecessor that releases it
 * last), so the network simplex starts near the new optimum. */
static void warm_start_tree(dw_state *w)
{
    const fast_net *g = w->g;
    const tf_dag *d = w->d;
    const int n = g->n;
    double best_T = -INFINITY;
    for (int k = 0; k < n; k++) {
        int v = d->topo[k];
        double start = -INFINITY;
        int best = -1;
        for (int p = g->in_arc_first[v]; p < g->in_arc_first[v + 1]; p++) {
            int a = g->in_arc[p], t = g->tail[a];
            double ready;
            if (t == 0)
                ready = 0.0;
            else {
                int u = g->action_of[t];
                ready = w->finish[u] - g->end_offset[u];
            }
            ready += g->len[a];
            if (ready > start) {
                start = ready;
                best = a;
            }
        }
        w->tree_arc[g->start_node[v]] = best;
        /* finish[v] = pi of its end node + offset, i.e. its finish time. */
        w->finish[v] = start + w->duration[v];
        if (g->short_arc[v] >= 0) {
            w->tree_arc[g->end_node[v]] = g->short_arc[v];
            w->alt_arc[g->end_node[v]] = g->long_arc[v];
        }
        if (g->sink_arc[v] >= 0 && w->finish[v] > best_T) {
            best_T = w->finish[v];
            w->tree_arc[g->node_T] = g->sink_arc[v];
        }
    }
}

/* Durations that guess the optimum at the current pricing costs: an action
 * whose ratio costs nothing (or pays) is frozen whole there, so it gets its
 * least duration, and every other action its longest.  The first pricing
 * starts from their longest-path tree: from the unfrozen durations its
 * primal simplex took 14,109 pivots (0.85 s) on 1F1B with 131,072 actions,
 * from these none. */
static void guess_durations(dw_state *w)
{
    const fast_net *g = w->g;
    for (int j = 0; j < g->k; j++) {
        const int u = g->freezable[j];
        w->duration[u] = w->cost_r[u] <= 0.0 ? w->min_ms[u] : w->max_ms[u];
    }
}

/* Where a pricing's network simplex starts (see solve_pricing). */
enum pricing_start {
    FROM_LAST_TREE,  /* dual pivots from the last optimal tree; afresh if they fail */
    WITHIN_BUDGET,   /* the same, failing after a walk of WALK_BUDGET */
    LAST_OR_GUESS    /* the same, but past WALK_BUDGET a fresh start from the
                      * guess of guess_durations is tried for GUESS_PIVOTS */
};

/* A re-solve's dual pivots cost a walk over one side of each cut (the
 * nodes listed): past 64 passes over the network, a walk counts as long.
 * A primal simplex from a good guess takes a handful of pivots (none on
 * 1F1B with stage-level times at 2,048 to 131,072 actions, 38 with
 * per-action times at 2,048), from a poor one thousands. */
#define WALK_BUDGET(g) (64L * (g)->nodes)
#define GUESS_PIVOTS 64L

/* Dual pivots from the last tree to the optimum for w->demand, listing
 * at most max_listed nodes (0: no bound).  Flows below 1e-13 of the
 * demands in all count as round-off, relative to the demands however small:
 * they are prices per ms (T's is one over the unfrozen batch time, 1.25e-7
 * with one backward of 997,375 ms), and an absolute 1e-13 there took a flow
 * of -5e-14 for zero, called a tree optimal that was not, and ended the
 * batch-time stage 2.6 ms (1.6e-6) above the optimum (fuzz_profile;
 * tests/planner/regressions/tiny-demands.profile.json).  Returns 0 or
 * TF_ESOLVER. */
static int resolve_pricing(dw_state *w, long max_listed)
{
    double total = 0.0;
    for (int v = 0; v < w->g->nodes; v++)
        total += fabs(w->demand[v]);
    return tf_nsx_resolve(&w->nsx, w->demand, 1e-12 * w->scale, 1e-13 * total, max_listed);
}

/* A fresh primal simplex from the longest-path tree under w->duration, at
 * most max_pivots pivots (0: the guard).  Returns 0 or a TF_E* code. */
static int solve_pricing_afresh(dw_state *w, long max_pivots)
{
    for (int v = 0; v < w->g->nodes; v++)
        w->alt_arc[v] = -1;
    warm_start_tree(w);
    return tf_nsx_solve(&w->nsx, w->demand, w->tree_arc, w->alt_arc, 1e-12 * w->scale,
                        max_pivots);
}

/* Solves the pricing network for w->demand.  Only the demands differ from
 * the last pricing, so its optimal tree is still dual feasible: re-solve
 * from it, and start afresh only if that fails.  With LAST_OR_GUESS a long
 * walk is paused for a brief fresh start from the guess, and resumed where
 * it stopped (its tree is still dual feasible) if the guess is no good: at
 * the master's own duals in the batch-time stage, with stage-level times,
 * the walk from the last tree to the optimum took 28,620 dual pivots
 * listing 1.4 G nodes (4.3 s) at 131,072 actions, and the guess's tree
 * was optimal as built (docs/fast-solver.md). */
static int solve_pricing(dw_state *w, enum pricing_start start)
{
    if (w->pricings == 0 || w->fresh_pricing) {
        if (w->pricings == 0)
            guess_durations(w);
        return solve_pricing_afresh(w, 0);
    }
    int rc = resolve_pricing(w, start == FROM_LAST_TREE ? 0 : WALK_BUDGET(w->g));
    if (!rc || start == WITHIN_BUDGET)
        return rc;
    if (start == LAST_OR_GUESS) {
        memcpy(w->walk_tree, w->nsx.pred, (size_t)w->g->nodes * sizeof *w->walk_tree);
        guess_durations(w);
        if (!solve_pricing_afresh(w, GUESS_PIVOTS))
            return 0;
        if (!tf_nsx_load_tree(&w->nsx, w->walk_tree) && !resolve_pricing(w, 0))
            return 0;
    }
    return solve_pricing_afresh(w, 0);
}

/* Pricing: the point of X minimising nu T + sum cost_r[u] r_u (nu >= 0),
 * its network simplex started as `start` says.  Leaves the point in
 * point_T / point_r and returns its value in *value. */
static int price(dw_state *w, double nu, enum pricing_start start, double *value)
{
    const fast_net *g = w->g;
    for (int v = 0; v < g->nodes; v++)
        w->demand[v] = 0.0;
    w->demand[g->node_T] += nu;
    w->demand[0] -= nu;
    for (int j = 0; j < g->k; j++) {
        int u = g->freezable[j];
        double per_ms = w->cost_r[u] / g->span[u];
        w->demand[g->start_node[u]] += per_ms;
        w->demand[g->end_node[u]] -= per_ms;
    }
    int rc = solve_pricing(w, start);
    w->pricings++;
    w->fresh_pricing = rc != 0;

    if (rc)
        return rc;
    const double *pi = w->nsx.pi;
    w->point_T = pi[g->node_T];
    if (w->point_T < w->fastest_T) {
        w->fastest_T = w->point_T;
        memcpy(w->fastest_tree, w->nsx.pred, (size_t)g->nodes * sizeof *w->fastest_tree);
    }
    double total = nu * w->point_T;
    for (int u = 0; u < g->n; u++)
        w->duration[u] = w->max_ms[u];
    for (int j = 0; j < g->k; j++) {
        int u = g->freezable[j];
        double r = ratio_from(g, pi, w->max_ms, u);
        w->point_r[j] = r;
        w->duration[u] = w->max_ms[u] - r * g->span[u];
        total += w->cost_r[u] * r;
    }
    *value = total;
    return 0;
}

/* Among the pricing's optimal points, one that freezes less: the priced
 * point freezes some actions more than its makespan needs (where their
 * pricing cost is 0, any ratio is optimal), and every such ratio takes up
 * room under a cap that the master could give to another column.  Each
 * freezable action, in topological order, gets the longest duration that
 * still finishes by its latest finish time under the point's makespan
 * (computed with the point's durations); starting no later than before, it
 * leaves every later action its old room, so the point stays in X with a
 * makespan no larger.  Only ratios whose cost at the master's duals is not
 * negative shrink, so the point's reduced cost can only fall: it is still
 * a valid column, and a stage that ends because it prices out at nothing
 * ends no sooner.  The total-ratio stage prices every ratio at a positive
 * cost, so its optimal points have nothing to give back and skip this.
 * On 1F1B with 64 ranks and 8,192 actions this cut the batch-time stage
 * from 179 to 55 pricings and the run about fourfold (docs/fast-solver.md).
 * Comparisons, not fmin/fmax: those were library calls here, and took 15%
 * of that run. */
static void relax_point(dw_state *w)
{
    const fast_net *g = w->g;
    const tf_dag *d = w->d;
    const int n = g->n;
    double *late = w->late, *start = w->finish;
    for (int k = n - 1; k >= 0; k--) {
        const int u = d->topo[k];
        double lf = w->point_T;
        for (int e = d->succ_offset[u]; e < d->succ_offset[u + 1]; e++) {
            const int v = d->succ[e];
            const double by = late[v] - w->duration[v] - d->lag[e];
            lf = by < lf ? by : lf;
        }
        late[u] = lf;
        start[u] = 0.0;
    }
    double T = 0.0;
    for (int k = 0; k < n; k++) {
        const int u = d->topo[k], j = g->freeze_index[u];
        if (j >= 0 && w->cost_master[u] >= 0.0 && late[u] - start[u] > w->duration[u]) {
            double room = late[u] - start[u] < w->max_ms[u] ? late[u] - start[u] : w->max_ms[u];
            double r = (w->max_ms[u] - room) / g->span[u];
            r = r > 0.0 ? r : 0.0;
            if (r < w->point_r[j]) {
                w->point_r[j] = r;
                w->duration[u] = w->max_ms[u] - r * g->span[u];
            }
        }
        const double f = start[u] + w->duration[u];
        T = f > T ? f : T;
        for (int e = d->succ_offset[u]; e < d->succ_offset[u + 1]; e++) {
            const int v = d->succ[e];
            const double ready = f + d->lag[e];
            start[v] = ready > start[v] ? ready : start[v];
        }
    }
    w->point_T = T < w->point_T ? T : w->point_T;
}

enum { OBJECTIVE_T, OBJECTIVE_SUM };

/* The mean ratio under each cap row (means[n_caps]) of the ratios r, one
 * per freezable action (by freeze index); returns their sum. */
static double cap_means(const dw_state *w, const double *r, double *means)
{
    double total = 0.0;
    for (int c = 0; c < w->n_caps; c++)
        means[c] = 0.0;
    for (int i = 0; i < w->g->k; i++) {
        total += r[i];
        int cap = w->cap_of_stage[w->s->actions[w->g->freezable[i]].stage];
        if (cap >= 0)
            means[cap] += r[i];
    }
    for (int c = 0; c < w->n_caps; c++)
        means[c] /= w->cap_count[c];
    return total;
}

/* Stores the last priced point as column j = w->cols. */
static int add_point_column(dw_state *w)
{
    const int k = w->g->k;
    if (w->cols == w->cols_alloc) {
        int grown = w->cols_alloc ? 2 * w->cols_alloc : 64;
        double *r = realloc(w->col_r, (size_t)grown * (size_t)(k ? k : 1) * sizeof *r);
        if (r)
            w->col_r = r;
        double *T = realloc(w->col_T, (size_t)grown * sizeof *T);
        if (T)
            w->col_T = T;
        double *sum = realloc(w->col_sum, (size_t)grown * sizeof *sum);
        if (sum)
            w->col_sum = sum;
        double *alpha = realloc(w->alpha, (size_t)grown * sizeof *alpha);
        if (alpha)
            w->alpha = alpha;
        double *caps = realloc(w->col_cap, (size_t)grown * (size_t)(w->n_caps ? w->n_caps : 1) *
                                               sizeof *caps);
        if (caps)
            w->col_cap = caps;
        if (!r || !T || !sum || !alpha || !caps)
            return TF_ENOMEM;
        w->cols_alloc = grown;
    }
    int j = w->cols++;
    double *r = w->col_r + (size_t)j * (size_t)k;
    memcpy(r, w->point_r, (size_t)k * sizeof *r);
    w->col_T[j] = w->point_T;
    w->alpha[j] = 0.0;
    /* The column's total and its cap-row entries, kept so that each master
     * is built in O(columns x rows) rather than O(columns x actions). */
    w->col_sum[j] = cap_means(w, r, w->col_cap + (size_t)j * (size_t)w->n_caps);
    return 0;
}

/* Pricing costs per unit ratio from cap duals y (one per cap row): the
 * objective's own cost minus y over the stage's count (y <= 0). */
static void set_cap_costs(dw_state *w, int kind, const double *y)
{
    const fast_net *g = w->g;
    for (int i = 0; i < g->k; i++) {
        int u = g->freezable[i];
        int cap = w->cap_of_stage[w->s->actions[u].stage];
        double cost = kind == OBJECTIVE_SUM ? 1.0 / g->k : 0.0;
        if (cap >= 0)
            cost -= y[cap] / w->cap_count[cap];
        w->cost_r[u] = cost;
    }
}

/* The master's columns shift as points are added (the cap slacks come
 * after them), so its basis is kept between solves in codes that do not:
 * t and point j as themselves (0, 1 + j), the slack column of cap row i
 * as -1 - i, and the slack of row i as -1 - rows - i. */
static int basis_code(int col, int first_slack, int n_slack, int rows)
{
    if (col < first_slack)
        return col;
    if (col < first_slack + n_slack)
        return -1 - (col - first_slack);
    return -1 - rows - (col - first_slack - n_slack);
}

static int basis_column(int code, int first_slack, int n_slack, int rows)
{
    if (code >= 0)
        return code < first_slack ? code : -1;
    if (code >= -rows)
        return -1 - code < n_slack ? first_slack + (-1 - code) : -1;
    return first_slack + n_slack + (-1 - rows - code);
}

/* Builds and solves the master for objective `kind`, starting from the
 * last master's optimal basis where there is one; fills alpha, the duals
 * and the optimum.  Returns 0 or TF_ESOLVER / TF_ENOMEM. */
static int solve_master(dw_state *w, int kind)
{
    const fast_net *g = w->g;
    const int k = g->k;
    const int col_t = 0, first_alpha = 1;
    const int row_conv = w->n_caps, row_T = row_conv + 1;
    const int rows = row_T + 1;
    /* Slack on the cap rows once a stage's optimum is bound (dw_run_bounded). */
    const int n_slack = w->penalty > 0.0 ? w->n_caps : 0;
    const int first_slack = first_alpha + w->cols;
    const int cols = first_slack + n_slack;

    double *a = calloc((size_t)rows * (size_t)cols, sizeof *a);
    double *b = calloc((size_t)rows, sizeof *b);
    double *c = calloc((size_t)cols, sizeof *c);
    double *x = calloc((size_t)cols, sizeof *x);
    char *sense = malloc((size_t)rows);
    double *dual = realloc(w->dual, (size_t)rows * sizeof *dual);
    if (dual)
        w->dual = dual;
    int *basis = realloc(w->basis, (size_t)rows * sizeof *basis);
    if (basis)
        w->basis = basis;
    int rc = TF_ENOMEM;
    if (!a || !b || !c || !x || !sense || !dual || !basis)
        goto done;
#define A(i, j) a[(size_t)(i) * (size_t)cols + (size_t)(j)]
    memset(sense, 'L', (size_t)rows);
    for (int i = 0; i < w->n_caps; i++)
        b[i] = w->cap_value[i];
    sense[row_conv] = 'E';
    b[row_conv] = 1.0;
    /* Once the network bounds T (makespan_fixed), t is unused: its row is
     * left empty so its dual is 0 and the master cannot wander along t. */
    const double t_entry = w->makespan_fixed ? 0.0 : 1.0;
    A(row_T, col_t) = -t_entry;
    for (int j = 0; j < w->cols; j++) {
        const double *caps = w->col_cap + (size_t)j * (size_t)w->n_caps;
        int col = first_alpha + j;
        for (int i = 0; i < w->n_caps; i++)
            A(i, col) = caps[i];
        A(row_conv, col) = 1.0;
        A(row_T, col) = t_entry * w->col_T[j] / w->scale;
        if (kind == OBJECTIVE_SUM)
            c[col] = w->col_sum[j] / k;
    }
    for (int i = 0; i < n_slack; i++) {
        A(i, first_slack + i) = -1.0;
        c[first_slack + i] = w->penalty;
    }
    if (kind == OBJECTIVE_T)
        c[col_t] = 1.0;
#undef A
    for (int i = 0; i < rows; i++)
        basis[i] = w->have_basis ? basis_column(basis[i], first_slack, n_slack, rows) : -1;
    /* Between rounds only columns are added (no basic column's data or b
     * changes), so the last optimal basis's inverse still holds; where the
     * basis is dropped, so is the inverse. */
    w->kept.valid = w->kept.valid && w->have_basis;
    rc = tf_master_lp_solve_kept(rows, cols, a, sense, b, c, x, w->dual, &w->master_objective,
                                 basis, &w->kept);
    if (rc == TF_ESOLVER && w->have_basis) {
        /* Whatever went wrong from the warm start, the cold one decides. */
        basis[0] = -1;
        rc = tf_master_lp_solve_kept(rows, cols, a, sense, b, c, x, w->dual,
                                     &w->master_objective, basis, &w->kept);
    }
    w->master_solves++;
    w->have_basis = !rc;
    if (rc)
        goto done;
    for (int i = 0; i < rows; i++)
        basis[i] = basis_code(basis[i], first_slack, n_slack, rows);
    w->master_t = x[col_t];
    for (int j = 0; j < w->cols; j++)
        w->alpha[j] = x[first_alpha + j];
    w->slack_used = 0.0;
    w->slack_cost = 0.0;
    for (int i = 0; i < n_slack; i++) {
        w->slack_used = fmax(w->slack_used, x[first_slack + i]);
        w->slack_cost += w->penalty * x[first_slack + i];
    }
    /* Pricing costs: minus the duals, per unit of each point's entries.
     * With T bounded in the network, the empty T row prices nothing. */
    set_cap_costs(w, kind, w->dual);
    w->nu_sigma[0] = w->makespan_fixed ? 0.0 : -w->dual[row_T] / w->scale;
    w->nu_sigma[1] = w->dual[row_conv];
done:
    free(a);
    free(b);
    free(c);
    free(x);
    free(sense);
    return rc;
}

/* Whether the last priced point is (to round-off) a column already in the
 * master: its exact reduced cost there is non-negative, so a slightly
 * negative computed value is round-off, and adding it again would loop. */
static int point_is_column(const dw_state *w)
{
    const int k = w->g->k;
    for (int j = 0; j < w->cols; j++) {
        if (fabs(w->col_T[j] - w->point_T) > 1e-12 * w->scale)
            continue;
        const double *r = column_r(w, j);
        int same = 1;
        for (int i = 0; i < k && same; i++)
            same = fabs(r[i] - w->point_r[i]) <= w->ratio_eps;
        if (same)
            return 1;
    }
    return 0;
}

/* Column generation for one objective stage until no point of X prices
 * out: returns 0 with the master optimal, or a TF_E* code. */
/* Before each round: the bounds of a solve (TF_FAST_MAX_ROUNDS rounds in
 * all, the time limit) and the progress line.  Returns 0 or TF_ESOLVER. */
static int dw_round_allowed(dw_state *w, const char *step, tf_error *err)
{
    int most = w->lim ? w->lim->max_rounds : TF_FAST_MAX_ROUNDS;
    if (w->rounds >= most)
        return tf_fail(err, TF_ESOLVER,
                       "fast solver: no convergence after %d rounds (the most allowed) "
                       "minimising %s",
                       w->rounds, step);
    if (tf_freeze_past_deadline(w->lim))
        return tf_fail(err, TF_ESOLVER,
                       "fast solver: stopped at the time limit (%g s) while minimising %s "
                       "after %d rounds",
                       w->lim->time_limit_s, step, w->rounds);
    if (w->lim && tf_progress_due(w->lim->progress))
        tf_progress_note(w->lim->progress, "fast solver: minimising %s, %d rounds, %d columns",
                         step, w->rounds, w->cols);
    w->rounds++;
    return 0;
}

/* Whether a pass at a too-low penalty has settled on a slack: the master's
 * slack has been the same for SLACK_SETTLED_ROUNDS rounds (and is not
 * round-off), while its value and bound still close on the relaxed optimum.
 * That optimum uses the slack too, so it is not the answer, and the rounds
 * that would prove it are wasted: on 1F1B with 64 ranks and 8,192 actions
 * the first pass ran 230 rounds, 165 of them with the slack settled, before
 * the penalty grew (docs/fast-solver.md).  Allowed once per stage
 * (may_give_up): a penalty raised again on the first rounds of the next
 * pass, when slack is in use only until the master has the columns to do
 * without it, ran to 1e6, where the master stalled. */
#define SLACK_SETTLED_ROUNDS 5

static int slack_settled(dw_state *w)
{
    if (!w->may_give_up || w->slack_used <= w->ratio_eps) {
        w->slack_rounds = 0;
        w->slack_last = 0.0;
        return 0;
    }
    if (fabs(w->slack_used - w->slack_last) <= 1e-9 * w->slack_used)
        w->slack_rounds++;
    else
        w->slack_rounds = 0;
    w->slack_last = w->slack_used;
    return w->slack_rounds >= SLACK_SETTLED_ROUNDS;
}

/* A bound on what the ratios are priced at, in all, at cap duals y: 1 + sum |y|. */
static double ratio_prices(const dw_state *w, const double *y)
{
    double prices = 1.0;
    for (int c = 0; c < w->n_caps; c++)
        prices += fabs(y[c]);
    return prices;
}

/* The round-off of a value priced at cap duals y (a reduced cost or a
 * Lagrangian bound): each priced ratio carries up to ratio_eps. */
static double pricing_noise(const dw_state *w, const double *y)
{
    return w->ratio_eps * ratio_prices(w, y);
}

/* Whether a proof at cap duals y of a bound stage can be trusted: its
 * value is uncertain by pricing_noise.  Where the penalty has driven the
 * duals up against coarse ratios, that can outweigh what separates the
 * master from a better point: a fuzzed Interleaved1F1B profile with one
 * backward of 1e6 ms (ratio_eps 4.6e-8) ended its total-ratio stage at cap
 * duals near 65,536, 3e-3 of the objective, with a total freeze 0.011
 * (6e-4 relative) above lp_solve's.  Past PROOF_NOISE_MAX of the objective
 * the stage fails and lp_solve decides; test_freeze_fast's instances reach
 * 2.8e-5 (its wide-range durations) and the benchmark profiles 2e-8, all
 * with lp_solve's answers.  Returns 0 or TF_ESOLVER. */
#define PROOF_NOISE_MAX 1e-4

static int proof_trusted(dw_state *w, const double *y, const char *step, tf_error *err)
{
    if (w->penalty <= 0.0)
        return 0;
    double noise = pricing_noise(w, y) / fmax(1.0, fabs(w->master_objective));
    if (noise <= PROOF_NOISE_MAX)
        return 0;
    w->proof_noisy = 1;
    return tf_fail(err, TF_ESOLVER,
                   "fast solver: at cap prices summing to %.3g the ratios' round-off (%.3g) "
                   "is %.2g of the objective while minimising %s: too coarse to prove it",
                   ratio_prices(w, y), w->ratio_eps, noise, step);
}

/* How near the floor of total_ratio_floor a master must come to end its
 * stage, relative.  The floor is proved, so the answer is then within this
 * of the stage's optimum; it is not 1e-11 like the Lagrangian bounds,
 * because the floor falls short of the optimum by the batch-time stage's
 * own gap (1e-11 of its objective) times count_c / lambda_c: 2.8e-11 of the
 * mean ratio on GPipe with 32 ranks and 2,048 actions, where every cap binds
 * and proving that last 2.8e-11 took 728 rounds, 0.9 s of the run's 1.25 s.
 * 1e-9 is the resolution of the plan's ratios, which are snapped to 0 or 1
 * within it (docs/fast-solver.md, step 4). */
#define FLOOR_TOL 1e-9

static int dw_run(dw_state *w, int kind, const char *step, tf_error *err)
{
    const fast_net *g = w->g;
    /* Dual smoothing (Wentges): price at a mix of the master's cap duals and
     * the best Lagrangian duals seen so far (the centre), which damps the
     * master's jumping duals, so fewer rounds are needed and each pricing
     * starts closer to the last tree.  Exactness is untouched: a column is
     * added only if it prices out at the master's own duals, and the stage
     * ends when no column does, or when the master's value meets the best
     * Lagrangian bound.  The centre's weight is 0.8: against 0.5 it cut
     * 1F1B with 32 ranks and 8,192 actions from 10 s to 2.5 s and GPipe
     * with 16 ranks from 1.8 s to 0.3 s, and none of the profiles measured
     * got slower (docs/fast-solver.md). */
    const double alpha = 0.8;
    int have_centre = 0;
    double best_bound = -INFINITY;
    for (;;) {
        int rc = dw_round_allowed(w, step, err);
        if (rc)
            return rc;
        rc = solve_master(w, kind);
        if (rc)
            return tf_fail(err, rc == TF_ENOMEM ? TF_ENOMEM : TF_ESOLVER,
                           "fast solver: master LP %s while minimising %s",
                           rc == TF_ENOMEM ? "out of memory" : "not solved (infeasible)", step);
        double nu = w->nu_sigma[0], sigma = w->nu_sigma[1];
        double tol = 1e-11 * fmax(1.0, fabs(w->master_objective));
        if (w->master_objective - best_bound <= tol) /* the centre's bound proves it */
            return proof_trusted(w, w->dual_centre, step, err);
        if (w->slack_used <= w->ratio_eps &&
            w->master_objective - w->slack_cost - w->floor <=
                FLOOR_TOL * fmax(1.0, fabs(w->master_objective)))
            return 0; /* so does the floor, for a point whose slack is round-off */
        if (slack_settled(w))
            return 0; /* the penalty is too low: dw_run_bounded raises it */
        memcpy(w->cost_master, w->cost_r, (size_t)g->n * sizeof *w->cost_r);
        int smoothed = 0;
        if (have_centre) {
            for (int c = 0; c < w->n_caps; c++)
                w->dual_smooth[c] = alpha * w->dual_centre[c] + (1.0 - alpha) * w->dual[c];
            set_cap_costs(w, kind, w->dual_smooth);
            smoothed = 1;
        } else {
            memcpy(w->dual_smooth, w->dual, (size_t)w->n_caps * sizeof *w->dual);
        }
        for (;;) {
            double value;
            /* The master's own duals can be far from the last ones priced. */
            rc = price(w, nu > 0.0 ? nu : 0.0,
                       kind == OBJECTIVE_T && !smoothed ? LAST_OR_GUESS : FROM_LAST_TREE, &value);
            if (rc)
                return tf_fail(err, rc == TF_ENOMEM ? TF_ENOMEM : TF_ESOLVER,
                               "fast solver: network simplex failed while minimising %s", step);
            if (kind == OBJECTIVE_T)
                relax_point(w);
            if (nu >= 0.0) {
                /* Lagrangian bound at the duals priced: value + sum y_c b_c
                 * (with nu < 0 the pricing was clipped and bounds nothing). */
                double bound = value;
                for (int c = 0; c < w->n_caps; c++)
                    bound += w->dual_smooth[c] * w->cap_value[c];
                if (bound > best_bound) {
                    best_bound = bound;
                    memcpy(w->dual_centre, w->dual_smooth, (size_t)w->n_caps * sizeof *w->dual);
                    have_centre = 1;
                }
            }
            /* The point's reduced cost at the master's duals. */
            double reduced = nu * w->point_T - sigma;
            for (int j = 0; j < g->k; j++)
                reduced += w->cost_master[g->freezable[j]] * w->point_r[j];
            /* A point the master already has cannot improve it, whatever
             * its reduced cost within the pricing's round-off: at a penalty
             * of 1e6, a column already in the master came back at -2.5e-8
             * (round-off 6.7e-6) every round, and Interleaved1F1B with 12
             * ranks x 3 stages and 2,592 actions added it for thousands of
             * rounds. */
            double noise = fmax(1e3 * tol, pricing_noise(w, w->dual));
            if (reduced < -tol && !(reduced >= -noise && point_is_column(w)))
                break; /* it prices out: add it */
            if (!smoothed) {
                /* Nothing prices out at the master's duals: they prove it. */
                memcpy(w->dual_centre, w->dual, (size_t)w->n_caps * sizeof *w->dual);
                return proof_trusted(w, w->dual, step, err);
            }
            /* Mispricing: the smoothed duals found nothing; price at the
             * master's own duals this round. */
            memcpy(w->cost_r, w->cost_master, (size_t)g->n * sizeof *w->cost_r);
            memcpy(w->dual_smooth, w->dual, (size_t)w->n_caps * sizeof *w->dual);
            smoothed = 0;
        }
        if ((rc = add_point_column(w)))
            return tf_fail(err, rc, "out of memory");
    }
}

static void dw_free(dw_state *w)
{
    tf_nsx_free(&w->nsx);
    free(w->demand);
    free(w->tree_arc);
    free(w->alt_arc);
    free(w->walk_tree);
    free(w->fastest_tree);
    free(w->duration);
    free(w->finish);
    free(w->late);
    free(w->cost_r);
    free(w->cost_master);
    free(w->dual_centre);
    free(w->proof_lambda);
    free(w->dual_smooth);
    free(w->point_r);
    free(w->cap_stage);
    free(w->cap_count);
    free(w->cap_value);
    free(w->cap_of_stage);
    free(w->col_r);
    free(w->col_cap);
    free(w->col_T);
    free(w->col_sum);
    free(w->alpha);
    free(w->dual);
    free(w->basis);
    tf_master_inverse_free(&w->kept);
    memset(w, 0, sizeof *w);
}

/* The coupling rows: one per stage with freezable actions and a cap below 1. */
static int master_init(dw_state *w, const double *cap)
{
    const fast_net *g = w->g;
    size_t stages = (size_t)g->stages + 1;
    w->cap_stage = calloc(stages, sizeof *w->cap_stage);
    w->cap_count = calloc(stages, sizeof *w->cap_count);
    w->cap_value = calloc(stages, sizeof *w->cap_value);
    w->cap_of_stage = malloc(stages * sizeof *w->cap_of_stage);
    if (!w->cap_stage || !w->cap_count || !w->cap_value || !w->cap_of_stage)
        return TF_ENOMEM;
    for (int st = 0; st < g->stages; st++)
        w->cap_of_stage[st] = -1;
    double *count = w->cap_value; /* counts per stage first */
    for (int i = 0; i < g->k; i++)
        count[w->s->actions[g->freezable[i]].stage] += 1.0;
    int rows = 0;
    for (int st = 0; st < g->stages; st++)
        if (count[st] > 0.0 && cap[st] < 1.0) {
            w->cap_stage[rows] = st;
            w->cap_count[rows] = count[st];
            w->cap_of_stage[st] = rows++;
        }
    w->n_caps = rows;
    for (int i = 0; i < rows; i++)
        w->cap_value[i] = cap[w->cap_stage[i]] > 0.0 ? cap[w->cap_stage[i]] : 0.0;
    return 0;
}

/* Tells the pricing that arc lengths changed: its potentials must be
 * recomputed, and the fastest tree kept may no longer be dual feasible. */
static void lengths_changed(dw_state *w)
{
    tf_nsx_lengths_changed(&w->nsx);
    w->fastest_T = INFINITY;
}

/* T <= bound_ms: the length of the network's arc T -> O. */
static void set_makespan_bound(dw_state *w, double bound_ms)
{
    w->g->len[w->g->bound_arc] = -bound_ms;
    lengths_changed(w);
}

/* Moves the bound T <= bound_ms from the master into the network (arc
 * T -> O), for the stages after the first.  A master row bounding T would
 * let its dual grow without limit (the master is degenerate at T*), and a
 * huge price on T drowns the pricing's reduced costs in round-off; inside
 * the network the bound is just another difference constraint.  Columns
 * slower than the bound leave the master; the first stage's optimal
 * combination, a point of X that meets the bound and the caps, enters so
 * the master stays feasible. */
static int fix_makespan(dw_state *w, double bound_ms)
{
    const int k = w->g->k;
    double T = 0.0;
    memset(w->point_r, 0, (size_t)k * sizeof *w->point_r);
    for (int j = 0; j < w->cols; j++) {
        if (w->alpha[j] == 0.0)
            continue;
        T += w->alpha[j] * w->col_T[j];
        const double *r = column_r(w, j);
        for (int i = 0; i < k; i++)
            w->point_r[i] += w->alpha[j] * r[i];
    }
    w->point_T = T;
    int kept = 0;
    for (int j = 0; j < w->cols; j++) {
        if (w->col_T[j] > bound_ms)
            continue;
        if (kept != j) {
            memmove(w->col_r + (size_t)kept * (size_t)k, column_r(w, j),
                    (size_t)k * sizeof *w->col_r);
            memmove(w->col_cap + (size_t)kept * (size_t)w->n_caps,
                    w->col_cap + (size_t)j * (size_t)w->n_caps,
                    (size_t)w->n_caps * sizeof *w->col_cap);
            w->col_T[kept] = w->col_T[j];
            w->col_sum[kept] = w->col_sum[j];
        }
        w->alpha[kept++] = 0.0;
    }
    w->cols = kept;
    w->have_basis = 0;
    set_makespan_bound(w, bound_ms);
    w->makespan_fixed = 1;
    return add_point_column(w);
}

/* Column generation for a stage whose predecessor's optimum is bound.  Such
 * a stage has no interior point (the bound is the least value the caps
 * allow), so the optimal duals of its cap rows form an unbounded set: any
 * multiple of the previous stage's certificate can be added to them.  The
 * master drifts along that ray (its duals reached 1e12 on Interleaved1F1B,
 * 4 ranks x 64 microbatches) until the pricing's values drown in round-off
 * and the stage stops at a wrong answer.  Slack on the cap rows at a cost
 * of `penalty` per unit bounds every cap dual by the penalty; the relaxed
 * LP's optimum is the true one as soon as the penalty exceeds the smallest
 * optimal dual, which shows as no slack in the answer, so the penalty grows
 * until the answer uses none: no more than the ratios' own round-off
 * (ratio_eps, at least 1e-12 of a mean ratio).  Below that the slack is
 * round-off, which no penalty removes: at 1e-14 a tie broken differently
 * once pushed the penalty to 7e10, where the master's tableau no longer
 * converged; and with durations six orders of magnitude apart the ratios'
 * round-off alone is about 1e-11, so a threshold of 1e-12 drove the
 * penalty to 7e10, where the pricing drowned in it: wrong plans, or 20,000
 * rounds of noise (docs/fast-solver.md).
 *
 * The penalty starts at 256: the benchmark profiles all needed at least
 * that, and each smaller penalty cost a round of column generation (1F1B
 * with 32 ranks and 8,192 actions: 636 pricings from 1, 455 from 256, for
 * the same optimum to 1e-10). */
static int dw_run_bounded(dw_state *w, int kind, const char *step, tf_error *err)
{
    w->may_give_up = 1;
    for (w->penalty = 256.0; w->penalty <= 1e12; w->penalty *= 16.0) {
        int rc = dw_run(w, kind, step, err);
        if (rc || w->slack_used <= w->ratio_eps) {
            w->may_give_up = 0;
            return rc;
        }
        if (w->slack_rounds >= SLACK_SETTLED_ROUNDS)
            w->may_give_up = 0;
    }
    return tf_fail(err, TF_ESOLVER,
                   "fast solver: the master still relaxes a cap by %.3g at a penalty of 1e12 "
                   "while minimising %s",
                   w->slack_used, step);
}

/* The slope of t at the current ratio bound z, right after dw_run has
 * proved t(z): -sum_u (max_u - min_u) f_u, with f the optimal flow on the
 * arcs a_u -> b_u when pricing at the duals that proved it.  Those duals
 * are feasible for every z, so the line through (z, bound) with this slope
 * lies below t (t is convex); *bound is their Lagrangian bound on t(z).
 * Returns 0 or a TF_E* code. */
static int ratio_bound_slope(dw_state *w, double *slope, double *bound, tf_error *err)
{
    const fast_net *g = w->g;
    set_cap_costs(w, OBJECTIVE_T, w->dual_centre);
    double value;
    int rc = price(w, w->nu_sigma[0], FROM_LAST_TREE, &value);
    if (rc)
        return tf_fail(err, rc == TF_ENOMEM ? TF_ENOMEM : TF_ESOLVER,
                       "fast solver: network simplex failed while minimising the largest "
                       "freeze ratio");
    *slope = 0.0;
    for (int j = 0; j < g->k; j++) {
        int u = g->freezable[j];
        *slope -= g->span[u] * w->nsx.flow[g->short_arc[u]];
    }
    *bound = value;
    for (int c = 0; c < w->n_caps; c++)
        *bound += w->dual_centre[c] * w->cap_value[c];
    return 0;
}

/* A stage c with its price lambda_c, for total_ratio_floor's order. */
typedef struct priced_cap {
    double per_price; /* count_c / lambda_c */
    double freeze;    /* count_c cap_c */
} priced_cap;

static int by_per_price(const void *a, const void *b)
{
    double x = ((const priced_cap *)a)->per_price, y = ((const priced_cap *)b)->per_price;
    return (x > y) - (x < y);
}

/* A lower bound on the total-ratio stage's objective (sum r / k) over the
 * points of X with makespan at most bound_ms, from the batch-time stage's
 * proof: there nu T <= nu bound_ms, so sum_c lambda_c (cap_c - mean_c) <=
 * gap = nu bound_ms - L.  A stage with lambda_c > 0 is then at most
 * gap / lambda_c below its cap, and any set S of such stages gives up at
 * most gap max_S (count_c / lambda_c) of freezing in all; ratios elsewhere
 * are >= 0.  The best S is a prefix in order of count_c / lambda_c.  The
 * gap gets 1e-12 of L for the pricing's round-off, so a price that is only
 * round-off contributes nothing.
 *
 * When every stage's cap binds at a positive price, the bound is the first
 * column's value (the batch-time optimum fills every cap) less that gap's
 * share, and within FLOOR_TOL of it the stage ends at once: 1F1B with 64
 * ranks and 16 microbatches spent more than 1,000 rounds proving it, and
 * did not finish in 90 s.  Returns -INFINITY only when out of memory. */
static double total_ratio_floor(const dw_state *w, double bound_ms)
{
    priced_cap *c = malloc(((size_t)w->n_caps + 1) * sizeof *c);
    if (!c)
        return -INFINITY;
    int n = 0;
    for (int i = 0; i < w->n_caps; i++)
        if (w->proof_lambda[i] > 0.0)
            c[n++] = (priced_cap){w->cap_count[i] / w->proof_lambda[i],
                                  w->cap_count[i] * w->cap_value[i]};
    qsort(c, (size_t)n, sizeof *c, by_per_price);
    double gap = fmax(0.0, w->proof_nu * bound_ms - w->proof_bound) +
                 1e-12 * fmax(1.0, fabs(w->proof_bound));
    double freeze = 0.0, best = 0.0;
    for (int i = 0; i < n; i++) {
        freeze += c[i].freeze;
        best = fmax(best, freeze - gap * c[i].per_price);
    }
    free(c);
    return best / w->g->k;
}

/* Keeps the batch-time stage's proof (dual_centre, just after dw_run) with
 * its Lagrangian bound, for total_ratio_floor.  A negative price of T
 * (round-off) or a bound that is not finite proves nothing about points
 * with a smaller T: the prices are then kept at 0, and the floor is 0.
 * Returns 0 or a TF_E* code. */
static int keep_batch_proof(dw_state *w, tf_error *err)
{
    int rc = ratio_bound_slope(w, &w->proof_slope, &w->proof_bound, err);
    if (rc)
        return rc;
    w->proof_nu = w->nu_sigma[0];
    int usable = w->proof_nu >= 0.0 && isfinite(w->proof_bound);
    for (int c = 0; c < w->n_caps; c++)
        w->proof_lambda[c] = usable ? fmax(0.0, -w->dual_centre[c]) : 0.0;
    return 0;
}

/* Leaves the pricing's tree at a point whose makespan meets the bound that
 * the next stage puts on it, so that the stage's first pricing starts from
 * a dual feasible tree (every arc's reduced cost, the new arc T -> O's
 * included, non-negative) and needs dual pivots only.  The last pricing,
 * at the prices that proved the batch time, can end anywhere on its
 * optimal face, and with every microbatch alike (stage-level times) it
 * ended at the face's slowest point: 1F1B with 8 ranks and 32,768 actions
 * (bench-solvers --stage-times), T 126,583 ms against the bound 85,160;
 * the next pricing then took 179,402 primal pivots (4.4 s of the run's
 * 4.8 s), and 721,136 at 131,072 actions (95 s of 100 s).  A larger price
 * on T never gives a longer optimal T, and the face at the proof's prices
 * holds the points that the master combines into T*, so pricing again with
 * T's price raised reaches T <= T*.  The raise starts at 1e-6 and grows
 * 100-fold while the bound fails, because a larger one moves the tree
 * further than needed (1F1B with 131,072 per-action times: the bounded
 * stage's first pricing listed 5.3 M nodes after 1e-9, which was below the
 * pricing's flow tolerance and moved nothing, 6.5 M after 1e-6, 30 M after
 * 1e-3 and 1,065 M after 0.1).
 *
 * The move is a walk across the face, short with per-action times (4 to
 * 166 dual pivots) but long with stage-level ones (28,638 dual pivots,
 * 4.3 s, at 131,072 actions), so each raise gets WALK_BUDGET.  Past it the
 * start is the tree of the fastest point priced instead, which meets any
 * bound the caps allow (the first pricing's point freezes whatever is free
 * to freeze): the bounded pricing from there takes about as long as from
 * a raised tree with stage-level times, and longer with per-action ones
 * (docs/fast-solver.md).  None of this changes what the next pricing
 * solves, only where it starts; if no tree fits, it starts afresh. */
static void price_within_bound(dw_state *w, double bound)
{
    const double nu = w->nu_sigma[0];
    if (w->fresh_pricing || !(nu > 0.0))
        return;
    set_cap_costs(w, OBJECTIVE_T, w->dual_centre);
    for (double raise = 1e-6; raise <= 1.0 && w->nsx.pi[w->g->node_T] > bound; raise *= 100.0) {
        double value;
        if (price(w, nu * (1.0 + raise), WITHIN_BUDGET, &value))
            break;
    }
    if (!w->fresh_pricing && w->nsx.pi[w->g->node_T] <= bound)
        return;
    if (w->fastest_T <= bound)
        w->fresh_pricing = tf_nsx_load_tree(&w->nsx, w->fastest_tree) != 0;
}

/* Minimises the total ratio with the makespan bound at `optimum` (scaled).
 * The bound is the exact optimum; only if round-off then leaves no feasible
 * point (the network reports a positive cycle) is it relaxed, by 1e-12 and
 * at most 1e-9 relative (freeze_lpsolve.c relaxes by 1e-9 at once). */
static int least_total_ratio(dw_state *w, double optimum, tf_error *err)
{
    static const double slacks[] = {0.0, 1e-12, 1e-11, 1e-10, 1e-9};
    const int tries = (int)(sizeof slacks / sizeof slacks[0]);
    int rc = 0;
    for (int t = 0; t < tries; t++) {
        double bound = optimum + slacks[t] * fmax(1.0, fabs(optimum));
        if (t == 0) {
            price_within_bound(w, bound * w->scale);
            if ((rc = fix_makespan(w, bound * w->scale)))
                return tf_fail(err, rc, "out of memory");
        }
        set_makespan_bound(w, bound * w->scale);
        w->floor = total_ratio_floor(w, bound * w->scale);
        if (w->floor == -INFINITY)
            return tf_fail(err, TF_ENOMEM, "out of memory");
        rc = dw_run_bounded(w, OBJECTIVE_SUM, "the total freeze ratio", err);
        w->floor = -INFINITY;
        /* A proof lost in round-off (proof_trusted) is not a bound that is
         * too tight: a looser bound would only give a different plan (on
         * the fuzzed GPipe profile of regressions/, 1e-6 less freezing at a
         * batch time 4e-11 longer). */
        if (rc != TF_ESOLVER || w->proof_noisy)
            break;
    }
    return rc;
}

/* Bounds every ratio by z: the arc a_u -> b_u gets length max_u - z span_u
 * (exactly min_u at z = 1).  The next pricing starts afresh, because the old
 * tree's potentials no longer fit the new lengths. */
static void set_ratio_bound(dw_state *w, double z)
{
    fast_net *g = w->g;
    for (int j = 0; j < g->k; j++) {
        int u = g->freezable[j];
        g->len[g->short_arc[u]] = z >= 1.0 ? w->min_ms[u] : w->max_ms[u] - z * g->span[u];
    }
    lengths_changed(w);
    w->fresh_pricing = 1;
}

/* Spread's second stage: the least z such that t(z), the least makespan
 * (scaled) with every ratio at most z, is still the optimum best_t = t(1).
 * t is convex, piecewise linear and non-increasing in z (an LP's value as a
 * function of its right-hand side).
 *
 * First the slope g of t at z = 1, from the first stage's own proof: with
 * L its Lagrangian bound, t(z) >= L + |g| (1 - z), so t(z) > best_t for
 * every z < 1 - (best_t - L) / |g|.  When that is within 1e-9 of 1 (the
 * plan's snapping tolerance), z* = 1 without another solve.  That holds on
 * every benchmark profile (some action there must be frozen whole), where
 * Newton's method used to take 5-7 steps, each a first stage of its own.
 * best_t - L counts as at least 1e-14 relative, so a slope that is only
 * round-off never passes.
 *
 * Otherwise Newton's method from z = 0 never passes the answer and reaches
 * it in finitely many steps: each step solves the makespan stage at z and
 * moves to where the tangent there meets best_t.  Points with a ratio above
 * z leave the master, so it restarts from the unfrozen point (which every z
 * admits); a point kept for one z stays valid for larger z.  On success the
 * network keeps the bound z*. */
static int min_largest_ratio(dw_state *w, double best_t, double unfrozen_T, tf_error *err)
{
    const fast_net *g = w->g;
    const char *step = "the largest freeze ratio";
    /* The slope at z = 1 and its bound: the batch-time proof's, kept. */
    double slope = w->proof_slope, bound = w->proof_bound;
    int rc;
    double proof_gap = fmax(best_t - bound, 1e-14 * fmax(1.0, best_t));
    if (slope < 0.0 && proof_gap / -slope <= 1e-9)
        return 0; /* z* = 1: the network's arcs already say r_u <= 1 */
    w->cols = 0;
    w->have_basis = 0;
    memset(w->point_r, 0, (size_t)g->k * sizeof *w->point_r);
    w->point_T = unfrozen_T;
    if ((rc = add_point_column(w)))
        return tf_fail(err, rc, "out of memory");
    double z = 0.0;
    for (int newton = 0; newton < 200; newton++) {
        set_ratio_bound(w, z);
        if ((rc = dw_run(w, OBJECTIVE_T, step, err)))
            return rc;
        double gap = w->master_t - best_t;
        if (gap <= 1e-11 * fmax(1.0, best_t) || z >= 1.0)
            return 0;
        if ((rc = ratio_bound_slope(w, &slope, &bound, err)))
            return rc;
        /* t is convex and t(1) < t(z), so an exact slope is negative; a
         * step of 1 instead could pass z* and return a worse plan. */
        if (!(slope < 0.0))
            return tf_fail(err, TF_ESOLVER,
                           "fast solver: no descent at ratio bound %.17g while minimising %s",
                           z, step);
        double next = z + gap / -slope;
        if (!(next > z))
            next = nextafter(z, 2.0);
        z = next < 1.0 ? next : 1.0;
    }
    return tf_fail(err, TF_ESOLVER, "fast solver: no convergence after 200 Newton steps "
                                    "minimising %s", step);
}

/* Whether the plan keeps what its master promised: the makespan within the
 * bound (bound_ms, relaxed by at most 1e-9 in least_total_ratio, and 1e-9
 * more for snapping) and every cap (to the ratios' resolution, and 1e-9 for
 * snapping).  The master's values are only as good as its basis inverse:
 * before they were refined, a plan ran 1.2e-8 past its bound, and at cap
 * prices near 1e7 some master solves end on a drifted basis (fast-solver.md).
 * A plan that fails goes to lp_solve.  Returns 0 or TF_ESOLVER. */
static int plan_keeps_master(const dw_state *w, const tf_freeze_result *out, double bound_ms,
                             tf_error *err)
{
    if (out->makespan > bound_ms * (1.0 + 2e-9))
        return tf_fail(err, TF_ESOLVER,
                       "fast solver: the plan's makespan %.17g ms is past the %.17g ms its "
                       "master LP claims",
                       out->makespan, bound_ms);
    const int k = w->g->k;
    double *r = malloc(((size_t)k + (size_t)w->n_caps + 1) * sizeof *r), *mean = r + k;
    if (!r)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    for (int j = 0; j < k; j++)
        r[j] = out->ratio[w->g->freezable[j]];
    cap_means(w, r, mean);
    int rc = 0;
    for (int c = 0; c < w->n_caps && !rc; c++)
        if (mean[c] > w->cap_value[c] + 2e-9 + w->ratio_eps)
            rc = tf_fail(err, TF_ESOLVER,
                         "fast solver: the plan freezes stage %d at a mean ratio of %.17g, "
                         "past its cap %.17g",
                         w->cap_stage[c], mean[c], w->cap_value[c]);
    free(r);
    return rc;
}

/* The solve, for caps above 0 (tf_freeze_fast_run). */
static int fast_run(const tf_freeze_problem *p, const tf_freeze_limits *lim,
                    tf_freeze_result *out, tf_error *err)
{
    const tf_schedule *s = p->schedule;
    const tf_dag *g = p->dag;
    const double *max_ms = p->max_ms, *min_ms = p->min_ms;
    memset(out, 0, sizeof *out);
    double started = tf_now_seconds();
    const int n = s->n_actions;
    fast_net net;
    dw_state w;
    double best_T = INFINITY; /* the batch-time optimum, scaled */
    memset(&w, 0, sizeof w);
    int rc = net_build(s, g, max_ms, min_ms, &net);
    if (tf_freeze_result_alloc(out, n) || rc) {
        rc = rc == TF_EINVAL
                 ? tf_fail(err, TF_EINVAL, "the fast freeze model of %d actions came out "
                           "miscounted", n)
                 : tf_fail(err, TF_ENOMEM, "out of memory building the fast freeze model for "
                           "%d actions", n);
        goto done;
    }
    out->variables = net.nodes;
    out->constraints = net.arcs;
    if (net.k > 0) {
        w.g = &net;
        w.lim = lim;
        w.s = s;
        w.d = g;
        w.max_ms = max_ms;
        w.min_ms = min_ms;
        size_t nodes = (size_t)net.nodes + 1, nn = (size_t)n + 1;
        w.demand = malloc(nodes * sizeof *w.demand);
        w.tree_arc = malloc(nodes * sizeof *w.tree_arc);
        w.alt_arc = malloc(nodes * sizeof *w.alt_arc);
        w.walk_tree = malloc(nodes * sizeof *w.walk_tree);
        w.fastest_tree = malloc(nodes * sizeof *w.fastest_tree);
        w.fastest_T = INFINITY;
        w.duration = malloc(nn * sizeof *w.duration);
        w.finish = malloc(nn * sizeof *w.finish);
        w.late = malloc(nn * sizeof *w.late);
        w.cost_r = calloc(nn, sizeof *w.cost_r);
        w.cost_master = calloc(nn, sizeof *w.cost_master);
        w.dual_centre = calloc((size_t)s->stages + 1, sizeof *w.dual_centre);
        w.dual_smooth = calloc((size_t)s->stages + 1, sizeof *w.dual_smooth);
        w.proof_lambda = calloc((size_t)s->stages + 1, sizeof *w.proof_lambda);
        w.floor = -INFINITY;
        w.point_r = calloc((size_t)net.k + 1, sizeof *w.point_r);
        if (!w.demand || !w.tree_arc || !w.alt_arc || !w.walk_tree || !w.fastest_tree ||
            !w.duration || !w.finish || !w.late || !w.cost_r || !w.point_r || !w.cost_master ||
            !w.dual_centre || !w.dual_smooth || !w.proof_lambda ||
            tf_nsx_init(&w.nsx, net.nodes, net.arcs, net.tail, net.head, net.len) ||
            master_init(&w, p->cap)) {
            rc = tf_fail(err, TF_ENOMEM, "out of memory building the fast freeze model");
            goto done;
        }
        memcpy(w.duration, max_ms, (size_t)n * sizeof *w.duration);
        const double unfrozen_T = tf_dag_longest_path(g, max_ms, NULL);
        w.scale = fmax(1.0, unfrozen_T);
        w.ratio_eps = ratio_resolution(&net, w.scale);
        if ((rc = check_resolution(&net, w.ratio_eps, unfrozen_T, err)))
            goto done;
        /* The first column: nothing frozen, which meets every cap. */
        memset(w.point_r, 0, (size_t)net.k * sizeof *w.point_r);
        w.point_T = unfrozen_T;
        if ((rc = add_point_column(&w))) {
            rc = tf_fail(err, rc, "out of memory");
            goto done;
        }
        if ((rc = dw_run(&w, OBJECTIVE_T, "the batch time", err)))
            goto done;
        best_T = w.master_t;
        if ((rc = keep_batch_proof(&w, err)))
            goto done;
        if (p->objective == TF_OBJECTIVE_SPREAD) {
            /* t(z*) meets best_T within the stages' 1e-11; the bound stays
             * best_T, which least_total_ratio relaxes only if it must. */
            if ((rc = min_largest_ratio(&w, best_T, unfrozen_T, err)))
                goto done;
        }
        if ((rc = least_total_ratio(&w, best_T, err)))
            goto done;
        /* The plan: the master's convex combination of the points. */
        for (int j = 0; j < w.cols; j++) {
            if (w.alpha[j] == 0.0)
                continue;
            const double *r = column_r(&w, j);
            for (int i = 0; i < net.k; i++)
                out->ratio[net.freezable[i]] += w.alpha[j] * r[i];
        }
    }
    out->makespan = tf_freeze_apply(p, out);
    if (net.k > 0 && (rc = plan_keeps_master(&w, out, best_T * w.scale, err)))
        goto done;
    out->solves = w.pricings;
    snprintf(out->status, sizeof out->status, "optimal");
    snprintf(out->solver, sizeof out->solver, "fast");

done:
    dw_free(&w);
    net_free(&net);
    out->seconds = tf_now_seconds() - started;
    if (rc)
        tf_freeze_result_free(out);
    return rc;
}

int tf_freeze_fast_run(const tf_freeze_problem *p, const tf_freeze_limits *lim,
                       tf_freeze_result *out, tf_error *err)
{
    const tf_schedule *s = p->schedule;
    /* Memory rows are not differences of two times, so they do not fit
     * the network: lp_solve takes them (the dispatcher falls back). */
    if (tf_freeze_memory_binds(p)) {
        memset(out, 0, sizeof *out);
        return tf_fail(err, TF_ESOLVER, "fast: a binding memory limit is solved by lp_solve");
    }
    int zero = 0;
    for (int st = 0; st < s->stages; st++)
        zero |= p->cap[st] == 0.0;
    if (!zero)
        return fast_run(p, lim, out, err);
    /* A cap row of exactly 0 leaves the master LP infeasible (found by
     * fuzz_profile): such a stage freezes nothing, so its actions go in as
     * fixed (frozen time = full time) and its row as no cap at all. */
    const int n = s->n_actions;
    double *fixed_min = malloc(((size_t)n + 1) * sizeof *fixed_min);
    double *open_cap = malloc(((size_t)s->stages + 1) * sizeof *open_cap);
    int rc;
    if (!fixed_min || !open_cap) {
        memset(out, 0, sizeof *out);
        rc = tf_fail(err, TF_ENOMEM, "out of memory building the fast freeze model");
    } else {
        for (int i = 0; i < n; i++)
            fixed_min[i] = p->cap[s->actions[i].stage] == 0.0 ? p->max_ms[i] : p->min_ms[i];
        for (int st = 0; st < s->stages; st++)
            open_cap[st] = p->cap[st] == 0.0 ? 1.0 : p->cap[st];
        tf_freeze_problem opened = *p;
        opened.min_ms = fixed_min;
        opened.cap = open_cap;
        rc = fast_run(&opened, lim, out, err);
    }
    free(fixed_min);
    free(open_cap);
    return rc;
}
