/* freeze_lpsolve.h - the lp_solve model of the freeze LP, shared by
 * freeze_lpsolve.c (time: the DAG, the caps, the objectives) and
 * freeze_memory.c (memory: the running-sum rows of every rank's bytes, and
 * each rank's smallest achievable peak).  Internal to solve/. */
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
typedef struct lp_model {
    lprec *lp;
    int n;                     /* actions */
    int k, kq;                 /* freezable actions, recomputed backwards */
    int *ratio_column;         /* n: column of r_i, 0 if fixed */
    int *recompute_column;     /* n: column of q_j, 0 if the backward does not recompute */
    int *recompute_of;         /* n: for an R action, the backward it serves; else -1 */
    double *span;              /* n: max - min */
    int col_T, col_z, col_sum;
    int col_y;                 /* the first y column; 0 without memory rows */
    long long iteration_limit; /* guard against a cycling simplex (guarded_solve) */
    const tf_freeze_limits *lim; /* time limit and progress (may be NULL) */
    const char *step;          /* the objective being minimised, for progress lines */
    int timed_out;             /* the abort callback stopped a solve at the deadline */
    int rows, columns;         /* the built model's size, which solves must keep */
} lp_model;

int tf_lp_add_row(lp_model *m, int count, double *values, int *columns, int type, double rhs);

/* The y rows of every rank into m (in row mode, columns from m->col_y on):
 * y_e - y_(e-1) - (the event's change) / limit = 0, the first from the
 * rank's static bytes; y_e at most 1 less a margin of 1e-9 where the event
 * can raise the bytes.  Returns 0 or TF_ENOMEM. */
int tf_lp_add_memory_rows(lp_model *m, const tf_freeze_problem *p);

/* The margin below a limit that plans keep, so that the solver's
 * round-off cannot leave a peak above the limit itself. */
double tf_lp_memory_target(double limit);

#endif
