/* test_import.c - tf-import's library: reading traces, cutting steps,
 * waits, medians, the lag, and the profile it builds, on small traces
 * written here with known answers. */
#include "test_util.h"

#include <math.h>
#include <unistd.h>
#include <zlib.h>

#include "import.h"
#include "tf/util.h"
#include "observe.h"
#include "run.h"
#include "steps.h"
#include "trace.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tf_import_test.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Writes text to dir/name; returns the path (static buffer, one of 8). */
static const char *put(const char *name, const char *text)
{
    static char paths[8][160];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 160, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* One complete event, legacy style (no cat). */
#define EV(name, ts, dur) "{\"name\":\"" name "\",\"ph\":\"X\",\"ts\":" #ts ",\"dur\":" #dur "}"

static void test_parse_steps(void **state)
{
    (void)state;
    long a, b;
    tf_error err = {0};
    assert_int_equal(tfi_parse_steps("2:5", &a, &b, &err), 0);
    assert_int_equal(a, 2);
    assert_int_equal(b, 5);
    assert_int_equal(tfi_parse_steps("0:0", &a, &b, &err), 0);
    const char *bad[] = {"2-5", "5:2", ":3", "3:", "a:b", "-1:2", "1:2:3", "", " 1:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(tfi_parse_steps(bad[i], &a, &b, &err), TF_EINVAL);
        assert_contains(err.msg, "--steps");
    }
}

static void test_trace_forms(void **state)
{
    (void)state;
    tf_error err = {0};
    tfi_trace t;
    /* Kineto's object: rank, world size, clock, categories. */
    const char *kineto = put("k.json",
        "{\"distributedInfo\":{\"rank\":1,\"world_size\":2},\"baseTimeNanoseconds\":1000000,"
        "\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"PP:1F0\",\"ts\":0,\"dur\":1},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"PP:1F0\",\"ts\":5,\"dur\":2},"
        "{\"ph\":\"X\",\"cat\":\"gpu_user_annotation\",\"name\":\"PP:1F0\",\"ts\":3,\"dur\":2},"
        "{\"ph\":\"i\",\"name\":\"PP:1B0\",\"ts\":9},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#4\",\"ts\":1,\"dur\":9},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"nccl:recv\",\"ts\":1,\"dur\":9},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"ts\":1,\"dur\":9}]}");
    assert_int_equal(tfi_trace_load(kineto, NULL, &t, &err), 0);
    assert_int_equal(t.rank, 1);
    assert_int_equal(t.world_size, 2);
    assert_true(t.has_clock && t.base_ns == 1e6);
    assert_int_equal(t.n_spans, 3); /* the two annotations and the step */
    assert_int_equal(t.spans[0].kind, TFI_SPAN_STEP);
    assert_int_equal(t.spans[0].u.step, 4);
    assert_true(t.spans[1].gpu && t.spans[1].start == 3 && t.spans[1].end == 5);
    assert_false(t.spans[2].gpu);
    tfi_trace_free(&t);

    /* The legacy array, gzip-compressed: no rank, no clock. */
    char gz_path[160];
    snprintf(gz_path, sizeof gz_path, "%s/legacy.trace", dir);
    gzFile gz = gzopen(gz_path, "wb");
    gzputs(gz, "[" EV("PP:0F0", 1, 2) "," EV("gloo:recv", 0, 1) "]");
    gzclose(gz);
    assert_int_equal(tfi_trace_load(gz_path, NULL, &t, &err), 0);
    assert_int_equal(t.rank, -1);
    assert_false(t.has_clock);
    assert_int_equal(t.n_spans, 2);
    assert_int_equal(t.spans[0].kind, TFI_SPAN_RECV);
    tfi_trace_free(&t);
}

static void test_trace_errors(void **state)
{
    (void)state;
    tf_error err = {0};
    tfi_trace t;
    struct { const char *text, *needle; } cases[] = {
        {"{\"traceEvents\": 3}", "whose traceEvents is not an array"},
        {"{\"schedule\": \"1F1B\"}", "without \"traceEvents\""},
        {"42", "neither"},
        {"[\n{\"name\": }", "invalid JSON at line 2, column 10"},
        {"[" EV("PP:0F0", 1, -2) "]", "event 0 (\"PP:0F0\"): dur: expected a number >= 0, got -2"},
        {"[{\"name\":\"PP:0F0\",\"ph\":\"X\",\"dur\":1}]", "ts: expected a finite number, got nothing"},
        {"{\"distributedInfo\":{\"rank\":1.5},\"traceEvents\":[]}", "distributedInfo.rank"},
        {"{\"distributedInfo\":{\"rank\":2,\"world_size\":2},\"traceEvents\":[]}",
         "not below world_size"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = put("bad.json", cases[i].text);
        assert_int_equal(tfi_trace_load(path, NULL, &t, &err), TF_EINVAL);
        assert_contains(err.msg, "bad.json");
        assert_contains(err.msg, cases[i].needle);
        assert_null(t.spans);
    }
    assert_int_equal(tfi_trace_load("/nonexistent/x.json", NULL, &t, &err), TF_EIO);
}

/* Loads text as a trace and cuts it into steps. */
static int rank_run(const char *text, tfi_trace *t, tfi_rank_run *r, tf_error *err)
{
    int rc = tfi_trace_load(put("r.json", text), NULL, t, err);
    return rc ? rc : tfi_rank_run_build(t, r, err);
}

static void test_steps_and_waits(void **state)
{
    (void)state;
    tf_error err = {0};
    tfi_trace t;
    tfi_rank_run r;
    /* Step 0: the receive posted in PP:1RECV_F0 ends at 30, inside PP:1F0
     * (20..50): its compute starts at 30.  Step 1: the data was there
     * before PP:1F0 began: nothing to take off.  One event lies outside. */
    const char *text = "[" EV("ProfilerStep#0", 0, 100) "," EV("PP:1RECV_F0", 10, 5) ","
        EV("gloo:recv", 12, 18) "," EV("PP:1F0", 20, 30) "," EV("PP:1B0", 50, 40) ","
        EV("PP:1SEND_B0", 90, 2) "," EV("ProfilerStep#1", 100, 100) ","
        EV("PP:1RECV_F0", 110, 5) "," EV("gloo:recv", 111, 2) "," EV("PP:1F0", 120, 30) ","
        EV("PP:1B0", 150, 40) "," EV("PP:1F1", 300, 1) "]";
    assert_int_equal(rank_run(text, &t, &r, &err), 0);
    assert_int_equal(r.n_steps, 2);
    assert_int_equal(r.outside, 1);
    assert_int_equal(r.wait_trimmed, 1);
    assert_int_equal(r.max_stage_named, 1);
    const tfi_step *s0 = tfi_rank_run_step(&r, 0), *s1 = tfi_rank_run_step(&r, 1);
    assert_int_equal(s0->n_acts, 2);
    const tfi_act *f0 = tfi_step_find(s0, TF_ACT_F, 1, 0);
    assert_true(f0->compute_start == 30 && f0->end == 50);
    assert_true(tfi_step_find(s1, TF_ACT_F, 1, 0)->compute_start == 120);
    assert_int_equal(s0->acts[1].a.type, TF_ACT_B);
    tfi_rank_run_free(&r);
    tfi_trace_free(&t);

    /* No step spans: one step; an action twice in it is refused. */
    assert_int_equal(rank_run("[" EV("PP:0F0", 0, 1) "," EV("PP:0SEND_F0", 1, 1) "]", &t, &r,
                              &err), 0);
    assert_int_equal(r.n_steps, 1);
    assert_int_equal(r.steps[0].id, -1);
    assert_int_equal(r.max_stage_named, 1); /* it sends to stage 1 */
    tfi_rank_run_free(&r);
    tfi_trace_free(&t);
    assert_int_equal(rank_run("[" EV("PP:0F0", 0, 1) "," EV("PP:0F0", 5, 1) "]", &t, &r, &err),
                     TF_EINVAL);
    assert_contains(err.msg, "appears twice");
    tfi_trace_free(&t);
    assert_int_equal(rank_run("[" EV("PP:0RECV_F1", 0, 1) "]", &t, &r, &err), TF_EINVAL);
    assert_contains(err.msg, "no PP: compute action");
    tfi_trace_free(&t);
    assert_int_equal(rank_run("[" EV("PP:0F", 0, 1) "]", &t, &r, &err), TF_EINVAL);
    assert_contains(err.msg, "not an action name");
    tfi_trace_free(&t);
}

static void note_count(void *ctx, int warning, const char *message)
{
    (void)message;
    ((int *)ctx)[warning]++;
}

/* A split-backward order that is no built-in schedule: 2 ranks, 2
 * microbatches, stage s on rank s.  Every action lasts `scale` x its
 * base time in each of two steps; times in microseconds. */
static const char *split_rank(const char *name, int rank, int frozen)
{
    char text[4096];
    int n = snprintf(text, sizeof text, "[" EV("ProfilerStep#0", 0, 1000) ","
                     EV("ProfilerStep#1", 1000, 1000));
    const char *order[2][6] = {{"F0", "F1", "I0", "I1", "W0", "W1"},
                               {"F0", "I0", "F1", "I1", "W1", "W0"}};
    for (int step = 0; step < 2; step++)
        for (int i = 0; i < 6; i++) {
            char kind = order[rank][i][0];
            /* F 10, I 20, W 30 (W frozen 3); step 1 everything 1.5x. */
            double dur = kind == 'F' ? 10 : kind == 'I' ? 20 : frozen ? 3 : 30;
            dur *= step ? 1.5 : 1.0;
            n += snprintf(text + n, sizeof text - (size_t)n,
                          ",{\"name\":\"PP:%d%s\",\"ph\":\"X\",\"ts\":%d,\"dur\":%g}", rank,
                          order[rank][i], 1000 * step + 100 * (i + 1), dur);
        }
    snprintf(text + n, sizeof text - (size_t)n, "]");
    return put(name, text);
}

static void test_import_split(void **state)
{
    (void)state;
    char a[160], b[160], fa[160], fb[160];
    snprintf(a, sizeof a, "%s", split_rank("a.json", 0, 0));
    snprintf(b, sizeof b, "%s", split_rank("b.json", 1, 0));
    snprintf(fa, sizeof fa, "%s", split_rank("fa.json", 0, 1));
    snprintf(fb, sizeof fb, "%s", split_rank("fb.json", 1, 1));
    const char *traces[] = {a, b}, *frozen[] = {fa, fb};
    int notes[2] = {0, 0};
    tfi_options o;
    tfi_options_init(&o);
    o.traces = traces;
    o.n_traces = 2;
    o.frozen = frozen;
    o.n_frozen = 2;
    o.note = note_count;
    o.note_ctx = notes;
    tf_profile p;
    tf_error err = {0};
    assert_int_equal(tfi_import(&o, &p, &err), 0);
    assert_string_equal(p.schedule.name, "imported");
    assert_int_equal(p.schedule.stages, 2);
    assert_int_equal(p.schedule.microbatches, 2);
    assert_int_equal(notes[1], 0); /* frozen times were measured: no warning */
    assert_true(p.p2p_ms == 0);
    /* Medians of two steps: the mean of x and 1.5x, in ms. */
    assert_close(p.stages[1].forward_ms, 0.0125, 1e-12);
    assert_close(p.stages[0].backward_input_ms, 0.025, 1e-12);
    assert_close(p.stages[0].backward_weight_ms, 0.0375, 1e-12);
    assert_close(p.stages[0].backward_weight_frozen_ms, 0.00375, 1e-12);
    assert_int_equal(p.n_overrides, 12);
    for (int k = 0; k < p.n_overrides; k++) {
        const tf_action_time *t = &p.overrides[k];
        assert_true(t->type == TF_ACT_W ? t->frozen_ms > 0 : t->frozen_ms < 0);
    }
    /* Rank 1 runs W1 before W0, as observed. */
    const tf_action *last = &p.schedule.actions[p.schedule.n_actions - 1];
    assert_true(last->type == TF_ACT_W && last->microbatch == 0 && last->stage == 1);
    tf_profile_free(&p);

    /* Written, it is a profile the planner reads; a failure keeps the file. */
    char out[160];
    snprintf(out, sizeof out, "%s/profile.json", dir);
    assert_int_equal(tfi_import_to_file(&o, out, &err), 0);
    assert_int_equal(tf_profile_load(out, &p, &err), 0);
    assert_int_equal(p.schedule.n_actions, 12);
    tf_profile_free(&p);
    put("profile.json", "precious");
    o.n_frozen = 1;
    assert_int_equal(tfi_import_to_file(&o, out, &err), TF_EINVAL);
    assert_contains(err.msg, "--frozen: 1 traces given for a run of 2 ranks");
    char *text = NULL;
    assert_int_equal(tf_read_file(out, &text, NULL, &err), 0);
    assert_string_equal(text, "precious");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_steps),
        cmocka_unit_test(test_trace_forms),
        cmocka_unit_test(test_trace_errors),
        cmocka_unit_test(test_steps_and_waits),
        cmocka_unit_test(test_import_split),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
