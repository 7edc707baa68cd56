/* freeze_fast_master.c - dense two-phase tableau simplex for the small master
 * LP of freeze_fast.c (see freeze_fast_master.h). */
#include "freeze_fast_master.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tf/error.h"

typedef long double real;

typedef struct tableau {
    int rows, width;      /* width = cols + rows (one slack or artificial per row) + 1 */
    int cols;
    real *t;              /* (rows + 1) x width; row `rows` is the objective */
    int *basis;           /* rows */
    unsigned char *barred; /* width: may not enter (artificials in phase 2) */
} tableau;

#define AT(tb, i, j) ((tb)->t[(size_t)(i) * (size_t)(tb)->width + (size_t)(j)])

static void pivot_on(tableau *tb, int row, int col)
{
    const int w = tb->width;
    real p = AT(tb, row, col);
    for (int j = 0; j < w; j++)
        AT(tb, row, j) /= p;
    AT(tb, row, col) = 1.0L;
    for (int i = 0; i <= tb->rows; i++) {
        if (i == row)
            continue;
        real f = AT(tb, i, col);
        if (f == 0.0L)
            continue;
        for (int j = 0; j < w; j++)
            AT(tb, i, j) -= f * AT(tb, row, j);
        AT(tb, i, col) = 0.0L;
    }
    tb->basis[row] = col;
}

/* Fills the tableau rows from the original data (A | I | b). */
static void load_rows(tableau *tb, const double *a, const double *b)
{
    const int rows = tb->rows, cols = tb->cols, rhs = tb->width - 1;
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < tb->width; j++)
            AT(tb, i, j) = 0.0L;
        for (int j = 0; j < cols; j++)
            AT(tb, i, j) = a[(size_t)i * (size_t)cols + (size_t)j];
        AT(tb, i, cols + i) = 1.0L;
        AT(tb, i, rhs) = b[i];
    }
}

/* The objective row c - c_B B^-1 A for the tableau's current basis. */
static void price_row(tableau *tb, const double *c)
{
    const int obj = tb->rows, cols = tb->cols;
    for (int j = 0; j < tb->width; j++)
        AT(tb, obj, j) = j < cols ? (real)c[j] : 0.0L;
    for (int i = 0; i < tb->rows; i++) {
        int k = tb->basis[i];
        real ck = k < cols ? (real)c[k] : 0.0L;
        if (ck != 0.0L)
            for (int j = 0; j < tb->width; j++)
                AT(tb, obj, j) -= ck * AT(tb, i, j);
    }
}

/* Rebuilds the tableau of the current basis from the original data by
 * Gauss-Jordan elimination with partial pivoting, discarding the round-off
 * that hundreds of tableau pivots accumulate (the master's columns are
 * nearly parallel near the optimum).  Basic values down to -allowed count
 * as round-off and become 0.  Returns 0, or 1 (tableau unchanged) if the
 * basis is numerically singular, infeasible beyond that, or memory runs
 * out. */
static int refactor(tableau *tb, const double *a, const double *b, const double *c,
                    real allowed)
{
    const int rows = tb->rows, rhs = tb->width - 1;
    size_t cells = (size_t)(rows + 1) * (size_t)tb->width;
    tableau fresh = *tb;
    fresh.t = malloc(cells * sizeof *fresh.t);
    fresh.basis = malloc(((size_t)rows + 1) * sizeof *fresh.basis);
    unsigned char *done = calloc((size_t)rows + 1, 1);
    int rc = !fresh.t || !fresh.basis || !done;
    if (!rc) {
        load_rows(&fresh, a, b);
        for (int k = 0; k < rows && !rc; k++) {
            int col = tb->basis[k], best = -1;
            for (int i = 0; i < rows; i++)
                if (!done[i] && (best < 0 || fabsl(AT(&fresh, i, col)) >
                                                 fabsl(AT(&fresh, best, col))))
                    best = i;
            if (best < 0 || fabsl(AT(&fresh, best, col)) < 1e-12L)
                rc = 1;
            else {
                done[best] = 1;
                pivot_on(&fresh, best, col);
            }
        }
    }
    for (int i = 0; i < rows && !rc; i++)
        if (AT(&fresh, i, rhs) < -allowed)
            rc = 1;
    if (!rc) {
        for (int i = 0; i < rows; i++)
            if (AT(&fresh, i, rhs) < 0.0L)
                AT(&fresh, i, rhs) = 0.0L;
        price_row(&fresh, c);
        memcpy(tb->t, fresh.t, cells * sizeof *fresh.t);
        memcpy(tb->basis, fresh.basis, (size_t)rows * sizeof *fresh.basis);
    }
    free(fresh.t);
    free(fresh.basis);
    free(done);
    return rc;
}

/* Whether some column that may enter has reduced cost below -eps. */
static int improvable(const tableau *tb, real eps)
{
    for (int j = 0; j < tb->width - 1; j++)
        if (!tb->barred[j] && AT(tb, tb->rows, j) < -eps)
            return 1;
    return 0;
}

/* Runs the simplex on the objective row; returns 0 optimal, TF_ESOLVER if
 * unbounded or out of iterations. */
static int iterate(tableau *tb, real eps)
{
    const int rhs = tb->width - 1, obj = tb->rows;
    int degenerate_run = 0;
    long limit = 50000L + 200L * (long)(tb->width + tb->rows);
    for (long it = 0; it < limit; it++) {
        int enter = -1;
        real best = -eps;
        int bland = degenerate_run > 50;
        for (int j = 0; j < rhs; j++) {
            if (tb->barred[j])
                continue;
            real d = AT(tb, obj, j);
            if (d < best) {
                enter = j;
                best = d;
                if (bland)
                    break;
            }
        }
        if (enter < 0)
            return 0;
        /* Harris' two-pass ratio test: the smallest ratio with every basic
         * value allowed 1e-12 below zero, then among the rows within that
         * ratio the largest pivot, so round-off never forces a tiny pivot. */
        const real pivot_tol = 1e-9L, slack = 1e-12L;
        real bound = INFINITY;
        for (int i = 0; i < tb->rows; i++) {
            real a = AT(tb, i, enter);
            if (a > pivot_tol) {
                real q = (AT(tb, i, rhs) + slack) / a;
                if (q < bound)
                    bound = q;
            }
        }
        int leave = -1;
        real ratio = 0.0L, best_pivot = 0.0L;
        for (int i = 0; i < tb->rows; i++) {
            real a = AT(tb, i, enter);
            if (a <= pivot_tol)
                continue;
            real q = AT(tb, i, rhs) / a;
            if (q <= bound && (a > best_pivot || (bland && a == best_pivot &&
                                                  tb->basis[i] < tb->basis[leave]))) {
                leave = i;
                best_pivot = a;
                ratio = q < 0.0L ? 0.0L : q;
            }
        }
        if (leave < 0)
            return TF_ESOLVER;
        degenerate_run = ratio == 0.0L ? degenerate_run + 1 : 0;
        /* Basic values are non-negative; round-off can leave them at -1e-17,
         * and pivoting on such a row would carry (and grow) the error. */
        if (AT(tb, leave, rhs) < 0.0L)
            AT(tb, leave, rhs) = 0.0L;
        pivot_on(tb, leave, enter);
        for (int i = 0; i < tb->rows; i++)
            if (AT(tb, i, rhs) < 0.0L)
                AT(tb, i, rhs) = 0.0L;
    }
    return TF_ESOLVER;
}

/* Whether `basis` (rows entries) names distinct columns of the tableau. */
static int basis_valid(const tableau *tb, const int *basis)
{
    for (int i = 0; i < tb->rows; i++) {
        if (basis[i] < 0 || basis[i] >= tb->cols + tb->rows)
            return 0;
        for (int k = 0; k < i; k++)
            if (basis[k] == basis[i])
                return 0;
    }
    return 1;
}

int tf_master_lp_solve(int rows, int cols, const double *a, const char *sense, const double *b,
                       const double *c, double *x, double *y, double *objective, int *basis)
{
    tableau tb = {0};
    tb.rows = rows;
    tb.cols = cols;
    tb.width = cols + rows + 1;
    tb.t = calloc((size_t)(rows + 1) * (size_t)tb.width, sizeof *tb.t);
    tb.basis = malloc(((size_t)rows + 1) * sizeof *tb.basis);
    tb.barred = calloc((size_t)tb.width, 1);
    if (!tb.t || !tb.basis || !tb.barred) {
        free(tb.t);
        free(tb.basis);
        free(tb.barred);
        return TF_ENOMEM;
    }
    const int rhs = tb.width - 1, obj = rows;
    real scale = 1.0L;
    int rc = 0, artificials = 0;
    for (int i = 0; i < rows; i++) {
        if (b[i] < 0.0) {
            rc = TF_EINVAL;
            goto done;
        }
        for (int j = 0; j < cols; j++) {
            AT(&tb, i, j) = a[(size_t)i * (size_t)cols + (size_t)j];
            if (fabsl(AT(&tb, i, j)) > scale)
                scale = fabsl(AT(&tb, i, j));
        }
        AT(&tb, i, cols + i) = 1.0L;
        AT(&tb, i, rhs) = b[i];
        tb.basis[i] = cols + i;
        if (sense[i] == 'E')
            artificials = 1;
    }
    const real eps = 1e-13L;
    /* Warm start: the given basis, rebuilt from the data, if it is a
     * feasible one; phase 2 goes on from there.  Else the slack basis. */
    int warm = 0;
    if (basis && basis_valid(&tb, basis)) {
        memcpy(tb.basis, basis, (size_t)rows * sizeof *tb.basis);
        warm = !refactor(&tb, a, b, c, 1e-11L * scale);
        /* An 'E' row's artificial may stay basic only at zero. */
        for (int i = 0; i < rows && warm; i++)
            if (tb.basis[i] >= cols && sense[tb.basis[i] - cols] == 'E' &&
                AT(&tb, i, rhs) > 1e-11L * scale) {
                warm = 0;
                load_rows(&tb, a, b);
                for (int j = 0; j < tb.width; j++)
                    AT(&tb, obj, j) = 0.0L;
            }
        if (!warm)
            for (int i = 0; i < rows; i++)
                tb.basis[i] = cols + i; /* the tableau is unchanged */
    }
    for (int i = 0; i < rows; i++)
        if (sense[i] == 'E')
            tb.barred[cols + i] = warm;
    if (artificials && !warm) {
        /* Phase 1: minimise the sum of the artificials (the slacks of 'E'
         * rows), written in terms of the non-basic columns. */
        for (int i = 0; i < rows; i++)
            if (sense[i] == 'E')
                for (int j = 0; j < tb.width; j++)
                    if (j != cols + i)
                        AT(&tb, obj, j) -= AT(&tb, i, j);
        if ((rc = iterate(&tb, eps)))
            goto done;
        if (-AT(&tb, obj, rhs) > 1e-11L * scale) {
            rc = TF_ESOLVER; /* infeasible */
            goto done;
        }
        for (int i = 0; i < rows; i++)
            if (sense[i] == 'E') {
                tb.barred[cols + i] = 1;
                AT(&tb, i, rhs) = AT(&tb, i, rhs) < 0.0L ? 0.0L : AT(&tb, i, rhs);
            }
        /* Drive artificials still basic (at zero) out where possible. */
        for (int i = 0; i < rows; i++) {
            if (!(tb.basis[i] >= cols && sense[tb.basis[i] - cols] == 'E'))
                continue;
            int best = -1;
            for (int j = 0; j < cols + rows; j++)
                if (!tb.barred[j] && fabsl(AT(&tb, i, j)) > 1e-9L &&
                    (best < 0 || fabsl(AT(&tb, i, j)) > fabsl(AT(&tb, i, best))))
                    best = j;
            if (best >= 0) {
                AT(&tb, i, rhs) = 0.0L; /* the artificial is at zero */
                pivot_on(&tb, i, best);
            }
        }
    }
    /* Phase 2: the objective row is c - c_B B^-1 A.  After it, the
     * tableau is rebuilt from the data for the final basis and the simplex
     * goes on if the clean reduced costs show it stopped short. */
    if (!warm)
        price_row(&tb, c);
    if ((rc = iterate(&tb, eps)))
        goto done;
    for (int pass = 0; pass < 4; pass++) {
        if (refactor(&tb, a, b, c, INFINITY) || !improvable(&tb, eps))
            break;
        if ((rc = iterate(&tb, eps)))
            goto done;
    }
    for (int j = 0; j < cols; j++)
        x[j] = 0.0;
    for (int i = 0; i < rows; i++)
        if (tb.basis[i] < cols)
            x[tb.basis[i]] = (double)(AT(&tb, i, rhs) < 0.0L ? 0.0L : AT(&tb, i, rhs));
    /* Dual of row i: minus the reduced cost of its slack / artificial. */
    for (int i = 0; i < rows; i++)
        y[i] = (double)(-AT(&tb, obj, cols + i));
    *objective = (double)(-AT(&tb, obj, rhs));
    if (basis)
        memcpy(basis, tb.basis, (size_t)rows * sizeof *basis);

done:
    free(tb.t);
    free(tb.basis);
    free(tb.barred);
    return rc;
}
