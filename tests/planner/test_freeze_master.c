/* test_freeze_master.c - the fast solver's dense master LP
 * (planner/src/solve/freeze_fast_master.c): optimum, duals and warm starts on LPs
 * solved by hand. */
#include "test_util.h"

#include <lpsolve/lp_lib.h>
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

/* lp_solve's optimum of the same LP (x >= 0), or NAN if it finds none. */
static double lp_solve_optimum(int rows, int cols, const double *a, const char *sense,
                               const double *b, const double *c)
{
    lprec *lp = make_lp(0, cols);
    assert_non_null(lp);
    set_verbose(lp, NEUTRAL);
    set_add_rowmode(lp, TRUE);
    double *row = calloc((size_t)cols + 1, sizeof *row);
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++)
            row[j + 1] = a[(size_t)i * (size_t)cols + (size_t)j];
        add_constraint(lp, row, sense[i] == 'E' ? EQ : LE, b[i]);
    }
    set_add_rowmode(lp, FALSE);
    for (int j = 0; j < cols; j++)
        row[j + 1] = c[j];
    set_obj_fn(lp, row);
    set_minim(lp);
    double optimum = solve(lp) == OPTIMAL ? get_objective(lp) : NAN;
    free(row);
    delete_lp(lp);
    return optimum;
}

/* The master's answer proves itself: x >= 0 meets the rows, y has the
 * right signs (<= 0 on 'L' rows, as d objective / d b), every reduced cost
 * c_j - y^T a_j is non-negative, and c^T x = y^T b. */
static void assert_certified(int rows, int cols, const double *a, const char *sense,
                             const double *b, const double *c, const double *x,
                             const double *y, double objective)
{
    double primal = 0.0, dual = 0.0;
    for (int j = 0; j < cols; j++) {
        assert_true(x[j] >= 0.0);
        primal += c[j] * x[j];
        double reduced = c[j];
        for (int i = 0; i < rows; i++)
            reduced -= y[i] * a[(size_t)i * (size_t)cols + (size_t)j];
        assert_true(reduced >= -1e-10);
    }
    for (int i = 0; i < rows; i++) {
        double lhs = 0.0;
        for (int j = 0; j < cols; j++)
            lhs += a[(size_t)i * (size_t)cols + (size_t)j] * x[j];
        if (sense[i] == 'E')
            assert_close(lhs, b[i], 1e-10);
        else {
            assert_true(lhs <= b[i] + 1e-10);
            assert_true(y[i] <= 1e-12);
        }
        dual += y[i] * b[i];
    }
    assert_close(primal, objective, 1e-10);
    assert_close(dual, objective, 1e-10);
}

/* Random LPs shaped like the fast solver's master: cap rows (a point's
 * mean ratio per stage, <= cap), a convexity row (= 1) and a makespan row
 * (point's T minus t <= 0, objective t), with columns added a few at a time
 * and each solve started from the last optimal basis, against lp_solve.
 * Half of the instances repeat columns or give several points the same
 * entries, as column generation does near the optimum. */
static void random_masters_agree_with_lp_solve(void **state)
{
    (void)state;
    enum { MAX_CAPS = 12, MAX_POINTS = 40 };
    int solves = 0, kept_used = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint64_t rng = 0x9e3779b97f4a7c15ULL * seed;
        const int caps = 1 + (int)(test_random(&rng) * MAX_CAPS);
        const int rows = caps + 2, row_conv = caps, row_T = caps + 1;
        const int degenerate = seed % 2 == 0;
        double b[MAX_CAPS + 2];
        char sense[MAX_CAPS + 2];
        for (int i = 0; i < caps; i++) {
            b[i] = degenerate && i % 3 == 0 ? 0.5 : 0.2 + 0.7 * test_random(&rng);
            sense[i] = 'L';
        }
        b[row_conv] = 1.0;
        sense[row_conv] = 'E';
        b[row_T] = 0.0;
        sense[row_T] = 'L';
        /* Column 0 is t; point 0 (column 1) freezes nothing and is slowest. */
        double point[MAX_POINTS][MAX_CAPS + 1];
        for (int p = 0; p < MAX_POINTS; p++) {
            double frozen = 0.0;
            for (int i = 0; i < caps; i++) {
                double r = p == 0 ? 0.0 : test_random(&rng);
                if (degenerate && p > 0 && test_random(&rng) < 0.3)
                    r = (double)(int)(r * 4.0) / 4.0;
                point[p][i] = r;
                frozen += r;
            }
            point[p][caps] = 1.0 - 0.4 * frozen / caps + 0.05 * test_random(&rng);
            if (degenerate && p > 1 && test_random(&rng) < 0.2)
                memcpy(point[p], point[p - 1], sizeof point[p]);
        }
        int basis[MAX_CAPS + 2], kept_basis[MAX_CAPS + 2], kept_cols = 0;
        tf_master_inverse kept = {0};
        for (int i = 0; i < rows; i++)
            basis[i] = kept_basis[i] = -1;
        for (int points = 1; points <= MAX_POINTS; points += 1 + (int)(test_random(&rng) * 4)) {
            const int cols = 1 + points;
            double a[(MAX_CAPS + 2) * (MAX_POINTS + 1)] = {0}, c[MAX_POINTS + 1] = {0};
            double x[MAX_POINTS + 1], y[MAX_CAPS + 2], objective;
            a[(size_t)row_T * (size_t)cols] = -1.0;
            c[0] = 1.0;
            for (int p = 0; p < points; p++) {
                for (int i = 0; i < caps; i++)
                    a[(size_t)i * (size_t)cols + 1 + (size_t)p] = point[p][i];
                a[(size_t)row_conv * (size_t)cols + 1 + (size_t)p] = 1.0;
                a[(size_t)row_T * (size_t)cols + 1 + (size_t)p] = point[p][caps];
            }
            assert_int_equal(
                tf_master_lp_solve(rows, cols, a, sense, b, c, x, y, &objective, basis), 0);
            assert_certified(rows, cols, a, sense, b, c, x, y, objective);
            double reference = lp_solve_optimum(rows, cols, a, sense, b, c);
            assert_false(isnan(reference));
            assert_close(objective, reference, 1e-9);
            solves++;
            /* From the last basis (slacks renumbered past the new columns),
             * a kept inverse must give exactly what rebuilding it gives. */
            for (int i = 0; i < rows; i++)
                if (kept_basis[i] >= kept_cols)
                    kept_basis[i] += cols - kept_cols;
            int rebuilt_basis[MAX_CAPS + 2];
            double kx[MAX_POINTS + 1], ky[MAX_CAPS + 2], kept_objective;
            memcpy(rebuilt_basis, kept_basis, sizeof rebuilt_basis);
            assert_int_equal(
                tf_master_lp_solve(rows, cols, a, sense, b, c, x, y, &objective, rebuilt_basis), 0);
            kept_used += kept.valid;
            assert_int_equal(tf_master_lp_solve_kept(rows, cols, a, sense, b, c, kx, ky,
                                                     &kept_objective, kept_basis, &kept),
                             0);
            kept_cols = cols;
            assert_true(kept_objective == objective);
            assert_memory_equal(kept_basis, rebuilt_basis, (size_t)rows * sizeof *kept_basis);
            assert_memory_equal(kx, x, (size_t)cols * sizeof *x);
            assert_memory_equal(ky, y, (size_t)rows * sizeof *y);
        }
        tf_master_inverse_free(&kept);
    }
    assert_true(solves > 500);
    assert_true(kept_used > 100);
}

/* Near the optimum column generation adds points that differ from each
 * other in the 5th to 8th digit, and the optimal basis combines them: B^-1 b
 * from an explicit inverse then misses b by up to 1e-8 even in long double,
 * and the plan (the points' combination) ran past the makespan its master
 * claimed.  Here every row is an equality and there are as many columns as
 * rows, points within `spread` of one another, so the only solution is
 * B^-1 b: it must meet the rows to round-off. */
static void nearly_parallel_points_meet_the_rows(void **state)
{
    (void)state;
    enum { N = 12 };
    double worst = 0.0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t rng = 0x2545f4914f6cdd1dULL * seed;
        const double spread = pow(10.0, -4.0 - (double)(seed % 4));
        double a[N * N], b[N], c[N], x[N], y[N], objective;
        char sense[N];
        double base[N], weight[N], total = 0.0;
        for (int i = 0; i < N; i++) {
            base[i] = 0.3 + 0.4 * test_random(&rng);
            weight[i] = 0.5 + test_random(&rng);
            total += weight[i];
        }
        /* Row N - 1 is the convexity row; the others are a point's entries,
         * b their combination at the weights (scaled to sum to 1). */
        for (int j = 0; j < N; j++) {
            for (int i = 0; i < N - 1; i++)
                a[(size_t)i * N + (size_t)j] = base[i] + spread * (test_random(&rng) - 0.5);
            a[(size_t)(N - 1) * N + (size_t)j] = 1.0;
            c[j] = test_random(&rng);
        }
        for (int i = 0; i < N; i++) {
            b[i] = 0.0;
            for (int j = 0; j < N; j++)
                b[i] += a[(size_t)i * N + (size_t)j] * weight[j] / total;
            sense[i] = 'E';
        }
        int basis[N];
        for (int i = 0; i < N; i++)
            basis[i] = -1;
        assert_int_equal(tf_master_lp_solve(N, N, a, sense, b, c, x, y, &objective, basis), 0);
        for (int i = 0; i < N; i++) {
            double lhs = 0.0;
            for (int j = 0; j < N; j++)
                lhs += a[(size_t)i * N + (size_t)j] * x[j];
            worst = fmax(worst, fabs(lhs - b[i]));
        }
    }
    /* Double sums of 12 terms of about 1 carry a few 1e-16; without the
     * refinement the rows were missed by up to 1.4e-10 (spread 1e-7). */
    assert_true(worst <= 1e-14);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cold_and_warm_starts_agree),
        cmocka_unit_test(unusable_bases_fall_back_to_a_cold_start),
        cmocka_unit_test(warm_start_after_a_column_is_added),
        cmocka_unit_test(random_masters_agree_with_lp_solve),
        cmocka_unit_test(nearly_parallel_points_meet_the_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
