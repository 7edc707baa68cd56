/* freeze_lpsolve.h - the freeze LP as written, built in lp_solve's sparse
 * model and shared by freeze_lpsolve.c (time: the DAG, the caps, the
 * objectives, and the lexicographic solve), freeze_memory.c (memory: the
 * running-sum rows of every rank's bytes, and each rank's smallest
 * achievable peak) and freeze_clp.c (the same model and solve with CLP's
 * simplex and barrier).  Internal to solve/. */
#ifndef TF_FREEZE_LPSOLVE_H
#define TF_FREEZE_LPSOLVE_H

#include <lpsolve/lp_lib.h>

#include "freeze_common.h"

/* The model under construction.  Columns (1-based, lp_solve's convention):
 *   1 .. n           t_i, the start of action i
 *   then k           r_i, the freeze ratio of each freezable action
 *   then kq          q_j, the recompute ratio of each backward an R serves
 *   then             T, the makespan; z, the largest ratio (spread only);
 *                    s, the sum of ratios (only with recomputation: the
 *                    last objective keeps it at its optimum)
 *   then             y_e, the live bytes of every rank after memory event e,
 *                    in units of the rank's limit (only when memory binds) */
typedef struct lp_engine lp_engine;

typedef struct lp_model {
    lprec *lp;
    const lp_engine *engine;   /* which simplex solves it */
    void *engine_state;        /* what the engine's load made (CLP: its copy), or NULL */
    int n;                     /* actions */
    int k, kq;                 /* freezable actions, recomputed backwards */
    int *ratio_column;         /* n: column of r_i, 0 if fixed */
    int *recompute_column;     /* n: column of q_j, 0 if the backward does not recompute */
    int *recompute_of;         /* n: for an R action, the backward it serves; else -1 */
    double *span;              /* n: max - min */
    int col_T, col_z, col_sum;
    int col_y;                 /* the first y column; 0 without memory rows */
    long long iteration_limit; /* guard against lp_solve cycling (lpsolve_solve) */
    const tf_freeze_limits *lim; /* time limit and progress (may be NULL) */
    const char *step;          /* the objective being minimised, for progress lines */
    int timed_out;             /* the abort callback stopped a solve at the deadline */
    int rows, columns;         /* the built model's size, which solves must keep */
} lp_model;

int tf_lp_add_row(lp_model *m, int count, double *values, int *columns, int type, double rhs);

/* Statuses of a solve beyond lp_solve's own (OPTIMAL, INFEASIBLE, ...),
 * which both engines report in.  MODEL_DAMAGED: a failed solve left the
 * model with other dimensions than it was built with (seen after a
 * numerical failure of lp_solve's primal retry), so nothing more can be
 * read from or solved on it. */
enum { MODEL_DAMAGED = -100, TIME_LIMIT = -101 };

/* What the lexicographic solve asks of a simplex.  Columns are 1-based as
 * in lp_solve; `load` (may be NULL) copies the built model into the
 * engine's own, `release` frees that copy. */
struct lp_engine {
    const char *name;                                      /* in messages */
    int (*load)(lp_model *m);                              /* 0 or TF_ENOMEM */
    void (*release)(lp_model *m);
    int (*solve)(lp_model *m, int *solves);                /* a status above */
    int (*set_objective)(lp_model *m, int count, double *values, int *columns);
    void (*set_upper)(lp_model *m, int column, double value);
    void (*restart)(lp_model *m);                          /* next solve from scratch */
    double (*value)(lp_model *m, int column);              /* in the last solution */
    long long (*iterations)(lp_model *m);                  /* so far, for messages */
};

/* Builds p's model, solves it lexicographically with engine e (minimise
 * the batch time; then the largest ratio for spread, the total ratio and
 * with recomputation the total recompute ratio, each keeping the optimum
 * before it) and fills out as tf_freeze_lpsolve_run does. */
int tf_lp_run(const tf_freeze_problem *p, const tf_freeze_limits *lim, const lp_engine *e,
              tf_freeze_result *out, tf_error *err);

/* The y rows of every rank into m (in row mode, columns from m->col_y on):
 * y_e - y_(e-1) - (the event's change) / limit = 0, the first from the
 * rank's static bytes; y_e at most 1 less a margin of 1e-9 where the event
 * can raise the bytes.  Returns 0 or TF_ENOMEM. */
int tf_lp_add_memory_rows(lp_model *m, const tf_freeze_problem *p);

/* The margin below a limit that plans keep, so that the solver's
 * round-off cannot leave a peak above the limit itself. */
double tf_lp_memory_target(double limit);

#endif
