/* plan.c - a plan's figures from its durations and start times, the
 * summary tf-plan prints, and freeing.  Files: plan_json.c; the planner,
 * which makes a plan from a profile: pipeline/plan_from_profile.c. */
#include "plan_internal.h"
#include "freezable.h"
#include "tf/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double tokens_per_s(double microbatch_tokens, int microbatches, double batch_ms)
{
    if (microbatch_tokens <= 0 || batch_ms <= 0)
        return 0.0;
    return microbatch_tokens * microbatches / (batch_ms / 1000.0);
}

double tf_plan_action_unfrozen_ms(const tf_plan_action *a)
{
    return a->action.type == TF_ACT_R ? 0.0 : a->max_ms;
}

int tf_plan_memory_model(const tf_plan *plan, tf_memory_model *out, tf_error *err)
{
    tf_memory_options o = {plan->freeze_saves_memory, plan->max_freeze_ratio};
    return tf_memory_model_build(&plan->schedule, plan->memory, &o, out, err);
}

/* The idle windows of rank r under the plan's start times and durations,
 * into pr (bubbles allocated here), and its idle time. */
static int fill_bubbles(tf_plan *plan, int r, tf_plan_rank *pr)
{
    const tf_schedule *s = &plan->schedule;
    const int first = s->rank_offset[r], last = s->rank_offset[r + 1];
    const double batch = plan->batch_ms_planned, tiny = 1e-9 * (batch > 1.0 ? batch : 1.0);
    pr->bubbles = malloc(((size_t)2 * (last - first) + 2) * sizeof *pr->bubbles);
    if (!pr->bubbles)
        return TF_ENOMEM;
    double free_from = 0.0, busy = 0.0, busy_unfrozen = 0.0;
    for (int i = first; i <= last; i++) {
        /* The rank runs its actions in order, each after the one before. */
        double next = i < last ? plan->actions[i].start_ms : batch;
        if (next - free_from > tiny) {
            pr->bubbles[2 * pr->n_bubbles] = free_from;
            pr->bubbles[2 * pr->n_bubbles + 1] = next;
            pr->n_bubbles++;
        }
        if (i < last) {
            const tf_plan_action *a = &plan->actions[i];
            busy += a->ms;
            busy_unfrozen += tf_plan_action_unfrozen_ms(a);
            free_from = a->start_ms + a->ms > free_from ? a->start_ms + a->ms : free_from;
        }
    }
    pr->idle_ms_planned = batch - busy;
    pr->idle_ms_unfrozen = plan->batch_ms_unfrozen - busy_unfrozen;
    return 0;
}

/* Each rank's peak bytes, unfrozen and planned. */
static int fill_peaks(tf_plan *plan, tf_error *err)
{
    const int n = plan->schedule.n_actions, ranks = plan->schedule.ranks;
    tf_memory_model m;
    int rc = tf_plan_memory_model(plan, &m, err);
    if (rc)
        return rc;
    double *f = malloc(((size_t)n + 1) * sizeof *f), *q = malloc(((size_t)n + 1) * sizeof *q);
    tf_memory_peak *peaks = malloc(((size_t)ranks + 1) * sizeof *peaks);
    if (f && q && peaks) {
        for (int i = 0; i < n; i++) {
            f[i] = plan->actions[i].freeze_ratio;
            q[i] = plan->actions[i].recompute_ratio;
        }
        tf_memory_peaks(&m, NULL, NULL, peaks);
        for (int r = 0; r < ranks; r++) {
            plan->per_rank[r].peak_unfrozen = peaks[r];
            plan->per_rank[r].static_bytes = m.static_bytes[r];
        }
        tf_memory_peaks(&m, f, q, peaks);
        for (int r = 0; r < ranks; r++)
            plan->per_rank[r].peak_planned = peaks[r];
    } else {
        rc = tf_fail(err, TF_ENOMEM, "out of memory computing the plan's memory peaks");
    }
    free(f);
    free(q);
    free(peaks);
    tf_memory_model_free(&m);
    return rc;
}

/* plan->per_rank: idle time and bubbles, and with memory the peaks. */
static int fill_ranks(tf_plan *plan, tf_error *err)
{
    const int ranks = plan->schedule.ranks;
    plan->per_rank = calloc((size_t)ranks + 1, sizeof *plan->per_rank);
    if (!plan->per_rank)
        return tf_fail(err, TF_ENOMEM, "out of memory describing the plan's ranks");
    for (int r = 0; r < ranks; r++)
        if (fill_bubbles(plan, r, &plan->per_rank[r]))
            return tf_fail(err, TF_ENOMEM, "out of memory describing the plan's ranks");
    int rc = plan->memory ? fill_peaks(plan, err) : 0;
    return !rc && plan->n_aux_work ? tf_plan_place_aux(plan, err) : rc;
}

/* Which actions count in the freeze statistics: those the LP could
 * freeze, with a binding memory limit those that save bytes too. */
static int mark_freezable(const tf_plan *plan, const tf_plan_arrays *a, unsigned char *out,
                          tf_error *err)
{
    tf_memory_model m = {0};
    int binds = 0;
    if (plan->memory && plan->memory_limit) {
        int rc = tf_plan_memory_model(plan, &m, err);
        if (rc)
            return rc;
        binds = tf_memory_first_over(&m, plan->memory_limit) >= 0;
    }
    tf_freezable_mark(&plan->schedule, a->max_ms, a->min_ms, binds ? &m : NULL, out);
    tf_memory_model_free(&m);
    return 0;
}

int tf_plan_fill(tf_plan *plan, const tf_dag *g, const tf_plan_arrays *a,
                 unsigned char *critical, tf_error *err)
{
    const tf_schedule *s = &plan->schedule;
    int *stage_count = calloc((size_t)s->stages + 1, sizeof *stage_count);
    if (!stage_count || tf_dag_critical(g, a->duration, critical)) {
        free(stage_count);
        return tf_fail(err, TF_ENOMEM, "out of memory filling the plan");
    }
        unsigned char *freezable = malloc((size_t)s->n_actions + 1);
    int rc = freezable ? mark_freezable(plan, a, freezable, err)
                       : tf_fail(err, TF_ENOMEM, "out of memory filling the plan");
    double total = 0.0;
    int counted = 0;
    for (int i = 0; i < s->n_actions && !rc; i++) {
        tf_plan_action *pa = &plan->actions[i];
        pa->action = s->actions[i];
        pa->start_ms = a->start[i];
        pa->ms = a->duration[i];
        pa->max_ms = a->max_ms[i];
        pa->min_ms = a->min_ms[i];
        pa->freeze_ratio = a->ratio[i];
        pa->recompute_ratio = a->recompute ? a->recompute[i] : 0.0;
        pa->critical = critical[i];
        if (freezable[i]) {
            total += a->ratio[i];
            counted++;
            plan->freeze_ratio_stage[pa->action.stage] += a->ratio[i];
            stage_count[pa->action.stage]++;
        }
    }
    for (int st = 0; st < s->stages; st++)
        plan->freeze_ratio_stage[st] =
            stage_count[st] ? plan->freeze_ratio_stage[st] / stage_count[st] : 0.0;
    free(stage_count);
    free(freezable);
    if (rc)
        return rc;
    plan->freeze_ratio_mean = counted ? total / counted : 0.0;
    plan->speedup = plan->batch_ms_planned > 0 ? plan->batch_ms_unfrozen / plan->batch_ms_planned
                                               : 1.0;
    plan->tokens_per_s_unfrozen =
        tokens_per_s(plan->microbatch_tokens, s->microbatches, plan->batch_ms_unfrozen);
    plan->tokens_per_s_planned =
        tokens_per_s(plan->microbatch_tokens, s->microbatches, plan->batch_ms_planned);
    return fill_ranks(plan, err);
}

/* "idle          unfrozen 34.1%  planned 12.0%  per rank 12.0% ...": the
 * share of the step each rank waits (the bubbles), over all ranks and per
 * rank. */
static void print_idle(const tf_plan *plan, FILE *f)
{
    const int ranks = plan->schedule.ranks;
    double unfrozen = 0.0, planned = 0.0;
    for (int r = 0; r < ranks; r++) {
        unfrozen += plan->per_rank[r].idle_ms_unfrozen;
        planned += plan->per_rank[r].idle_ms_planned;
    }
    double share_u = plan->batch_ms_unfrozen > 0 ? unfrozen / (ranks * plan->batch_ms_unfrozen)
                                                 : 0.0;
    double share_p = plan->batch_ms_planned > 0 ? planned / (ranks * plan->batch_ms_planned)
                                                : 0.0;
    fprintf(f, "idle          unfrozen %.1f%%  planned %.1f%%  per rank", 100.0 * share_u,
            100.0 * share_p);
    for (int r = 0; r < ranks && r < 16; r++)
        fprintf(f, " %.1f%%", plan->batch_ms_planned > 0
                                  ? 100.0 * plan->per_rank[r].idle_ms_planned /
                                        plan->batch_ms_planned
                                  : 0.0);
    fprintf(f, "%s\n", ranks > 16 ? " ..." : "");
}

/* "memory        peak GiB unfrozen -> planned: 0: 70.1 -> 59.8, ...; limit
 * 60.00 GiB" and the recomputation, when the plan recomputes. */
static void print_memory(const tf_plan *plan, FILE *f)
{
    const double gib = 1073741824.0;
    const tf_schedule *s = &plan->schedule;
    fprintf(f, "memory        peak GiB per rank, unfrozen -> planned:");
    for (int r = 0; r < s->ranks && r < 16; r++)
        fprintf(f, "%s %.2f -> %.2f", r ? "," : "", plan->per_rank[r].peak_unfrozen.bytes / gib,
                plan->per_rank[r].peak_planned.bytes / gib);
    fprintf(f, "%s\n", s->ranks > 16 ? ", ..." : "");
    if (plan->memory_limit) {
        int same = 1;
        for (int r = 1; r < s->ranks; r++)
            same &= plan->memory_limit[r] == plan->memory_limit[0];
        fprintf(f, "limit         %.2f GiB %s%s\n", plan->memory_limit[0] / gib,
                same ? "on every rank" : "on rank 0 (per rank in the plan)",
                plan->freeze_saves_memory ? "" : "; freezing not counted as saving memory");
    }
    double recomputed = 0.0, r_ms = 0.0;
    int backwards = 0;
    for (int i = 0; i < s->n_actions; i++) {
        const tf_plan_action *a = &plan->actions[i];
        if (a->action.type == TF_ACT_R)
            r_ms += a->ms;
        if (a->recompute_ratio > 0) {
            recomputed += a->recompute_ratio;
            backwards++;
        }
    }
    if (backwards > 0)
        fprintf(f, "recompute     %d %s, mean ratio %.3f, %.2f ms of R in all\n", backwards,
                tf_plural(backwards, "backward", "backwards"), recomputed / backwards, r_ms);
}

/* "aux work      placed 12.0 of 20.0 ms per step (first fit; at most
 * 14.1 split), refresh every 2 steps; per rank 3.0/5.0 ...": what the
 * bubbles take of the aux work, and how often it completes. */
static void print_aux(const tf_plan *plan, FILE *f)
{
    double demand = 0.0, placed = 0.0, exact = 0.0;
    for (int r = 0; r < plan->aux.ranks; r++) {
        demand += plan->aux.per_rank[r].demand_ms;
        placed += plan->aux.per_rank[r].placed_ms;
        exact += plan->aux.per_rank[r].exact_ms;
    }
    const int refresh = tf_aux_refresh_steps(&plan->aux);
    fprintf(f, "aux work      placed %.2f of %.2f ms per step (first fit; %.2f split), ", placed,
            demand, exact);
    if (refresh == 0)
        fprintf(f, "never complete: an item is longer than every bubble\n");
    else
        fprintf(f, "refresh every %d %s\n", refresh, tf_plural(refresh, "step", "steps"));
    fprintf(f, "              per rank placed/demand ms");
    for (int r = 0; r < plan->aux.ranks && r < 16; r++)
        fprintf(f, " %.1f/%.1f", plan->aux.per_rank[r].placed_ms, plan->aux.per_rank[r].demand_ms);
    fprintf(f, "%s, %.0f%% of each bubble kept free\n", plan->aux.ranks > 16 ? " ..." : "",
            100.0 * plan->aux_margin);
}

/* "speedup 1.556x (batch time -35.7%, 85% of the all-frozen gain)".  A
 * plan slower than the unfrozen schedule has no share of that gain: only a
 * memory limit that the unfrozen schedule breaks makes one, by recomputing
 * (it printed "batch time --11.3%, -46% of the all-frozen gain"). */
static void print_speedup(const tf_plan *plan, FILE *f)
{
    const double unfrozen = plan->batch_ms_unfrozen, planned = plan->batch_ms_planned;
    const double change = unfrozen > 0 ? 100.0 * (planned / unfrozen - 1.0) : 0.0;
    const double reachable = unfrozen - plan->batch_ms_all_frozen;
    fprintf(f, "speedup       %.3fx  (batch time %c%.1f%%, ", plan->speedup,
            change > 0 ? '+' : '-', fabs(change));
    if (planned > unfrozen * (1.0 + 1e-9))
        fprintf(f, "slower than unfrozen%s)\n",
                plan->memory_limit ? ", which breaks the memory limit" : "");
    else
        fprintf(f, "%.0f%% of the all-frozen gain)\n",
                reachable > 0 ? 100.0 * (unfrozen - planned) / reachable : 100.0);
}

void tf_plan_print_summary(const tf_plan *plan, FILE *f)
{
    const tf_schedule *s = &plan->schedule;
    fprintf(f, "schedule      %s: %d %s x %d %s, %d %s, %d %s\n", s->name, s->ranks,
            tf_plural(s->ranks, "rank", "ranks"), s->stages_per_rank,
            tf_plural(s->stages_per_rank, "stage", "stages"), s->microbatches,
            tf_plural(s->microbatches, "microbatch", "microbatches"), s->n_actions,
            tf_plural(s->n_actions, "action", "actions"));
    fprintf(f, "batch time    unfrozen %.2f ms   all frozen %.2f ms   planned %.2f ms\n",
            plan->batch_ms_unfrozen, plan->batch_ms_all_frozen, plan->batch_ms_planned);
    print_speedup(plan, f);
    if (plan->tokens_per_s_planned > 0)
        fprintf(f, "tokens/s      unfrozen %.0f   planned %.0f\n", plan->tokens_per_s_unfrozen,
                plan->tokens_per_s_planned);
    fprintf(f, "freeze ratio  mean %.3f (%s)  per stage", plan->freeze_ratio_mean,
            tf_objective_name(plan->objective));
    for (int st = 0; st < s->stages; st++)
        fprintf(f, " %.2f", plan->freeze_ratio_stage[st]);
    fprintf(f, "\ncap           ");
    int same = 1;
    for (int st = 1; st < s->stages; st++)
        same &= plan->max_freeze_ratio[st] == plan->max_freeze_ratio[0];
    for (int st = 0; st < (same ? 1 : s->stages); st++)
        fprintf(f, "%s%.2f", st ? " " : "", plan->max_freeze_ratio[st]);
    fprintf(f, "%s", same ? " on every stage" : " per stage");
    if (plan->max_action_ratio < 1.0)
        fprintf(f, ", at most %.2f on each action", plan->max_action_ratio);
    fputc('\n', f);
    /* "lp_solve 5.5.2.5 (auto): optimal, ..." - the solver that ran, and
     * "(auto)" when the size chose it. */
    fprintf(f, "solver        %s%s%s%s: %s, ", plan->solver_name,
            plan->solver_version[0] ? " " : "", plan->solver_version,
            strcmp(plan->solver_requested, "auto") == 0 ? " (auto)" : "", plan->solver_status);
    int v = plan->solver_variables, c = plan->solver_constraints;
    if (strcmp(plan->solver_name, "fast") == 0)
        fprintf(f, "%d %s, %d %s", v, tf_plural(v, "network node", "network nodes"), c,
                tf_plural(c, "arc", "arcs"));
    else
        fprintf(f, "%d %s, %d %s", v, tf_plural(v, "variable", "variables"), c,
                tf_plural(c, "constraint", "constraints"));
    fprintf(f, ", %.3f s\n", plan->solver_seconds);
    if (plan->solver_fallback[0])
        fprintf(f, "fallback      %s solved it after: %s\n", plan->solver_name,
                plan->solver_fallback);
    print_idle(plan, f);
    if (plan->memory)
        print_memory(plan, f);
    if (plan->n_aux_work)
        print_aux(plan, f);
}

void tf_plan_free(tf_plan *plan)
{
    for (int r = 0; plan->per_rank && r < plan->schedule.ranks; r++)
        free(plan->per_rank[r].bubbles);
    free(plan->per_rank);
    free(plan->memory);
    free(plan->memory_limit);
    free(plan->aux_work);
    tf_aux_placement_free(&plan->aux);
    tf_schedule_free(&plan->schedule);
    free(plan->max_freeze_ratio);
    free(plan->freeze_ratio_stage);
    free(plan->actions);
    memset(plan, 0, sizeof *plan);
}
