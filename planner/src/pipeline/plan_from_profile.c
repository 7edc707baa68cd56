/* plan_from_profile.c - the planner (tf/planner.h): a profile's durations,
 * its DAG, the unfrozen and all-frozen bounds, the freeze LP through the
 * chosen solver, and the plan (tf_plan_from_profile); or the same without
 * the LP (tf_plan_unfrozen).
 *
 * The one file of the library above both model/ (schedules, profiles, the
 * DAG, plans) and solve/ (the freeze LP): it calls down into each, and
 * neither calls it.  render/ calls it to draw a profile as a plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/plan_internal.h"
#include "solve/freeze_common.h"
#include "tf/dag.h"
#include "tf/freeze.h"
#include "tf/planner.h"

int tf_planner_init(void)
{
    return tf_freeze_lpsolve_init();
}

void tf_plan_options_init(tf_plan_options *o)
{
    o->objective = TF_OBJECTIVE_LEAST_FREEZE;
    o->max_freeze_ratio = -1.0;
    o->max_action_ratio = 1.0;
    o->solver = TF_SOLVER_AUTO;
    tf_freeze_control_init(&o->control);
}

/* Allocates the plan's arrays and copies the shape from the profile. */
static int plan_init(tf_plan *plan, const tf_profile *p, const double *caps)
{
    memset(plan, 0, sizeof *plan);
    const tf_schedule *s = &p->schedule;
    if (tf_schedule_copy(s, &plan->schedule))
        return TF_ENOMEM;
    plan->max_freeze_ratio = calloc((size_t)s->stages + 1, sizeof *plan->max_freeze_ratio);
    plan->freeze_ratio_stage = calloc((size_t)s->stages + 1, sizeof *plan->freeze_ratio_stage);
    plan->actions = calloc((size_t)s->n_actions + 1, sizeof *plan->actions);
    if (!plan->max_freeze_ratio || !plan->freeze_ratio_stage || !plan->actions)
        return TF_ENOMEM;
    memcpy(plan->max_freeze_ratio, caps, (size_t)s->stages * sizeof *caps);
    plan->microbatch_tokens = p->microbatch_tokens;
    plan->p2p_ms = p->p2p_ms;
    return 0;
}

/* A per-action cap c < 1 without touching the solvers: each action's
 * frozen time moves to max - c (max - min), so the solvers' ratio r' in
 * [0, 1] is the plan's r = c r', and a stage cap R on the mean of r is R / c
 * on the mean of r' (no cap at all from R >= c on).  The objectives (least
 * total ratio, smallest largest ratio) scale by c and keep their optimum. */
static void cap_each_action(double c, int n, const double *max_ms, double *min_ms, int stages,
                            double *caps)
{
    for (int i = 0; i < n; i++)
        min_ms[i] = max_ms[i] - c * (max_ms[i] - min_ms[i]);
    for (int st = 0; st < stages; st++)
        caps[st] = caps[st] >= c ? 1.0 : caps[st] / c;
}

/* Shared body of tf_plan_from_profile and tf_plan_unfrozen. */
static int make_plan(const tf_profile *p, const tf_plan_options *o, int solve, tf_plan *out,
                     tf_error *err)
{
    const tf_schedule *s = &p->schedule;
    const int n = s->n_actions;
    double *caps = calloc((size_t)s->stages + 1, sizeof *caps);
    double *max_ms = malloc(((size_t)n + 1) * sizeof *max_ms);
    double *min_ms = malloc(((size_t)n + 1) * sizeof *min_ms);
    double *solve_min_ms = malloc(((size_t)n + 1) * sizeof *solve_min_ms);
    double *solve_caps = calloc((size_t)s->stages + 1, sizeof *solve_caps);
    double *zeros = calloc((size_t)n + 1, sizeof *zeros);
    double *start = malloc(((size_t)n + 1) * sizeof *start);
    unsigned char *critical = malloc((size_t)n + 1);
    tf_dag g = {0};
    tf_freeze_result fr = {0};
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (!caps || !max_ms || !min_ms || !solve_min_ms || !solve_caps || !zeros || !start ||
        !critical) {
        rc = tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", n);
        goto done;
    }
    for (int st = 0; st < s->stages; st++)
        caps[st] = o && o->max_freeze_ratio >= 0 ? o->max_freeze_ratio : p->max_freeze_ratio[st];
    tf_profile_durations(p, max_ms, min_ms);
    if ((rc = tf_dag_build(s, p->p2p_ms, &g, err)))
        goto done;
    if ((rc = plan_init(out, p, caps))) {
        rc = tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", n);
        goto done;
    }
    out->objective = o ? o->objective : TF_OBJECTIVE_LEAST_FREEZE;
    const double per_action = o ? o->max_action_ratio : 1.0;
    out->max_action_ratio = per_action;
    /* start doubles as scratch for the all-frozen pass, so no pass allocates. */
    out->batch_ms_all_frozen = tf_dag_longest_path(&g, min_ms, start);
    out->batch_ms_unfrozen = tf_dag_longest_path(&g, max_ms, start);
    if (!solve) {
        out->batch_ms_planned = out->batch_ms_unfrozen;
        snprintf(out->solver_name, sizeof out->solver_name, "none");
        snprintf(out->solver_status, sizeof out->solver_status, "unfrozen");
        if (tf_plan_fill(out, &g, max_ms, min_ms, zeros, max_ms, start, critical))
            rc = tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", n);
        goto done;
    }
    if (!(per_action > 0.0 && per_action <= 1.0)) {
        rc = tf_fail(err, TF_EINVAL, "max_action_ratio = %g: must be in (0, 1]", per_action);
        goto done;
    }
    memcpy(solve_min_ms, min_ms, (size_t)n * sizeof *min_ms);
    memcpy(solve_caps, caps, (size_t)s->stages * sizeof *caps);
    /* (At c = 1, max - (max - min) could differ from min by rounding.) */
    if (per_action < 1.0)
        cap_each_action(per_action, n, max_ms, solve_min_ms, s->stages, solve_caps);
    tf_freeze_problem problem;
    tf_freeze_problem_init(&problem);
    problem.schedule = s;
    problem.dag = &g;
    problem.max_ms = max_ms;
    problem.min_ms = solve_min_ms;
    problem.cap = solve_caps;
    problem.objective = out->objective;
    problem.solver = o ? o->solver : TF_SOLVER_AUTO;
    if ((rc = tf_freeze_solve(&problem, o ? &o->control : NULL, &fr, err)))
        goto done;
    for (int i = 0; i < n; i++)
        fr.ratio[i] *= per_action;
    out->batch_ms_planned = fr.makespan;
    snprintf(out->solver_name, sizeof out->solver_name, "%s", fr.solver);
    snprintf(out->solver_requested, sizeof out->solver_requested, "%s",
             tf_solver_name(problem.solver));
    /* The version is that of the code that solved: lp_solve's library, or
     * the planner itself for the fast solver, which is part of it. */
    if (strcmp(fr.solver, "lp_solve") == 0)
        tf_freeze_solver_version(out->solver_version, sizeof out->solver_version);
    else
        snprintf(out->solver_version, sizeof out->solver_version, "%s", TF_VERSION);
    snprintf(out->solver_status, sizeof out->solver_status, "%s", fr.status);
    snprintf(out->solver_fallback, sizeof out->solver_fallback, "%s", fr.fallback);
    out->solver_variables = fr.variables;
    out->solver_constraints = fr.constraints;
    out->solver_seconds = fr.seconds;
    if (tf_plan_fill(out, &g, max_ms, min_ms, fr.ratio, fr.duration, fr.start, critical))
        rc = tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", n);

done:
    if (rc)
        tf_plan_free(out);
    tf_freeze_result_free(&fr);
    tf_dag_free(&g);
    free(caps);
    free(max_ms);
    free(min_ms);
    free(solve_min_ms);
    free(solve_caps);
    free(zeros);
    free(start);
    free(critical);
    return rc;
}

int tf_plan_from_profile(const tf_profile *p, const tf_plan_options *o, tf_plan *out,
                         tf_error *err)
{
    return make_plan(p, o, 1, out, err);
}

int tf_plan_unfrozen(const tf_profile *p, tf_plan *out, tf_error *err)
{
    return make_plan(p, NULL, 0, out, err);
}
