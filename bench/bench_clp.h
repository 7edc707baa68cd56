/* bench_clp.h - the freeze LP solved with COIN-OR CLP, for bench-solvers.
 *
 * Built only when CMake finds CLP (Debian: coinor-libclp-dev); then
 * TF_BENCH_HAVE_CLP is defined.  The model is the same compact LP as
 * planner/src/solve/freeze_lpsolve.c (least-freeze objective only):
 *   columns  t_i >= 0 per action, r_j in [0, 1] per freezable action, T >= 0;
 *   rows     t_v - t_u + d_u r_u >= max_u + lag  per DAG edge, except same-rank
 *            edges that are not rank-order edges (implied by the rank order);
 *            T - t_u + d_u r_u >= max_u  per sink;
 *            sum_{stage s} r_j <= cap_s x count_s  per stage with freezable
 *            actions and cap_s < 1;
 * with d_u = max_u - min_u and the r_u term only for freezable u.  Solved
 * lexicographically as freeze_lpsolve.c does: min T (Clp_initialSolve); then T's
 * upper bound fixed at the optimum (relaxed by 1e-9 relative only if round-off
 * makes that infeasible) and min sum r (Clp_primal from the optimal basis).
 * Ratios within 1e-9 of 0 or 1 are snapped, and the batch time is the longest
 * path of the planned durations, as in tf_freeze_solve.
 */
#ifndef TF_BENCH_CLP_H
#define TF_BENCH_CLP_H

#include "bench_lp.h"

/* CLP's version as the library reports it, e.g. "1.17.6" (static). */
const char *bench_clp_version(void);

/* Plans profile p with CLP, end to end like tf_plan_from_profile (durations,
 * DAG, unfrozen and all-frozen bounds, LP, ratios, planned longest path and
 * critical actions), caps from the profile, least-freeze.  Returns 0 with *out
 * filled, TF_ECYCLE (from tf_dag_build), TF_ESOLVER naming CLP's status and
 * the step, or TF_ENOMEM.  out->solve_seconds covers building the LP and
 * both CLP solves. */
int bench_clp_plan(const tf_profile *p, bench_lp_result *out, tf_error *err);

#endif
