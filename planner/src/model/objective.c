/* objective.c - names of the freeze LP's objectives and solvers
 * (tf/objective.h). */
#include "tf/objective.h"

#include <string.h>

#include "tf/error.h"

const char *tf_objective_name(tf_objective o)
{
    return o == TF_OBJECTIVE_SPREAD ? "spread" : "least-freeze";
}

int tf_objective_parse(const char *name, tf_objective *o)
{
    if (strcmp(name, "least-freeze") == 0)
        *o = TF_OBJECTIVE_LEAST_FREEZE;
    else if (strcmp(name, "spread") == 0)
        *o = TF_OBJECTIVE_SPREAD;
    else
        return TF_EINVAL;
    return 0;
}

const char *tf_solver_name(tf_solver solver)
{
    switch (solver) {
    case TF_SOLVER_LP_SOLVE: return "lp_solve";
    case TF_SOLVER_FAST: return "fast";
    case TF_SOLVER_CLP: return "clp";
    default: return "auto";
    }
}

int tf_solver_parse(const char *name, tf_solver *solver)
{
    if (strcmp(name, "auto") == 0)
        *solver = TF_SOLVER_AUTO;
    else if (strcmp(name, "lp_solve") == 0)
        *solver = TF_SOLVER_LP_SOLVE;
    else if (strcmp(name, "fast") == 0)
        *solver = TF_SOLVER_FAST;
    else if (strcmp(name, "clp") == 0)
        *solver = TF_SOLVER_CLP;
    else
        return TF_EINVAL;
    return 0;
}
