/* profile.c - reading, validating and writing profile.json. */
#include "tf/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_util.h"
#include "aux_json.h"
#include "memory_json.h"
#include "tf/util.h"

/* The newest version of profile.json this reader reads, and the one the
 * writer writes. */
enum { PROFILE_VERSION = 2 }; /* 2: the memory fields */

/* The fields of each object of a profile (formats.md). */
static const char *const profile_fields[] = {
    "schedule", "ranks", "stages_per_rank", "microbatches", "microbatch_tokens", "p2p_ms",
    "max_freeze_ratio", "stages", "actions", "order", "pairs", "memory_limit_bytes", NULL};
static const char *const stage_fields[] = {
    "forward_ms", "backward_ms", "backward_frozen_ms", "backward_input_ms",
    "backward_weight_ms", "backward_weight_frozen_ms", "parameters", "static_bytes",
    "activation_bytes", "activation_frozen_bytes", "weight_grad_bytes",
    "backward_input_transient_bytes", "checkpoint_bytes",
    "recompute_ms", "aux", NULL};
static const char *const override_fields[] = {
    "rank", "stage", "microbatch", "type", "ms", "frozen_ms", NULL};
static const char *const pair_fields[] = {"pair", "ms", "frozen_ms", NULL};

static const tfj_format profile_format = {
    .name = "tf-profile", .required = 0, .version = PROFILE_VERSION, .fields = profile_fields};

/* Which action types a stage uses in the schedule. */
typedef struct stage_use {
    int full_backward;  /* has B actions */
    int split_backward; /* has I/W actions */
} stage_use;

static int parse_order(const tfj_ctx *root_ctx, const cJSON *order, int ranks, int microbatches,
                       tf_schedule *out, tf_error *err)
{
    tfj_ctx at;
    tfj_child(root_ctx, "order", &at);
    if (cJSON_GetArraySize(order) != ranks) {
        char what[96];
        snprintf(what, sizeof what, "expected one list of actions per rank (%d lists)", ranks);
        return tfj_fail(&at, order, what, err);
    }
    const char ***rows = calloc((size_t)ranks, sizeof *rows);
    int *row_len = calloc((size_t)ranks, sizeof *row_len);
    int rc = 0;
    if (!rows || !row_len) {
        rc = tf_fail(err, TF_ENOMEM, "%s: out of memory", root_ctx->where);
        goto done;
    }
    int r = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, order)
    {
        tfj_ctx row_at;
        tfj_index(&at, r, &row_at);
        if (!cJSON_IsArray(row)) {
            rc = tfj_fail(&row_at, row, "expected an array of actions like \"0F3\"", err);
            goto done;
        }
        int n = cJSON_GetArraySize(row);
        rows[r] = calloc((size_t)n + 1, sizeof *rows[r]);
        if (!rows[r]) {
            rc = tf_fail(err, TF_ENOMEM, "%s: out of memory", root_ctx->where);
            goto done;
        }
        int i = 0;
        const cJSON *cell;
        cJSON_ArrayForEach(cell, row)
        {
            if (!cJSON_IsString(cell)) {
                tfj_ctx cell_at;
                tfj_index(&row_at, i, &cell_at);
                rc = tfj_fail(&cell_at, cell, "expected an action string like \"0F3\"", err);
                goto done;
            }
            rows[r][i++] = cell->valuestring;
        }
        row_len[r] = n;
        r++;
    }
    char where[300];
    snprintf(where, sizeof where, "%s: %s", root_ctx->where, at.path);
    tf_cell_rows cells = {(const char *const *const *)rows, row_len, ranks};
    rc = tf_schedule_from_cells(&cells, microbatches, where, out, err);
done:
    if (rows)
        for (int k = 0; k < ranks; k++)
            free(rows[k]);
    free(rows);
    free(row_len);
    return rc;
}

static int parse_caps(const tfj_ctx *ctx, const cJSON *root, int stages, double *caps,
                      tf_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "max_freeze_ratio");
    tfj_ctx at;
    tfj_child(ctx, "max_freeze_ratio", &at);
    if (cJSON_IsArray(v)) {
        if (cJSON_GetArraySize(v) != stages) {
            char what[96];
            snprintf(what, sizeof what, "expected one cap per stage (%d numbers)", stages);
            return tfj_fail(&at, v, what, err);
        }
        int s = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, v)
        {
            if (!cJSON_IsNumber(c) || !(c->valuedouble >= 0.0 && c->valuedouble <= 1.0)) {
                tfj_ctx cat;
                tfj_index(&at, s, &cat);
                return tfj_fail(&cat, c, "expected a freeze ratio in [0, 1]", err);
            }
            caps[s++] = c->valuedouble;
        }
        return 0;
    }
    double cap;
    int rc = tfj_number(ctx, root, "max_freeze_ratio", 0, TF_DEFAULT_CAP, 0.0, 1.0, &cap, err);
    if (rc)
        return rc;
    for (int s = 0; s < stages; s++)
        caps[s] = cap;
    return 0;
}

static int parse_stage(const tfj_ctx *ctx, const cJSON *o, stage_use use, tf_stage_times *st,
                       tf_error *err)
{
    if (!cJSON_IsObject(o))
        return tfj_fail(ctx, o, "expected an object of stage timings", err);
    int rc = tfj_check_fields(ctx, o, stage_fields, err);
    if (rc)
        return rc;
    const double inf = TF_MAX_DURATION_MS; /* the largest duration accepted */
    if ((rc = tfj_number(ctx, o, "forward_ms", 1, 0, 0, inf, &st->forward_ms, err)))
        return rc;
    if ((rc = tfj_number(ctx, o, "backward_ms", use.full_backward, 0, 0, inf, &st->backward_ms,
                         err)))
        return rc;
    if ((rc = tfj_number(ctx, o, "backward_frozen_ms", 0, TF_DEFAULT_B_FROZEN * st->backward_ms,
                         0, inf, &st->backward_frozen_ms, err)))
        return rc;
    if ((rc = tfj_number(ctx, o, "backward_input_ms", use.split_backward, 0, 0, inf,
                         &st->backward_input_ms, err)))
        return rc;
    if ((rc = tfj_number(ctx, o, "backward_weight_ms", use.split_backward, 0, 0, inf,
                         &st->backward_weight_ms, err)))
        return rc;
    if ((rc = tfj_number(ctx, o, "backward_weight_frozen_ms", 0,
                         TF_DEFAULT_W_FROZEN * st->backward_weight_ms, 0, inf,
                         &st->backward_weight_frozen_ms, err)))
        return rc;
    if ((rc = tfj_number(ctx, o, "parameters", 0, 0, 0, HUGE_VAL, &st->parameters, err)))
        return rc;
    tfj_ctx at;
    if (st->backward_frozen_ms > st->backward_ms) {
        tfj_child(ctx, "backward_frozen_ms", &at);
        char what[128];
        snprintf(what, sizeof what, "frozen time must not exceed backward_ms (%g)",
                 st->backward_ms);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "backward_frozen_ms"), what,
                        err);
    }
    if (st->backward_weight_frozen_ms > st->backward_weight_ms) {
        tfj_child(ctx, "backward_weight_frozen_ms", &at);
        char what[128];
        snprintf(what, sizeof what, "frozen time must not exceed backward_weight_ms (%g)",
                 st->backward_weight_ms);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "backward_weight_frozen_ms"),
                        what, err);
    }
    return 0;
}

/* index: s's actions by key (tf_schedule_index), or NULL. */
static int parse_override(const tfj_ctx *ctx, const cJSON *o, const tf_schedule *s,
                          const int *index, tf_action_time *a, tf_error *err)
{
    if (!cJSON_IsObject(o))
        return tfj_fail(ctx, o, "expected an object {stage, microbatch, type, ms}", err);
    int rc, rank;
    const char *type;
    if ((rc = tfj_check_fields(ctx, o, override_fields, err)) ||
        (rc = tfj_int(ctx, o, "stage", 1, 0, 0, s->stages - 1, &a->stage, err)) ||
        (rc = tfj_int(ctx, o, "microbatch", 1, 0, 0, s->microbatches - 1, &a->microbatch, err)) ||
        (rc = tfj_int(ctx, o, "rank", 0, -1, 0, s->ranks - 1, &rank, err)) ||
        (rc = tfj_string(ctx, o, "type", 1, NULL, &type, err)) ||
        (rc = tfj_number(ctx, o, "ms", 1, 0, 0, TF_MAX_DURATION_MS, &a->ms, err)) ||
        (rc = tfj_number(ctx, o, "frozen_ms", 0, -1, 0, TF_MAX_DURATION_MS, &a->frozen_ms, err)))
        return rc;
    tfj_ctx at;
    if (strlen(type) != 1 || tf_action_type_parse(type[0], &a->type) != 0) {
        tfj_child(ctx, "type", &at);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "type"),
                        "expected \"F\", \"B\", \"I\" or \"W\"", err);
    }
    if (tf_schedule_lookup(s, index, a->type, a->stage, a->microbatch) < 0) {
        return tfj_fail(ctx, o, "names an action the schedule does not have", err);
    }
    if (rank >= 0 && rank != s->stage_rank[a->stage]) {
        tfj_child(ctx, "rank", &at);
        char what[96];
        snprintf(what, sizeof what, "stage %d runs on rank %d", a->stage,
                 s->stage_rank[a->stage]);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "rank"), what, err);
    }
    if (a->frozen_ms > a->ms) {
        tfj_child(ctx, "frozen_ms", &at);
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "frozen_ms"),
                        "frozen time must not exceed ms", err);
    }
    return 0;
}

static void stage_uses(const tf_schedule *s, stage_use *use)
{
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        if (a->type == TF_ACT_B)
            use[a->stage].full_backward = 1;
        else if (a->type == TF_ACT_I || a->type == TF_ACT_W)
            use[a->stage].split_backward = 1;
    }
}

/* Finds the override list index of each action; rejects duplicates. */
static int check_overrides_unique(const tfj_ctx *ctx, const tf_profile *p, tf_error *err)
{
    const tf_schedule *s = &p->schedule;
    size_t n = (size_t)4 * s->stages * s->microbatches;
    int *seen = malloc(n * sizeof *seen);
    if (!seen)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", ctx->where);
    for (size_t i = 0; i < n; i++)
        seen[i] = -1;
    int rc = 0;
    for (int k = 0; k < p->n_overrides; k++) {
        const tf_action_time *a = &p->overrides[k];
        size_t key = ((size_t)a->type * s->stages + a->stage) * s->microbatches + a->microbatch;
        if (seen[key] >= 0) {
            rc = tf_fail(err, TF_EINVAL, "%s: %s.actions[%d]: repeats the action of actions[%d]",
                         ctx->where, ctx->path, k, seen[key]);
            break;
        }
        seen[key] = k;
    }
    free(seen);
    return rc;
}

/* The schedule of a profile: its explicit "order", else the built-in one
 * named by "schedule" for the shape given; p->schedule on success. */
static int parse_schedule(const tfj_ctx *ctx, const cJSON *root, tf_profile *p, tf_error *err)
{
    const cJSON *order;
    const char *name;
    int rc, ranks, spr, microbatches;
    if ((rc = tfj_array(ctx, root, "order", 0, &order, err)) ||
        (rc = tfj_string(ctx, root, "schedule", order == NULL, "custom", &name, err)))
        return rc;
    tfj_ctx at;
    if (!order && !tf_schedule_is_builtin(name)) {
        tfj_child(ctx, "schedule", &at);
        char what[200];
        snprintf(what, sizeof what,
                 "unknown schedule (built-in: %s; or give an explicit \"order\")",
                 tf_schedule_builtin_names());
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(root, "schedule"), what, err);
    }
    int default_spr = order ? 1 : tf_schedule_default_stages_per_rank(name);
    if ((rc = tfj_int(ctx, root, "ranks", 1, 0, 1, TF_MAX_RANKS, &ranks, err)) ||
        (rc = tfj_int(ctx, root, "stages_per_rank", 0, default_spr, 1, TF_MAX_STAGES_PER_RANK,
                      &spr, err)) ||
        (rc = tfj_int(ctx, root, "microbatches", 1, 0, 1, TF_MAX_MICROBATCHES, &microbatches,
                      err)))
        return rc;
    /* An explicit order has at least F and B per (stage, microbatch); its
     * cells are counted against the limit too. */
    int per_pair = !order && tf_schedule_splits_backward(name) ? 3 : 2;
    if (tf_schedule_check_size(ranks, spr, microbatches, per_pair, err)) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return tf_fail(err, TF_EINVAL, "%s: $: %s", ctx->where, why);
    }
    if ((rc = tfj_number(ctx, root, "microbatch_tokens", 0, 0, 0, HUGE_VAL, &p->microbatch_tokens,
                         err)) ||
        (rc = tfj_number(ctx, root, "p2p_ms", 0, 0, 0, TF_MAX_DURATION_MS, &p->p2p_ms, err)))
        return rc;
    if (!order) {
        if ((rc = tf_schedule_build(name, ranks, spr, microbatches, &p->schedule, err))) {
            char inner[sizeof err->msg];
            snprintf(inner, sizeof inner, "%s", err ? err->msg : "");
            return tf_fail(err, rc, "%s: $.schedule: %s", ctx->where, inner);
        }
        return 0;
    }
    if ((rc = parse_order(ctx, order, ranks, microbatches, &p->schedule, err)))
        return rc;
    snprintf(p->schedule.name, sizeof p->schedule.name, "%s", name);
    if (p->schedule.stages != ranks * spr) {
        tfj_child(ctx, "order", &at);
        return tf_fail(err, TF_EINVAL,
                       "%s: %s: uses %d stages, but ranks x stages_per_rank = %d x %d = %d",
                       ctx->where, at.path, p->schedule.stages, ranks, spr, ranks * spr);
    }
    return 0;
}

/* One shape field of a profile read for a given order: absent, or equal
 * to the order's value. */
static int agree_with_order(const tfj_ctx *ctx, const cJSON *root, const char *field, int value,
                            int max, const char *what, tf_error *err)
{
    int stated;
    int rc = tfj_int(ctx, root, field, 0, value, 1, max, &stated, err);
    if (rc || stated == value)
        return rc;
    tfj_ctx at;
    tfj_child(ctx, field, &at);
    char message[160];
    snprintf(message, sizeof message, "the order given (--schedule-csv) has %d %s", value, what);
    return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(root, field), message, err);
}

/* The schedule of a profile read for an order given from outside: the
 * order's own, whatever the profile names; shape fields it states must
 * agree.  Also the lag and tokens that parse_schedule reads. */
static int adopt_order(const tfj_ctx *ctx, const cJSON *root, const tf_schedule *order,
                       tf_profile *p, tf_error *err)
{
    int rc;
    if ((rc = agree_with_order(ctx, root, "ranks", order->ranks, TF_MAX_RANKS, "ranks", err)) ||
        (rc = agree_with_order(ctx, root, "stages_per_rank", order->stages_per_rank,
                               TF_MAX_STAGES_PER_RANK, "stages per rank", err)) ||
        (rc = agree_with_order(ctx, root, "microbatches", order->microbatches,
                               TF_MAX_MICROBATCHES, "microbatches", err)) ||
        (rc = tfj_number(ctx, root, "microbatch_tokens", 0, 0, 0, HUGE_VAL, &p->microbatch_tokens,
                         err)) ||
        (rc = tfj_number(ctx, root, "p2p_ms", 0, 0, 0, TF_MAX_DURATION_MS, &p->p2p_ms, err)))
        return rc;
    if (tf_schedule_copy(order, &p->schedule))
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", ctx->where);
    return 0;
}

/* "stages": one entry of timings per stage, with the fields the
 * schedule's action types need. */
static int parse_stages(const tfj_ctx *ctx, const cJSON *root, const stage_use *use,
                        tf_profile *p, tf_error *err)
{
    const int stages = p->schedule.stages;
    int any_memory = 0;
    const cJSON *stage_list;
    int rc = tfj_array(ctx, root, "stages", 1, &stage_list, err);
    if (rc)
        return rc;
    tfj_ctx stages_at;
    tfj_child(ctx, "stages", &stages_at);
    if (cJSON_GetArraySize(stage_list) != stages)
        return tf_fail(err, TF_EINVAL,
                       "%s: %s: expected ranks x stages_per_rank = %d entries, found %d",
                       ctx->where, stages_at.path, stages, cJSON_GetArraySize(stage_list));
    int s = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, stage_list)
    {
        tfj_ctx at;
        tfj_index(&stages_at, s, &at);
        int given = 0;
        tf_aux_list aux = {p->aux, p->n_aux};
        if ((rc = parse_stage(&at, entry, use[s], &p->stages[s], err)) ||
            (rc = tf_stage_memory_parse(&at, entry, &p->memory[s], &given, err)))
            return rc;
        rc = tf_aux_list_parse(&at, entry, "aux", s, stages, &aux, err);
        p->aux = aux.work;
        p->n_aux = aux.n;
        if (rc)
            return rc;
        any_memory |= given;
        s++;
    }
    if (!any_memory) {
        free(p->memory);
        p->memory = NULL;
    }
    return 0;
}

/* The caps and the stage timings. */
static int parse_stage_times(const tfj_ctx *ctx, const cJSON *root, tf_profile *p,
                             tf_error *err)
{
    const int stages = p->schedule.stages;
    p->max_freeze_ratio = calloc((size_t)stages, sizeof *p->max_freeze_ratio);
    p->stages = calloc((size_t)stages, sizeof *p->stages);
    p->memory = calloc((size_t)stages + 1, sizeof *p->memory);
    stage_use *use = calloc((size_t)stages, sizeof *use);
    int rc;
    if (!p->max_freeze_ratio || !p->stages || !p->memory || !use)
        rc = tf_fail(err, TF_ENOMEM, "%s: out of memory", ctx->where);
    else if (!(rc = parse_caps(ctx, root, stages, p->max_freeze_ratio, err))) {
        stage_uses(&p->schedule, use);
        rc = parse_stages(ctx, root, use, p, err);
    }
    free(use);
    return rc;
}

/* "actions": measured durations of single actions, each named once. */
static int parse_overrides(const tfj_ctx *ctx, const cJSON *root, tf_profile *p, tf_error *err)
{
    const cJSON *actions;
    int rc = tfj_array(ctx, root, "actions", 0, &actions, err);
    if (rc || !actions)
        return rc;
    tfj_ctx actions_at;
    tfj_child(ctx, "actions", &actions_at);
    int n = cJSON_GetArraySize(actions);
    p->overrides = calloc((size_t)n + 1, sizeof *p->overrides);
    if (!p->overrides)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", ctx->where);
    /* Without memory for the index each action is searched for. */
    int *index = tf_schedule_index(&p->schedule);
    const cJSON *a;
    cJSON_ArrayForEach(a, actions)
    {
        tfj_ctx at;
        tfj_index(&actions_at, p->n_overrides, &at);
        if ((rc = parse_override(&at, a, &p->schedule, index, &p->overrides[p->n_overrides],
                                 err)))
            break;
        p->n_overrides++;
    }
    free(index);
    return rc ? rc : check_overrides_unique(ctx, p, err);
}

/* Where pair t is in s: the index of its forward, which must begin a pair
 * with t's backward; -1 otherwise. */
static int find_pair(const tf_schedule *s, const int *index, const tf_pair_time *t)
{
    int i = tf_schedule_lookup(s, index, TF_ACT_F, t->forward.stage, t->forward.microbatch);
    if (i < 0 || i + 1 >= s->n_actions || s->actions[i].pair != TF_PAIR_FIRST)
        return -1;
    const tf_action *b = &s->actions[i + 1];
    return b->type == t->backward.type && b->stage == t->backward.stage &&
                   b->microbatch == t->backward.microbatch
               ? i
               : -1;
}

/* One entry of "pairs": {"pair": "(0F7;7B3)OVERLAP_F_B", "ms", "frozen_ms"}. */
static int parse_pair_time(const tfj_ctx *ctx, const cJSON *o, const tf_schedule *s,
                           const int *index, tf_pair_time *t, tf_error *err)
{
    if (!cJSON_IsObject(o))
        return tfj_fail(ctx, o, "expected an object {\"pair\": \"(0F7;7B3)OVERLAP_F_B\", ms}",
                        err);
    const char *name;
    int rc, count;
    if ((rc = tfj_check_fields(ctx, o, pair_fields, err)) ||
        (rc = tfj_string(ctx, o, "pair", 1, NULL, &name, err)) ||
        (rc = tfj_number(ctx, o, "ms", 1, 0, 0, TF_MAX_DURATION_MS, &t->ms, err)) ||
        (rc = tfj_number(ctx, o, "frozen_ms", 0, -1, 0, TF_MAX_DURATION_MS, &t->frozen_ms, err)))
        return rc;
    tfj_ctx at;
    tfj_child(ctx, "pair", &at);
    tf_action a[2];
    if (tf_cell_parse(name, a, &count, NULL) != 0 || count != 2)
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "pair"),
                        "expected an overlapped pair like \"(0F7;7B3)OVERLAP_F_B\"", err);
    t->forward = a[0];
    t->backward = a[1];
    if (find_pair(s, index, t) < 0)
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "pair"),
                        "names no overlapped pair of the schedule", err);
    tfj_child(ctx, "frozen_ms", &at);
    if (t->frozen_ms > t->ms)
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "frozen_ms"),
                        "frozen time must not exceed ms", err);
    if (t->frozen_ms >= 0 && t->frozen_ms != t->ms && t->backward.type != TF_ACT_B)
        return tfj_fail(&at, cJSON_GetObjectItemCaseSensitive(o, "frozen_ms"),
                        "the pair's backward is an I, which has no weights to freeze", err);
    return 0;
}

/* "pairs": measured durations of overlapped pairs, each named once. */
static int parse_pairs(const tfj_ctx *ctx, const cJSON *root, tf_profile *p, tf_error *err)
{
    const cJSON *pairs;
    int rc = tfj_array(ctx, root, "pairs", 0, &pairs, err);
    if (rc || !pairs)
        return rc;
    tfj_ctx pairs_at;
    tfj_child(ctx, "pairs", &pairs_at);
    p->pairs = calloc((size_t)cJSON_GetArraySize(pairs) + 1, sizeof *p->pairs);
    if (!p->pairs)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", ctx->where);
    int *index = tf_schedule_index(&p->schedule); /* NULL: search instead */
    const cJSON *o;
    cJSON_ArrayForEach(o, pairs)
    {
        tfj_ctx at;
        tf_pair_time *t = &p->pairs[p->n_pairs];
        tfj_index(&pairs_at, p->n_pairs, &at);
        if ((rc = parse_pair_time(&at, o, &p->schedule, index, t, err)))
            break;
        for (int k = 0; k < p->n_pairs && !rc; k++)
            if (find_pair(&p->schedule, index, &p->pairs[k]) ==
                find_pair(&p->schedule, index, t))
                rc = tf_fail(err, TF_EINVAL, "%s: %s: repeats the pair of pairs[%d]",
                             ctx->where, at.path, k);
        if (rc)
            break;
        p->n_pairs++;
    }
    free(index);
    return rc;
}

/* "memory_limit_bytes": one number for every rank, or one per rank; only
 * with memory fields to hold to it. */
static int parse_memory_limit(const tfj_ctx *ctx, const cJSON *root, tf_profile *p,
                              tf_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "memory_limit_bytes");
    if (!v || cJSON_IsNull(v))
        return 0;
    tfj_ctx at;
    tfj_child(ctx, "memory_limit_bytes", &at);
    if (!p->memory)
        return tfj_fail(&at, v, "a memory limit needs the stages' memory fields (static_bytes, "
                        "activation_bytes)", err);
    return tf_memory_limit_parse(&at, v, p->schedule.ranks, &p->memory_limit, err);
}

/* A profile, of its own schedule (order NULL) or of a given order. */
static int parse_profile_of(const cJSON *root, const char *where, const tf_schedule *order,
                            tf_profile *p, tf_error *err)
{
    tfj_ctx ctx = {.where = where, .path = "$"};
    int rc, version;
    if ((rc = tfj_check_document(&ctx, root, &profile_format, &version, err)) ||
        (rc = order ? adopt_order(&ctx, root, order, p, err) : parse_schedule(&ctx, root, p, err)) ||
        (rc = parse_stage_times(&ctx, root, p, err)) ||
        (rc = parse_overrides(&ctx, root, p, err)) ||
        (rc = parse_memory_limit(&ctx, root, p, err)))
        return rc;
    return parse_pairs(&ctx, root, p, err);
}

int tf_profile_parse_for(const char *json, const char *where, const tf_schedule *order,
                         tf_profile *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    cJSON *root;
    int rc = tfj_parse(json, where, &root, err);
    if (rc)
        return rc;
    rc = parse_profile_of(root, where, order, out, err);
    cJSON_Delete(root);
    if (rc)
        tf_profile_free(out);
    return rc;
}

int tf_profile_parse(const char *json, const char *where, tf_profile *out, tf_error *err)
{
    return tf_profile_parse_for(json, where, NULL, out, err);
}

int tf_profile_load_for(const char *path, const tf_schedule *order, tf_profile *out,
                        tf_error *err)
{
    memset(out, 0, sizeof *out);
    char *text;
    int rc = tf_read_file_limit(path, TF_MAX_PROFILE_BYTES, &text, NULL, err);
    if (rc)
        return rc;
    rc = tf_profile_parse_for(text, path, order, out, err);
    free(text);
    return rc;
}

int tf_profile_load(const char *path, tf_profile *out, tf_error *err)
{
    return tf_profile_load_for(path, NULL, out, err);
}

/* A pair's measured time t over its two actions, max_ms[0..1] and
 * min_ms[0..1] holding their own times (profile.h says how). */
static void split_pair_time(const tf_pair_time *t, double *max_ms, double *min_ms)
{
    double saving = max_ms[1] - min_ms[1];
    double frozen = t->frozen_ms >= 0 ? t->frozen_ms : fmax(0.0, t->ms - saving);
    double forward = fmin(max_ms[0], frozen);
    max_ms[0] = min_ms[0] = forward;
    max_ms[1] = t->ms - forward;
    min_ms[1] = frozen - forward;
}

void tf_profile_durations(const tf_profile *p, double *max_ms, double *min_ms)
{
    const tf_schedule *s = &p->schedule;
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        const tf_stage_times *st = &p->stages[a->stage];
        switch (a->type) {
        case TF_ACT_F: max_ms[i] = min_ms[i] = st->forward_ms; break;
        case TF_ACT_B:
            max_ms[i] = st->backward_ms;
            min_ms[i] = st->backward_frozen_ms;
            break;
        case TF_ACT_I: max_ms[i] = min_ms[i] = st->backward_input_ms; break;
        case TF_ACT_W:
            max_ms[i] = st->backward_weight_ms;
            min_ms[i] = st->backward_weight_frozen_ms;
            break;
        case TF_ACT_R: max_ms[i] = min_ms[i] = 0.0; break; /* planned, never profiled */
        }
    }
    if (p->n_overrides == 0 && p->n_pairs == 0)
        return;
    /* Overrides apply in O(n) through an index; without memory for it each
     * is searched for. */
    int *index = tf_schedule_index(s);
    for (int k = 0; k < p->n_overrides; k++) {
        const tf_action_time *o = &p->overrides[k];
        int i = tf_schedule_lookup(s, index, o->type, o->stage, o->microbatch);
        if (i < 0)
            continue;
        max_ms[i] = o->ms;
        if (o->type != TF_ACT_B && o->type != TF_ACT_W)
            min_ms[i] = o->ms;
        else if (o->frozen_ms >= 0)
            min_ms[i] = o->frozen_ms;
        else
            min_ms[i] = fmin(min_ms[i], o->ms); /* the stage's frozen time, capped */
    }
    for (int k = 0; k < p->n_pairs; k++) {
        int i = find_pair(s, index, &p->pairs[k]);
        if (i >= 0)
            split_pair_time(&p->pairs[k], max_ms + i, min_ms + i);
    }
    free(index);
}

/* Does s have exactly the order of the built-in schedule of its name?  If
 * not, the profile must carry its order. */
static int matches_builtin(const tf_schedule *s)
{
    if (!tf_schedule_is_builtin(s->name))
        return 0;
    tf_schedule builtin;
    if (tf_schedule_build(s->name, s->ranks, s->stages_per_rank, s->microbatches, &builtin, NULL))
        return 0;
    int same = builtin.n_actions == s->n_actions;
    for (int i = 0; same && i < s->n_actions; i++) {
        const tf_action *a = &builtin.actions[i], *b = &s->actions[i];
        same = a->type == b->type && a->stage == b->stage && a->microbatch == b->microbatch &&
               a->rank == b->rank && a->pair == b->pair;
    }
    tf_schedule_free(&builtin);
    return same;
}

/* "pairs": the measured pair durations, when there are any. */
static void add_pairs(cJSON *root, const tf_profile *p)
{
    if (p->n_pairs == 0)
        return;
    cJSON *pairs = cJSON_AddArrayToObject(root, "pairs");
    for (int k = 0; k < p->n_pairs; k++) {
        const tf_pair_time *t = &p->pairs[k];
        char name[TF_CELL_MAX];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "pair", tf_pair_format(&t->forward, &t->backward, name));
        tfj_add_number(o, "ms", t->ms);
        if (t->frozen_ms >= 0)
            tfj_add_number(o, "frozen_ms", t->frozen_ms);
        cJSON_AddItemToArray(pairs, o);
    }
}

int tf_profile_to_json(const tf_profile *p, char **json, tf_error *err)
{
    const tf_schedule *s = &p->schedule;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    cJSON_AddStringToObject(root, "format", "tf-profile");
    cJSON_AddNumberToObject(root, "version", PROFILE_VERSION);
    cJSON_AddStringToObject(root, "schedule", s->name);
    cJSON_AddNumberToObject(root, "ranks", s->ranks);
    cJSON_AddNumberToObject(root, "stages_per_rank", s->stages_per_rank);
    cJSON_AddNumberToObject(root, "microbatches", s->microbatches);
    tfj_add_number(root, "microbatch_tokens", p->microbatch_tokens);
    tfj_add_number(root, "p2p_ms", p->p2p_ms);
    int same_cap = 1;
    for (int k = 1; k < s->stages; k++)
        same_cap &= p->max_freeze_ratio[k] == p->max_freeze_ratio[0];
    if (same_cap) {
        tfj_add_number(root, "max_freeze_ratio", s->stages ? p->max_freeze_ratio[0] : TF_DEFAULT_CAP);
    } else {
        cJSON *caps = cJSON_AddArrayToObject(root, "max_freeze_ratio");
        for (int k = 0; k < s->stages; k++)
            cJSON_AddItemToArray(caps, cJSON_CreateNumber(p->max_freeze_ratio[k]));
    }
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    for (int k = 0; k < s->stages; k++) {
        const tf_stage_times *st = &p->stages[k];
        cJSON *o = cJSON_CreateObject();
        tfj_add_number(o, "forward_ms", st->forward_ms);
        tfj_add_number(o, "backward_ms", st->backward_ms);
        tfj_add_number(o, "backward_frozen_ms", st->backward_frozen_ms);
        tfj_add_number(o, "backward_input_ms", st->backward_input_ms);
        tfj_add_number(o, "backward_weight_ms", st->backward_weight_ms);
        tfj_add_number(o, "backward_weight_frozen_ms", st->backward_weight_frozen_ms);
        tfj_add_number(o, "parameters", st->parameters);
        if (p->memory)
            tf_stage_memory_to_json(&p->memory[k], o);
        tf_aux_list_to_json(p->aux, p->n_aux, k, o, "aux");
        cJSON_AddItemToArray(stages, o);
    }
    if (p->memory_limit)
        tf_memory_limit_to_json(root, "memory_limit_bytes", p->memory_limit, s->ranks);
    if (p->n_overrides > 0) {
        cJSON *actions = cJSON_AddArrayToObject(root, "actions");
        for (int k = 0; k < p->n_overrides; k++) {
            const tf_action_time *a = &p->overrides[k];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "rank", s->stage_rank[a->stage]);
            cJSON_AddNumberToObject(o, "stage", a->stage);
            cJSON_AddNumberToObject(o, "microbatch", a->microbatch);
            char type[2] = {tf_action_letter(a->type), '\0'};
            cJSON_AddStringToObject(o, "type", type);
            tfj_add_number(o, "ms", a->ms);
            if (a->frozen_ms >= 0)
                tfj_add_number(o, "frozen_ms", a->frozen_ms);
            cJSON_AddItemToArray(actions, o);
        }
    }
    add_pairs(root, p);
    if (!matches_builtin(s)) {
        cJSON *order = cJSON_AddArrayToObject(root, "order");
        for (int r = 0; r < s->ranks; r++) {
            cJSON *row = cJSON_CreateArray();
            for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1];) {
                char buf[TF_CELL_MAX];
                i += tf_schedule_format_cell(s, i, buf);
                cJSON_AddItemToArray(row, cJSON_CreateString(buf));
            }
            cJSON_AddItemToArray(order, row);
        }
    }
    *json = tfj_print_document(root);
    cJSON_Delete(root);
    if (!*json)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    return 0;
}

int tf_profile_save(const tf_profile *p, const char *path, tf_error *err)
{
    char *json;
    int rc = tf_profile_to_json(p, &json, err);
    if (rc)
        return rc;
    rc = tf_write_file_atomic(path, json, strlen(json), err);
    free(json);
    return rc;
}

void tf_profile_free(tf_profile *p)
{
    tf_schedule_free(&p->schedule);
    free(p->memory);
    free(p->memory_limit);
    free(p->aux);
    free(p->max_freeze_ratio);
    free(p->stages);
    free(p->overrides);
    free(p->pairs);
    memset(p, 0, sizeof *p);
}
