/* freeze.h - the freeze-ratio linear program (docs/planner.md explains it).
 *
 * Variables: start time t_i of every action, freeze ratio r_i of every
 * freezable action (B or W with min < max), makespan T.  Duration
 * w_i = max_i - r_i (max_i - min_i).  Constraints: t_u + w_u + lag <= t_v per
 * edge, t_u + w_u <= T per sink, per-stage mean r <= cap.  Objective,
 * lexicographic: minimise T; then (least-freeze) minimise sum r, or (spread)
 * minimise max r and then sum r.
 *
 * Two solvers find the same optimum: tf_freeze_solve hands the LP to
 * lp_solve, tf_freeze_solve_fast uses its network structure
 * (docs/fast-solver.md).  Both solve the objectives in sequence, each stage
 * keeping the previous optimum as a bound, so the answer is the exact
 * lexicographic optimum (within solver tolerance) rather than a weighted
 * compromise.  tf_freeze_solve_with and tf_freeze_solve_ctl pick one by
 * name, or by size for "auto" (tf-plan --solver), and by default fall back
 * to the other when the first fails.
 */
#ifndef TF_FREEZE_H
#define TF_FREEZE_H

#include <stddef.h>

#include "tf/dag.h"
#include "tf/error.h"
#include "tf/objective.h"
#include "tf/schedule.h"
#include "tf/util.h"

typedef struct tf_freeze_result {
    double makespan;     /* optimal batch time T */
    double *ratio;       /* n: freeze ratio per action (0 for fixed ones) */
    double *duration;    /* n: planned duration w_i */
    double *start;       /* n: earliest start under the planned durations */
    int variables;       /* columns of the LP; fast: nodes of its network */
    int constraints;     /* rows of the LP; fast: arcs of its network */
    int solves;          /* lp_solve calls made; fast: network-simplex pricings */
    double seconds;      /* wall time spent building and solving (after a
                          * fallback, both solvers' time) */
    char status[32];     /* "optimal" (a failure is reported in the error) */
    char solver[32];     /* which solver produced it: "lp_solve" or "fast" */
    char fallback[512];  /* "" or why the solver chosen first failed, when the
                          * other one then produced it (tf_freeze_solve_ctl) */
} tf_freeze_result;

/* Turns solved ratios (g->n of them) into a plan, as every solver does:
 * snaps ratio[i] within 1e-9 of 0 or 1 to it (solver round-off), sets
 * duration[i] = max - ratio (max - min), and returns the longest path under
 * those durations with the start times in start.  All arrays are the
 * caller's; NAN if start is NULL and no scratch memory is available. */
double tf_freeze_apply_ratios(const tf_dag *g, const double *max_ms, const double *min_ms,
                              double *ratio, double *duration, double *start);

/* Solves the freeze LP with lp_solve for schedule s with DAG g, durations
 * max_ms/min_ms and per-stage caps cap[s->stages] in [0, 1]: one solve per
 * objective stage, each from the last optimal basis, under the iteration
 * guard but no time limit and without fallback.  Returns 0 with *out filled
 * (free with tf_freeze_result_free; out->solver "lp_solve"), or TF_ESOLVER
 * naming lp_solve's status, or TF_ENOMEM.  Never returns a partial result. */
int tf_freeze_solve(const tf_schedule *s, const tf_dag *g, const double *max_ms,
                    const double *min_ms, const double *cap, tf_objective objective,
                    tf_freeze_result *out, tf_error *err);

void tf_freeze_result_free(tf_freeze_result *r);

/* Writes lp_solve's version ("5.5.2.5") into buf[size]; returns buf. */
char *tf_freeze_solver_version(char *buf, size_t size);

/* --- The fast solver (planner/src/solve/freeze_fast.c, docs/fast-solver.md) -
 *
 * Same contract as tf_freeze_solve (same LP, same lexicographic objectives,
 * same snapping of ratios within 1e-9 of 0 or 1, makespan recomputed as the
 * longest path of the planned durations), different algorithm: Dantzig-Wolfe
 * decomposition with a network simplex for the precedence constraints and a
 * small dense simplex for the master over the stage caps.  out->solver is
 * "fast"; variables/constraints count the network's nodes and arcs; solves
 * counts network-simplex (pricing) solves.  At most TF_FAST_MAX_ROUNDS rounds
 * of column generation, no time limit, no fallback.  Returns 0, TF_ENOMEM, or
 * TF_ESOLVER naming the step that failed (TF_EINVAL only if its network
 * comes out miscounted); never a partial result.  The same optimum, tens to
 * hundreds of times faster than lp_solve from 2,048 actions on
 * (docs/results.md has the measurements); "auto" uses it from
 * TF_FAST_SOLVER_MIN_ACTIONS on. */
int tf_freeze_solve_fast(const tf_schedule *s, const tf_dag *g, const double *max_ms,
                         const double *min_ms, const double *cap, tf_objective objective,
                         tf_freeze_result *out, tf_error *err);

/* --- Choosing a solver ------------------------------------------------- */

/* The solver "auto" uses for a schedule of n_actions actions: lp_solve
 * below TF_FAST_SOLVER_MIN_ACTIONS, fast from there on. */
#define TF_FAST_SOLVER_MIN_ACTIONS 1024
tf_solver tf_solver_for_size(int n_actions);

/* Solves with the chosen solver (auto: tf_solver_for_size); same contract as
 * tf_freeze_solve, except that when the chosen solver fails with TF_ESOLVER
 * the other one solves, and out->solver names the solver that produced the
 * plan.  tf_freeze_solve_ctl with the default control (fallback, no time
 * limit, silent). */
int tf_freeze_solve_with(tf_solver solver, const tf_schedule *s, const tf_dag *g,
                         const double *max_ms, const double *min_ms, const double *cap,
                         tf_objective objective, tf_freeze_result *out, tf_error *err);

/* What bounds a solve beyond the solvers' own iteration limits, and who
 * hears of its progress. */
typedef struct tf_freeze_control {
    double time_limit_s;    /* > 0: give up after this long (wall clock), TF_ESOLVER
                             * saying so; 0: no time limit */
    int fallback;           /* 1: if the solver chosen fails (TF_ESOLVER) before the
                             * time limit, the other one solves within what is left,
                             * and out->fallback says why; 0: report the failure */
    tf_progress *progress;  /* progress lines from long solves; NULL: none */
    int max_rounds;         /* the fast solver's rounds of column generation; 0:
                             * TF_FAST_MAX_ROUNDS (fewer: to test the fallback) */
} tf_freeze_control;

/* Defaults: no time limit, fallback on, no progress. */
void tf_freeze_control_init(tf_freeze_control *c);

/* tf_freeze_solve_with under control ctl (NULL: the defaults).  Every path
 * is bounded: lp_solve by its iteration guard and the fast solver by
 * max_rounds rounds of column generation, and both by the time limit.
 * Only a TF_ESOLVER before the time limit falls back (out of memory would
 * fail the other solver too).  Returns 0 with out->solver the solver that
 * produced the plan and out->fallback "" or the first solver's failure; or
 * the failure (both failures named when the fallback failed too). */
int tf_freeze_solve_ctl(const tf_freeze_control *ctl, tf_solver solver, const tf_schedule *s,
                        const tf_dag *g, const double *max_ms, const double *min_ms,
                        const double *cap, tf_objective objective, tf_freeze_result *out,
                        tf_error *err);

/* Rounds of column generation (pricings) the fast solver may take in one
 * solve, all stages together; the benchmark profiles take 15-1,500. */
#define TF_FAST_MAX_ROUNDS 20000

#endif
