/* bench-plan: times the planner end to end (profile in memory -> DAG -> LP
 * -> plan) on 1F1B schedules of growing size and prints one row per size:
 * actions, LP rows and columns, seconds in lp_solve and end to end.
 *
 *   bench-plan [ACTIONS...]      default: 512 2048 8192
 *
 * Sizes are 1F1B with 8 ranks and ACTIONS / 16 microbatches; stage times
 * vary by stage and microbatch (seeded) so the LP is not degenerate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/plan.h"
#include "tf/util.h"

static double jitter(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (double)(*state >> 8) / (double)(1u << 24);
}

/* A 1F1B profile with per-action measured times, as tf-exec would write. */
static int make_profile(int ranks, int microbatches, tf_profile *p, tf_error *err)
{
    memset(p, 0, sizeof *p);
    int rc = tf_schedule_build("1F1B", ranks, 1, microbatches, &p->schedule, err);
    if (rc)
        return rc;
    int n = p->schedule.n_actions;
    p->stages = calloc((size_t)ranks, sizeof *p->stages);
    p->max_freeze_ratio = calloc((size_t)ranks, sizeof *p->max_freeze_ratio);
    p->overrides = calloc((size_t)n, sizeof *p->overrides);
    if (!p->stages || !p->max_freeze_ratio || !p->overrides)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    p->microbatch_tokens = 8192;
    unsigned seed = 42;
    for (int s = 0; s < ranks; s++) {
        p->stages[s].forward_ms = 14 + 2 * jitter(&seed);
        p->stages[s].backward_ms = 40 + 6 * jitter(&seed);
        p->stages[s].backward_frozen_ms = 0.45 * p->stages[s].backward_ms;
        p->max_freeze_ratio[s] = 0.8;
    }
    for (int i = 0; i < n; i++) {
        const tf_action *a = &p->schedule.actions[i];
        const tf_stage_times *st = &p->stages[a->stage];
        tf_action_time *o = &p->overrides[p->n_overrides++];
        o->type = a->type;
        o->stage = a->stage;
        o->microbatch = a->microbatch;
        double base = a->type == TF_ACT_F ? st->forward_ms : st->backward_ms;
        o->ms = base * (0.95 + 0.1 * jitter(&seed));
        o->frozen_ms = a->type == TF_ACT_B ? o->ms * (0.4 + 0.1 * jitter(&seed)) : -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int default_sizes[] = {512, 2048, 8192};
    int count = argc > 1 ? argc - 1 : 3;
    printf("%8s %6s %6s %8s %8s %10s %10s %8s\n", "actions", "ranks", "micro", "rows",
           "columns", "solve_s", "total_s", "speedup");
    for (int k = 0; k < count; k++) {
        int actions = argc > 1 ? atoi(argv[k + 1]) : default_sizes[k];
        int ranks = 8, microbatches = actions / (2 * ranks);
        if (microbatches < 1) {
            fprintf(stderr, "bench-plan: %s is too few actions\n", argv[k + 1]);
            return 2;
        }
        tf_error err = {0};
        tf_profile p;
        tf_plan plan;
        double started = tf_now_seconds();
        if (make_profile(ranks, microbatches, &p, &err) ||
            tf_plan_from_profile(&p, NULL, &plan, &err)) {
            fprintf(stderr, "bench-plan: %s\n", err.msg);
            return 1;
        }
        double total = tf_now_seconds() - started;
        printf("%8d %6d %6d %8d %8d %10.3f %10.3f %8.3f\n", plan.schedule.n_actions, ranks,
               microbatches, plan.solver_constraints, plan.solver_variables, plan.solver_seconds,
               total, plan.speedup);
        fflush(stdout);
        tf_plan_free(&plan);
        tf_profile_free(&p);
    }
    return 0;
}
