/* freeze_fast_nsx.c - primal network simplex on a spanning tree kept as
 * parent pointers plus a preorder thread with subtree sizes and last nodes
 * (see freeze_fast_nsx.h).
 *
 * Arcs are uncapacitated, so a pivot only ever blocks on tree arcs whose
 * flow decreases around the cycle.  The subtree cut off by the leaving arc
 * is re-hung below the entering arc: its parent pointers reverse along the
 * stem, and its new preorder is put together from pieces of the old one,
 * which the subtree's last nodes locate without visiting the rest of it.
 *
 * What a pivot must visit node by node is one side of the cut: the
 * potentials of one side shift (only differences matter, so either side
 * will do), and the dual ratio test scans the arcs leaving one side.  Both
 * use the smaller side.  The tree is deep here (a schedule's critical path
 * runs through it), so the subtree below a cut is often most of the tree.
 * The scan skips tree arcs, which each node's arc lists keep at their end.
 *
 * The dual pivots (tf_nsx_resolve) take the leaving arc from a tournament
 * over the nodes, replayed after each pivot over its cycle, the only place
 * where flows, tree arcs and subtree sizes change.
 */
#include "freeze_fast_nsx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tf/error.h"

/* Fills adj with the arcs listed by node_of[e] (their other end far_of[e]),
 * all as non-tree arcs.  Returns 0 or TF_ENOMEM (adj then holds what was
 * allocated, for adjacency_free). */
static int adjacency_init(tf_nsx_adjacency *adj, int nodes, int arcs, const int *node_of,
                          const int *far_of)
{
    size_t n = (size_t)nodes + 1, a = (size_t)arcs + 1;
    adj->first = calloc(n, sizeof *adj->first);
    adj->split = calloc(n, sizeof *adj->split);
    adj->arc = calloc(a, sizeof *adj->arc);
    adj->far = calloc(a, sizeof *adj->far);
    adj->len = calloc(a, sizeof *adj->len);
    adj->at = calloc(a, sizeof *adj->at);
    if (!adj->first || !adj->split || !adj->arc || !adj->far || !adj->len || !adj->at)
        return TF_ENOMEM;
    for (int e = 0; e < arcs; e++)
        adj->first[node_of[e] + 1]++;
    for (int v = 0; v < nodes; v++)
        adj->first[v + 1] += adj->first[v];
    for (int v = 0; v < nodes; v++)
        adj->split[v] = adj->first[v];
    for (int e = 0; e < arcs; e++) {
        int p = adj->split[node_of[e]]++;
        adj->arc[p] = e;
        adj->far[p] = far_of[e];
        adj->at[e] = p;
    }
    return 0;
}

static void adjacency_free(tf_nsx_adjacency *adj)
{
    free(adj->first);
    free(adj->split);
    free(adj->arc);
    free(adj->far);
    free(adj->len);
    free(adj->at);
}

/* Swaps the list entries at positions p and q. */
static void adjacency_swap(tf_nsx_adjacency *adj, int p, int q)
{
    int e = adj->arc[p], f = adj->arc[q], far = adj->far[p];
    double len = adj->len[p];
    adj->arc[p] = f;
    adj->far[p] = adj->far[q];
    adj->len[p] = adj->len[q];
    adj->at[f] = p;
    adj->arc[q] = e;
    adj->far[q] = far;
    adj->len[q] = len;
    adj->at[e] = q;
}

/* Moves arc e, listed under v, to v's tree part (to_tree) or out of it. */
static void adjacency_move(tf_nsx_adjacency *adj, int v, int e, int to_tree)
{
    if (to_tree)
        adjacency_swap(adj, adj->at[e], --adj->split[v]);
    else
        adjacency_swap(adj, adj->at[e], adj->split[v]++);
}

int tf_nsx_init(tf_nsx *m, int nodes, int arcs, const int *tail, const int *head,
                const double *len)
{
    memset(m, 0, sizeof *m);
    m->stale = 1;
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
    m->size = calloc(n, sizeof *m->size);
    m->last = calloc(n, sizeof *m->last);
    /* A re-hang has a piece per stem node plus one per stem node with a
     * child after the stem's next block, each with a node of its own
     * outside the stem: at most `nodes` pieces of two ints. */
    m->segment = calloc(2 * n, sizeof *m->segment);
    m->thread = calloc(n, sizeof *m->thread);
    m->rev_thread = calloc(n, sizeof *m->rev_thread);
    m->child = calloc(n, sizeof *m->child);
    m->sibling = calloc(n, sizeof *m->sibling);
    m->stack = calloc(n, sizeof *m->stack);
    m->order = calloc(n, sizeof *m->order);
    m->excess = calloc(n, sizeof *m->excess);
    m->mark = calloc(n, sizeof *m->mark);
    /* The tournament's leaves: the least power of two >= nodes (at most
     * 2^30, so 2 * leaves fits in an int). */
    for (m->leaves = 1; m->leaves < nodes && m->leaves < (1 << 30); m->leaves *= 2)
        ;
    m->tournament = malloc(2 * (size_t)m->leaves * sizeof *m->tournament);
    m->queued = calloc((size_t)m->leaves, 1);
    m->cycle = calloc(n, sizeof *m->cycle);
    if (m->leaves < nodes || !m->excess || !m->mark || !m->size || !m->last || !m->segment ||
        !m->tournament || !m->queued || !m->cycle ||
        adjacency_init(&m->out, nodes, arcs, tail, head) ||
        adjacency_init(&m->in, nodes, arcs, head, tail)) {
        tf_nsx_free(m);
        return TF_ENOMEM;
    }
    if (!m->flow || !m->pi || !m->parent || !m->pred || !m->up || !m->in_tree ||
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
    free(m->size);
    free(m->last);
    free(m->segment);
    free(m->thread);
    free(m->rev_thread);
    free(m->child);
    free(m->sibling);
    free(m->stack);
    free(m->order);
    free(m->excess);
    free(m->mark);
    free(m->tournament);
    free(m->queued);
    free(m->cycle);
    adjacency_free(&m->out);
    adjacency_free(&m->in);
    memset(m, 0, sizeof *m);
}

/* Puts arc e into the tree or takes it out, keeping the lists' split. */
static void set_in_tree(tf_nsx *m, int e, int in)
{
    if (m->in_tree[e] == in)
        return;
    m->in_tree[e] = (unsigned char)in;
    adjacency_move(&m->out, m->tail[e], e, in);
    adjacency_move(&m->in, m->head[e], e, in);
}

/* Writes a preorder of the tree (children from child/sibling) into
 * m->order.  Returns the number of nodes listed. */
static int preorder(tf_nsx *m)
{
    int count = 0, sp = 0;
    m->stack[sp++] = 0;
    while (sp > 0) {
        int v = m->stack[--sp];
        m->order[count++] = v;
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

/* Tree flows for demands b on the tree just built (m->order its preorder):
 * the demand of each subtree crosses its tree arc, in reverse preorder.
 * Where the given arc would carry negative flow (or zero flow towards the
 * root), its reverse twin alt_arc[v] is used.  Returns TF_EINVAL if some
 * flow is still negative. */
static int tree_arc_flows(tf_nsx *m, const double *b, const int *alt_arc)
{
    const int n = m->nodes;
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
        set_in_tree(m, m->pred[v], 1);
    }
    return 0;
}

/* Thread: the preorder in m->order (count nodes), circular through the
 * root; a subtree is the block of `size` nodes from its top, ending at
 * `last`. */
static void thread_tree(tf_nsx *m, int count)
{
    for (int k = 0; k < count; k++) {
        int v = m->order[k], w = m->order[(k + 1) % count];
        m->thread[v] = w;
        m->rev_thread[w] = v;
        m->size[v] = 1;
    }
    for (int k = count - 1; k > 0; k--)
        m->size[m->parent[m->order[k]]] += m->size[m->order[k]];
    for (int k = 0; k < count; k++)
        m->last[m->order[k]] = m->order[k + m->size[m->order[k]] - 1];
}

/* Makes tree_arc[v] (v = 1 .. nodes-1) the tree.  With demands b it also
 * sets the tree flows, taking alt_arc[v] where tree_arc[v] would carry
 * negative flow (or zero flow towards the root), and fails if the tree is
 * not primal feasible; without (b NULL) the flows are left to
 * tf_nsx_resolve.  Returns 0 or TF_EINVAL. */
static int build_tree(tf_nsx *m, const double *b, const int *tree_arc, const int *alt_arc)
{
    const int n = m->nodes;
    for (int e = 0; e < m->arcs; e++) {
        m->flow[e] = 0.0;
        set_in_tree(m, e, 0);
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
    int count = preorder(m);
    if (count != n)
        return TF_EINVAL; /* not spanning: the parent pointers have a cycle */
    if (!b) {
        for (int v = 1; v < n; v++)
            set_in_tree(m, m->pred[v], 1);
    } else {
        int rc = tree_arc_flows(m, b, alt_arc);
        if (rc)
            return rc;
    }
    thread_tree(m, count);
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

/* The node where the tree paths up from i and j meet.  A node's subtree is
 * larger than any of its descendants', so the smaller one is not the meeting
 * point and moves up. */
static int join_node(const tf_nsx *m, int i, int j)
{
    while (i != j) {
        if (m->size[i] < m->size[j])
            i = m->parent[i];
        else
            j = m->parent[j];
    }
    return i;
}

/* The key by which the dual pivots choose the arc to leave: v's tree arc
 * carries flow f < -negative_tol, and a pivot on it costs a walk over the
 * smaller side of its cut, so the key is f / sqrt(that side).  Dantzig's
 * rule (f alone) took fewer pivots that walked larger sides; the side
 * alone took 3-4 times the pivots.  Nodes whose flow is not below
 * -negative_tol get +infinity instead (leaf_entry). */
static double leaving_key(const tf_nsx *m, int v, double f)
{
    const int side = m->size[v] < m->nodes - m->size[v] ? m->size[v] : m->nodes - m->size[v];
    return f / sqrt((double)side);
}

/* The entry of the tournament that a node's key and number make. */
static tf_nsx_entry leaf_entry(const tf_nsx *m, int v)
{
    tf_nsx_entry leaf = {INFINITY, v};
    if (v > 0 && v < m->nodes) { /* the root has no tree arc */
        const double f = m->flow[m->pred[v]];
        if (f < -m->negative_tol)
            leaf.key = leaving_key(m, v, f);
    }
    return leaf;
}

/* The better of two sibling entries: the lower key, the left one (the
 * lower-numbered node) on ties. */
static tf_nsx_entry match(const tf_nsx_entry *left, const tf_nsx_entry *right)
{
    return right->key < left->key ? *right : *left;
}

/* After a dual pivot: updates the key of each node on its cycle (the nodes
 * whose tree arc's flow, tree arc or subtree size may have changed) and
 * replays the matches above the changed ones, a level at a time so that a
 * match shared by several is played once, and only up to where its
 * winner stays the same.  The queue of matches to replay overwrites
 * m->cycle behind the loop that reads it. */
static void note_cycle(tf_nsx *m)
{
    tf_nsx_entry *t = m->tournament;
    int *queue = m->cycle, queue_length = 0;
    for (int k = 0; k < m->cycle_length; k++) {
        const int v = m->cycle[k], leaf = m->leaves + v;
        const tf_nsx_entry now = leaf_entry(m, v);
        if (now.key == t[leaf].key)
            continue; /* most often infinity before and after */
        t[leaf] = now;
        if (!m->queued[leaf / 2]) {
            m->queued[leaf / 2] = 1;
            queue[queue_length++] = leaf / 2;
        }
    }
    while (queue_length > 0) {
        int next = 0;
        for (int k = 0; k < queue_length; k++) {
            const int i = queue[k];
            m->queued[i] = 0;
            const tf_nsx_entry won = match(&t[2 * i], &t[2 * i + 1]);
            if (won.key == t[i].key && won.node == t[i].node)
                continue; /* nothing above changes */
            t[i] = won;
            if (i > 1 && !m->queued[i / 2]) {
                m->queued[i / 2] = 1;
                queue[next++] = i / 2;
            }
        }
        queue_length = next;
    }
    m->cycle_length = 0; /* the cycle is overwritten */
}

/* Sets every node's key from the tree and plays the tournament
 * bottom-up. */
static void build_tournament(tf_nsx *m)
{
    tf_nsx_entry *t = m->tournament;
    for (int v = 0; v < m->leaves; v++)
        t[m->leaves + v] = leaf_entry(m, v);
    for (int i = m->leaves - 1; i >= 1; i--)
        t[i] = match(&t[2 * i], &t[2 * i + 1]);
}

/* Pushes delta around the cycle that non-tree arc e = (i -> j) closes:
 * along e, up from j to join, down from join to i.  The cycle's nodes but
 * join go to m->cycle. */
static void push_around_cycle(tf_nsx *m, int e, int join, double delta)
{
    const int i = m->tail[e], j = m->head[e];
    int length = 0;
    for (int w = i; w != join; w = m->parent[w]) {
        m->flow[m->pred[w]] += m->up[w] ? -delta : delta;
        m->cycle[length++] = w;
    }
    for (int w = j; w != join; w = m->parent[w]) {
        m->flow[m->pred[w]] += m->up[w] ? delta : -delta;
        m->cycle[length++] = w;
    }
    m->flow[e] += delta;
    m->cycle_length = length;
}

/* Lists the smaller side of the cut above v into m->order and marks its
 * nodes with a fresh stamp: the subtree under v (the thread block from v to
 * last[v]) when *inside is set on return, else the rest of the tree (the
 * thread from after that block round to v).  Returns the node count. */
static int list_side(tf_nsx *m, int v, int *inside)
{
    const int stamp = ++m->stamp;
    *inside = m->size[v] <= m->nodes - m->size[v];
    int w = *inside ? v : m->thread[m->last[v]];
    const int stop = *inside ? m->thread[m->last[v]] : v;
    int count = 0;
    for (; w != stop; w = m->thread[w]) {
        m->order[count++] = w;
        m->mark[w] = stamp;
    }
    return count;
}

/* Shifts the potentials of the subtree S cut off by a pivot by `shift`,
 * through the side list_side listed: S itself, or the rest of the tree by
 * -shift (only differences of potentials matter; pi_0 = 0 again after the
 * next refresh_potentials). */
static void shift_side(tf_nsx *m, int count, int inside, double shift)
{
    const double d = inside ? shift : -shift;
    for (int k = 0; k < count; k++)
        m->pi[m->order[k]] += d;
}

/* Points the ancestors of `from` whose subtree ended at `old_last` (a chain
 * up from `from`) to `new_last`. */
static void relast_chain(tf_nsx *m, int from, int old_last, int new_last)
{
    for (int a = from; a >= 0 && m->last[a] == old_last; a = m->parent[a])
        m->last[a] = new_last;
}

/* Swaps tree arc pred[leave] for e: the subtree S under `leave` is re-hung
 * from x, the end of e inside S (y is e's other end, `join` the node where
 * the paths from x and y meet).  Potentials are left to the caller.
 *
 * The stem s_0 = x, s_1 = parent(x), ..., s_k = leave reverses.  In the old
 * preorder each s_i's subtree is the block [s_i, last[s_i]], which contains
 * s_{i-1}'s block.  The new preorder of S is s_0's block, then for each i
 * the part of s_i's block outside s_{i-1}'s: [s_i, before s_{i-1}] and
 * [after last[s_{i-1}], last[s_i]].  Those pieces are spliced right after y,
 * so the cost is the stem and the cycle, not the size of S. */
static void rehang(tf_nsx *m, int e, int leave, int x, int y, int join)
{
    const int moved = m->size[leave], old_last = m->last[leave];
    const int old_parent = m->parent[leave];
    set_in_tree(m, m->pred[leave], 0);
    set_in_tree(m, e, 1);
    /* The stem, and the pieces (first, last) of the new preorder, read
     * from the old thread before anything changes. */
    int *stem = m->stack, *piece = m->segment;
    int k = 0, pieces = 0;
    stem[0] = x;
    piece[2 * pieces] = x;
    piece[2 * pieces++ + 1] = m->last[x];
    while (stem[k] != leave) {
        int below = stem[k], w = m->parent[below];
        stem[++k] = w;
        piece[2 * pieces] = w;
        piece[2 * pieces++ + 1] = m->rev_thread[below];
        if (m->last[below] != m->last[w]) {
            piece[2 * pieces] = m->thread[m->last[below]];
            piece[2 * pieces++ + 1] = m->last[w];
        }
    }
    const int new_last = piece[2 * pieces - 1];
    /* Take S out of the thread and out of its old ancestors' blocks. */
    const int before = m->rev_thread[leave], after = m->thread[old_last];
    m->thread[before] = after;
    m->rev_thread[after] = before;
    relast_chain(m, old_parent, old_last, before);
    for (int a = old_parent; a != join; a = m->parent[a])
        m->size[a] -= moved;
    /* Chain the pieces right after y, as y's first child. */
    const int next = m->thread[y];
    int tail = y;
    for (int p = 0; p < pieces; p++) {
        m->thread[tail] = piece[2 * p];
        m->rev_thread[piece[2 * p]] = tail;
        tail = piece[2 * p + 1];
    }
    m->thread[tail] = next;
    m->rev_thread[next] = tail;
    if (m->last[y] == y)
        relast_chain(m, y, y, new_last);
    for (int a = y; a != join; a = m->parent[a])
        m->size[a] += moved;
    /* The stem's new subtrees: s_i keeps what lay outside s_{i-1}'s block
     * and gains s_{i+1}'s new subtree; every one ends where S now ends. */
    int gained = 0;
    for (int i = k; i > 0; i--) {
        gained += m->size[stem[i]] - m->size[stem[i - 1]];
        m->size[stem[i]] = gained;
    }
    m->size[x] = moved;
    for (int i = 0; i <= k; i++)
        m->last[stem[i]] = new_last;
    /* Reverse the stem x .. leave. */
    int prev = y, prev_arc = e, prev_up = x == m->tail[e];
    for (int i = 0; i <= k; i++) {
        int w = stem[i];
        int old_arc = m->pred[w], old_up = m->up[w];
        m->parent[w] = prev;
        m->pred[w] = prev_arc;
        m->up[w] = (unsigned char)prev_up;
        prev = w;
        prev_arc = old_arc;
        prev_up = !old_up;
    }
}

/* How much the potentials of the side holding x, an end of e, shift to
 * make e tight. */
static double entering_shift(const tf_nsx *m, int e, int x)
{
    double rc = reduced_cost(m, e);
    return x == m->head[e] ? -rc : rc;
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
    const int x = leave_on_i_side ? i : j;
    int inside;
    const int count = list_side(m, leave, &inside);
    shift_side(m, count, inside, entering_shift(m, e, x));
    rehang(m, e, leave, x, leave_on_i_side ? j : i, join);
    return 0;
}

/* Primal pivots until no non-tree arc has reduced cost below -tol.
 * Returns 0 or TF_ESOLVER (unbounded, or the pivot guard tripped). */
static int primal_phase(tf_nsx *m, double tol, long max_pivots)
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
    if (max_pivots > 0 && m->pivots + max_pivots < limit)
        limit = m->pivots + max_pivots;
    m->next_arc = 0;
    /* Both callers refresh the potentials just before, so a first scan
     * that finds nothing is already the final one. */
    int exact = 1;
    for (;;) {
        int e = find_entering(m, tol, block);
        if (e < 0) {
            if (exact)
                break;
            refresh_potentials(m);
            since_refresh = 0;
            exact = 1;
            continue;
        }
        int rc = pivot(m, e);
        if (rc)
            return rc;
        exact = 0;
        if (++m->pivots > limit)
            return TF_ESOLVER;
        if (++since_refresh >= refresh_every) {
            refresh_potentials(m);
            since_refresh = 0;
            exact = 1;
        }
    }
    return 0;
}

/* Copies the caller's lengths into the arc lists, where the dual ratio
 * test reads them by position. */
static void read_lengths(tf_nsx *m)
{
    for (int p = 0; p < m->arcs; p++) {
        m->out.len[p] = m->len[m->out.arc[p]];
        m->in.len[p] = m->len[m->in.arc[p]];
    }
    m->stale = 0;
}

int tf_nsx_solve(tf_nsx *m, const double *b, const int *tree_arc, const int *alt_arc,
                 double tol, long max_pivots)
{
    m->stale = 1;
    int rc = build_tree(m, b, tree_arc, alt_arc);
    if (rc)
        return rc;
    read_lengths(m);
    m->pivots = 0;
    m->dual_pivots = 0;
    m->listed = 0;
    rc = primal_phase(m, tol, max_pivots);
    m->stale = rc != 0;
    return rc;
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

/* The tree node of least leaving_key (its arc's flow is below
 * -negative_tol), the lowest-numbered on ties, or -1 when no flow is:
 * the tournament's top. */
static int find_leaving(const tf_nsx *m)
{
    return m->tournament[1].key < INFINITY ? m->tournament[1].node : -1;
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
    int inside;
    const int count = list_side(m, v, &inside), stamp = m->stamp;
    m->listed += count;
    /* The entering arc crosses into S when `into` is set, else out of it:
     * with S listed, an arc into (out of) a listed node from (to) an
     * unmarked one; with the rest listed, one out of (into) a listed node. */
    const int scan_in = inside ? into : !into;
    const tf_nsx_adjacency *adj = scan_in ? &m->in : &m->out;
    /* Only non-tree arcs can enter, and the tree arcs, about half of each
     * list, are all inside one side but for the leaving arc, so the scan
     * skips them.  Most of the rest are inside too: few arcs cross a cut.
     * The reduced cost is taken relative to the listed end w (sign +1 when
     * w is the head). */
    const double sign = scan_in ? 1.0 : -1.0;
    int best_p = -1;
    double best_rc = INFINITY;
    for (int k = 0; k < count; k++) {
        const int w = m->order[k];
        const double pi_w = m->pi[w];
        for (int p = adj->first[w]; p < adj->split[w]; p++) {
            const int far = adj->far[p];
            if (m->mark[far] == stamp)
                continue;
            double rc = sign * (pi_w - m->pi[far]) - adj->len[p];
            if (rc < best_rc) {
                best_rc = rc;
                best_p = p;
            }
        }
    }
    if (best_p < 0)
        return TF_ESOLVER;
    const int best = adj->arc[best_p];
    double theta = -m->flow[m->pred[v]];
    const int i = m->tail[best], j = m->head[best], join = join_node(m, i, j);
    m->flow[best] = 0.0;
    push_around_cycle(m, best, join, theta);
    m->flow[m->pred[v]] = 0.0;
    const int x = into ? j : i;
    shift_side(m, count, inside, entering_shift(m, best, x));
    rehang(m, best, v, x, into ? i : j, join);
    note_cycle(m);
    return 0;
}

int tf_nsx_load_tree(tf_nsx *m, const int *tree_arc)
{
    return build_tree(m, NULL, tree_arc, NULL);
}

void tf_nsx_lengths_changed(tf_nsx *m)
{
    m->stale = 1;
}

int tf_nsx_resolve(tf_nsx *m, const double *b, double tol, double flow_tol, long max_listed)
{
    m->pivots = 0;
    m->dual_pivots = 0;
    m->listed = 0;
    /* A successful solve leaves exact potentials (primal_phase ends on a
     * refresh) and the lists' copies of the lengths current; only changed
     * lengths, or a failed solve, make them stale. */
    if (m->stale) {
        read_lengths(m);
        refresh_potentials(m);
    }
    /* Until it succeeds, the tree and potentials are in flux. */
    m->stale = 1;
    tree_flows(m, b);
    m->negative_tol = flow_tol;
    build_tournament(m);
    long limit = 4L * m->nodes + 1000L;
    int rc = 0;
    for (;;) {
        int v = find_leaving(m);
        if (v < 0)
            break;
        rc = dual_pivot(m, v);
        if (!rc && (++m->dual_pivots > limit || (max_listed > 0 && m->listed > max_listed)))
            rc = TF_ESOLVER;
        if (rc)
            break;
    }
    if (rc)
        return rc;
    /* Flows within flow_tol of zero are round-off: clear them so the primal
     * pivots below see a feasible tree. */
    for (int v = 1; v < m->nodes; v++)
        if (m->flow[m->pred[v]] < 0.0)
            m->flow[m->pred[v]] = 0.0;
    refresh_potentials(m);
    rc = primal_phase(m, tol, 0);
    m->stale = rc != 0;
    return rc;
}
