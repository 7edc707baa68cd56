/* bench-plan: times the planner end to end (profile in memory -> DAG -> LP
 * -> plan) on 1F1B schedules of growing size and prints one row per size:
 * actions, LP rows and columns, seconds in lp_solve and end to end.
 *
 *   bench-plan [ACTIONS...]      default: 512 2048 8192
 *
 * Sizes are 1F1B with 8 ranks and ACTIONS / 16 microbatches; stage times
 * vary by stage and microbatch (seeded, bench_profile.h) so the LP is not
 * degenerate.  The planner runs with its default solver (auto); to compare
 * solvers, see bench-solvers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_profile.h"
#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/util.h"

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
        if (bench_make_profile("1F1B", ranks, 1, microbatches, &p, &err) ||
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
