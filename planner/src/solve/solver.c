/* solver.c - choosing a freeze solver: names, the size rule of "auto", and
 * the dispatch.  The one file that knows both solvers, so neither has to
 * know the other. */
#include <string.h>

#include "tf/freeze.h"

const char *tf_solver_name(tf_solver solver)
{
    switch (solver) {
    case TF_SOLVER_LP_SOLVE: return "lp_solve";
    case TF_SOLVER_FAST: return "fast";
    default: return "auto";
    }
}

int tf_solver_parse(const char *name, tf_solver *solver)
{
    if (strcmp(name, "auto") == 0)
        *solver = TF_SOLVER_AUTO;
    else if (strcmp(name, "lp_solve") == 0)
        *solver = TF_SOLVER_LP_SOLVE;
    else if (strcmp(name, "fast") == 0)
        *solver = TF_SOLVER_FAST;
    else
        return TF_EINVAL;
    return 0;
}

/* Below 1,024 actions both solvers take milliseconds, so lp_solve, the
 * general solver the fast one is checked against, solves them; from there on the fast solver is several times faster and
 * grows far more slowly (docs/fast-solver.md has the measurements). */
tf_solver tf_solver_for_size(int n_actions)
{
    return n_actions >= TF_FAST_SOLVER_MIN_ACTIONS ? TF_SOLVER_FAST : TF_SOLVER_LP_SOLVE;
}

int tf_freeze_solve_with(tf_solver solver, const tf_schedule *s, const tf_dag *g,
                         const double *max_ms, const double *min_ms, const double *cap,
                         tf_objective objective, tf_freeze_result *out, tf_error *err)
{
    if (solver == TF_SOLVER_AUTO)
        solver = tf_solver_for_size(s->n_actions);
    if (solver == TF_SOLVER_FAST)
        return tf_freeze_solve_fast(s, g, max_ms, min_ms, cap, objective, out, err);
    return tf_freeze_solve(s, g, max_ms, min_ms, cap, objective, out, err);
}
