/* test_freeze_master.c - the fast solver's dense master LP
 * (planner/src/freeze_fast_master.c): optimum, duals and warm starts on LPs
 * solved by hand. */
#include "test_util.h"

#include <math.h>

#include "freeze_fast_master.h"

/* minimise -x0 - x1 (+ c3 x3 when a fourth column is given) subject to
 *   r0:  x0 + 2 x1           (+ x3) <= 4
 *   r1: 3 x0 +   x1                  <= 6
 *   r2:  x0 +   x1 + x2      (+ x3)  = 3
 * Without x3 the optimum is the vertex of r0 and r1: x = (8/5, 6/5, 1/5),
 * value -14/5, duals (-2/5, -1/5, 0) since x0 + x1 = (2 b0 + b1) / 5 there. */
enum { ROWS = 3 };
static const char sense[ROWS] = {'L', 'L', 'E'};
static const double rhs[ROWS] = {4.0, 6.0, 3.0};

static void three_columns(double *a, double *c)
{
    const double rows[ROWS][3] = {{1, 2, 0}, {3, 1, 0}, {1, 1, 1}};
    memcpy(a, rows, sizeof rows);
    c[0] = -1.0;
    c[1] = -1.0;
    c[2] = 0.0;
}

static void assert_first_optimum(const double *x, const double *y, double objective)
{
    assert_close(x[0], 1.6, 1e-12);
    assert_close(x[1], 1.2, 1e-12);
    assert_close(x[2], 0.2, 1e-12);
    assert_close(y[0], -0.4, 1e-12);
    assert_close(y[1], -0.2, 1e-12);
    assert_close(y[2], 0.0, 1e-12);
    assert_close(objective, -2.8, 1e-12);
}

/* Whether basis holds exactly the columns 0, 1 and 2, in any order. */
static int basis_is_structural(const int *basis)
{
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < ROWS; i++)
        if (basis[i] >= 0 && basis[i] < 3)
            seen[basis[i]]++;
    return seen[0] == 1 && seen[1] == 1 && seen[2] == 1;
}

static void cold_and_warm_starts_agree(void **state)
{
    (void)state;
    double a[ROWS * 3], c[3], x[3], y[ROWS], objective;
    three_columns(a, c);
    int basis[ROWS] = {-1, -1, -1};
    assert_int_equal(tf_master_lp_solve(ROWS, 3, a, sense, rhs, c, x, y, &objective, basis), 0);
    assert_first_optimum(x, y, objective);
    assert_true(basis_is_structural(basis));

    /* From its own optimal basis. */
    memset(x, 0, sizeof x);
    assert_int_equal(tf_master_lp_solve(ROWS, 3, a, sense, rhs, c, x, y, &objective, basis), 0);
    assert_first_optimum(x, y, objective);
    assert_true(basis_is_structural(basis));

    /* Without a basis at all. */
    assert_int_equal(tf_master_lp_solve(ROWS, 3, a, sense, rhs, c, x, y, &objective, NULL), 0);
    assert_first_optimum(x, y, objective);
}

static void unusable_bases_fall_back_to_a_cold_start(void **state)
{
    (void)state;
    double a[ROWS * 3], c[3], x[3], y[ROWS], objective;
    three_columns(a, c);
    /* A repeated column, a column out of range, and an infeasible basis:
     * x0, x1 and r0's slack give x0 = x1 = 3/2 and a slack of -1/2. */
    const int unusable[3][ROWS] = {{0, 0, 1}, {0, 1, 7}, {0, 1, 3}};
    for (int k = 0; k < 3; k++) {
        int basis[ROWS];
        memcpy(basis, unusable[k], sizeof basis);
        assert_int_equal(tf_master_lp_solve(ROWS, 3, a, sense, rhs, c, x, y, &objective, basis),
                         0);
        assert_first_optimum(x, y, objective);
        assert_true(basis_is_structural(basis));
    }
}

/* A column added after the first solve, as column generation does: x3 with
 * entries (1, 0, 1) and cost -2.  Each unit of x3 is worth 2 and uses one of
 * r2's 3 units, where x0 and x1 are worth 1, so the optimum is x3 = 3
 * (r0 then has a slack of 1): value -6, duals (0, 0, -2). */
static void warm_start_after_a_column_is_added(void **state)
{
    (void)state;
    double small[ROWS * 3], c[4], x[4], y[ROWS], objective;
    three_columns(small, c);
    int basis[ROWS] = {-1, -1, -1};
    assert_int_equal(tf_master_lp_solve(ROWS, 3, small, sense, rhs, c, x, y, &objective, basis),
                     0);
    const double rows[ROWS][4] = {{1, 2, 0, 1}, {3, 1, 0, 0}, {1, 1, 1, 1}};
    c[3] = -2.0;
    for (int warm = 0; warm < 2; warm++) {
        int start[ROWS];
        for (int i = 0; i < ROWS; i++)
            start[i] = warm ? basis[i] : -1;
        assert_int_equal(
            tf_master_lp_solve(ROWS, 4, &rows[0][0], sense, rhs, c, x, y, &objective, start), 0);
        assert_close(x[0], 0.0, 1e-12);
        assert_close(x[1], 0.0, 1e-12);
        assert_close(x[2], 0.0, 1e-12);
        assert_close(x[3], 3.0, 1e-12);
        assert_close(y[0], 0.0, 1e-12);
        assert_close(y[1], 0.0, 1e-12);
        assert_close(y[2], -2.0, 1e-12);
        assert_close(objective, -6.0, 1e-12);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cold_and_warm_starts_agree),
        cmocka_unit_test(unusable_bases_fall_back_to_a_cold_start),
        cmocka_unit_test(warm_start_after_a_column_is_added),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
