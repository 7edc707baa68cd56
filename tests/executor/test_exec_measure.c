/* test_exec_measure.c - what measuring steps make of the runtime's clock
 * (src/train/measure.h): the lag of messages between ranks, taken only
 * where the receiver waited, across process clocks; what the DAG leaves out
 * (first rank's start, the step's tail, the optimizer); and the pipeline's
 * own timeline (enter <= start, one clock in one process). */
#include <math.h>

#include "test_util.h"
#include "measure.h"
#include "tf/schedule.h"
#include "tfx/runtime.h"

/* 1F1B on 2 ranks with 2 microbatches, rank by rank:
 *   rank 0: 0F0 0F1 0B0 0B1      rank 1: 1F0 1B0 1F1 1B1
 * A hand-made timeline (ms from the step start), every compute 1 ms:
 *   0F0 [0, 1]  0F1 [1.1, 2.1]  0B0 entered 2.2, starts 3.5  0B1 entered 4.6, starts 5.9
 *   1F0 entered 0.2, starts 1.25  1B0 [2.3, 3.3]  1F1 entered 3.4 (0F1 ended at 2.1:
 *   no wait)  1B1 [4.5, 5.5]
 * Waits: 1F0 from 0F0 (lag 0.25), 0B0 from 1B0 (0.2), 0B1 from 1B1 (0.4);
 * median 0.25.  The step ends at 7.2, its last compute (0B1) at 6.9. */
enum { N_ACT = 8 };
static const double MS[N_ACT] = {1, 1, 1, 1, 1, 1, 1, 1};
static const double START[N_ACT] = {0, 1.1, 3.5, 5.9, 1.25, 2.3, 3.4, 4.5};
static const double ENTER[N_ACT] = {0, 1.1, 2.2, 4.6, 0.2, 2.3, 3.4, 4.5};

static void build(tf_schedule *s, tfx_measure *m, int steps)
{
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 2, s, NULL), 0);
    assert_int_equal(s->n_actions, N_ACT);
    char cell[32];
    const char *order[N_ACT] = {"0F0", "0F1", "0B0", "0B1", "1F0", "1B0", "1F1", "1B1"};
    for (int i = 0; i < N_ACT; i++)
        assert_string_equal(tf_action_format(&s->actions[i], cell), order[i]);
    assert_int_equal(tfx_measure_init(m, s, steps, NULL), 0);
}

/* The timeline with rank 1's offsets on its own process clock, which
 * started `shift` ms after process 0's. */
static void add_step(tfx_measure *m, double shift, double clock1, int frozen)
{
    double start[N_ACT], enter[N_ACT];
    for (int i = 0; i < N_ACT; i++) {
        start[i] = START[i] - (i >= 4 ? shift : 0);
        enter[i] = ENTER[i] - (i >= 4 ? shift : 0);
    }
    const double clock[2] = {0.0, clock1};
    tfx_step_times t = {.ms = MS, .start = start, .enter = enter, .clock = clock,
                        .pipeline_ms = 7.2, .step_ms = 9.0};
    tfx_measure_add_times(m, &t, frozen);
}

static void test_lag_where_the_receiver_waited(void **state)
{
    (void)state;
    tf_schedule s;
    tfx_measure m;
    tfx_clock_figures c;
    build(&s, &m, 2);
    add_step(&m, 0.0, 0.0, 0);
    assert_int_equal(tfx_measure_clock(&m, &c, NULL), 0);
    assert_int_equal(c.n_lag, 3);
    assert_close(c.lag_ms, 0.25, 1e-12);
    assert_close(c.startup_ms, 0.0, 1e-12);
    assert_close(c.tail_ms, 7.2 - 6.9, 1e-12);
    assert_close(c.optimizer_ms, 9.0 - 7.2, 1e-12);

    /* Rank 1 in a process whose step began 10 ms later: its offsets are 10
     * ms smaller and its clock offset says so; the same lags. */
    tfx_measure_reset(&m);
    add_step(&m, 10.0, 10.0, 1);
    assert_int_equal(tfx_measure_clock(&m, &c, NULL), 0);
    assert_int_equal(c.n_lag, 3);
    assert_close(c.lag_ms, 0.25, 1e-12);

    /* Both kinds of steps count, up to the room of each (2 here). */
    add_step(&m, 0.0, 0.0, 0);
    add_step(&m, 0.0, 0.0, 1);
    add_step(&m, 0.0, 0.0, 1); /* a third frozen step: no room, ignored */
    assert_int_equal(m.n_full, 1);
    assert_int_equal(m.n_frozen, 2);
    assert_int_equal(tfx_measure_clock(&m, &c, NULL), 0);
    assert_int_equal(c.n_lag, 9);
    tfx_measure_free(&m);
    tf_schedule_free(&s);
}

/* A rank on another machine's clock (NaN offset) gives no lag: its times
 * cannot be set against the sender's.  With no wait at all the lag is 0. */
static void test_no_lag_without_a_common_clock(void **state)
{
    (void)state;
    tf_schedule s;
    tfx_measure m;
    tfx_clock_figures c;
    build(&s, &m, 2);
    add_step(&m, 0.0, NAN, 0);
    assert_int_equal(tfx_measure_clock(&m, &c, NULL), 0);
    assert_int_equal(c.n_lag, 0);
    assert_true(c.lag_ms == 0.0);
    /* Rank 0's actions alone: first start 0, last compute end 6.9. */
    assert_close(c.tail_ms, 7.2 - 6.9, 1e-12);
    tfx_measure_free(&m);
    tf_schedule_free(&s);
}

/* A real step: every action enters before its compute starts, a rank's
 * next action enters after its compute ends, every compute ends within the
 * step, and one process has one clock. */
static void test_pipeline_timeline_is_ordered(void **state)
{
    (void)state;
    static const tfx_model_config cfg = {.layers = 2, .hidden = 16, .heads = 2, .ffn = 24,
                                         .context = 8, .microbatch_size = 2};
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 4, &s, NULL), 0);
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    tfx_pipeline *p = NULL;
    tf_error err = {0};
    assert_int_equal(tfx_pipeline_create(&s, &cfg, &po, &p, &err), 0);
    int32_t tokens[4 * 16] = {0}, targets[4 * 16] = {0};
    for (int i = 0; i < 4 * 16; i++)
        tokens[i] = targets[(i + 1) % 64] = (i * 37) % 256;
    tfx_step_input in = {.tokens = tokens, .targets = targets, .apply_optimizer = 1};
    tfx_step_result res;
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    const double *ms = tfx_pipeline_action_ms(p), *start = tfx_pipeline_action_start_ms(p);
    const double *enter = tfx_pipeline_action_enter_ms(p);
    const double eps = 1e-6;
    for (int i = 0; i < s.n_actions; i++) {
        assert_true(enter[i] >= 0.0 && enter[i] <= start[i] + eps);
        assert_true(start[i] + ms[i] <= res.pipeline_ms + eps);
        if (i + 1 < s.n_actions && s.actions[i + 1].rank == s.actions[i].rank)
            assert_true(enter[i + 1] >= start[i] + ms[i] - eps);
    }
    for (int r = 0; r < s.ranks; r++)
        assert_true(tfx_pipeline_rank_clock_ms(p)[r] == 0.0);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lag_where_the_receiver_waited),
        cmocka_unit_test(test_no_lag_without_a_common_clock),
        cmocka_unit_test(test_pipeline_timeline_is_ordered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
