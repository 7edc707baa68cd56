/* run.c - one trace per rank: ranks, and the steps used. */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first rank in 0..count-1 that no trace has, or -1. */
static int first_missing(const int *rank_of, int n, int count)
{
    for (int r = 0; r < count; r++) {
        int found = 0;
        for (int i = 0; i < n; i++)
            found |= rank_of[i] == r;
        if (!found)
            return r;
    }
    return -1;
}

/* Ranks from distributedInfo must be 0..n-1, once each, and agree with
 * world_size. */
static int check_info_ranks(const tfi_trace *t, int n, const char *label, const int *rank_of,
                            tf_error *err)
{
    int *holder = malloc((size_t)n * sizeof *holder);
    if (!holder)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    for (int r = 0; r < n; r++)
        holder[r] = -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        int r = rank_of[i];
        if (r < n && holder[r] >= 0)
            rc = tf_fail(err, TF_EINVAL, "%s%s and %s are both rank %d (distributedInfo.rank)",
                         label, t[holder[r]].path, t[i].path, r);
        else if (r < n)
            holder[r] = i;
    }
    free(holder);
    for (int i = 0; rc == 0 && i < n; i++) {
        int size = t[i].world_size;
        if (size > n)
            rc = tf_fail(err, TF_EINVAL, "%smissing rank %d: %s says world_size %d, but only "
                         "%d traces were given (one per rank is needed)", label,
                         first_missing(rank_of, n, size), t[i].path, size, n);
        else if (size >= 0 && size < n)
            rc = tf_fail(err, TF_EINVAL, "%s%s says world_size %d, but %d traces were given",
                         label, t[i].path, size, n);
    }
    int missing = rc ? -1 : first_missing(rank_of, n, n);
    if (missing >= 0)
        rc = tf_fail(err, TF_EINVAL, "%smissing rank %d: no trace has distributedInfo.rank %d "
                     "(%d traces given, so ranks 0 to %d are expected)", label, missing,
                     missing, n, n - 1);
    return rc;
}

/* Without distributedInfo: rank r runs stage r in every stage layout of
 * PyTorch's schedules, so the lowest stage a trace runs is its rank when
 * those are 0 to n-1; two traces with one lowest stage are one rank
 * twice.  Else the list order. */
static int ranks_from_stages(const tfi_trace *t, const tfi_rank_run *runs, int n,
                             const char *label, int *rank_of, tfi_rank_source *source,
                             tf_error *err)
{
    int all_below = 1;
    for (int i = 0; i < n; i++) {
        all_below &= runs[i].min_stage < n;
        for (int j = 0; j < i; j++)
            if (runs[j].min_stage == runs[i].min_stage)
                return tf_fail(err, TF_EINVAL, "%s%s and %s both run stage %d as their first: "
                               "one rank's traces from two runs, or traces of two pipelines "
                               "(one trace per rank is needed)", label, t[j].path, t[i].path,
                               runs[i].min_stage);
    }
    *source = all_below ? TFI_RANKS_FROM_STAGES : TFI_RANKS_FROM_FILE_ORDER;
    for (int i = 0; i < n; i++)
        rank_of[i] = all_below ? runs[i].min_stage : i;
    return 0;
}

/* Each trace's rank (rank_of[i] for t[i]), and where it came from. */
static int assign_ranks(const tfi_trace *t, const tfi_rank_run *runs, int n, const char *label,
                        int *rank_of, tfi_rank_source *source, tf_error *err)
{
    int with_info = 0;
    for (int i = 0; i < n; i++)
        with_info += t[i].rank >= 0;
    if (with_info > 0 && with_info < n) {
        int i = 0;
        while (t[i].rank >= 0)
            i++;
        return tf_fail(err, TF_EINVAL, "%s%s: no distributedInfo.rank, while other traces have "
                       "one: cannot tell which rank it is", label, t[i].path);
    }
    if (with_info == 0)
        return ranks_from_stages(t, runs, n, label, rank_of, source, err);
    *source = TFI_RANKS_FROM_INFO;
    for (int i = 0; i < n; i++)
        rank_of[i] = t[i].rank;
    return check_info_ranks(t, n, label, rank_of, err);
}

/* Two traces with the same events are one trace given twice (under two
 * names: the same name twice is refused before anything is read). */
static int check_distinct(const tfi_trace *t, int n, const char *label, tf_error *err)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (t[i].fingerprint == t[j].fingerprint)
                return tf_fail(err, TF_EINVAL, "%s%s and %s hold the same events: one rank's "
                               "trace given twice (one trace per rank is needed)", label,
                               t[j].path, t[i].path);
    return 0;
}

/* Reads trace i and cuts it into steps, keeping only the steps. */
static int load_one(const tfi_options *o, const char *path, tfi_trace *t, tfi_rank_run *r,
                    long *actions, tf_error *err)
{
    int rc = tfi_trace_load(path, o->progress, t, err);
    tf_progress_note(o->progress, "cutting %s into steps (%d events)", path, t->n_spans);
    if (rc == 0)
        rc = tfi_rank_run_build(t, r, err);
    if (rc == 0)
        tfi_trace_drop_spans(t);
    if (rc == 0 && (*actions += r->n_acts) > TFI_MAX_RUN_ACTIONS)
        rc = tf_fail(err, TF_EINVAL, "%s: the traces read so far hold %ld actions over their "
                     "steps, more than the %d tf-import keeps for one run: profile fewer steps",
                     path, *actions, TFI_MAX_RUN_ACTIONS);
    return rc;
}

/* Loads the traces in list order, then places them in rank order. */
static int load_traces(const tfi_options *o, const char *const *paths, tfi_run *run,
                       tf_error *err)
{
    int n = run->ranks;
    int *rank_of = calloc((size_t)n, sizeof *rank_of);
    tfi_trace *t = calloc((size_t)n, sizeof *t);
    tfi_rank_run *runs = calloc((size_t)n, sizeof *runs);
    int rc = rank_of && t && runs ? 0 : tf_fail(err, TF_ENOMEM, "out of memory");
    long actions = 0;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = load_one(o, paths[i], &t[i], &runs[i], &actions, err);
    if (rc == 0)
        rc = check_distinct(t, n, run->label, err);
    if (rc == 0)
        rc = assign_ranks(t, runs, n, run->label, rank_of, &run->rank_source, err);
    for (int i = 0; rc == 0 && i < n; i++) {
        run->traces[rank_of[i]] = t[i];
        run->by_rank[rank_of[i]] = runs[i];
        run->by_rank[rank_of[i]].trace = &run->traces[rank_of[i]];
        run->reordered |= rank_of[i] != i;
    }
    for (int i = 0; rc != 0 && t && runs && i < n; i++) {
        tfi_rank_run_free(&runs[i]);
        tfi_trace_free(&t[i]);
    }
    free(runs);
    free(t);
    free(rank_of);
    return rc;
}

/* "1-3" or "1, 4, 7" (at most a few) for messages. */
static void step_list(const tfi_rank_run *r, char *buf, size_t size)
{
    buf[0] = '\0';
    if (r->n_steps == 1 && r->steps[0].id < 0) {
        snprintf(buf, size, "none");
        return;
    }
    size_t used = 0;
    for (int k = 0; k < r->n_steps && used + 24 < size; k++)
        used += (size_t)snprintf(buf + used, size - used, "%s#%ld", k ? ", " : "",
                                 r->steps[k].id);
}

/* The steps of rank 0 to use: in [first, last], or all that hold actions. */
static int choose_steps(tfi_run *run, long first, long last, tf_error *err)
{
    const tfi_rank_run *r0 = &run->by_rank[0];
    char have[256];
    run->steps = calloc((size_t)r0->n_steps, sizeof *run->steps);
    if (!run->steps)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    if (first >= 0 && r0->steps[0].id < 0)
        return tf_fail(err, TF_EINVAL, "--steps %ld:%ld: %s%s has no ProfilerStep#N spans",
                       first, last, run->label, r0->trace->path);
    for (int k = 0; k < r0->n_steps; k++) {
        const tfi_step *s = &r0->steps[k];
        int wanted = first < 0 ? s->n_acts > 0 : s->id >= first && s->id <= last;
        if (wanted)
            run->steps[run->n_steps++] = s->id;
    }
    if (run->n_steps > 0)
        return 0;
    step_list(r0, have, sizeof have);
    return tf_fail(err, TF_EINVAL, "--steps %ld:%ld: %s%s has no ProfilerStep#N with N in "
                   "%ld..%ld (it has %s)", first, last, run->label, r0->trace->path, first,
                   last, have);
}

/* Fails naming a step of rank 0 that rank r lacks. */
static int fail_absent(const tfi_run *run, int r, int k, tf_error *err)
{
    char have[256];
    step_list(&run->by_rank[r], have, sizeof have);
    if (run->steps[k] < 0)
        return tf_fail(err, TF_EINVAL, "%s%s has ProfilerStep#N spans (%s) and %s has none: "
                       "the traces do not split the same way", run->label, run->traces[r].path,
                       have, run->traces[0].path);
    return tf_fail(err, TF_EINVAL, "%s%s has no ProfilerStep#%ld, which %s has (it has %s)",
                   run->label, run->traces[r].path, run->steps[k], run->traces[0].path, have);
}

/* Finds every chosen step on every rank (each must have all of them) and
 * checks that each step's actions fit the planner. */
static int find_steps(tfi_run *run, tf_error *err)
{
    run->used = malloc(((size_t)run->ranks * (size_t)run->n_steps + 1) * sizeof *run->used);
    if (!run->used)
        return tf_fail(err, TF_ENOMEM, "out of memory for %d steps of %d ranks", run->n_steps,
                       run->ranks);
    for (int r = 0; r < run->ranks; r++)
        for (int k = 0; k < run->n_steps; k++) {
            const tfi_step *s = tfi_rank_run_step(&run->by_rank[r], run->steps[k]);
            if (!s)
                return fail_absent(run, r, k, err);
            run->used[(size_t)r * (size_t)run->n_steps + (size_t)k] = s;
        }
    for (int k = 0; k < run->n_steps; k++) {
        long total = 0;
        for (int r = 0; r < run->ranks; r++)
            total += tfi_run_step(run, r, k)->n_acts;
        char step[32];
        if (total > TF_MAX_ACTIONS)
            return tf_fail(err, TF_EINVAL, "%s%s holds %ld actions over the %d traces, more "
                           "than the %d the planner accepts in one step", run->label,
                           tfi_step_label(run->steps[k], step), total, run->ranks,
                           TF_MAX_ACTIONS);
    }
    return 0;
}

int tfi_run_load(const tfi_options *o, int frozen, tfi_run *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    int n = frozen ? o->n_frozen : o->n_traces;
    out->label = frozen ? "--frozen " : "";
    out->ranks = n;
    out->traces = calloc((size_t)n, sizeof *out->traces);
    out->by_rank = calloc((size_t)n, sizeof *out->by_rank);
    int rc = out->traces && out->by_rank ? 0 : tf_fail(err, TF_ENOMEM, "out of memory");
    if (rc == 0)
        rc = load_traces(o, frozen ? o->frozen : o->traces, out, err);
    if (rc == 0)
        rc = choose_steps(out, o->first_step, o->last_step, err);
    if (rc == 0)
        rc = find_steps(out, err);
    if (rc)
        tfi_run_free(out);
    return rc;
}

void tfi_run_drop_steps(tfi_run *r)
{
    for (int i = 0; r->by_rank && i < r->ranks; i++)
        tfi_rank_run_free(&r->by_rank[i]);
    free(r->used);
    r->used = NULL;
}

void tfi_run_free(tfi_run *r)
{
    tfi_run_drop_steps(r);
    for (int i = 0; r->traces && i < r->ranks; i++)
        tfi_trace_free(&r->traces[i]);
    free(r->by_rank);
    free(r->traces);
    free(r->steps);
    memset(r, 0, sizeof *r);
}

const tfi_step *tfi_run_step(const tfi_run *run, int r, int k)
{
    return run->used[(size_t)r * (size_t)run->n_steps + (size_t)k];
}
