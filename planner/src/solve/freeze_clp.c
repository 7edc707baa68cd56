/* freeze_clp.c - the freeze LP as freeze_lpsolve.c builds it, solved with
 * COIN-OR CLP.
 *
 * Why a second general solver: lp_solve's simplex is slow on the LPs that
 * the fast solver does not take or takes slowly, those with memory rows
 * (one per memory event, a few per cent binding) and those with many cap
 * rows (Interleaved1F1B with 24 or more ranks x 3 stages), where CLP's
 * barrier with crossover is tens to hundreds of times faster
 * (docs/planner.md, section 5).  The model is the one lp_solve's sparse
 * form holds, copied column by column, so the two solve the same LP and
 * the lexicographic sequence (tf_lp_run) is written once.
 *
 * The first solve, and any after a restart, is a barrier with crossover
 * (falling back to CLP's default simplex if it does not prove an optimum);
 * each later one changes an objective or tightens a bound that the last
 * optimum meets, so its primal simplex starts from that optimal basis.
 */
#include <coin/Clp_C_Interface.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "freeze_lpsolve.h"
#include "tf/util.h"

/* CLP's model and the arrays its bound and objective changes take whole. */
typedef struct clp_copy {
    Clp_Simplex *model;
    int columns;
    double *upper;         /* columns: column upper bounds */
    double *objective;     /* columns */
    long long iterations;  /* over every solve */
    int cold;              /* the next solve starts from scratch */
    int bounded;           /* the column clp_set_upper bounded last (1-based), or 0 */
    double bound;          /* ...and the bound it was asked for */
} clp_copy;

static clp_copy *copy_of(lp_model *m)
{
    return m->engine_state;
}

/* lp_solve's infinite bound (1e30) as CLP's (DBL_MAX). */
static double bound(lprec *lp, double value)
{
    return is_infinite(lp, value) ? (value > 0 ? DBL_MAX : -DBL_MAX) : value;
}

/* Row bounds of lp_solve row i (1-based): [rhs, inf), (-inf, rhs] or
 * [rhs, rhs]. */
static void row_bounds(lprec *lp, int i, double *lower, double *upper)
{
    const double rhs = get_rh(lp, i);
    const int type = get_constr_type(lp, i);
    *lower = type == LE ? -DBL_MAX : rhs;
    *upper = type == GE ? DBL_MAX : rhs;
}

/* The matrix in CLP's column-major form, the objective row (lp_solve's
 * row 0) left out of it and into c->objective: get_nonzeros counts the
 * matrix alone, so its entries fit.  Returns 0 or TF_ENOMEM. */
static int copy_matrix(lprec *lp, clp_copy *c, int rows, int *start, int **index,
                       double **value)
{
    const size_t capacity = (size_t)get_nonzeros(lp) + 1;
    int *nz_row = malloc(((size_t)rows + 2) * sizeof *nz_row);
    double *nz_value = malloc(((size_t)rows + 2) * sizeof *nz_value);
    *index = malloc(capacity * sizeof **index);
    *value = malloc(capacity * sizeof **value);
    if (!nz_row || !nz_value || !*index || !*value) {
        free(nz_row);
        free(nz_value);
        return TF_ENOMEM;
    }
    int count = 0;
    for (int j = 1; j <= c->columns; j++) {
        start[j - 1] = count;
        const int nz = get_columnex(lp, j, nz_value, nz_row);
        for (int k = 0; k < nz; k++) {
            if (nz_row[k] == 0) {
                c->objective[j - 1] = nz_value[k];
            } else {
                (*index)[count] = nz_row[k] - 1;
                (*value)[count++] = nz_value[k];
            }
        }
    }
    start[c->columns] = count;
    free(nz_row);
    free(nz_value);
    return 0;
}

/* Copies m->lp into a new CLP model (m->engine_state). */
static int clp_load(lp_model *m)
{
    lprec *lp = m->lp;
    const int rows = get_Nrows(lp), columns = get_Ncolumns(lp);
    clp_copy *c = calloc(1, sizeof *c);
    if (!c)
        return TF_ENOMEM;
    m->engine_state = c;
    c->columns = columns;
    c->cold = 1;
    c->upper = malloc((size_t)columns * sizeof *c->upper);
    c->objective = calloc((size_t)columns, sizeof *c->objective);
    double *lower = malloc((size_t)columns * sizeof *lower);
    double *row_lower = malloc(((size_t)rows + 1) * sizeof *row_lower);
    double *row_upper = malloc(((size_t)rows + 1) * sizeof *row_upper);
    int *start = malloc(((size_t)columns + 1) * sizeof *start);
    int *index = NULL;
    double *value = NULL;
    int rc = c->upper && c->objective && lower && row_lower && row_upper && start
                 ? copy_matrix(lp, c, rows, start, &index, &value)
                 : TF_ENOMEM;
    if (!rc && !(c->model = Clp_newModel()))
        rc = TF_ENOMEM;
    if (!rc) {
        for (int j = 0; j < columns; j++) {
            lower[j] = bound(lp, get_lowbo(lp, j + 1));
            c->upper[j] = bound(lp, get_upbo(lp, j + 1));
        }
        for (int i = 0; i < rows; i++)
            row_bounds(lp, i + 1, &row_lower[i], &row_upper[i]);
        Clp_setLogLevel(c->model, 0);
        /* CLP's default, 1e-7, lets each row be off by that much, and along
         * a path of hundreds of actions the plan's batch time (the longest
         * path of its durations) came out 2.2e-8 relative above the LP's
         * (tf-study's 530B layout, 35 microbatches), beyond the 1e-9 the
         * solvers are held to; at 1e-9 it is 1.6e-11. */
        Clp_setPrimalTolerance(c->model, 1e-9);
        /* Its default dual tolerance, 1e-7, ended a least-freeze stage on a
         * fuzzed memory profile (durations six orders of magnitude apart)
         * with 1.3e-4 (1e-5 relative) more freezing than lp_solve's plan at
         * the same batch time, both within the caps and the limit; at 1e-9
         * it is lp_solve's to 6e-10 (tests/planner/regressions). */
        Clp_setDualTolerance(c->model, 1e-9);
        Clp_loadProblem(c->model, columns, rows, start, index, value, lower, c->upper,
                        c->objective, row_lower, row_upper);
    }
    free(lower);
    free(row_lower);
    free(row_upper);
    free(start);
    free(index);
    free(value);
    return rc;
}

static void clp_release(lp_model *m)
{
    clp_copy *c = copy_of(m);
    if (!c)
        return;
    if (c->model)
        Clp_deleteModel(c->model);
    free(c->upper);
    free(c->objective);
    free(c);
    m->engine_state = NULL;
}

/* CLP's status in lp_solve's words (Clp_status: 0 optimal, 1 primal
 * infeasible, 2 dual infeasible, 3 stopped on iterations or time, 4
 * stopped on errors). */
static int status_of(Clp_Simplex *model)
{
    switch (Clp_status(model)) {
    case 0: return Clp_isProvenOptimal(model) ? OPTIMAL : NUMFAILURE;
    case 1: return INFEASIBLE;
    case 2: return UNBOUNDED;
    case 3: return SUBOPTIMAL;
    default: return NUMFAILURE;
    }
}

static int clp_set_objective(lp_model *m, int count, double *values, int *columns)
{
    clp_copy *c = copy_of(m);
    memset(c->objective, 0, (size_t)c->columns * sizeof *c->objective);
    for (int k = 0; k < count; k++)
        c->objective[columns[k] - 1] = values[k];
    Clp_chgObjCoefficients(c->model, c->objective);
    return 0;
}

/* Sets column's upper bound `slack` relative above value. */
static void place_bound(clp_copy *c, int column, double value, double slack)
{
    c->upper[column - 1] = value + slack * fabs(value);
    Clp_chgColumnUpper(c->model, c->upper);
}

static void clp_set_upper(lp_model *m, int column, double value)
{
    clp_copy *c = copy_of(m);
    c->bounded = column;
    c->bound = value;
    place_bound(c, column, value, 0.0);
}

/* After a CLP solve: counts it and its iterations; returns its status. */
static int counted(clp_copy *c, int *solves)
{
    c->iterations += Clp_numberIterations(c->model);
    (*solves)++;
    return status_of(c->model);
}

/* A primal simplex from the last basis, and if that is infeasible with a
 * bound just placed at the optimum before it, again with the bound 1e-14,
 * 1e-13 and 1e-12 relative above it.  The optimum CLP reports can sit a
 * few ulps above the bound made of it, because CLP works on a scaled copy,
 * and then even the optimal basis is infeasible: on Interleaved1F1B with
 * 12 ranks x 3 and 2,592 actions the least-freeze stage was, up to 1e-15,
 * and the sequence's own next step, 1e-9 higher, froze 0.42 less in all
 * than at 1e-14, beyond the plan's tolerance. */
static int warm_solve(clp_copy *c, int *solves)
{
    Clp_primal(c->model, 0);
    int status = counted(c, solves);
    for (double slack = 1e-14; status == INFEASIBLE && c->bounded && slack <= 1e-12;
         slack *= 10.0) {
        place_bound(c, c->bounded, c->bound, slack);
        Clp_primal(c->model, 0);
        status = counted(c, solves);
    }
    return status;
}

/* The barrier with crossover, or CLP's default simplex where that does not
 * prove an optimum. */
static int cold_solve(clp_copy *c, const tf_freeze_limits *lim, int *solves)
{
    Clp_initialBarrierSolve(c->model);
    int status = counted(c, solves);
    if (status != OPTIMAL && !tf_freeze_past_deadline(lim)) {
        Clp_initialSolve(c->model);
        status = counted(c, solves);
    }
    return status;
}

static int clp_solve(lp_model *m, int *solves)
{
    clp_copy *c = copy_of(m);
    if (m->lim && m->lim->progress)
        tf_progress_note(m->lim->progress, "clp: minimising %s", m->step);
    if (m->lim && m->lim->deadline > 0.0) {
        const double left = m->lim->deadline - tf_now_seconds();
        if (left <= 0.0)
            return TIME_LIMIT;
        Clp_setMaximumSeconds(c->model, left);
    }
    int status = c->cold ? cold_solve(c, m->lim, solves) : warm_solve(c, solves);
    c->cold = 0;
    if (status != OPTIMAL && tf_freeze_past_deadline(m->lim))
        return TIME_LIMIT;
    return status;
}

static void clp_restart(lp_model *m)
{
    copy_of(m)->cold = 1;
}

static double clp_value(lp_model *m, int column)
{
    return Clp_primalColumnSolution(copy_of(m)->model)[column - 1];
}

static long long clp_iterations(lp_model *m)
{
    return copy_of(m)->iterations;
}

static const lp_engine clp_engine = {
    .name = "clp",
    .load = clp_load,
    .release = clp_release,
    .solve = clp_solve,
    .set_objective = clp_set_objective,
    .set_upper = clp_set_upper,
    .restart = clp_restart,
    .value = clp_value,
    .iterations = clp_iterations,
};

int tf_freeze_clp_run(const tf_freeze_problem *p, const tf_freeze_limits *lim,
                      tf_freeze_result *out, tf_error *err)
{
    return tf_lp_run(p, lim, &clp_engine, out, err);
}

char *tf_freeze_clp_version(char *buf, size_t size)
{
    snprintf(buf, size, "%s", Clp_Version());
    return buf;
}
