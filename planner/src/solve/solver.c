/* solver.c - tf_freeze_solve: checking the problem, the size rule of
 * "auto", the dispatch, the time limit and the fallback to another
 * solver.  The one file that knows every solver, so none has to know the
 * others. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "freeze_common.h"
#include "tf/freeze.h"

void tf_freeze_problem_init(tf_freeze_problem *p)
{
    memset(p, 0, sizeof *p);
    p->objective = TF_OBJECTIVE_LEAST_FREEZE;
    p->solver = TF_SOLVER_AUTO;
}

void tf_freeze_control_init(tf_freeze_control *c)
{
    c->time_limit_s = 0.0;
    c->fallback = 1;
    c->progress = NULL;
    c->max_rounds = 0;
}

/* Both solvers trust their input; a bad field is named here instead. */
static int check_arrays(const tf_freeze_problem *p, tf_error *err)
{
    const int n = p->schedule->n_actions;
    for (int i = 0; i < n; i++) {
        double max = p->max_ms[i], min = p->min_ms[i];
        if (!(isfinite(max) && max >= 0.0))
            return tf_fail(err, TF_EINVAL, "freeze problem: max_ms[%d] = %g: must be finite "
                           "and >= 0", i, max);
        if (!(min >= 0.0 && min <= max))
            return tf_fail(err, TF_EINVAL, "freeze problem: min_ms[%d] = %g: must be in "
                           "[0, max_ms[%d] = %g]", i, min, i, max);
    }
    for (int st = 0; st < p->schedule->stages; st++)
        if (!(p->cap[st] >= 0.0 && p->cap[st] <= 1.0))
            return tf_fail(err, TF_EINVAL, "freeze problem: cap[%d] = %g: must be in [0, 1]",
                           st, p->cap[st]);
    for (int i = 0; p->recompute_ms && i < n; i++)
        if (!(isfinite(p->recompute_ms[i]) && p->recompute_ms[i] >= 0.0))
            return tf_fail(err, TF_EINVAL, "freeze problem: recompute_ms[%d] = %g: must be "
                           "finite and >= 0", i, p->recompute_ms[i]);
    return 0;
}

/* A memory model of the schedule and a positive limit for every rank. */
static int check_memory(const tf_freeze_problem *p, tf_error *err)
{
    if (!p->memory_limit)
        return 0;
    if (!p->memory)
        return tf_fail(err, TF_EINVAL, "freeze problem: a memory limit without a memory model");
    if (p->memory->ranks != p->schedule->ranks)
        return tf_fail(err, TF_EINVAL, "freeze problem: a memory model of %d ranks for a "
                       "schedule of %d", p->memory->ranks, p->schedule->ranks);
    for (int r = 0; r < p->schedule->ranks; r++)
        if (!(p->memory_limit[r] > 0.0 && p->memory_limit[r] <= TF_MAX_BYTES))
            return tf_fail(err, TF_EINVAL, "freeze problem: memory_limit[%d] = %g: must be in "
                           "(0, %g]", r, p->memory_limit[r], TF_MAX_BYTES);
    return 0;
}

static int check_problem(const tf_freeze_problem *p, tf_error *err)
{
    const char *missing = !p->schedule ? "schedule" : !p->dag ? "dag" : !p->max_ms ? "max_ms"
                          : !p->min_ms ? "min_ms" : !p->cap ? "cap" : NULL;
    if (missing)
        return tf_fail(err, TF_EINVAL, "freeze problem: %s is NULL", missing);
    if (p->dag->n != p->schedule->n_actions)
        return tf_fail(err, TF_EINVAL, "freeze problem: dag of %d actions for a schedule of %d",
                       p->dag->n, p->schedule->n_actions);
    if (p->objective != TF_OBJECTIVE_LEAST_FREEZE && p->objective != TF_OBJECTIVE_SPREAD)
        return tf_fail(err, TF_EINVAL, "freeze problem: objective %d unknown", (int)p->objective);
    if (p->solver != TF_SOLVER_AUTO && p->solver != TF_SOLVER_LP_SOLVE &&
        p->solver != TF_SOLVER_FAST && p->solver != TF_SOLVER_CLP)
        return tf_fail(err, TF_EINVAL, "freeze problem: solver %d unknown", (int)p->solver);
    int rc = check_arrays(p, err);
    return rc ? rc : check_memory(p, err);
}

/* The general solver for p: lp_solve for small problems, where it takes
 * milliseconds, else CLP. */
static tf_solver general_solver(const tf_freeze_problem *p)
{
    return p->schedule->n_actions < TF_FAST_SOLVER_MIN_ACTIONS ? TF_SOLVER_LP_SOLVE
                                                               : TF_SOLVER_CLP;
}

/* Whether two actions of one stage and type have different durations:
 * per-action times, as tf-import and tf-exec measure them, rather than a
 * stage's times for every microbatch, as in tf-study's profiles. */
static int times_vary_within_stages(const tf_freeze_problem *p)
{
    const tf_schedule *s = p->schedule;
    int first[TF_MAX_STAGES * TF_ACTION_TYPES];
    for (int k = 0; k < TF_MAX_STAGES * TF_ACTION_TYPES; k++)
        first[k] = -1;
    for (int i = 0; i < s->n_actions; i++) {
        int k = s->actions[i].stage * TF_ACTION_TYPES + (int)s->actions[i].type;
        int j = first[k];
        if (j < 0)
            first[k] = i;
        else if (p->max_ms[i] != p->max_ms[j] || p->min_ms[i] != p->min_ms[j])
            return 1;
    }
    return 0;
}

/* The rule of "auto": by size and cap rows, in the words of
 * TF_FAST_SOLVER_MIN_ACTIONS, TF_FAST_SOLVER_MAX_CAP_ROWS and
 * TF_FAST_SOLVER_MAX_FILL_DRAIN_ROWS, and a general solver for a binding
 * memory limit, which the fast solver does not take. */
tf_solver tf_freeze_auto_solver(const tf_freeze_problem *p)
{
    const int n = p->schedule->n_actions;
    if (tf_freeze_memory_binds(p) || n < TF_FAST_SOLVER_MIN_ACTIONS)
        return general_solver(p);
    long rows = 0;
    for (int st = 0; st < p->schedule->stages; st++)
        rows += p->cap[st] > 0.0 && p->cap[st] < 1.0;
    if (rows > TF_FAST_SOLVER_MAX_CAP_ROWS && n < rows * TF_FAST_SOLVER_MIN_ACTIONS_PER_CAP_ROW &&
        tf_schedule_count(p->schedule, TF_ACT_W) == 0)
        return general_solver(p);
    if (rows > TF_FAST_SOLVER_MAX_FILL_DRAIN_ROWS && tf_schedule_fills_then_drains(p->schedule) &&
        n < rows * rows * TF_FAST_SOLVER_FILL_DRAIN_ACTIONS_PER_ROW2 &&
        times_vary_within_stages(p))
        return general_solver(p);
    return TF_SOLVER_FAST;
}

/* Who takes over when `solver` fails: a general solver for the fast one;
 * for lp_solve the fast one, or CLP where a memory limit binds (the fast
 * one would decline); lp_solve for CLP. */
static tf_solver fallback_solver(tf_solver solver, const tf_freeze_problem *p)
{
    switch (solver) {
    case TF_SOLVER_FAST: return general_solver(p);
    case TF_SOLVER_CLP: return TF_SOLVER_LP_SOLVE;
    default: return tf_freeze_memory_binds(p) ? TF_SOLVER_CLP : TF_SOLVER_FAST;
    }
}

/* A plan over a memory limit is its solver's failure, whatever the solver
 * reported: the LP's running sums keep each row only to the solver's
 * tolerance, and along a rank's events lp_solve's errors added up past the
 * margin its target leaves (a fuzzed ZBVZeroBubble profile: 0.41 bytes,
 * 5.6e-9 of the limit, over on rank 0, which also let it freeze 1e-5 less
 * than CLP's plan within the limit).  Returns 0, TF_ESOLVER or TF_ENOMEM. */
static int plan_within_memory(tf_solver solver, const tf_freeze_problem *p,
                              const tf_freeze_result *out, tf_error *err)
{
    if (!tf_freeze_memory_binds(p))
        return 0;
    const int ranks = p->schedule->ranks;
    tf_memory_peak *peaks = malloc(((size_t)ranks + 1) * sizeof *peaks);
    if (!peaks)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    tf_memory_peaks(p->memory, out->ratio, out->recompute, peaks);
    int rc = 0;
    for (int r = 0; r < ranks && !rc; r++)
        if (peaks[r].bytes > p->memory_limit[r])
            rc = tf_fail(err, TF_ESOLVER,
                         "%s: the plan's peak on rank %d, %.10g bytes, is over its memory "
                         "limit of %.10g (the solver's round-off)",
                         tf_solver_name(solver), r, peaks[r].bytes, p->memory_limit[r]);
    free(peaks);
    return rc;
}

/* Runs one solver, and fails its plan if the plan breaks a memory limit. */
static int run_solver(tf_solver solver, const tf_freeze_problem *p, const tf_freeze_limits *lim,
                      tf_freeze_result *out, tf_error *err)
{
    int rc;
    switch (solver) {
    case TF_SOLVER_FAST: rc = tf_freeze_fast_run(p, lim, out, err); break;
    case TF_SOLVER_CLP: rc = tf_freeze_clp_run(p, lim, out, err); break;
    default: rc = tf_freeze_lpsolve_run(p, lim, out, err); break;
    }
    if (!rc && (rc = plan_within_memory(solver, p, out, err)))
        tf_freeze_result_free(out);
    return rc;
}

char *tf_freeze_solver_version(const char *solver, char *buf, size_t size)
{
    if (strcmp(solver, "lp_solve") == 0)
        return tf_freeze_lpsolve_version(buf, size);
    if (strcmp(solver, "clp") == 0)
        return tf_freeze_clp_version(buf, size);
    snprintf(buf, size, "%s", TF_VERSION);
    return buf;
}

/* After the first solver failed with `first` (its message): another one,
 * within what is left of the time.  Both failures are named if it fails
 * too; on success out->fallback keeps the first. */
static int fall_back(tf_solver other, const tf_freeze_problem *p, const tf_freeze_limits *lim,
                     const tf_error *first, double first_seconds, tf_freeze_result *out,
                     tf_error *err)
{
    tf_progress_say(lim->progress, "%s; trying %s", first->msg, tf_solver_name(other));
    tf_error second = {0};
    int rc = run_solver(other, p, lim, out, &second);
    if (rc)
        return tf_fail(err, rc, "%s; then %s", first->msg, second.msg);
    snprintf(out->fallback, sizeof out->fallback, "%s", first->msg);
    out->seconds += first_seconds;
    return 0;
}

int tf_freeze_solve(const tf_freeze_problem *p, const tf_freeze_control *ctl,
                    tf_freeze_result *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = check_problem(p, err);
    if (rc)
        return rc;
    tf_freeze_control defaults;
    tf_freeze_control_init(&defaults);
    if (!ctl)
        ctl = &defaults;
    double started = tf_now_seconds();
    tf_freeze_limits lim = {ctl->time_limit_s > 0 ? started + ctl->time_limit_s : 0.0,
                            ctl->time_limit_s, ctl->progress,
                            ctl->max_rounds > 0 ? ctl->max_rounds : TF_FAST_MAX_ROUNDS};
    tf_solver solver = p->solver;
    if (solver == TF_SOLVER_AUTO)
        solver = tf_freeze_auto_solver(p);
    /* The one valid input without a plan: found and named before solving. */
    if (tf_freeze_memory_binds(p) && (rc = tf_freeze_memory_check(p, err)))
        return rc;
    tf_error first = {0};
    rc = run_solver(solver, p, &lim, out, &first);
    /* Only a solver's own failure is worth a second try: out of memory or
     * bad input would fail the other one too, and past the time limit no
     * time is left for it. */
    if (rc == TF_ESOLVER && ctl->fallback && !tf_freeze_past_deadline(&lim)) {
        return fall_back(fallback_solver(solver, p), p, &lim, &first, tf_now_seconds() - started,
                         out, err);
    }
    if (rc)
        return tf_fail(err, rc, "%s", first.msg);
    return 0;
}
