/* freeze_instance.h - a freeze-LP instance for the solver tests: a schedule,
 * its DAG, durations and caps, all owned by the instance. */
#ifndef TF_FREEZE_INSTANCE_H
#define TF_FREEZE_INSTANCE_H

#include <stdlib.h>

#include "tf/dag.h"
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

#endif
