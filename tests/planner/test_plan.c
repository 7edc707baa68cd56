/* test_plan.c - the planner pipeline on bundled traces, plan files in and
 * out, and rejected plans. */
#include <cjson/cJSON.h>
#include <math.h>
#include <unistd.h>

#include "test_util.h"
#include "small_plan.h"
#include "tf/dag.h"
#include "tf/freeze.h"
#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/profile.h"
#include "tf/util.h"

static void plan_trace(const char *relative, tf_plan *plan)
{
    char path[512];
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_load(source_path(relative, path, sizeof path), &p, &err))
        fail_msg("%s", err.msg);
    tf_plan_options o;
    tf_plan_options_init(&o);
    if (tf_plan_from_profile(&p, &o, plan, &err))
        fail_msg("%s", err.msg);
    tf_profile_free(&p);
}

/* Bounds and bookkeeping every plan must satisfy. */
static void check_invariants(const tf_plan *plan)
{
    assert_true(plan->batch_ms_all_frozen <= plan->batch_ms_planned + 1e-9);
    assert_true(plan->batch_ms_planned <= plan->batch_ms_unfrozen + 1e-9);
    assert_close(plan->speedup, plan->batch_ms_unfrozen / plan->batch_ms_planned, 1e-12);
    double finish = 0;
    int critical = 0;
    for (int i = 0; i < plan->schedule.n_actions; i++) {
        const tf_plan_action *a = &plan->actions[i];
        finish = fmax(finish, a->start_ms + a->ms);
        critical += a->critical;
        assert_close(a->ms, a->max_ms - a->freeze_ratio * (a->max_ms - a->min_ms), 1e-9);
    }
    assert_close(finish, plan->batch_ms_planned, 1e-12);
    assert_true(critical > 0);
    for (int st = 0; st < plan->schedule.stages; st++)
        assert_true(plan->freeze_ratio_stage[st] <= plan->max_freeze_ratio[st] + 1e-7);
}

static void published_llama_8b(void **state)
{
    tf_plan plan;
    plan_trace("traces/llama8b-1f1b-h200.profile.json", &plan);
    check_invariants(&plan);
    /* The published unfrozen batch time is 675.56 ms with measured
     * per-action times; the bundled per-rank averages come within 2%. */
    assert_true(fabs(plan.batch_ms_unfrozen - 675.56) / 675.56 < 0.02);
    assert_true(plan.speedup > 1.3);
    tf_plan_free(&plan);
}

/* tf_planner_init may run more than once, and plans come out the same
 * after it as before. */
static void planner_init_is_repeatable(void **state)
{
    (void)state;
    tf_plan before, after;
    plan_trace("traces/llama8b-1f1b-h200.profile.json", &before);
    assert_int_equal(tf_planner_init(), 0);
    assert_int_equal(tf_planner_init(), 0);
    plan_trace("traces/llama8b-1f1b-h200.profile.json", &after);
    assert_true(after.batch_ms_planned == before.batch_ms_planned);
    for (int i = 0; i < before.schedule.n_actions; i++)
        assert_true(after.actions[i].freeze_ratio == before.actions[i].freeze_ratio);
    tf_plan_free(&before);
    tf_plan_free(&after);
}

static void save_and_load_round_trip(void **state)
{
    tf_plan plan, loaded;
    plan_trace("traces/examples/zbv-p4-m8.profile.json", &plan);
    check_invariants(&plan);
    char path[] = "/tmp/tf-test-plan-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    tf_error err = {0};
    assert_int_equal(tf_plan_save(&plan, path, &err), 0);
    if (tf_plan_load(path, &loaded, &err))
        fail_msg("%s", err.msg);
    unlink(path);
    assert_int_equal(loaded.schedule.n_actions, plan.schedule.n_actions);
    assert_string_equal(loaded.schedule.name, plan.schedule.name);
    for (int i = 0; i < plan.schedule.n_actions; i++) {
        const tf_plan_action *a = &plan.actions[i], *b = &loaded.actions[i];
        assert_int_equal(a->action.type, b->action.type);
        assert_int_equal(a->action.stage, b->action.stage);
        assert_int_equal(a->action.microbatch, b->action.microbatch);
        assert_int_equal(a->action.rank, b->action.rank);
        assert_close(a->start_ms, b->start_ms, 1e-11);
        assert_close(a->freeze_ratio, b->freeze_ratio, 1e-11);
        assert_int_equal(a->critical, b->critical);
    }
    assert_close(loaded.batch_ms_planned, plan.batch_ms_planned, 1e-11);
    assert_close(loaded.batch_ms_unfrozen, plan.batch_ms_unfrozen, 1e-11);
    assert_close(loaded.batch_ms_all_frozen, plan.batch_ms_all_frozen, 1e-11);
    tf_plan_free(&loaded);
    tf_plan_free(&plan);
}

static void every_example_trace(void **state)
{
    const char *traces[] = {"traces/examples/gpipe-p4-m8.profile.json",
                            "traces/examples/1f1b-p4-m8.profile.json",
                            "traces/examples/interleaved1f1b-p4-m8.profile.json",
                            "traces/examples/interleaved-zb-p4-m8.profile.json",
                            "traces/examples/zbv-p4-m8.profile.json"};
    for (size_t k = 0; k < sizeof traces / sizeof *traces; k++) {
        tf_plan plan;
        plan_trace(traces[k], &plan);
        check_invariants(&plan);
        tf_plan_free(&plan);
    }
}

static void unfrozen_plan_is_the_upper_bound(void **state)
{
    char path[512];
    tf_profile p;
    assert_int_equal(
        tf_profile_load(source_path("traces/examples/1f1b-p4-m8.profile.json", path, sizeof path),
                        &p, NULL),
        0);
    tf_plan plan;
    assert_int_equal(tf_plan_unfrozen(&p, &plan, NULL), 0);
    assert_true(plan.batch_ms_planned == plan.batch_ms_unfrozen);
    assert_true(plan.speedup == 1.0);
    for (int i = 0; i < plan.schedule.n_actions; i++)
        assert_true(plan.actions[i].freeze_ratio == 0.0);
    assert_string_equal(plan.solver_name, "none");
    tf_plan_free(&plan);
    tf_profile_free(&p);
}

static void cyclic_order_is_an_error(void **state)
{
    const char *text = "{\"schedule\": \"mine\", \"ranks\": 2, \"microbatches\": 2,"
                       " \"stages\": [{\"forward_ms\": 1, \"backward_ms\": 2},"
                       "              {\"forward_ms\": 1, \"backward_ms\": 2}],"
                       " \"order\": [[\"0F0\", \"0F1\", \"0B0\", \"0B1\"],"
                       "            [\"1F1\", \"1B1\", \"1F0\", \"1B0\"]]}";
    tf_profile p;
    assert_int_equal(tf_profile_parse(text, "cyclic.json", &p, NULL), 0);
    tf_plan plan;
    tf_error err = {0};
    assert_int_equal(tf_plan_from_profile(&p, NULL, &plan, &err), TF_ECYCLE);
    assert_contains(err.msg, "1B1(rank 1) -> 1F0(rank 1)");
    assert_null(plan.actions);
    tf_profile_free(&p);
}

static void rejects_bad_plans(void **state)
{
    const char *action = "{\"rank\": 0, \"stage\": 0, \"microbatch\": 0, \"type\": \"F\","
                         " \"start_ms\": 0, \"ms\": 1}";
    const char *head = "{\"format\": \"tf-plan\", \"version\": 1, \"schedule\": \"GPipe\","
                       " \"ranks\": 1, \"stages_per_rank\": 1, \"microbatches\": 1, ";
    char text[2048];
    tf_plan plan;
    tf_error err = {0};

    assert_int_equal(tf_plan_parse("{\"format\": \"tf-profile\"}", "p.json", &plan, &err),
                     TF_EINVAL);
    assert_contains(err.msg, "$.format");

    snprintf(text, sizeof text, "%s\"actions\": [%s]}", head, action);
    assert_int_equal(tf_plan_parse(text, "p.json", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "no backward"); /* F without B */

    snprintf(text, sizeof text,
             "%s\"actions\": [%s, {\"rank\": 0, \"stage\": 0, \"microbatch\": 0, \"type\": \"B\","
             " \"start_ms\": 1, \"ms\": 5, \"max_ms\": 4, \"min_ms\": 2}]}",
             head, action);
    assert_int_equal(tf_plan_parse(text, "p.json", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "$.actions[1]");
    assert_contains(err.msg, "min_ms <= ms <= max_ms");

    snprintf(text, sizeof text,
             "%s\"actions\": [%s, {\"rank\": 0, \"stage\": 0, \"microbatch\": 0, \"type\": \"B\","
             " \"start_ms\": -1, \"ms\": 2}]}",
             head, action);
    assert_int_equal(tf_plan_parse(text, "p.json", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "$.actions[1].start_ms");

    snprintf(text, sizeof text,
             "%s\"actions\": [%s, {\"rank\": 0, \"stage\": 0, \"microbatch\": 0, \"type\": \"B\","
             " \"start_ms\": 1, \"ms\": 2, \"freeze_ratio\": 1.5}]}",
             head, action);
    assert_int_equal(tf_plan_parse(text, "p.json", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "$.actions[1].freeze_ratio");

    /* A ratio that does not produce the action's duration. */
    snprintf(text, sizeof text,
             "%s\"actions\": [%s, {\"rank\": 0, \"stage\": 0, \"microbatch\": 0, \"type\": \"B\","
             " \"start_ms\": 1, \"ms\": 4, \"max_ms\": 4, \"min_ms\": 2, \"freeze_ratio\": 1}]}",
             head, action);
    assert_int_equal(tf_plan_parse(text, "p.json", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "$.actions[1]");
    assert_contains(err.msg, "freeze_ratio 1 gives ms");

    /* A ratio left out is 0, like a written 0: both are refused when ms is
     * not max_ms (tf-exec would run unfrozen what tf-dot draws frozen), and
     * both accepted when it is. */
    const char *ratios[] = {"", ", \"freeze_ratio\": 0", ", \"freeze_ratio\": 0.5"};
    for (int k = 0; k < 3; k++) {
        snprintf(text, sizeof text,
                 "%s\"actions\": [%s, {\"rank\": 0, \"stage\": 0, \"microbatch\": 0, "
                 "\"type\": \"B\", \"start_ms\": 1, \"ms\": 3, \"max_ms\": 4, \"min_ms\": 2%s}]}",
                 head, action, ratios[k]);
        int rc = tf_plan_parse(text, "p.json", &plan, &err);
        if (k == 2) {
            assert_int_equal(rc, 0);
            assert_true(plan.actions[1].freeze_ratio == 0.5);
            tf_plan_free(&plan);
            continue;
        }
        assert_int_equal(rc, TF_EINVAL);
        assert_contains(err.msg, "p.json: $.actions[1]: freeze_ratio 0");
        assert_contains(err.msg, "= 4, but ms is 3");
        if (k == 0)
            assert_contains(err.msg, "(not given, so the default)");
    }

    snprintf(text, sizeof text,
             "%s\"actions\": [%s, {\"rank\": 3, \"stage\": 0, \"microbatch\": 0, \"type\": \"B\","
             " \"start_ms\": 1, \"ms\": 2}]}",
             head, action);
    assert_int_equal(tf_plan_parse(text, "p.json", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "$.actions[1].rank");

    snprintf(text, sizeof text,
             "%s\"actions\": [%s, {\"rank\": 0, \"stage\": 0, \"microbatch\": 0, \"type\": \"B\","
             " \"start_ms\": 1, \"ms\": 2}]}",
             head, action);
    assert_int_equal(tf_plan_parse(text, "p.json", &plan, &err), 0); /* the valid version */
    assert_true(plan.batch_ms_planned == 3.0);
    tf_plan_free(&plan);
}


/* json with one field changed: key of the root (parent NULL), of
 * $.parent (index < 0) or of $.parent[index], set to the JSON text value,
 * or removed (value NULL).  malloc'd. */
static char *edit_field(const char *json, const char *parent, int index, const char *key,
                        const char *value)
{
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    cJSON *o = parent ? cJSON_GetObjectItemCaseSensitive(root, parent) : root;
    if (index >= 0)
        o = cJSON_GetArrayItem(o, index);
    assert_true(cJSON_IsObject(o));
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    if (value) {
        cJSON *item = cJSON_Parse(value);
        assert_non_null(item);
        cJSON_AddItemToObject(o, key, item);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    assert_non_null(text);
    return text;
}

/* Every object of a plan is checked for unknown fields, each named by its
 * path with the nearest known name; "meta" holds anything; a newer version
 * is refused naming both versions. */
static void refuses_unknown_plan_fields(void **state)
{
    static const struct {
        const char *parent;
        int index;
        const char *key, *value, *message;
    } cases[] = {
        {NULL, -1, "speedups", "2", "p.json: $.speedups: unknown field (did you mean speedup?)"},
        {"batch_ms", -1, "planed", "1", "p.json: $.batch_ms.planed: unknown field (did you "
                                        "mean planned?)"},
        {"tokens_per_s", -1, "unfrozn", "1", "$.tokens_per_s.unfrozn: unknown field (did you "
                                             "mean unfrozen?)"},
        {"freeze_ratio", -1, "per_stages", "[]", "$.freeze_ratio.per_stages: unknown field "
                                                 "(did you mean per_stage?)"},
        {"solver", -1, "statuss", "\"optimal\"", "$.solver.statuss: unknown field (did you "
                                                 "mean status?)"},
        {"actions", 3, "freeze_ration", "0", "$.actions[3].freeze_ration: unknown field (did "
                                             "you mean freeze_ratio?)"},
        {"actions", 0, "colour", "\"red\"", "$.actions[0].colour: unknown field (known fields "
                                            "here: rank, stage, microbatch, type, start_ms"},
        {NULL, -1, "version", "3", "p.json: $.version: version 3 is newer than the tf-plan "
                                   "version this toolkit reads (2): upgrade the toolkit"},
        {NULL, -1, "version", NULL, "p.json: $.version: an integer is required"},
        {NULL, -1, "batch_ms", "[1, 2, 3]", "p.json: $.batch_ms: expected an object"},
        {NULL, -1, "meta", "\"a note\"", "p.json: $.meta: expected an object"},
    };
    tf_plan plan, loaded;
    tf_error err = {0};
    small_1f1b_plan(&plan);
    char *json;
    assert_int_equal(tf_plan_to_json(&plan, &json, &err), 0);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *bad = edit_field(json, cases[k].parent, cases[k].index, cases[k].key,
                               cases[k].value);
        if (tf_plan_parse(bad, "p.json", &loaded, &err) != TF_EINVAL)
            fail_msg("case %zu: %s", k, err.msg[0] ? err.msg : "accepted");
        assert_contains(err.msg, cases[k].message);
        free(bad);
    }
    /* meta: anything at all, and the plan reads as without it. */
    char *noted = edit_field(json, NULL, -1, "meta",
                             "{\"provenance\": \"a run\", \"speedups\": [1, {\"x\": null}], "
                             "\"\": {}}");
    if (tf_plan_parse(noted, "p.json", &loaded, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(loaded.schedule.n_actions, plan.schedule.n_actions);
    assert_close(loaded.batch_ms_planned, plan.batch_ms_planned, 1e-11);
    tf_plan_free(&loaded);
    free(noted);
    free(json);
    tf_plan_free(&plan);
}

/* --solver: the plan names the solver that ran (and what was asked for),
 * with lp_solve's version; both solvers give the same plan; old plans
 * without solver.requested still load. */
static void solver_choice_is_recorded(void **state)
{
    char path[512];
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_load(source_path("traces/examples/1f1b-p4-m8.profile.json", path, sizeof path),
                        &p, &err))
        fail_msg("%s", err.msg);
    tf_plan plans[3];
    const tf_solver solvers[3] = {TF_SOLVER_LP_SOLVE, TF_SOLVER_FAST, TF_SOLVER_AUTO};
    for (int k = 0; k < 3; k++) {
        tf_plan_options o;
        tf_plan_options_init(&o);
        assert_int_equal(o.solver, TF_SOLVER_AUTO);
        o.solver = solvers[k];
        if (tf_plan_from_profile(&p, &o, &plans[k], &err))
            fail_msg("%s", err.msg);
        check_invariants(&plans[k]);
        assert_string_equal(plans[k].solver_requested, tf_solver_name(solvers[k]));
    }
    char version[32];
    assert_string_equal(plans[0].solver_name, "lp_solve");
    assert_string_equal(plans[0].solver_version, tf_freeze_solver_version("lp_solve", version, sizeof version));
    assert_string_equal(plans[1].solver_name, "fast");
    const char *chosen = p.schedule.n_actions >= TF_FAST_SOLVER_MIN_ACTIONS ? "fast" : "lp_solve";
    assert_string_equal(plans[2].solver_name, chosen);
    double sum[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < plans[k].schedule.n_actions; i++)
            sum[k] += plans[k].actions[i].freeze_ratio;
    assert_close(plans[1].batch_ms_planned, plans[0].batch_ms_planned, 1e-9);
    assert_true(fabs(sum[1] - sum[0]) <= 1e-6);

    /* Round trip keeps the solver fields; a plan without "requested" (written
     * before --solver existed) loads with it empty. */
    char *json;
    assert_int_equal(tf_plan_to_json(&plans[1], &json, &err), 0);
    tf_plan loaded;
    if (tf_plan_parse(json, "fast.json", &loaded, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(loaded.solver_name, "fast");
    assert_string_equal(loaded.solver_requested, "fast");
    tf_plan_free(&loaded);
    free(json);
    assert_int_equal(tf_plan_to_json(&plans[0], &json, &err), 0);
    char *old = edit_field(json, "solver", -1, "requested", NULL);
    if (tf_plan_parse(old, "old.json", &loaded, &err))
        fail_msg("%s", err.msg);
    free(old);
    assert_string_equal(loaded.solver_name, "lp_solve");
    assert_string_equal(loaded.solver_version, version);
    assert_string_equal(loaded.solver_requested, "");
    tf_plan_free(&loaded);
    char *requested = strstr(json, "\"requested\"");
    assert_non_null(requested);
    char *value = strstr(requested + 11, "\"lp_solve\"");
    assert_non_null(value);
    memcpy(value, "7         ", 10); /* a number where a string belongs: named */
    assert_int_equal(tf_plan_parse(json, "bad.json", &loaded, &err), TF_EINVAL);
    assert_contains(err.msg, "$.solver.requested");
    free(json);
    for (int k = 0; k < 3; k++)
        tf_plan_free(&plans[k]);
    tf_profile_free(&p);
}

/* Size limits: an endless file is refused at TF_MAX_PLAN_BYTES, a header
 * whose counts multiply past TF_MAX_ACTIONS and an action list longer than
 * that are refused before anything is allocated for them. */
static void plan_size_limits(void **state)
{
    (void)state;
    tf_plan plan;
    tf_error err = {0};
    assert_int_equal(tf_plan_load("/dev/zero", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "/dev/zero: larger than the 64 MiB limit");
    const char *header = "{\"format\": \"tf-plan\", \"version\": 1, \"schedule\": \"1F1B\", "
                         "\"ranks\": 512, \"stages_per_rank\": 1, \"microbatches\": 65536, "
                         "\"actions\": []}";
    assert_int_equal(tf_plan_parse(header, "big.json", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "big.json: $: ranks x stages_per_rank x microbatches x 2");
    assert_contains(err.msg, "more than the 131072");
    /* One rank, one microbatch, and 131,073 (empty) actions. */
    size_t n = TF_MAX_ACTIONS + 1, size = 200 + 3 * n;
    char *text = malloc(size);
    assert_non_null(text);
    int used = snprintf(text, size, "{\"format\": \"tf-plan\", \"version\": 1, \"schedule\": "
                                    "\"1F1B\", \"ranks\": 1, \"stages_per_rank\": 1, "
                                    "\"microbatches\": 1, \"actions\": [");
    for (size_t i = 0; i < n; i++)
        used += snprintf(text + used, size - (size_t)used, i ? ",{}" : "{}");
    snprintf(text + used, size - (size_t)used, "]}");
    assert_int_equal(tf_plan_parse(text, "long.json", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "long.json: $.actions: 131073 actions, more than the 131072");
    free(text);
    /* Many values in few bytes: refused before any of them is parsed (a
     * parse tree costs about 40 times its text). */
    n = (size_t)4 << 20; /* the limit: 4,194,304 values */
    text = malloc(2 * n + 64);
    assert_non_null(text);
    used = snprintf(text, 64, "{\"format\": \"tf-plan\", \"x\": [");
    for (size_t i = 0; i < n; i++) {
        text[used++] = '0';
        text[used++] = ',';
    }
    strcpy(text + used - 1, "]}");
    assert_int_equal(tf_plan_parse(text, "wide.json", &plan, &err), TF_EINVAL);
    assert_contains(err.msg, "wide.json: about 4194307 JSON values, more than the 4194304");
    free(text);
}

/* A solver that fails hands over to the other, and the plan, its file
 * and the summary say so; without the fallback the failure is reported;
 * the time limit stops a solve with a message that names it. */
static void solver_failure_falls_back(void **state)
{
    (void)state;
    char path[512];
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_load(source_path("traces/examples/zbv-p4-m8.profile.json", path, sizeof path),
                        &p, &err))
        fail_msg("%s", err.msg);
    tf_plan_options o;
    tf_plan_options_init(&o);
    assert_true(o.control.fallback);
    assert_true(o.control.time_limit_s == 0.0);
    o.solver = TF_SOLVER_FAST;
    o.control.max_rounds = 2; /* too few for this profile: the fast solver gives up */
    tf_plan plan, reference;
    if (tf_plan_from_profile(&p, &o, &plan, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(plan.solver_name, "lp_solve");
    assert_string_equal(plan.solver_requested, "fast");
    assert_contains(plan.solver_fallback, "fast solver: no convergence after 2 rounds");
    o.solver = TF_SOLVER_LP_SOLVE;
    if (tf_plan_from_profile(&p, &o, &reference, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(reference.solver_fallback, "");
    assert_true(plan.batch_ms_planned == reference.batch_ms_planned);

    char *json, summary[4096];
    assert_int_equal(tf_plan_to_json(&plan, &json, &err), 0);
    tf_plan loaded;
    assert_int_equal(tf_plan_parse(json, "fallback.json", &loaded, &err), 0);
    assert_string_equal(loaded.solver_fallback, plan.solver_fallback);
    FILE *f = fmemopen(summary, sizeof summary, "w");
    assert_non_null(f);
    tf_plan_print_summary(&loaded, f);
    fclose(f);
    assert_contains(summary, "fallback      lp_solve solved it after: fast solver: no convergence");
    tf_plan_free(&loaded);
    free(json);

    o.solver = TF_SOLVER_FAST;
    o.control.fallback = 0;
    assert_int_equal(tf_plan_from_profile(&p, &o, &loaded, &err),
                     TF_ESOLVER);
    assert_contains(err.msg, "fast solver: no convergence after 2 rounds");
    o.control.max_rounds = 0;
    o.control.fallback = 1;
    o.control.time_limit_s = 1e-9; /* past before the first round: no time to fall back */
    assert_int_equal(tf_plan_from_profile(&p, &o, &loaded, &err), TF_ESOLVER);
    assert_contains(err.msg, "fast solver: stopped at the time limit (1e-09 s)");
    o.solver = TF_SOLVER_LP_SOLVE;
    assert_int_equal(tf_plan_from_profile(&p, &o, &loaded, &err), TF_ESOLVER);
    assert_contains(err.msg, "lp_solve: stopped at the time limit (1e-09 s) while minimising");
    tf_plan_free(&plan);
    tf_plan_free(&reference);
    tf_profile_free(&p);
}

/* The pair order of test_dag (rank 0: 0F0 (0F1;0B0)OVERLAP_F_B 0B1, rank
 * 1: 1F0 1B0 1F1 1B1) with F 1 ms, B 2 ms, B frozen 1 ms and a cap of 0.5
 * per stage.  The pair makes every action one chain:
 * T = 4 F + the four B = 4 + 4 x 2 - sum r, and each stage's two ratios
 * may sum to 1, so T* = 12 - 2 = 10 with sum r = 2 (unfrozen 12, all frozen
 * 8); spread gives every ratio 0.5. */
static const char *pair_profile =
    "{\"schedule\": \"paired\", \"ranks\": 2, \"microbatches\": 2, \"max_freeze_ratio\": 0.5,"
    " \"stages\": [{\"forward_ms\": 1, \"backward_ms\": 2, \"backward_frozen_ms\": 1},"
    "              {\"forward_ms\": 1, \"backward_ms\": 2, \"backward_frozen_ms\": 1}],"
    " \"order\": [[\"0F0\", \"(0F1;0B0)OVERLAP_F_B\", \"0B1\"], [\"1F0\", \"1B0\", \"1F1\", \"1B1\"]]}";

static void pair_lp_by_hand(void **state)
{
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_parse(pair_profile, "pair.json", &p, &err))
        fail_msg("%s", err.msg);
    const tf_solver solvers[2] = {TF_SOLVER_LP_SOLVE, TF_SOLVER_FAST};
    for (int objective = 0; objective < 2; objective++)
        for (int k = 0; k < 2; k++) {
            tf_plan_options o;
            tf_plan_options_init(&o);
            o.solver = solvers[k];
            o.objective = (tf_objective)objective;
            tf_plan plan;
            if (tf_plan_from_profile(&p, &o, &plan, &err))
                fail_msg("%s", err.msg);
            check_invariants(&plan);
            assert_close(plan.batch_ms_unfrozen, 12.0, 1e-12);
            assert_close(plan.batch_ms_all_frozen, 8.0, 1e-12);
            assert_close(plan.batch_ms_planned, 10.0, 1e-9);
            double sum = 0;
            for (int i = 0; i < plan.schedule.n_actions; i++) {
                const tf_plan_action *a = &plan.actions[i];
                sum += a->freeze_ratio;
                if (objective == TF_OBJECTIVE_SPREAD && a->action.type == TF_ACT_B)
                    assert_close(a->freeze_ratio, 0.5, 1e-9);
            }
            assert_close(sum, 2.0, 1e-9);
            /* The pair's halves run back to back. */
            const tf_plan_action *f = &plan.actions[1], *b = &plan.actions[2];
            assert_int_equal(f->action.pair, TF_PAIR_FIRST);
            assert_int_equal(b->action.pair, TF_PAIR_SECOND);
            assert_close(b->start_ms, f->start_ms + f->ms, 1e-12);
            tf_plan_free(&plan);
        }
    tf_profile_free(&p);
}

/* A pair survives plan.json: both of its actions carry its name, and a
 * plan whose "pair" fields do not describe one is refused. */
static void pair_in_plan_json(void **state)
{
    tf_profile p;
    tf_plan plan, loaded;
    tf_error err = {0};
    assert_int_equal(tf_profile_parse(pair_profile, "pair.json", &p, &err), 0);
    assert_int_equal(tf_plan_from_profile(&p, NULL, &plan, &err), 0);
    char *json;
    assert_int_equal(tf_plan_to_json(&plan, &json, &err), 0);
    char *first = strstr(json, "\"pair\"");
    assert_non_null(first);
    assert_non_null(strstr(first + 1, "\"pair\""));
    assert_contains(json, "\"(0F1;0B0)OVERLAP_F_B\"");
    if (tf_plan_parse(json, "pair-plan.json", &loaded, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(loaded.schedule.n_actions, 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(loaded.actions[i].action.pair, plan.actions[i].action.pair);
    assert_close(loaded.batch_ms_planned, plan.batch_ms_planned, 1e-9);
    tf_plan_free(&loaded);

    /* The second half's name dropped: refused, naming the first. */
    char *dropped = edit_field(json, "actions", 2, "pair", NULL);
    assert_int_equal(tf_plan_parse(dropped, "bad.json", &loaded, &err), TF_EINVAL);
    free(dropped);
    assert_contains(err.msg, "$.actions[1].pair");
    assert_contains(err.msg, "both carrying it");
    /* A name that is not this pair's. */
    char *name = strstr(json, "(0F1;0B0)");
    memcpy(name, "(0F0;0B0)", 9);
    assert_int_equal(tf_plan_parse(json, "bad.json", &loaded, &err), TF_EINVAL);
    assert_contains(err.msg, "must name this action and the next");
    free(json);
    tf_plan_free(&plan);
    tf_profile_free(&p);
}

/* --max-action-ratio c: against a second formulation, the LP handed to the
 * other solver by hand with every frozen time moved to max - c (max - min)
 * and the stage caps to cap / c: the same batch time, and the plan's
 * ratios c times that LP's.  c = 1 is the plain plan; no ratio exceeds c;
 * the cap survives a round trip through plan.json; c outside (0, 1] is
 * refused. */
static void per_action_cap(void **state)
{
    (void)state;
    char path[512];
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_load(source_path("traces/llama8b-1f1b-h200.profile.json", path, sizeof path),
                        &p, &err))
        fail_msg("%s", err.msg);
    const int n = p.schedule.n_actions, stages = p.schedule.stages;
    const double c = 0.6;
    tf_plan_options o;
    tf_plan_options_init(&o);
    tf_plan plain, capped, one;
    assert_int_equal(tf_plan_from_profile(&p, &o, &plain, &err), 0);
    o.max_action_ratio = 1.0;
    assert_int_equal(tf_plan_from_profile(&p, &o, &one, &err), 0);
    for (int i = 0; i < n; i++)
        assert_true(one.actions[i].freeze_ratio == plain.actions[i].freeze_ratio);
    o.max_action_ratio = c;
    o.solver = TF_SOLVER_FAST;
    assert_int_equal(tf_plan_from_profile(&p, &o, &capped, &err), 0);
    assert_true(capped.batch_ms_planned > plain.batch_ms_planned); /* the cap binds here */
    int at_cap = 0;
    for (int i = 0; i < n; i++) {
        assert_true(capped.actions[i].freeze_ratio <= c + 1e-9);
        at_cap += fabs(capped.actions[i].freeze_ratio - c) < 1e-9;
    }
    assert_true(at_cap > 0);

    /* The second formulation, solved by lp_solve. */
    double *max_ms = malloc(sizeof(double) * n), *min_ms = malloc(sizeof(double) * n);
    double *caps = malloc(sizeof(double) * stages);
    assert_true(max_ms && min_ms && caps);
    tf_profile_durations(&p, max_ms, min_ms);
    for (int i = 0; i < n; i++)
        min_ms[i] = max_ms[i] - c * (max_ms[i] - min_ms[i]);
    for (int st = 0; st < stages; st++)
        caps[st] = fmin(1.0, p.max_freeze_ratio[st] / c);
    tf_dag g;
    assert_int_equal(tf_dag_build(&p.schedule, p.p2p_ms, &g, &err), 0);
    tf_freeze_problem problem;
    tf_freeze_problem_init(&problem);
    problem.schedule = &p.schedule;
    problem.dag = &g;
    problem.max_ms = max_ms;
    problem.min_ms = min_ms;
    problem.cap = caps;
    problem.solver = TF_SOLVER_LP_SOLVE;
    tf_freeze_result fr;
    assert_int_equal(tf_freeze_solve(&problem, NULL, &fr, &err), 0);
    assert_true(fabs(fr.makespan - capped.batch_ms_planned) < 1e-6 * fr.makespan);
    double sum_lp = 0, sum_plan = 0;
    for (int i = 0; i < n; i++) {
        sum_lp += c * fr.ratio[i];
        sum_plan += capped.actions[i].freeze_ratio;
    }
    assert_true(fabs(sum_lp - sum_plan) < 1e-6 * (1 + sum_lp));

    char *json = NULL;
    tf_plan back;
    assert_int_equal(tf_plan_to_json(&capped, &json, &err), 0);
    assert_non_null(strstr(json, "\"max_action_ratio\""));
    assert_int_equal(tf_plan_parse(json, "capped.json", &back, &err), 0);
    assert_true(back.max_action_ratio == c);
    free(json);
    tf_plan_free(&back);
    assert_int_equal(tf_plan_to_json(&plain, &json, &err), 0);
    assert_null(strstr(json, "max_action_ratio"));
    assert_int_equal(tf_plan_parse(json, "plain.json", &back, &err), 0);
    assert_true(back.max_action_ratio == 1.0);
    free(json);
    tf_plan_free(&back);

    tf_plan bad;
    o.max_action_ratio = 0.0;
    assert_int_equal(tf_plan_from_profile(&p, &o, &bad, &err), TF_EINVAL);
    assert_contains(err.msg, "max_action_ratio = 0: must be in (0, 1]");
    tf_freeze_result_free(&fr);
    tf_dag_free(&g);
    free(max_ms);
    free(min_ms);
    free(caps);
    tf_plan_free(&plain);
    tf_plan_free(&one);
    tf_plan_free(&capped);
    tf_profile_free(&p);
}

/* A cap of exactly 0 freezes nothing, for either solver and without the
 * fallback (the fast solver's master LP was infeasible on this 16-rank
 * profile, whose stages mix given and default frozen times; found by
 * fuzz_profile, tests/fuzz/regressions/fuzz_profile/zero-cap.json). */
static void zero_cap_freezes_nothing(void **state)
{
    (void)state;
    char path[512];
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_load(source_path("tests/fuzz/regressions/fuzz_profile/zero-cap.json", path,
                                    sizeof path),
                        &p, &err))
        fail_msg("%s", err.msg);
    for (int k = 0; k < 2; k++) {
        tf_plan_options o;
        tf_plan_options_init(&o);
        o.solver = k ? TF_SOLVER_FAST : TF_SOLVER_LP_SOLVE;
        o.control.fallback = 0;
        tf_plan plan;
        if (tf_plan_from_profile(&p, &o, &plan, &err))
            fail_msg("%s", err.msg);
        assert_string_equal(plan.solver_name, k ? "fast" : "lp_solve");
        assert_true(plan.batch_ms_planned == plan.batch_ms_unfrozen);
        for (int i = 0; i < plan.schedule.n_actions; i++)
            assert_true(plan.actions[i].freeze_ratio == 0.0);
        tf_plan_free(&plan);
    }
    tf_profile_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(published_llama_8b),
        cmocka_unit_test(planner_init_is_repeatable),
        cmocka_unit_test(save_and_load_round_trip),
        cmocka_unit_test(every_example_trace),
        cmocka_unit_test(unfrozen_plan_is_the_upper_bound),
        cmocka_unit_test(cyclic_order_is_an_error),
        cmocka_unit_test(rejects_bad_plans),
        cmocka_unit_test(refuses_unknown_plan_fields),
        cmocka_unit_test(solver_choice_is_recorded),
        cmocka_unit_test(plan_size_limits),
        cmocka_unit_test(per_action_cap),
        cmocka_unit_test(zero_cap_freezes_nothing),
        cmocka_unit_test(solver_failure_falls_back),
        cmocka_unit_test(pair_lp_by_hand),
        cmocka_unit_test(pair_in_plan_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
