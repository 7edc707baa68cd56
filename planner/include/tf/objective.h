/* objective.h - the words a freeze plan and its solvers share: what the
 * freeze LP optimises after the batch time (tf_objective) and which solver
 * solves it (tf_solver), with their names as tf-plan and plan.json spell
 * them.  The model (plans and their files) needs these and nothing else of
 * the solvers, so this header is all of them it includes.
 */
#ifndef TF_OBJECTIVE_H
#define TF_OBJECTIVE_H

/* Among the plans of least batch time: least total freeze ratio, or the
 * smallest largest ratio and then the least total (docs/planner.md). */
typedef enum { TF_OBJECTIVE_LEAST_FREEZE = 0, TF_OBJECTIVE_SPREAD = 1 } tf_objective;

/* "least-freeze" / "spread"; any value that is not TF_OBJECTIVE_SPREAD
 * names "least-freeze".  Never NULL, static. */
const char *tf_objective_name(tf_objective o);

/* Sets *o from its name.  Returns 0, or TF_EINVAL (then *o is untouched). */
int tf_objective_parse(const char *name, tf_objective *o);

/* Which solver: auto picks one by the schedule's size (tf/freeze.h). */
typedef enum {
    TF_SOLVER_AUTO = 0,
    TF_SOLVER_LP_SOLVE = 1,
    TF_SOLVER_FAST = 2,
    TF_SOLVER_CLP = 3
} tf_solver;

/* "auto" / "lp_solve" / "fast" / "clp"; any other value names "auto".
 * Never NULL, static. */
const char *tf_solver_name(tf_solver solver);

/* Sets *solver from its name.  Returns 0, or TF_EINVAL (then *solver is
 * untouched). */
int tf_solver_parse(const char *name, tf_solver *solver);

#endif
