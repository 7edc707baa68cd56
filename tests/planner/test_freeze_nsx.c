/* test_freeze_nsx.c - the fast solver's network simplex
 * (planner/src/solve/freeze_fast_nsx.c) on seeded random networks, checked
 * against lp_solve on the dual LP: one fresh solve, then re-solves for new
 * demands on the same network, as the column generation uses it, and from
 * the starts it chooses: a walk stopped by its budget, a tree kept from an
 * earlier solve, a fresh solve with a pivot budget.
 *
 * A network has a root 0, random arcs between the other nodes with small
 * integer lengths, many of them tight at one potential (random_network),
 * and a pair 0 -> v, v -> 0 of length -1000 for every node, which keeps
 * every demand routable and gives the start tree (the star from the root,
 * each arc turned round where its flow would be negative).  Demands are
 * small integers of both signs, many zero, summing to 0. */
#include <lpsolve/lp_lib.h>
#include <math.h>
#include <string.h>

#include "freeze_fast_nsx.h"
#include "tf/error.h"
#include "test_util.h"

enum { MAX_NODES = 40, MAX_ARCS = MAX_NODES * MAX_NODES };

typedef struct network {
    int nodes, arcs;
    int tail[MAX_ARCS], head[MAX_ARCS];
    double len[MAX_ARCS];
    int star[MAX_NODES], star_back[MAX_NODES]; /* 0 -> v and v -> 0 */
    int potential[MAX_NODES]; /* pi*: meets every constraint */
    int inner_arcs;           /* arcs 0 .. inner_arcs-1 join nodes other than 0 */
} network;

static int add_arc(network *g, int tail, int head, double len)
{
    g->tail[g->arcs] = tail;
    g->head[g->arcs] = head;
    g->len[g->arcs] = len;
    return g->arcs++;
}

static int random_int(uint64_t *seed, int lo, int hi)
{
    return lo + (int)(test_random(seed) * (hi - lo + 1));
}

/* Every arc gets length pi*_head - pi*_tail - slack for one random
 * potential pi* and a slack that is 0 half the time, so pi* meets every
 * constraint (no cycle of positive length: the problem is bounded) and
 * many constraints are tight at once (degenerate). */
static void random_network(uint64_t *seed, network *g)
{
    int *potential = g->potential;
    g->nodes = random_int(seed, 3, MAX_NODES);
    g->arcs = 0;
    potential[0] = 0;
    for (int v = 1; v < g->nodes; v++)
        potential[v] = random_int(seed, -20, 20);
    const double density = 0.05 + 0.25 * test_random(seed);
    for (int i = 1; i < g->nodes; i++)
        for (int j = 1; j < g->nodes; j++)
            if (i != j && test_random(seed) < density) {
                int slack = test_random(seed) < 0.5 ? 0 : random_int(seed, 1, 3);
                add_arc(g, i, j, potential[j] - potential[i] - slack);
            }
    g->inner_arcs = g->arcs;
    const double far = 1000.0;
    for (int v = 1; v < g->nodes; v++) {
        g->star[v] = add_arc(g, 0, v, -far);
        g->star_back[v] = add_arc(g, v, 0, -far);
    }
}

/* The start tree: the star from the root, each arc 0 -> v with its twin
 * v -> 0 to take where the flow would be negative. */
static void star_tree(const network *g, int *tree_arc, int *alt_arc)
{
    tree_arc[0] = alt_arc[0] = -1;
    for (int v = 1; v < g->nodes; v++) {
        tree_arc[v] = g->star[v];
        alt_arc[v] = g->star_back[v];
    }
}

/* Draws the slack of about a fifth of the inner arcs afresh: lengths go up
 * or down between solves, as the caller's bound arc does, and pi* still
 * meets every constraint. */
static void change_lengths(uint64_t *seed, network *g)
{
    for (int e = 0; e < g->inner_arcs; e++)
        if (test_random(seed) < 0.2) {
            int slack = test_random(seed) < 0.5 ? 0 : random_int(seed, 1, 3);
            g->len[e] = g->potential[g->head[e]] - g->potential[g->tail[e]] - slack;
        }
}

static void random_demands(uint64_t *seed, const network *g, double *b)
{
    b[0] = 0.0;
    for (int v = 1; v < g->nodes; v++) {
        b[v] = test_random(seed) < 0.4 ? 0.0 : random_int(seed, -3, 3);
        b[0] -= b[v];
    }
}

/* The dual LP, min sum b pi s.t. pi_head - pi_tail >= len, pi_0 = 0, by
 * lp_solve.  Returns its optimum. */
static double lp_optimum(const network *g, const double *b)
{
    const int n = g->nodes - 1; /* pi_1 .. pi_{nodes-1} */
    lprec *lp = make_lp(0, n);
    assert_non_null(lp);
    set_verbose(lp, NEUTRAL);
    for (int c = 1; c <= n; c++)
        set_unbounded(lp, c);
    set_add_rowmode(lp, TRUE);
    for (int e = 0; e < g->arcs; e++) {
        double vals[2];
        int cols[2], count = 0;
        if (g->head[e] > 0) {
            vals[count] = 1.0;
            cols[count++] = g->head[e];
        }
        if (g->tail[e] > 0) {
            vals[count] = -1.0;
            cols[count++] = g->tail[e];
        }
        assert_true(add_constraintex(lp, count, vals, cols, GE, g->len[e]));
    }
    set_add_rowmode(lp, FALSE);
    double obj[MAX_NODES + 1] = {0.0};
    for (int v = 1; v < g->nodes; v++)
        obj[v] = b[v];
    set_obj_fn(lp, obj);
    set_minim(lp);
    assert_int_equal(solve(lp), OPTIMAL);
    double value = get_objective(lp);
    delete_lp(lp);
    return value;
}

/* What a solution must be: flows that meet the demands, potentials that
 * meet every constraint, tight on tree arcs, with sum b pi at lp_solve's
 * optimum; and each node's arc lists split into non-tree and tree arcs. */
static void check_answer(const network *g, const tf_nsx *m, const double *b)
{
    double balance[MAX_NODES] = {0.0};
    for (int e = 0; e < g->arcs; e++) {
        double slack = m->pi[g->head[e]] - m->pi[g->tail[e]] - g->len[e];
        if (slack < -1e-9)
            fail_msg("arc %d -> %d: potentials violate it by %g", g->tail[e], g->head[e], slack);
        if (m->in_tree[e] && fabs(slack) > 1e-9)
            fail_msg("tree arc %d -> %d has slack %g", g->tail[e], g->head[e], slack);
        if (m->flow[e] < -1e-9)
            fail_msg("arc %d -> %d: flow %g", g->tail[e], g->head[e], m->flow[e]);
        if (!m->in_tree[e] && m->flow[e] != 0.0)
            fail_msg("non-tree arc %d -> %d carries %g", g->tail[e], g->head[e], m->flow[e]);
        balance[g->head[e]] += m->flow[e];
        balance[g->tail[e]] -= m->flow[e];
    }
    double value = 0.0;
    for (int v = 0; v < g->nodes; v++) {
        assert_close(balance[v], b[v], 1e-9);
        value += b[v] * m->pi[v];
    }
    assert_close(m->pi[0], 0.0, 1e-9);
    assert_close(value, lp_optimum(g, b), 1e-9);
    const tf_nsx_adjacency *lists[2] = {&m->out, &m->in};
    for (int l = 0; l < 2; l++)
        for (int v = 0; v < g->nodes; v++)
            for (int p = lists[l]->first[v]; p < lists[l]->first[v + 1]; p++) {
                int e = lists[l]->arc[p];
                assert_int_equal(lists[l]->at[e], p);
                assert_int_equal(m->in_tree[e], p >= lists[l]->split[v]);
                assert_int_equal(lists[l]->far[p], l == 0 ? g->head[e] : g->tail[e]);
            }
}

/* 300 networks, each solved fresh and then re-solved for 6 new demand
 * vectors, with some lengths changed before the third and the sixth;
 * every answer checked.  Also counts the dual pivots, so that the
 * re-solves are known to have exercised them. */
static void solves_and_resolves_match_lp_solve(void **state)
{
    (void)state;
    uint64_t seed = 0x5eed0f7a11ULL;
    long dual_pivots = 0;
    int resolved = 0;
    for (int instance = 0; instance < 300; instance++) {
        network g;
        random_network(&seed, &g);
        double b[MAX_NODES];
        int tree_arc[MAX_NODES], alt_arc[MAX_NODES];
        star_tree(&g, tree_arc, alt_arc);
        tf_nsx m;
        assert_int_equal(tf_nsx_init(&m, g.nodes, g.arcs, g.tail, g.head, g.len), 0);
        random_demands(&seed, &g, b);
        assert_int_equal(tf_nsx_solve(&m, b, tree_arc, alt_arc, 1e-12, 0), 0);
        check_answer(&g, &m, b);
        for (int round = 0; round < 6; round++) {
            if (round % 3 == 2) {
                change_lengths(&seed, &g);
                tf_nsx_lengths_changed(&m);
            }
            random_demands(&seed, &g, b);
            int rc = tf_nsx_resolve(&m, b, 1e-12, 1e-12, 0);
            if (rc) {
                /* The caller's fallback: a fresh solve. */
                assert_int_equal(rc, TF_ESOLVER);
                assert_int_equal(tf_nsx_solve(&m, b, tree_arc, alt_arc, 1e-12, 0), 0);
            } else {
                resolved++;
                dual_pivots += m.dual_pivots;
                /* With only the demands changed, the ratio test keeps every
                 * reduced cost non-negative (integer data: no round-off), so
                 * the primal phase has nothing to do; an arc the ratio test
                 * missed shows here, though the answer would still be
                 * optimal after the primal pivots repair it. */
                if (round % 3 != 2)
                    assert_int_equal(m.pivots, 0);
            }
            check_answer(&g, &m, b);
        }
        tf_nsx_free(&m);
    }
    print_message("%d re-solves, %ld dual pivots\n", resolved, dual_pivots);
    /* The re-solves must mostly succeed and pivot, or they test nothing. */
    assert_true(resolved > 1500);
    assert_true(dual_pivots > 2 * resolved);
}

/* The caller's ways of choosing where a re-solve starts: a walk stopped
 * by its budget of listed nodes keeps a dual feasible tree, from which a
 * re-solve (after tf_nsx_load_tree) reaches lp_solve's optimum; an earlier
 * optimal tree, loaded after other solves, does too; a fresh solve with a
 * pivot budget either finishes or says it could not.  Counts the stopped
 * walks and the fresh solves cut short, so that both are known to have
 * happened. */
static void stopped_walks_and_loaded_trees_match_lp_solve(void **state)
{
    (void)state;
    uint64_t seed = 0x10adedULL;
    int stopped = 0, cut_short = 0;
    for (int instance = 0; instance < 300; instance++) {
        network g;
        random_network(&seed, &g);
        double b[MAX_NODES];
        int tree_arc[MAX_NODES], alt_arc[MAX_NODES], first[MAX_NODES], walk[MAX_NODES];
        star_tree(&g, tree_arc, alt_arc);
        tf_nsx m;
        assert_int_equal(tf_nsx_init(&m, g.nodes, g.arcs, g.tail, g.head, g.len), 0);
        random_demands(&seed, &g, b);
        int rc = tf_nsx_solve(&m, b, tree_arc, alt_arc, 1e-12, 1);
        if (rc) {
            assert_int_equal(rc, TF_ESOLVER);
            assert_int_equal(m.pivots, 2); /* the one allowed, and the one past it */
            cut_short++;
            assert_int_equal(tf_nsx_solve(&m, b, tree_arc, alt_arc, 1e-12, 0), 0);
        }
        check_answer(&g, &m, b);
        memcpy(first, m.pred, (size_t)g.nodes * sizeof *first);
        for (int round = 0; round < 4; round++) {
            random_demands(&seed, &g, b);
            rc = tf_nsx_resolve(&m, b, 1e-12, 1e-12, 1);
            if (rc) {
                /* Stopped after its first pivot that listed 2 nodes or more
                 * (or, rarely, by finding no flow: never here, where every
                 * demand is routable). */
                assert_int_equal(rc, TF_ESOLVER);
                assert_true(m.listed > 1);
                stopped++;
                memcpy(walk, m.pred, (size_t)g.nodes * sizeof *walk);
                assert_int_equal(tf_nsx_load_tree(&m, walk), 0);
                assert_int_equal(tf_nsx_resolve(&m, b, 1e-12, 1e-12, 0), 0);
                assert_int_equal(m.pivots, 0); /* dual feasible: the dual pivots suffice */
            }
            check_answer(&g, &m, b);
        }
        /* The first optimal tree, after four other solves. */
        random_demands(&seed, &g, b);
        assert_int_equal(tf_nsx_load_tree(&m, first), 0);
        assert_int_equal(tf_nsx_resolve(&m, b, 1e-12, 1e-12, 0), 0);
        assert_int_equal(m.pivots, 0);
        check_answer(&g, &m, b);
        /* Node 1 given an arc that does not touch it: no tree, refused;
         * a fresh solve still works. */
        if (g.nodes >= 3) {
            int bad[MAX_NODES];
            memcpy(bad, first, (size_t)g.nodes * sizeof *bad);
            bad[1] = g.star[2];
            assert_int_equal(tf_nsx_load_tree(&m, bad), TF_EINVAL);
            assert_int_equal(tf_nsx_solve(&m, b, tree_arc, alt_arc, 1e-12, 0), 0);
            check_answer(&g, &m, b);
        }
        tf_nsx_free(&m);
    }
    print_message("%d walks stopped, %d fresh solves cut short\n", stopped, cut_short);
    assert_true(stopped > 300);
    assert_true(cut_short > 30);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(solves_and_resolves_match_lp_solve),
        cmocka_unit_test(stopped_walks_and_loaded_trees_match_lp_solve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
