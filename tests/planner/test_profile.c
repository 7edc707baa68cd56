/* test_profile.c - profile.json parsing: defaults, round trip, and every
 * kind of bad input rejected with a message naming the field and value. */
#include <math.h>

#include "test_util.h"
#include "tf/profile.h"

#define GOOD_STAGE "{\"forward_ms\": 1.5, \"backward_ms\": 4.0, \"backward_frozen_ms\": 2.0}"

static const char *good_profile =
    "{\"format\": \"tf-profile\", \"version\": 1, \"schedule\": \"1F1B\", \"ranks\": 2,"
    " \"microbatches\": 3, \"microbatch_tokens\": 1024, \"p2p_ms\": 0.25,"
    " \"max_freeze_ratio\": 0.8,"
    " \"meta\": {\"provenance\": \"by hand\", \"backward_frozn_ms\": [1, {\"x\": null}], \"\": 0},"
    " \"stages\": [" GOOD_STAGE ", {\"forward_ms\": 2, \"backward_ms\": 6, \"parameters\": 1000}],"
    " \"actions\": [{\"rank\": 1, \"stage\": 1, \"microbatch\": 2, \"type\": \"B\", \"ms\": 7.0,"
    "                \"frozen_ms\": 3.5}]}";

static void parses_a_good_profile(void **state)
{
    tf_profile p;
    tf_error err = {0};
    int rc = tf_profile_parse(good_profile, "good.json", &p, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_string_equal(p.schedule.name, "1F1B");
    assert_int_equal(p.schedule.ranks, 2);
    assert_int_equal(p.schedule.stages, 2);
    assert_int_equal(p.schedule.n_actions, 12);
    assert_true(p.microbatch_tokens == 1024 && p.p2p_ms == 0.25);
    assert_true(p.max_freeze_ratio[0] == 0.8 && p.max_freeze_ratio[1] == 0.8);
    /* Missing frozen time: the reference default, half the backward. */
    assert_true(p.stages[1].backward_frozen_ms == 3.0);
    assert_true(p.stages[1].parameters == 1000);

    double max_ms[12], min_ms[12];
    tf_profile_durations(&p, max_ms, min_ms);
    int b12 = tf_schedule_find(&p.schedule, TF_ACT_B, 1, 2);
    int b11 = tf_schedule_find(&p.schedule, TF_ACT_B, 1, 1);
    int f00 = tf_schedule_find(&p.schedule, TF_ACT_F, 0, 0);
    assert_true(max_ms[b12] == 7.0 && min_ms[b12] == 3.5);     /* measured override */
    assert_true(max_ms[b11] == 6.0 && min_ms[b11] == 3.0);     /* stage timings */
    assert_true(max_ms[f00] == 1.5 && min_ms[f00] == 1.5);     /* forwards are fixed */

    /* Round trip through the writer. */
    char *json;
    assert_int_equal(tf_profile_to_json(&p, &json, NULL), 0);
    tf_profile q;
    assert_int_equal(tf_profile_parse(json, "round trip", &q, &err), 0);
    assert_int_equal(q.n_overrides, 1);
    double max2[12], min2[12];
    tf_profile_durations(&q, max2, min2);
    for (int i = 0; i < 12; i++)
        assert_true(max2[i] == max_ms[i] && min2[i] == min_ms[i]);
    free(json);
    tf_profile_free(&q);
    tf_profile_free(&p);
}

static void split_backward_defaults_and_per_stage_caps(void **state)
{
    const char *text =
        "{\"schedule\": \"ZBVZeroBubble\", \"ranks\": 2, \"microbatches\": 4,"
        " \"max_freeze_ratio\": [0.1, 0.2, 0.3, 0.4],"
        " \"stages\": [{\"forward_ms\": 1, \"backward_input_ms\": 1, \"backward_weight_ms\": 2},"
        "  {\"forward_ms\": 1, \"backward_input_ms\": 1, \"backward_weight_ms\": 2},"
        "  {\"forward_ms\": 1, \"backward_input_ms\": 1, \"backward_weight_ms\": 2},"
        "  {\"forward_ms\": 1, \"backward_input_ms\": 1, \"backward_weight_ms\": 2,"
        "   \"backward_weight_frozen_ms\": 0.5}]}";
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_parse(text, "zbv.json", &p, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(p.schedule.stages_per_rank, 2); /* ZBV's only shape, by default */
    assert_true(p.max_freeze_ratio[2] == 0.3);
    assert_close(p.stages[0].backward_weight_frozen_ms, 0.02, 1e-12); /* 1% of W */
    assert_true(p.stages[3].backward_weight_frozen_ms == 0.5);
    tf_profile_free(&p);
}

static void custom_order(void **state)
{
    const char *text = "{\"schedule\": \"mine\", \"ranks\": 2, \"microbatches\": 2,"
                       " \"stages\": [" GOOD_STAGE ", " GOOD_STAGE "],"
                       " \"order\": [[\"0F0\", \"0F1\", \"0B0\", \"0B1\"],"
                       "            [\"1F0\", \"1F1\", \"1B0\", \"1B1\"]]}";
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_parse(text, "order.json", &p, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(p.schedule.name, "mine");
    assert_int_equal(p.schedule.actions[p.schedule.rank_offset[1] + 1].microbatch, 1);
    assert_int_equal(p.schedule.actions[p.schedule.rank_offset[1] + 1].type, TF_ACT_F);
    tf_profile_free(&p);
}

/* Each bad input: the text, and pieces the message must contain. */
typedef struct bad_case {
    const char *text;
    const char *must_say[3];
} bad_case;

/* Rank 0 overlaps 0F1 with 0B0 (F 1.5 ms, B 4 ms, B frozen 2 ms). */
#define PAIR_ORDER                                                                               \
    " \"order\": [[\"0F0\", \"(0F1;0B0)OVERLAP_F_B\", \"0B1\"],"                                 \
    "            [\"1F0\", \"1B0\", \"1F1\", \"1B1\"]]"
#define PAIR_PROFILE(pairs)                                                                      \
    "{\"schedule\": \"paired\", \"ranks\": 2, \"microbatches\": 2,"                              \
    " \"stages\": [" GOOD_STAGE ", " GOOD_STAGE "]," PAIR_ORDER pairs "}"

/* Durations of the pair's two actions, max and min, into d[4]. */
static void pair_durations(const char *text, double d[4])
{
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_parse(text, "pair.json", &p, &err))
        fail_msg("%s", err.msg);
    double max_ms[8], min_ms[8];
    tf_profile_durations(&p, max_ms, min_ms);
    int f = tf_schedule_find(&p.schedule, TF_ACT_F, 0, 1);
    assert_int_equal(p.schedule.actions[f].pair, TF_PAIR_FIRST);
    d[0] = max_ms[f], d[1] = min_ms[f], d[2] = max_ms[f + 1], d[3] = min_ms[f + 1];
    tf_profile_free(&p);
}

/* A pair measured whole (docs/formats.md): the forward keeps its time, or
 * the pair's frozen time when that is shorter; the backward gets the rest;
 * unmeasured, freezing saves what it saves on the backward alone. */
static void pairs_measured_whole(void **state)
{
    double d[4];
    pair_durations(PAIR_PROFILE(""), d);
    assert_true(d[0] == 1.5 && d[1] == 1.5 && d[2] == 4.0 && d[3] == 2.0);
    /* 5 ms together (the overlap hid 0.5 ms); frozen by default 5 - 2 = 3. */
    pair_durations(PAIR_PROFILE(", \"pairs\": [{\"pair\": \"(0F1;0B0)OVERLAP_F_B\", \"ms\": 5}]"),
                   d);
    assert_true(d[0] == 1.5 && d[1] == 1.5 && d[2] == 3.5 && d[3] == 1.5);
    pair_durations(PAIR_PROFILE(", \"pairs\": [{\"pair\": \" (0F1; 0B0)OVERLAP_F_B\", \"ms\": 5,"
                                " \"frozen_ms\": 4.5}]"),
                   d);
    assert_true(d[0] == 1.5 && d[2] == 3.5 && d[3] == 3.0);
    /* A pair shorter than its forward alone when frozen: the forward gets
     * the frozen time, the backward's part freezes to nothing. */
    pair_durations(PAIR_PROFILE(", \"pairs\": [{\"pair\": \"(0F1;0B0)OVERLAP_F_B\", \"ms\": 2,"
                                " \"frozen_ms\": 1}]"),
                   d);
    assert_true(d[0] == 1.0 && d[1] == 1.0 && d[2] == 1.0 && d[3] == 0.0);

    /* Round trip: the order keeps its pair cell, "pairs" its figures. */
    tf_profile p, q;
    tf_error err = {0};
    assert_int_equal(tf_profile_parse(PAIR_PROFILE(", \"pairs\": [{\"pair\": "
                                                   "\"(0F1;0B0)OVERLAP_F_B\", \"ms\": 5}]"),
                                      "pair.json", &p, &err),
                     0);
    char *json;
    assert_int_equal(tf_profile_to_json(&p, &json, NULL), 0);
    assert_contains(json, "\"(0F1;0B0)OVERLAP_F_B\"");
    if (tf_profile_parse(json, "again", &q, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(q.n_pairs, 1);
    assert_true(q.pairs[0].ms == 5 && q.pairs[0].frozen_ms < 0);
    assert_int_equal(q.schedule.actions[2].pair, TF_PAIR_SECOND);
    free(json);
    tf_profile_free(&q);
    tf_profile_free(&p);
}

/* A profile read for an order given from outside (--schedule-csv): no
 * schedule name needed, another one ignored, stated shapes checked. */
static void profile_for_an_order(void **state)
{
    const char *r0[] = {"0F0", "(0F1;0B0)OVERLAP_F_B", "0B1"};
    const char *r1[] = {"1F0", "1B0", "1F1", "1B1"};
    const char *const *rows[] = {r0, r1};
    int len[] = {3, 4};
    tf_schedule order;
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){rows, len, 2}, 2, "csv", &order, NULL),
                     0);
    const char *good[] = {
        "{\"stages\": [" GOOD_STAGE ", " GOOD_STAGE "], \"p2p_ms\": 0.5}",
        "{\"schedule\": \"GPipe\", \"ranks\": 2, \"microbatches\": 2,"
        " \"stages\": [" GOOD_STAGE ", " GOOD_STAGE "], \"p2p_ms\": 0.5,"
        " \"order\": [[\"0F0\", \"0F1\", \"0B0\", \"0B1\"], [\"1F0\", \"1F1\", \"1B0\", \"1B1\"]],"
        " \"pairs\": [{\"pair\": \"(0F1;0B0)OVERLAP_F_B\", \"ms\": 5}]}"};
    for (int k = 0; k < 2; k++) {
        tf_profile p;
        tf_error err = {0};
        if (tf_profile_parse_for(good[k], "timings.json", &order, &p, &err))
            fail_msg("case %d: %s", k, err.msg);
        assert_string_equal(p.schedule.name, "custom");
        assert_int_equal(p.schedule.n_actions, 8);
        assert_int_equal(p.schedule.actions[1].pair, TF_PAIR_FIRST);
        assert_true(p.p2p_ms == 0.5);
        assert_int_equal(p.n_pairs, k);
        tf_profile_free(&p);
    }
    const bad_case bad[] = {
        {"{\"ranks\": 4, \"stages\": [" GOOD_STAGE ", " GOOD_STAGE "]}",
         {"$.ranks", "has 2 ranks", "4"}},
        {"{\"microbatches\": 3, \"stages\": [" GOOD_STAGE ", " GOOD_STAGE "]}",
         {"$.microbatches", "has 2 microbatches"}},
        {"{\"stages_per_rank\": 2, \"stages\": [" GOOD_STAGE ", " GOOD_STAGE "]}",
         {"$.stages_per_rank", "has 1 stages per rank"}},
        {"{\"stages\": [" GOOD_STAGE "]}", {"$.stages", "2 entries, found 1"}},
        {"{\"stages\": [" GOOD_STAGE ", " GOOD_STAGE "],"
         " \"actions\": [{\"stage\": 0, \"microbatch\": 0, \"type\": \"I\", \"ms\": 1}]}",
         {"$.actions[0]", "does not have"}},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tf_profile p;
        tf_error err = {0};
        if (tf_profile_parse_for(bad[k].text, "timings.json", &order, &p, &err) != TF_EINVAL)
            fail_msg("case %zu accepted: %s", k, bad[k].text);
        for (int m = 0; m < 3 && bad[k].must_say[m]; m++)
            assert_contains(err.msg, bad[k].must_say[m]);
        assert_int_equal(p.schedule.n_actions, 0);
    }
    tf_schedule_free(&order);
}

#define BASE(extra) "{\"schedule\": \"1F1B\", \"ranks\": 2, \"microbatches\": 2" extra "}"
#define STAGES2 ", \"stages\": [" GOOD_STAGE ", " GOOD_STAGE "]"

static const bad_case bad_cases[] = {
    {"", {"empty file"}},
    {"{\"schedule\": \"1F1B\", \"ranks\": 2", {"not valid JSON", "line 1"}},
    {"[1, 2]", {"$", "expected a JSON object"}},
    {"{\"format\": \"tf-plan\"}", {"$.format", "\"tf-plan\""}},
    {BASE(STAGES2 ", \"version\": 3"),
     {"$.version: version 3 is newer than the tf-profile version this toolkit reads (2)",
      "upgrade the toolkit"}},
    {BASE(STAGES2 ", \"version\": 0"), {"$.version", "expected an integer in [1, "}},
    {BASE(STAGES2 ", \"meta\": [\"a note\"]"), {"$.meta", "expected an object"}},
    {"{\"ranks\": 2, \"microbatches\": 2" STAGES2 "}", {"$.schedule", "missing"}},
    {"{\"schedule\": \"2F2B\", \"ranks\": 2, \"microbatches\": 2" STAGES2 "}",
     {"$.schedule", "unknown schedule", "\"2F2B\""}},
    {"{\"schedule\": \"1F1B\", \"ranks\": \"2\", \"microbatches\": 2" STAGES2 "}",
     {"$.ranks", "integer", "\"2\""}},
    {"{\"schedule\": \"1F1B\", \"ranks\": 2.5, \"microbatches\": 2" STAGES2 "}",
     {"$.ranks", "2.5"}},
    {"{\"schedule\": \"1F1B\", \"ranks\": 0, \"microbatches\": 2" STAGES2 "}", {"$.ranks", "0"}},
    {"{\"schedule\": \"1F1B\", \"ranks\": 2, \"microbatches\": -3" STAGES2 "}",
     {"$.microbatches", "-3"}},
    {BASE(", \"stages\": [" GOOD_STAGE "]"), {"$.stages", "2 entries, found 1"}},
    {BASE(", \"stages\": {}"), {"$.stages", "expected an array"}},
    {BASE(", \"stages\": [" GOOD_STAGE ", 7]"), {"$.stages[1]", "7"}},
    {BASE(", \"stages\": [" GOOD_STAGE ", {\"forward_ms\": -1, \"backward_ms\": 2}]"),
     {"$.stages[1].forward_ms", "-1"}},
    {BASE(", \"stages\": [" GOOD_STAGE ", {\"forward_ms\": 1e999, \"backward_ms\": 2}]"),
     {"$.stages[1].forward_ms", "finite"}},
    {BASE(", \"stages\": [" GOOD_STAGE ", {\"forward_ms\": 1}]"),
     {"$.stages[1].backward_ms", "missing"}},
    {BASE(", \"stages\": [" GOOD_STAGE
          ", {\"forward_ms\": 1, \"backward_ms\": 2, \"backward_frozen_ms\": 3}]"),
     {"$.stages[1].backward_frozen_ms", "must not exceed", "3"}},
    {BASE(STAGES2 ", \"max_freeze_ratio\": 1.5"), {"$.max_freeze_ratio", "1.5"}},
    {BASE(STAGES2 ", \"max_freeze_ratio\": [0.5]"), {"$.max_freeze_ratio", "one cap per stage"}},
    {BASE(STAGES2 ", \"max_freeze_ratio\": [0.5, \"x\"]"), {"$.max_freeze_ratio[1]", "\"x\""}},
    {BASE(STAGES2 ", \"p2p_ms\": -0.1"), {"$.p2p_ms", "-0.1"}},
    {BASE(STAGES2 ", \"actions\": [{\"stage\": 0, \"microbatch\": 5, \"type\": \"B\", \"ms\": 1}]"),
     {"$.actions[0].microbatch", "5"}},
    {BASE(STAGES2 ", \"actions\": [{\"stage\": 0, \"microbatch\": 1, \"type\": \"W\", \"ms\": 1}]"),
     {"$.actions[0]", "does not have"}},
    {BASE(STAGES2 ", \"actions\": [{\"stage\": 0, \"microbatch\": 1, \"type\": \"Q\", \"ms\": 1}]"),
     {"$.actions[0].type", "\"Q\""}},
    {BASE(STAGES2 ", \"actions\": [{\"stage\": 1, \"microbatch\": 1, \"type\": \"B\", \"ms\": 1,"
                  " \"rank\": 0}]"),
     {"$.actions[0].rank", "stage 1 runs on rank 1"}},
    {BASE(STAGES2 ", \"actions\": [{\"stage\": 0, \"microbatch\": 1, \"type\": \"B\", \"ms\": 1},"
                  " {\"stage\": 0, \"microbatch\": 1, \"type\": \"B\", \"ms\": 2}]"),
     {"actions[1]", "repeats"}},
    {BASE(STAGES2 ", \"actions\": [{\"stage\": 0, \"microbatch\": 1, \"type\": \"B\", \"ms\": 1,"
                  " \"frozen_ms\": 2}]"),
     {"$.actions[0].frozen_ms", "2"}},
    {BASE(STAGES2 ", \"order\": [[\"0F0\"]]"), {"$.order", "one list of actions per rank"}},
    {BASE(STAGES2 ", \"order\": [[\"0F0\", 5], []]"), {"$.order[0][1]", "5"}},
    {BASE(STAGES2 ", \"order\": [[\"0F0\", \"0X1\"], []]"), {"0X1"}},
    {"{\"schedule\": \"Interleaved1F1B\", \"ranks\": 2, \"stages_per_rank\": 1, "
     "\"microbatches\": 2" STAGES2 "}",
     {"$.schedule"}},
    {PAIR_PROFILE(", \"pairs\": [{\"pair\": \"(0F0;1B0)OVERLAP_F_B\", \"ms\": 5}]"),
     {"$.pairs[0].pair", "names no overlapped pair", "(0F0;1B0)"}},
    {PAIR_PROFILE(", \"pairs\": [{\"pair\": \"0F1\", \"ms\": 5}]"),
     {"$.pairs[0].pair", "expected an overlapped pair"}},
    {PAIR_PROFILE(", \"pairs\": [{\"pair\": \"(0F1;0B0)OVERLAP_F_B\", \"ms\": 5, "
                  "\"frozen_ms\": 6}]"),
     {"$.pairs[0].frozen_ms", "must not exceed"}},
    {PAIR_PROFILE(", \"pairs\": [{\"pair\": \"(0F1;0B0)OVERLAP_F_B\", \"ms\": 5}, "
                  "{\"pair\": \"(0F1;0B0)OVERLAP_F_B\", \"ms\": 4}]"),
     {"$.pairs[1]", "repeats the pair of pairs[0]"}},
    {PAIR_PROFILE(", \"pairs\": [{\"pair\": \"(0F1;0B0)OVERLAP_F_B\"}]"),
     {"$.pairs[0].ms", "missing"}},
    {PAIR_PROFILE(", \"pairs\": [7]"), {"$.pairs[0]", "expected an object"}},
    {"{\"schedule\": \"paired\", \"ranks\": 2, \"microbatches\": 2, \"stages\": ["
     "{\"forward_ms\": 1, \"backward_input_ms\": 1, \"backward_weight_ms\": 1}, " GOOD_STAGE "],"
     " \"order\": [[\"0F0\", \"(0F1;0I0)OVERLAP_F_B\", \"0W0\", \"0I1\", \"0W1\"],"
     "            [\"1F0\", \"1B0\", \"1F1\", \"1B1\"]],"
     " \"pairs\": [{\"pair\": \"(0F1;0I0)OVERLAP_F_B\", \"ms\": 3, \"frozen_ms\": 2}]}",
     {"$.pairs[0].frozen_ms", "an I"}},
};

static void rejects_bad_profiles(void **state)
{
    for (size_t k = 0; k < sizeof bad_cases / sizeof *bad_cases; k++) {
        tf_profile p;
        tf_error err = {0};
        int rc = tf_profile_parse(bad_cases[k].text, "bad.json", &p, &err);
        if (rc == 0)
            fail_msg("case %zu was accepted: %s", k, bad_cases[k].text);
        assert_int_equal(rc, TF_EINVAL);
        assert_contains(err.msg, "bad.json");
        for (int m = 0; m < 3 && bad_cases[k].must_say[m]; m++)
            assert_contains(err.msg, bad_cases[k].must_say[m]);
        assert_null(p.stages); /* nothing half-built is handed back */
        assert_int_equal(p.schedule.n_actions, 0);
    }
}

/* A misspelled or unknown field of any object of a profile is refused by
 * its path, with the nearest known name when one is plausibly meant (the
 * misspelling would otherwise have taken a default: backward_frozn_ms
 * plans with half the backward instead of the measured 2.0). */
static void refuses_unknown_fields(void **state)
{
    static const struct {
        const char *text, *message;
    } cases[] = {
        {BASE(", \"stages\": [{\"forward_ms\": 1.5, \"backward_ms\": 4.0, "
              "\"backward_frozn_ms\": 2.0}, " GOOD_STAGE "]"),
         "bad.json: $.stages[0].backward_frozn_ms: unknown field (did you mean "
         "backward_frozen_ms?)"},
        {BASE(STAGES2 ", \"max_freeze_ratios\": 0.5"),
         "bad.json: $.max_freeze_ratios: unknown field (did you mean max_freeze_ratio?)"},
        {BASE(STAGES2 ", \"versoin\": 1"),
         "bad.json: $.versoin: unknown field (did you mean version?)"},
        {BASE(STAGES2 ", \"Ranks\": 2"), "bad.json: $.Ranks: unknown field (did you mean ranks?)"},
        {BASE(STAGES2 ", \"actions\": [{\"stage\": 0, \"microbatch\": 0, \"type\": \"B\", "
                      "\"ms\": 4, \"frozenms\": 2}]"),
         "bad.json: $.actions[0].frozenms: unknown field (did you mean frozen_ms?)"},
        {BASE(STAGES2 ", \"colour\": \"red\""),
         "bad.json: $.colour: unknown field (known fields here: format, version, meta, "
         "schedule, ranks, stages_per_rank, microbatches, microbatch_tokens, p2p_ms, "
         "max_freeze_ratio, stages, actions, order, pairs, memory_limit_bytes; notes belong in "
         "the top level's \"meta\")"},
        {BASE(", \"stages\": [{\"forward_ms\": 1.5, \"backward_ms\": 4.0, "
              "\"backward_ms\": 8.0}, " GOOD_STAGE "]"),
         "bad.json: $.stages[0].backward_ms: the field is given twice"},
        {"{\"schedule\": \"DualPipeV\", \"ranks\": 1, \"microbatches\": 2,"
         " \"stages\": [{\"forward_ms\": 1, \"backward_ms\": 2, \"backward_input_ms\": 1,"
         " \"backward_weight_ms\": 1}, {\"forward_ms\": 1, \"backward_ms\": 2,"
         " \"backward_input_ms\": 1, \"backward_weight_ms\": 1}],"
         " \"pairs\": [{\"pair\": \"(0F1;1B0)OVERLAP_F_B\", \"MS\": 3}]}",
         "bad.json: $.pairs[0].MS: unknown field (did you mean ms?)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tf_profile p;
        tf_error err = {0};
        if (tf_profile_parse(cases[k].text, "bad.json", &p, &err) != TF_EINVAL)
            fail_msg("case %zu: %s", k, err.msg[0] ? err.msg : "accepted");
        assert_contains(err.msg, cases[k].message);
        assert_null(p.stages);
    }
}

/* Nesting far deeper than any profile: a clear error, not a stack overflow. */
static void rejects_deep_nesting(void **state)
{
    size_t depth = 100000;
    char *text = malloc(2 * depth + 1);
    memset(text, '[', depth);
    memset(text + depth, ']', depth);
    text[2 * depth] = '\0';
    tf_profile p;
    tf_error err = {0};
    assert_int_equal(tf_profile_parse(text, "deep.json", &p, &err), TF_EINVAL);
    assert_contains(err.msg, "nested deeper");
    free(text);
}

static void missing_file(void **state)
{
    tf_profile p;
    tf_error err = {0};
    assert_int_equal(tf_profile_load("/nonexistent/profile.json", &p, &err), TF_EIO);
    assert_contains(err.msg, "/nonexistent/profile.json");
    assert_int_equal(tf_profile_load("/", &p, &err), TF_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_a_good_profile),
        cmocka_unit_test(split_backward_defaults_and_per_stage_caps),
        cmocka_unit_test(custom_order),
        cmocka_unit_test(pairs_measured_whole),
        cmocka_unit_test(profile_for_an_order),
        cmocka_unit_test(rejects_bad_profiles),
        cmocka_unit_test(refuses_unknown_fields),
        cmocka_unit_test(rejects_deep_nesting),
        cmocka_unit_test(missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
