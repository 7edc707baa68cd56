/* pareto.c - the batch time as a function of one limit, exactly
 * (tf/planner.h, tf_plan_pareto): of the largest freeze ratio any action
 * may take, or of the memory limit.
 *
 * Either limit is a right-hand side of the freeze LP, so the least batch
 * time T(x) is convex and piecewise linear in it (and non-increasing).
 * Its breakpoints are found by the sandwich method: from the two ends of
 * an interval and T's slope just inside each, the lines through them meet
 * at x*; if T(x*) is on those lines, x* is the one breakpoint between
 * them, else T(x*) lies above both (T is convex) and the two halves are
 * searched the same way.  Each breakpoint costs a few solves; no grid
 * is sampled and none is missed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tf/planner.h"

/* Solves at most this many plans in one sweep. */
enum { PARETO_MAX_SOLVES = 400 };

typedef struct sweep {
    const tf_profile *p;
    tf_plan_options o;
    tf_pareto *out;
    int capacity;
    double delta;  /* the step that measures a slope */
    double tol;    /* ms: what counts as on a line */
    tf_error *err;
} sweep;

/* T and the plan's figures at x. */
static int evaluate(sweep *w, double x, tf_pareto_point *pt)
{
    memset(pt, 0, sizeof *pt);
    pt->x = x;
    tf_plan plan;
    if (w->out->axis == TF_PARETO_ACTION_RATIO) {
        if (x <= 0.0) {
            /* Nothing may freeze: the unfrozen schedule, no LP needed. */
            int rc = tf_plan_unfrozen(w->p, &plan, w->err);
            if (rc)
                return rc;
            pt->batch_ms = plan.batch_ms_unfrozen;
            tf_plan_free(&plan);
            return 0;
        }
        w->o.max_action_ratio = x;
    } else {
        w->o.memory_limit = x;
    }
    if (w->out->solves++ >= PARETO_MAX_SOLVES)
        return tf_fail(w->err, TF_ESOLVER, "the trade-off needs more than %d solves",
                       PARETO_MAX_SOLVES);
    int rc = tf_plan_from_profile(w->p, &w->o, &plan, w->err);
    if (rc)
        return rc;
    pt->batch_ms = plan.batch_ms_planned;
    pt->freeze_ratio_mean = plan.freeze_ratio_mean;
    double recomputed = 0.0;
    for (int i = 0; i < plan.schedule.n_actions; i++)
        recomputed += plan.actions[i].recompute_ratio;
    pt->recompute_sum = recomputed;
    tf_plan_free(&plan);
    return 0;
}

static int record(sweep *w, const tf_pareto_point *pt)
{
    if (w->out->n == w->capacity) {
        int capacity = w->capacity ? 2 * w->capacity : 16;
        tf_pareto_point *grown = realloc(w->out->points, (size_t)capacity * sizeof *grown);
        if (!grown)
            return tf_fail(w->err, TF_ENOMEM, "out of memory");
        w->out->points = grown;
        w->capacity = capacity;
    }
    w->out->points[w->out->n++] = *pt;
    return 0;
}

/* T's slope just right (side 1) or just left (side -1) of pt.x. */
static int slope(sweep *w, const tf_pareto_point *pt, int side, double *out)
{
    tf_pareto_point near;
    int rc = evaluate(w, pt->x + side * w->delta, &near);
    if (!rc)
        *out = (near.batch_ms - pt->batch_ms) / (side * w->delta);
    return rc;
}

/* How far a point may be off a line drawn len along x from where its
 * slope was measured: the solver's round-off, and that round-off over the
 * slope's step carried along len. */
static double off_line(const sweep *w, double len)
{
    return w->tol * (1.0 + 2.0 * len / w->delta);
}

/* Records (in order) where T bends strictly between a and b, given T's
 * slope sa just right of a and sb just left of b; the kinks are found to
 * within the slopes' accuracy (polish makes them exact). */
static int refine(sweep *w, const tf_pareto_point *a, double sa, const tf_pareto_point *b,
                  double sb)
{
    const double len = b->x - a->x;
    if (fabs(a->batch_ms + sa * len - b->batch_ms) <= off_line(w, len) || sa >= sb)
        return 0; /* one line from a to b */
    double x = (b->batch_ms - a->batch_ms + sa * a->x - sb * b->x) / (sa - sb);
    if (!(x > a->x + w->delta && x < b->x - w->delta))
        return 0; /* the kink is within a slope's step of an end */
    tf_pareto_point mid;
    int rc = evaluate(w, x, &mid);
    if (rc)
        return rc;
    if (fabs(mid.batch_ms - (a->batch_ms + sa * (x - a->x))) <= off_line(w, x - a->x) &&
        fabs(mid.batch_ms - (b->batch_ms - sb * (b->x - x))) <= off_line(w, b->x - x))
        return record(w, &mid); /* on both lines: the one kink between a and b */
    double left, right;
    if ((rc = slope(w, &mid, -1, &left)) || (rc = slope(w, &mid, 1, &right)) ||
        (rc = refine(w, a, sa, &mid, left)) || (rc = record(w, &mid)))
        return rc;
    return refine(w, &mid, right, b, sb);
}

/* The line T follows on the piece from a to b, from two solves well
 * inside it (slope and value at a). */
static int piece_line(sweep *w, const tf_pareto_point *a, const tf_pareto_point *b,
                      double *slope_out, double *at_a)
{
    tf_pareto_point u, v;
    double len = b->x - a->x;
    int rc = evaluate(w, a->x + 0.25 * len, &u);
    if (!rc)
        rc = evaluate(w, a->x + 0.75 * len, &v);
    if (!rc) {
        *slope_out = (v.batch_ms - u.batch_ms) / (v.x - u.x);
        *at_a = u.batch_ms - *slope_out * (u.x - a->x);
    }
    return rc;
}

/* Moves each kink between two pieces to where the pieces' lines meet,
 * each line measured from solves far from any kink, and solves there: the
 * breakpoints to the solver's precision. */
static int polish(sweep *w)
{
    tf_pareto *pa = w->out;
    const int kinks = pa->n - 2;
    if (kinks < 1)
        return 0;
    double *slopes = malloc(sizeof *slopes * (size_t)(kinks + 1));
    double *starts = malloc(sizeof *starts * (size_t)(kinks + 1));
    int rc = slopes && starts ? 0 : tf_fail(w->err, TF_ENOMEM, "out of memory");
    for (int k = 0; k <= kinks && !rc; k++)
        rc = piece_line(w, &pa->points[k], &pa->points[k + 1], &slopes[k], &starts[k]);
    /* A kink between two pieces of one slope is none: merge them. */
    int kept = 1;
    for (int k = 1; k <= kinks && !rc; k++) {
        double scale = fmax(fabs(slopes[k - 1]), fabs(slopes[k]));
        if (fabs(slopes[k] - slopes[k - 1]) <= 1e-6 * scale + off_line(w, 0.0) / w->delta)
            continue;
        double xa = pa->points[k - 1].x, xb = pa->points[k].x;
        double x = (starts[k] - starts[k - 1] + slopes[k - 1] * xa - slopes[k] * xb) /
                   (slopes[k - 1] - slopes[k]);
        pa->points[kept] = pa->points[k];
        if (x > pa->points[k - 1].x && x < pa->points[k + 1].x)
            rc = evaluate(w, x, &pa->points[kept]);
        kept++;
    }
    pa->points[kept++] = pa->points[pa->n - 1];
    if (!rc)
        pa->n = kept;
    free(slopes);
    free(starts);
    return rc;
}

/* The range of x: the per-action cap from 0 to 1; the memory limit from
 * just above the smallest that any plan meets to the largest unfrozen
 * peak, beyond which the limit binds nowhere. */
static int axis_range(sweep *w, double *lo, double *hi)
{
    if (w->out->axis == TF_PARETO_ACTION_RATIO) {
        *lo = 0.0;
        *hi = 1.0;
        return 0;
    }
    tf_plan plan;
    int rc = tf_plan_memory_floor(w->p, &w->o, lo, w->err);
    if (rc)
        return rc;
    if ((rc = tf_plan_unfrozen(w->p, &plan, w->err)))
        return rc;
    *hi = 0.0;
    for (int r = 0; r < plan.schedule.ranks; r++)
        *hi = fmax(*hi, plan.per_rank[r].peak_unfrozen.bytes);
    tf_plan_free(&plan);
    /* The plan keeps a relative margin of 1e-9 below its limit. */
    *lo *= 1.0 + 1e-8;
    if (*lo >= *hi)
        *lo = *hi;
    return 0;
}

int tf_plan_pareto(const tf_profile *p, const tf_plan_options *o, tf_pareto_axis axis,
                   tf_pareto *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    out->axis = axis;
    sweep w = {.p = p, .out = out, .err = err};
    if (o)
        w.o = *o;
    else
        tf_plan_options_init(&w.o);
    if (axis == TF_PARETO_MEMORY && !p->memory)
        return tf_fail(err, TF_EINVAL, "the trade-off against the memory limit needs a profile "
                       "with memory fields (static_bytes, activation_bytes per stage)");
    double lo, hi;
    tf_pareto_point first, last;
    tf_plan unfrozen;
    int rc = tf_plan_unfrozen(p, &unfrozen, err);
    if (rc)
        return rc;
    out->batch_ms_unfrozen = unfrozen.batch_ms_unfrozen;
    tf_plan_free(&unfrozen);
    rc = axis_range(&w, &lo, &hi);
    if (!rc)
        rc = evaluate(&w, lo, &first);
    if (!rc)
        rc = evaluate(&w, hi, &last);
    if (!rc)
        rc = record(&w, &first);
    if (!rc && hi > lo) {
        /* The solver's round-off is about 1e-9 of the batch time; a step
         * of 1e-4 of the range measures slopes to about 2e-5 of it. */
        w.delta = 1e-4 * (hi - lo);
        w.tol = 4e-9 * fmax(1.0, first.batch_ms);
        double sa, sb;
        if (!(rc = slope(&w, &first, 1, &sa)) && !(rc = slope(&w, &last, -1, &sb)) &&
            !(rc = refine(&w, &first, sa, &last, sb)) && !(rc = record(&w, &last)))
            rc = polish(&w);
    }
    if (rc)
        tf_pareto_free(out);
    return rc;
}

void tf_pareto_free(tf_pareto *pa)
{
    free(pa->points);
    memset(pa, 0, sizeof *pa);
}
