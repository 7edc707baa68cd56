/* aux_compare.c - what freezing does to the aux work the bubbles can take
 * (tf/planner.h, tf_plan_compare_aux): the unfrozen step, the plan, and
 * the most freezing that still refreshes the aux work as often as the
 * unfrozen step does.
 *
 * Freezing shortens the step by shortening its critical path; the ranks
 * off that path keep waiting, but for less time, so the bubbles shrink
 * and aux work spills into later steps.  Lowering the per-action cap
 * gives up speed for bubbles; the third arm searches the cap by bisection
 * for the largest one whose refresh interval is no longer than the
 * unfrozen step's.  (Work that becomes ready after a rank's last idle
 * window, such as curvature after rank 0's last backward, spills at any
 * cap, so "nothing spills" would be a target most profiles never meet.)
 * The interval is not monotone in the cap in general (first fit, windows
 * that move), so the cap found keeps it with a cap a little above it not
 * keeping it, not always the largest such cap. */
#include <string.h>

#include "model/plan_internal.h"
#include "tf/planner.h"

/* Halvings of the cap's interval: the cap to within 2^-20. */
enum { BISECTIONS = 20 };

/* The plan at per-action cap x (0: the unfrozen schedule) as an arm. */
static int arm_at(const tf_profile *p, const tf_plan_options *base, double x, tf_aux_arm *arm,
                  tf_error *err)
{
    tf_plan_options o = *base;
    o.max_action_ratio = x;
    tf_plan plan;
    int rc = x <= 0.0 ? tf_plan_unfrozen(p, &plan, err) : tf_plan_from_profile(p, &o, &plan, err);
    if (!rc && x <= 0.0 && plan.aux_margin != o.aux_margin) {
        plan.aux_margin = o.aux_margin; /* the unfrozen plan takes no options */
        rc = tf_plan_place_aux(&plan, err);
        if (rc)
            tf_plan_free(&plan);
    }
    if (rc)
        return rc;
    memset(arm, 0, sizeof *arm);
    arm->max_action_ratio = x;
    arm->batch_ms = plan.batch_ms_planned;
    arm->refresh_steps = tf_aux_refresh_steps(&plan.aux);
    for (int r = 0; r < plan.aux.ranks; r++) {
        arm->demand_ms += plan.aux.per_rank[r].demand_ms;
        arm->placed_ms += plan.aux.per_rank[r].placed_ms;
    }
    tf_plan_free(&plan);
    return 0;
}

/* Whether arm a refreshes as often as the unfrozen arm u (0: never). */
static int keeps(const tf_aux_arm *a, const tf_aux_arm *u)
{
    return a->refresh_steps != 0 && a->refresh_steps <= u->refresh_steps;
}

/* The third arm: bisection between a cap that keeps the interval (lo)
 * and one that does not (hi). */
static int most_freezing_that_keeps(const tf_profile *p, const tf_plan_options *o,
                                    tf_aux_comparison *out, tf_error *err)
{
    double lo = 0.0, hi = out->arm[1].max_action_ratio;
    out->arm[2] = out->arm[0];
    for (int k = 0; k < BISECTIONS; k++) {
        double mid = 0.5 * (lo + hi);
        tf_aux_arm at;
        int rc = arm_at(p, o, mid, &at, err);
        if (rc)
            return rc;
        if (keeps(&at, &out->arm[0])) {
            lo = mid;
            out->arm[2] = at;
        } else {
            hi = mid;
        }
    }
    return 0;
}

int tf_plan_compare_aux(const tf_profile *p, const tf_plan_options *o, tf_aux_comparison *out,
                        tf_error *err)
{
    memset(out, 0, sizeof *out);
    if (!p->n_aux)
        return tf_fail(err, TF_EINVAL, "the profile declares no aux work (a stage's \"aux\")");
    tf_plan_options base;
    if (o)
        base = *o;
    else
        tf_plan_options_init(&base);
    int rc = arm_at(p, &base, 0.0, &out->arm[0], err);
    if (!rc)
        rc = arm_at(p, &base, base.max_action_ratio, &out->arm[1], err);
    if (rc)
        return rc;
    if (out->arm[0].refresh_steps == 0) {
        out->arm[2] = out->arm[0];
        out->never_completes = 1;
        return 0;
    }
    if (keeps(&out->arm[1], &out->arm[0])) {
        out->arm[2] = out->arm[1];
        return 0;
    }
    return most_freezing_that_keeps(p, &base, out, err);
}
