/* test_study.c - tf-study's library: parsing and its errors, the layer
 * split, profiles, rows checked against the planner run on an independently
 * written profile, hand-computed bubbles, threads, CSV and SVG. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "study/study.h"
#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/profile.h"
#include "tf/util.h"

/* The issue's example study. */
static const char *const issue_study =
    "{ \"format\": \"tf-study\", \"version\": 1,"
    "  \"model\": { \"layers\": 32, \"layer_forward_ms\": 1.9, \"layer_backward_ms\": 4.1,"
    "    \"layer_backward_frozen_ms\": 2.1, \"layer_backward_input_ms\": 2.0,"
    "    \"layer_backward_weight_ms\": 2.1, \"layer_backward_weight_frozen_ms\": 0.02,"
    "    \"layer_parameters\": 218103808, \"microbatch_tokens\": 8192 },"
    "  \"sweep\": { \"schedule\": [\"GPipe\", \"1F1B\", \"Interleaved1F1B\", \"ZBVZeroBubble\"],"
    "    \"ranks\": [2, 4, 8], \"microbatches\": [8, 16, 32],"
    "    \"max_freeze_ratio\": [0.5, 0.8], \"p2p_ms\": [0.0] } }";

/* A small sweep whose LPs solve in milliseconds; every layer split is even
 * (8 layers over 2 or 4 stages), so a profile can be written by hand. */
static const char *const small_study =
    "{ \"model\": { \"layers\": 8, \"layer_forward_ms\": 1.5, \"layer_backward_ms\": 3.5,"
    "    \"layer_backward_frozen_ms\": 1.75, \"layer_backward_input_ms\": 1.6,"
    "    \"layer_backward_weight_ms\": 1.9, \"layer_backward_weight_frozen_ms\": 0.05,"
    "    \"microbatch_tokens\": 4096 },"
    "  \"sweep\": { \"schedule\": [\"GPipe\", \"1F1B\", \"Interleaved1F1B\", \"ZBVZeroBubble\"],"
    "    \"ranks\": [2], \"microbatches\": [2, 4], \"max_freeze_ratio\": [0.5, 1.0],"
    "    \"p2p_ms\": [0, 0.25] } }";

static void parse_ok(const char *json, tf_study *s)
{
    tf_error err = {0};
    int rc = tf_study_parse(json, "test.json", s, &err);
    if (rc)
        fprintf(stderr, "unexpected error: %s\n", err.msg);
    assert_int_equal(rc, 0);
}

static void test_parse_issue_example(void **state)
{
    (void)state;
    tf_study s;
    parse_ok(issue_study, &s);
    assert_int_equal(s.layers, 32);
    assert_true(s.has_split_backward);
    assert_float_equal(s.layer[31].forward_ms, 1.9, 0);
    assert_float_equal(s.layer[0].backward_frozen_ms, 2.1, 0);
    assert_float_equal(s.layer[5].backward_weight_frozen_ms, 0.02, 0);
    assert_float_equal(s.layer[5].parameters, 218103808, 0);
    assert_float_equal(s.microbatch_tokens, 8192, 0);
    assert_int_equal(s.n_schedule, 4);
    assert_string_equal(s.schedule[2], "Interleaved1F1B");
    tf_study_config *c;
    int n;
    assert_int_equal(tf_study_configs(&s, &c, &n, NULL), 0);
    assert_int_equal(n, 4 * 3 * 3 * 2);
    /* Default stages per rank; the last field varies fastest. */
    assert_int_equal(c[0].stages_per_rank, 1);
    assert_float_equal(c[0].max_freeze_ratio, 0.5, 0);
    assert_float_equal(c[1].max_freeze_ratio, 0.8, 0);
    assert_string_equal(c[n - 1].schedule, "ZBVZeroBubble");
    assert_int_equal(c[n - 1].stages_per_rank, 2);
    assert_int_equal(c[n - 1].ranks, 8);
    free(c);
    tf_study_free(&s);
}

static void test_defaults_and_lists(void **state)
{
    (void)state;
    tf_study s;
    /* Scalars stand for one-value lists; per-layer lists; frozen defaults
     * (0.5 B, 0.01 W; B = I + W when only the split is given); names match
     * case-insensitively; stages_per_rank applies to interleaved only. */
    parse_ok("{\"model\": {\"layers\": 3, \"layer_forward_ms\": [1, 2, 3],"
             "  \"layer_backward_input_ms\": 2, \"layer_backward_weight_ms\": [4, 4, 8],"
             "  \"microbatch_tokens\": 10},"
             " \"sweep\": {\"schedule\": [\"gpipe\", \"interleaved1f1b\"], \"ranks\": 1,"
             "  \"microbatches\": 4, \"stages_per_rank\": [2, 3]}}",
             &s);
    assert_float_equal(s.layer[2].forward_ms, 3, 0);
    assert_float_equal(s.layer[2].backward_ms, 10, 1e-12);
    assert_float_equal(s.layer[2].backward_weight_frozen_ms, 0.08, 1e-12);
    assert_float_equal(s.layer[2].backward_frozen_ms, 2.08, 1e-12);
    assert_string_equal(s.schedule[0], "GPipe");
    assert_float_equal(s.max_freeze_ratio[0], 0.9, 0);
    assert_float_equal(s.p2p_ms[0], 0.0, 0);
    tf_study_config *c;
    int n;
    assert_int_equal(tf_study_configs(&s, &c, &n, NULL), 0);
    assert_int_equal(n, 3); /* GPipe once (1 stage per rank), interleaved with 2 and 3 */
    assert_int_equal(c[0].stages_per_rank, 1);
    assert_int_equal(c[1].stages_per_rank, 2);
    assert_int_equal(c[2].stages_per_rank, 3);
    free(c);
    tf_study_free(&s);

    parse_ok("{\"model\": {\"layers\": 2, \"layer_forward_ms\": 1, \"layer_backward_ms\": 4,"
             "  \"microbatch_tokens\": 1},"
             " \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": 2, \"microbatches\": 2}}",
             &s);
    assert_false(s.has_split_backward);
    assert_float_equal(s.layer[1].backward_frozen_ms, 2.0, 0);
    tf_study_free(&s);
}

/* ---- invalid studies --------------------------------------------------- */

typedef struct bad_case {
    const char *json;
    const char *expect[3]; /* substrings of the message (path, value, reason) */
} bad_case;

#define MODEL "\"model\": {\"layers\": 4, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2, " \
              "\"microbatch_tokens\": 8}"
#define SWEEP "\"sweep\": {\"schedule\": [\"1F1B\"], \"ranks\": [2], \"microbatches\": [4]}"

static void test_invalid_studies(void **state)
{
    (void)state;
    static const bad_case cases[] = {
        {"{" MODEL ", \"sweep\": {\"schedule\": [\"1F1B\", \"Foo\"], \"ranks\": [2], "
         "\"microbatches\": [4]}}",
         {"test.json: $.sweep.schedule[1]", "unknown schedule", "\"Foo\""}},
        {"{" MODEL ", \"sweep\": {\"schedule\": [\"1F1B\"], \"ranks\": [], \"microbatches\": [4]}}",
         {"$.sweep.ranks", "at least one value", "[]"}},
        {"{" MODEL ", \"sweep\": {\"schedule\": [], \"ranks\": [2], \"microbatches\": [4]}}",
         {"$.sweep.schedule", "at least one schedule", "[]"}},
        {"{" MODEL ", \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": [2]}}",
         {"$.sweep.microbatches", "missing", NULL}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": -1, \"layer_backward_ms\": 2, "
         "\"microbatch_tokens\": 8}, " SWEEP "}",
         {"$.model.layer_forward_ms", "got -1", "[0, 1e+07]"}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": [1, 1, -0.5, 1], "
         "\"layer_backward_ms\": 2, \"microbatch_tokens\": 8}, " SWEEP "}",
         {"$.model.layer_forward_ms[2]", "got -0.5", NULL}},
        {"{\"model\": {\"layers\": \"4\", \"layer_forward_ms\": 1, \"layer_backward_ms\": 2, "
         "\"microbatch_tokens\": 8}, " SWEEP "}",
         {"$.model.layers", "integer", "got \"4\""}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": \"fast\", \"layer_backward_ms\": 2, "
         "\"microbatch_tokens\": 8}, " SWEEP "}",
         {"$.model.layer_forward_ms", "got \"fast\"", NULL}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": [1, 2], \"layer_backward_ms\": 2, "
         "\"microbatch_tokens\": 8}, " SWEEP "}",
         {"$.model.layer_forward_ms", "list of 4 numbers", "[1,2]"}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2, "
         "\"layer_backward_frozen_ms\": [1, 3, 1, 1], \"microbatch_tokens\": 8}, " SWEEP "}",
         {"$.model.layer_backward_frozen_ms[1]", "must not exceed", "got 3"}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": 1, \"microbatch_tokens\": 8}, " SWEEP
         "}",
         {"$.model.layer_backward_ms", "missing", NULL}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2}, " SWEEP
         "}",
         {"$.model.microbatch_tokens", "missing", NULL}},
        {"{" MODEL ", \"sweep\": {\"schedule\": [\"1F1B\", \"ZBVZeroBubble\"], \"ranks\": [2], "
         "\"microbatches\": [4]}}",
         {"$.sweep.schedule[1]", "layer_backward_input_ms", "\"ZBVZeroBubble\""}},
        {"{" MODEL ", \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": [2], \"microbatches\": [4],"
         " \"max_freeze_ratio\": [0.5, 1.5]}}",
         {"$.sweep.max_freeze_ratio[1]", "[0, 1]", "got 1.5"}},
        {"{" MODEL ", \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": [2, 4, 2], "
         "\"microbatches\": [4]}}",
         {"$.sweep.ranks[2]", "repeats", NULL}},
        {"{" MODEL ", \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": [2], "
         "\"microbatches\": [8.5]}}",
         {"$.sweep.microbatches[0]", "integer", "8.5"}},
        {"{" MODEL ", \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": [2], \"microbatches\": [4],"
         " \"p2p_ms\": -0.1}}",
         {"$.sweep.p2p_ms", "got -0.1", NULL}},
        {"{" MODEL ", \"sweep\": {\"schedule\": 7, \"ranks\": [2], \"microbatches\": [4]}}",
         {"$.sweep.schedule", "schedule name", "got 7"}},
        {"{" MODEL ", \"sweep\": [1, 2]}", {"$.sweep", "expected an object", NULL}},
        {"{\"format\": \"tf-profile\", " MODEL ", " SWEEP "}",
         {"$.format", "tf-study", NULL}},
        {"{" SWEEP "}", {"$.model", "missing", NULL}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2, "
         "\"microbatch_tokens\": 8, \"partition\": \"random\"}, " SWEEP "}",
         {"$.model.partition", "\"random\"", "balanced"}},
        {"{\"model\": {\"layers\": 2, \"profile\": \"/nonexistent/profile.json\"}, " SWEEP "}",
         {"$.model.profile", "/nonexistent/profile.json", NULL}},
        /* Unknown fields, in every object, named with the nearest known name:
         * a misspelled cap would otherwise sweep the default cap alone. */
        {"{" MODEL ", \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": [2], \"microbatches\": [4],"
         " \"max_freeze_ratios\": [0.5, 0.8]}}",
         {"test.json: $.sweep.max_freeze_ratios: unknown field (did you mean max_freeze_ratio?)",
          NULL, NULL}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2, "
         "\"layer_backward_frozn_ms\": 1, \"microbatch_tokens\": 8}, " SWEEP "}",
         {"$.model.layer_backward_frozn_ms: unknown field (did you mean "
          "layer_backward_frozen_ms?)",
          NULL, NULL}},
        {"{\"model\": {\"layers\": 4, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2, "
         "\"microbatch_tokens\": 8, \"head\": {\"forward\": 1}}, " SWEEP "}",
         {"$.model.head.forward: unknown field (known fields here: forward_ms, backward_ms, "
          "backward_frozen_ms, backward_input_ms, backward_weight_ms, "
          "backward_weight_frozen_ms, parameters;",
          NULL, NULL}},
        {"{" MODEL ", " SWEEP ", \"sweeps\": {}}",
         {"$.sweeps: unknown field (did you mean sweep?)", NULL, NULL}},
        {"{\"version\": 2, " MODEL ", " SWEEP "}",
         {"$.version: version 2 is newer than the tf-study version this toolkit reads (1)",
          NULL, NULL}},
        {"{\"meta\": 1, " MODEL ", " SWEEP "}", {"$.meta: expected an object", "got 1", NULL}},
        {"{\"model\": {\"layers\": 4,", {"not valid JSON", "line 1", NULL}},
        {"[]", {"$", "tf-study", NULL}},
        {"", {"empty", NULL, NULL}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tf_study s;
        tf_error err = {0};
        int rc = tf_study_parse(cases[k].json, "test.json", &s, &err);
        if (rc == 0)
            fprintf(stderr, "case %zu parsed but should not: %s\n", k, cases[k].json);
        assert_int_not_equal(rc, 0);
        assert_true(rc == TF_EINVAL || rc == TF_EIO);
        assert_null(s.layer);
        assert_null(s.schedule);
        for (int e = 0; e < 3 && cases[k].expect[e]; e++) {
            if (!strstr(err.msg, cases[k].expect[e]))
                fprintf(stderr, "case %zu: \"%s\" not in: %s\n", k, cases[k].expect[e], err.msg);
            assert_non_null(strstr(err.msg, cases[k].expect[e]));
        }
    }
}

/* ---- the layer split ---------------------------------------------------- */

static void split_of(const char *model, int stages, int *first)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"model\": {%s, \"microbatch_tokens\": 1}, \"sweep\": {\"schedule\": \"GPipe\", "
             "\"ranks\": 1, \"microbatches\": 1}}",
             model);
    tf_study s;
    parse_ok(json, &s);
    assert_int_equal(tf_study_partition(&s, stages, first, NULL), 0);
    tf_study_free(&s);
}

static void test_partition(void **state)
{
    (void)state;
    int first[8];
    split_of("\"layers\": 32, \"layer_forward_ms\": 1, \"layer_backward_ms\": 3", 4, first);
    int even[] = {0, 8, 16, 24, 32};
    assert_memory_equal(first, even, sizeof even);
    /* 10 layers on 4 stages: two stages of 3; later stages get them. */
    split_of("\"layers\": 10, \"layer_forward_ms\": 1, \"layer_backward_ms\": 3", 4, first);
    int uneven[] = {0, 2, 4, 7, 10};
    assert_memory_equal(first, uneven, sizeof uneven);
    /* "balanced": a head as costly as 3 layers leaves the last stage 2. */
    split_of("\"layers\": 12, \"layer_forward_ms\": 0.25, \"layer_backward_ms\": 0.75, "
             "\"partition\": \"balanced\", \"head\": {\"forward_ms\": 1, \"backward_ms\": 2}",
             3, first);
    int with_head[] = {0, 5, 10, 12};
    assert_memory_equal(first, with_head, sizeof with_head);
    /* "even" (the default) keeps 4 layers per stage regardless. */
    split_of("\"layers\": 12, \"layer_forward_ms\": 0.25, \"layer_backward_ms\": 0.75, "
             "\"head\": {\"forward_ms\": 1, \"backward_ms\": 2}",
             3, first);
    int even_head[] = {0, 4, 8, 12};
    assert_memory_equal(first, even_head, sizeof even_head);
    /* "even" with 13 layers on 4 stages: three stages of 3, one of 4, and
     * the 4 is not where the head is; of the equal splits, the later. */
    split_of("\"layers\": 13, \"layer_forward_ms\": 0.25, \"layer_backward_ms\": 0.75, "
             "\"head\": {\"forward_ms\": 1, \"backward_ms\": 1}",
             4, first);
    int even_uneven[] = {0, 3, 6, 10, 13};
    assert_memory_equal(first, even_uneven, sizeof even_uneven);
    /* An embedding worth 3 layers on the first stage. */
    split_of("\"layers\": 12, \"layer_forward_ms\": 0.25, \"layer_backward_ms\": 0.75, "
             "\"partition\": \"balanced\", \"embedding\": {\"forward_ms\": 1, \"backward_ms\": 2}",
             3, first);
    int with_embedding[] = {0, 2, 7, 12};
    assert_memory_equal(first, with_embedding, sizeof with_embedding);
    /* Per-layer costs: one heavy layer gets a stage to itself. */
    split_of("\"layers\": 5, \"layer_forward_ms\": [1, 1, 6, 1, 1], \"layer_backward_ms\": 0, "
             "\"partition\": \"balanced\"",
             3, first);
    int heavy[] = {0, 2, 3, 5};
    assert_memory_equal(first, heavy, sizeof heavy);

    tf_study s;
    parse_ok("{\"model\": {\"layers\": 3, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2, "
             "\"microbatch_tokens\": 1}, \"sweep\": {\"schedule\": \"GPipe\", \"ranks\": 1, "
             "\"microbatches\": 1}}",
             &s);
    tf_error err = {0};
    assert_int_equal(tf_study_partition(&s, 4, first, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "layers"));
    tf_study_free(&s);
}

/* ---- profiles and rows ------------------------------------------------- */

static void test_make_profile(void **state)
{
    (void)state;
    tf_study s;
    parse_ok("{\"model\": {\"layers\": 4, \"layer_forward_ms\": [1, 2, 3, 4],"
             " \"layer_backward_input_ms\": 1, \"layer_backward_weight_ms\": 2,"
             " \"layer_parameters\": 10, \"microbatch_tokens\": 100,"
             " \"embedding\": {\"forward_ms\": 0.5, \"backward_ms\": 0.4, \"parameters\": 7}},"
             " \"sweep\": {\"schedule\": \"ZBVZeroBubble\", \"ranks\": 2, \"microbatches\": 4}}",
             &s);
    tf_study_config c = {"ZBVZeroBubble", 2, 2, 4, 0.7, 0.125, -1, 0};
    tf_profile p;
    assert_int_equal(tf_study_make_profile(&s, &c, &p, NULL), 0);
    assert_int_equal(p.schedule.stages, 4);
    assert_float_equal(p.stages[0].forward_ms, 1.5, 1e-12);
    assert_float_equal(p.stages[3].forward_ms, 4.0, 1e-12);
    assert_float_equal(p.stages[1].backward_ms, 3.0, 1e-12);
    /* The embedding's backward without I/W counts as weight work. */
    assert_float_equal(p.stages[0].backward_input_ms, 1.0, 1e-12);
    assert_float_equal(p.stages[0].backward_weight_ms, 2.4, 1e-12);
    assert_float_equal(p.stages[0].backward_weight_frozen_ms, 0.02 + 0.2, 1e-12);
    assert_float_equal(p.stages[0].backward_ms, 3.4, 1e-12);
    assert_float_equal(p.stages[0].parameters, 17, 0);
    assert_float_equal(p.max_freeze_ratio[2], 0.7, 0);
    assert_float_equal(p.p2p_ms, 0.125, 0);
    assert_float_equal(p.microbatch_tokens, 100, 0);
    tf_profile_free(&p);

    /* A configuration the schedule cannot run is TF_EINVAL with a reason. */
    tf_error err = {0};
    tf_study_config too_deep = {"ZBVZeroBubble", 4, 2, 4, 0.7, 0, -1, 0};
    assert_int_equal(tf_study_make_profile(&s, &too_deep, &p, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "layers"));
    tf_study_row row;
    tf_study_solve(&s, &too_deep, TF_OBJECTIVE_LEAST_FREEZE, &row);
    assert_int_equal(row.status, TF_STUDY_SKIPPED);
    assert_non_null(strstr(row.reason, "8 stages"));
    tf_study_free(&s);
}

static double rel_diff(double a, double b)
{
    return fabs(a - b) / fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* Writes the profile of an evenly split configuration of small_study by
 * hand (stage time = layers per stage x layer time), without the study
 * code, and plans it as tf-plan does: from a file. */
static void plan_hand_profile(const tf_study_config *c, tf_plan *plan)
{
    const int stages = c->ranks * c->stages_per_rank, per_stage = 8 / stages;
    char json[4096];
    int n = snprintf(json, sizeof json,
                     "{\"format\": \"tf-profile\", \"version\": 1, \"schedule\": \"%s\", "
                     "\"ranks\": %d, \"stages_per_rank\": %d, \"microbatches\": %d, "
                     "\"microbatch_tokens\": 4096, \"p2p_ms\": %.17g, "
                     "\"max_freeze_ratio\": %.17g, \"stages\": [",
                     c->schedule, c->ranks, c->stages_per_rank, c->microbatches, c->p2p_ms,
                     c->max_freeze_ratio);
    for (int k = 0; k < stages; k++)
        n += snprintf(json + n, sizeof json - (size_t)n,
                      "%s{\"forward_ms\": %.17g, \"backward_ms\": %.17g, "
                      "\"backward_frozen_ms\": %.17g, \"backward_input_ms\": %.17g, "
                      "\"backward_weight_ms\": %.17g, \"backward_weight_frozen_ms\": %.17g}",
                      k ? ", " : "", 1.5 * per_stage, 3.5 * per_stage, 1.75 * per_stage,
                      1.6 * per_stage, 1.9 * per_stage, 0.05 * per_stage);
    snprintf(json + n, sizeof json - (size_t)n, "]}");
    char path[] = "/tmp/tf-study-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    tf_error err = {0};
    assert_int_equal(tf_write_file_atomic(path, json, strlen(json), &err), 0);
    tf_profile p;
    int rc = tf_profile_load(path, &p, &err);
    unlink(path);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(tf_plan_from_profile(&p, NULL, plan, &err), 0);
    tf_profile_free(&p);
}

static void test_rows_match_planner(void **state)
{
    (void)state;
    tf_study s;
    parse_ok(small_study, &s);
    tf_study_result r;
    tf_study_run_options o;
    tf_study_run_options_init(&o);
    o.threads = 2;
    assert_int_equal(tf_study_run(&s, &o, &r, NULL), 0);
    assert_int_equal(r.n_rows, 4 * 2 * 2 * 2);
    assert_int_equal(r.failed, 0);
    /* GPipe and 1F1B with 2 microbatches on 2 stages run; the interleaved
     * schedule with 2 microbatches on 4 stages may be refused by PyTorch's
     * rules, so only count. */
    assert_true(r.solved >= 12);
    assert_int_equal(r.solved + r.skipped, r.n_rows);
    int checked = 0;
    for (int i = 0; i < r.n_rows; i++) {
        const tf_study_row *w = &r.rows[i];
        if (w->status == TF_STUDY_SKIPPED) {
            assert_true(strlen(w->reason) > 0);
            continue;
        }
        /* Bounds on every row. */
        assert_true(w->batch_ms_all_frozen <= w->batch_ms_planned * (1 + 1e-9));
        assert_true(w->batch_ms_planned <= w->batch_ms_unfrozen * (1 + 1e-9));
        assert_true(w->speedup >= 1.0 - 1e-9);
        assert_true(w->mean_freeze_ratio >= 0 &&
                    w->mean_freeze_ratio <= w->config.max_freeze_ratio + 1e-9);
        assert_true(w->bubble_ratio_unfrozen >= 0 && w->bubble_ratio_unfrozen < 1);
        assert_true(w->bubble_ratio_planned >= 0 && w->bubble_ratio_planned < 1);
        assert_int_equal(w->layers_per_stage_min, 8 / w->stages);
        assert_int_equal(w->layers_per_stage_max, 8 / w->stages);

        tf_plan plan;
        plan_hand_profile(&w->config, &plan);
        assert_true(rel_diff(w->batch_ms_unfrozen, plan.batch_ms_unfrozen) < 1e-9);
        assert_true(rel_diff(w->batch_ms_all_frozen, plan.batch_ms_all_frozen) < 1e-9);
        assert_true(rel_diff(w->batch_ms_planned, plan.batch_ms_planned) < 1e-7);
        assert_true(rel_diff(w->speedup, plan.speedup) < 1e-7);
        assert_true(rel_diff(w->mean_freeze_ratio, plan.freeze_ratio_mean) < 1e-6);
        assert_true(rel_diff(w->tokens_per_s_planned, plan.tokens_per_s_planned) < 1e-7);
        /* The bubble, recomputed from the plan's actions. */
        double busy = 0, busy_max = 0;
        for (int a = 0; a < plan.schedule.n_actions; a++) {
            busy += plan.actions[a].ms;
            busy_max += plan.actions[a].max_ms;
        }
        double ranks = plan.schedule.ranks;
        assert_float_equal(w->bubble_ratio_planned,
                           1 - busy / (ranks * plan.batch_ms_planned), 1e-6);
        assert_float_equal(w->bubble_ratio_unfrozen,
                           1 - busy_max / (ranks * plan.batch_ms_unfrozen), 1e-9);
        tf_plan_free(&plan);
        checked++;
    }
    assert_int_equal(checked, r.solved);
    tf_study_result_free(&r);
    tf_study_free(&s);
}

/* LoopedBFS (any stages per rank) and DualPipeV (2 per rank, overlapped
 * pairs, M >= 2P) as sweep schedules: every row against the planner on a
 * hand-written profile; DualPipeV's refusal of 4 microbatches on 8 stages
 * is a skip with PyTorch's reason. */
static void test_looped_bfs_and_dual_pipe_v(void **state)
{
    (void)state;
    tf_study s;
    parse_ok("{ \"model\": { \"layers\": 8, \"layer_forward_ms\": 1.5,"
             "    \"layer_backward_ms\": 3.5, \"layer_backward_frozen_ms\": 1.75,"
             "    \"layer_backward_input_ms\": 1.6, \"layer_backward_weight_ms\": 1.9,"
             "    \"layer_backward_weight_frozen_ms\": 0.05, \"microbatch_tokens\": 4096 },"
             "  \"sweep\": { \"schedule\": [\"loopedbfs\", \"DualPipeV\"], \"ranks\": [2, 4],"
             "    \"stages_per_rank\": [1, 2], \"microbatches\": [4, 8],"
             "    \"max_freeze_ratio\": 0.7, \"p2p_ms\": 0.1 } }",
             &s);
    assert_string_equal(s.schedule[0], "LoopedBFS");
    tf_study_result r;
    assert_int_equal(tf_study_run(&s, NULL, &r, NULL), 0);
    assert_int_equal(r.n_rows, 8 + 4);
    assert_int_equal(r.failed, 0);
    assert_int_equal(r.skipped, 1);
    int looped_spr[3] = {0, 0, 0};
    for (int i = 0; i < r.n_rows; i++) {
        const tf_study_row *w = &r.rows[i];
        const tf_study_config *c = &w->config;
        if (w->status == TF_STUDY_SKIPPED) {
            assert_string_equal(c->schedule, "DualPipeV");
            assert_true(c->ranks == 4 && c->microbatches == 4);
            assert_non_null(strstr(w->reason, "microbatches = 4 is fewer than the 8 stages"));
            continue;
        }
        if (!strcmp(c->schedule, "LoopedBFS"))
            looped_spr[c->stages_per_rank]++;
        else
            assert_int_equal(c->stages_per_rank, 2);
        tf_plan plan;
        plan_hand_profile(c, &plan);
        assert_true(rel_diff(w->batch_ms_unfrozen, plan.batch_ms_unfrozen) < 1e-9);
        assert_true(rel_diff(w->batch_ms_all_frozen, plan.batch_ms_all_frozen) < 1e-9);
        assert_true(rel_diff(w->batch_ms_planned, plan.batch_ms_planned) < 1e-7);
        assert_true(w->speedup > 1.0);
        tf_plan_free(&plan);
    }
    assert_true(looped_spr[1] == 4 && looped_spr[2] == 4);
    tf_study_result_free(&r);
    tf_study_free(&s);
}

/* GPipe, 2 ranks, 2 microbatches, one layer per stage, F = 1, B = 2
 * (frozen 1).  Unfrozen: forwards end at 3, B0 and B1 of stage 1 run 3-7,
 * stage 0's backwards 5-9: batch 9, busy 2 x 6 of 2 x 9, bubble 1/3.  All
 * frozen: backwards take 1, batch 6, busy 2 x 4 of 2 x 6, bubble 1/3. */
static void test_hand_computed_bubble(void **state)
{
    (void)state;
    tf_study s;
    parse_ok("{\"model\": {\"layers\": 2, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2,"
             " \"microbatch_tokens\": 1000},"
             " \"sweep\": {\"schedule\": \"GPipe\", \"ranks\": 2, \"microbatches\": 2,"
             " \"max_freeze_ratio\": [0, 1]}}",
             &s);
    tf_study_result r;
    assert_int_equal(tf_study_run(&s, NULL, &r, NULL), 0);
    assert_int_equal(r.solved, 2);
    const tf_study_row *none = &r.rows[0], *all = &r.rows[1];
    assert_float_equal(none->batch_ms_unfrozen, 9, 1e-9);
    assert_float_equal(none->batch_ms_all_frozen, 6, 1e-9);
    assert_float_equal(none->batch_ms_planned, 9, 1e-9);
    assert_float_equal(none->speedup, 1, 1e-9);
    assert_float_equal(none->bubble_ratio_unfrozen, 1.0 / 3, 1e-9);
    assert_float_equal(none->bubble_ratio_planned, 1.0 / 3, 1e-9);
    assert_float_equal(none->tokens_per_s_unfrozen, 2000 / 0.009, 1e-6);
    assert_float_equal(all->batch_ms_planned, 6, 1e-7);
    assert_float_equal(all->speedup, 1.5, 1e-7);
    assert_float_equal(all->bubble_ratio_planned, 1.0 / 3, 1e-7);
    assert_float_equal(all->mean_freeze_ratio, 1, 1e-7);
    assert_float_equal(all->tokens_per_s_planned, 2000 / 0.006, 1e-3);
    tf_study_result_free(&r);
    tf_study_free(&s);
}

static void test_skips(void **state)
{
    (void)state;
    tf_study s;
    /* 8 ranks need 8 layers; PyTorch's Interleaved1F1B needs microbatches
     * to be a multiple of max(1, microbatches / ranks). */
    parse_ok("{\"model\": {\"layers\": 4, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2,"
             " \"microbatch_tokens\": 1},"
             " \"sweep\": {\"schedule\": [\"1F1B\", \"Interleaved1F1B\"], \"ranks\": [2, 8],"
             " \"microbatches\": [5, 8]}}",
             &s);
    tf_study_result r;
    assert_int_equal(tf_study_run(&s, NULL, &r, NULL), 0);
    assert_int_equal(r.n_rows, 8);
    assert_int_equal(r.solved, 3);
    assert_int_equal(r.skipped, 5);
    assert_int_equal(r.failed, 0);
    static const tf_study_status want[8] = {TF_STUDY_SOLVED,  TF_STUDY_SOLVED,  TF_STUDY_SKIPPED,
                                            TF_STUDY_SKIPPED, TF_STUDY_SKIPPED, TF_STUDY_SOLVED,
                                            TF_STUDY_SKIPPED, TF_STUDY_SKIPPED};
    for (int i = 0; i < 8; i++)
        assert_int_equal(r.rows[i].status, want[i]);
    assert_non_null(strstr(r.rows[2].reason, "8 stages need at least 8 layers"));
    assert_non_null(strstr(r.rows[4].reason, "microbatches = 5"));
    tf_study_result_free(&r);
    tf_study_free(&s);
}

static void test_threads_give_same_rows(void **state)
{
    (void)state;
    tf_study s;
    parse_ok(small_study, &s);
    tf_study_result one, three;
    tf_study_run_options o;
    tf_study_run_options_init(&o);
    o.threads = 1;
    assert_int_equal(tf_study_run(&s, &o, &one, NULL), 0);
    o.threads = 3;
    assert_int_equal(tf_study_run(&s, &o, &three, NULL), 0);
    assert_int_equal(one.threads, 1);
    assert_int_equal(three.threads, 3);
    assert_int_equal(one.n_rows, three.n_rows);
    for (int i = 0; i < one.n_rows; i++) {
        tf_study_row a = one.rows[i], b = three.rows[i];
        a.solve_seconds = b.solve_seconds = 0;
        assert_memory_equal(&a, &b, sizeof a);
    }
    tf_study_result_free(&one);
    tf_study_result_free(&three);
    tf_study_free(&s);
}

/* Per-layer times from a measured profile: stage times / layers per stage. */
static void test_profile_source(void **state)
{
    (void)state;
    char dir[] = "/tmp/tf-study-dir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char profile_path[256], study_path[256];
    snprintf(profile_path, sizeof profile_path, "%s/measured.json", dir);
    snprintf(study_path, sizeof study_path, "%s/study.json", dir);
    const char *profile =
        "{\"schedule\": \"1F1B\", \"ranks\": 2, \"microbatches\": 2, \"microbatch_tokens\": 512,"
        " \"stages\": [{\"forward_ms\": 8, \"backward_ms\": 16, \"backward_frozen_ms\": 4},"
        "              {\"forward_ms\": 12, \"backward_ms\": 24}]}";
    const char *study =
        "{\"model\": {\"layers\": 8, \"profile\": \"measured.json\"},"
        " \"sweep\": {\"schedule\": [\"GPipe\"], \"ranks\": [4], \"microbatches\": [4]}}";
    tf_error err = {0};
    assert_int_equal(tf_write_file_atomic(profile_path, profile, strlen(profile), &err), 0);
    assert_int_equal(tf_write_file_atomic(study_path, study, strlen(study), &err), 0);
    tf_study s;
    int rc = tf_study_load(study_path, &s, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_string_equal(s.profile_path, profile_path);
    assert_float_equal(s.layer[0].forward_ms, 2, 1e-12);
    assert_float_equal(s.layer[3].backward_frozen_ms, 1, 1e-12);
    assert_float_equal(s.layer[4].forward_ms, 3, 1e-12);
    assert_float_equal(s.layer[7].backward_frozen_ms, 3, 1e-12); /* 0.5 x 24 / 4 */
    assert_float_equal(s.microbatch_tokens, 512, 0);
    assert_false(s.has_split_backward);
    tf_study_free(&s);

    /* Explicit fields win over the profile's. */
    const char *override =
        "{\"model\": {\"layers\": 8, \"profile\": \"measured.json\", \"layer_forward_ms\": 5,"
        " \"microbatch_tokens\": 64},"
        " \"sweep\": {\"schedule\": [\"GPipe\"], \"ranks\": [4], \"microbatches\": [4]}}";
    assert_int_equal(tf_write_file_atomic(study_path, override, strlen(override), &err), 0);
    assert_int_equal(tf_study_load(study_path, &s, &err), 0);
    assert_float_equal(s.layer[6].forward_ms, 5, 0);
    assert_float_equal(s.layer[6].backward_ms, 6, 1e-12);
    assert_float_equal(s.microbatch_tokens, 64, 0);
    tf_study_free(&s);

    /* A profile with more stages than the model has layers. */
    const char *too_few =
        "{\"model\": {\"layers\": 1, \"profile\": \"measured.json\"},"
        " \"sweep\": {\"schedule\": [\"GPipe\"], \"ranks\": [1], \"microbatches\": [4]}}";
    assert_int_equal(tf_write_file_atomic(study_path, too_few, strlen(too_few), &err), 0);
    assert_int_equal(tf_study_load(study_path, &s, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "$.model.layers"));
    unlink(profile_path);
    unlink(study_path);
    rmdir(dir);
}

static void test_csv_and_svg(void **state)
{
    (void)state;
    tf_study s;
    parse_ok(small_study, &s);
    tf_study_result r;
    assert_int_equal(tf_study_run(&s, NULL, &r, NULL), 0);
    char *csv, *svg;
    assert_int_equal(tf_study_to_csv(&r, &csv, NULL), 0);
    const char *columns[] = {"schedule,ranks,stages_per_rank,", ",microbatches,max_freeze_ratio,p2p_ms,",
                             ",batch_ms_unfrozen,batch_ms_all_frozen,batch_ms_planned,speedup,",
                             ",bubble_ratio_unfrozen,bubble_ratio_planned,mean_freeze_ratio,",
                             ",tokens_per_s_planned,", ",solve_seconds\n"};
    for (size_t k = 0; k < sizeof columns / sizeof *columns; k++)
        assert_non_null(strstr(csv, columns[k]));
    int lines = 0;
    for (const char *p = csv; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, r.solved + 1);
    size_t len = 0;
    assert_int_equal(tf_study_plot(&r, "svg", &svg, &len, NULL), 0);
    assert_true(strncmp(svg, "<?xml", 5) == 0 && len == strlen(svg));
    assert_non_null(strstr(svg, "</svg>\n"));
    assert_non_null(strstr(svg, ">ZBVZeroBubble</text>"));
    assert_non_null(strstr(svg, "tokens/s per GPU"));
    /* Each bar's tooltip carries its configuration's figures. */
    char tip[160];
    const tf_study_row *w = &r.rows[0];
    snprintf(tip, sizeof tip, "%.0f \xe2\x86\x92 %.0f tokens/s per GPU, speedup %.3fx",
             w->tokens_per_s_unfrozen / w->config.ranks, w->tokens_per_s_planned / w->config.ranks,
             w->speedup);
    assert_int_equal(w->status, TF_STUDY_SOLVED);
    assert_non_null(strstr(svg, tip));
    free(csv);
    free(svg);
    /* The same drawing as PNG and PDF. */
    assert_int_equal(tf_study_plot(&r, "png", &svg, &len, NULL), 0);
    assert_true(len > 8 && memcmp(svg, "\x89PNG\r\n\x1a\n", 8) == 0);
    free(svg);
    assert_int_equal(tf_study_plot(&r, "pdf", &svg, &len, NULL), 0);
    assert_true(len > 5 && memcmp(svg, "%PDF-", 5) == 0);
    free(svg);
    /* The summary names the best configurations. */
    char *summary = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&summary, &size);
    assert_non_null(f);
    tf_study_print_summary(&r, f);
    fclose(f);
    assert_non_null(strstr(summary, "## Best configuration per pipeline depth"));
    assert_non_null(strstr(summary, "| ZBVZeroBubble |"));
    free(summary);
    /* Nothing solved: no plot. */
    for (int i = 0; i < r.n_rows; i++)
        r.rows[i].status = TF_STUDY_SKIPPED;
    r.solved = 0;
    tf_error err = {0};
    assert_int_equal(tf_study_plot(&r, "svg", &svg, &len, &err), TF_EINVAL);
    assert_null(svg);
    tf_study_result_free(&r);
    tf_study_free(&s);
}

/* "meta" holds anything (notes, provenance) and changes nothing; the
 * current version and no version read alike. */
static void test_meta(void **state)
{
    (void)state;
    const char *texts[] = {
        "{" MODEL ", " SWEEP "}",
        "{\"format\": \"tf-study\", \"version\": 1, " MODEL ", " SWEEP ","
        " \"meta\": {\"comment\": \"by hand\", \"sweep\": [1, {\"max_freeze_ratios\": 0}]}}",
    };
    int configs[2];
    for (int k = 0; k < 2; k++) {
        tf_study s;
        parse_ok(texts[k], &s);
        tf_study_config *c;
        tf_error err = {0};
        assert_int_equal(tf_study_configs(&s, &c, &configs[k], &err), 0);
        assert_true(c[0].max_freeze_ratio == 0.9);
        free(c);
        tf_study_free(&s);
    }
    assert_int_equal(configs[0], 1);
    assert_int_equal(configs[1], 1);
}

/* The chart's format comes from the suffix; a name without one is SVG. */
static void test_plot_format(void **state)
{
    (void)state;
    assert_string_equal(tf_study_plot_format("r.svg"), "svg");
    assert_string_equal(tf_study_plot_format("out/R.PNG"), "png");
    assert_string_equal(tf_study_plot_format("r.pdf"), "pdf");
    assert_string_equal(tf_study_plot_format("/dev/null"), "svg");
    assert_string_equal(tf_study_plot_format("runs.v2/chart"), "svg");
    assert_null(tf_study_plot_format("r.jpg"));
    assert_null(tf_study_plot_format("r.dot"));
}

/* The bundled example studies parse. */
static void test_bundled_examples(void **state)
{
    (void)state;
    const char *root = getenv("TF_SOURCE_DIR");
    if (!root)
        skip();
    const char *names[] = {"issue-example.json", "llama8b-h200.json", "llama8b-profile.json",
                           "llama8b-80gib.json", "llama8b-memory.json"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tools/examples/%s", root, names[k]);
        tf_study s;
        tf_error err = {0};
        int rc = tf_study_load(path, &s, &err);
        if (rc)
            fprintf(stderr, "%s\n", err.msg);
        assert_int_equal(rc, 0);
        tf_study_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_issue_example),
        cmocka_unit_test(test_defaults_and_lists),
        cmocka_unit_test(test_invalid_studies),
        cmocka_unit_test(test_partition),
        cmocka_unit_test(test_make_profile),
        cmocka_unit_test(test_rows_match_planner),
        cmocka_unit_test(test_hand_computed_bubble),
        cmocka_unit_test(test_skips),
        cmocka_unit_test(test_looped_bfs_and_dual_pipe_v),
        cmocka_unit_test(test_threads_give_same_rows),
        cmocka_unit_test(test_profile_source),
        cmocka_unit_test(test_csv_and_svg),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_plot_format),
        cmocka_unit_test(test_bundled_examples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
