/* test_profile_samples.c - a profile from measured samples
 * (tf/profile_samples.h), on hand-made sample sets whose medians are
 * worked out in the comments: per action over steps, per stage over
 * actions, frozen times capped and defaulted, pair spans, bad samples and
 * bad sets. */
#include <math.h>

#include "test_util.h"
#include "tf/profile_samples.h"

/* Appends one sample of the action named cell ("0B1") of s. */
static void add(tf_sample *x, size_t *n, const tf_schedule *s, const char *cell, int frozen,
                double ms)
{
    tf_action a;
    assert_int_equal(tf_action_parse(cell, &a, NULL), 0);
    int i = tf_schedule_find(s, a.type, a.stage, a.microbatch);
    assert_true(i >= 0);
    x[(*n)++] = (tf_sample){i, frozen, ms};
}

static void add_all(tf_sample *x, size_t *n, const tf_schedule *s, const char *cell, int frozen,
                    const double *ms, int count)
{
    for (int k = 0; k < count; k++)
        add(x, n, s, cell, frozen, ms[k]);
}

/* The set of x[0..n-1], samples of s, capped at cap. */
static tf_sample_set set_of(const tf_schedule *s, const tf_sample *x, size_t n, double cap,
                            int pair_spans)
{
    tf_sample_set in;
    tf_sample_set_init(&in);
    in.schedule = s;
    in.samples = x;
    in.n = n;
    in.max_freeze_ratio = cap;
    in.pair_spans = pair_spans;
    return in;
}

/* The override of cell in p; fails the test when there is none. */
static const tf_action_time *override_of(const tf_profile *p, const char *cell)
{
    tf_action a;
    assert_int_equal(tf_action_parse(cell, &a, NULL), 0);
    for (int k = 0; k < p->n_overrides; k++)
        if (p->overrides[k].type == a.type && p->overrides[k].stage == a.stage &&
            p->overrides[k].microbatch == a.microbatch)
            return &p->overrides[k];
    fail_msg("no override for %s", cell);
    return NULL;
}

/* 1F1B, 2 ranks, 2 microbatches; three unfrozen steps and two frozen:
 *   0F0 1 2 9 | 3 4    F pools both kinds: median of 1 2 3 4 9 = 3 (mean 3.8)
 *   0F1 2 2 2 | 2 2    2
 *   0B0 10 12 30 | 5 7 12, frozen 6 (the 30 is an outlier the median skips)
 *   0B1 11 11 11 | 12 12   11, frozen 12 > 11: capped to 11
 *   1F0 4 4 4 | 4 4    4
 *   1F1 6 6 6 | 6 6    6
 *   1B0 20 20 20 | -   20, no frozen sample: 20 x 0.5 = 10
 *   1B1 22 22 22 | 8 10    22, frozen 9
 * Stages, medians of their actions: stage 0 F (3, 2) 2.5, B (12, 11) 11.5,
 * B frozen (6, 11) 8.5; stage 1 F (4, 6) 5, B (20, 22) 21, B frozen
 * (10, 9) 9.5. */
static void medians_per_action_and_stage(void **state)
{
    (void)state;
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 2, &s, NULL), 0);
    tf_sample x[64];
    size_t n = 0;
    add_all(x, &n, &s, "0F0", 0, (double[]){1, 2, 9}, 3);
    add_all(x, &n, &s, "0F0", 1, (double[]){3, 4}, 2);
    add_all(x, &n, &s, "0F1", 0, (double[]){2, 2, 2}, 3);
    add_all(x, &n, &s, "0F1", 1, (double[]){2, 2}, 2);
    add_all(x, &n, &s, "0B0", 0, (double[]){10, 12, 30}, 3);
    add_all(x, &n, &s, "0B0", 1, (double[]){5, 7}, 2);
    add_all(x, &n, &s, "0B1", 0, (double[]){11, 11, 11}, 3);
    add_all(x, &n, &s, "0B1", 1, (double[]){12, 12}, 2);
    add_all(x, &n, &s, "1F0", 0, (double[]){4, 4, 4}, 3);
    add_all(x, &n, &s, "1F0", 1, (double[]){4, 4}, 2);
    add_all(x, &n, &s, "1F1", 0, (double[]){6, 6, 6}, 3);
    add_all(x, &n, &s, "1B0", 0, (double[]){20, 20, 20}, 3);
    add_all(x, &n, &s, "1B1", 0, (double[]){22, 22, 22}, 3);
    add_all(x, &n, &s, "1B1", 1, (double[]){8, 10}, 2);
    const tf_sample_set in = set_of(&s, x, n, 0.7, 0);
    tf_profile p;
    tf_sample_report report;
    tf_error err = {0};
    if (tf_profile_from_samples(&in, &p, &report, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(p.n_overrides, 8);
    assert_int_equal(p.n_pairs, 0);
    assert_true(override_of(&p, "0F0")->ms == 3 && override_of(&p, "0F0")->frozen_ms < 0);
    assert_true(override_of(&p, "0B0")->ms == 12 && override_of(&p, "0B0")->frozen_ms == 6);
    assert_true(override_of(&p, "0B1")->ms == 11 && override_of(&p, "0B1")->frozen_ms == 11);
    assert_true(override_of(&p, "1B0")->ms == 20 && override_of(&p, "1B0")->frozen_ms == 10);
    assert_true(override_of(&p, "1B1")->ms == 22 && override_of(&p, "1B1")->frozen_ms == 9);
    assert_true(p.stages[0].forward_ms == 2.5 && p.stages[0].backward_ms == 11.5 &&
                p.stages[0].backward_frozen_ms == 8.5);
    assert_true(p.stages[1].forward_ms == 5 && p.stages[1].backward_ms == 21 &&
                p.stages[1].backward_frozen_ms == 9.5);
    assert_true(p.stages[0].backward_input_ms == 0 && p.stages[1].backward_weight_ms == 0);
    assert_true(p.max_freeze_ratio[0] == 0.7 && p.max_freeze_ratio[1] == 0.7);
    assert_int_equal(report.capped, 1);
    assert_int_equal(report.defaulted, 1);
    assert_int_equal(report.split_stages, 0);
    /* What it builds is a profile the planner reads back unchanged. */
    char *json = NULL;
    tf_profile back;
    assert_int_equal(tf_profile_to_json(&p, &json, &err), 0);
    if (tf_profile_parse(json, "built", &back, &err))
        fail_msg("%s", err.msg);
    assert_true(back.stages[1].backward_frozen_ms == 9.5);
    assert_true(override_of(&back, "0B0")->frozen_ms == 6);
    free(json);
    tf_profile_free(&back);
    tf_profile_free(&p);
    tf_schedule_free(&s);
}

/* Five steps of every action at v, v, v + 0.2, v - 0.2, v (v = 10 + its
 * index, halved for a frozen B), then the same with a stall of 300 ms in one step of three
 * actions (a descheduled thread lands on whatever runs): each action's
 * median stays v, so the profile is the stall-free one, figure for figure.
 * (A mean would give the stalled actions v + 60.) */
static void stalls_leave_the_profile(void **state)
{
    (void)state;
    static const double jitter[5] = {0, 0, 0.2, -0.2, 0};
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 2, &s, NULL), 0);
    tf_sample x[80];
    size_t n = 0;
    for (int i = 0; i < s.n_actions; i++)
        for (int k = 0; k < 5; k++)
            for (int frozen = 0; frozen < 2; frozen++) {
                double v = 10.0 + i;
                if (frozen && s.actions[i].type == TF_ACT_B)
                    v /= 2; /* freezing halves a B, leaves an F */
                x[n++] = (tf_sample){i, frozen, v + jitter[k]};
            }
    const tf_sample_set in = set_of(&s, x, n, 0.9, 0);
    tf_profile clean, stalled;
    assert_int_equal(tf_profile_from_samples(&in, &clean, NULL, NULL), 0);
    x[0].ms += 300;  /* [action x 10 + step x 2 + frozen]: 0F0, step 0, unfrozen */
    x[14].ms += 300; /* 0F1, step 2, unfrozen */
    x[37].ms += 300; /* 0B1, step 3, frozen */
    assert_int_equal(tf_profile_from_samples(&in, &stalled, NULL, NULL), 0);
    for (int k = 0; k < s.n_actions; k++) {
        assert_true(stalled.overrides[k].ms == clean.overrides[k].ms);
        assert_true(stalled.overrides[k].frozen_ms == clean.overrides[k].frozen_ms);
    }
    assert_true(override_of(&stalled, "0F0")->ms == 10);
    assert_true(override_of(&stalled, "0B1")->frozen_ms == 13.0 / 2);
    assert_memory_equal(stalled.stages, clean.stages, 2 * sizeof *clean.stages);
    tf_profile_free(&clean);
    tf_profile_free(&stalled);
    tf_schedule_free(&s);
}

/* DualPipeV on one rank, 2 microbatches:
 *   0F0 1F0 0F1 1B0 (1F1;0B0)OVERLAP_F_B 1B1 0I1 0W1
 * timed as a profiler sees it, the pair as one span (samples on 1F1):
 *   pair 10 12 | 7: ms 11, frozen 7; 0I1 4, 0W1 5 | 0.1; 1B0 8 | 4,
 *   1B1 8 | 5, the forwards 0F0 2, 0F1 2, 1F0 3.
 * Stage 0 runs its only B in the pair: its backward is I + W = 9, frozen
 * 4.1.  Stage 1: F 3 (1F1 is in the span), B 8, B frozen 4.5. */
static void pair_spans(void **state)
{
    (void)state;
    tf_schedule s;
    assert_int_equal(tf_schedule_build("DualPipeV", 1, 2, 2, &s, NULL), 0);
    tf_sample x[64];
    size_t n = 0;
    add(x, &n, &s, "0F0", 0, 2);
    add(x, &n, &s, "0F1", 0, 2);
    add(x, &n, &s, "1F0", 0, 3);
    add_all(x, &n, &s, "1F1", 0, (double[]){10, 12}, 2);
    add(x, &n, &s, "1F1", 1, 7);
    add(x, &n, &s, "1B0", 0, 8);
    add(x, &n, &s, "1B0", 1, 4);
    add(x, &n, &s, "1B1", 0, 8);
    add(x, &n, &s, "1B1", 1, 5);
    add(x, &n, &s, "0I1", 0, 4);
    add(x, &n, &s, "0W1", 0, 5);
    add(x, &n, &s, "0W1", 1, 0.1);
    tf_sample_set in = set_of(&s, x, n, 0.9, 1);
    tf_profile p;
    tf_sample_report report;
    tf_error err = {0};
    if (tf_profile_from_samples(&in, &p, &report, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(p.n_pairs, 1);
    assert_int_equal(p.n_overrides, 7);
    assert_true(p.pairs[0].ms == 11 && p.pairs[0].frozen_ms == 7);
    assert_int_equal(p.pairs[0].backward.stage, 0);
    assert_close(p.stages[0].backward_ms, 9, 1e-12);
    assert_close(p.stages[0].backward_frozen_ms, 4.1, 1e-12);
    assert_true(p.stages[1].forward_ms == 3 && p.stages[1].backward_ms == 8 &&
                p.stages[1].backward_frozen_ms == 4.5);
    assert_int_equal(report.split_stages, 1);
    assert_int_equal(report.defaulted, 0);
    /* The planner splits the span: the forward keeps its 3, the backward
     * gets the rest, 8 unfrozen and 4 frozen. */
    double max_ms[16], min_ms[16];
    tf_profile_durations(&p, max_ms, min_ms);
    int b = tf_schedule_find(&s, TF_ACT_B, 0, 0);
    assert_true(max_ms[b] == 8 && min_ms[b] == 4);
    tf_profile_free(&p);

    /* Without its frozen sample the pair's frozen time is left to the
     * planner (-1), and counted as defaulted. */
    x[5] = x[--n]; /* the pair's frozen sample */
    in.n = n;
    assert_int_equal(tf_profile_from_samples(&in, &p, &report, &err), 0);
    assert_true(p.pairs[0].frozen_ms < 0);
    assert_int_equal(report.defaulted, 1);
    tf_profile_free(&p);

    /* A sample on the pair's second half is refused with pair spans. */
    add(x, &n, &s, "0B0", 0, 1);
    in.n = n;
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "0B0");
    assert_contains(err.msg, "second action");
    assert_null(p.stages);
    tf_schedule_free(&s);
}

/* Timed action by action (tf-exec's way), the pair's halves are actions
 * like any other: overrides, no pair. */
static void pairs_timed_by_action(void **state)
{
    (void)state;
    tf_schedule s;
    assert_int_equal(tf_schedule_build("DualPipeV", 1, 2, 2, &s, NULL), 0);
    tf_sample x[16];
    for (int i = 0; i < s.n_actions; i++)
        x[i] = (tf_sample){i, 0, 1.0 + i};
    /* From the init function: pairs timed action by action, the default cap. */
    tf_sample_set in;
    tf_sample_set_init(&in);
    in.schedule = &s;
    in.samples = x;
    in.n = (size_t)s.n_actions;
    tf_profile p;
    tf_sample_report report;
    assert_int_equal(tf_profile_from_samples(&in, &p, &report, NULL), 0);
    assert_true(p.max_freeze_ratio[0] == TF_DEFAULT_CAP);
    assert_int_equal(p.n_pairs, 0);
    assert_int_equal(p.n_overrides, s.n_actions);
    int b = tf_schedule_find(&s, TF_ACT_B, 0, 0);
    assert_true(override_of(&p, "0B0")->ms == 1.0 + b);
    assert_true(p.stages[0].backward_ms == 1.0 + b); /* its own B now */
    assert_int_equal(report.split_stages, 0);
    /* Every B and W without a frozen sample: the reference's defaults. */
    assert_int_equal(report.defaulted, 4);
    int w = tf_schedule_find(&s, TF_ACT_W, 0, 1);
    assert_close(override_of(&p, "0W1")->frozen_ms, 0.01 * (1.0 + w), 1e-12);
    tf_profile_free(&p);
    tf_schedule_free(&s);
}

/* 1F1B on 2 ranks with 2 microbatches into *s, and one unfrozen sample of
 * 1 ms per action into x[0..7]; returns their count, 8. */
static size_t one_step_of_1f1b(tf_schedule *s, tf_sample x[16])
{
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 2, s, NULL), 0);
    assert_int_equal(s->n_actions, 8);
    for (int i = 0; i < s->n_actions; i++)
        x[i] = (tf_sample){i, 0, 1.0};
    return (size_t)s->n_actions;
}

/* Bad samples name the sample and the action; nothing is built. */
static void bad_samples(void **state)
{
    (void)state;
    tf_schedule s;
    tf_sample x[16];
    const size_t n = one_step_of_1f1b(&s, x);
    const tf_sample_set in = set_of(&s, x, n, 0.9, 0);
    tf_profile p;
    tf_error err = {0};

    x[3].action = 8;
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "sample 3: action 8 is not one of");
    x[3].action = 3;

    x[2].ms = NAN;
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "sample 2 (0B0): ms nan");
    x[2].ms = -1;
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "ms -1");
    x[2].ms = 1.0;

    /* 0B1 measured only frozen: no unfrozen figure to plan with. */
    x[3].frozen = 1;
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "0B1 has no unfrozen sample");
    x[3].frozen = 0;

    x[5].ms = 2 * TF_MAX_DURATION_MS;
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "more than the planner accepts");
    assert_null(p.overrides);
    tf_schedule_free(&s);
}

/* A set without a schedule, samples NULL with n > 0, or a cap outside
 * [0, 1] is refused by field and value; nothing is built. */
static void bad_sets(void **state)
{
    (void)state;
    tf_schedule s;
    tf_sample x[16];
    const size_t n = one_step_of_1f1b(&s, x);
    tf_sample_set in = set_of(NULL, x, n, 0.9, 0);
    tf_profile p;
    tf_error err = {0};
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "schedule is NULL");
    assert_null(p.stages);

    in = set_of(&s, NULL, 3, 0.9, 0);
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "samples is NULL and n is 3");

    in = set_of(&s, x, n, 1.5, 0);
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "max_freeze_ratio = 1.5");
    in.max_freeze_ratio = NAN;
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "max_freeze_ratio = nan");
    assert_null(p.stages);

    /* The same samples with a cap in range build. */
    in.max_freeze_ratio = 1;
    assert_int_equal(tf_profile_from_samples(&in, &p, NULL, &err), 0);
    assert_true(p.max_freeze_ratio[1] == 1);
    tf_profile_free(&p);
    tf_schedule_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(medians_per_action_and_stage),
        cmocka_unit_test(stalls_leave_the_profile),
        cmocka_unit_test(pair_spans),
        cmocka_unit_test(pairs_timed_by_action),
        cmocka_unit_test(bad_samples),
        cmocka_unit_test(bad_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
