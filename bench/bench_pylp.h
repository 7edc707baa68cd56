/* bench_pylp.h - the freeze LP solved by native HiGHS from Python, for
 * bench-solvers: its "highs" rows (HiGHS through highspy) and "scipy" rows
 * (scipy.optimize.linprog with method="highs", SciPy's own copy of HiGHS).
 *
 * HiGHS has no Debian 12 package; both Python packages are in the PyTorch
 * environment (tools/torch-env/requirements.txt, `bash tools/bootstrap.sh
 * pytorch`).  bench_pylp_plan writes the compact LP below to a temporary
 * file in CPLEX LP format and runs `PYTHON SCRIPT SOLVER FILE`
 * (SCRIPT: bench/solve_lp.py), which solves the two lexicographic stages
 * (min T; then min sum r with T at its optimum) and prints the ratios.
 * Ratios within 1e-9 of 0 or 1 are snapped and the batch time is the
 * longest path of the planned durations, as for the other solvers.
 *
 * The LP is planner/src/solve/freeze_lpsolve.c's (least-freeze only),
 * written here a second time so that these rows check that one:
 *   columns  t_i >= 0 per action, r_j in [0, 1] per freezable action, T >= 0;
 *   rows     t_v - t_u + d_u r_u >= max_u + lag  per DAG edge, except same-rank
 *            edges that are not rank-order edges (implied by the rank order);
 *            T - t_u + d_u r_u >= max_u  per sink;
 *            sum_{stage s} r_j <= cap_s x count_s  per stage with freezable
 *            actions and cap_s < 1;
 * with d_u = max_u - min_u and the r_u term only for freezable u.
 *
 * The end-to-end time includes starting Python, importing the solver and
 * reading the LP file; solve_seconds is the solver's own calls over both
 * stages (highspy's run(), or linprog()).
 */
#ifndef TF_BENCH_PYLP_H
#define TF_BENCH_PYLP_H

#include <stddef.h>

#include "bench_lp.h"

/* The Python solvers. */
typedef enum { BENCH_PYLP_HIGHS, BENCH_PYLP_SCIPY } bench_pylp_solver;

/* Where the rows' Python and script are. */
typedef struct bench_pylp {
    const char *python;  /* the interpreter, e.g. .venv-torch/bin/python */
    const char *script;  /* bench/solve_lp.py */
} bench_pylp;

/* Whether `solver` can run: the script is readable and py->python imports
 * the solver's package.  Returns 1 with its version in version (size
 * bytes, e.g. "1.16.0"), or 0 with the reason there. */
int bench_pylp_available(const bench_pylp *py, bench_pylp_solver solver, char *version,
                         size_t size);

/* Plans profile p with `solver`, end to end like tf_plan_from_profile
 * (durations, DAG, bounds, LP, ratios, planned longest path and critical
 * actions), caps from the profile, least-freeze.  The LP goes to a file
 * in $TMPDIR (else /tmp), removed afterwards unless the process is killed
 * first.  Returns 0 with *out
 * filled, TF_ECYCLE (from tf_dag_build), TF_EIO when the LP file cannot be
 * written or Python cannot be run, TF_ESOLVER with the script's message,
 * or TF_ENOMEM. */
int bench_pylp_plan(const tf_profile *p, const bench_pylp *py, bench_pylp_solver solver,
                    bench_lp_result *out, tf_error *err);

#endif
