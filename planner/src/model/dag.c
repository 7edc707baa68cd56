/* dag.c - dependency graph of a schedule, longest and critical paths. */
#include "tf/dag.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct edge {
    int from, to;
    unsigned char rule;
} edge;

static int compare_edges(const void *a, const void *b)
{
    const edge *x = a, *y = b;
    if (x->from != y->from)
        return x->from < y->from ? -1 : 1;
    return (x->to > y->to) - (x->to < y->to);
}

/* The backward action of (stage, microbatch) that other stages wait for:
 * B where the stage runs full backwards, I where it splits them. */

static void push_edge(edge *edges, int *n, int from, int to, unsigned char rule)
{
    if (from < 0 || to < 0)
        return;
    edges[*n].from = from;
    edges[*n].to = to;
    edges[*n].rule = rule;
    (*n)++;
}

/* Describes one cycle among the nodes Kahn's algorithm could not order.
 * Every such node has a predecessor that is also unordered, so walking
 * predecessors must revisit a node; the revisited stretch is a cycle. */
static int report_cycle(const tf_schedule *s, const edge *edges, int n_edges,
                        const int *indegree, tf_error *err)
{
    int n = s->n_actions;
    int *pred = malloc((size_t)n * sizeof *pred);
    int *visit = malloc((size_t)n * sizeof *visit);
    if (!pred || !visit) {
        free(pred);
        free(visit);
        return tf_fail(err, TF_ECYCLE, "the schedule's order deadlocks (a dependency cycle)");
    }
    for (int i = 0; i < n; i++) {
        pred[i] = -1;
        visit[i] = -1;
    }
    int start = -1;
    for (int e = 0; e < n_edges; e++)
        if (indegree[edges[e].from] > 0 && indegree[edges[e].to] > 0) {
            pred[edges[e].to] = edges[e].from;
            start = edges[e].to;
        }
    int steps = 0, v = start;
    while (v >= 0 && visit[v] < 0) {
        visit[v] = steps++;
        v = pred[v];
    }
    /* v starts the cycle; walking pred from v lists it backwards. */
    int len = v >= 0 ? steps - visit[v] : 0;
    int *cycle = malloc(((size_t)len + 1) * sizeof *cycle);
    char text[700] = "";
    if (cycle && len > 0) {
        int u = v;
        for (int k = len - 1; k >= 0; k--) {
            cycle[k] = u;
            u = pred[u];
        }
        size_t used = 0;
        int shown = len <= 16 ? len : 16;
        for (int k = 0; k <= shown && used < sizeof text - 40; k++) {
            char buf[32];
            const tf_action *a = &s->actions[cycle[k % len]];
            used += (size_t)snprintf(text + used, sizeof text - used, "%s%s(rank %d)",
                                     k ? " -> " : "", tf_action_format(a, buf), a->rank);
            if (k == shown - 1 && shown < len) {
                used += (size_t)snprintf(text + used, sizeof text - used, " -> ... (%d more)",
                                         len - shown);
                break;
            }
        }
    }
    free(cycle);
    free(pred);
    free(visit);
    return tf_fail(err, TF_ECYCLE,
                   "the schedule's order deadlocks: these actions wait on each other in a "
                   "cycle: %s",
                   text);
}

/* Does (type, stage) run its microbatches in s's order from the last down,
 * at least two of them? */
static int runs_descending(const tf_schedule *s, const int *index, tf_action_type type,
                           int stage)
{
    int pairs = 0;
    for (int m = 0; m + 1 < s->microbatches; m++) {
        int a = tf_schedule_lookup(s, index, type, stage, m);
        int b = tf_schedule_lookup(s, index, type, stage, m + 1);
        if (a < 0 || b < 0)
            continue;
        if (b > a)
            return 0;
        pairs++;
    }
    return pairs > 0;
}

/* reversed[type * stages + stage] = 1 where rule 2 runs m+1 -> m: a
 * backward type of a stage whose forwards do not run descending, while
 * those backwards do (LoopedBFS).  An order that runs the forwards of a
 * stage backwards too is left to rule 2 as the reference has it. */
static void mark_reversed(const tf_schedule *s, const int *index, unsigned char *reversed)
{
    memset(reversed, 0, (size_t)TF_ACTION_TYPES * (size_t)s->stages);
    for (int st = 0; st < s->stages; st++) {
        if (runs_descending(s, index, TF_ACT_F, st))
            continue;
        for (int t = TF_ACT_B; t <= TF_ACT_W; t++)
            reversed[(size_t)t * s->stages + st] = (unsigned char)runs_descending(
                s, index, (tf_action_type)t, st);
    }
}

/* The edges the five rules of tf/dag.h give, duplicates included;
 * index finds actions by key, reversed (mark_reversed) says where rule 2
 * runs downwards.  Returns the count. */
static int collect_edges(const tf_schedule *s, const int *index, const unsigned char *reversed,
                         edge *edges)
{
    int n_edges = 0;
    for (int r = 0; r < s->ranks; r++)
        for (int i = s->rank_offset[r]; i + 1 < s->rank_offset[r + 1]; i++)
            push_edge(edges, &n_edges, i, i + 1, TF_EDGE_RANK_ORDER);
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        int m = a->microbatch, st = a->stage;
        /* An R waits for its forward and its rank, nothing else: it may
         * run in any wait before its backward (tf/memory.h). */
        int next = a->type == TF_ACT_R ? -1 : tf_schedule_lookup(s, index, a->type, st, m + 1);
        if (reversed[(size_t)a->type * s->stages + st])
            push_edge(edges, &n_edges, next, i, TF_EDGE_MICROBATCH);
        else
            push_edge(edges, &n_edges, i, next, TF_EDGE_MICROBATCH);
        switch (a->type) {
        case TF_ACT_F:
            push_edge(edges, &n_edges, i, tf_schedule_backward_of(s, index, st, m),
                      TF_EDGE_BACKWARD_AFTER_FORWARD);
            push_edge(edges, &n_edges, i, tf_schedule_lookup(s, index, TF_ACT_R, st, m),
                      TF_EDGE_BACKWARD_AFTER_FORWARD);
            push_edge(edges, &n_edges, i, tf_schedule_lookup(s, index, TF_ACT_F, st + 1, m),
                      TF_EDGE_FORWARD_NEXT_STAGE);
            break;
        case TF_ACT_I:
            push_edge(edges, &n_edges, i, tf_schedule_lookup(s, index, TF_ACT_W, st, m),
                      TF_EDGE_BACKWARD_AFTER_FORWARD);
            /* I passes the input gradient on, like B. */
            push_edge(edges, &n_edges, i, tf_schedule_backward_of(s, index, st - 1, m),
                      TF_EDGE_BACKWARD_PREV_STAGE);
            break;
        case TF_ACT_B:
            push_edge(edges, &n_edges, i, tf_schedule_backward_of(s, index, st - 1, m),
                      TF_EDGE_BACKWARD_PREV_STAGE);
            break;
        case TF_ACT_W:
        case TF_ACT_R: break;
        }
    }
    return n_edges;
}

/* Every pair of s is its two actions back to back on one rank, forward
 * first: the rest of the planner relies on it. */
static int check_pairs(const tf_schedule *s, tf_error *err)
{
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        int ok = 1;
        if (a->pair == TF_PAIR_FIRST)
            ok = i + 1 < s->n_actions && s->actions[i + 1].pair == TF_PAIR_SECOND &&
                 s->actions[i + 1].rank == a->rank && a->type == TF_ACT_F;
        else if (a->pair == TF_PAIR_SECOND)
            ok = i > 0 && s->actions[i - 1].pair == TF_PAIR_FIRST && a->type != TF_ACT_F;
        else
            ok = a->pair == TF_PAIR_NONE;
        if (!ok) {
            char cell[32];
            return tf_fail(err, TF_EINVAL,
                           "%s (rank %d) is marked as half of an overlapped pair, but the pair "
                           "is not a forward and a backward one after the other on one rank",
                           tf_action_format(a, cell), a->rank);
        }
    }
    return 0;
}

/* Makes each overlapped pair one node (dag.h): an edge into the second
 * action enters the first, an edge out of the first leaves the second. */
static void join_pairs(const tf_schedule *s, edge *edges, int n_edges)
{
    for (int e = 0; e < n_edges; e++) {
        edge *x = &edges[e];
        int from = x->from, to = x->to;
        if (s->actions[to].pair == TF_PAIR_SECOND && from != to - 1)
            to--;
        if (s->actions[from].pair == TF_PAIR_FIRST && x->to != from + 1)
            from++;
        if (from != x->from || to != x->to || s->actions[from].pair == TF_PAIR_FIRST)
            x->rule |= TF_EDGE_PAIR;
        x->from = from;
        x->to = to;
    }
}

/* Sorts the edges and merges duplicates (one pair can come from several
 * rules).  Returns the count left. */
static int merge_edges(edge *edges, int n_edges)
{
    qsort(edges, (size_t)n_edges, sizeof *edges, compare_edges);
    int unique = 0;
    for (int e = 0; e < n_edges; e++) {
        if (unique > 0 && edges[unique - 1].from == edges[e].from &&
            edges[unique - 1].to == edges[e].to)
            edges[unique - 1].rule |= edges[e].rule;
        else
            edges[unique++] = edges[e];
    }
    return unique;
}

/* Fills out's CSR arrays from the sorted edges, with lag p2p_ms between
 * ranks, and counts each action's predecessors into indegree. */
static int fill_csr(const tf_schedule *s, const edge *edges, int n_edges, double p2p_ms,
                    tf_dag *out, int *indegree)
{
    const int n = s->n_actions;
    out->n = n;
    out->n_edges = n_edges;
    out->succ_offset = calloc((size_t)n + 1, sizeof *out->succ_offset);
    out->succ = malloc(((size_t)n_edges + 1) * sizeof *out->succ);
    out->lag = malloc(((size_t)n_edges + 1) * sizeof *out->lag);
    out->rule = malloc((size_t)n_edges + 1);
    out->topo = malloc(((size_t)n + 1) * sizeof *out->topo);
    if (!out->succ_offset || !out->succ || !out->lag || !out->rule || !out->topo)
        return TF_ENOMEM;
    for (int e = 0; e < n_edges; e++) {
        const edge *x = &edges[e];
        out->succ_offset[x->from + 1]++;
        out->succ[e] = x->to;
        out->lag[e] = s->actions[x->from].rank != s->actions[x->to].rank ? p2p_ms : 0.0;
        out->rule[e] = x->rule;
        indegree[x->to]++;
    }
    for (int i = 0; i < n; i++)
        out->succ_offset[i + 1] += out->succ_offset[i];
    return 0;
}

/* Kahn's algorithm into g->topo (which doubles as the queue); consumes
 * indegree.  Returns how many actions it ordered: g->n unless a cycle
 * holds the rest back. */
static int order_topologically(tf_dag *g, int *indegree)
{
    int head = 0, tail = 0;
    for (int i = 0; i < g->n; i++)
        if (indegree[i] == 0)
            g->topo[tail++] = i;
    while (head < tail) {
        int u = g->topo[head++];
        for (int e = g->succ_offset[u]; e < g->succ_offset[u + 1]; e++)
            if (--indegree[g->succ[e]] == 0)
                g->topo[tail++] = g->succ[e];
    }
    return tail;
}

int tf_dag_build(const tf_schedule *s, double p2p_ms, tf_dag *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    const int n = s->n_actions;
    int *index = tf_schedule_index(s);
    /* Each action adds at most one edge per rule: rank order, next
     * microbatch, backward after forward (or W after I), next stage, previous
     * stage. */
    size_t max_edges = (size_t)n * 5 + 1;
    edge *edges = malloc(max_edges * sizeof *edges);
    int *indegree = calloc((size_t)n + 1, sizeof *indegree);
    unsigned char *reversed = malloc((size_t)TF_ACTION_TYPES * s->stages + 1);
    int rc = check_pairs(s, err);
    if (rc)
        goto done;
    if (!index || !edges || !indegree || !reversed) {
        rc = tf_fail(err, TF_ENOMEM, "out of memory building the DAG of %d actions", n);
        goto done;
    }
    mark_reversed(s, index, reversed);
    int n_edges = collect_edges(s, index, reversed, edges);
    join_pairs(s, edges, n_edges);
    n_edges = merge_edges(edges, n_edges);
    if (fill_csr(s, edges, n_edges, p2p_ms, out, indegree))
        rc = tf_fail(err, TF_ENOMEM, "out of memory building the DAG of %d actions", n);
    else if (order_topologically(out, indegree) < n)
        rc = report_cycle(s, edges, n_edges, indegree, err);
done:
    free(index);
    free(edges);
    free(indegree);
    free(reversed);
    if (rc)
        tf_dag_free(out);
    return rc;
}

double tf_dag_longest_path(const tf_dag *g, const double *dur, double *start)
{
    double *es = start ? start : malloc(((size_t)g->n + 1) * sizeof *es);
    if (!es)
        return NAN;
    for (int i = 0; i < g->n; i++)
        es[i] = 0.0;
    double makespan = 0.0;
    for (int k = 0; k < g->n; k++) {
        int u = g->topo[k];
        double finish = es[u] + dur[u];
        if (finish > makespan)
            makespan = finish;
        for (int e = g->succ_offset[u]; e < g->succ_offset[u + 1]; e++) {
            int v = g->succ[e];
            if (finish + g->lag[e] > es[v])
                es[v] = finish + g->lag[e];
        }
    }
    if (!start)
        free(es);
    return makespan;
}

int tf_dag_critical(const tf_dag *g, const double *dur, unsigned char *critical)
{
    double *es = malloc(((size_t)g->n + 1) * sizeof *es);
    double *ls = malloc(((size_t)g->n + 1) * sizeof *ls);
    if (!es || !ls) {
        memset(critical, 0, (size_t)g->n);
        free(es);
        free(ls);
        return TF_ENOMEM;
    }
    double makespan = tf_dag_longest_path(g, dur, es);
    /* Latest start: walk the topological order backwards. */
    for (int k = g->n - 1; k >= 0; k--) {
        int u = g->topo[k];
        double latest_finish = makespan;
        for (int e = g->succ_offset[u]; e < g->succ_offset[u + 1]; e++) {
            double bound = ls[g->succ[e]] - g->lag[e];
            if (bound < latest_finish)
                latest_finish = bound;
        }
        ls[u] = latest_finish - dur[u];
    }
    double tol = 1e-9 * (makespan > 1.0 ? makespan : 1.0);
    for (int i = 0; i < g->n; i++)
        critical[i] = ls[i] - es[i] <= tol;
    free(es);
    free(ls);
    return 0;
}

void tf_dag_free(tf_dag *g)
{
    free(g->succ_offset);
    free(g->succ);
    free(g->lag);
    free(g->rule);
    free(g->topo);
    memset(g, 0, sizeof *g);
}
