/* autoplan.c - the phases of --auto-plan, its LP solves and re-plans (see
 * autoplan.h). */
#include "autoplan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tf/planner.h"
#include "tf/util.h"

const char *tfx_phase_name(tfx_phase ph)
{
    switch (ph) {
    case TFX_PHASE_MEASURE_UNFROZEN: return "measure-unfrozen";
    case TFX_PHASE_MEASURE_FROZEN: return "measure-frozen";
    case TFX_PHASE_RAMP: return "ramp";
    case TFX_PHASE_FROZEN: return "frozen";
    default: return "warmup";
    }
}

int tfx_autoplan_open(tfx_autoplan *a, const tfx_exec_options *o, const tf_schedule *s,
                      tf_error *err)
{
    int rc = 0;
    memset(a, 0, sizeof *a);
    a->o = o;
    const long needed = (long)o->warmup + 2L * o->profile_steps;
    if (o->profile_steps < 1)
        return tf_fail(err, TF_EINVAL, "--profile-steps %d: --auto-plan needs >= 1",
                       o->profile_steps);
    if (o->steps < needed)
        return tf_fail(err, TF_EINVAL,
                       "--steps %d: --auto-plan needs --warmup %d + 2 x --profile-steps %d = %ld "
                       "steps before it can plan",
                       o->steps, o->warmup, o->profile_steps, needed);
    if (!(o->max_freeze_ratio >= 0.0 && o->max_freeze_ratio <= 1.0))
        return tf_fail(err, TF_EINVAL, "--max-freeze-ratio %g: must be in [0, 1]",
                       o->max_freeze_ratio);
    TFX_TRY(tfx_exec_check_writable(o, "--profile-out", o->profile_out, err));
    TFX_TRY(tfx_exec_check_writable(o, "--plan-out", o->plan_out, err));
    const int room = o->profile_steps > o->replan_steps ? o->profile_steps : o->replan_steps;
    TFX_TRY(tfx_measure_init(&a->m, s, room, err));
    TFX_CALLOC(a->measured, s->stages);
    TFX_CALLOC(a->expected, s->stages);
    a->measure_from = o->warmup;
    a->measure_pairs = o->profile_steps;
    a->plan_step = -1;
    a->drift_stage = -1;
fail:
    return rc;
}

void tfx_autoplan_close(tfx_autoplan *a)
{
    tfx_measure_free(&a->m);
    free(a->measured);
    free(a->expected);
    memset(a, 0, sizeof *a);
}

tfx_phase tfx_autoplan_phase(const tfx_autoplan *a, long step, double *factor)
{
    const tfx_exec_options *o = a->o;
    *factor = 0.0;
    if (step < o->warmup)
        return TFX_PHASE_WARMUP;
    if (a->measure_from >= 0 && step >= a->measure_from &&
        step < a->measure_from + 2L * a->measure_pairs)
        return (step - a->measure_from) % 2 ? TFX_PHASE_MEASURE_FROZEN
                                            : TFX_PHASE_MEASURE_UNFROZEN;
    if (a->plan_step < 0)
        return TFX_PHASE_WARMUP;
    /* The ramp follows the first plan only: a re-plan replaces ratios that
     * are already in force. */
    double f = o->ramp > 0 ? (double)(step - a->plan_step + 1) / o->ramp : 1.0;
    *factor = f < 1.0 ? f : 1.0;
    return *factor < 1.0 ? TFX_PHASE_RAMP : TFX_PHASE_FROZEN;
}

/* --profile-out and --plan-out, written as one unit (atomically). */
static int write_outputs(const tfx_exec_options *o, const char *profile_json,
                         const char *plan_json, tf_error *err)
{
    const char *paths[2];
    const void *data[2];
    size_t lens[2];
    int n = 0;
    if (o->profile_out) {
        paths[n] = o->profile_out;
        data[n] = profile_json;
        lens[n++] = strlen(profile_json);
    }
    if (o->plan_out) {
        paths[n] = o->plan_out;
        data[n] = plan_json;
        lens[n++] = strlen(plan_json);
    }
    return n ? tf_write_files_atomic(n, paths, data, lens, err) : 0;
}

/* Process 0's part of a solve: the profile as it is written (so that
 * tf-plan on the file finds this very plan), the plan solved from it as
 * tf-plan solves it, both files, and the summary.  *plan_json is malloc'd. */
static int solve_lead(const tfx_autoplan *a, const tfx_exec_run *r, const tf_profile *prof,
                      char **plan_json, tf_error *err)
{
    int rc = 0;
    const tfx_exec_options *o = a->o;
    char *profile_json = NULL;
    tf_profile written = {0};
    tf_plan plan = {0};
    tf_plan_options po;
    tf_plan_options_init(&po);
    po.objective = o->objective;
    po.solver = o->solver;
    po.max_action_ratio = o->max_action_ratio;
    po.memory_limit = (double)o->memory_limit;
    po.freeze_saves_memory = !o->no_freeze_memory;
    TFX_TRY(tf_profile_to_json(prof, &profile_json, err));
    TFX_TRY(tf_profile_parse(profile_json, o->profile_out ? o->profile_out : "the measured profile",
                             &written, err));
    TFX_TRY(tf_plan_from_profile(&written, &po, &plan, err));
    TFX_TRY(tf_plan_to_json(&plan, plan_json, err));
    TFX_TRY(write_outputs(o, profile_json, *plan_json, err));
    tf_plan_print_summary(&plan, r->out);
    if (o->profile_out)
        fprintf(r->out, "profile       %s\n", o->profile_out);
    if (o->plan_out)
        fprintf(r->out, "plan          %s\n", o->plan_out);
fail:
    free(profile_json);
    tf_profile_free(&written);
    tf_plan_free(&plan);
    return rc;
}

/* The plan's actions must be the run's, index for index: the drift compares
 * them so. */
static int check_alignment(const tf_plan *plan, const tf_schedule *s, tf_error *err)
{
    if (plan->schedule.n_actions != s->n_actions)
        return tf_fail(err, TF_ERUNTIME, "--auto-plan: the plan has %d actions, the run %d",
                       plan->schedule.n_actions, s->n_actions);
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *x = &plan->actions[i].action, *y = &s->actions[i];
        if (x->type != y->type || x->stage != y->stage || x->microbatch != y->microbatch ||
            x->rank != y->rank)
            return tf_fail(err, TF_ERUNTIME, "--auto-plan: the plan's action %d is not the run's",
                           i);
    }
    return 0;
}

/* The profile of the measurement just finished, the plan process 0 solves
 * from it, shared with the other processes; every process parses the same
 * text into *out. */
static int solve(tfx_autoplan *a, tfx_exec_run *r, tf_plan *out, tf_error *err)
{
    int rc = 0;
    const tfx_exec_options *o = a->o;
    const int lead = !tfx_exec_launched(o) || o->launch.rank == 0;
    tf_profile prof = {0};
    char *plan_json = NULL;
    size_t len = 0;
    fprintf(r->out, "%s: profile of steps %ld-%ld (%d of each kind, alternating)\n",
            a->plans ? "re-plan" : "auto-plan", a->measure_from + 1,
            a->measure_from + 2L * a->measure_pairs, a->measure_pairs);
    if (lead) { /* the others get the plan, and print nothing anyway */
        TFX_TRY(tfx_measure_profile(&a->m, r, &prof, err));
        TFX_TRY(solve_lead(a, r, &prof, &plan_json, err));
        len = strlen(plan_json);
    }
    TFX_TRY(tfx_pipeline_share(r->p, &plan_json, &len, err));
    TFX_TRY(tf_plan_parse(plan_json, "the plan of --auto-plan", out, err));
    TFX_TRY(check_alignment(out, &r->sched, err));
fail:
    if (rc < 0)
        tf_plan_free(out);
    free(plan_json);
    tf_profile_free(&prof);
    return rc;
}

/* Share of a stage's K tensors frozen for microbatch m in `mask`. */
static double frozen_share(const tfx_model_layout *l, const unsigned char *mask, int stage, int m)
{
    const int first = l->stage_first_tensor[stage], K = l->stage_first_tensor[stage + 1] - first;
    int k = 0;
    for (int t = 0; t < K; t++)
        k += mask[(size_t)m * l->n_tensors + first + t] != 0;
    return K ? (double)k / K : 0.0;
}

/* The stage furthest from the plan in the last step: measured compute time
 * of its actions over what the plan expects for the tensors really frozen
 * (the LP's line between the full and the frozen time), minus 1. */
static void step_drift(tfx_autoplan *a, const tfx_exec_run *r, const tf_plan *plan,
                       const unsigned char *mask)
{
    const tf_schedule *s = &r->sched;
    const tfx_model_layout *l = tfx_pipeline_layout(r->p);
    const double *ms = tfx_pipeline_action_ms(r->p);
    memset(a->measured, 0, (size_t)s->stages * sizeof *a->measured);
    memset(a->expected, 0, (size_t)s->stages * sizeof *a->expected);
    for (int i = 0; i < s->n_actions; i++) {
        const tf_plan_action *pa = &plan->actions[i];
        const int st = pa->action.stage;
        double q = 0.0;
        if (pa->action.type == TF_ACT_B || pa->action.type == TF_ACT_W)
            q = frozen_share(l, mask, st, pa->action.microbatch);
        a->measured[st] += ms[i];
        a->expected[st] += pa->max_ms - q * (pa->max_ms - pa->min_ms);
    }
    a->drift = 0.0;
    a->drift_stage = -1;
    for (int st = 0; st < s->stages; st++) {
        if (!(a->expected[st] > 0.0))
            continue;
        const double d = a->measured[st] / a->expected[st] - 1.0;
        if (a->drift_stage < 0 || fabs(d) > fabs(a->drift)) {
            a->drift = d;
            a->drift_stage = st;
        }
    }
}

/* Counts the steps in a row beyond the threshold and, when the rule says
 * so and the run has room for it, starts a re-plan's measurement. */
static void watch(tfx_autoplan *a, const tfx_exec_run *r, long step, const tf_plan *plan,
                  const unsigned char *mask)
{
    const tfx_exec_options *o = a->o;
    step_drift(a, r, plan, mask);
    a->drifting = fabs(a->drift) > o->replan_threshold ? a->drifting + 1 : 0;
    const long from = step + 1;
    if (a->drifting < o->replan_patience || from - a->last_plan_step < o->replan_interval ||
        from + 2L * o->replan_steps > o->steps)
        return;
    snprintf(a->reason, sizeof a->reason,
             "stage %d ran %.1f%% %s than planned for %d steps in a row (threshold %.1f%%)",
             a->drift_stage, 100.0 * fabs(a->drift), a->drift > 0 ? "slower" : "faster",
             a->drifting, 100.0 * o->replan_threshold);
    snprintf(a->event, sizeof a->event, "re-plan %d at step %ld: %s; measuring steps %ld-%ld",
             a->plans, step + 1, a->reason, from + 1, from + 2L * o->replan_steps);
    a->measure_from = from;
    a->measure_pairs = o->replan_steps;
    a->drifting = 0;
    tfx_measure_reset(&a->m);
}

int tfx_autoplan_after_step(tfx_autoplan *a, tfx_exec_run *r, long step, tfx_phase ph,
                            const tfx_step_result *res, const tf_plan *plan,
                            const unsigned char *mask, tf_plan *out, int *solved,
                            tf_error *err)
{
    *solved = 0;
    a->event[0] = '\0';
    if (ph != TFX_PHASE_MEASURE_UNFROZEN && ph != TFX_PHASE_MEASURE_FROZEN) {
        if (plan && a->o->replan_threshold > 0.0)
            watch(a, r, step, plan, mask);
        return 0;
    }
    tfx_measure_add(&a->m, r->p, ph == TFX_PHASE_MEASURE_FROZEN, res);
    if (step != a->measure_from + 2L * a->measure_pairs - 1)
        return 0;
    int rc = solve(a, r, out, err);
    if (rc < 0)
        return rc;
    a->plans++;
    *solved = 1;
    a->measure_from = -1;
    a->last_plan_step = step + 1;
    if (a->plan_step < 0)
        a->plan_step = step + 1;
    a->drifting = 0;
    snprintf(a->event, sizeof a->event,
             "plan %d from step %ld: planned %.2f ms (unfrozen %.2f ms), mean freeze ratio "
             "%.3f%s%s",
             a->plans, step + 2, out->batch_ms_planned, out->batch_ms_unfrozen,
             out->freeze_ratio_mean, a->plans > 1 ? "; re-planned because " : "",
             a->plans > 1 ? a->reason : "");
    return 0;
}
