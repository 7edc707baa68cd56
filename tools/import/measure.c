/* measure.c - the samples of each action's time from a run's steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe.h"
#include "tf/util.h"

/* Action a's time in ms in each of the run's steps, into x. */
static int times_of(const tfi_run *run, const tf_action *a, double *x, tf_error *err)
{
    for (int k = 0; k < run->n_steps; k++) {
        const tfi_step *step = tfi_run_step(run, a->rank, k);
        const tfi_act *act = tfi_step_find(step, a->type, a->stage, a->microbatch);
        if (!act) {
            char cell[32], name[32];
            return tf_fail(err, TF_EINVAL, "%s%s: action PP:%s is missing from %s: the run "
                           "must execute the same actions as the traces it is measured with",
                           run->label, run->traces[a->rank].path, tf_action_format(a, cell),
                           tfi_step_label(step->id, name));
        }
        x[k] = (act->end - act->compute_start) / 1000.0;
    }
    return 0;
}

int tfi_action_samples(const tfi_run *run, const tf_schedule *s, int frozen, tf_sample *into,
                       size_t *n, tf_error *err)
{
    double *x = malloc(((size_t)run->n_steps + 1) * sizeof *x);
    if (!x)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; rc == 0 && i < s->n_actions; i++) {
        if (s->actions[i].pair == TF_PAIR_SECOND)
            continue; /* timed with its pair's first action, as one span */
        rc = times_of(run, &s->actions[i], x, err);
        for (int k = 0; rc == 0 && k < run->n_steps; k++)
            into[(*n)++] = (tf_sample){i, frozen, x[k]};
    }
    free(x);
    return rc;
}
