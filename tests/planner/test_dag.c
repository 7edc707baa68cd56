/* test_dag.c - the dependency graph: edges by rule, longest and critical
 * paths on hand-computed schedules, and deadlock detection. */
#include <math.h>

#include "test_util.h"
#include "tf/dag.h"
#include "tf/schedule.h"

static int node(const tf_schedule *s, const char *cell)
{
    tf_action a;
    assert_int_equal(tf_action_parse(cell, &a, NULL), 0);
    int i = tf_schedule_find(s, a.type, a.stage, a.microbatch);
    assert_true(i >= 0);
    return i;
}

static int edge_rule(const tf_dag *g, int u, int v)
{
    for (int e = g->succ_offset[u]; e < g->succ_offset[u + 1]; e++)
        if (g->succ[e] == v)
            return g->rule[e];
    return 0;
}

/* 1F1B, 2 ranks, 2 microbatches, F = 1 ms and B = 2 ms on both stages.
 * rank 0: 0F0 0F1 0B0 0B1, rank 1: 1F0 1B0 1F1 1B1.  By hand:
 * 0F0 [0,1] 0F1 [1,2] 1F0 [1,2] 1B0 [2,4] 0B0 [4,6] 1F1 [4,5] 1B1 [5,7]
 * 0B1 [7,9]: batch time 9. */
static void one_f_one_b_by_hand(void **state)
{
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 2, &s, NULL), 0);
    tf_dag g;
    assert_int_equal(tf_dag_build(&s, 0.0, &g, NULL), 0);
    double dur[8];
    for (int i = 0; i < s.n_actions; i++)
        dur[i] = s.actions[i].type == TF_ACT_F ? 1.0 : 2.0;
    double start[8];
    assert_true(tf_dag_longest_path(&g, dur, start) == 9.0);
    const char *cells[] = {"0F0", "0F1", "1F0", "1B0", "0B0", "1F1", "1B1", "0B1"};
    const double expected[] = {0, 1, 1, 2, 4, 4, 5, 7};
    for (int k = 0; k < 8; k++)
        assert_true(start[node(&s, cells[k])] == expected[k]);

    /* Rules: F -> F of the next stage, B -> B of the previous stage,
     * F -> B of the same microbatch, and rank order together with the
     * next-microbatch rule on 0F0 -> 0F1. */
    assert_int_equal(edge_rule(&g, node(&s, "0F0"), node(&s, "1F0")), TF_EDGE_FORWARD_NEXT_STAGE);
    assert_int_equal(edge_rule(&g, node(&s, "1B0"), node(&s, "0B0")), TF_EDGE_BACKWARD_PREV_STAGE);
    assert_int_equal(edge_rule(&g, node(&s, "1F0"), node(&s, "1B0")),
                     TF_EDGE_BACKWARD_AFTER_FORWARD | TF_EDGE_RANK_ORDER);
    assert_int_equal(edge_rule(&g, node(&s, "0F0"), node(&s, "0F1")),
                     TF_EDGE_RANK_ORDER | TF_EDGE_MICROBATCH);
    assert_int_equal(edge_rule(&g, node(&s, "1B0"), node(&s, "1F1")), TF_EDGE_RANK_ORDER);
    assert_int_equal(edge_rule(&g, node(&s, "0B1"), node(&s, "0B0")), 0);

    /* Critical path: 0F0 1F0 1B0 1F1 1B1 0B1; 0F1 and 0B0 have slack. */
    unsigned char critical[8];
    tf_dag_critical(&g, dur, critical);
    const char *on_path[] = {"0F0", "1F0", "1B0", "1F1", "1B1", "0B1"};
    for (int k = 0; k < 6; k++)
        assert_true(critical[node(&s, on_path[k])]);
    assert_false(critical[node(&s, "0F1")]);
    assert_false(critical[node(&s, "0B0")]);
    tf_dag_free(&g);
    tf_schedule_free(&s);
}

/* The same schedule with 0.5 ms p2p lag on cross-rank edges:
 * 1F0 [1.5,2.5] 1B0 [2.5,4.5] 0B0 [5,7] 1F1 [4.5,5.5] 1B1 [5.5,7.5]
 * 0B1 [8,10]: batch time 10. */
static void p2p_lag_on_cross_rank_edges(void **state)
{
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 2, &s, NULL), 0);
    tf_dag g;
    assert_int_equal(tf_dag_build(&s, 0.5, &g, NULL), 0);
    double dur[8], start[8];
    for (int i = 0; i < s.n_actions; i++)
        dur[i] = s.actions[i].type == TF_ACT_F ? 1.0 : 2.0;
    assert_true(tf_dag_longest_path(&g, dur, start) == 10.0);
    assert_true(start[node(&s, "1F0")] == 1.5);
    assert_true(start[node(&s, "0B0")] == 5.0);
    assert_true(start[node(&s, "0B1")] == 8.0);
    for (int u = 0; u < g.n; u++)
        for (int e = g.succ_offset[u]; e < g.succ_offset[u + 1]; e++)
            assert_true(g.lag[e] ==
                        (s.actions[u].rank != s.actions[g.succ[e]].rank ? 0.5 : 0.0));
    tf_dag_free(&g);
    tf_schedule_free(&s);
}

/* Split backward: F -> I, I -> W, and I passes the gradient to the
 * previous stage's I (rules 3 and 5 of tf/dag.h). */
static void split_backward_edges(void **state)
{
    const char *rank0[] = {"0F0", "0I0", "0W0"};
    const char *rank1[] = {"1F0", "1I0", "1W0"};
    const char *const *rows[] = {rank0, rank1};
    int len[] = {3, 3};
    tf_schedule s;
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){rows, len, 2}, 1, "test", &s, NULL), 0);
    tf_dag g;
    assert_int_equal(tf_dag_build(&s, 0.0, &g, NULL), 0);
    assert_true(edge_rule(&g, node(&s, "0F0"), node(&s, "0I0")) & TF_EDGE_BACKWARD_AFTER_FORWARD);
    assert_true(edge_rule(&g, node(&s, "1I0"), node(&s, "1W0")) & TF_EDGE_BACKWARD_AFTER_FORWARD);
    assert_int_equal(edge_rule(&g, node(&s, "1I0"), node(&s, "0I0")), TF_EDGE_BACKWARD_PREV_STAGE);
    assert_int_equal(edge_rule(&g, node(&s, "1W0"), node(&s, "0I0")), 0);
    /* F 1, I 2, W 3: 0F0 1F0 1I0 then 0I0 and 1W0 in parallel, 0W0 last. */
    double dur[6];
    for (int i = 0; i < 6; i++)
        dur[i] = s.actions[i].type == TF_ACT_F ? 1.0 : s.actions[i].type == TF_ACT_I ? 2.0 : 3.0;
    assert_true(tf_dag_longest_path(&g, dur, NULL) == 1 + 1 + 2 + 2 + 3);
    tf_dag_free(&g);
    tf_schedule_free(&s);
}

/* An order that makes rank 1 run microbatch 1 before microbatch 0 waits on
 * itself, e.g. 1F0 -> 1B0 (backward after forward) -> 1B1 (next
 * microbatch) -> 1F0 (rank order). */
static void deadlock_names_the_cycle(void **state)
{
    const char *rank0[] = {"0F0", "0F1", "0B0", "0B1"};
    const char *rank1[] = {"1F1", "1B1", "1F0", "1B0"};
    const char *const *rows[] = {rank0, rank1};
    int len[] = {4, 4};
    tf_schedule s;
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){rows, len, 2}, 2, "test", &s, NULL), 0);
    tf_dag g;
    tf_error err = {0};
    assert_int_equal(tf_dag_build(&s, 0.0, &g, &err), TF_ECYCLE);
    assert_contains(err.msg, "deadlock");
    assert_contains(err.msg, "1F0(rank 1) -> 1B0(rank 1) -> 1B1(rank 1) -> 1F0(rank 1)");
    assert_null(g.succ);
    tf_schedule_free(&s);

    /* A backward before its own forward on one rank. */
    const char *single[] = {"0B0", "0F0"};
    const char *const *rows1[] = {single};
    int len1[] = {2};
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){rows1, len1, 1}, 1, "test", &s, NULL),
                     0);
    assert_int_equal(tf_dag_build(&s, 0.0, &g, &err), TF_ECYCLE);
    assert_contains(err.msg, "0F0(rank 0) -> 0B0(rank 0) -> 0F0");
    tf_schedule_free(&s);
}

/* Two ranks, one stage each, F = 1 ms and B = 2 ms; rank 0 overlaps 0F1
 * with 0B0: rank 0: 0F0 (0F1;0B0)OVERLAP_F_B 0B1, rank 1: 1F0 1B0 1F1 1B1.
 * The pair is one node of 3 ms: it starts when 0B0's input (1B0) is in,
 * and 0F1's output leaves when 0B0 is done.  By hand:
 * 0F0 [0,1] 1F0 [1,2] 1B0 [2,4] pair [4,7] (0F1 [4,5], 0B0 [5,7])
 * 1F1 [7,8] 1B1 [8,10] 0B1 [10,12]: 12 ms, where the same order unpaired
 * takes 9 (0F1 runs at once, 1F1 at 4).  With a p2p lag of 0.5 ms:
 * 1F0 [1.5,2.5] 1B0 [2.5,4.5] pair [5,8] 1F1 [8.5,9.5] 1B1 [9.5,11.5]
 * 0B1 [12,14]. */
static void pair_is_one_node(void **state)
{
    const char *rank0[] = {"0F0", "(0F1;0B0)OVERLAP_F_B", "0B1"};
    const char *rank1[] = {"1F0", "1B0", "1F1", "1B1"};
    const char *plain0[] = {"0F0", "0F1", "0B0", "0B1"};
    const char *const *rows[] = {rank0, rank1}, *const *plain_rows[] = {plain0, rank1};
    int len[] = {3, 4}, plain_len[] = {4, 4};
    tf_schedule s, plain;
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){rows, len, 2}, 2, "test", &s, NULL), 0);
    assert_int_equal(
        tf_schedule_from_cells(&(tf_cell_rows){plain_rows, plain_len, 2}, 2, "test", &plain, NULL),
        0);
    tf_dag g, gp;
    assert_int_equal(tf_dag_build(&s, 0.0, &g, NULL), 0);
    assert_int_equal(tf_dag_build(&plain, 0.0, &gp, NULL), 0);
    double dur[8], start[8];
    for (int i = 0; i < 8; i++)
        dur[i] = s.actions[i].type == TF_ACT_F ? 1.0 : 2.0;
    assert_true(tf_dag_longest_path(&g, dur, start) == 12.0);
    assert_true(tf_dag_longest_path(&gp, dur, NULL) == 9.0);
    const char *cells[] = {"0F0", "1F0", "1B0", "0F1", "0B0", "1F1", "1B1", "0B1"};
    const double expected[] = {0, 1, 2, 4, 5, 7, 8, 10};
    for (int k = 0; k < 8; k++)
        assert_true(start[node(&s, cells[k])] == expected[k]);

    /* 1B0's gradient enters the pair at its start; 0F1's activation leaves
     * at its end; the two halves are joined by their rank-order edge. */
    int f1 = node(&s, "0F1"), b0 = node(&s, "0B0");
    assert_int_equal(edge_rule(&g, node(&s, "1B0"), f1),
                     TF_EDGE_BACKWARD_PREV_STAGE | TF_EDGE_PAIR);
    assert_int_equal(edge_rule(&g, node(&s, "1B0"), b0), 0);
    assert_int_equal(edge_rule(&g, b0, node(&s, "1F1")), TF_EDGE_FORWARD_NEXT_STAGE | TF_EDGE_PAIR);
    assert_int_equal(edge_rule(&g, f1, node(&s, "1F1")), 0);
    assert_int_equal(edge_rule(&g, f1, b0), TF_EDGE_RANK_ORDER | TF_EDGE_PAIR);
    /* The second half waits for nothing but the first. */
    int into_b0 = 0;
    for (int u = 0; u < g.n; u++)
        into_b0 += edge_rule(&g, u, b0) != 0;
    assert_int_equal(into_b0, 1);

    tf_dag_free(&g);
    tf_dag_free(&gp);
    assert_int_equal(tf_dag_build(&s, 0.5, &gp, NULL), 0);
    assert_true(fabs(tf_dag_longest_path(&gp, dur, start) - 14.0) < 1e-12);
    assert_true(fabs(start[f1] - 5.0) < 1e-12 && fabs(start[b0] - 6.0) < 1e-12);
    assert_true(fabs(start[node(&s, "1F1")] - 8.5) < 1e-12);
    tf_dag_free(&gp);
    tf_schedule_free(&plain);

    /* A pair's halves must be a forward and a backward, back to back. */
    s.actions[1].pair = TF_PAIR_NONE;
    tf_error err = {0};
    assert_int_equal(tf_dag_build(&s, 0.0, &g, &err), TF_EINVAL);
    assert_contains(err.msg, "0B0 (rank 0) is marked as half of an overlapped pair");
    assert_null(g.succ);
    tf_schedule_free(&s);
}

/* A pair whose backward needs the pair's own forward through another rank
 * cannot run: its input would come from its own output. */
static void pair_waiting_on_itself_deadlocks(void **state)
{
    const char *rank0[] = {"(0F0;0B0)OVERLAP_F_B"};
    const char *rank1[] = {"1F0", "1B0"};
    const char *const *rows[] = {rank0, rank1};
    int len[] = {1, 2};
    tf_schedule s;
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){rows, len, 2}, 1, "test", &s, NULL), 0);
    tf_dag g;
    tf_error err = {0};
    assert_int_equal(tf_dag_build(&s, 0.0, &g, &err), TF_ECYCLE);
    assert_contains(err.msg, "deadlock");
    tf_schedule_free(&s);
    /* On one rank, a forward and the backward of the same microbatch pair
     * up fine: the backward's input is the forward's own output. */
    const char *alone[] = {"(0F0;0B0)OVERLAP_F_B"};
    const char *const *rows1[] = {alone};
    int len1[] = {1};
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){rows1, len1, 1}, 1, "test", &s, NULL),
                     0);
    assert_int_equal(tf_dag_build(&s, 0.0, &g, &err), 0);
    assert_int_equal(g.n_edges, 1);
    tf_dag_free(&g);
    tf_schedule_free(&s);
}

/* LoopedBFS runs each stage's backwards from the last microbatch down:
 * rule 2 follows that order there (no false deadlock), and keeps m -> m+1
 * for the forwards. */
static void looped_bfs_backwards_run_down(void **state)
{
    tf_schedule s;
    assert_int_equal(tf_schedule_build("LoopedBFS", 2, 2, 3, &s, NULL), 0);
    tf_dag g;
    tf_error err = {0};
    if (tf_dag_build(&s, 0.0, &g, &err))
        fail_msg("%s", err.msg);
    assert_true(edge_rule(&g, node(&s, "2B2"), node(&s, "2B1")) & TF_EDGE_MICROBATCH);
    assert_int_equal(edge_rule(&g, node(&s, "2B1"), node(&s, "2B2")), 0);
    assert_true(edge_rule(&g, node(&s, "2F0"), node(&s, "2F1")) & TF_EDGE_MICROBATCH);
    assert_int_equal(edge_rule(&g, node(&s, "3B2"), node(&s, "2B2")),
                     TF_EDGE_BACKWARD_PREV_STAGE);
    tf_dag_free(&g);
    tf_schedule_free(&s);
}

/* Every built-in schedule's longest path equals the largest finish time of
 * an independent relaxation that repeats passes over all edges until no
 * start time changes (Bellman-Ford style), on random durations. */
static void longest_path_matches_relaxation(void **state)
{
    const char *names[] = {"GPipe",     "1F1B",          "Interleaved1F1B", "InterleavedZeroBubble",
                           "ZBVZeroBubble", "LoopedBFS", "DualPipeV"};
    uint64_t seed = 12345;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        int spr = k < 2 ? 1 : 2;
        tf_schedule s;
        assert_int_equal(tf_schedule_build(names[k], 4, spr, 8, &s, NULL), 0);
        tf_dag g;
        assert_int_equal(tf_dag_build(&s, 0.3, &g, NULL), 0);
        double *dur = malloc(sizeof(double) * s.n_actions);
        double *start = calloc((size_t)s.n_actions, sizeof(double));
        for (int i = 0; i < s.n_actions; i++)
            dur[i] = 0.5 + test_random(&seed);
        int changed = 1;
        while (changed) {
            changed = 0;
            for (int u = 0; u < g.n; u++)
                for (int e = g.succ_offset[u]; e < g.succ_offset[u + 1]; e++) {
                    double t = start[u] + dur[u] + g.lag[e];
                    if (t > start[g.succ[e]]) {
                        start[g.succ[e]] = t;
                        changed = 1;
                    }
                }
        }
        double makespan = 0.0;
        for (int i = 0; i < s.n_actions; i++)
            makespan = fmax(makespan, start[i] + dur[i]);
        assert_close(tf_dag_longest_path(&g, dur, NULL), makespan, 1e-12);
        free(dur);
        free(start);
        tf_dag_free(&g);
        tf_schedule_free(&s);
    }
}

/* The sender of a message between ranks, the DAG's rules 4 and 5 across
 * ranks: 1F1B on 2 ranks, 2 microbatches, and ZBVZeroBubble on 2 ranks,
 * whose stages 1 and 2 share rank 1 (no message between them) and whose
 * backwards are I and W. */
static void senders_between_ranks(void **state)
{
    (void)state;
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 2, &s, NULL), 0);
    int *index = tf_schedule_index(&s);
    assert_non_null(index);
#define AT(t, st, m) tf_schedule_find(&s, TF_ACT_##t, st, m)
    assert_int_equal(tf_schedule_sender(&s, index, AT(F, 1, 1)), AT(F, 0, 1));
    assert_int_equal(tf_schedule_sender(&s, index, AT(B, 0, 0)), AT(B, 1, 0));
    assert_int_equal(tf_schedule_sender(&s, NULL, AT(B, 0, 1)), AT(B, 1, 1));
    assert_int_equal(tf_schedule_sender(&s, index, AT(F, 0, 0)), -1); /* first stage */
    assert_int_equal(tf_schedule_sender(&s, index, AT(B, 1, 0)), -1); /* last stage */
    free(index);
    tf_schedule_free(&s);
    assert_int_equal(tf_schedule_build("ZBVZeroBubble", 2, 2, 4, &s, NULL), 0);
    index = tf_schedule_index(&s);
    assert_int_equal(tf_schedule_sender(&s, index, AT(F, 1, 0)), AT(F, 0, 0));
    assert_int_equal(tf_schedule_sender(&s, index, AT(F, 2, 0)), -1); /* stage 1 is on rank 1 */
    assert_int_equal(tf_schedule_sender(&s, index, AT(I, 0, 3)), AT(I, 1, 3));
    assert_int_equal(tf_schedule_sender(&s, index, AT(W, 0, 3)), -1);
#undef AT
    free(index);
    tf_schedule_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_f_one_b_by_hand),
        cmocka_unit_test(senders_between_ranks),
        cmocka_unit_test(p2p_lag_on_cross_rank_edges),
        cmocka_unit_test(split_backward_edges),
        cmocka_unit_test(deadlock_names_the_cycle),
        cmocka_unit_test(pair_is_one_node),
        cmocka_unit_test(pair_waiting_on_itself_deadlocks),
        cmocka_unit_test(looped_bfs_backwards_run_down),
        cmocka_unit_test(longest_path_matches_relaxation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
