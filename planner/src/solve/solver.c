/* solver.c - choosing a freeze solver: names, the size rule of "auto", the
 * dispatch, the time limit and the fallback to the other solver.  The one
 * file that knows both solvers, so neither has to know the other. */
#include <stdio.h>

#include "freeze_common.h"
#include "tf/freeze.h"

/* Below 1,024 actions both solvers take milliseconds, so lp_solve, the
 * general solver the fast one is checked against, solves them; from there
 * on the fast solver is tens to hundreds of times faster and grows far more
 * slowly (docs/results.md has the measurements). */
tf_solver tf_solver_for_size(int n_actions)
{
    return n_actions >= TF_FAST_SOLVER_MIN_ACTIONS ? TF_SOLVER_FAST : TF_SOLVER_LP_SOLVE;
}

void tf_freeze_control_init(tf_freeze_control *c)
{
    c->time_limit_s = 0.0;
    c->fallback = 1;
    c->progress = NULL;
    c->max_rounds = 0;
}

int tf_freeze_past_deadline(const tf_freeze_limits *lim)
{
    return lim && lim->deadline > 0.0 && tf_now_seconds() > lim->deadline;
}

static int run_solver(tf_solver solver, const tf_freeze_limits *lim, const tf_schedule *s,
                      const tf_dag *g, const double *max_ms, const double *min_ms,
                      const double *cap, tf_objective objective, tf_freeze_result *out,
                      tf_error *err)
{
    if (solver == TF_SOLVER_FAST)
        return tf_freeze_fast_run(lim, s, g, max_ms, min_ms, cap, objective, out, err);
    return tf_freeze_lpsolve_run(lim, s, g, max_ms, min_ms, cap, objective, out, err);
}

/* After the first solver failed with `first` (its message): the other one,
 * within what is left of the time.  Both failures are named if it fails
 * too; on success out->fallback keeps the first. */
static int fall_back(tf_solver other, const tf_freeze_limits *lim, const char *first,
                     double first_seconds, const tf_schedule *s, const tf_dag *g,
                     const double *max_ms, const double *min_ms, const double *cap,
                     tf_objective objective, tf_freeze_result *out, tf_error *err)
{
    tf_progress_say(lim->progress, "%s; trying %s", first, tf_solver_name(other));
    tf_error second = {0};
    int rc = run_solver(other, lim, s, g, max_ms, min_ms, cap, objective, out, &second);
    if (rc)
        return tf_fail(err, rc, "%s; then %s", first, second.msg);
    snprintf(out->fallback, sizeof out->fallback, "%s", first);
    out->seconds += first_seconds;
    return 0;
}

int tf_freeze_solve_ctl(const tf_freeze_control *ctl, tf_solver solver, const tf_schedule *s,
                        const tf_dag *g, const double *max_ms, const double *min_ms,
                        const double *cap, tf_objective objective, tf_freeze_result *out,
                        tf_error *err)
{
    tf_freeze_control defaults;
    tf_freeze_control_init(&defaults);
    if (!ctl)
        ctl = &defaults;
    double started = tf_now_seconds();
    tf_freeze_limits lim = {ctl->time_limit_s > 0 ? started + ctl->time_limit_s : 0.0,
                            ctl->time_limit_s, ctl->progress,
                            ctl->max_rounds > 0 ? ctl->max_rounds : TF_FAST_MAX_ROUNDS};
    if (solver == TF_SOLVER_AUTO)
        solver = tf_solver_for_size(s->n_actions);
    tf_error first = {0};
    int rc = run_solver(solver, &lim, s, g, max_ms, min_ms, cap, objective, out, &first);
    /* Only a solver's own failure is worth a second try: out of memory or
     * bad input would fail the other one too, and past the time limit no
     * time is left for it. */
    if (rc == TF_ESOLVER && ctl->fallback && !tf_freeze_past_deadline(&lim)) {
        tf_solver other = solver == TF_SOLVER_FAST ? TF_SOLVER_LP_SOLVE : TF_SOLVER_FAST;
        return fall_back(other, &lim, first.msg, tf_now_seconds() - started, s, g, max_ms,
                         min_ms, cap, objective, out, err);
    }
    if (rc)
        return tf_fail(err, rc, "%s", first.msg);
    return 0;
}

int tf_freeze_solve_with(tf_solver solver, const tf_schedule *s, const tf_dag *g,
                         const double *max_ms, const double *min_ms, const double *cap,
                         tf_objective objective, tf_freeze_result *out, tf_error *err)
{
    return tf_freeze_solve_ctl(NULL, solver, s, g, max_ms, min_ms, cap, objective, out, err);
}
