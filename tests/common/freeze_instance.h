/* freeze_instance.h - a freeze-LP instance for the solver tests: a schedule,
 * its DAG, durations and caps, all owned by the instance; random instances;
 * and the check every solver's plan must pass on one. */
#ifndef TF_FREEZE_INSTANCE_H
#define TF_FREEZE_INSTANCE_H

#include <math.h>
#include <stdlib.h>

#include "model/freezable.h"
#include "test_util.h"
#include "tf/dag.h"
#include "tf/freeze.h"
#include "tf/schedule.h"

typedef struct instance {
    tf_schedule s;
    tf_dag g;
    double *max_ms, *min_ms, *cap;
} instance;

/* Frees everything x owns (x may be partly built from a zeroed start). */
static inline void instance_free(instance *x)
{
    tf_dag_free(&x->g);
    tf_schedule_free(&x->s);
    free(x->max_ms);
    free(x->min_ms);
    free(x->cap);
}

/* How random_instance draws.  equal: every action of a type takes the same
 * time (degenerate ties, and no random draws for the times).  Each action
 * draws w: below 0.1 it is not freezable, below zero_frozen_below (if above
 * 0.1) a backward action's frozen time is 0.  A stage's cap draw c below
 * cap_zero_below gives cap 0, above cap_one_above cap 1, so both ends are
 * common. */
typedef struct instance_options {
    int equal;
    double zero_frozen_below;
    double cap_zero_below, cap_one_above;
} instance_options;

/* A random instance: F in [1,2), B in [2,5) with frozen 10-90% of it, split
 * backwards I in [1,3), W in [1,3) frozen to 1-50%; a tenth of the actions
 * get min == max (not freezable); caps in [0, 1].  Draws from *seed. */
static inline void random_instance(instance *x, const char *name, int ranks, int spr, int mb,
                                   double p2p, const instance_options *o, uint64_t *seed)
{
    memset(x, 0, sizeof *x);
    assert_int_equal(tf_schedule_build(name, ranks, spr, mb, &x->s, NULL), 0);
    assert_int_equal(tf_dag_build(&x->s, p2p, &x->g, NULL), 0);
    int n = x->s.n_actions;
    x->max_ms = malloc(sizeof(double) * n);
    x->min_ms = malloc(sizeof(double) * n);
    x->cap = malloc(sizeof(double) * x->s.stages);
    for (int i = 0; i < n; i++) {
        double u = o->equal ? 0.5 : test_random(seed), v = o->equal ? 0.5 : test_random(seed);
        tf_action_type type = x->s.actions[i].type;
        switch (type) {
        case TF_ACT_F: x->max_ms[i] = x->min_ms[i] = 1 + u; break;
        case TF_ACT_I: x->max_ms[i] = x->min_ms[i] = 1 + 2 * u; break;
        case TF_ACT_B:
            x->max_ms[i] = 2 + 3 * u;
            x->min_ms[i] = x->max_ms[i] * (0.1 + 0.8 * v);
            break;
        case TF_ACT_W:
            x->max_ms[i] = 1 + 2 * u;
            x->min_ms[i] = x->max_ms[i] * (0.01 + 0.49 * v);
            break;
        case TF_ACT_R: x->max_ms[i] = x->min_ms[i] = 0.0; break; /* none built */
        }
        double w = test_random(seed);
        if (w < 0.1)
            x->min_ms[i] = x->max_ms[i];
        else if (w < o->zero_frozen_below && (type == TF_ACT_B || type == TF_ACT_W))
            x->min_ms[i] = 0.0;
    }
    for (int st = 0; st < x->s.stages; st++) {
        double c = test_random(seed);
        x->cap[st] = c < o->cap_zero_below ? 0.0 : c > o->cap_one_above ? 1.0 : c;
    }
}

/* x as a freeze problem for `solver` and `objective`. */
static inline tf_freeze_problem instance_problem(const instance *x, tf_solver solver,
                                                 tf_objective objective)
{
    tf_freeze_problem p;
    tf_freeze_problem_init(&p);
    p.schedule = &x->s;
    p.dag = &x->g;
    p.max_ms = x->max_ms;
    p.min_ms = x->min_ms;
    p.cap = x->cap;
    p.objective = objective;
    p.solver = solver;
    return p;
}

/* Solves p with its solver alone: no fallback to the other one, so a test
 * sees each solver's own answer, or its own failure. */
static inline int solve_alone(const tf_freeze_problem *p, tf_freeze_result *out, tf_error *err)
{
    tf_freeze_control c;
    tf_freeze_control_init(&c);
    c.fallback = 0;
    return tf_freeze_solve(p, &c, out, err);
}

/* solve_alone on instance x. */
static inline int instance_solve(const instance *x, tf_solver solver, tf_objective objective,
                                 tf_freeze_result *out, tf_error *err)
{
    tf_freeze_problem p = instance_problem(x, solver, objective);
    return solve_alone(&p, out, err);
}

/* Everything a plan r promises on x, whichever solver made it: ratios in
 * [0, 1] and 0 for fixed actions, each duration max - ratio (max - min),
 * every stage's cap met (in mean and in sum, within round-off), the
 * reported makespan that of the durations, and start times that respect
 * every edge. */
static inline void instance_check_plan(const instance *x, const tf_freeze_result *r)
{
    const int n = x->s.n_actions, stages = x->s.stages;
    double *used = calloc((size_t)stages + 1, sizeof *used);
    int *count = calloc((size_t)stages + 1, sizeof *count);
    assert_non_null(used);
    assert_non_null(count);
    for (int i = 0; i < n; i++) {
        assert_true(r->ratio[i] >= 0.0 && r->ratio[i] <= 1.0);
        assert_close(r->duration[i], x->max_ms[i] - r->ratio[i] * (x->max_ms[i] - x->min_ms[i]),
                     1e-12);
        if (!tf_action_freezable(&x->s.actions[i], x->max_ms[i], x->min_ms[i])) {
            assert_true(r->ratio[i] == 0.0);
            continue;
        }
        used[x->s.actions[i].stage] += r->ratio[i];
        count[x->s.actions[i].stage]++;
    }
    for (int st = 0; st < stages; st++) {
        if (count[st])
            assert_true(used[st] / count[st] <= x->cap[st] + 1e-7);
        if (x->cap[st] < 1.0)
            assert_true(used[st] <= x->cap[st] * count[st] + 1e-8 * (1 + count[st]));
    }
    free(used);
    free(count);
    /* Re-simulating the planned durations gives the planned batch time. */
    assert_close(tf_dag_longest_path(&x->g, r->duration, NULL), r->makespan, 1e-12);
    for (int u = 0; u < n; u++)
        for (int e = x->g.succ_offset[u]; e < x->g.succ_offset[u + 1]; e++)
            assert_true(r->start[u] + r->duration[u] + x->g.lag[e] <=
                        r->start[x->g.succ[e]] + 1e-9);
}

#endif
