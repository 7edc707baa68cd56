/* plan_json.c - plan.json out (tf_plan_to_json, tf_plan_save) and in
 * (tf_plan_parse, tf_plan_load): every field checked, the figures
 * recomputed from the actions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_util.h"
#include "plan_internal.h"
#include "tf/util.h"

static cJSON *number_array(const double *values, int n)
{
    cJSON *array = cJSON_CreateArray();
    for (int i = 0; i < n && array; i++)
        cJSON_AddItemToArray(array, tfj_create_number(values[i]));
    return array;
}

int tf_plan_to_json(const tf_plan *plan, char **json, tf_error *err)
{
    const tf_schedule *s = &plan->schedule;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    cJSON_AddStringToObject(root, "format", "tf-plan");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "schedule", s->name);
    cJSON_AddNumberToObject(root, "ranks", s->ranks);
    cJSON_AddNumberToObject(root, "stages_per_rank", s->stages_per_rank);
    cJSON_AddNumberToObject(root, "microbatches", s->microbatches);
    tfj_add_number(root, "microbatch_tokens", plan->microbatch_tokens);
    tfj_add_number(root, "p2p_ms", plan->p2p_ms);
    int same_cap = 1;
    for (int k = 1; k < s->stages; k++)
        same_cap &= plan->max_freeze_ratio[k] == plan->max_freeze_ratio[0];
    if (same_cap)
        tfj_add_number(root, "max_freeze_ratio", plan->max_freeze_ratio[0]);
    else
        cJSON_AddItemToObject(root, "max_freeze_ratio",
                              number_array(plan->max_freeze_ratio, s->stages));
    cJSON_AddStringToObject(root, "objective", tf_objective_name(plan->objective));
    cJSON *batch = cJSON_AddObjectToObject(root, "batch_ms");
    tfj_add_number(batch, "unfrozen", plan->batch_ms_unfrozen);
    tfj_add_number(batch, "all_frozen", plan->batch_ms_all_frozen);
    tfj_add_number(batch, "planned", plan->batch_ms_planned);
    tfj_add_number(root, "speedup", plan->speedup);
    cJSON *tps = cJSON_AddObjectToObject(root, "tokens_per_s");
    tfj_add_number(tps, "unfrozen", plan->tokens_per_s_unfrozen);
    tfj_add_number(tps, "planned", plan->tokens_per_s_planned);
    cJSON *fr = cJSON_AddObjectToObject(root, "freeze_ratio");
    tfj_add_number(fr, "mean", plan->freeze_ratio_mean);
    cJSON_AddItemToObject(fr, "per_stage", number_array(plan->freeze_ratio_stage, s->stages));
    cJSON *solver = cJSON_AddObjectToObject(root, "solver");
    cJSON_AddStringToObject(solver, "name", plan->solver_name);
    cJSON_AddStringToObject(solver, "version", plan->solver_version);
    if (plan->solver_requested[0])
        cJSON_AddStringToObject(solver, "requested", plan->solver_requested);
    cJSON_AddStringToObject(solver, "status", plan->solver_status);
    cJSON_AddNumberToObject(solver, "variables", plan->solver_variables);
    cJSON_AddNumberToObject(solver, "constraints", plan->solver_constraints);
    tfj_add_number(solver, "seconds", plan->solver_seconds);
    cJSON *actions = cJSON_AddArrayToObject(root, "actions");
    for (int i = 0; i < s->n_actions; i++) {
        const tf_plan_action *a = &plan->actions[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", a->action.rank);
        cJSON_AddNumberToObject(o, "stage", a->action.stage);
        cJSON_AddNumberToObject(o, "microbatch", a->action.microbatch);
        char type[2] = {tf_action_letter(a->action.type), '\0'};
        cJSON_AddStringToObject(o, "type", type);
        tfj_add_number(o, "start_ms", a->start_ms);
        tfj_add_number(o, "ms", a->ms);
        tfj_add_number(o, "max_ms", a->max_ms);
        tfj_add_number(o, "min_ms", a->min_ms);
        tfj_add_number(o, "freeze_ratio", a->freeze_ratio);
        cJSON_AddBoolToObject(o, "critical", a->critical);
        cJSON_AddItemToArray(actions, o);
    }
    /* One action per line keeps big plans greppable and diffable. */
    *json = tfj_print_document(root);
    cJSON_Delete(root);
    if (!*json)
        return tf_fail(err, TF_ENOMEM, "out of memory writing the plan");
    return 0;
}

int tf_plan_save(const tf_plan *plan, const char *path, tf_error *err)
{
    char *json;
    int rc = tf_plan_to_json(plan, &json, err);
    if (rc)
        return rc;
    rc = tf_write_file_atomic(path, json, strlen(json), err);
    free(json);
    return rc;
}

/* Reads one entry of "actions" into a and its cell text for the order. */
static int parse_plan_action(const tfj_ctx *at, const cJSON *o, int ranks, int stages,
                             int microbatches, tf_plan_action *a, tf_error *err)
{
    if (!cJSON_IsObject(o))
        return tfj_fail(at, o, "expected an action object", err);
    const char *type;
    int rc;
    /* Start times are sums of durations: allow a million maximal ones. */
    const double inf = TF_MAX_DURATION_MS, latest = 1e6 * TF_MAX_DURATION_MS;
    if ((rc = tfj_int(at, o, "rank", 1, 0, 0, ranks - 1, &a->action.rank, err)) ||
        (rc = tfj_int(at, o, "stage", 1, 0, 0, stages - 1, &a->action.stage, err)) ||
        (rc = tfj_int(at, o, "microbatch", 1, 0, 0, microbatches - 1, &a->action.microbatch,
                      err)) ||
        (rc = tfj_string(at, o, "type", 1, NULL, &type, err)) ||
        (rc = tfj_number(at, o, "start_ms", 1, 0, 0, latest, &a->start_ms, err)) ||
        (rc = tfj_number(at, o, "ms", 1, 0, 0, inf, &a->ms, err)) ||
        (rc = tfj_number(at, o, "max_ms", 0, a->ms, 0, inf, &a->max_ms, err)) ||
        (rc = tfj_number(at, o, "min_ms", 0, a->ms, 0, inf, &a->min_ms, err)) ||
        (rc = tfj_number(at, o, "freeze_ratio", 0, 0, 0, 1, &a->freeze_ratio, err)) ||
        (rc = tfj_bool(at, o, "critical", 0, 0, &a->critical, err)))
        return rc;
    tfj_ctx field;
    if (strlen(type) != 1 || tf_action_type_parse(type[0], &a->action.type)) {
        tfj_child(at, "type", &field);
        return tfj_fail(&field, cJSON_GetObjectItemCaseSensitive(o, "type"),
                        "expected \"F\", \"B\", \"I\" or \"W\"", err);
    }
    double tol = 1e-9 * fmax(1.0, a->max_ms);
    if (a->min_ms > a->max_ms + tol || a->ms > a->max_ms + tol || a->ms < a->min_ms - tol) {
        return tf_fail(err, TF_EINVAL,
                       "%s: %s: durations must satisfy min_ms <= ms <= max_ms, got min_ms %g, "
                       "ms %g, max_ms %g",
                       at->where, at->path, a->min_ms, a->ms, a->max_ms);
    }
    /* The ratio is what tf-exec freezes and ms what the timeline draws:
     * they must describe the same plan (files keep 12 digits). */
    double expected_ms = a->max_ms - a->freeze_ratio * (a->max_ms - a->min_ms);
    if (cJSON_GetObjectItemCaseSensitive(o, "freeze_ratio") &&
        fabs(a->ms - expected_ms) > 1e-6 * fmax(1.0, a->max_ms)) {
        return tf_fail(err, TF_EINVAL,
                       "%s: %s: freeze_ratio %g gives ms = max_ms - ratio x (max_ms - min_ms) = "
                       "%g, but ms is %g",
                       at->where, at->path, a->freeze_ratio, expected_ms, a->ms);
    }
    return 0;
}

static int parse_plan(const cJSON *root, const char *where, tf_plan *plan, tf_error *err)
{
    tfj_ctx ctx = {.where = where, .path = "$"};
    if (!cJSON_IsObject(root))
        return tfj_fail(&ctx, root, "expected a JSON object (a tf-plan)", err);
    const char *format, *name, *objective;
    int rc, version, ranks, spr, microbatches;
    if ((rc = tfj_string(&ctx, root, "format", 1, NULL, &format, err)))
        return rc;
    if (strcmp(format, "tf-plan") != 0) {
        tfj_ctx at;
        tfj_child(&ctx, "format", &at);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(root, "format"),
                        "expected \"tf-plan\" (is this a plan written by tf-plan?)", err);
    }
    if ((rc = tfj_int(&ctx, root, "version", 1, 1, 1, 1, &version, err)) ||
        (rc = tfj_string(&ctx, root, "schedule", 1, NULL, &name, err)) ||
        (rc = tfj_int(&ctx, root, "ranks", 1, 0, 1, 4096, &ranks, err)) ||
        (rc = tfj_int(&ctx, root, "stages_per_rank", 1, 1, 1, 64, &spr, err)) ||
        (rc = tfj_int(&ctx, root, "microbatches", 1, 0, 1, 65536, &microbatches, err)) ||
        (rc = tfj_number(&ctx, root, "microbatch_tokens", 0, 0, 0, HUGE_VAL,
                         &plan->microbatch_tokens, err)) ||
        (rc = tfj_number(&ctx, root, "p2p_ms", 0, 0, 0, TF_MAX_DURATION_MS, &plan->p2p_ms, err)) ||
        (rc = tfj_string(&ctx, root, "objective", 0, "least-freeze", &objective, err)))
        return rc;
    if (tf_objective_parse(objective, &plan->objective)) {
        tfj_ctx at;
        tfj_child(&ctx, "objective", &at);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(root, "objective"),
                        "expected \"least-freeze\" or \"spread\"", err);
    }
    const int stages = ranks * spr;
    const cJSON *actions;
    if ((rc = tfj_array(&ctx, root, "actions", 1, &actions, err)))
        return rc;
    int n = cJSON_GetArraySize(actions);
    plan->actions = calloc((size_t)n + 1, sizeof *plan->actions);
    plan->max_freeze_ratio = calloc((size_t)stages + 1, sizeof *plan->max_freeze_ratio);
    plan->freeze_ratio_stage = calloc((size_t)stages + 1, sizeof *plan->freeze_ratio_stage);
    int *row_len = calloc((size_t)ranks, sizeof *row_len);
    char *cells = malloc(((size_t)n + 1) * 32);
    const char ***rows = calloc((size_t)ranks, sizeof *rows);
    const char **cell_ptrs = calloc((size_t)n + 1, sizeof *cell_ptrs);
    if (!plan->actions || !plan->max_freeze_ratio || !plan->freeze_ratio_stage || !row_len ||
        !cells || !rows || !cell_ptrs) {
        rc = tf_fail(err, TF_ENOMEM, "%s: out of memory", where);
        goto done;
    }
    tfj_ctx actions_at;
    tfj_child(&ctx, "actions", &actions_at);
    int i = 0, previous_rank = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, actions)
    {
        tfj_ctx at;
        tfj_index(&actions_at, i, &at);
        tf_plan_action *a = &plan->actions[i];
        if ((rc = parse_plan_action(&at, o, ranks, stages, microbatches, a, err)))
            goto done;
        if (a->action.rank < previous_rank) {
            rc = tf_fail(err, TF_EINVAL,
                         "%s: %s.rank: actions must be listed rank by rank, got rank %d after "
                         "rank %d",
                         where, at.path, a->action.rank, previous_rank);
            goto done;
        }
        previous_rank = a->action.rank;
        cell_ptrs[i] = tf_action_format(&a->action, cells + (size_t)i * 32);
        row_len[a->action.rank]++;
        i++;
    }
    for (int r = 0, first = 0; r < ranks; first += row_len[r], r++)
        rows[r] = cell_ptrs + first;
    char order_where[300];
    snprintf(order_where, sizeof order_where, "%s: $.actions", where);
    if ((rc = tf_schedule_from_cells((const char *const *const *)rows, row_len, ranks,
                                     microbatches, order_where, &plan->schedule, err)))
        goto done;
    snprintf(plan->schedule.name, sizeof plan->schedule.name, "%s", name);
    if (plan->schedule.stages != stages) {
        rc = tf_fail(err, TF_EINVAL,
                     "%s: $.actions: use %d stages, but ranks x stages_per_rank = %d", where,
                     plan->schedule.stages, stages);
        goto done;
    }
    for (int k = 0; k < n; k++)
        plan->actions[k].action = plan->schedule.actions[k];

    /* Caps, totals and solver details: informative, but checked for type. */
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(root, "max_freeze_ratio");
    if (cJSON_IsArray(caps) && cJSON_GetArraySize(caps) == stages) {
        int st = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, caps) plan->max_freeze_ratio[st++] =
            cJSON_IsNumber(c) ? c->valuedouble : 0.9;
    } else {
        double cap;
        if ((rc = tfj_number(&ctx, root, "max_freeze_ratio", 0, 0.9, 0, 1, &cap, err)))
            goto done;
        for (int st = 0; st < stages; st++)
            plan->max_freeze_ratio[st] = cap;
    }
    const cJSON *solver = cJSON_GetObjectItemCaseSensitive(root, "solver");
    tfj_ctx solver_at;
    tfj_child(&ctx, "solver", &solver_at);
    const char *solver_name = "unknown", *solver_version = "", *solver_status = "";
    const char *solver_requested = "";
    if (cJSON_IsObject(solver) &&
        ((rc = tfj_string(&solver_at, solver, "name", 0, "unknown", &solver_name, err)) ||
         (rc = tfj_string(&solver_at, solver, "version", 0, "", &solver_version, err)) ||
         (rc = tfj_string(&solver_at, solver, "requested", 0, "", &solver_requested, err)) ||
         (rc = tfj_string(&solver_at, solver, "status", 0, "", &solver_status, err)) ||
         (rc = tfj_number(&solver_at, solver, "seconds", 0, 0, 0, HUGE_VAL,
                          &plan->solver_seconds, err))))
        goto done;
    snprintf(plan->solver_name, sizeof plan->solver_name, "%s", solver_name);
    snprintf(plan->solver_version, sizeof plan->solver_version, "%s", solver_version);
    snprintf(plan->solver_requested, sizeof plan->solver_requested, "%s", solver_requested);
    snprintf(plan->solver_status, sizeof plan->solver_status, "%s", solver_status);
    if (cJSON_IsObject(solver)) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(solver, "variables");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(solver, "constraints");
        plan->solver_variables = cJSON_IsNumber(v) ? v->valueint : 0;
        plan->solver_constraints = cJSON_IsNumber(c) ? c->valueint : 0;
    }

    /* Recompute the figures from the actions rather than trust the header,
     * so a plan edited by hand is drawn and executed as it really is. */
    {
        int count = plan->schedule.n_actions;
        double *max_ms = malloc(((size_t)count + 1) * sizeof *max_ms);
        double *min_ms = malloc(((size_t)count + 1) * sizeof *min_ms);
        double *ratio = malloc(((size_t)count + 1) * sizeof *ratio);
        double *dur = malloc(((size_t)count + 1) * sizeof *dur);
        double *start = malloc(((size_t)count + 1) * sizeof *start);
        unsigned char *critical = malloc((size_t)count + 1);
        tf_dag g = {0};
        if (!max_ms || !min_ms || !ratio || !dur || !start || !critical)
            rc = tf_fail(err, TF_ENOMEM, "%s: out of memory", where);
        else
            rc = tf_dag_build(&plan->schedule, plan->p2p_ms, &g, err);
        if (!rc) {
            for (int k = 0; k < count; k++) {
                max_ms[k] = plan->actions[k].max_ms;
                min_ms[k] = plan->actions[k].min_ms;
            }
            /* start serves as scratch for the bounds before it is filled. */
            plan->batch_ms_unfrozen = tf_dag_longest_path(&g, max_ms, start);
            plan->batch_ms_all_frozen = tf_dag_longest_path(&g, min_ms, start);
            for (int k = 0; k < count; k++) {
                ratio[k] = plan->actions[k].freeze_ratio;
                dur[k] = plan->actions[k].ms;
                start[k] = plan->actions[k].start_ms;
            }
            plan->batch_ms_planned = 0.0;
            for (int k = 0; k < count; k++)
                plan->batch_ms_planned = fmax(plan->batch_ms_planned, start[k] + dur[k]);
            if (tf_plan_fill(plan, &g, max_ms, min_ms, ratio, dur, start, critical))
                rc = tf_fail(err, TF_ENOMEM, "%s: out of memory", where);
        }
        tf_dag_free(&g);
        free(max_ms);
        free(min_ms);
        free(ratio);
        free(dur);
        free(start);
        free(critical);
    }
done:
    free(row_len);
    free(cells);
    free(rows);
    free(cell_ptrs);
    return rc;
}

int tf_plan_parse(const char *json, const char *where, tf_plan *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    cJSON *root;
    int rc = tfj_parse(json, where, &root, err);
    if (rc)
        return rc;
    rc = parse_plan(root, where, out, err);
    cJSON_Delete(root);
    if (rc)
        tf_plan_free(out);
    return rc;
}

int tf_plan_load(const char *path, tf_plan *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    char *text;
    int rc = tf_read_file(path, &text, NULL, err);
    if (rc)
        return rc;
    rc = tf_plan_parse(text, path, out, err);
    free(text);
    return rc;
}

