/* test_freeze_fast.c - the fast solver (tf_freeze_solve_fast) against the
 * lp_solve reference (tf_freeze_solve) on seeded random instances of every
 * built-in schedule, both objectives: same makespan (1e-9 relative), same
 * total freeze (1e-6 relative), same largest ratio for spread, and a plan
 * that meets the caps and whose durations give the reported makespan. */
#include <math.h>

#include "freeze_instance.h"
#include "test_util.h"
#include "tf/dag.h"
#include "tf/freeze.h"
#include "tf/schedule.h"

/* Random times as random_instance draws them, `equal` for ties; some frozen
 * durations are 0; caps of 0 and 1 common. */
static void fast_instance(instance *x, const char *name, int ranks, int spr, int mb,
                          double p2p, int equal, uint64_t *seed)
{
    const instance_options o = {.equal = equal, .zero_frozen_below = 0.15,
                                .cap_zero_below = 0.15, .cap_one_above = 0.85};
    random_instance(x, name, ranks, spr, mb, p2p, &o, seed);
}

static void summarise(const instance *x, const tf_freeze_result *r, double *sum, double *max)
{
    *sum = 0.0;
    *max = 0.0;
    for (int i = 0; i < x->s.n_actions; i++) {
        *sum += r->ratio[i];
        if (r->ratio[i] > *max)
            *max = r->ratio[i];
    }
}

static int compare(const char *name, int ranks, int spr, int mb, double p2p, int equal,
                   tf_objective objective, uint64_t seed_value)
{
    uint64_t seed = seed_value;
    instance x;
    fast_instance(&x, name, ranks, spr, mb, p2p, equal, &seed);
    tf_freeze_result ref, fast;
    tf_error err = {0};
    assert_int_equal(tf_freeze_solve(&x.s, &x.g, x.max_ms, x.min_ms, x.cap, objective, &ref,
                                     &err), 0);
    int rc = tf_freeze_solve_fast(&x.s, &x.g, x.max_ms, x.min_ms, x.cap, objective, &fast, &err);
    if (rc)
        fail_msg("%s %dx%d mb %d seed %llu: %s", name, ranks, spr, mb,
                 (unsigned long long)seed_value, err.msg);
    assert_string_equal(fast.solver, "fast");
    assert_string_equal(fast.status, "optimal");
    instance_check_plan(&x, &fast);
    double ref_sum, ref_max, fast_sum, fast_max;
    summarise(&x, &ref, &ref_sum, &ref_max);
    summarise(&x, &fast, &fast_sum, &fast_max);
    /* The batch time is the first objective, the same for both: compare
     * spread's with least-freeze's, because freeze_lpsolve.c may relax the bound
     * by 1e-9 relative in spread's later stages and spread then uses it. */
    double best_T = ref.makespan;
    if (objective == TF_OBJECTIVE_SPREAD) {
        tf_freeze_result least;
        assert_int_equal(tf_freeze_solve(&x.s, &x.g, x.max_ms, x.min_ms, x.cap,
                                         TF_OBJECTIVE_LEAST_FREEZE, &least, &err), 0);
        best_T = least.makespan;
        tf_freeze_result_free(&least);
    }
    assert_close(fast.makespan, best_T, 1e-9);
    assert_close(fast_sum, ref_sum, 1e-6);
    if (objective == TF_OBJECTIVE_SPREAD)
        assert_close(fast_max, ref_max, 1e-6);
    tf_freeze_result_free(&ref);
    tf_freeze_result_free(&fast);
    instance_free(&x);
    return 1;
}

typedef struct shape {
    const char *name;
    int ranks, spr, mb;
} shape;

static const shape shapes[] = {
    {"GPipe", 2, 1, 3},          {"GPipe", 4, 1, 6},
    {"1F1B", 2, 1, 4},           {"1F1B", 4, 1, 8},        {"1F1B", 4, 1, 2},
    {"Interleaved1F1B", 2, 2, 4}, {"Interleaved1F1B", 4, 2, 8},
    {"InterleavedZeroBubble", 2, 2, 4}, {"InterleavedZeroBubble", 4, 2, 8},
    {"ZBVZeroBubble", 2, 2, 4},  {"ZBVZeroBubble", 4, 2, 8},
    {"LoopedBFS", 2, 2, 4},      {"DualPipeV", 2, 2, 4},   {"DualPipeV", 4, 2, 9},
};

/* Least-freeze on every schedule: random and tied times, with and without
 * lag; 8 seeds per case. */
static void least_freeze_matches_lp_solve(void **state)
{
    (void)state;
    int count = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int seed = 1; seed <= 8; seed++)
            for (int variant = 0; variant < 3; variant++)
                count += compare(shapes[k].name, shapes[k].ranks, shapes[k].spr, shapes[k].mb,
                                 variant == 1 ? 0.3 : 0.0, variant == 2,
                                 TF_OBJECTIVE_LEAST_FREEZE, 1000u * k + 10u * seed + variant);
    assert_true(count >= 250);
}

/* Spread on every schedule, the same cases as least-freeze. */
static void spread_matches_lp_solve(void **state)
{
    (void)state;
    int count = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int seed = 1; seed <= 8; seed++)
            for (int variant = 0; variant < 3; variant++)
                count += compare(shapes[k].name, shapes[k].ranks, shapes[k].spr, shapes[k].mb,
                                 variant == 1 ? 0.3 : 0.0, variant == 2, TF_OBJECTIVE_SPREAD,
                                 7000u + 100u * k + 10u * seed + variant);
    assert_true(count >= 250);
}

/* Medium instances of every schedule (250-1,000 actions), where the
 * solver re-solves its pricing problem from the previous optimal tree many
 * times: random, lagged and tied times. */
static void medium_matches_lp_solve(void **state)
{
    (void)state;
    static const shape medium[] = {
        {"GPipe", 8, 1, 16},          {"1F1B", 8, 1, 16},          {"1F1B", 16, 1, 32},
        {"Interleaved1F1B", 4, 2, 16}, {"InterleavedZeroBubble", 4, 2, 16},
        {"ZBVZeroBubble", 4, 2, 16},  {"ZBVZeroBubble", 8, 2, 32},
    };
    int count = 0;
    for (size_t k = 0; k < sizeof medium / sizeof medium[0]; k++)
        for (int variant = 0; variant < 4; variant++)
            count += compare(medium[k].name, medium[k].ranks, medium[k].spr, medium[k].mb,
                             variant == 1 ? 0.2 : 0.0, variant == 2,
                             variant == 3 ? TF_OBJECTIVE_SPREAD : TF_OBJECTIVE_LEAST_FREEZE,
                             90000u + 10u * k + variant);
    assert_int_equal(count, 28);
}

/* Nothing freezable: the unfrozen schedule, no solves. */
static void nothing_freezable(void **state)
{
    (void)state;
    uint64_t seed = 5;
    instance x;
    fast_instance(&x, "1F1B", 2, 1, 4, 0.0, 0, &seed);
    for (int i = 0; i < x.s.n_actions; i++)
        x.min_ms[i] = x.max_ms[i];
    tf_freeze_result r;
    assert_int_equal(tf_freeze_solve_fast(&x.s, &x.g, x.max_ms, x.min_ms, x.cap,
                                          TF_OBJECTIVE_LEAST_FREEZE, &r, NULL), 0);
    assert_close(r.makespan, tf_dag_longest_path(&x.g, x.max_ms, NULL), 1e-12);
    for (int i = 0; i < x.s.n_actions; i++)
        assert_true(r.ratio[i] == 0.0);
    tf_freeze_result_free(&r);
    instance_free(&x);
}

/* Solves a 1F1B instance of 8 ranks x `microbatches` with --solver auto
 * and checks that `expected` ran. */
static void expect_auto_picks(int microbatches, const char *expected)
{
    uint64_t seed = 11;
    instance x;
    fast_instance(&x, "1F1B", 8, 1, microbatches, 0.0, 0, &seed);
    tf_freeze_result r;
    assert_int_equal(tf_freeze_solve_with(TF_SOLVER_AUTO, &x.s, &x.g, x.max_ms, x.min_ms, x.cap,
                                          TF_OBJECTIVE_LEAST_FREEZE, &r, NULL),
                     0);
    assert_string_equal(r.solver, expected);
    tf_freeze_result_free(&r);
    instance_free(&x);
}

/* auto: lp_solve below 1,024 actions, the fast solver from there on,
 * and tf_freeze_solve_with reports the one that ran. */
static void auto_picks_by_size(void **state)
{
    (void)state;
    assert_int_equal(tf_solver_for_size(1), TF_SOLVER_LP_SOLVE);
    assert_int_equal(tf_solver_for_size(1023), TF_SOLVER_LP_SOLVE);
    assert_int_equal(tf_solver_for_size(1024), TF_SOLVER_FAST);
    assert_int_equal(tf_solver_for_size(131072), TF_SOLVER_FAST);
    expect_auto_picks(64, "fast");     /* 2 x 8 x 64 = 1,024 actions */
    expect_auto_picks(63, "lp_solve"); /* 1,008 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_picks_by_size),
        cmocka_unit_test(least_freeze_matches_lp_solve),
        cmocka_unit_test(spread_matches_lp_solve),
        cmocka_unit_test(medium_matches_lp_solve),
        cmocka_unit_test(nothing_freezable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
