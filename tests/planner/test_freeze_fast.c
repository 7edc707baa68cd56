/* test_freeze_fast.c - the fast solver and CLP against the lp_solve
 * reference (tf_freeze_solve with each solver alone) on seeded random
 * instances of every built-in schedule, both objectives: same makespan (1e-9 relative), same
 * total freeze (1e-6 relative), same largest ratio for spread, and a plan
 * that meets the caps and whose durations give the reported makespan. */
#include <math.h>

#include "freeze_instance.h"
#include "test_util.h"
#include "tf/dag.h"
#include "tf/freeze.h"
#include "tf/profile.h"
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

static void summarise_ratios(int n, const tf_freeze_result *r, double *sum, double *max)
{
    *sum = 0.0;
    *max = 0.0;
    for (int i = 0; i < n; i++) {
        *sum += r->ratio[i];
        if (r->ratio[i] > *max)
            *max = r->ratio[i];
    }
}

/* One solver's answer against lp_solve's (ref): the plan meets the caps,
 * the makespan is best_T, the total freeze (and for spread the largest
 * ratio) lp_solve's. */
static void check_against(instance *x, tf_solver solver, tf_objective objective, double best_T,
                          const tf_freeze_result *ref, const char *what)
{
    tf_freeze_result r;
    tf_error err = {0};
    if (instance_solve(x, solver, objective, &r, &err))
        fail_msg("%s: %s", what, err.msg);
    assert_string_equal(r.solver, tf_solver_name(solver));
    assert_string_equal(r.status, "optimal");
    instance_check_plan(x, &r);
    double ref_sum, ref_max, sum, max;
    summarise_ratios(x->s.n_actions, ref, &ref_sum, &ref_max);
    summarise_ratios(x->s.n_actions, &r, &sum, &max);
    assert_close(r.makespan, best_T, 1e-9);
    assert_close(sum, ref_sum, 1e-6);
    if (objective == TF_OBJECTIVE_SPREAD)
        assert_close(max, ref_max, 1e-6);
    tf_freeze_result_free(&r);
}

static int compare(const char *name, int ranks, int spr, int mb, double p2p, int equal,
                   tf_objective objective, uint64_t seed_value)
{
    uint64_t seed = seed_value;
    instance x;
    fast_instance(&x, name, ranks, spr, mb, p2p, equal, &seed);
    tf_freeze_result ref;
    tf_error err = {0};
    assert_int_equal(instance_solve(&x, TF_SOLVER_LP_SOLVE, objective, &ref, &err), 0);
    /* The batch time is the first objective, the same for both: compare
     * spread's with least-freeze's, because freeze_lpsolve.c may relax the bound
     * by 1e-9 relative in spread's later stages and spread then uses it. */
    double best_T = ref.makespan;
    if (objective == TF_OBJECTIVE_SPREAD) {
        tf_freeze_result least;
        assert_int_equal(
            instance_solve(&x, TF_SOLVER_LP_SOLVE, TF_OBJECTIVE_LEAST_FREEZE, &least, &err), 0);
        best_T = least.makespan;
        tf_freeze_result_free(&least);
    }
    char what[128];
    snprintf(what, sizeof what, "%s %dx%d mb %d seed %llu", name, ranks, spr, mb,
             (unsigned long long)seed_value);
    check_against(&x, TF_SOLVER_FAST, objective, best_T, &ref, what);
    check_against(&x, TF_SOLVER_CLP, objective, best_T, &ref, what);
    tf_freeze_result_free(&ref);
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

/* Medium instances of every schedule (250-1,024 actions), where the
 * solver re-solves its pricing problem from the previous optimal tree many
 * times: random, lagged and tied times. */
static void medium_matches_lp_solve(void **state)
{
    (void)state;
    static const shape medium[] = {
        {"GPipe", 8, 1, 16},          {"1F1B", 8, 1, 16},          {"1F1B", 16, 1, 32},
        {"Interleaved1F1B", 4, 2, 16}, {"InterleavedZeroBubble", 4, 2, 16},
        {"ZBVZeroBubble", 4, 2, 16},  {"ZBVZeroBubble", 8, 2, 32},
        /* Many cap rows against few microbatches: many caps slack in the
         * batch-time stage, where priced points give back freezing. */
        {"1F1B", 32, 1, 16},          {"GPipe", 16, 1, 16},
    };
    int count = 0;
    for (size_t k = 0; k < sizeof medium / sizeof medium[0]; k++)
        for (int variant = 0; variant < 4; variant++)
            count += compare(medium[k].name, medium[k].ranks, medium[k].spr, medium[k].mb,
                             variant == 1 ? 0.2 : 0.0, variant == 2,
                             variant == 3 ? TF_OBJECTIVE_SPREAD : TF_OBJECTIVE_LEAST_FREEZE,
                             90000u + 10u * k + variant);
    assert_int_equal(count, 36);
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
    assert_int_equal(instance_solve(&x, TF_SOLVER_FAST, TF_OBJECTIVE_LEAST_FREEZE, &r, NULL), 0);
    assert_close(r.makespan, tf_dag_longest_path(&x.g, x.max_ms, NULL), 1e-12);
    for (int i = 0; i < x.s.n_actions; i++)
        assert_true(r.ratio[i] == 0.0);
    tf_freeze_result_free(&r);
    instance_free(&x);
}

/* Solves an instance of `schedule` with --solver auto and checks that
 * `expected` ran. */
static void expect_auto_picks(const char *schedule, int ranks, int stages_per_rank,
                              int microbatches, const char *expected)
{
    uint64_t seed = 11;
    instance x;
    fast_instance(&x, schedule, ranks, stages_per_rank, microbatches, 0.0, 0, &seed);
    tf_freeze_problem p = instance_problem(&x, TF_SOLVER_AUTO, TF_OBJECTIVE_LEAST_FREEZE);
    tf_freeze_result r;
    assert_int_equal(solve_alone(&p, &r, NULL), 0);
    assert_string_equal(r.solver, expected);
    assert_string_equal(r.fallback, "");
    tf_freeze_result_free(&r);
    instance_free(&x);
}

/* Gives every action its stage's times: those of the stage's first action
 * of its type, as a stage-level profile does. */
static void stage_level_times(instance *x)
{
    for (int i = 0; i < x->s.n_actions; i++) {
        const tf_action *a = &x->s.actions[i];
        int first = tf_schedule_find(&x->s, a->type, a->stage, 0);
        x->max_ms[i] = x->max_ms[first];
        x->min_ms[i] = x->min_ms[first];
    }
}

/* One case of the rule alone: every cap `cap`, per-action or stage-level
 * times (the fast solver's slow cases are not solved here). */
typedef struct auto_case {
    const char *schedule;
    int ranks, stages_per_rank, microbatches;
    double cap;
    int stage_level;
    tf_solver expected;
} auto_case;

static void expect_auto_rule(const auto_case *c)
{
    uint64_t seed = 11;
    instance x;
    fast_instance(&x, c->schedule, c->ranks, c->stages_per_rank, c->microbatches, 0.0, 0, &seed);
    if (c->stage_level)
        stage_level_times(&x);
    for (int st = 0; st < x.s.stages; st++)
        x.cap[st] = c->cap;
    tf_freeze_problem p = instance_problem(&x, TF_SOLVER_AUTO, TF_OBJECTIVE_LEAST_FREEZE);
    assert_int_equal(tf_freeze_auto_solver(&p), c->expected);
    instance_free(&x);
}

/* auto: lp_solve below 1,024 actions, the fast solver from there on but
 * for more than 32 cap rows with fewer than 128 actions each (unless the
 * backward is split into I and W), and for a schedule that fills and
 * drains with more than 16 rows, fewer than 16 x rows actions per row and
 * per-action times, which CLP takes; the result names the one that ran. */
static void auto_picks_by_size(void **state)
{
    (void)state;
    assert_int_equal(TF_FAST_SOLVER_MIN_ACTIONS, 1024);
    assert_int_equal(TF_FAST_SOLVER_MAX_CAP_ROWS, 32);
    assert_int_equal(TF_FAST_SOLVER_MIN_ACTIONS_PER_CAP_ROW, 128);
    assert_int_equal(TF_FAST_SOLVER_MAX_FILL_DRAIN_ROWS, 16);
    assert_int_equal(TF_FAST_SOLVER_FILL_DRAIN_ACTIONS_PER_ROW2, 16);
    expect_auto_picks("1F1B", 8, 1, 64, "fast");     /* 2 x 8 x 64 = 1,024 actions */
    expect_auto_picks("1F1B", 8, 1, 63, "lp_solve"); /* 1,008 */
    expect_auto_picks("Interleaved1F1B", 35, 3, 5, "clp");
    static const auto_case cases[] = {
        /* 64 rows: 1,024 actions, 16 per row; 8,192, 128 per row.  32 rows,
         * 1,024 actions; 33 rows, 1,056. */
        {"1F1B", 64, 1, 8, 0.8, 0, TF_SOLVER_CLP},
        {"1F1B", 64, 1, 64, 0.8, 0, TF_SOLVER_FAST},
        {"1F1B", 32, 1, 16, 0.8, 0, TF_SOLVER_FAST},
        {"1F1B", 33, 1, 16, 0.8, 0, TF_SOLVER_CLP},
        /* 105 rows: 1,050 actions, 10 per row; 13,230, 126 per row; 13,440,
         * 128 per row; 840 actions, below 1,024; caps of 0 or 1 make no row. */
        {"Interleaved1F1B", 35, 3, 5, 0.8, 0, TF_SOLVER_CLP},
        {"Interleaved1F1B", 35, 3, 63, 0.8, 0, TF_SOLVER_CLP},
        {"Interleaved1F1B", 35, 3, 64, 0.8, 0, TF_SOLVER_FAST},
        {"Interleaved1F1B", 35, 3, 4, 0.8, 0, TF_SOLVER_LP_SOLVE},
        {"Interleaved1F1B", 35, 3, 5, 1.0, 0, TF_SOLVER_FAST},
        {"Interleaved1F1B", 35, 3, 5, 0.0, 0, TF_SOLVER_FAST},
        /* 34 rows of 36 actions each: Interleaved1F1B, 17 ranks x 2 stages x
         * 18 microbatches (1,224 actions), and ZBVZeroBubble, 17 ranks x 12
         * microbatches (1,224), whose split backward keeps the fast solver. */
        {"Interleaved1F1B", 17, 2, 18, 0.8, 0, TF_SOLVER_CLP},
        {"ZBVZeroBubble", 17, 2, 12, 0.8, 0, TF_SOLVER_FAST},
        /* Fill-drain: GPipe with 17 rows, 16 x 17 x 17 = 4,624 actions and
         * one microbatch fewer (4,590); 16 rows at 2,048; 1F1B, which does
         * not fill and drain, at 17 rows; LoopedBFS, 16 ranks x 2 stages,
         * 32 rows, 16,384 and 16,320 actions; no rows. */
        {"GPipe", 17, 1, 136, 0.8, 0, TF_SOLVER_FAST},
        {"GPipe", 17, 1, 135, 0.8, 0, TF_SOLVER_CLP},
        {"GPipe", 16, 1, 64, 0.8, 0, TF_SOLVER_FAST},
        {"1F1B", 17, 1, 64, 0.8, 0, TF_SOLVER_FAST},
        {"LoopedBFS", 16, 2, 256, 0.8, 0, TF_SOLVER_FAST},
        {"LoopedBFS", 16, 2, 255, 0.8, 0, TF_SOLVER_CLP},
        {"GPipe", 17, 1, 64, 1.0, 0, TF_SOLVER_FAST},
        /* ...but not with stage-level times; the many-rows rule still is. */
        {"GPipe", 17, 1, 135, 0.8, 1, TF_SOLVER_FAST},
        {"LoopedBFS", 16, 2, 255, 0.8, 1, TF_SOLVER_FAST},
        {"Interleaved1F1B", 17, 2, 18, 0.8, 1, TF_SOLVER_CLP},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_auto_rule(&cases[i]);
}

/* ZBVZeroBubble, 4 ranks x 8 microbatches (192 actions), every time about
 * 10 ms but one stage's backward_input_ms, `big`: the durations span six
 * orders of magnitude.  Times are drawn from seed unless given. */
static void wide_range_profile(char *json, size_t size, uint64_t seed, int big_stage,
                               double big, double cap)
{
    int n = snprintf(json, size,
                     "{\"schedule\": \"ZBVZeroBubble\", \"ranks\": 4, \"microbatches\": 8, "
                     "\"max_freeze_ratio\": %.17g, \"stages\": [",
                     cap);
    for (int st = 0; st < 8; st++) {
        double f = 5 + 10 * test_random(&seed), i = 5 + 10 * test_random(&seed);
        double w = 5 + 10 * test_random(&seed), wf = w * 0.6 * test_random(&seed);
        n += snprintf(json + n, size - (size_t)n,
                      "%s{\"forward_ms\": %.6f, \"backward_input_ms\": %.17g, "
                      "\"backward_weight_ms\": %.6f, \"backward_weight_frozen_ms\": %.6f}",
                      st ? ", " : "", f, st == big_stage ? big : i, w, wf);
    }
    snprintf(json + n, size - (size_t)n, "]}");
}

/* Both solvers on a profile: the fast one must be as good as lp_solve
 * (lexicographically: batch time, then total freeze) within round-off,
 * meet the caps, and take few pricings. */
static void compare_on_profile(const char *json, tf_objective objective)
{
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_parse(json, "wide.json", &p, &err))
        fail_msg("%s", err.msg);
    const tf_schedule *s = &p.schedule;
    instance x = {0};
    x.max_ms = malloc(sizeof(double) * (size_t)s->n_actions);
    x.min_ms = malloc(sizeof(double) * (size_t)s->n_actions);
    assert_non_null(x.max_ms);
    assert_non_null(x.min_ms);
    tf_profile_durations(&p, x.max_ms, x.min_ms);
    assert_int_equal(tf_dag_build(s, p.p2p_ms, &x.g, &err), 0);
    x.cap = p.max_freeze_ratio;
    tf_freeze_problem problem = instance_problem(&x, TF_SOLVER_LP_SOLVE, objective);
    problem.schedule = s;
    tf_freeze_result ref, fast;
    assert_int_equal(solve_alone(&problem, &ref, &err), 0);
    problem.solver = TF_SOLVER_FAST;
    if (solve_alone(&problem, &fast, &err))
        fail_msg("%s", err.msg);
    /* lp_solve relaxes its makespan bound by up to 1e-9 when round-off
     * makes the exact one infeasible, so it may freeze less at a longer
     * batch: compare totals only at the same batch time. */
    assert_true(fast.makespan <= ref.makespan * (1.0 + 1e-10));
    double ref_sum, ref_max, fast_sum, fast_max;
    summarise_ratios(s->n_actions, &ref, &ref_sum, &ref_max);
    summarise_ratios(s->n_actions, &fast, &fast_sum, &fast_max);
    if (fast.makespan >= ref.makespan * (1.0 - 1e-10))
        assert_true(fast_sum <= ref_sum + 1e-6 * fmax(1.0, ref_sum));
    assert_true(fast.solves < 200); /* 20,000 rounds of round-off before the fix */
    double used[8] = {0}, count[8] = {0};
    for (int i = 0; i < s->n_actions; i++)
        if (tf_action_freezable(&s->actions[i], x.max_ms[i], x.min_ms[i])) {
            used[s->actions[i].stage] += fast.ratio[i];
            count[s->actions[i].stage] += 1.0;
        }
    for (int st = 0; st < s->stages && st < 8; st++)
        assert_true(used[st] <= (p.max_freeze_ratio[st] + 1e-7) * count[st]);
    tf_freeze_result_free(&ref);
    tf_freeze_result_free(&fast);
    tf_dag_free(&x.g);
    free(x.max_ms);
    free(x.min_ms);
    tf_profile_free(&p);
}

/* Durations six orders of magnitude apart: the ratios of a
 * priced point then carry round-off of about 1e-11, which the master's
 * slack was judged against 1e-12; the penalty on it grew to 7e10 and the
 * pricing drowned: a wrong plan (a mean ratio of 0.445 instead of 0.240
 * below, seed 0) or 20,000 rounds of noise taking 13-80 s (seeds 1-3). */
static void wide_range_durations(void **state)
{
    (void)state;
    char json[4096];
    snprintf(json, sizeof json,
             "{\"schedule\": \"ZBVZeroBubble\", \"ranks\": 4, \"microbatches\": 8, "
             "\"max_freeze_ratio\": 0.8, \"stages\": [");
    for (int st = 0; st < 8; st++)
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "%s{\"forward_ms\": 10, \"backward_input_ms\": %s, \"backward_weight_ms\": 10}",
                 st ? ", " : "", st == 2 ? "1e6" : "10");
    snprintf(json + strlen(json), sizeof json - strlen(json), "]}");
    compare_on_profile(json, TF_OBJECTIVE_LEAST_FREEZE);
    static const struct {
        uint64_t seed;
        int stage;
        double big, cap;
    } cases[] = {{1, 3, 1073609.0614286594, 0.83}, {2, 0, 1.05e6, 0.5}, {3, 7, 9.5e6, 0.7},
                 {4, 5, 2e5, 0.9},                   {5, 1, 3e6, 0.4},   {6, 6, 1e6, 0.6}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        wide_range_profile(json, sizeof json, cases[k].seed, cases[k].stage, cases[k].big,
                           cases[k].cap);
        compare_on_profile(json, TF_OBJECTIVE_LEAST_FREEZE);
        compare_on_profile(json, TF_OBJECTIVE_SPREAD);
    }
}

/* A freezable span of 2e-319 ms (found by fuzz_profile) beside a makespan
 * of 550 ms: the fast solver's demands (cost / span) overflowed and it
 * reported as optimal a plan 2% slower than lp_solve's.  It now refuses
 * durations whose ratios it cannot resolve, and the dispatcher hands the
 * LP to lp_solve, saying why. */
static void unresolvable_spans_fall_back(void **state)
{
    (void)state;
    char json[2048] = "{\"schedule\": \"Interleaved1F1B\", \"ranks\": 4, \"stages_per_rank\": 2, "
                      "\"microbatches\": 8, \"max_freeze_ratio\": 0.8, \"stages\": [";
    for (int st = 0; st < 8; st++)
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "%s{\"forward_ms\": 7.17, \"backward_ms\": %s, \"backward_frozen_ms\": %s}",
                 st ? ", " : "", st ? "20.09" : "2.261e-319", st ? "8.784" : "1.13e-319");
    snprintf(json + strlen(json), sizeof json - strlen(json), "]}");
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_parse(json, "tiny.json", &p, &err))
        fail_msg("%s", err.msg);
    const tf_schedule *s = &p.schedule;
    double *max_ms = malloc(sizeof(double) * (size_t)s->n_actions);
    double *min_ms = malloc(sizeof(double) * (size_t)s->n_actions);
    assert_non_null(max_ms);
    assert_non_null(min_ms);
    tf_profile_durations(&p, max_ms, min_ms);
    tf_dag g;
    assert_int_equal(tf_dag_build(s, 0.0, &g, &err), 0);
    tf_freeze_problem problem;
    tf_freeze_problem_init(&problem);
    problem.schedule = s;
    problem.dag = &g;
    problem.max_ms = max_ms;
    problem.min_ms = min_ms;
    problem.cap = p.max_freeze_ratio;
    problem.solver = TF_SOLVER_LP_SOLVE;
    tf_freeze_result ref, fast;
    assert_int_equal(solve_alone(&problem, &ref, &err), 0);
    problem.solver = TF_SOLVER_FAST;
    assert_int_equal(solve_alone(&problem, &fast, &err), TF_ESOLVER);
    assert_contains(err.msg, "fast solver: durations too far apart for its precision");
    /* The default control falls back. */
    assert_int_equal(tf_freeze_solve(&problem, NULL, &fast, &err), 0);
    assert_string_equal(fast.solver, "lp_solve");
    assert_contains(fast.fallback, "too far apart");
    assert_close(fast.makespan, ref.makespan, 1e-12);
    tf_freeze_result_free(&ref);
    tf_freeze_result_free(&fast);
    tf_dag_free(&g);
    free(max_ms);
    free(min_ms);
    tf_profile_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_picks_by_size),
        cmocka_unit_test(least_freeze_matches_lp_solve),
        cmocka_unit_test(spread_matches_lp_solve),
        cmocka_unit_test(medium_matches_lp_solve),
        cmocka_unit_test(nothing_freezable),
        cmocka_unit_test(wide_range_durations),
        cmocka_unit_test(unresolvable_spans_fall_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
