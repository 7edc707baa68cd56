/* test_freeze.c - the freeze LP against known answers and an independent
 * formulation.
 *
 * The independent check: the batch time is the longest path, so "T >= every
 * start-to-end path's length" is an equivalent LP with no start-time
 * variables at all.  For small DAGs every path is enumerated and that LP is
 * solved separately (lexicographically, by fixing each optimum); its optima
 * must equal the planner's on every built-in schedule, with and without p2p
 * lag, per-stage caps and both objectives. */
#include <lpsolve/lp_lib.h>
#include <math.h>

#include "freeze_instance.h"
#include "test_util.h"
#include "tf/dag.h"
#include "tf/freeze.h"
#include "tf/schedule.h"

/* Depth-first enumeration of all source-to-sink paths (ascending node
 * lists), each turned into a row: T + sum d_i r_i >= sum max_i + lags. */
typedef struct path_lp {
    lprec *lp;
    int n, k, col_T;
    int *ratio_column;
    int *stack;
    double *lag_to;
    int rows;
} path_lp;

static int has_predecessor(const tf_dag *g, int v)
{
    for (int u = 0; u < g->n; u++)
        for (int e = g->succ_offset[u]; e < g->succ_offset[u + 1]; e++)
            if (g->succ[e] == v)
                return 1;
    return 0;
}

static void add_path_row(path_lp *p, const instance *x, int depth, double lags)
{
    int *cols = malloc(sizeof(int) * (depth + 1));
    double *vals = malloc(sizeof(double) * (depth + 1));
    int count = 0;
    double rhs = lags;
    cols[count] = p->col_T;
    vals[count++] = 1.0;
    for (int k = 0; k < depth; k++) {
        int i = p->stack[k];
        rhs += x->max_ms[i];
        if (p->ratio_column[i]) {
            cols[count] = p->ratio_column[i];
            vals[count++] = x->max_ms[i] - x->min_ms[i];
        }
    }
    assert_true(add_constraintex(p->lp, count, vals, cols, GE, rhs));
    p->rows++;
    free(cols);
    free(vals);
}

static void walk(path_lp *p, const instance *x, int u, int depth, double lags)
{
    p->stack[depth++] = u;
    const tf_dag *g = &x->g;
    if (g->succ_offset[u] == g->succ_offset[u + 1]) {
        add_path_row(p, x, depth, lags);
        return;
    }
    for (int e = g->succ_offset[u]; e < g->succ_offset[u + 1]; e++)
        walk(p, x, g->succ[e], depth, lags + g->lag[e]);
}

/* Number of paths, to skip instances too large to enumerate. */
static double count_paths(const instance *x)
{
    const tf_dag *g = &x->g;
    double *paths_from = calloc((size_t)g->n, sizeof(double));
    double total = 0;
    for (int k = g->n - 1; k >= 0; k--) {
        int u = g->topo[k];
        if (g->succ_offset[u] == g->succ_offset[u + 1])
            paths_from[u] = 1;
        for (int e = g->succ_offset[u]; e < g->succ_offset[u + 1]; e++)
            paths_from[u] += paths_from[g->succ[e]];
    }
    for (int u = 0; u < g->n; u++)
        if (!has_predecessor(g, u))
            total += paths_from[u];
    free(paths_from);
    return total;
}

typedef struct optimum {
    double makespan, sum_ratio, max_ratio;
} optimum;

static double solve_checked(lprec *lp)
{
    assert_int_equal(solve(lp), OPTIMAL);
    return get_objective(lp);
}

/* Solves the path LP lexicographically: T, then (spread) max r, then sum r. */
static optimum path_optimum(const instance *x, tf_objective objective)
{
    path_lp p = {0};
    int n = x->s.n_actions;
    p.n = n;
    p.ratio_column = calloc((size_t)n, sizeof(int));
    p.stack = malloc(sizeof(int) * (n + 1));
    for (int i = 0; i < n; i++)
        if (tf_action_freezable(&x->s.actions[i], x->max_ms[i], x->min_ms[i]))
            p.ratio_column[i] = ++p.k;
    p.col_T = p.k + 1;
    int col_z = p.k + 2;
    p.lp = make_lp(0, col_z);
    set_verbose(p.lp, NEUTRAL);
    set_add_rowmode(p.lp, TRUE);
    for (int i = 0; i < n; i++)
        if (!has_predecessor(&x->g, i))
            walk(&p, x, i, 0, 0.0);
    for (int st = 0; st < x->s.stages; st++) {
        int cols[1024], count = 0;
        double vals[1024];
        for (int i = 0; i < n; i++)
            if (p.ratio_column[i] && x->s.actions[i].stage == st) {
                cols[count] = p.ratio_column[i];
                vals[count++] = 1.0;
            }
        if (count)
            add_constraintex(p.lp, count, vals, cols, LE, x->cap[st] * count);
    }
    for (int c = 1; c <= p.k; c++) {
        int cols[2] = {c, col_z};
        double vals[2] = {1, -1};
        add_constraintex(p.lp, 2, vals, cols, LE, 0);
    }
    set_add_rowmode(p.lp, FALSE);
    for (int c = 1; c <= p.k; c++)
        set_upbo(p.lp, c, 1.0);
    set_minim(p.lp);

    optimum o;
    double one = 1.0;
    set_obj_fnex(p.lp, 1, &one, &p.col_T);
    o.makespan = solve_checked(p.lp);
    set_upbo(p.lp, p.col_T, o.makespan * (1 + 1e-10));
    if (objective == TF_OBJECTIVE_SPREAD) {
        set_obj_fnex(p.lp, 1, &one, &col_z);
        o.max_ratio = solve_checked(p.lp);
        set_upbo(p.lp, col_z, o.max_ratio + 1e-10);
    }
    int *cols = malloc(sizeof(int) * (p.k + 1));
    double *vals = malloc(sizeof(double) * (p.k + 1));
    for (int c = 0; c < p.k; c++) {
        cols[c] = c + 1;
        vals[c] = 1.0;
    }
    set_obj_fnex(p.lp, p.k, vals, cols);
    o.sum_ratio = p.k ? solve_checked(p.lp) : 0.0;
    if (objective != TF_OBJECTIVE_SPREAD)
        o.max_ratio = NAN;
    free(cols);
    free(vals);
    delete_lp(p.lp);
    free(p.ratio_column);
    free(p.stack);
    return o;
}

static void compare_with_paths(const char *name, int ranks, int spr, int mb, uint64_t seed_value,
                               int *checked)
{
    /* Random times, no zero-length frozen actions; caps of 0 and 1 common. */
    const instance_options options = {.zero_frozen_below = 0.0, .cap_zero_below = 0.1,
                                      .cap_one_above = 0.9};
    uint64_t seed = seed_value;
    for (int variant = 0; variant < 4; variant++) {
        instance x;
        double p2p = variant & 1 ? 0.05 + 0.5 * test_random(&seed) : 0.0;
        random_instance(&x, name, ranks, spr, mb, p2p, &options, &seed);
        if (count_paths(&x) > 4000) {
            instance_free(&x);
            continue;
        }
        tf_objective objective = variant & 2 ? TF_OBJECTIVE_SPREAD : TF_OBJECTIVE_LEAST_FREEZE;
        tf_freeze_result r;
        tf_error err = {0};
        int rc = instance_solve(&x, TF_SOLVER_LP_SOLVE, objective, &r, &err);
        if (rc)
            fail_msg("%s p=%d m=%d: %s", name, ranks, mb, err.msg);
        instance_check_plan(&x, &r);
        optimum o = path_optimum(&x, objective);
        assert_close(r.makespan, o.makespan, 1e-6);
        double sum = 0.0, largest = 0.0;
        for (int i = 0; i < x.s.n_actions; i++) {
            sum += r.ratio[i];
            largest = fmax(largest, r.ratio[i]);
        }
        assert_close(sum, o.sum_ratio, 1e-6);
        if (objective == TF_OBJECTIVE_SPREAD)
            assert_close(largest, o.max_ratio, 1e-6);
        (*checked)++;
        tf_freeze_result_free(&r);
        instance_free(&x);
    }
}

static void matches_path_formulation_on_every_schedule(void **state)
{
    int checked = 0;
    for (int ranks = 1; ranks <= 3; ranks++)
        for (int mb = 1; mb <= 4; mb++) {
            compare_with_paths("GPipe", ranks, 1, mb, 100 + ranks * 10 + mb, &checked);
            compare_with_paths("1F1B", ranks, 1, mb, 200 + ranks * 10 + mb, &checked);
        }
    const char *split[] = {"Interleaved1F1B", "InterleavedZeroBubble", "ZBVZeroBubble"};
    for (int k = 0; k < 3; k++)
        for (int ranks = 1; ranks <= 2; ranks++)
            for (int mb = 1; mb <= 4; mb++) {
                tf_schedule probe;
                if (tf_schedule_build(split[k], ranks, 2, mb, &probe, NULL) != 0)
                    continue; /* a shape PyTorch rejects */
                tf_schedule_free(&probe);
                compare_with_paths(split[k], ranks, 2, mb, 300 + k * 100 + ranks * 10 + mb,
                                   &checked);
            }
    print_message("checked %d instances against the path formulation\n", checked);
    assert_true(checked >= 60);
}

/* LoopedBFS (backwards from the last microbatch down) and DualPipeV (its
 * overlapped pairs one node each) against the path formulation: the paths
 * run through the DAG with its pairs joined, the LP through the same DAG,
 * the two formulations nothing else in common. */
static void matches_path_formulation_on_new_schedules(void **state)
{
    int checked = 0;
    for (int ranks = 1; ranks <= 2; ranks++)
        for (int mb = 1; mb <= 3; mb++)
            compare_with_paths("LoopedBFS", ranks, 2, mb, 700 + ranks * 10 + mb, &checked);
    for (int mb = 2; mb <= 4; mb++)
        compare_with_paths("DualPipeV", 1, 2, mb, 800 + mb, &checked);
    compare_with_paths("DualPipeV", 2, 2, 4, 820, &checked);
    print_message("checked %d LoopedBFS and DualPipeV instances against the path formulation\n",
                  checked);
    assert_true(checked >= 24);
}

/* One rank, GPipe, 2 microbatches: F F B B in a chain.  With cap 0.5 the
 * mean ratio may reach 0.5, so T = 2F + 2B - (B - Bf) and least freezing
 * uses exactly the budget: sum r = 1. */
static void single_rank_chain_by_hand(void **state)
{
    instance x = {0};
    assert_int_equal(tf_schedule_build("GPipe", 1, 1, 2, &x.s, NULL), 0);
    assert_int_equal(tf_dag_build(&x.s, 0.0, &x.g, NULL), 0);
    double max_ms[4], min_ms[4], cap = 0.5;
    for (int i = 0; i < 4; i++) {
        int backward = x.s.actions[i].type == TF_ACT_B;
        max_ms[i] = backward ? 4.0 : 1.0;
        min_ms[i] = backward ? 1.0 : 1.0;
    }
    x.max_ms = max_ms;
    x.min_ms = min_ms;
    x.cap = &cap;
    tf_freeze_result r;
    assert_int_equal(instance_solve(&x, TF_SOLVER_LP_SOLVE, TF_OBJECTIVE_LEAST_FREEZE, &r, NULL),
                     0);
    assert_close(r.makespan, 2 * 1.0 + 2 * 4.0 - 3.0, 1e-9);
    double sum = 0;
    for (int i = 0; i < 4; i++)
        sum += r.ratio[i];
    assert_close(sum, 1.0, 1e-9);
    tf_freeze_result_free(&r);
    /* Spread splits the same budget evenly: both ratios 0.5. */
    assert_int_equal(instance_solve(&x, TF_SOLVER_LP_SOLVE, TF_OBJECTIVE_SPREAD, &r, NULL), 0);
    for (int i = 0; i < 4; i++)
        if (x.s.actions[i].type == TF_ACT_B)
            assert_close(r.ratio[i], 0.5, 1e-9);
    tf_freeze_result_free(&r);
    tf_dag_free(&x.g);
    tf_schedule_free(&x.s);
}

/* Freezing off the critical path buys nothing, so least-freeze leaves it
 * at 0.  GPipe, 2 ranks, 4 microbatches: stage 1 is slow and fixed, so
 * stage 0's backwards wait on it with slack, except the last, which ends
 * the batch: only 0B3 freezes. */
static void least_freeze_does_not_freeze_without_gain(void **state)
{
    instance x = {0};
    assert_int_equal(tf_schedule_build("GPipe", 2, 1, 4, &x.s, NULL), 0);
    assert_int_equal(tf_dag_build(&x.s, 0.0, &x.g, NULL), 0);
    int n = x.s.n_actions;
    double *max_ms = malloc(sizeof(double) * n), *min_ms = malloc(sizeof(double) * n);
    /* Stage 1 is slow (F 10, B 20) and fixed; stage 0 (F 1, B 2 -> 1) has
     * slack everywhere except its last backward, which ends the batch. */
    for (int i = 0; i < n; i++) {
        const tf_action *a = &x.s.actions[i];
        int slow = a->stage == 1;
        max_ms[i] = a->type == TF_ACT_F ? (slow ? 10 : 1) : (slow ? 20 : 2);
        min_ms[i] = a->type == TF_ACT_B && !slow ? 1 : max_ms[i];
    }
    double cap[2] = {1.0, 1.0};
    tf_freeze_problem problem = instance_problem(&x, TF_SOLVER_LP_SOLVE, TF_OBJECTIVE_LEAST_FREEZE);
    problem.max_ms = max_ms;
    problem.min_ms = min_ms;
    problem.cap = cap;
    tf_freeze_result r;
    assert_int_equal(solve_alone(&problem, &r, NULL), 0);
    double unfrozen = tf_dag_longest_path(&x.g, max_ms, NULL);
    assert_close(r.makespan, unfrozen - 1.0, 1e-9);
    int frozen = 0;
    for (int i = 0; i < n; i++)
        frozen += r.ratio[i] > 0;
    assert_int_equal(frozen, 1);
    assert_true(r.ratio[tf_schedule_find(&x.s, TF_ACT_B, 0, 3)] == 1.0);
    tf_freeze_result_free(&r);
    free(max_ms);
    free(min_ms);
    tf_dag_free(&x.g);
    tf_schedule_free(&x.s);
}

/* Degenerate inputs: cap 0 reproduces the unfrozen schedule, cap 1 the all
 * frozen one; zero-length frozen actions and equal times solve fine. */
static void degenerate_caps_and_times(void **state)
{
    instance x = {0};
    assert_int_equal(tf_schedule_build("1F1B", 3, 1, 5, &x.s, NULL), 0);
    assert_int_equal(tf_dag_build(&x.s, 0.0, &x.g, NULL), 0);
    int n = x.s.n_actions;
    double *max_ms = malloc(sizeof(double) * n), *min_ms = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        max_ms[i] = x.s.actions[i].type == TF_ACT_F ? 1.0 : 2.0;
        min_ms[i] = x.s.actions[i].type == TF_ACT_F ? 1.0 : 0.0;
    }
    double zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    tf_freeze_problem problem = instance_problem(&x, TF_SOLVER_LP_SOLVE, TF_OBJECTIVE_LEAST_FREEZE);
    problem.max_ms = max_ms;
    problem.min_ms = min_ms;
    problem.cap = zero;
    tf_freeze_result r;
    assert_int_equal(solve_alone(&problem, &r, NULL), 0);
    assert_close(r.makespan, tf_dag_longest_path(&x.g, max_ms, NULL), 1e-9);
    for (int i = 0; i < n; i++)
        assert_true(r.ratio[i] == 0.0);
    tf_freeze_result_free(&r);
    problem.cap = one;
    problem.objective = TF_OBJECTIVE_SPREAD;
    assert_int_equal(solve_alone(&problem, &r, NULL), 0);
    assert_close(r.makespan, tf_dag_longest_path(&x.g, min_ms, NULL), 1e-9);
    tf_freeze_result_free(&r);
    free(max_ms);
    free(min_ms);
    tf_dag_free(&x.g);
    tf_schedule_free(&x.s);
}

/* Uniform stage times on deep pipelines once made lp_solve's dual simplex
 * cycle forever under its default scaling.  Both must solve, and agree with
 * the structured solver (a different algorithm: decomposition with a network
 * simplex) to 1e-9 on the batch time and 1e-6 on the total freezing. */
static void uniform_deep_pipelines_solve(void **state)
{
    const struct {
        const char *name;
        int ranks, spr, mb;
        double cap;
    } cases[] = {{"ZBVZeroBubble", 8, 2, 32, 0.5}, {"GPipe", 16, 1, 32, 0.8}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        instance x = {0};
        assert_int_equal(tf_schedule_build(cases[k].name, cases[k].ranks, cases[k].spr,
                                           cases[k].mb, &x.s, NULL),
                         0);
        assert_int_equal(tf_dag_build(&x.s, 0.0, &x.g, NULL), 0);
        int n = x.s.n_actions;
        x.max_ms = malloc(sizeof(double) * n);
        x.min_ms = malloc(sizeof(double) * n);
        x.cap = malloc(sizeof(double) * x.s.stages);
        for (int i = 0; i < n; i++) {
            /* 2 layers per stage of the example model */
            static const double full[] = {3.8, 8.2, 4.0, 4.2}, frozen[] = {3.8, 4.2, 4.0, 0.04};
            x.max_ms[i] = full[x.s.actions[i].type];
            x.min_ms[i] = frozen[x.s.actions[i].type];
        }
        for (int st = 0; st < x.s.stages; st++)
            x.cap[st] = cases[k].cap;
        tf_freeze_result r, fast;
        tf_error err = {0};
        if (instance_solve(&x, TF_SOLVER_LP_SOLVE, TF_OBJECTIVE_LEAST_FREEZE, &r, &err))
            fail_msg("%s: %s", cases[k].name, err.msg);
        instance_check_plan(&x, &r);
        assert_true(r.makespan < tf_dag_longest_path(&x.g, x.max_ms, NULL));
        if (instance_solve(&x, TF_SOLVER_FAST, TF_OBJECTIVE_LEAST_FREEZE, &fast, &err))
            fail_msg("%s (fast): %s", cases[k].name, err.msg);
        assert_close(r.makespan, fast.makespan, 1e-9);
        double sum = 0, sum_fast = 0;
        for (int i = 0; i < n; i++) {
            sum += r.ratio[i];
            sum_fast += fast.ratio[i];
        }
        assert_close(sum, sum_fast, 1e-6);
        tf_freeze_result_free(&fast);
        tf_freeze_result_free(&r);
        instance_free(&x);
    }
}

/* Expects tf_freeze_solve to refuse p with TF_EINVAL saying `message`,
 * leaving nothing allocated in the result. */
static void expect_refused(const tf_freeze_problem *p, const char *message)
{
    tf_freeze_result r;
    memset(&r, 0xff, sizeof r);
    tf_error err = {0};
    assert_int_equal(tf_freeze_solve(p, NULL, &r, &err), TF_EINVAL);
    assert_contains(err.msg, message);
    assert_null(r.ratio);
    assert_null(r.duration);
    assert_null(r.start);
}

/* A problem the solvers cannot take is refused by name before either
 * runs: what is missing or out of range, and its value. */
static void bad_problem_is_named(void **state)
{
    (void)state;
    uint64_t seed = 3;
    const instance_options options = {.cap_one_above = 1.0};
    instance x;
    random_instance(&x, "1F1B", 2, 1, 2, 0.0, &options, &seed);
    tf_freeze_problem p = instance_problem(&x, TF_SOLVER_AUTO, TF_OBJECTIVE_LEAST_FREEZE);
    p.cap = NULL;
    expect_refused(&p, "freeze problem: cap is NULL");
    p = instance_problem(&x, TF_SOLVER_AUTO, TF_OBJECTIVE_LEAST_FREEZE);
    tf_dag other;
    tf_schedule bigger;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 3, &bigger, NULL), 0);
    assert_int_equal(tf_dag_build(&bigger, 0.0, &other, NULL), 0);
    p.dag = &other;
    expect_refused(&p, "dag of 12 actions for a schedule of 8");
    p.dag = &x.g;
    p.solver = (tf_solver)7;
    expect_refused(&p, "solver 7 unknown");
    p.solver = TF_SOLVER_FAST;
    p.objective = (tf_objective)-1;
    expect_refused(&p, "objective -1 unknown");
    p.objective = TF_OBJECTIVE_SPREAD;
    x.cap[1] = 1.5;
    expect_refused(&p, "cap[1] = 1.5: must be in [0, 1]");
    x.cap[1] = 0.5;
    x.min_ms[3] = x.max_ms[3] + 1.0;
    expect_refused(&p, "min_ms[3]");
    x.min_ms[3] = x.max_ms[3];
    x.max_ms[5] = NAN;
    expect_refused(&p, "max_ms[5] = nan: must be finite");
    tf_dag_free(&other);
    tf_schedule_free(&bigger);
    instance_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(single_rank_chain_by_hand),
        cmocka_unit_test(least_freeze_does_not_freeze_without_gain),
        cmocka_unit_test(degenerate_caps_and_times),
        cmocka_unit_test(matches_path_formulation_on_every_schedule),
        cmocka_unit_test(matches_path_formulation_on_new_schedules),
        cmocka_unit_test(uniform_deep_pipelines_solve),
        cmocka_unit_test(bad_problem_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
