/* freeze_fast_master.c - revised simplex with an explicit long-double basis
 * inverse for the small master LP of freeze_fast.c (see
 * freeze_fast_master.h).
 *
 * The master has a few dozen rows and a few hundred columns, and column
 * generation solves it once per round from the last optimal basis.  A full
 * tableau costs rows x columns per pivot and rows^2 x columns to rebuild
 * from the data; with 64 cap rows that rebuilding was nearly half of the
 * solver's run.  Here only the rows x rows inverse is kept: rebuilding it costs
 * rows^3, a pivot rows^2, and pricing the columns rows x columns. */
#include "freeze_fast_master.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tf/error.h"

typedef long double real;

typedef struct revised {
    int rows, cols;        /* structural columns; column cols + i is row i's
                            * slack ('L') or artificial ('E') */
    const double *b;       /* the caller's right-hand sides */
    double *by_column;     /* cols x rows: the caller's a, a column at a time */
    real *inverse;         /* rows x rows: B^-1, row k for basic variable k */
    real *value;           /* rows: B^-1 b, the basic variables' values */
    real *work, *block;    /* rows x rows: scratch for inverting B's block */
    real *spare;           /* rows x rows: the inverse being rebuilt */
    real *spare_value;     /* rows: the values being rebuilt */
    int *free_row;         /* rows: scratch, the rows whose slack is not basic */
    int *structural;       /* rows: scratch, the positions of structural columns */
    real *dual;            /* rows: cost_B B^-1 */
    double *dual_screen;   /* rows: dual rounded to double, for screening */
    double *column_max;    /* cols: each structural column's largest |entry| */
    real *column;          /* rows: B^-1 times the entering column */
    real *residual;        /* rows: b - B x, for refining the basic values */
    real *cost;            /* cols + rows: the current phase's costs */
    int *basis;            /* rows: the column basic in each position */
    int *position;         /* cols + rows: where a column is basic, or -1 */
    unsigned char *barred; /* cols + rows: may not enter (artificials in phase 2) */
    long pivots_since_refactor;
    real *reals;           /* the block every real array above lies in */
    int *ints;             /* the block every int array above lies in */
} revised;

#define INV(m, i, j) ((m)->inverse[(size_t)(i) * (size_t)(m)->rows + (size_t)(j)])

/* Row i of structural column j < cols.  Columns are stored whole: every
 * pivot prices each column (a sum over its rows), and reading the caller's
 * row-major a for that strode through memory, with 107 rows and thousands
 * of columns more than a cache holds. */
static real data(const revised *m, int i, int j)
{
    return m->by_column[(size_t)j * (size_t)m->rows + (size_t)i];
}

/* Row i of column j, for structural columns and the unit slack columns. */
static real entry(const revised *m, int i, int j)
{
    if (j < m->cols)
        return data(m, i, j);
    return j - m->cols == i ? 1.0L : 0.0L;
}

static void set_basis(revised *m, int k, int col)
{
    m->basis[k] = col;
    m->position[col] = k;
}

/* The slack basis: B = I. */
static void start_from_slacks(revised *m)
{
    const int rows = m->rows;
    for (int j = 0; j < m->cols + rows; j++)
        m->position[j] = -1;
    for (int i = 0; i < rows; i++) {
        set_basis(m, i, m->cols + i);
        for (int k = 0; k < rows; k++)
            INV(m, i, k) = i == k ? 1.0L : 0.0L;
        m->value[i] = m->b[i];
    }
    m->pivots_since_refactor = 0;
}

/* values = inverse b, refined, with values down to -allowed taken as
 * round-off and set to 0.  Near the optimum the basic columns are nearly
 * parallel, and inverse b alone then misses b by up to 1e-8 even in long
 * double (an explicit inverse's error grows with B's conditioning, not
 * only with the precision): the convexity row summed to 1 - 2.2e-8 on
 * Interleaved1F1B with 12 ranks x 3 stages and 3,456 actions, and the
 * plan's makespan came out 7e-5 ms over the bound.  Two steps of iterative
 * refinement (values += inverse (b - B values), the residual from the
 * data) bring it to round-off.  Returns 0, or 1 if a value is below
 * -allowed. */
static int basic_values(const revised *m, const real *inverse, real *values, real allowed)
{
    const int rows = m->rows;
    real *residual = m->residual;
    for (int i = 0; i < rows; i++)
        residual[i] = (real)m->b[i];
    for (int k = 0; k < rows; k++)
        values[k] = 0.0L;
    for (int step = 0;; step++) {
        for (int k = 0; k < rows; k++) {
            real v = 0.0L;
            for (int i = 0; i < rows; i++)
                v += inverse[(size_t)k * (size_t)rows + (size_t)i] * residual[i];
            values[k] += v;
        }
        if (step == 2)
            break;
        for (int i = 0; i < rows; i++)
            residual[i] = (real)m->b[i];
        for (int k = 0; k < rows; k++)
            if (values[k] != 0.0L)
                for (int i = 0; i < rows; i++)
                    residual[i] -= entry(m, i, m->basis[k]) * values[k];
    }
    for (int k = 0; k < rows; k++) {
        if (values[k] < -allowed)
            return 1;
        if (values[k] < 0.0L)
            values[k] = 0.0L;
    }
    return 0;
}

/* Rebuilds B^-1 and the basic values from the data for the basis in
 * m->basis, discarding the round-off that hundreds of pivots accumulate
 * (the master's columns are nearly parallel near the optimum).  Basic
 * values down to -allowed count as round-off and become 0.  Returns 0, or 1
 * (nothing changed) if the basis is numerically singular or infeasible
 * beyond that.
 *
 * Most basic columns are slacks (every cap row that does not bind), so B
 * is, up to order, [I  A_sC; 0  A_nC] with C the basic structural columns,
 * n the rows whose slack is not basic and s the others.  Only the q x q
 * block A_nC is inverted (Gauss-Jordan, partial pivoting): a structural
 * variable's row of B^-1 is its row of A_nC^-1 on the rows n, and the
 * slack of row i has e_i minus A_iC A_nC^-1 on the rows n. */
static int refactor(revised *m, real allowed)
{
    const int rows = m->rows, cols = m->cols;
    int *free_row = m->free_row, *structural = m->structural;
    int q = 0, q_rows = 0;
    for (int i = 0; i < rows; i++)
        if (m->position[cols + i] < 0)
            free_row[q_rows++] = i;
    for (int k = 0; k < rows; k++)
        if (m->basis[k] < cols)
            structural[q++] = k;
    if (q != q_rows)
        return 1;
    real *w = m->work, *block = m->block, *fresh = m->spare, *values = m->spare_value;
#define W(i, j) w[(size_t)(i) * (size_t)q + (size_t)(j)]
#define M(i, j) block[(size_t)(i) * (size_t)q + (size_t)(j)]
#define F(i, j) fresh[(size_t)(i) * (size_t)rows + (size_t)(j)]
    for (int t = 0; t < q; t++)
        for (int j = 0; j < q; j++) {
            W(t, j) = data(m, free_row[t], m->basis[structural[j]]);
            M(t, j) = t == j ? 1.0L : 0.0L;
        }
    /* Row-reduce [W | I] to [I | W^-1]; row swaps keep the result W^-1,
     * whose row j then belongs to structural variable j. */
    for (int k = 0; k < q; k++) {
        int best = k;
        for (int t = k + 1; t < q; t++)
            if (fabsl(W(t, k)) > fabsl(W(best, k)))
                best = t;
        if (fabsl(W(best, k)) < 1e-12L)
            return 1;
        if (best != k)
            for (int j = 0; j < q; j++) {
                real swap = W(k, j);
                W(k, j) = W(best, j);
                W(best, j) = swap;
                swap = M(k, j);
                M(k, j) = M(best, j);
                M(best, j) = swap;
            }
        real p = W(k, k);
        for (int j = 0; j < q; j++) {
            W(k, j) /= p;
            M(k, j) /= p;
        }
        for (int t = 0; t < q; t++) {
            real f = W(t, k);
            if (t == k || f == 0.0L)
                continue;
            for (int j = 0; j < q; j++) {
                W(t, j) -= f * W(k, j);
                M(t, j) -= f * M(k, j);
            }
        }
    }
    for (int k = 0; k < rows; k++)
        for (int j = 0; j < rows; j++)
            F(k, j) = 0.0L;
    for (int j = 0; j < q; j++)
        for (int t = 0; t < q; t++)
            F(structural[j], free_row[t]) = M(j, t);
    for (int k = 0; k < rows; k++) {
        int col = m->basis[k];
        if (col < cols)
            continue;
        int i = col - cols;
        F(k, i) = 1.0L;
        for (int j = 0; j < q; j++) {
            real a = data(m, i, m->basis[structural[j]]);
            if (a != 0.0L)
                for (int t = 0; t < q; t++)
                    F(k, free_row[t]) -= a * M(j, t);
        }
    }
#undef W
#undef M
#undef F
    if (basic_values(m, fresh, values, allowed))
        return 1;
    /* Accepted: the fresh inverse and values replace the old ones. */
    m->spare = m->inverse;
    m->inverse = fresh;
    m->spare_value = m->value;
    m->value = values;
    m->pivots_since_refactor = 0;
    return 0;
}

/* dual = cost_B B^-1. */
static void compute_duals(revised *m)
{
    const int rows = m->rows;
    for (int i = 0; i < rows; i++)
        m->dual[i] = 0.0L;
    for (int k = 0; k < rows; k++) {
        real ck = m->cost[m->basis[k]];
        if (ck != 0.0L)
            for (int i = 0; i < rows; i++)
                m->dual[i] += ck * INV(m, k, i);
    }
}

/* The reduced cost of column j at the current duals. */
static real reduced_cost(const revised *m, int j)
{
    if (j >= m->cols)
        return m->cost[j] - m->dual[j - m->cols];
    real d = m->cost[j];
    for (int i = 0; i < m->rows; i++)
        d -= m->dual[i] * data(m, i, j);
    return d;
}

/* column = B^-1 times column j. */
static void compute_column(revised *m, int j)
{
    const int rows = m->rows;
    for (int k = 0; k < rows; k++) {
        real v = 0.0L;
        if (j >= m->cols)
            v = INV(m, k, j - m->cols);
        else
            for (int i = 0; i < rows; i++)
                v += INV(m, k, i) * data(m, i, j);
        m->column[k] = v;
    }
}

/* Column `enter` replaces the basic variable of position `leave`. */
static void pivot(revised *m, int leave, int enter)
{
    const int rows = m->rows;
    const real p = m->column[leave];
    for (int j = 0; j < rows; j++)
        INV(m, leave, j) /= p;
    m->value[leave] /= p;
    for (int k = 0; k < rows; k++) {
        real f = m->column[k];
        if (k == leave || f == 0.0L)
            continue;
        for (int j = 0; j < rows; j++)
            INV(m, k, j) -= f * INV(m, leave, j);
        m->value[k] -= f * m->value[leave];
    }
    m->position[m->basis[leave]] = -1;
    set_basis(m, leave, enter);
    m->pivots_since_refactor++;
    /* Basic values are non-negative; round-off can leave them at -1e-17,
     * and pivoting on such a row would carry (and grow) the error. */
    for (int k = 0; k < rows; k++)
        if (m->value[k] < 0.0L)
            m->value[k] = 0.0L;
}

/* Column j's reduced cost in double, at the duals rounded to double: four
 * partial sums, which the compiler keeps in vector registers. */
static double screened_cost(const revised *m, int j)
{
    const double *a = m->by_column + (size_t)j * (size_t)m->rows, *y = m->dual_screen;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int i = 0;
    for (; i + 4 <= m->rows; i += 4) {
        s0 += y[i] * a[i];
        s1 += y[i + 1] * a[i + 1];
        s2 += y[i + 2] * a[i + 2];
        s3 += y[i + 3] * a[i + 3];
    }
    for (; i < m->rows; i++)
        s0 += y[i] * a[i];
    return (double)m->cost[j] - ((s0 + s1) + (s2 + s3));
}

/* The column that may enter with the most negative reduced cost below -eps
 * (the first such under Bland's rule), or -1.  Every pivot prices every
 * column, and in long double that was most of the master's time; so each
 * structural column is priced in double first, and again in long double
 * only if the double value, less a bound on its round-off ((rows + 2)
 * units of 2^-52 on every product, taken as 2e-15 (rows + 2) times
 * |cost| + |dual|_1 max |a_j| + |best|), could still beat the best so far.  The
 * choice is the one the long-double prices alone would make. */
static int entering(revised *m, real eps, int bland)
{
    compute_duals(m);
    double dual_l1 = 0.0;
    for (int i = 0; i < m->rows; i++) {
        m->dual_screen[i] = (double)m->dual[i];
        dual_l1 += fabs(m->dual_screen[i]);
    }
    const double unit = 2e-15 * (m->rows + 2);
    int enter = -1;
    real best = -eps;
    for (int j = 0; j < m->cols + m->rows; j++) {
        if (m->barred[j] || m->position[j] >= 0)
            continue;
        if (j < m->cols) {
            /* best rounded to double moves by up to 2^-53 of itself */
            double err = unit * (fabs((double)m->cost[j]) + dual_l1 * m->column_max[j] +
                                 fabs((double)best));
            if (screened_cost(m, j) - err >= (double)best)
                continue;
        }
        real d = reduced_cost(m, j);
        if (d < best) {
            enter = j;
            best = d;
            if (bland)
                break;
        }
    }
    return enter;
}

/* Runs the simplex on the current costs; returns 0 optimal, TF_ESOLVER if
 * unbounded or out of iterations. */
static int iterate(revised *m, real eps)
{
    int degenerate_run = 0;
    long limit = 50000L + 200L * (long)(m->cols + 2 * m->rows + 1);
    for (long it = 0; it < limit; it++) {
        int bland = degenerate_run > 50;
        int enter = entering(m, eps, bland);
        if (enter < 0)
            return 0;
        compute_column(m, enter);
        /* Harris' two-pass ratio test: the smallest ratio with every basic
         * value allowed 1e-12 below zero, then among the rows within that
         * ratio the largest pivot, so round-off never forces a tiny pivot. */
        const real pivot_tol = 1e-9L, slack = 1e-12L;
        real bound = INFINITY;
        for (int k = 0; k < m->rows; k++) {
            real a = m->column[k];
            if (a > pivot_tol) {
                real q = (m->value[k] + slack) / a;
                if (q < bound)
                    bound = q;
            }
        }
        int leave = -1;
        real ratio = 0.0L, best_pivot = 0.0L;
        for (int k = 0; k < m->rows; k++) {
            real a = m->column[k];
            if (a <= pivot_tol)
                continue;
            real q = m->value[k] / a;
            if (q <= bound && (a > best_pivot || (bland && a == best_pivot &&
                                                  m->basis[k] < m->basis[leave]))) {
                leave = k;
                best_pivot = a;
                ratio = q < 0.0L ? 0.0L : q;
            }
        }
        if (leave < 0)
            return TF_ESOLVER;
        degenerate_run = ratio == 0.0L ? degenerate_run + 1 : 0;
        pivot(m, leave, enter);
    }
    return TF_ESOLVER;
}

/* Whether `basis` (rows entries) names distinct columns. */
static int basis_valid(const revised *m, const int *basis)
{
    for (int i = 0; i < m->rows; i++) {
        if (basis[i] < 0 || basis[i] >= m->cols + m->rows)
            return 0;
        for (int k = 0; k < i; k++)
            if (basis[k] == basis[i])
                return 0;
    }
    return 1;
}

/* Phase 1 from the slack basis: minimise the sum of the 'E' rows'
 * artificials, then bar them and pivot out those still basic at zero.
 * Returns 0, or TF_ESOLVER if the rows cannot be met. */
static int phase_one(revised *m, const char *sense, real eps, real scale)
{
    const int rows = m->rows, cols = m->cols;
    for (int j = 0; j < cols + rows; j++)
        m->cost[j] = j >= cols && sense[j - cols] == 'E' ? 1.0L : 0.0L;
    int rc = iterate(m, eps);
    if (rc)
        return rc;
    real infeasibility = 0.0L;
    for (int k = 0; k < rows; k++)
        infeasibility += m->cost[m->basis[k]] * m->value[k];
    if (infeasibility > 1e-11L * scale)
        return TF_ESOLVER;
    for (int i = 0; i < rows; i++)
        if (sense[i] == 'E')
            m->barred[cols + i] = 1;
    for (int k = 0; k < rows; k++) {
        int col = m->basis[k];
        if (!(col >= cols && sense[col - cols] == 'E'))
            continue;
        /* Row k of B^-1 A: the largest entry among the columns that may
         * enter replaces the artificial (at zero, so no value moves). */
        int best = -1;
        real best_entry = 1e-9L;
        for (int j = 0; j < cols + rows; j++) {
            if (m->barred[j] || m->position[j] >= 0)
                continue;
            real v = 0.0L;
            for (int i = 0; i < rows; i++)
                v += INV(m, k, i) * entry(m, i, j);
            if (fabsl(v) > best_entry) {
                best = j;
                best_entry = fabsl(v);
            }
        }
        if (best >= 0) {
            m->value[k] = 0.0L;
            compute_column(m, best);
            pivot(m, k, best);
        }
    }
    return 0;
}

/* All of m's arrays in three blocks: reals, ints and the barred flags (+1
 * each: rows may be 0).  Returns 0 or TF_ENOMEM (revised_free frees what
 * was allocated). */
static int revised_alloc(revised *m)
{
    const size_t n = (size_t)m->rows, square = n * n, width = (size_t)m->cols + n;
    real *reals = m->reals = malloc((4 * square + 5 * n + width + 1) * sizeof *reals);
    int *ints = m->ints = malloc((3 * n + width + 1) * sizeof *ints);
    m->barred = calloc(width + 1, 1);
    m->by_column = malloc(((size_t)m->cols * n + 1) * sizeof *m->by_column);
    m->dual_screen = malloc((n + (size_t)m->cols + 1) * sizeof *m->dual_screen);
    if (!reals || !ints || !m->barred || !m->by_column || !m->dual_screen)
        return TF_ENOMEM;
    m->column_max = m->dual_screen + n;
    /* refactor swaps inverse and spare, so the blocks are freed by name. */
    m->inverse = reals;
    m->basis = ints;
    m->work = m->inverse + square;
    m->block = m->work + square;
    m->spare = m->block + square;
    m->value = m->spare + square;
    m->spare_value = m->value + n;
    m->dual = m->spare_value + n;
    m->column = m->dual + n;
    m->residual = m->column + n;
    m->cost = m->residual + n;
    m->free_row = m->basis + n;
    m->structural = m->free_row + n;
    m->position = m->structural + n;
    return 0;
}

static void revised_free(revised *m)
{
    free(m->reals);
    free(m->ints);
    free(m->barred);
    free(m->by_column);
    free(m->dual_screen);
}

/* B^-1 from `kept` where it holds this basis's inverse (the same
 * computation a refactor would repeat), else rebuilt from the data.
 * Returns 0, or 1 as refactor does. */
static int basis_inverse(revised *m, const tf_master_inverse *kept, real allowed)
{
    const size_t square = (size_t)m->rows * (size_t)m->rows;
    if (!kept || !kept->valid || kept->rows != m->rows)
        return refactor(m, allowed);
    if (basic_values(m, kept->inverse, m->value, allowed))
        return 1;
    memcpy(m->inverse, kept->inverse, square * sizeof *m->inverse);
    m->pivots_since_refactor = 0;
    return 0;
}

/* Warm start: the given basis, its inverse kept or rebuilt from the data,
 * if it is a feasible one with every 'E' row's artificial at zero; phase 2
 * goes on from there.  Else the slack basis.  Returns whether the warm
 * start took. */
static int warm_start(revised *m, const int *basis, const tf_master_inverse *kept,
                      const char *sense, real scale)
{
    const int rows = m->rows, cols = m->cols;
    start_from_slacks(m);
    if (!basis || !basis_valid(m, basis))
        return 0;
    for (int j = 0; j < cols + rows; j++)
        m->position[j] = -1;
    for (int k = 0; k < rows; k++)
        set_basis(m, k, basis[k]);
    int warm = !basis_inverse(m, kept, 1e-11L * scale);
    for (int k = 0; k < rows && warm; k++)
        if (m->basis[k] >= cols && sense[m->basis[k] - cols] == 'E' &&
            m->value[k] > 1e-11L * scale)
            warm = 0;
    if (!warm)
        start_from_slacks(m);
    return warm;
}

/* The optimum in the caller's form: x, the duals y, the objective and the
 * basis (when asked for). */
static void write_solution(revised *m, double *x, double *y, double *objective, int *basis)
{
    compute_duals(m);
    for (int j = 0; j < m->cols; j++)
        x[j] = 0.0;
    real value = 0.0L;
    for (int k = 0; k < m->rows; k++) {
        if (m->basis[k] < m->cols)
            x[m->basis[k]] = (double)m->value[k];
        value += m->cost[m->basis[k]] * m->value[k];
    }
    for (int i = 0; i < m->rows; i++)
        y[i] = (double)m->dual[i];
    *objective = (double)value;
    if (basis)
        memcpy(basis, m->basis, (size_t)m->rows * sizeof *basis);
}

/* Keeps the optimal basis's inverse in `kept` when it is a clean rebuild
 * from the data (no pivots since), else marks it unusable (also when out
 * of memory: the next solve then rebuilds it). */
static void keep_inverse(const revised *m, tf_master_inverse *kept)
{
    const size_t square = (size_t)m->rows * (size_t)m->rows;
    kept->valid = 0;
    if (m->pivots_since_refactor > 0)
        return;
    if (kept->rows != m->rows) {
        long double *inverse = realloc(kept->inverse, (square ? square : 1) * sizeof *inverse);
        if (!inverse)
            return;
        kept->inverse = inverse;
        kept->rows = m->rows;
    }
    memcpy(kept->inverse, m->inverse, square * sizeof *kept->inverse);
    kept->valid = 1;
}

void tf_master_inverse_free(tf_master_inverse *kept)
{
    free(kept->inverse);
    kept->inverse = NULL;
    kept->rows = 0;
    kept->valid = 0;
}

int tf_master_lp_solve(int rows, int cols, const double *a, const char *sense, const double *b,
                       const double *c, double *x, double *y, double *objective, int *basis)
{
    return tf_master_lp_solve_kept(rows, cols, a, sense, b, c, x, y, objective, basis, NULL);
}

int tf_master_lp_solve_kept(int rows, int cols, const double *a, const char *sense,
                            const double *b, const double *c, double *x, double *y,
                            double *objective, int *basis, tf_master_inverse *kept)
{
    revised m = {0};
    m.rows = rows;
    m.cols = cols;
    m.b = b;
    int rc = revised_alloc(&m);
    if (rc)
        goto done;
    for (int j = 0; j < cols; j++)
        m.column_max[j] = 0.0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double v = a[(size_t)i * (size_t)cols + (size_t)j];
            m.by_column[(size_t)j * (size_t)rows + (size_t)i] = v;
            if (fabs(v) > m.column_max[j])
                m.column_max[j] = fabs(v);
        }
    real scale = 1.0L;
    int artificials = 0;
    for (int i = 0; i < rows; i++) {
        if (b[i] < 0.0) {
            rc = TF_EINVAL;
            goto done;
        }
        for (int j = 0; j < cols; j++)
            if (fabsl(data(&m, i, j)) > scale)
                scale = fabsl(data(&m, i, j));
        if (sense[i] == 'E')
            artificials = 1;
    }
    const real eps = 1e-13L;
    int warm = warm_start(&m, basis, kept, sense, scale);
    if (kept)
        kept->valid = 0;
    for (int i = 0; i < rows; i++)
        if (sense[i] == 'E')
            m.barred[cols + i] = warm;
    if (artificials && !warm && (rc = phase_one(&m, sense, eps, scale)))
        goto done;
    /* Phase 2.  After it the inverse is rebuilt from the data for the final
     * basis and the simplex goes on if the clean reduced costs show it
     * stopped short. */
    for (int j = 0; j < cols + rows; j++)
        m.cost[j] = j < cols ? (real)c[j] : 0.0L;
    if ((rc = iterate(&m, eps)))
        goto done;
    for (int pass = 0; pass < 4 && m.pivots_since_refactor > 0; pass++) {
        if (refactor(&m, INFINITY))
            break;
        if ((rc = iterate(&m, eps)))
            goto done;
    }
    write_solution(&m, x, y, objective, basis);
    if (kept)
        keep_inverse(&m, kept);
done:
    revised_free(&m);
    return rc;
}
