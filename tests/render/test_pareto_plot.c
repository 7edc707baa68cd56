/* test_pareto_plot.c - the trade-off chart (tf/pareto_plot.h) checked
 * against the curve it draws.
 *
 * The SVG is read back by string scanning, as test_timeline.c does: the
 * axes' scales come from the drawn tick labels themselves (ids xtick_k and
 * ytick_k, text = value), and every point's mark must sit where those
 * scales put the point's limit and batch time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/pareto_plot.h"

/* A memory curve in the shape tf_plan_pareto returns: falling and convex,
 * flat after the last breakpoint. */
static tf_pareto memory_curve(tf_pareto_point *points)
{
    const double gib = 1073741824.0;
    const double x[] = {55.8, 59.8, 63.0, 66.2, 72.5, 86.6};
    const double ms[] = {457.3, 416.8, 396.1, 381.9, 362.6, 362.6};
    for (int k = 0; k < 6; k++)
        points[k] = (tf_pareto_point){x[k] * gib, ms[k], 0.5 + 0.03 * k, 10.0 - k};
    return (tf_pareto){TF_PARETO_MEMORY, points, 6, 40, 508.6};
}

static char *render_svg(const tf_pareto *pa)
{
    char *data = NULL;
    size_t n = 0;
    tf_error err = {0};
    int rc = tf_pareto_plot_data(pa, "svg", 96, &data, &n, &err);
    if (rc)
        fail_msg("render: %s", err.msg);
    assert_non_null(data);
    assert_true(n > 0);
    return data;
}

/* The group of the element with id, up to the next element's comment. */
static const char *group(const char *svg, const char *id, const char **end)
{
    char key[64];
    snprintf(key, sizeof key, "<g id=\"%s\" class=\"", id);
    const char *g = strstr(svg, key);
    const char *next = g ? strstr(g + 1, "<!-- ") : NULL;
    *end = next ? next : g ? g + strlen(g) : NULL;
    return g;
}

/* A number after key (e.g. " x=\"") inside [from, end); NAN if none. */
static double number_after(const char *from, const char *end, const char *key)
{
    const char *p = strstr(from, key);
    return p && p < end ? strtod(p + strlen(key), NULL) : NAN;
}

/* The centre of node id's polygon. */
static void centre(const char *svg, const char *id, double *x, double *y)
{
    const char *end, *g = group(svg, id, &end);
    assert_non_null(g);
    const char *points = strstr(g, "points=\"");
    assert_true(points && points < end);
    double x0 = HUGE_VAL, x1 = -HUGE_VAL, y0 = HUGE_VAL, y1 = -HUGE_VAL;
    for (char *p = (char *)points + 8; *p && *p != '"';) {
        double px = strtod(p, &p), py = strtod(p + 1, &p);
        x0 = fmin(x0, px);
        x1 = fmax(x1, px);
        y0 = fmin(y0, py);
        y1 = fmax(y1, py);
        while (*p == ' ')
            p++;
    }
    *x = (x0 + x1) / 2;
    *y = (y0 + y1) / 2;
}

/* An axis from its ticks: coordinate = at_zero + value * per_unit, the
 * value from each tick's label (<axis>tick_k), the coordinate from its
 * gridline (<axis>grid_k); vertical: the y coordinate, else the x. */
static void read_ticks(const char *svg, char axis, double *at_zero, double *per_unit)
{
    double first_v = 0, first_c = 0, last_v = 0, last_c = 0;
    int ticks = 0;
    for (int k = 0;; k++, ticks++) {
        char id[32];
        snprintf(id, sizeof id, "%ctick_%d", axis, k);
        const char *end, *g = group(svg, id, &end);
        if (!g)
            break;
        const char *text = strstr(g, "<text");
        assert_true(text && text < end);
        double v = strtod(strchr(text, '>') + 1, NULL), x, y;
        snprintf(id, sizeof id, "%cgrid_%d", axis, k);
        centre(svg, id, &x, &y);
        double c = axis == 'y' ? y : x;
        if (k == 0) {
            first_v = v;
            first_c = c;
        }
        last_v = v;
        last_c = c;
    }
    assert_true(ticks >= 3);
    *per_unit = (last_c - first_c) / (last_v - first_v);
    *at_zero = first_c - first_v * *per_unit;
}

static void test_points_where_the_axes_put_them(void **state)
{
    (void)state;
    tf_pareto_point points[6];
    tf_pareto pa = memory_curve(points);
    char *svg = render_svg(&pa);
    double x_zero, x_per_gib, y_zero, y_per_ms, px, py;
    read_ticks(svg, 'x', &x_zero, &x_per_gib);
    read_ticks(svg, 'y', &y_zero, &y_per_ms);
    assert_true(x_per_gib > 0);
    assert_true(y_per_ms < 0); /* more time is higher up */
    for (int k = 0; k < pa.n; k++) {
        char id[16];
        snprintf(id, sizeof id, "pt_%d", k);
        centre(svg, id, &px, &py);
        assert_true(fabs(px - (x_zero + points[k].x / 1073741824.0 * x_per_gib)) <= 1.0);
        assert_true(fabs(py - (y_zero + points[k].batch_ms * y_per_ms)) <= 1.0);
    }
    const char *end, *seg = group(svg, "seg_4", &end);
    assert_non_null(seg); /* n - 1 pieces: seg_0 .. seg_4 */
    assert_null(group(svg, "seg_5", &end));
    const char *ref = group(svg, "unfrozen", &end);
    assert_non_null(ref);
    double ref_y = number_after(strstr(ref, " d=\"M"), end, ",");
    assert_true(fabs(ref_y - (y_zero + pa.batch_ms_unfrozen * y_per_ms)) <= 1.0);
    assert_non_null(strstr(svg, "memory limit of every rank (GiB)"));
    assert_non_null(strstr(svg, "batch time (ms)"));
    assert_non_null(strstr(svg, ">55.8 GiB, 457.3 ms<"));
    free(svg);
}

static void test_ratio_axis_and_errors(void **state)
{
    (void)state;
    tf_pareto_point points[2] = {{0.0, 660.0, 0.0, 0.0}, {1.0, 420.0, 0.7, 0.0}};
    tf_pareto pa = {TF_PARETO_ACTION_RATIO, points, 2, 5, 660.0};
    char *svg = render_svg(&pa);
    assert_non_null(strstr(svg, "largest freeze ratio of any action"));
    assert_non_null(strstr(svg, ">1, 420.0 ms<"));
    free(svg);
    tf_pareto empty = {TF_PARETO_ACTION_RATIO, NULL, 0, 0, 660.0};
    char *data = (char *)"untouched";
    size_t len = 7;
    tf_error err = {0};
    assert_int_equal(tf_pareto_plot_data(&empty, "svg", 96, &data, &len, &err), TF_EINVAL);
    assert_null(data);
    assert_non_null(strstr(err.msg, "without points"));
    assert_int_equal(tf_pareto_plot(&pa, "/tmp/chart.gif", &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, ".svg"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_points_where_the_axes_put_them),
        cmocka_unit_test(test_ratio_axis_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
