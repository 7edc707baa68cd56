/* freeze_fast_nsx.c - primal network simplex on a spanning tree kept as
 * parent pointers plus a preorder thread (see freeze_fast_nsx.h).
 *
 * Arcs are uncapacitated, so a pivot only ever blocks on tree arcs whose
 * flow decreases around the cycle.  The subtree cut off by the leaving arc
 * is re-hung below the entering arc: its nodes are listed once from the
 * thread (preorder, contiguous), their parent pointers are reversed along
 * the stem, and the subtree's new preorder, assembled from blocks of that
 * list, is spliced in after its new parent.  That costs O(subtree) per
 * pivot, the same order as updating the subtree's potentials, which any
 * network simplex must do.
 */
#include "freeze_fast_nsx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tf/error.h"

int tf_nsx_init(tf_nsx *m, int nodes, int arcs, const int *tail, const int *head,
                const double *len)
{
    memset(m, 0, sizeof *m);
    m->nodes = nodes;
    m->arcs = arcs;
    m->tail = tail;
    m->head = head;
    m->len = len;
    size_t n = (size_t)nodes + 1, a = (size_t)arcs + 1;
    m->flow = calloc(a, sizeof *m->flow);
    m->pi = calloc(n, sizeof *m->pi);
    m->parent = calloc(n, sizeof *m->parent);
    m->pred = calloc(n, sizeof *m->pred);
    m->up = calloc(n, 1);
    m->in_tree = calloc(a, 1);
    m->depth = calloc(n, sizeof *m->depth);
    m->thread = calloc(n, sizeof *m->thread);
    m->rev_thread = calloc(n, sizeof *m->rev_thread);
    m->child = calloc(n, sizeof *m->child);
    m->sibling = calloc(n, sizeof *m->sibling);
    m->stack = calloc(n, sizeof *m->stack);
    m->order = calloc(n, sizeof *m->order);
    m->excess = calloc(n, sizeof *m->excess);
    m->mark = calloc(n, sizeof *m->mark);
    m->slot = calloc(n, sizeof *m->slot);
    m->negative = calloc(a, sizeof *m->negative);
    m->listed = calloc(a, 1);
    m->out_first = calloc(n + 1, sizeof *m->out_first);
    m->in_first = calloc(n + 1, sizeof *m->in_first);
    m->out_arc = calloc(a, sizeof *m->out_arc);
    m->in_arc = calloc(a, sizeof *m->in_arc);
    m->out_head = calloc(a, sizeof *m->out_head);
    m->in_tail = calloc(a, sizeof *m->in_tail);
    if (!m->excess || !m->mark || !m->slot || !m->negative || !m->listed || !m->out_first ||
        !m->in_first || !m->out_arc || !m->in_arc || !m->out_head || !m->in_tail) {
        tf_nsx_free(m);
        return TF_ENOMEM;
    }
    /* Arcs by tail and by head (CSR), for the dual simplex's ratio test. */
    for (int e = 0; e < arcs; e++) {
        m->out_first[tail[e] + 1]++;
        m->in_first[head[e] + 1]++;
    }
    for (int v = 0; v < nodes; v++) {
        m->out_first[v + 1] += m->out_first[v];
        m->in_first[v + 1] += m->in_first[v];
    }
    for (int e = 0; e < arcs; e++) {
        m->out_arc[m->out_first[tail[e]] + m->mark[tail[e]]++] = e;
    }
    memset(m->mark, 0, n * sizeof *m->mark);
    for (int e = 0; e < arcs; e++)
        m->in_arc[m->in_first[head[e]] + m->mark[head[e]]++] = e;
    memset(m->mark, 0, n * sizeof *m->mark);
    for (int p = 0; p < arcs; p++) {
        m->out_head[p] = head[m->out_arc[p]];
        m->in_tail[p] = tail[m->in_arc[p]];
    }
    if (!m->flow || !m->pi || !m->parent || !m->pred || !m->up || !m->in_tree || !m->depth ||
        !m->thread || !m->rev_thread || !m->child || !m->sibling || !m->stack || !m->order) {
        tf_nsx_free(m);
        return TF_ENOMEM;
    }
    return 0;
}


void tf_nsx_free(tf_nsx *m)
{
    free(m->flow);
    free(m->pi);
    free(m->parent);
    free(m->pred);
    free(m->up);
    free(m->in_tree);
    free(m->depth);
    free(m->thread);
    free(m->rev_thread);
    free(m->child);
    free(m->sibling);
    free(m->stack);
    free(m->order);
    free(m->excess);
    free(m->mark);
    free(m->slot);
    free(m->negative);
    free(m->listed);
    free(m->out_first);
    free(m->in_first);
    free(m->out_arc);
    free(m->in_arc);
    free(m->out_head);
    free(m->in_tail);
    memset(m, 0, sizeof *m);
}

/* Writes a preorder of the subtree under `top` (children from child/sibling)
 * into m->order, setting depth from top's.  Returns the number of nodes
 * listed. */
static int preorder(tf_nsx *m, int top)
{
    int count = 0, sp = 0;
    m->stack[sp++] = top;
    while (sp > 0) {
        int v = m->stack[--sp];
        m->order[count++] = v;
        if (v != top)
            m->depth[v] = m->depth[m->parent[v]] + 1;
        for (int c = m->child[v]; c >= 0; c = m->sibling[c])
            m->stack[sp++] = c;
    }
    return count;
}

/* Potential of v from its parent's, making its tree arc tight. */
static double tight_potential(const tf_nsx *m, int v)
{
    int a = m->pred[v];
    return m->up[v] ? m->pi[m->parent[v]] - m->len[a] : m->pi[m->parent[v]] + m->len[a];
}

/* Recomputes every potential from the tree in preorder, removing the
 * round-off that incremental updates accumulate. */
static void refresh_potentials(tf_nsx *m)
{
    m->pi[0] = 0.0;
    for (int v = m->thread[0]; v != 0; v = m->thread[v])
        m->pi[v] = tight_potential(m, v);
}

static int build_tree(tf_nsx *m, const double *b, const int *tree_arc, const int *alt_arc)
{
    const int n = m->nodes;
    for (int e = 0; e < m->arcs; e++) {
        m->flow[e] = 0.0;
        m->in_tree[e] = 0;
    }
    for (int v = 0; v < n; v++) {
        m->child[v] = -1;
        m->sibling[v] = -1;
    }
    m->parent[0] = -1;
    m->pred[0] = -1;
    for (int v = 1; v < n; v++) {
        int a = tree_arc[v];
        if (a < 0 || a >= m->arcs || (m->tail[a] != v && m->head[a] != v))
            return TF_EINVAL;
        m->up[v] = m->tail[a] == v;
        m->parent[v] = m->up[v] ? m->head[a] : m->tail[a];
        m->pred[v] = a;
        m->sibling[v] = m->child[m->parent[v]];
        m->child[m->parent[v]] = v;
    }
    m->depth[0] = 0;
    int count = preorder(m, 0);
    if (count != n)
        return TF_EINVAL; /* not spanning: the parent pointers have a cycle */
    /* Flows: the demand of each subtree crosses its tree arc, in reverse
     * preorder.  Where the given arc would carry negative flow (or zero
     * flow towards the root), its reverse twin alt_arc[v] is used. */
    double *demand = m->pi; /* scratch until the potentials are set */
    for (int k = 0; k < n; k++)
        demand[m->order[k]] = b[m->order[k]];
    for (int k = n - 1; k > 0; k--) {
        int v = m->order[k];
        double d = demand[v];
        demand[m->parent[v]] += d;
        if (alt_arc && alt_arc[v] >= 0 && (m->up[v] ? d >= 0.0 : d < 0.0)) {
            int a = alt_arc[v];
            if (m->tail[a] != m->head[m->pred[v]] || m->head[a] != m->tail[m->pred[v]])
                return TF_EINVAL;
            m->pred[v] = a;
            m->up[v] = !m->up[v];
        }
        double f = m->up[v] ? -d : d;
        if (f < 0.0)
            return TF_EINVAL;
        m->flow[m->pred[v]] = f;
        m->in_tree[m->pred[v]] = 1;
    }
    /* Thread: the preorder, circular through the root. */
    for (int k = 0; k < n; k++) {
        int v = m->order[k], w = m->order[(k + 1) % n];
        m->thread[v] = w;
        m->rev_thread[w] = v;
    }
    refresh_potentials(m);
    return 0;
}

static double reduced_cost(const tf_nsx *m, int e)
{
    return m->pi[m->head[e]] - m->pi[m->tail[e]] - m->len[e];
}

/* Block search (Grigoriadis): scan a block of arcs, take the most violated
 * in it; move on to the next block only when the block has none. */
static int find_entering(tf_nsx *m, double tol, int block)
{
    int arcs = m->arcs, scanned = 0, best = -1;
    double best_rc = -tol;
    int e = m->next_arc;
    while (scanned < arcs) {
        int end = scanned + block < arcs ? scanned + block : arcs;
        for (; scanned < end; scanned++) {
            if (!m->in_tree[e]) {
                double rc = reduced_cost(m, e);
                if (rc < best_rc) {
                    best_rc = rc;
                    best = e;
                }
            }
            if (++e == arcs)
                e = 0;
        }
        if (best >= 0)
            break;
    }
    m->next_arc = e;
    return best;
}

/* The node where the tree paths up from i and j meet. */
static int join_node(const tf_nsx *m, int i, int j)
{
    while (i != j) {
        if (m->depth[i] >= m->depth[j])
            i = m->parent[i];
        else
            j = m->parent[j];
    }
    return i;
}

/* During dual pivots: lists tree arc e if its flow is below -negative_tol
 * (the candidates for leaving). */
static void note_flow(tf_nsx *m, int e)
{
    if (m->collect_negative && m->flow[e] < -m->negative_tol && !m->listed[e]) {
        m->listed[e] = 1;
        m->negative[m->n_negative++] = e;
    }
}

/* Pushes delta around the cycle that non-tree arc e = (i -> j) closes:
 * along e, up from j to join, down from join to i. */
static void push_around_cycle(tf_nsx *m, int e, int join, double delta)
{
    const int i = m->tail[e], j = m->head[e];
    for (int w = i; w != join; w = m->parent[w]) {
        m->flow[m->pred[w]] += m->up[w] ? -delta : delta;
        note_flow(m, m->pred[w]);
    }
    for (int w = j; w != join; w = m->parent[w]) {
        m->flow[m->pred[w]] += m->up[w] ? delta : -delta;
        note_flow(m, m->pred[w]);
    }
    m->flow[e] += delta;
}

/* Lists the subtree under v (contiguous in the thread, v first) into
 * m->order, records each node's place in it in m->slot and marks it with a
 * fresh stamp.  Returns the node count.  This is the only walk along the
 * thread a pivot makes: the thread is a chain of dependent loads, so the
 * later passes read the array instead. */
static int list_subtree(tf_nsx *m, int v)
{
    const int stamp = ++m->stamp, top_depth = m->depth[v];
    int count = 0, w = v;
    do {
        m->order[count] = w;
        m->slot[w] = count++;
        m->mark[w] = stamp;
        w = m->thread[w];
    } while (w != 0 && m->depth[w] > top_depth);
    return count;
}

/* Swaps tree arc pred[leave] for e: the subtree under `leave`, listed by
 * list_subtree (count nodes), is re-hung from x, the end of e inside it (y
 * is e's other end), and its potentials shift so that e is tight.
 *
 * The stem s_0 = x, s_1 = parent(x), ..., s_k = leave reverses.  In the old
 * preorder each s_i's subtree is a block of the listing that contains
 * s_{i-1}'s block; the new preorder is s_0's block, then for i = 1..k the
 * part of s_i's block outside s_{i-1}'s (s_i and its other children), so
 * no depth-first search of the subtree is needed. */
static void rehang(tf_nsx *m, int e, int leave, int x, int y, int count)
{
    int leaving_arc = m->pred[leave];
    m->in_tree[leaving_arc] = 0;
    m->in_tree[e] = 1;
    double rc = reduced_cost(m, e);
    double shift = x == m->head[e] ? -rc : rc;
    const int *old = m->order;
    int *fresh = m->stack;
    /* Unlink the old subtree from the thread. */
    int before = m->rev_thread[leave], after = m->thread[old[count - 1]];
    m->thread[before] = after;
    m->rev_thread[after] = before;
    /* Walk the stem upwards, emitting each part of the new preorder.  The
     * block of s_i ends at the first later node no deeper than s_i (old
     * depths: they are rewritten below); everything before the end of
     * s_{i-1}'s block is inside it already. */
    int filled = 0, inner_begin = -1, inner_end = -1;
    for (int w = x;;) {
        const int begin = m->slot[w], top_depth = m->depth[w];
        int end = inner_end > begin ? inner_end : begin + 1;
        while (end < count && m->depth[old[end]] > top_depth)
            end++;
        if (inner_begin < 0)
            inner_begin = inner_end = end; /* s_0: the whole block */
        for (int k = begin; k < inner_begin; k++)
            fresh[filled++] = old[k];
        for (int k = inner_end; k < end; k++)
            fresh[filled++] = old[k];
        inner_begin = begin;
        inner_end = end;
        if (w == leave)
            break;
        w = m->parent[w];
    }
    /* Reverse the stem x .. leave. */
    int prev = y, prev_arc = e, prev_up = x == m->tail[e];
    for (int w = x;;) {
        int old_parent = m->parent[w], old_arc = m->pred[w], old_up = m->up[w];
        m->parent[w] = prev;
        m->pred[w] = prev_arc;
        m->up[w] = (unsigned char)prev_up;
        if (w == leave)
            break;
        prev = w;
        prev_arc = old_arc;
        prev_up = !old_up;
        w = old_parent;
    }
    /* Depths from the new parents (each comes earlier in the new preorder)
     * and the potentials' shift. */
    for (int k = 0; k < filled; k++) {
        int z = fresh[k];
        m->depth[z] = m->depth[m->parent[z]] + 1;
        m->pi[z] += shift;
    }
    /* Splice the new preorder right after y. */
    int next = m->thread[y];
    int last = y;
    for (int k = 0; k < filled; k++) {
        m->thread[last] = fresh[k];
        m->rev_thread[fresh[k]] = last;
        last = fresh[k];
    }
    m->thread[last] = next;
    m->rev_thread[next] = last;
}

/* A primal pivot: e enters, the blocking arc chosen by Cunningham's rule
 * leaves.  Returns 0, or TF_ESOLVER when nothing blocks (unbounded). */
static int pivot(tf_nsx *m, int e)
{
    const int i = m->tail[e], j = m->head[e];
    const int join = join_node(m, i, j);
    /* Blocking arcs are tree arcs against the cycle's direction.
     * Cunningham's rule keeps the tree strongly feasible: the last blocking
     * arc met when walking the cycle from join (join -> i, e, j -> join). */
    double delta = INFINITY;
    int leave = -1, leave_on_i_side = 0;
    for (int w = i; w != join; w = m->parent[w])
        if (m->up[w] && m->flow[m->pred[w]] < delta) {
            delta = m->flow[m->pred[w]];
            leave = w;
            leave_on_i_side = 1;
        }
    for (int w = j; w != join; w = m->parent[w])
        if (!m->up[w] && m->flow[m->pred[w]] <= delta) {
            delta = m->flow[m->pred[w]];
            leave = w;
            leave_on_i_side = 0;
        }
    if (leave < 0)
        return TF_ESOLVER; /* no blocking arc: a positive-length cycle */
    m->flow[e] = 0.0;
    if (delta > 0.0)
        push_around_cycle(m, e, join, delta);
    else
        m->flow[e] = delta;
    m->flow[m->pred[leave]] = 0.0;
    int count = list_subtree(m, leave);
    rehang(m, e, leave, leave_on_i_side ? i : j, leave_on_i_side ? j : i, count);
    return 0;
}

/* Primal pivots until no non-tree arc has reduced cost below -tol.
 * Returns 0 or TF_ESOLVER (unbounded, or the pivot guard tripped). */
static int primal_phase(tf_nsx *m, double tol)
{
    int block = (int)sqrt((double)m->arcs);
    if (block < 16)
        block = 16;
    /* Potentials drift by round-off over many pivots; recompute them from
     * the tree now and then (O(nodes), so every nodes/8 pivots is cheap). */
    long refresh_every = m->nodes / 8 > 1000 ? m->nodes / 8 : 1000;
    /* Strong feasibility rules out cycling; this cap only guards against a
     * bug turning into an endless loop. */
    long limit = m->pivots + 200L * m->nodes + 100000L, since_refresh = 0;
    m->next_arc = 0;
    for (;;) {
        int e = find_entering(m, tol, block);
        if (e < 0) {
            refresh_potentials(m);
            since_refresh = 0;
            e = find_entering(m, tol, block);
            if (e < 0)
                break;
        }
        int rc = pivot(m, e);
        if (rc)
            return rc;
        if (++m->pivots > limit)
            return TF_ESOLVER;
        if (++since_refresh >= refresh_every) {
            refresh_potentials(m);
            since_refresh = 0;
        }
    }
    return 0;
}

int tf_nsx_solve(tf_nsx *m, const double *b, const int *tree_arc, const int *alt_arc,
                 double tol)
{
    int rc = build_tree(m, b, tree_arc, alt_arc);
    if (rc)
        return rc;
    m->pivots = 0;
    m->dual_pivots = 0;
    return primal_phase(m, tol);
}

/* Tree flows for demands b on the current tree (non-tree arcs carry 0):
 * the demand of each subtree crosses its tree arc. */
static void tree_flows(tf_nsx *m, const double *b)
{
    int count = 0, v = 0;
    do {
        m->order[count++] = v;
        m->excess[v] = b[v];
        v = m->thread[v];
    } while (v != 0 && count < m->nodes);
    for (int k = count - 1; k > 0; k--) {
        v = m->order[k];
        double d = m->excess[v];
        m->excess[m->parent[v]] += d;
        m->flow[m->pred[v]] = m->up[v] ? -d : d;
    }
}

/* The tree node whose arc carries the most negative flow (below
 * -negative_tol), or -1 (Dantzig's rule for the dual simplex).  Only listed
 * arcs can qualify: flows change only around pivot cycles, which list the
 * arcs they drive negative; arcs that left the tree or recovered drop out. */
static int find_leaving(tf_nsx *m)
{
    int best = -1, kept = 0;
    double most = -m->negative_tol;
    for (int k = 0; k < m->n_negative; k++) {
        int e = m->negative[k];
        if (!m->in_tree[e] || m->flow[e] >= -m->negative_tol) {
            m->listed[e] = 0;
            continue;
        }
        m->negative[kept++] = e;
        int t = m->tail[e];
        int v = m->parent[t] == m->head[e] && m->pred[t] == e ? t : m->head[e];
        if (m->flow[e] < most || (m->flow[e] == most && v < best)) {
            most = m->flow[e];
            best = v;
        }
    }
    m->n_negative = kept;
    return best;
}

/* One dual pivot: tree arc pred[v] carries negative flow.  Cutting it
 * splits off the subtree S under v; the entering arc crosses the cut the
 * way S's demand needs (into S when the leaving arc points out of it, and
 * the other way round) and has the least reduced cost, so every reduced
 * cost stays non-negative after S's potentials shift.  Returns 0 or
 * TF_ESOLVER when no arc crosses that way (no feasible flow exists). */
static int dual_pivot(tf_nsx *m, int v)
{
    const int into = m->up[v];
    const int count = list_subtree(m, v), stamp = m->stamp;
    const int *first = into ? m->in_first : m->out_first;
    const int *list = into ? m->in_arc : m->out_arc;
    const int *far_end = into ? m->in_tail : m->out_head; /* by list position */
    int best = -1;
    double best_rc = INFINITY;
    for (int k = 0; k < count; k++) {
        int w = m->order[k];
        for (int p = first[w]; p < first[w + 1]; p++) {
            if (m->mark[far_end[p]] == stamp)
                continue;
            int e = list[p];
            if (m->in_tree[e])
                continue;
            double rc = reduced_cost(m, e);
            if (rc < best_rc) {
                best_rc = rc;
                best = e;
            }
        }
    }
    if (best < 0)
        return TF_ESOLVER;
    double theta = -m->flow[m->pred[v]];
    const int i = m->tail[best], j = m->head[best];
    m->flow[best] = 0.0;
    push_around_cycle(m, best, join_node(m, i, j), theta);
    m->flow[m->pred[v]] = 0.0;
    int x = into ? j : i;
    rehang(m, best, v, x, into ? i : j, count);
    return 0;
}

int tf_nsx_resolve(tf_nsx *m, const double *b, double tol, double flow_tol)
{
    m->pivots = 0;
    m->dual_pivots = 0;
    tree_flows(m, b);
    refresh_potentials(m);
    m->negative_tol = flow_tol;
    m->collect_negative = 1;
    for (int v = 1; v < m->nodes; v++)
        note_flow(m, m->pred[v]);
    long limit = 4L * m->nodes + 1000L;
    int rc = 0;
    for (;;) {
        int v = find_leaving(m);
        if (v < 0)
            break;
        rc = dual_pivot(m, v);
        if (!rc && ++m->dual_pivots > limit)
            rc = TF_ESOLVER;
        if (rc)
            break;
    }
    m->collect_negative = 0;
    for (int k = 0; k < m->n_negative; k++)
        m->listed[m->negative[k]] = 0;
    m->n_negative = 0;
    if (rc)
        return rc;
    /* Flows within flow_tol of zero are round-off: clear them so the primal
     * pivots below see a feasible tree. */
    for (int v = 1; v < m->nodes; v++)
        if (m->flow[m->pred[v]] < 0.0)
            m->flow[m->pred[v]] = 0.0;
    refresh_potentials(m);
    return primal_phase(m, tol);
}
