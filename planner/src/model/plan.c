/* plan.c - a plan's figures from its durations and start times, the
 * summary tf-plan prints, and freeing.  Files: plan_json.c; the planner,
 * which makes a plan from a profile: pipeline/plan_from_profile.c. */
#include "plan_internal.h"
#include "freezable.h"
#include "tf/util.h"

#include <stdlib.h>
#include <string.h>

static double tokens_per_s(double microbatch_tokens, int microbatches, double batch_ms)
{
    if (microbatch_tokens <= 0 || batch_ms <= 0)
        return 0.0;
    return microbatch_tokens * microbatches / (batch_ms / 1000.0);
}

int tf_plan_fill(tf_plan *plan, const tf_dag *g, const double *max_ms, const double *min_ms,
                 const double *ratio, const double *duration, const double *start,
                 unsigned char *critical)
{
    const tf_schedule *s = &plan->schedule;
    int *stage_count = calloc((size_t)s->stages + 1, sizeof *stage_count);
    if (!stage_count || tf_dag_critical(g, duration, critical)) {
        free(stage_count);
        return TF_ENOMEM;
    }
    double total = 0.0;
    int freezable = 0;
    for (int i = 0; i < s->n_actions; i++) {
        tf_plan_action *a = &plan->actions[i];
        a->action = s->actions[i];
        a->start_ms = start[i];
        a->ms = duration[i];
        a->max_ms = max_ms[i];
        a->min_ms = min_ms[i];
        a->freeze_ratio = ratio[i];
        a->critical = critical[i];
        if (tf_action_freezable(&a->action, max_ms[i], min_ms[i])) {
            total += ratio[i];
            freezable++;
            plan->freeze_ratio_stage[a->action.stage] += ratio[i];
            stage_count[a->action.stage]++;
        }
    }
    for (int st = 0; st < s->stages; st++)
        plan->freeze_ratio_stage[st] =
            stage_count[st] ? plan->freeze_ratio_stage[st] / stage_count[st] : 0.0;
    free(stage_count);
    plan->freeze_ratio_mean = freezable ? total / freezable : 0.0;
    plan->speedup = plan->batch_ms_planned > 0 ? plan->batch_ms_unfrozen / plan->batch_ms_planned
                                               : 1.0;
    plan->tokens_per_s_unfrozen =
        tokens_per_s(plan->microbatch_tokens, s->microbatches, plan->batch_ms_unfrozen);
    plan->tokens_per_s_planned =
        tokens_per_s(plan->microbatch_tokens, s->microbatches, plan->batch_ms_planned);
    return 0;
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
    double reachable = plan->batch_ms_unfrozen - plan->batch_ms_all_frozen;
    fprintf(f, "speedup       %.3fx  (batch time -%.1f%%, %.0f%% of the all-frozen gain)\n",
            plan->speedup,
            plan->batch_ms_unfrozen > 0
                ? 100.0 * (1.0 - plan->batch_ms_planned / plan->batch_ms_unfrozen)
                : 0.0,
            reachable > 0 ? 100.0 * (plan->batch_ms_unfrozen - plan->batch_ms_planned) / reachable
                          : 100.0);
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
}

void tf_plan_free(tf_plan *plan)
{
    tf_schedule_free(&plan->schedule);
    free(plan->max_freeze_ratio);
    free(plan->freeze_ratio_stage);
    free(plan->actions);
    memset(plan, 0, sizeof *plan);
}
