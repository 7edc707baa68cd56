/* freeze.h - the freeze-ratio linear program and its one entry point,
 * tf_freeze_solve (docs/planner.md explains the LP).
 *
 * Variables: start time t_i of every action, freeze ratio r_i of every
 * freezable action (B or W with min < max), makespan T.  Duration
 * w_i = max_i - r_i (max_i - min_i).  Constraints: t_u + w_u + lag <= t_v per
 * edge, t_u + w_u <= T per sink, per-stage mean r <= cap.  Objective,
 * lexicographic: minimise T; then (least-freeze) minimise sum r, or (spread)
 * minimise max r and then sum r.
 *
 * Three solvers find the same optimum: two general ones on the LP as
 * written, lp_solve and COIN-OR CLP, and the fast solver on its network
 * structure (docs/fast-solver.md).  Each solves the objectives in
 * sequence, each stage keeping the previous optimum as a bound, so the
 * answer is the exact lexicographic optimum (within solver tolerance)
 * rather than a weighted compromise.  The problem names the solver, or
 * "auto" to pick one by size; by default another one solves when the
 * first fails.
 *
 * What to solve (tf_freeze_problem) and how far to go (tf_freeze_control)
 * are structs with init functions, so that a field added to either keeps
 * every caller that starts from the init function working unchanged.
 */
#ifndef TF_FREEZE_H
#define TF_FREEZE_H

#include <stddef.h>

#include "tf/dag.h"
#include "tf/error.h"
#include "tf/memory.h"
#include "tf/objective.h"
#include "tf/schedule.h"
#include "tf/util.h"

/* One freeze LP.  Every array is the caller's, read only, and must stay
 * valid during the solve. */
typedef struct tf_freeze_problem {
    const tf_schedule *schedule;
    const tf_dag *dag;           /* of schedule: dag->n == schedule->n_actions */
    const double *max_ms;        /* n_actions: unfrozen durations, finite, >= 0 */
    const double *min_ms;        /* n_actions: fully frozen, in [0, max_ms[i]] */
    const double *cap;           /* schedule->stages: mean ratio cap per stage, in [0, 1] */
    tf_objective objective;      /* what to minimise after the batch time */
    tf_solver solver;            /* TF_SOLVER_AUTO: tf_freeze_auto_solver */
    /* Memory (tf/memory.h; docs/planner.md, "Memory").  With a model of
     * schedule and a limit per rank that some rank's unfrozen peak exceeds,
     * every rank's live bytes stay within its limit: the freeze ratios of
     * actions that hold bytes become free to choose even where they save
     * no time, and each backward that an R action of the schedule serves
     * gets a recompute ratio q, the R lasting q x recompute_ms.  The
     * objectives go on with least recomputation after least freezing.
     * Otherwise (NULL, or every rank within its limit unfrozen) the limit
     * cannot bind and the problem is that of time alone. */
    const tf_memory_model *memory;
    const double *memory_limit;  /* schedule->ranks: bytes, > 0 */
    const double *recompute_ms;  /* n_actions: an R's duration at q = 1, 0 for other
                                  * actions (an R's max_ms and min_ms are 0); NULL
                                  * when the schedule has no R */
} tf_freeze_problem;

/* Every pointer NULL, least-freeze, solver auto. */
void tf_freeze_problem_init(tf_freeze_problem *p);

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

/* Defaults: no time limit, fallback on, no progress, TF_FAST_MAX_ROUNDS. */
void tf_freeze_control_init(tf_freeze_control *c);

typedef struct tf_freeze_result {
    double makespan;     /* optimal batch time T */
    double *ratio;       /* n: freeze ratio per action (0 for fixed ones) */
    double *duration;    /* n: planned duration w_i */
    double *start;       /* n: earliest start under the planned durations */
    double *recompute;   /* n: recompute ratio of each backward an R serves (0 elsewhere) */
    int variables;       /* columns of the LP; fast: nodes of its network */
    int constraints;     /* rows of the LP; fast: arcs of its network */
    int solves;          /* simplex calls made; fast: network-simplex pricings */
    double seconds;      /* wall time spent building and solving (after a
                          * fallback, both solvers' time) */
    char status[32];     /* "optimal" (a failure is reported in the error) */
    char solver[32];     /* which solver produced it: "lp_solve", "clp" or "fast" */
    char fallback[512];  /* "" or why the solver chosen first failed, when the
                          * fallback then produced it */
} tf_freeze_result;

/* Solves problem p under control ctl (NULL: tf_freeze_control_init's).
 * The solver is p->solver, or for TF_SOLVER_AUTO tf_freeze_auto_solver's.
 * All snap ratios within 1e-9 of 0 or 1 to it and report the makespan as
 * the longest path of the planned durations.  Every path is bounded:
 * lp_solve by its iteration guard, the fast solver by ctl->max_rounds
 * rounds of column generation, and all by the time limit.  Only a
 * TF_ESOLVER before the time limit falls back (out of memory would fail
 * another solver too): from the fast solver to a general one (lp_solve
 * below TF_FAST_SOLVER_MIN_ACTIONS actions, else CLP), from lp_solve to the
 * fast solver (to CLP where a memory limit binds), from CLP to lp_solve.
 *
 * With a binding memory limit a general solver solves (auto picks one;
 * the fast solver declines, and with fallback a general one takes over),
 * and ratios are snapped only where that keeps every rank within its
 * limit.
 *
 * Returns 0 with *out filled (free with tf_freeze_result_free): out->solver
 * names the solver that produced the plan and out->fallback is "" or the
 * first solver's failure.  Errors, with *out zeroed and nothing to free:
 * TF_EINVAL naming the field of p and its value (a NULL array, a DAG of
 * another size, a duration or cap out of range, an unknown objective or
 * solver); TF_ESOLVER naming the solver and the step that failed (both
 * failures when the fallback failed too); TF_ENOMEM.  A memory limit is the
 * one valid input that can leave no plan: TF_EINVAL naming each rank whose
 * smallest achievable peak (freezing and recomputing all the caps allow)
 * is above its limit, that peak and the limit. */
int tf_freeze_solve(const tf_freeze_problem *p, const tf_freeze_control *ctl,
                    tf_freeze_result *out, tf_error *err);

/* The solver TF_SOLVER_AUTO picks for p (a problem tf_freeze_solve
 * accepts): below TF_FAST_SOLVER_MIN_ACTIONS actions lp_solve; from there
 * on CLP for a binding memory limit or many cap rows with few actions each
 * (TF_FAST_SOLVER_MAX_CAP_ROWS, and fewer rows where the schedule fills
 * and drains: TF_FAST_SOLVER_MAX_FILL_DRAIN_ROWS), else the fast solver. */
tf_solver tf_freeze_auto_solver(const tf_freeze_problem *p);

/* Frees what tf_freeze_solve allocated in r and zeroes its pointers; r
 * zeroed, or already freed, is fine. */
void tf_freeze_result_free(tf_freeze_result *r);

/* Writes the version of the code a solver named by tf_freeze_result's
 * `solver` runs into buf[size] and returns buf: lp_solve's ("5.5.2.5"),
 * CLP's ("1.17.6"), or the planner's own for the fast solver. */
char *tf_freeze_solver_version(const char *solver, char *buf, size_t size);

/* The size from which "auto" takes the fast solver: below it every solver
 * takes milliseconds and lp_solve, the general solver the others are
 * checked against, solves; from there on the fast solver is tens to
 * hundreds of times faster (docs/results.md has the measurements). */
#define TF_FAST_SOLVER_MIN_ACTIONS 1024

/* ...unless the stages' caps make more than TF_FAST_SOLVER_MAX_CAP_ROWS
 * rows with fewer than TF_FAST_SOLVER_MIN_ACTIONS_PER_CAP_ROW actions each
 * and the backward is not split into I and W (no W action; where it is,
 * the fast solver was 5 to 35 times faster than CLP on ZBVZeroBubble and
 * InterleavedZeroBubble with 48 to 128 cap rows and 30 to 126 actions per
 * row): there the fast solver's column generation needs many rounds per
 * row and CLP is the faster (Interleaved1F1B, 35 ranks x 3 stages, equal
 * layer times: 70 actions per row CLP 2.1 s against fast 33 s, 100 per row
 * 4.5 s against 8.6 s, 140 per row 16.9 s against 5.3 s; GPipe with 48
 * ranks, 64 per row, 0.3 s against 21 s; 1F1B with 64 ranks, 16 per row,
 * 0.07 s against 4.5 s; docs/planner.md).  A cap row is a stage with a cap
 * above 0 and below 1. */
#define TF_FAST_SOLVER_MAX_CAP_ROWS 32
#define TF_FAST_SOLVER_MIN_ACTIONS_PER_CAP_ROW 128

/* ...and unless every rank runs all its forwards before its first backward
 * (GPipe, LoopedBFS: tf_schedule_fills_then_drains) with more than
 * TF_FAST_SOLVER_MAX_FILL_DRAIN_ROWS cap rows, fewer than
 * TF_FAST_SOLVER_FILL_DRAIN_ACTIONS_PER_ROW2 x rows actions per row, and
 * per-action times (two actions of a stage and type that differ).  There
 * the fast solver's rounds grow with the rows much faster than elsewhere:
 * GPipe with 64 ranks, 128 actions per row, 137 s against CLP's 0.59 s;
 * 48 ranks, 128 per row, 18.7 s against 0.51 s; 32 ranks, 128 per row,
 * 0.89 s against 0.32 s; but 32 ranks with 512 per row 1.8 s against
 * 11.8 s, where CLP's time has grown with the actions.  With a stage's times for
 * every microbatch (tf-study's profiles) the same layouts are the fast
 * solver's: GPipe with 24 and 32 ranks 1.05 to 10 times faster than CLP,
 * with 48 ranks at 128 per row 1.04 s against 1.33 s (docs/planner.md,
 * section 5). */
#define TF_FAST_SOLVER_MAX_FILL_DRAIN_ROWS 16
#define TF_FAST_SOLVER_FILL_DRAIN_ACTIONS_PER_ROW2 16

/* Rounds of column generation (pricings) the fast solver may take in one
 * solve, all stages together; the benchmark profiles take 15-1,500. */
#define TF_FAST_MAX_ROUNDS 20000

#endif
