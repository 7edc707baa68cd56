/* study_model.c - from a study configuration to a profile and a result row:
 * the sweep's configurations, the layer-to-stage split, the profile, and
 * one planner run. */
#include "study.h"
#include "study_bytes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/schedule.h"

int tf_study_default_stages_per_rank(const char *schedule)
{
    return tf_schedule_default_stages_per_rank(schedule);
}

/* Does the schedule accept more than one stages_per_rank value? */
static int varies_stages_per_rank(const char *schedule)
{
    return strcmp(schedule, "Interleaved1F1B") == 0 || strcmp(schedule, "LoopedBFS") == 0 ||
           strcmp(schedule, "InterleavedZeroBubble") == 0;
}

int tf_study_configs(const tf_study *s, tf_study_config **configs, int *n, tf_error *err)
{
    *configs = NULL;
    *n = 0;
    int spr_count = s->n_stages_per_rank ? s->n_stages_per_rank : 1;
    const int n_rc = s->n_recompute ? s->n_recompute : 1;
    const int n_sp = s->n_sequence_parallel ? s->n_sequence_parallel : 1;
    size_t most = (size_t)s->n_schedule * s->n_ranks * spr_count * s->n_microbatches *
                  s->n_max_freeze_ratio * s->n_p2p_ms * n_rc * n_sp;
    tf_study_config *c = calloc(most + 1, sizeof *c);
    if (!c)
        return tf_fail(err, TF_ENOMEM, "out of memory for %zu configurations", most);
    int count = 0;
    for (int a = 0; a < s->n_schedule; a++) {
        const char *name = s->schedule[a];
        /* Fixed-shape schedules run once with their own value. */
        int own = varies_stages_per_rank(name) && s->n_stages_per_rank;
        int n_spr = own ? s->n_stages_per_rank : 1;
        for (int b = 0; b < s->n_ranks; b++)
            for (int k = 0; k < n_spr; k++)
                for (int m = 0; m < s->n_microbatches; m++)
                    for (int r = 0; r < s->n_max_freeze_ratio; r++)
                        for (int p = 0; p < s->n_p2p_ms; p++)
                            for (int q = 0; q < n_sp * n_rc; q++) {
                                tf_study_config *x = &c[count++];
                                snprintf(x->schedule, sizeof x->schedule, "%s", name);
                                x->ranks = s->ranks[b];
                                x->stages_per_rank =
                                    own ? s->stages_per_rank[k]
                                        : tf_study_default_stages_per_rank(name);
                                x->microbatches = s->microbatches[m];
                                x->max_freeze_ratio = s->max_freeze_ratio[r];
                                x->p2p_ms = s->p2p_ms[p];
                                x->sequence_parallel =
                                    s->has_bytes ? s->sequence_parallel[q / n_rc] : 0;
                                x->recompute = s->has_bytes ? s->recompute[q % n_rc] : -1;
                            }
    }
    *configs = c;
    *n = count;
    return 0;
}

/* The cost the split balances: forward plus full backward. */
static double layer_cost(const tf_stage_times *t)
{
    return t->forward_ms + t->backward_ms;
}

int tf_study_partition(const tf_study *s, int stages, int *first_layer, tf_error *err)
{
    const int L = s->layers;
    if (stages < 1 || stages > L)
        return tf_fail(err, TF_EINVAL,
                       "%d stages need at least %d layers, the model has %d (each stage holds "
                       "at least one layer)",
                       stages, stages, L);
    /* prefix[j] = cost of layers 0..j-1; a stage's cost is a difference,
     * plus the embedding on the first and the head on the last stage. */
    double *prefix = malloc(((size_t)L + 1) * sizeof *prefix);
    /* Two DP tables over (stages used, layers covered), rolling by stage. */
    size_t cells = (size_t)(stages + 1) * (size_t)(L + 1);
    double *worst = malloc(cells * sizeof *worst);
    double *squares = malloc(cells * sizeof *squares);
    int *cut = malloc(cells * sizeof *cut);
    if (!prefix || !worst || !squares || !cut) {
        free(prefix);
        free(worst);
        free(squares);
        free(cut);
        return tf_fail(err, TF_ENOMEM, "out of memory splitting %d layers", L);
    }
    /* Allowed layer counts per stage. */
    const int fewest = s->balanced_partition ? 1 : L / stages;
    const int most = s->balanced_partition ? L : (L + stages - 1) / stages;
    prefix[0] = 0.0;
    for (int j = 0; j < L; j++)
        prefix[j + 1] = prefix[j] + layer_cost(&s->layer[j]);
    const double head = layer_cost(&s->head), embedding = layer_cost(&s->embedding);
#define CELL(k, j) ((size_t)(k) * (size_t)(L + 1) + (size_t)(j))
#define STAGE_COST(i, j) \
    (prefix[j] - prefix[i] + ((i) == 0 ? embedding : 0.0) + ((j) == L ? head : 0.0))

    /* Pass 1: the smallest possible largest stage cost. */
    for (size_t c = 0; c < cells; c++)
        worst[c] = HUGE_VAL;
    worst[CELL(0, 0)] = 0.0;
    for (int k = 1; k <= stages; k++)
        for (int j = k; j <= L - (stages - k); j++)
            for (int i = k - 1; i < j; i++) {
                if (j - i < fewest || j - i > most)
                    continue;
                double w = fmax(worst[CELL(k - 1, i)], STAGE_COST(i, j));
                if (w < worst[CELL(k, j)])
                    worst[CELL(k, j)] = w;
            }
    /* A relative slack so that splits equal up to rounding count as equal. */
    const double bound = worst[CELL(stages, L)] * (1.0 + 1e-9) + 1e-12;

    /* Pass 2: among splits within the bound, the least sum of squared
     * stage costs, i.e. the most even.  Scanning i upwards and replacing
     * only on a clear improvement keeps the last stage as long as possible
     * on ties, so later stages get the extra layers. */
    for (size_t c = 0; c < cells; c++) {
        squares[c] = HUGE_VAL;
        cut[c] = -1; /* not reachable within the bound */
    }
    squares[CELL(0, 0)] = 0.0;
    for (int k = 1; k <= stages; k++)
        for (int j = k; j <= L - (stages - k); j++)
            for (int i = k - 1; i < j; i++) {
                if (j - i < fewest || j - i > most)
                    continue;
                double cost = STAGE_COST(i, j);
                if (cost > bound || (k > 1 && cut[CELL(k - 1, i)] < 0))
                    continue;
                double q = squares[CELL(k - 1, i)] + cost * cost;
                double best = squares[CELL(k, j)];
                if (cut[CELL(k, j)] < 0 || q < best - 1e-9 * fabs(best)) {
                    squares[CELL(k, j)] = q;
                    cut[CELL(k, j)] = i;
                }
            }
    /* Costs are bounded by the parser, so the best split is always found;
     * a failure here is a bug, reported rather than followed off the array. */
    int found = cut[CELL(stages, L)] >= 0;
    first_layer[stages] = L;
    for (int k = stages, j = L; found && k >= 1; k--) {
        j = cut[CELL(k, j)];
        found = j >= 0;
        first_layer[k - 1] = j;
    }
#undef CELL
#undef STAGE_COST
    free(prefix);
    free(worst);
    free(squares);
    free(cut);
    if (!found)
        return tf_fail(err, TF_EINVAL, "layer split: no split of %d layers into %d stages "
                                       "within the bound (layer times too large?)",
                       L, stages);
    return 0;
}

/* Adds an embedding/head cost to a stage.  For split schedules, an extra
 * cost given without I/W times counts as weight-gradient work: an
 * embedding's backward is all dW, and it keeps the stage's I + W equal to
 * its B. */
static void add_extra(tf_stage_times *st, const tf_stage_times *x)
{
    st->forward_ms += x->forward_ms;
    st->backward_ms += x->backward_ms;
    st->backward_frozen_ms += x->backward_frozen_ms;
    st->parameters += x->parameters;
    if (x->backward_input_ms + x->backward_weight_ms > 0) {
        st->backward_input_ms += x->backward_input_ms;
        st->backward_weight_ms += x->backward_weight_ms;
        st->backward_weight_frozen_ms += x->backward_weight_frozen_ms;
    } else {
        st->backward_weight_ms += x->backward_ms;
        st->backward_weight_frozen_ms += x->backward_frozen_ms;
    }
}

/* With the study's bytes (shape or measured): every stage's bytes into
 * out->memory, the layers' activations alone into *layers (malloc'd,
 * caller frees; NULL:
 * not wanted), each rank's limit (gpu memory less headroom) into
 * out->memory_limit, and full recomputation's time into the backwards. */
static int add_memory(const tf_study *s, const tf_study_config *c, const int *first,
                      tf_profile *out, tf_stage_memory **layers, tf_error *err)
{
    const int stages = out->schedule.stages, ranks = out->schedule.ranks;
    out->memory = calloc((size_t)stages, sizeof *out->memory);
    if (layers)
        *layers = calloc((size_t)stages, sizeof **layers);
    if (s->gpu_memory_bytes > 0)
        out->memory_limit = calloc((size_t)ranks, sizeof *out->memory_limit);
    if (!out->memory || (layers && !*layers) || (s->gpu_memory_bytes > 0 && !out->memory_limit))
        return tf_fail(err, TF_ENOMEM, "out of memory for %d stages' bytes", stages);
    study_stage_bytes(s, c, first, stages, 0, out->memory);
    if (layers)
        study_stage_bytes(s, c, first, stages, 1, *layers);
    for (int r = 0; out->memory_limit && r < ranks; r++)
        out->memory_limit[r] = s->gpu_memory_bytes - s->memory_headroom_bytes;
    if (c->recompute == TF_RECOMPUTE_FULL)
        study_full_recompute_times(s, first, stages, out->stages);
    return 0;
}

/* tf_study_make_profile; also reports the split in *layers_min/max and,
 * with bytes, the layers' bytes alone in *layers (study_stage_bytes). */
static int build_profile(const tf_study *s, const tf_study_config *c, tf_profile *out,
                         int *layers_min, int *layers_max, tf_stage_memory **layers,
                         tf_error *err)
{
    if (layers)
        *layers = NULL;
    memset(out, 0, sizeof *out);
    int rc = tf_schedule_build(c->schedule, c->ranks, c->stages_per_rank, c->microbatches,
                               &out->schedule, err);
    if (rc)
        return rc;
    const int stages = out->schedule.stages;
    int *first = malloc(((size_t)stages + 1) * sizeof *first);
    out->stages = calloc((size_t)stages, sizeof *out->stages);
    out->max_freeze_ratio = calloc((size_t)stages, sizeof *out->max_freeze_ratio);
    if (!first || !out->stages || !out->max_freeze_ratio) {
        free(first);
        tf_profile_free(out);
        return tf_fail(err, TF_ENOMEM, "out of memory for %d stages", stages);
    }
    if ((rc = tf_study_partition(s, stages, first, err))) {
        free(first);
        tf_profile_free(out);
        return rc;
    }
    for (int k = 0; k < stages; k++) {
        tf_stage_times *st = &out->stages[k];
        for (int i = first[k]; i < first[k + 1]; i++) {
            const tf_stage_times *t = &s->layer[i];
            st->forward_ms += t->forward_ms;
            st->backward_ms += t->backward_ms;
            st->backward_frozen_ms += t->backward_frozen_ms;
            st->backward_input_ms += t->backward_input_ms;
            st->backward_weight_ms += t->backward_weight_ms;
            st->backward_weight_frozen_ms += t->backward_weight_frozen_ms;
            st->parameters += t->parameters;
        }
        if (k == 0)
            add_extra(st, &s->embedding);
        if (k == stages - 1)
            add_extra(st, &s->head);
        /* Sums of per-layer frozen <= full times can lose that order to
         * rounding; the profile contract needs it exactly. */
        st->backward_frozen_ms = fmin(st->backward_frozen_ms, st->backward_ms);
        st->backward_weight_frozen_ms = fmin(st->backward_weight_frozen_ms,
                                             st->backward_weight_ms);
        out->max_freeze_ratio[k] = c->max_freeze_ratio;
    }
    if (s->has_bytes && (rc = add_memory(s, c, first, out, layers, err))) {
        free(first);
        if (layers) {
            free(*layers);
            *layers = NULL;
        }
        tf_profile_free(out);
        return rc;
    }
    *layers_min = s->layers;
    *layers_max = 0;
    for (int k = 0; k < stages; k++) {
        int count = first[k + 1] - first[k];
        *layers_min = count < *layers_min ? count : *layers_min;
        *layers_max = count > *layers_max ? count : *layers_max;
    }
    free(first);
    out->microbatch_tokens = s->microbatch_tokens;
    out->p2p_ms = c->p2p_ms;
    return 0;
}

int tf_study_make_profile(const tf_study *s, const tf_study_config *c, tf_profile *out,
                          tf_error *err)
{
    int layers_min, layers_max;
    return build_profile(s, c, out, &layers_min, &layers_max, NULL, err);
}

/* Idle share of the ranks' time: 1 - busy / (ranks x batch time). */
static double bubble_ratio(const tf_plan *plan, int planned)
{
    double batch = planned ? plan->batch_ms_planned : plan->batch_ms_unfrozen;
    if (!(batch > 0))
        return 0.0;
    double busy = 0.0;
    for (int i = 0; i < plan->schedule.n_actions; i++)
        busy += planned ? plan->actions[i].ms : plan->actions[i].max_ms;
    double ratio = 1.0 - busy / (plan->schedule.ranks * batch);
    return ratio > 0.0 ? ratio : 0.0;
}

void tf_study_solve(const tf_study *s, const tf_study_config *c, tf_objective objective,
                    tf_study_row *row)
{
    tf_study_solve_with(s, c, objective, TF_SOLVER_AUTO, row);
}

/* Fills the row's time figures from a plan. */
static void fill_times(const tf_plan *plan, tf_study_row *row)
{
    row->batch_ms_unfrozen = plan->batch_ms_unfrozen;
    row->batch_ms_all_frozen = plan->batch_ms_all_frozen;
    row->batch_ms_planned = plan->batch_ms_planned;
    row->speedup = plan->speedup;
    row->bubble_ratio_unfrozen = bubble_ratio(plan, 0);
    row->bubble_ratio_planned = bubble_ratio(plan, 1);
    row->mean_freeze_ratio = plan->freeze_ratio_mean;
    row->tokens_per_s_unfrozen = plan->tokens_per_s_unfrozen;
    row->tokens_per_s_planned = plan->tokens_per_s_planned;
    row->lp_variables = plan->solver_variables;
    row->lp_constraints = plan->solver_constraints;
    row->solve_seconds = plan->solver_seconds;
    snprintf(row->solver, sizeof row->solver, "%s", plan->solver_name);
}

/* Plans the profile under its memory limit; when no plan fits (TF_EINVAL,
 * the only reason the planner refuses a profile the study built), plans it
 * without one and marks the row as not fitting. */
static int plan_within_limit(tf_profile *profile, const tf_plan_options *options, tf_plan *plan,
                             tf_study_row *row, tf_error *err)
{
    row->fits = profile->memory_limit ? 1 : -1;
    int rc = tf_plan_from_profile(profile, options, plan, err);
    if (rc != TF_EINVAL || !profile->memory_limit)
        return rc;
    double *limit = profile->memory_limit;
    profile->memory_limit = NULL;
    row->fits = 0;
    rc = tf_plan_from_profile(profile, options, plan, err);
    profile->memory_limit = limit;
    return rc;
}

void tf_study_solve_with(const tf_study *s, const tf_study_config *c, tf_objective objective,
                         tf_solver solver, tf_study_row *row)
{
    memset(row, 0, sizeof *row);
    row->config = *c;
    row->fits = -1;
    tf_error err = {0};
    tf_profile profile;
    tf_stage_memory *layers = NULL;
    int rc = build_profile(s, c, &profile, &row->layers_per_stage_min,
                           &row->layers_per_stage_max, &layers, &err);
    if (rc) {
        row->status = rc == TF_EINVAL ? TF_STUDY_SKIPPED : TF_STUDY_FAILED;
        snprintf(row->reason, sizeof row->reason, "%s", err.msg[0] ? err.msg : tf_strerror(rc));
        return;
    }
    row->stages = profile.schedule.stages;

    tf_plan_options options;
    tf_plan_options_init(&options);
    options.objective = objective;
    options.solver = solver;
    options.control.time_limit_s = TF_STUDY_TIME_LIMIT_S;
    tf_plan plan;
    rc = plan_within_limit(&profile, &options, &plan, row, &err);
    tf_profile_free(&profile);
    if (!rc && layers)
        rc = study_memory_figures(&plan, layers, row, &err);
    free(layers);
    if (rc) {
        tf_plan_free(&plan); /* zeroed when the planner failed */
        row->status = TF_STUDY_FAILED;
        snprintf(row->reason, sizeof row->reason, "%s", err.msg[0] ? err.msg : tf_strerror(rc));
        return;
    }
    row->status = TF_STUDY_SOLVED;
    fill_times(&plan, row);
    tf_plan_free(&plan);
}
