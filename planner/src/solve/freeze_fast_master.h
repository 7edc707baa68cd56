/* freeze_fast_master.h - a small dense LP solver for the Dantzig-Wolfe master
 * of the fast freeze solver (a few dozen rows, a few hundred columns).
 *
 *     minimise c^T x  s.t.  A x <= b (sense 'L') or A x = b (sense 'E'),
 *                           x >= 0,  b >= 0.
 *
 * Two-phase revised simplex with an explicit basis inverse in long double
 * (the master is small, highly degenerate and its columns nearly parallel
 * near the optimum, which is where lp_solve reported accuracy errors);
 * Dantzig's rule, switching to Bland's rule after a run of degenerate
 * pivots so it cannot cycle.
 */
#ifndef TF_FREEZE_FAST_MASTER_H
#define TF_FREEZE_FAST_MASTER_H

/* a: rows x cols, row-major.  On success (0) x[cols] is an optimal vertex,
 * y[rows] the duals (d objective / d b_i; <= 0 on 'L' rows) and *objective
 * its value.  Returns TF_ESOLVER if infeasible (beyond round-off), unbounded
 * or out of iterations, TF_EINVAL for a negative b, TF_ENOMEM.
 *
 * basis (may be NULL): rows entries, column j < cols or cols + i for row
 * i's slack (the artificial of an 'E' row).  If it names a feasible basis
 * on entry, the simplex starts from it (a warm start: the last master's
 * optimal basis stays feasible when columns are added); otherwise from
 * the slack basis.  On success it holds the optimal basis. */
int tf_master_lp_solve(int rows, int cols, const double *a, const char *sense, const double *b,
                       const double *c, double *x, double *y, double *objective, int *basis);

/* The optimal basis's inverse, kept between solves of masters that share
 * their basic columns' data (column generation adds columns; the basis
 * stays the same): the warm start then skips rebuilding it, the rows^3
 * step that was most of the master's time with a hundred cap rows.
 * Zero-initialise; free with tf_master_inverse_free. */
typedef struct tf_master_inverse {
    int rows;
    int valid;             /* inverse is B^-1 of the basis the last solve returned */
    long double *inverse;  /* rows x rows, owned */
} tf_master_inverse;

/* tf_master_lp_solve, with `kept` (may be NULL) used for the warm start
 * when valid and refilled on success.  The caller clears kept->valid
 * whenever `basis` is not the basis the last solve returned, or the data
 * of a basic column or b changed.  On failure kept is left unusable. */
int tf_master_lp_solve_kept(int rows, int cols, const double *a, const char *sense,
                            const double *b, const double *c, double *x, double *y,
                            double *objective, int *basis, tf_master_inverse *kept);

/* Frees kept's inverse and leaves it empty and unusable. */
void tf_master_inverse_free(tf_master_inverse *kept);

#endif
