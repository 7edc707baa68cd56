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
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (rank_of[j] == rank_of[i])
                return tf_fail(err, TF_EINVAL, "%s%s and %s are both rank %d "
                               "(distributedInfo.rank)", label, t[j].path, t[i].path,
                               rank_of[i]);
    for (int i = 0; i < n; i++) {
        int size = t[i].world_size;
        if (size > n)
            return tf_fail(err, TF_EINVAL, "%smissing rank %d: %s says world_size %d, but only "
                           "%d traces were given (one per rank is needed)", label,
                           first_missing(rank_of, n, size), t[i].path, size, n);
        if (size >= 0 && size < n)
            return tf_fail(err, TF_EINVAL, "%s%s says world_size %d, but %d traces were given",
                           label, t[i].path, size, n);
    }
    int missing = first_missing(rank_of, n, n);
    if (missing >= 0)
        return tf_fail(err, TF_EINVAL, "%smissing rank %d: no trace has distributedInfo.rank %d "
                       "(%d traces given, so ranks 0 to %d are expected)", label, missing,
                       missing, n, n - 1);
    return 0;
}

/* Each trace's rank: distributedInfo.rank when all have it, else list order.
 * rank_of[i] receives the rank of t[i]. */
static int assign_ranks(const tfi_trace *t, int n, const char *label, int *rank_of,
                        int *from_info, tf_error *err)
{
    int with_info = 0;
    for (int i = 0; i < n; i++)
        with_info += t[i].rank >= 0;
    *from_info = with_info == n;
    if (with_info > 0 && with_info < n) {
        int i = 0;
        while (t[i].rank >= 0)
            i++;
        return tf_fail(err, TF_EINVAL, "%s%s: no distributedInfo.rank, while other traces have "
                       "one: cannot tell which rank it is", label, t[i].path);
    }
    for (int i = 0; i < n; i++)
        rank_of[i] = *from_info ? t[i].rank : i;
    return *from_info ? check_info_ranks(t, n, label, rank_of, err) : 0;
}

/* Loads the traces in list order, then places them in rank order. */
static int load_traces(const char *const *paths, int n, tfi_run *run, tf_error *err)
{
    tfi_trace *loaded = calloc((size_t)n, sizeof *loaded);
    int *rank_of = calloc((size_t)n, sizeof *rank_of);
    int rc = loaded && rank_of ? 0 : tf_fail(err, TF_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < n; i++)
        rc = tfi_trace_load(paths[i], &loaded[i], err);
    if (rc == 0)
        rc = assign_ranks(loaded, n, run->label, rank_of, &run->ranks_from_info, err);
    /* On success the traces move to run, which frees them. */
    for (int i = 0; rc == 0 && i < n; i++)
        run->traces[rank_of[i]] = loaded[i];
    for (int i = 0; rc != 0 && loaded && i < n; i++)
        tfi_trace_free(&loaded[i]);
    free(loaded);
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

/* Every rank's trace must hold every chosen step. */
static int check_steps_present(const tfi_run *run, tf_error *err)
{
    for (int r = 1; r < run->ranks; r++)
        for (int k = 0; k < run->n_steps; k++) {
            if (tfi_rank_run_step(&run->by_rank[r], run->steps[k]))
                continue;
            char have[256];
            step_list(&run->by_rank[r], have, sizeof have);
            if (run->steps[k] < 0)
                return tf_fail(err, TF_EINVAL, "%s%s has ProfilerStep#N spans (%s) and %s has "
                               "none: the traces do not split the same way", run->label,
                               run->traces[r].path, have, run->traces[0].path);
            return tf_fail(err, TF_EINVAL, "%s%s has no ProfilerStep#%ld, which %s has (it "
                           "has %s)", run->label, run->traces[r].path, run->steps[k],
                           run->traces[0].path, have);
        }
    return 0;
}

int tfi_run_load(const char *const *paths, int n, const char *label, long first, long last,
                 tfi_run *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    out->label = label;
    out->ranks = n;
    out->traces = calloc((size_t)n, sizeof *out->traces);
    out->by_rank = calloc((size_t)n, sizeof *out->by_rank);
    int rc = out->traces && out->by_rank ? 0 : tf_fail(err, TF_ENOMEM, "out of memory");
    if (rc == 0)
        rc = load_traces(paths, n, out, err);
    for (int r = 0; rc == 0 && r < n; r++)
        rc = tfi_rank_run_build(&out->traces[r], &out->by_rank[r], err);
    if (rc == 0)
        rc = choose_steps(out, first, last, err);
    if (rc == 0)
        rc = check_steps_present(out, err);
    if (rc)
        tfi_run_free(out);
    return rc;
}

void tfi_run_free(tfi_run *r)
{
    for (int i = 0; r->by_rank && i < r->ranks; i++)
        tfi_rank_run_free(&r->by_rank[i]);
    for (int i = 0; r->traces && i < r->ranks; i++)
        tfi_trace_free(&r->traces[i]);
    free(r->by_rank);
    free(r->traces);
    free(r->steps);
    memset(r, 0, sizeof *r);
}

const tfi_step *tfi_run_step(const tfi_run *run, int r, int k)
{
    return tfi_rank_run_step(&run->by_rank[r], run->steps[k]);
}
