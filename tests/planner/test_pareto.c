/* test_pareto.c - the trade-off curves of tf_plan_pareto against plans
 * solved one by one: at random points of the range the batch time of a
 * plan made there equals the curve's (linear between its points), and at
 * every interior point the curve really bends (the slopes on either side
 * differ), on random profiles of several schedules, for the per-action
 * cap and for the memory limit. */
#include <math.h>

#include "test_util.h"
#include "tf/planner.h"
#include "tf/profile.h"

static double uniform(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (double)((*seed >> 8) & 0xFFFF) / 65535.0;
}

/* A random profile of a built-in schedule with memory fields. */
static void random_profile(const char *name, int p, int mb, unsigned *seed, tf_profile *out)
{
    char json[8192];
    int v = tf_schedule_default_stages_per_rank(name), stages = p * v;
    int used = snprintf(json, sizeof json,
                        "{\"schedule\": \"%s\", \"ranks\": %d, \"stages_per_rank\": %d, "
                        "\"microbatches\": %d, \"max_freeze_ratio\": %.6f, \"stages\": [",
                        name, p, v, mb, 0.5 + 0.4 * uniform(seed));
    for (int st = 0; st < stages; st++) {
        double f = 1 + uniform(seed), b = 2 + 2 * uniform(seed), a = 1e9 * (1 + uniform(seed));
        used += snprintf(json + used, sizeof json - used,
                         "%s{\"forward_ms\": %.6f, \"backward_ms\": %.6f, "
                         "\"backward_frozen_ms\": %.6f, \"backward_input_ms\": %.6f, "
                         "\"backward_weight_ms\": %.6f, \"static_bytes\": %.6f, "
                         "\"activation_bytes\": %.6f, \"activation_frozen_bytes\": %.6f, "
                         "\"checkpoint_bytes\": %.6f, \"recompute_ms\": %.6f}",
                         st ? ", " : "", f, b, b * (0.3 + 0.4 * uniform(seed)), b / 2, b / 2,
                         4e9 * uniform(seed), a, a * 0.6, a * 0.1, f);
    }
    snprintf(json + used, sizeof json - used, "]}");
    tf_error err = {0};
    if (tf_profile_parse(json, "random.json", out, &err))
        fail_msg("%s", err.msg);
}

/* The curve's value at x, linear between its points. */
static double curve_at(const tf_pareto *pa, double x)
{
    for (int k = 1; k < pa->n; k++)
        if (x <= pa->points[k].x) {
            const tf_pareto_point *a = &pa->points[k - 1], *b = &pa->points[k];
            double t = (x - a->x) / (b->x - a->x);
            return a->batch_ms + t * (b->batch_ms - a->batch_ms);
        }
    return pa->points[pa->n - 1].batch_ms;
}

static double solved_at(const tf_profile *p, tf_pareto_axis axis, double x)
{
    tf_plan_options o;
    tf_plan_options_init(&o);
    if (axis == TF_PARETO_MEMORY)
        o.memory_limit = x;
    else
        o.max_action_ratio = x;
    tf_plan plan;
    tf_error err = {0};
    if (tf_plan_from_profile(p, &o, &plan, &err))
        fail_msg("at %.17g: %s", x, err.msg);
    double t = plan.batch_ms_planned;
    tf_plan_free(&plan);
    return t;
}

static void check_curve(const tf_profile *p, tf_pareto_axis axis, unsigned *seed)
{
    tf_pareto pa;
    tf_error err = {0};
    if (tf_plan_pareto(p, NULL, axis, &pa, &err))
        fail_msg("%s", err.msg);
    assert_true(pa.n >= 2);
    const double lo = pa.points[0].x, hi = pa.points[pa.n - 1].x;
    for (int k = 1; k < pa.n; k++) {
        assert_true(pa.points[k].x > pa.points[k - 1].x);
        assert_true(pa.points[k].batch_ms <= pa.points[k - 1].batch_ms + 1e-6);
    }
    for (int trial = 0; trial < 12; trial++) {
        double x = lo + (hi - lo) * uniform(seed);
        if (axis == TF_PARETO_ACTION_RATIO && x <= 0)
            continue;
        double direct = solved_at(p, axis, x), on_curve = curve_at(&pa, x);
        if (fabs(direct - on_curve) > 1e-6 * fmax(1.0, direct)) {
            for (int k = 0; k < pa.n; k++)
                print_message("  %.9g %.9g\n", pa.points[k].x, pa.points[k].batch_ms);
            fail_msg("%s axis %d: at %.9g solved %.9g, curve %.9g", p->schedule.name, axis, x,
                     direct, on_curve);
        }
    }
    /* Each interior point is a kink: slopes measured by solves on either
     * side differ. */
    for (int k = 1; k + 1 < pa.n; k++) {
        double x = pa.points[k].x, h = 1e-3 * (hi - lo);
        double left = (pa.points[k].batch_ms - solved_at(p, axis, x - h)) / h;
        double right = (solved_at(p, axis, x + h) - pa.points[k].batch_ms) / h;
        if (!(right - left > 1e-4 * fmax(fabs(left), fabs(right))))
            fail_msg("point %d (x = %g) is no breakpoint: slopes %g and %g", k, x, left, right);
    }
    tf_pareto_free(&pa);
}

static void curves_against_solves(void **state)
{
    (void)state;
    const struct {
        const char *name;
        int p, mb;
    } shapes[] = {{"1F1B", 2, 4}, {"GPipe", 3, 3}, {"Interleaved1F1B", 2, 4},
                  {"ZBVZeroBubble", 2, 4}, {"1F1B", 4, 8}};
    unsigned seed = 5;
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        tf_profile p;
        random_profile(shapes[k].name, shapes[k].p, shapes[k].mb, &seed, &p);
        check_curve(&p, TF_PARETO_ACTION_RATIO, &seed);
        check_curve(&p, TF_PARETO_MEMORY, &seed);
        tf_profile_free(&p);
    }
}

/* A profile without memory fields has no memory curve. */
static void memory_curve_needs_bytes(void **state)
{
    (void)state;
    tf_profile p;
    tf_error err = {0};
    assert_int_equal(tf_profile_parse("{\"schedule\": \"1F1B\", \"ranks\": 2, \"microbatches\": 2,"
                                      " \"stages\": [{\"forward_ms\": 1, \"backward_ms\": 2},"
                                      " {\"forward_ms\": 1, \"backward_ms\": 2}]}",
                                      "p.json", &p, &err),
                     0);
    tf_pareto pa;
    assert_int_equal(tf_plan_pareto(&p, NULL, TF_PARETO_MEMORY, &pa, &err), TF_EINVAL);
    assert_contains(err.msg, "memory fields");
    tf_profile_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(curves_against_solves),
        cmocka_unit_test(memory_curve_needs_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
