/* fuzz_profile.c - libFuzzer target for profile.json (tf_profile_parse), and
 * for what a profile feeds: the DAG of its schedule (deadlock check), the
 * profile written back and read again, and on small profiles the freeze LP
 * with every solver, which must agree with lp_solve on the batch time and
 * the total freeze. */
#include <math.h>

#include "fuzz_util.h"
#include "tf/dag.h"
#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/profile.h"

/* Profiles up to this many actions are planned (each solver: a few ms). */
enum { PLANNED_ACTIONS = 256 };

/* Plans p with one solver, no fallback, a time limit well inside
 * libFuzzer's -timeout.  Returns the batch time, with the plan's total
 * freeze ratio in *freeze, or NAN when the solver reported a failure
 * (allowed: only wrong answers and crashes are findings). */
static double planned_batch(const tf_profile *p, tf_solver solver, double *freeze)
{
    tf_plan_options o;
    tf_plan_options_init(&o);
    o.solver = solver;
    o.control.fallback = 0;
    o.control.time_limit_s = 5.0;
    tf_plan plan;
    tf_error err = {0};
    if (tf_plan_from_profile(p, &o, &plan, &err))
        return NAN;
    double batch = plan.batch_ms_planned;
    *freeze = 0.0;
    for (int i = 0; i < plan.schedule.n_actions; i++)
        *freeze += plan.actions[i].freeze_ratio;
    /* Only a memory limit that the unfrozen schedule breaks can make a plan
     * slower than it (by recomputing). */
    int unfrozen_fits = 1;
    for (int r = 0; plan.memory_limit && r < plan.schedule.ranks; r++)
        unfrozen_fits &= plan.per_rank[r].peak_unfrozen.bytes <= plan.memory_limit[r];
    FUZZ_CHECK(plan.batch_ms_all_frozen <= batch * (1 + 1e-9) + 1e-9 &&
                   (!unfrozen_fits || batch <= plan.batch_ms_unfrozen * (1 + 1e-9) + 1e-9),
               "%s: planned %.17g outside [%.17g, %.17g]", tf_solver_name(solver), batch,
               plan.batch_ms_all_frozen, plan.batch_ms_unfrozen);
    tf_plan_free(&plan);
    return batch;
}

static void check_profile(const tf_profile *p)
{
    tf_error err = {0};
    tf_dag g;
    if (tf_dag_build(&p->schedule, p->p2p_ms, &g, &err) == 0)
        tf_dag_free(&g);
    else
        return; /* a deadlocking order: refused, nothing to plan */
    char *json;
    FUZZ_CHECK(tf_profile_to_json(p, &json, &err) == 0, "%s", err.msg);
    tf_profile again;
    FUZZ_CHECK(tf_profile_parse(json, "written.json", &again, &err) == 0,
               "a profile written by tf_profile_to_json is refused: %s", err.msg);
    tf_profile_free(&again);
    free(json);
    if (p->schedule.n_actions > PLANNED_ACTIONS)
        return;
    double lp_freeze;
    double lp = planned_batch(p, TF_SOLVER_LP_SOLVE, &lp_freeze);
    if (isnan(lp))
        return;
    const tf_solver others[2] = {TF_SOLVER_FAST, TF_SOLVER_CLP};
    for (int k = 0; k < 2; k++) {
        double freeze, batch = planned_batch(p, others[k], &freeze);
        const char *name = tf_solver_name(others[k]);
        if (isnan(batch))
            continue;
        FUZZ_CHECK(fabs(lp - batch) <= 1e-6 * fmax(1.0, lp), "lp_solve %.17g, %s %.17g", lp,
                   name, batch);
        /* The total freeze agrees too, unless the one that freezes more
         * has the shorter batch time: the first objective comes first,
         * and where the exact bound on it is infeasible by round-off,
         * lp_solve plans 1e-9 relative above it (freeze_lpsolve.c), which
         * on an ill-conditioned profile frees real freezing (the coarse
         * ratios regression: 6.3e-3 ms of 6.3e6 frees 0.011). */
        const int traded = (freeze - lp_freeze) * (lp - batch) > 0.0;
        FUZZ_CHECK(traded || fabs(lp_freeze - freeze) <= 1e-6 * fmax(1.0, lp_freeze),
                   "total freeze: lp_solve %.17g at %.17g ms, %s %.17g at %.17g ms", lp_freeze,
                   lp, name, freeze, batch);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_parse(text, "fuzz.json", &p, &err) == 0) {
        check_profile(&p);
        tf_profile_free(&p);
    } else {
        FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");
    }
    free(text);
    return 0;
}
