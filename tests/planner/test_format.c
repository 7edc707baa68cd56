/* test_format.c - how the programs print numbers for people (tf/util.h):
 * ratios keep their significant figures however small they are, and counts
 * of one take the singular. */
#include <math.h>

#include "test_util.h"
#include "tf/util.h"

static void expect_significant(double v, int digits, const char *want)
{
    char out[64];
    assert_string_equal(tf_format_significant(v, digits, out, sizeof out), want);
}

/* A speed-up below 0.005 printed "0.00x" with %.2f; three significant
 * figures keep it readable at every magnitude, with no exponent. */
static void significant_figures(void **state)
{
    (void)state;
    expect_significant(0.00333333, 3, "0.00333");
    expect_significant(0.004, 3, "0.00400");
    expect_significant(0.0123456, 3, "0.0123");
    expect_significant(0.5, 3, "0.500");
    expect_significant(1.75, 3, "1.75");
    expect_significant(12.345, 3, "12.3");
    expect_significant(206.7, 3, "207");
    expect_significant(12345.6, 3, "12346");
    expect_significant(-0.0025, 3, "-0.00250");
    expect_significant(0.0, 3, "0");
    expect_significant(2e-12, 3, "2e-12");
    char out[8];
    tf_format_significant(1.0 / 3.0, 3, out, sizeof out);
    assert_string_equal(out, "0.333");
}

/* "1 ranks", "1 microbatches" read wrong. */
static void plurals(void **state)
{
    (void)state;
    assert_string_equal(tf_plural(1, "rank", "ranks"), "rank");
    assert_string_equal(tf_plural(0, "rank", "ranks"), "ranks");
    assert_string_equal(tf_plural(2, "microbatch", "microbatches"), "microbatches");
    assert_string_equal(tf_plural(1, "microbatch", "microbatches"), "microbatch");
    assert_string_equal(tf_plural(-1, "step", "steps"), "steps");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(significant_figures),
        cmocka_unit_test(plurals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
