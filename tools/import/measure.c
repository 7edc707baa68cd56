/* measure.c - action times and the p2p lag from a run's steps. */
#include <math.h>
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

/* The act of step k that sends action a its input from another rank
 * (tf_schedule_sender), or NULL: none, or not in the step. */
static const tfi_act *sender_of(const tfi_run *run, const tf_schedule *s, const int *index,
                                const tf_action *a, int k)
{
    int i = tf_schedule_lookup(s, index, a->type, a->stage, a->microbatch);
    int u = i >= 0 ? tf_schedule_sender(s, index, i) : -1;
    if (u < 0)
        return NULL;
    const tf_action *from = &s->actions[u];
    return tfi_step_find(tfi_run_step(run, from->rank, k), from->type, from->stage,
                         from->microbatch);
}

/* The gap sample of one dependency, or NAN when the receiver was busy
 * with something else when the sender ended.  off[r]: rank r's clock
 * offset. */
static double gap(const tfi_act *sent, const tfi_step *step, int i, const double *off,
                  int from_rank, int to_rank)
{
    double sent_end = sent->end + off[from_rank];
    double start = step->acts[i].compute_start + off[to_rank];
    double idle_since = i > 0 ? step->acts[i - 1].end + off[to_rank] : -INFINITY;
    if (idle_since <= sent_end && sent_end <= start)
        return start - sent_end;
    return NAN;
}

void tfi_p2p_lag(const tfi_run *run, const tf_schedule *s, double *lag_ms, int *samples)
{
    *samples = 0;
    *lag_ms = -1.0;
    double base = INFINITY;
    int shared_clock = 1;
    for (int r = 0; r < run->ranks; r++) {
        shared_clock &= run->traces[r].has_clock;
        base = fmin(base, run->traces[r].base_ns);
    }
    if (!shared_clock || run->ranks < 1)
        return;
    double *off = calloc((size_t)(unsigned)run->ranks, sizeof *off);
    double *x = malloc(((size_t)(unsigned)s->n_actions * (unsigned)run->n_steps + 1) * sizeof *x);
    int *index = tf_schedule_index(s);
    if (!off || !x || !index) {
        free(off);
        free(x);
        free(index);
        return;
    }
    /* Differences of the bases first: two nearby large doubles subtract
     * exactly, where microseconds since 1970 would keep only 0.25 us. */
    for (int r = 0; r < run->ranks; r++)
        off[r] = (run->traces[r].base_ns - base) / 1000.0;
    for (int k = 0; k < run->n_steps; k++)
        for (int r = 0; r < run->ranks; r++) {
            const tfi_step *step = tfi_run_step(run, r, k);
            for (int i = 0; i < step->n_acts; i++) {
                tf_action a = step->acts[i].a;
                a.rank = r;
                const tfi_act *sent = sender_of(run, s, index, &a, k);
                double g = sent ? gap(sent, step, i, off, s->stage_rank[sent->a.stage], r) : NAN;
                if (!isnan(g))
                    x[(*samples)++] = g / 1000.0;
            }
        }
    *lag_ms = *samples ? tf_median(x, *samples) : 0.0;
    free(off);
    free(x);
    free(index);
}
