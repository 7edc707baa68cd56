/* plan_json.c - plan.json out (tf_plan_to_json, tf_plan_save) and in
 * (tf_plan_parse, tf_plan_load): every field checked, the figures
 * recomputed from the actions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_util.h"
#include "plan_internal.h"
#include "plan_json_aux.h"
#include "plan_json_ranks.h"
#include "schedule_internal.h"
#include "tf/profile.h"
#include "tf/util.h"

/* The newest version of plan.json this reader reads, and the one the
 * writer writes. */
enum { PLAN_VERSION = 2 }; /* 2: per_rank, memory, R actions, recompute_ratio */

/* The fields of each object of a plan (formats.md). */
static const char *const plan_fields[] = {
    "schedule", "ranks", "stages_per_rank", "microbatches", "microbatch_tokens", "p2p_ms",
    "max_freeze_ratio", "max_action_ratio", "objective", "batch_ms", "speedup",
    "tokens_per_s", "freeze_ratio", "solver", "actions", "per_rank", "memory", "aux", NULL};
static const char *const batch_fields[] = {"unfrozen", "all_frozen", "planned", NULL};
static const char *const tokens_fields[] = {"unfrozen", "planned", NULL};
static const char *const ratio_fields[] = {"mean", "per_stage", NULL};
static const char *const solver_fields[] = {
    "name", "version", "requested", "status", "fallback", "variables", "constraints", "seconds",
    NULL};
static const char *const action_fields[] = {
    "rank", "stage", "microbatch", "type", "start_ms", "ms", "max_ms", "min_ms",
    "freeze_ratio", "recompute_ratio", "critical", "pair", NULL};

static const tfj_format plan_format = {
    .name = "tf-plan", .required = 1, .version = PLAN_VERSION, .fields = plan_fields};

static cJSON *number_array(const double *values, int n)
{
    cJSON *array = cJSON_CreateArray();
    for (int i = 0; i < n && array; i++)
        cJSON_AddItemToArray(array, tfj_create_number(values[i]));
    return array;
}

/* "pair": PyTorch's name of the overlapped pair action i belongs to, the
 * same on both of its actions (formats.md). */
static void add_pair_name(cJSON *o, const tf_plan *plan, int i)
{
    const tf_schedule *s = &plan->schedule;
    int first = s->actions[i].pair == TF_PAIR_FIRST ? i
              : s->actions[i].pair == TF_PAIR_SECOND ? i - 1 : -1;
    if (first < 0 || first + 1 >= s->n_actions)
        return;
    char name[TF_CELL_MAX];
    cJSON_AddStringToObject(o, "pair", tf_pair_format(&plan->actions[first].action,
                                                      &plan->actions[first + 1].action, name));
}

int tf_plan_to_json(const tf_plan *plan, char **json, tf_error *err)
{
    const tf_schedule *s = &plan->schedule;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    cJSON_AddStringToObject(root, "format", plan_format.name);
    cJSON_AddNumberToObject(root, "version", PLAN_VERSION);
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
    if (plan->max_action_ratio < 1.0)
        tfj_add_number(root, "max_action_ratio", plan->max_action_ratio);
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
    if (plan->solver_fallback[0])
        cJSON_AddStringToObject(solver, "fallback", plan->solver_fallback);
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
        if (a->recompute_ratio > 0)
            tfj_add_number(o, "recompute_ratio", a->recompute_ratio);
        cJSON_AddBoolToObject(o, "critical", a->critical);
        add_pair_name(o, plan, i);
        cJSON_AddItemToArray(actions, o);
    }
    if (tf_plan_json_add_ranks(root, plan) || tf_plan_json_add_aux(root, plan)) {
        cJSON_Delete(root);
        return tf_fail(err, TF_ENOMEM, "out of memory writing the plan");
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

/* An R lasts ms = q x max_ms (q, its backward's recompute ratio, is
 * checked against it once the order is known) and never freezes. */
static int check_recompute_action(const tfj_ctx *at, const cJSON *o, const tf_plan_action *a,
                                  tf_error *err)
{
    tfj_ctx field;
    const char *bad = a->min_ms != 0.0 ? "min_ms" : a->freeze_ratio != 0.0 ? "freeze_ratio"
                      : a->recompute_ratio != 0.0 ? "recompute_ratio" : NULL;
    if (bad) {
        tfj_child(at, bad, &field);
        return tfj_fail(&field, cJSON_GetObjectItemCaseSensitive(o, bad),
                        "an R action (recomputation) has 0 here: its length is its backward's "
                        "recompute_ratio x max_ms", err);
    }
    if (a->ms > a->max_ms * (1.0 + 1e-9))
        return tf_fail(err, TF_EINVAL, "%s: %s: an R lasts at most max_ms (%g), got ms %g",
                       at->where, at->path, a->max_ms, a->ms);
    return 0;
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
    if ((rc = tfj_check_fields(at, o, action_fields, err)) ||
        (rc = tfj_int(at, o, "rank", 1, 0, 0, ranks - 1, &a->action.rank, err)) ||
        (rc = tfj_int(at, o, "stage", 1, 0, 0, stages - 1, &a->action.stage, err)) ||
        (rc = tfj_int(at, o, "microbatch", 1, 0, 0, microbatches - 1, &a->action.microbatch,
                      err)) ||
        (rc = tfj_string(at, o, "type", 1, NULL, &type, err)) ||
        (rc = tfj_number(at, o, "start_ms", 1, 0, 0, latest, &a->start_ms, err)) ||
        (rc = tfj_number(at, o, "ms", 1, 0, 0, inf, &a->ms, err)) ||
        (rc = tfj_number(at, o, "max_ms", 0, a->ms, 0, inf, &a->max_ms, err)) ||
        (rc = tfj_number(at, o, "min_ms", 0, a->ms, 0, inf, &a->min_ms, err)) ||
        (rc = tfj_number(at, o, "freeze_ratio", 0, 0, 0, 1, &a->freeze_ratio, err)) ||
        (rc = tfj_number(at, o, "recompute_ratio", 0, 0, 0, 1, &a->recompute_ratio, err)) ||
        (rc = tfj_bool(at, o, "critical", 0, 0, &a->critical, err)))
        return rc;
    tfj_ctx field;
    if (strlen(type) != 1 || tf_action_type_parse(type[0], &a->action.type)) {
        tfj_child(at, "type", &field);
        return tfj_fail(&field, cJSON_GetObjectItemCaseSensitive(o, "type"),
                        "expected \"F\", \"B\", \"I\", \"W\" or \"R\"", err);
    }
    if (a->action.type == TF_ACT_R)
        return check_recompute_action(at, o, a, err);
    if (a->recompute_ratio != 0.0 && a->action.type != TF_ACT_B && a->action.type != TF_ACT_I) {
        tfj_child(at, "recompute_ratio", &field);
        return tfj_fail(&field, cJSON_GetObjectItemCaseSensitive(o, "recompute_ratio"),
                        "only a backward that waits for a gradient (B, or I) recomputes", err);
    }
    double tol = 1e-9 * fmax(1.0, a->max_ms);
    if (a->min_ms > a->max_ms + tol || a->ms > a->max_ms + tol || a->ms < a->min_ms - tol) {
        return tf_fail(err, TF_EINVAL,
                       "%s: %s: durations must satisfy min_ms <= ms <= max_ms, got min_ms %g, "
                       "ms %g, max_ms %g",
                       at->where, at->path, a->min_ms, a->ms, a->max_ms);
    }
    /* The ratio is what tf-exec freezes and ms what the timeline draws:
     * they must describe the same plan (files keep 12 digits).  A ratio
     * left out is its default, 0, and checked like a written 0, so that
     * leaving it out cannot make tf-exec run unfrozen what tf-dot draws
     * frozen. */
    double expected_ms = a->max_ms - a->freeze_ratio * (a->max_ms - a->min_ms);
    if (fabs(a->ms - expected_ms) > 1e-6 * fmax(1.0, a->max_ms)) {
        int given = tfj_has(o, "freeze_ratio");
        return tf_fail(err, TF_EINVAL,
                       "%s: %s: freeze_ratio %g%s gives ms = max_ms - ratio x (max_ms - min_ms) "
                       "= %g, but ms is %g",
                       at->where, at->path, a->freeze_ratio,
                       given ? "" : " (not given, so the default)", expected_ms, a->ms);
    }
    return 0;
}

/* The shape a plan's header declares; the actions must agree with it. */
typedef struct plan_shape {
    const char *name;
    int ranks, stages_per_rank, microbatches;
} plan_shape;

/* The schedule's name and shape, tokens, lag and objective. */
static int parse_plan_header(const tfj_ctx *ctx, const cJSON *root, plan_shape *shape,
                             tf_plan *plan, tf_error *err)
{
    const char *objective;
    int rc;
    tfj_ctx at;
    if ((rc = tfj_string(ctx, root, "schedule", 1, NULL, &shape->name, err)) ||
        (rc = tfj_int(ctx, root, "ranks", 1, 0, 1, TF_MAX_RANKS, &shape->ranks, err)) ||
        (rc = tfj_int(ctx, root, "stages_per_rank", 1, 1, 1, TF_MAX_STAGES_PER_RANK,
                      &shape->stages_per_rank, err)) ||
        (rc = tfj_int(ctx, root, "microbatches", 1, 0, 1, TF_MAX_MICROBATCHES,
                      &shape->microbatches, err)) ||
        (rc = tfj_number(ctx, root, "microbatch_tokens", 0, 0, 0, HUGE_VAL,
                         &plan->microbatch_tokens, err)) ||
        (rc = tfj_number(ctx, root, "p2p_ms", 0, 0, 0, TF_MAX_DURATION_MS, &plan->p2p_ms, err)) ||
        (rc = tfj_string(ctx, root, "objective", 0, "least-freeze", &objective, err)))
        return rc;
    if (tf_objective_parse(objective, &plan->objective)) {
        tfj_child(ctx, "objective", &at);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(root, "objective"),
                        "expected \"least-freeze\" or \"spread\"", err);
    }
    if (tf_schedule_check_size(shape->ranks, shape->stages_per_rank, shape->microbatches, 2,
                               err)) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return tf_fail(err, TF_EINVAL, "%s: $: %s", ctx->where, why);
    }
    return 0;
}

/* The cells of the plan's order, rank by rank, for tf_schedule_from_cells. */
typedef struct plan_cells {
    char *text;             /* 32 bytes per action; a pair's cell takes its two actions' */
    const char **cell;      /* per cell, into text */
    const char ***rows;     /* per rank, into cell */
    int *row_len;           /* per rank: cells */
    const char **pair;      /* per action: its "pair" field, or NULL */
} plan_cells;

static void plan_cells_free(plan_cells *c)
{
    free(c->text);
    free(c->cell);
    free(c->rows);
    free(c->row_len);
    free(c->pair);
}

/* The cell of actions[k] (and actions[k + 1] when k begins a pair) into c;
 * returns how many actions it covers, or -1 after a message: a "pair"
 * field must name the action and its neighbour, on one rank, forward
 * first, both carrying it. */
static int plan_cell(const tfj_ctx *ctx, const tf_plan *plan, int n, int k, plan_cells *c,
                     int cells, tf_error *err)
{
    const tf_action *a = &plan->actions[k].action;
    char *text = c->text + (size_t)k * 32;
    c->cell[cells] = text;
    if (!c->pair[k]) {
        tf_action_format(a, text);
        return 1;
    }
    tf_action parts[2];
    int count = 0;
    const tf_action *b = k + 1 < n ? &plan->actions[k + 1].action : NULL;
    int ok = tf_cell_parse(c->pair[k], parts, &count, NULL) == 0 && count == 2 && b &&
             c->pair[k + 1] && strcmp(c->pair[k], c->pair[k + 1]) == 0 &&
             b->rank == a->rank;
    for (int j = 0; ok && j < 2; j++) {
        const tf_action *x = j ? b : a;
        ok = parts[j].type == x->type && parts[j].stage == x->stage &&
             parts[j].microbatch == x->microbatch;
    }
    if (!ok) {
        tf_fail(err, TF_EINVAL,
                "%s: $.actions[%d].pair: \"%.100s\" must name this action and the next one, on "
                "one rank, forward first, both carrying it",
                ctx->where, k, c->pair[k]);
        return -1;
    }
    /* Two actions' slots hold the longest pair name (57 bytes). */
    tf_pair_format(a, b, text);
    return 2;
}

/* The plan's order as cells, pairs joined into one cell each. */
static int plan_order_cells(const tfj_ctx *ctx, const plan_shape *shape, const tf_plan *plan,
                            int n, plan_cells *c, tf_error *err)
{
    int cells = 0;
    for (int k = 0; k < n;) {
        int covered = plan_cell(ctx, plan, n, k, c, cells, err);
        if (covered < 0)
            return TF_EINVAL;
        c->row_len[plan->actions[k].action.rank]++;
        cells++;
        k += covered;
    }
    for (int r = 0, first = 0; r < shape->ranks; first += c->row_len[r], r++)
        c->rows[r] = c->cell + first;
    return 0;
}

/* Reads every entry of "actions" into plan->actions (n of them) and its
 * cell into c, checking they come rank by rank. */
static int parse_plan_action_list(const tfj_ctx *ctx, const cJSON *actions,
                                  const plan_shape *shape, tf_plan *plan, plan_cells *c,
                                  tf_error *err)
{
    const int stages = shape->ranks * shape->stages_per_rank;
    tfj_ctx actions_at;
    tfj_child(ctx, "actions", &actions_at);
    int i = 0, previous_rank = 0, rc;
    const cJSON *o;
    cJSON_ArrayForEach(o, actions)
    {
        tfj_ctx at;
        tfj_index(&actions_at, i, &at);
        tf_plan_action *a = &plan->actions[i];
        if ((rc = parse_plan_action(&at, o, shape->ranks, stages, shape->microbatches, a, err)))
            return rc;
        if (a->action.rank < previous_rank)
            return tf_fail(err, TF_EINVAL,
                           "%s: %s.rank: actions must be listed rank by rank, got rank %d "
                           "after rank %d",
                           ctx->where, at.path, a->action.rank, previous_rank);
        previous_rank = a->action.rank;
        const cJSON *pair = cJSON_GetObjectItemCaseSensitive(o, "pair");
        if (pair && !cJSON_IsString(pair)) {
            tfj_ctx field;
            tfj_child(&at, "pair", &field);
            return tfj_fail(&field, pair, "expected a pair's name like \"(0F7;7B3)OVERLAP_F_B\"",
                            err);
        }
        c->pair[i] = pair ? pair->valuestring : NULL;
        i++;
    }
    return plan_order_cells(ctx, shape, plan, i, c, err);
}

/* "actions": every action, then the schedule they form (an order that
 * deadlocks is refused later, by tf_dag_build). */
static int parse_plan_actions(const tfj_ctx *ctx, const cJSON *root, const plan_shape *shape,
                              tf_plan *plan, tf_error *err)
{
    const int stages = shape->ranks * shape->stages_per_rank;
    const cJSON *actions;
    int rc = tfj_array(ctx, root, "actions", 1, &actions, err);
    if (rc)
        return rc;
    int n = cJSON_GetArraySize(actions);
    if (n > TF_MAX_ACTIONS)
        return tf_fail(err, TF_EINVAL, "%s: $.actions: %d actions, more than the %d the planner "
                       "accepts", ctx->where, n, TF_MAX_ACTIONS);
    plan->actions = calloc((size_t)n + 1, sizeof *plan->actions);
    plan->max_freeze_ratio = calloc((size_t)stages + 1, sizeof *plan->max_freeze_ratio);
    plan->freeze_ratio_stage = calloc((size_t)stages + 1, sizeof *plan->freeze_ratio_stage);
    plan_cells c = {malloc(((size_t)n + 1) * 32), calloc((size_t)n + 1, sizeof *c.cell),
                    calloc((size_t)shape->ranks, sizeof *c.rows),
                    calloc((size_t)shape->ranks, sizeof *c.row_len),
                    calloc((size_t)n + 1, sizeof *c.pair)};
    if (!plan->actions || !plan->max_freeze_ratio || !plan->freeze_ratio_stage || !c.text ||
        !c.cell || !c.rows || !c.row_len || !c.pair) {
        plan_cells_free(&c);
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", ctx->where);
    }
    char order_where[300];
    snprintf(order_where, sizeof order_where, "%s: $.actions", ctx->where);
    if (!(rc = parse_plan_action_list(ctx, actions, shape, plan, &c, err)))
        rc = tf_schedule_from_plan_cells(
            &(tf_cell_rows){(const char *const *const *)c.rows, c.row_len, shape->ranks},
            shape->microbatches, order_where, &plan->schedule, err);
    plan_cells_free(&c);
    if (rc)
        return rc;
    snprintf(plan->schedule.name, sizeof plan->schedule.name, "%s", shape->name);
    if (plan->schedule.stages != stages)
        return tf_fail(err, TF_EINVAL,
                       "%s: $.actions: use %d stages, but ranks x stages_per_rank = %d",
                       ctx->where, plan->schedule.stages, stages);
    for (int k = 0; k < n; k++)
        plan->actions[k].action = plan->schedule.actions[k];
    return 0;
}

/* "max_freeze_ratio": one cap, or one per stage, and "max_action_ratio"
 * (absent: 1).  Informative (the plan's ratios are what counts), but
 * checked for type and range. */
static int parse_plan_caps(const tfj_ctx *ctx, const cJSON *root, tf_plan *plan, tf_error *err)
{
    const int stages = plan->schedule.stages;
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(root, "max_freeze_ratio");
    if (cJSON_IsArray(caps) && cJSON_GetArraySize(caps) == stages) {
        int st = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, caps) plan->max_freeze_ratio[st++] =
            cJSON_IsNumber(c) ? c->valuedouble : 0.9;
        return tfj_number(ctx, root, "max_action_ratio", 0, 1.0, 0, 1, &plan->max_action_ratio,
                          err);
    }
    double cap;
    int rc = tfj_number(ctx, root, "max_freeze_ratio", 0, 0.9, 0, 1, &cap, err);
    for (int st = 0; !rc && st < stages; st++)
        plan->max_freeze_ratio[st] = cap;
    if (!rc)
        rc = tfj_number(ctx, root, "max_action_ratio", 0, 1.0, 0, 1, &plan->max_action_ratio,
                        err);
    return rc;
}

/* "solver": who solved, how and how fast.  Informative, checked for type. */
static int parse_plan_solver(const tfj_ctx *ctx, const cJSON *root, tf_plan *plan,
                             tf_error *err)
{
    const cJSON *solver;
    int rc = tfj_object(ctx, root, "solver", 0, &solver, err);
    if (rc)
        return rc;
    tfj_ctx at;
    tfj_child(ctx, "solver", &at);
    const char *name = "unknown", *version = "", *status = "", *requested = "", *fallback = "";
    if (solver &&
        ((rc = tfj_check_fields(&at, solver, solver_fields, err)) ||
         (rc = tfj_string(&at, solver, "name", 0, "unknown", &name, err)) ||
         (rc = tfj_string(&at, solver, "version", 0, "", &version, err)) ||
         (rc = tfj_string(&at, solver, "requested", 0, "", &requested, err)) ||
         (rc = tfj_string(&at, solver, "status", 0, "", &status, err)) ||
         (rc = tfj_string(&at, solver, "fallback", 0, "", &fallback, err)) ||
         (rc = tfj_number(&at, solver, "seconds", 0, 0, 0, HUGE_VAL, &plan->solver_seconds,
                          err))))
        return rc;
    snprintf(plan->solver_name, sizeof plan->solver_name, "%s", name);
    snprintf(plan->solver_version, sizeof plan->solver_version, "%s", version);
    snprintf(plan->solver_requested, sizeof plan->solver_requested, "%s", requested);
    snprintf(plan->solver_status, sizeof plan->solver_status, "%s", status);
    snprintf(plan->solver_fallback, sizeof plan->solver_fallback, "%s", fallback);
    if (solver) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(solver, "variables");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(solver, "constraints");
        plan->solver_variables = cJSON_IsNumber(v) ? v->valueint : 0;
        plan->solver_constraints = cJSON_IsNumber(c) ? c->valueint : 0;
    }
    return 0;
}

/* "batch_ms", "tokens_per_s" and "freeze_ratio": figures recomputed from
 * the actions (recompute_figures), so only their fields are checked. */
static int check_plan_figures(const tfj_ctx *ctx, const cJSON *root, tf_error *err)
{
    static const struct {
        const char *key;
        const char *const *fields;
    } figures[] = {{"batch_ms", batch_fields},
                   {"tokens_per_s", tokens_fields},
                   {"freeze_ratio", ratio_fields}};
    for (size_t k = 0; k < sizeof figures / sizeof *figures; k++) {
        const cJSON *o;
        tfj_ctx at;
        tfj_child(ctx, figures[k].key, &at);
        int rc = tfj_object(ctx, root, figures[k].key, 0, &o, err);
        if (rc || (o && (rc = tfj_check_fields(&at, o, figures[k].fields, err))))
            return rc;
    }
    return 0;
}

/* Each R's length is its backward's recompute ratio x its max_ms, and a
 * backward that recomputes has its R. */
static int check_recompute_lengths(const tf_plan *plan, const char *where, tf_error *err)
{
    const tf_schedule *s = &plan->schedule;
    int *index = tf_schedule_index(s);
    if (!index)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", where);
    int rc = 0;
    for (int i = 0; i < s->n_actions && !rc; i++) {
        const tf_plan_action *a = &plan->actions[i];
        char cell[32];
        tf_action_format(&a->action, cell);
        if (a->action.type == TF_ACT_R) {
            int b = tf_schedule_backward_of(s, index, a->action.stage, a->action.microbatch);
            double q = plan->actions[b].recompute_ratio;
            if (fabs(a->ms - q * a->max_ms) > 1e-6 * fmax(1.0, a->max_ms))
                rc = tf_fail(err, TF_EINVAL, "%s: $.actions[%d]: %s lasts %g ms, but its "
                             "backward's recompute_ratio %g x max_ms %g is %g", where, i, cell,
                             a->ms, q, a->max_ms, q * a->max_ms);
        } else if (a->recompute_ratio > 0 &&
                   tf_schedule_lookup(s, index, TF_ACT_R, a->action.stage,
                                      a->action.microbatch) < 0) {
            rc = tf_fail(err, TF_EINVAL, "%s: $.actions[%d]: %s recomputes %g of its forward, "
                         "but no R action does the work", where, i, cell, a->recompute_ratio);
        }
    }
    free(index);
    return rc;
}

/* The per-action arrays of a plan read from a file. */
typedef struct read_arrays {
    double *max_ms, *min_ms, *unfrozen_ms, *ratio, *recompute, *dur, *start;
    unsigned char *critical;
} read_arrays;

static int read_arrays_alloc(read_arrays *x, size_t count)
{
    double **all[7] = {&x->max_ms, &x->min_ms, &x->unfrozen_ms, &x->ratio, &x->recompute,
                       &x->dur, &x->start};
    int ok = 1;
    for (int k = 0; k < 7; k++)
        ok &= (*all[k] = malloc((count + 1) * sizeof **all[k])) != NULL;
    x->critical = malloc(count + 1);
    return ok && x->critical ? 0 : TF_ENOMEM;
}

static void read_arrays_free(read_arrays *x)
{
    double *all[7] = {x->max_ms, x->min_ms, x->unfrozen_ms, x->ratio, x->recompute, x->dur,
                      x->start};
    for (int k = 0; k < 7; k++)
        free(all[k]);
    free(x->critical);
}

/* The plan's figures recomputed from its actions rather than trusted from
 * the header, so a plan edited by hand is drawn and executed as it really
 * is.  Unfrozen, an R lasts nothing.  Returns 0, TF_ECYCLE (the order
 * deadlocks), TF_EINVAL (an R of the wrong length, a plan over its memory
 * limit) or TF_ENOMEM. */
static int recompute_figures(tf_plan *plan, const char *where, tf_error *err)
{
    const size_t count = (size_t)plan->schedule.n_actions;
    read_arrays x = {0};
    tf_dag g = {0};
    int rc = read_arrays_alloc(&x, count) ? tf_fail(err, TF_ENOMEM, "%s: out of memory", where)
                                          : check_recompute_lengths(plan, where, err);
    if (!rc)
        rc = tf_dag_build(&plan->schedule, plan->p2p_ms, &g, err);
    for (size_t k = 0; !rc && k < count; k++) {
        const tf_plan_action *a = &plan->actions[k];
        x.max_ms[k] = a->max_ms;
        x.min_ms[k] = a->min_ms;
        x.unfrozen_ms[k] = tf_plan_action_unfrozen_ms(a);
        x.ratio[k] = a->freeze_ratio;
        x.recompute[k] = a->recompute_ratio;
        x.dur[k] = a->ms;
        x.start[k] = a->start_ms;
    }
    if (!rc) {
        double *scratch = malloc((count + 1) * sizeof *scratch);
        if (!scratch)
            rc = tf_fail(err, TF_ENOMEM, "%s: out of memory", where);
        else {
            plan->batch_ms_unfrozen = tf_dag_longest_path(&g, x.unfrozen_ms, scratch);
            plan->batch_ms_all_frozen = tf_dag_longest_path(&g, x.min_ms, scratch);
        }
        free(scratch);
        plan->batch_ms_planned = 0.0;
        for (size_t k = 0; k < count; k++)
            plan->batch_ms_planned = fmax(plan->batch_ms_planned, x.start[k] + x.dur[k]);
    }
    if (!rc) {
        tf_plan_arrays arrays = {x.max_ms, x.min_ms, x.ratio, x.recompute, x.dur, x.start};
        rc = tf_plan_fill(plan, &g, &arrays, x.critical, err);
    }
    if (!rc)
        rc = tf_plan_check_limits(plan, where, err);
    tf_dag_free(&g);
    read_arrays_free(&x);
    return rc;
}

static int parse_plan(const cJSON *root, const char *where, tf_plan *plan, tf_error *err)
{
    tfj_ctx ctx = {.where = where, .path = "$"};
    plan_shape shape;
    int rc, version;
    if ((rc = tfj_check_document(&ctx, root, &plan_format, &version, err)) ||
        (rc = check_plan_figures(&ctx, root, err)) ||
        (rc = parse_plan_header(&ctx, root, &shape, plan, err)) ||
        (rc = parse_plan_actions(&ctx, root, &shape, plan, err)) ||
        (rc = parse_plan_caps(&ctx, root, plan, err)) ||
        (rc = tf_plan_json_parse_ranks(&ctx, root, plan, err)) ||
        (rc = tf_plan_json_parse_aux(&ctx, root, plan, err)) ||
        (rc = parse_plan_solver(&ctx, root, plan, err)))
        return rc;
    return recompute_figures(plan, where, err);
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
    int rc = tf_read_file_limit(path, TF_MAX_PLAN_BYTES, &text, NULL, err);
    if (rc)
        return rc;
    rc = tf_plan_parse(text, path, out, err);
    free(text);
    return rc;
}

