/* bench_highs.h - the freeze LP solved with HiGHS, for bench-solvers.
 *
 * HiGHS is not packaged for Debian 12; the npm package `highs` is HiGHS
 * compiled to WebAssembly, installed with `npm ci --prefix bench/highs`
 * (bench/highs/package-lock.json pins it).  bench_highs_plan writes the
 * same compact LP as bench_clp.h to a temporary file in CPLEX LP format and
 * runs `node DIR/solve.mjs FILE`, which solves the two lexicographic stages
 * (min T; then min sum r with T at its optimum, warm-started) and prints
 * the ratios.  Ratios within 1e-9 of 0 or 1 are snapped and the batch time
 * is the longest path of the planned durations, as for the other solvers.
 *
 * The timings include what a WebAssembly build costs over a native one,
 * and the end-to-end figure includes starting node and compiling the
 * module; solve_seconds is HiGHS's own run time for the two stages.
 */
#ifndef TF_BENCH_HIGHS_H
#define TF_BENCH_HIGHS_H

#include <stddef.h>

#include "bench_lp.h"

/* Whether DIR holds solve.mjs and an installed `highs` package and `node`
 * runs.  Returns 1, or 0 with the reason in why (size bytes). */
int bench_highs_available(const char *dir, char *why, size_t size);

/* The installed package's version, e.g. "1.15.3", into version (size
 * bytes); "unknown" if it cannot be read. */
void bench_highs_version(const char *dir, char *version, size_t size);

/* Plans profile p with HiGHS, end to end like bench_clp_plan (durations,
 * DAG, bounds, LP, ratios, planned longest path and critical actions), caps
 * from the profile, least-freeze.  Returns 0 with *out filled, TF_ECYCLE
 * (from tf_dag_build), TF_EIO when the LP file cannot be written or node
 * cannot be run, TF_ESOLVER with solve.mjs's message, or TF_ENOMEM. */
int bench_highs_plan(const tf_profile *p, const char *dir, bench_lp_result *out,
                     tf_error *err);

#endif
