/* test_stats.h - goodness-of-fit helpers for the statistical tests.  Each
 * test that uses them fixes its seeds, so it is deterministic; the
 * thresholds come from the distribution the statistic has when the code is
 * right, at a significance level the test states. */
#ifndef TF_TEST_STATS_H
#define TF_TEST_STATS_H

#include <math.h>

/* Upper standard-normal quantiles: P(Z > z) = 1e-3, 1e-4, 1e-6. */
#define Z_1E3 3.0902
#define Z_1E4 3.7190
#define Z_1E6 4.7534

/* Pearson's statistic sum (O - E)^2 / E of `cells` observed counts against
 * their expected counts (each expected count > 0). */
static inline double chi_square(const double *observed, const double *expected, int cells)
{
    double x2 = 0.0;
    for (int i = 0; i < cells; i++) {
        double d = observed[i] - expected[i];
        x2 += d * d / expected[i];
    }
    return x2;
}

/* The value a chi-square variable with df degrees of freedom exceeds with
 * the probability whose upper normal quantile is z (Wilson-Hilferty: the
 * cube root of chi^2 / df is nearly normal).  It lies a little above the
 * exact quantile: at Z_1E4 by 1.9% for df = 6 (a significance of 8e-5
 * rather than 1e-4), under 0.5% from df = 25, 0.02% at df = 255 (checked
 * against the incomplete gamma function). */
static inline double chi_square_critical(int df, double z)
{
    double v = 2.0 / (9.0 * df), c = 1.0 - v + z * sqrt(v);
    return df * c * c * c;
}

#endif
