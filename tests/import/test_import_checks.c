/* test_import_checks.c - what tf-import refuses or corrects, and the
 * streaming reader under it, on small traces written here with known
 * answers: JSON edge cases, baseTimeNanoseconds read exactly, overlapping
 * actions, the per-step action limit, deadlocking orders, clocks aligned
 * by baseTimeNanoseconds and by messages (the lag recovered exactly),
 * clocks that disagree, a lag too large for its step, --p2p-ms, ranks
 * ordered by their stages, and traces given twice. */
#include "test_util.h"

#include <math.h>
#include <zlib.h>

#include "import.h"
#include "jscan.h"
#include "observe.h"
#include "run.h"
#include "temp_dir.h"
#include "trace.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    temp_dir_make("tf_import_checks.", dir, sizeof dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    temp_dir_remove(dir);
    return 0;
}

/* dir/name, in one of 8 static buffers. */
static const char *path_of(const char *name)
{
    static char paths[8][160];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 160, "%s/%s", dir, name);
    return path;
}

static const char *put(const char *name, const char *text, size_t len)
{
    const char *path = path_of(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    return path;
}

static const char *put_text(const char *name, const char *text)
{
    return put(name, text, strlen(text));
}

/* Loads a trace of text; returns the code. */
static int load(const char *text, tfi_trace *t, tf_error *err)
{
    return tfi_trace_load(put_text("t.json", text), NULL, t, err);
}

static void test_json_edges(void **state)
{
    (void)state;
    tf_error err = {0};
    tfi_trace t;
    /* Escapes decode before a name is read ("\u0050" is P); the first of
     * two "name" keys counts, as cJSON's lookup had it; unknown members
     * of any depth are passed over. */
    assert_int_equal(load("[{\"name\":\"\\u0050P:0F0\",\"ph\":\"X\",\"ts\":1,\"dur\":2},"
                          "{\"name\":\"PP:0B0\",\"name\":\"x\",\"ph\":\"X\",\"ts\":5,\"dur\":1,"
                          "\"args\":{\"a\":[1,{\"b\":[true,false,null,\"\\\"]\"]}],"
                          "\"c\":-1.5e-3}}]",
                          &t, &err), 0);
    assert_int_equal(t.n_spans, 2);
    tf_action a;
    tfi_span_action(&t.spans[0], 0, &a);
    assert_true(a.type == TF_ACT_F && a.stage == 0 && a.microbatch == 0);
    tfi_span_action(&t.spans[1], 0, &a);
    assert_int_equal(a.type, TF_ACT_B);
    tfi_trace_free(&t);

    struct { const char *text; const char *needle; } bad[] = {
        {"[{\"name\":\"PP:0F0\",\"ph\":\"X\",\"ts\":01,\"dur\":1}]", "line 1, column 35"},
        {"[{\"name\":\"PP:0F0\",\"ph\":\"X\",\"ts\":1.,\"dur\":1}]", "line 1, column 35"},
        {"[{\"name\":\"\\x\"}]", "line 1, column 12"},
        {"[1,2,]", "line 1, column 6"},
        {"[]\n\n  x", "line 3, column 3"},
        {"{\"traceEvents\":[],}", "line 1, column 19"},
        {"", "line 1, column 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(load(bad[i].text, &t, &err), TF_EINVAL);
        assert_contains(err.msg, "invalid JSON");
        assert_contains(err.msg, bad[i].needle);
    }
    /* A NUL byte, and nesting past cJSON's limit, are refused by name. */
    assert_int_equal(tfi_trace_load(put("nul.json", "[{\"a\":\0}]", 9), NULL, &t, &err),
                     TF_EINVAL);
    assert_contains(err.msg, "NUL bytes");
    char deep[2100];
    memset(deep, '[', 1001);
    memset(deep + 1001, ']', 1001);
    deep[2002] = '\0';
    assert_int_equal(load(deep, &t, &err), TF_EINVAL);
    assert_contains(err.msg, "nested deeper than 1000 levels");
    deep[0] = ' '; /* 1000 levels: read (and nothing kept) */
    deep[2001] = '\0';
    assert_int_equal(load(deep, &t, &err), 0);
    assert_int_equal(t.n_spans, 0);
    tfi_trace_free(&t);
}

/* Timestamps take a fast path for short decimals: the same doubles as
 * strtod, for every token tried. */
static void test_numbers_exact(void **state)
{
    (void)state;
    const char *tokens[] = {"0", "-0", "1", "123456789012345", "1234567890123456",
                            "0.1", "1699999999.123", "5000192.5", "-2.25", "0.000001",
                            "99999999999999.9", "1e3", "2.5E-2", "123.4567890123456"};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "[%s]", tokens[i]);
        tf_error err = {0};
        tfi_jscan j;
        assert_int_equal(tfi_js_open(&j, put_text("n.json", text), 1 << 20, &err), 0);
        long count = 0;
        double v = NAN;
        char token[64];
        assert_int_equal(tfi_js_enter(&j, '['), 0);
        assert_int_equal(tfi_js_more(&j, ']', &count), 1);
        assert_int_equal(tfi_js_number(&j, &v, token, sizeof token), 0);
        assert_string_equal(token, tokens[i]);
        double want = strtod(tokens[i], NULL);
        assert_memory_equal(&v, &want, sizeof v);
        assert_int_equal(tfi_js_more(&j, ']', &count), 0);
        assert_int_equal(tfi_js_finish(&j), 0);
        tfi_js_close(&j);
    }
}

static void test_metadata(void **state)
{
    (void)state;
    tf_error err = {0};
    tfi_trace t, u;
    /* Nanoseconds since 1970 are read exactly, past a double's 53 bits. */
    const char *text = "{\"baseTimeNanoseconds\":1700000000000000001,\"traceEvents\":"
                       "[{\"name\":\"PP:0F0\",\"ph\":\"X\",\"ts\":1,\"dur\":2}]}";
    assert_int_equal(load(text, &t, &err), 0);
    assert_true(t.has_clock);
    assert_true(t.base_ns == 1700000000000000001LL);
    /* The same events under another name: the same fingerprint; one
     * nanosecond of clock apart: another. */
    assert_int_equal(tfi_trace_load(put_text("same.json", text), NULL, &u, &err), 0);
    assert_true(t.fingerprint == u.fingerprint);
    tfi_trace_free(&u);
    assert_int_equal(load("{\"baseTimeNanoseconds\":1700000000000000002,\"traceEvents\":"
                          "[{\"name\":\"PP:0F0\",\"ph\":\"X\",\"ts\":1,\"dur\":2}]}", &u, &err), 0);
    assert_true(t.fingerprint != u.fingerprint);
    tfi_trace_free(&u);
    tfi_trace_free(&t);
    const char *bad[] = {"1e308", "-1e308", "-5", "1e19", "\"soon\"", "1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[160];
        snprintf(doc, sizeof doc, "{\"baseTimeNanoseconds\":%s,\"traceEvents\":[]}", bad[i]);
        assert_int_equal(load(doc, &t, &err), TF_EINVAL);
        assert_contains(err.msg, "t.json: baseTimeNanoseconds: expected a time in nanoseconds");
    }
    /* A gzip stream cut short is broken data, not bad JSON. */
    char gz_path[160];
    snprintf(gz_path, sizeof gz_path, "%s/cut.json.gz", dir);
    gzFile gz = gzopen(gz_path, "wb");
    for (int i = 0; i < 2000; i++)
        gzprintf(gz, "%s{\"name\":\"PP:0F%d\",\"ph\":\"X\",\"ts\":%d,\"dur\":1}", i ? "," : "[",
                 i % 100, i);
    gzclose(gz);
    FILE *f = fopen(gz_path, "rb");
    char whole[65536];
    size_t n = fread(whole, 1, sizeof whole, f);
    fclose(f);
    assert_int_equal(tfi_trace_load(put("cut.json.gz", whole, n / 2), NULL, &t, &err), TF_EIO);
    assert_contains(err.msg, "broken gzip data: the file ends in the middle of the stream");
}

/* Appends printf-style text to the trace being written. */
typedef struct text {
    char buf[1 << 16];
    size_t len;
} text;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void add(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    t->len += (size_t)vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
    va_end(ap);
    assert_true(t->len < sizeof t->buf);
}

static void event(text *t, const char *cat, const char *name, double ts, double dur)
{
    add(t, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"ts\":%.3f,\"dur\":%.3f}",
        t->buf[t->len - 1] == '[' ? "" : ",", cat, name, ts, dur);
}

/* One rank of a two-rank GPipe step over two microbatches, GPU-side, the
 * data taking lag microseconds each way (F 100 us, B 200 us):
 *   rank 0: F0 [0,100]  F1 [100,200]                 B0 [500+2L,700+2L] B1 [.., 900+2L]
 *   rank 1:   F0 [100+L,200+L] F1 [..,300+L] B0 [..,500+L] B1 [..,700+L]
 * so exactly two receivers wait for one message alone (1F0, 0B0), each
 * for lag.  Rank 1's times are written on a clock `skew` ahead of rank
 * 0's; with `base` (>= 0) both get baseTimeNanoseconds, rank 1's base
 * base + base_gap ns with its times moved back to match. */
typedef struct run_shape {
    double lag, skew;
    long long base, base_gap;
    int info; /* 1: distributedInfo */
} run_shape;

static const char *gpipe_rank(const char *name, int rank, const run_shape *sh)
{
    static text t;
    t.len = 0;
    add(&t, "{");
    if (sh->base >= 0)
        add(&t, "\"baseTimeNanoseconds\":%lld,", sh->base + (rank ? sh->base_gap : 0));
    if (sh->info)
        add(&t, "\"distributedInfo\":{\"rank\":%d,\"world_size\":2},", rank);
    add(&t, "\"traceEvents\":[");
    double L = sh->lag, shift = rank ? sh->skew - (double)sh->base_gap / 1000.0 : 0.0;
    const double r0[4][2] = {{0, 100}, {100, 200}, {500 + 2 * L, 700 + 2 * L},
                             {700 + 2 * L, 900 + 2 * L}};
    const double r1[4][2] = {{100 + L, 200 + L}, {200 + L, 300 + L}, {300 + L, 500 + L},
                             {500 + L, 700 + L}};
    const char *cells[4] = {"F0", "F1", "B0", "B1"};
    event(&t, "gpu_user_annotation", "ProfilerStep#0", shift - 10, 1000 + 2 * L);
    for (int i = 0; i < 4; i++) {
        const double *s = rank ? r1[i] : r0[i];
        char pp[16];
        snprintf(pp, sizeof pp, "PP:%d%s", rank, cells[i]);
        event(&t, "gpu_user_annotation", pp, s[0] + shift, s[1] - s[0]);
    }
    add(&t, "]}");
    return put_text(name, t.buf);
}

/* Imports the two ranks written with shape sh (in the order given). */
static int import_pair(const run_shape *sh, int reversed, double p2p_ms, tf_profile *p,
                       tf_error *err)
{
    char a[160], b[160];
    snprintf(a, sizeof a, "%s", gpipe_rank("r0.json", 0, sh));
    snprintf(b, sizeof b, "%s", gpipe_rank("r1.json", 1, sh));
    const char *traces[2] = {reversed ? b : a, reversed ? a : b};
    tfi_options o;
    tfi_options_init(&o);
    o.traces = traces;
    o.n_traces = 2;
    o.p2p_ms = p2p_ms;
    return tfi_import(&o, p, err);
}

static void test_clock_alignment(void **state)
{
    (void)state;
    tf_profile p;
    tf_error err = {0};
    /* Shared clocks, bases 1 s apart: the lag is the two gaps, 20 us. */
    run_shape shared = {.lag = 20, .base = 1700000000000000000LL, .base_gap = 1000000000,
                        .info = 1};
    assert_int_equal(import_pair(&shared, 0, -1, &p, &err), 0);
    assert_close(p.p2p_ms, 0.020, 1e-9);
    assert_string_equal(p.schedule.name, "GPipe");
    tf_profile_free(&p);
    /* No clock at all, rank 1's 12.3455 ms off: the messages recover the
     * offset (the middle of [12325.5, 12365.5] us) and so the lag. */
    run_shape legacy = {.lag = 20, .skew = 12345.5, .base = -1};
    assert_int_equal(import_pair(&legacy, 0, -1, &p, &err), 0);
    assert_close(p.p2p_ms, 0.020, 1e-9);
    tf_profile_free(&p);
    /* Given reversed, without distributedInfo: ranks from the stages. */
    assert_int_equal(import_pair(&legacy, 1, -1, &p, &err), 0);
    assert_int_equal(p.schedule.actions[0].stage, 0);
    assert_int_equal(p.schedule.actions[0].rank, 0);
    assert_string_equal(p.schedule.name, "GPipe");
    tf_profile_free(&p);
}

static void test_clock_errors(void **state)
{
    (void)state;
    tf_profile p;
    tf_error err = {0};
    /* Rank 1's clock 0.5 ms ahead of what its base says: 0B0 seems to
     * start 0.48 ms before 1B0, whose output it takes, ends. */
    run_shape skewed = {.lag = 20, .skew = 500, .base = 1700000000000000000LL, .info = 1};
    assert_int_equal(import_pair(&skewed, 0, -1, &p, &err), TF_EINVAL);
    assert_contains(err.msg, "r0.json's PP:0B0 (rank 0) starts computing 0.48 ms before ");
    assert_contains(err.msg, "r1.json's PP:1B0 (rank 1), whose output it takes, ends");
    assert_contains(err.msg, "different runs, or their clocks are not synchronised");
    /* An hour apart: the steps do not even overlap. */
    skewed.skew = 3600e6;
    assert_int_equal(import_pair(&skewed, 0, -1, &p, &err), TF_EINVAL);
    assert_contains(err.msg, "do not overlap in time (they are 3600 s apart");
    /* --p2p-ms: the lag given, the clocks not read. */
    assert_int_equal(import_pair(&skewed, 0, 0.5, &p, &err), 0);
    assert_true(p.p2p_ms == 0.5);
    tf_profile_free(&p);
    /* A consistent run whose messages take 200 us of a 1.3 ms step. */
    run_shape slow = {.lag = 200, .base = 1700000000000000000LL, .info = 1};
    assert_int_equal(import_pair(&slow, 0, -1, &p, &err), TF_EINVAL);
    assert_contains(err.msg, "p2p_ms would be 0.2 ms, 15% of a step (median 1.3 ms)");
}

/* A legacy one-rank trace of the given "name ts dur" spans. */
static const char *legacy(const char *name, const char *const *spans, int n)
{
    static text t;
    t.len = 0;
    add(&t, "[");
    for (int i = 0; i < n; i++) {
        char pp[64];
        double ts, dur;
        assert_int_equal(sscanf(spans[i], "%63s %lf %lf", pp, &ts, &dur), 3);
        event(&t, "user_annotation", pp, ts, dur);
    }
    add(&t, "]");
    return put_text(name, t.buf);
}

static int import_one(const char *trace, tf_profile *p, tf_error *err)
{
    const char *traces[1] = {trace};
    tfi_options o;
    tfi_options_init(&o);
    o.traces = traces;
    o.n_traces = 1;
    return tfi_import(&o, p, err);
}

static void test_one_rank_checks(void **state)
{
    (void)state;
    tf_profile p;
    tf_error err = {0};
    /* Two actions 0.5 us apart in overlap: rounding, accepted. */
    const char *touching[] = {"ProfilerStep#0 0 100", "PP:0F0 1 10", "PP:0B0 10.5 10"};
    assert_int_equal(import_one(legacy("touch.json", touching, 3), &p, &err), 0);
    tf_profile_free(&p);
    /* 5 us: two actions at once. */
    const char *overlapping[] = {"ProfilerStep#0 0 100", "PP:0F0 1 10", "PP:0B0 6 10"};
    assert_int_equal(import_one(legacy("over.json", overlapping, 3), &p, &err), TF_EINVAL);
    assert_contains(err.msg, "over.json: event 2 \"PP:0B0\" (6.000 to 16.000 us) overlaps event "
                             "1 \"PP:0F0\" (1.000 to 11.000 us) in ProfilerStep#0");
    /* B before its F: a cycle, named with the step and the trace. */
    const char *backwards[] = {"ProfilerStep#3 0 100", "PP:0B0 1 10", "PP:0F0 20 10"};
    assert_int_equal(import_one(legacy("back.json", backwards, 3), &p, &err), TF_ECYCLE);
    assert_contains(err.msg, "the order the traces ran in ProfilerStep#3 deadlocks");
    assert_contains(err.msg, "back.json");
    assert_contains(err.msg, "0F0(rank 0) -> 0B0(rank 0) -> 0F0(rank 0)");
    /* A later step in a deadlocking order is refused too. */
    const char *later[] = {"ProfilerStep#1 0 100", "PP:0F0 1 10", "PP:0F1 20 10",
                           "PP:0B0 40 10", "PP:0B1 60 10", "ProfilerStep#2 100 100",
                           "PP:0F1 101 10", "PP:0F0 120 10", "PP:0B0 140 10", "PP:0B1 160 10"};
    assert_int_equal(import_one(legacy("later.json", later, 10), &p, &err), TF_ECYCLE);
    assert_contains(err.msg, "in ProfilerStep#2 deadlocks");
}

/* The per-step limit is checked while the actions are counted: the error
 * names the first action past it. */
static void test_step_limit(void **state)
{
    (void)state;
    size_t cap = (size_t)(TF_MAX_ACTIONS + 2) * 64 + 64, len = 0;
    char *doc = malloc(cap);
    assert_non_null(doc);
    len += (size_t)snprintf(doc + len, cap - len,
                            "[{\"name\":\"ProfilerStep#0\",\"ph\":\"X\",\"ts\":0,\"dur\":1e9}");
    for (int i = 0; i <= TF_MAX_ACTIONS; i++)
        len += (size_t)snprintf(doc + len, cap - len,
                                ",{\"name\":\"PP:%d%c%d\",\"ph\":\"X\",\"ts\":%d,\"dur\":1}",
                                i % 4, i < TF_MAX_ACTIONS / 2 + 1 ? 'F' : 'B',
                                (i % (TF_MAX_ACTIONS / 2 + 1)) / 4, 10 + 10 * i);
    len += (size_t)snprintf(doc + len, cap - len, "]");
    tf_profile p;
    tf_error err = {0};
    assert_int_equal(import_one(put("limit.json", doc, len), &p, &err), TF_EINVAL);
    char want[160];
    snprintf(want, sizeof want, "ProfilerStep#0 holds more than %d actions, the most the planner "
             "accepts in one step (event %d)", TF_MAX_ACTIONS, TF_MAX_ACTIONS + 1);
    assert_contains(err.msg, want);
    free(doc);
}

static void test_given_twice(void **state)
{
    (void)state;
    tf_profile p;
    tf_error err = {0};
    run_shape sh = {.lag = 20, .base = -1};
    char a[160], b[160], copy[160], copy1[160];
    snprintf(a, sizeof a, "%s", gpipe_rank("g0.json", 0, &sh));
    snprintf(b, sizeof b, "%s", gpipe_rank("g1.json", 1, &sh));
    snprintf(copy, sizeof copy, "%s", gpipe_rank("g0-copy.json", 0, &sh));
    snprintf(copy1, sizeof copy1, "%s", gpipe_rank("g1-copy.json", 1, &sh));
    tfi_options o;
    tfi_options_init(&o);
    const char *same_name[] = {a, a}, *same_events[] = {a, copy}, *run[] = {a, b};
    o.n_traces = 2;
    o.traces = same_name;
    assert_int_equal(tfi_import(&o, &p, &err), TF_EINVAL);
    assert_contains(err.msg, "g0.json is given twice");
    o.traces = same_events;
    assert_int_equal(tfi_import(&o, &p, &err), TF_EINVAL);
    assert_contains(err.msg, "g0.json and ");
    assert_contains(err.msg, "g0-copy.json hold the same events");
    /* The run itself given as its frozen run. */
    const char *frozen[] = {copy, copy1};
    o.traces = run;
    o.frozen = frozen;
    o.n_frozen = 2;
    assert_int_equal(tfi_import(&o, &p, &err), TF_EINVAL);
    assert_contains(err.msg, "g0-copy.json holds the same events as ");
    assert_contains(err.msg, "a trace of the run measured");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_edges),     cmocka_unit_test(test_numbers_exact),
        cmocka_unit_test(test_metadata),       cmocka_unit_test(test_clock_alignment),
        cmocka_unit_test(test_clock_errors),   cmocka_unit_test(test_one_rank_checks),
        cmocka_unit_test(test_step_limit),     cmocka_unit_test(test_given_twice),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
