/* import.c - a profile from the traces of a run (and of a frozen run). */
#include "import.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe.h"
#include "tf/util.h"

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void note(const tfi_options *o, int warning, const char *fmt, ...)
{
    if (!o->note)
        return;
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    o->note(o->note_ctx, warning, message);
}

void tfi_options_init(tfi_options *o)
{
    memset(o, 0, sizeof *o);
    o->first_step = o->last_step = -1;
}

static int parse_step_number(const char *s, const char *end, long *out)
{
    if (s == end || *s < '0' || *s > '9')
        return -1;
    char *stop;
    errno = 0;
    long v = strtol(s, &stop, 10);
    if (stop != end || errno || v > 1000000000L)
        return -1;
    *out = v;
    return 0;
}

int tfi_parse_steps(const char *text, long *first, long *last, tf_error *err)
{
    const char *colon = text ? strchr(text, ':') : NULL;
    if (!colon || parse_step_number(text, colon, first) ||
        parse_step_number(colon + 1, colon + strlen(colon), last))
        return tf_fail(err, TF_EINVAL, "--steps \"%s\": expected FIRST:LAST, two step numbers "
                       "(the N of ProfilerStep#N), e.g. 2:5", text ? text : "");
    if (*first > *last)
        return tf_fail(err, TF_EINVAL, "--steps \"%s\": FIRST must not exceed LAST", text);
    return 0;
}

/* The samples a profile is built from (every action in every step used),
 * in an array that grows with each run added. */
typedef struct sample_buffer {
    tf_sample *x;
    size_t n;
} sample_buffer;

/* Adds the samples of run (schedule s; `frozen` as the run was). */
static int add_run(sample_buffer *set, const tfi_run *run, const tf_schedule *s, int frozen,
                   tf_error *err)
{
    size_t room = set->n + (size_t)s->n_actions * (size_t)run->n_steps + 1;
    tf_sample *x = realloc(set->x, room * sizeof *x);
    if (!x)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    set->x = x;
    return tfi_action_samples(run, s, frozen, set->x, &set->n, err);
}

/* Adds the samples of the frozen run (one trace per rank, the same
 * actions), or warns that there is none. */
static int add_frozen_run(const tfi_options *o, const tf_schedule *s, sample_buffer *set,
                          tf_error *err)
{
    if (o->n_frozen == 0) {
        note(o, 1, "no --frozen traces: the frozen times are the reference's defaults, B x %g "
             "and W x %g; measure a run with every parameter frozen for real ones",
             TF_DEFAULT_B_FROZEN, TF_DEFAULT_W_FROZEN);
        return 0;
    }
    if (o->n_frozen != o->n_traces)
        return tf_fail(err, TF_EINVAL, "--frozen: %d traces given for a run of %d ranks (one "
                       "per rank is needed)", o->n_frozen, o->n_traces);
    tfi_run run;
    int rc = tfi_run_load(o->frozen, o->n_frozen, "--frozen ", o->first_step, o->last_step,
                          &run, err);
    if (rc == 0)
        rc = add_run(set, &run, s, 1, err);
    tfi_run_free(&run);
    return rc;
}

/* The profile of the samples (tf/profile_samples.h), with a note for each
 * choice the builder made. */
static int build_profile(const tfi_options *o, const tf_schedule *s, const sample_buffer *set,
                         tf_profile *out, tf_error *err)
{
    tf_sample_set in;
    tf_sample_set_init(&in);
    in.schedule = s;
    in.samples = set->x;
    in.n = set->n;
    in.pair_spans = 1;
    tf_sample_report report;
    int rc = tf_profile_from_samples(&in, out, &report, err);
    if (rc)
        return rc;
    if (report.capped)
        note(o, 0, "%d frozen times exceeded their unfrozen time (measurement noise) and were "
             "set equal to it", report.capped);
    if (report.split_stages)
        note(o, 0, "%d %s no full backward of its own (split into I and W, or every B in an "
             "overlapped pair): backward_ms is I + W", report.split_stages,
             report.split_stages == 1 ? "stage has" : "stages have");
    if (out->n_pairs > 0)
        note(o, 0, "%d overlapped pairs (OVERLAP_F_B) timed as one span each; tf-plan splits "
             "each over its forward and backward (docs/formats.md)", out->n_pairs);
    return 0;
}

/* The lag, with a note saying how it was found. */
static double lag_of(const tfi_options *o, const tfi_run *run, const tf_schedule *s)
{
    double lag;
    int samples;
    tfi_p2p_lag(run, s, &lag, &samples);
    if (lag < 0) {
        note(o, 0, "p2p_ms = 0: the traces do not share a clock (no baseTimeNanoseconds, as in "
             "the legacy profiler's traces), so the lag between ranks cannot be measured");
        return 0.0;
    }
    if (samples == 0)
        note(o, 0, "p2p_ms = 0: no action was seen waiting for another rank's data alone");
    else
        note(o, 0, "p2p_ms = %.4g: median of %d gaps between a sender's end and its "
             "receiver's start", lag, samples);
    return lag;
}

static void describe(const tfi_options *o, const tfi_run *run, const tf_schedule *s)
{
    int gpu = 0, trimmed = 0, outside = 0;
    for (int r = 0; r < run->ranks; r++) {
        gpu += run->by_rank[r].gpu;
        trimmed += run->by_rank[r].wait_trimmed;
        outside += run->by_rank[r].outside;
    }
    char first[32], last[32];
    note(o, 0, "%d ranks (%s) x %d stage%s per rank, %d microbatches, schedule %s; %d steps "
         "(%s to %s); %s-side annotations", run->ranks,
         run->ranks_from_info ? "from distributedInfo.rank" : "in the order of the files",
         s->stages_per_rank, s->stages_per_rank == 1 ? "" : "s", s->microbatches, s->name, run->n_steps,
         tfi_step_label(run->steps[0], first), tfi_step_label(run->steps[run->n_steps - 1], last),
         gpu == run->ranks ? "GPU" : gpu == 0 ? "CPU" : "GPU- and CPU");
    if (trimmed)
        note(o, 0, "%d action spans started before their input arrived; their wait was taken "
             "off", trimmed);
    if (outside)
        note(o, 0, "%d PP: events outside every ProfilerStep#N span were ignored", outside);
}

int tfi_import(const tfi_options *o, tf_profile *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    if (o->n_traces < 1)
        return tf_fail(err, TF_EINVAL, "no trace given (one per rank is needed)");
    tfi_run run;
    int rc = tfi_run_load(o->traces, o->n_traces, "", o->first_step, o->last_step, &run, err);
    if (rc)
        return rc;
    tf_schedule s = {0};
    sample_buffer set = {0};
    rc = tfi_observed_schedule(&run, o, &s, err);
    if (rc == 0)
        rc = add_run(&set, &run, &s, 0, err);
    if (rc == 0) {
        describe(o, &run, &s);
        rc = add_frozen_run(o, &s, &set, err);
    }
    if (rc == 0)
        rc = build_profile(o, &s, &set, out, err);
    if (rc == 0)
        out->p2p_ms = lag_of(o, &run, &s);
    free(set.x);
    tf_schedule_free(&s);
    tfi_run_free(&run);
    return rc;
}

int tfi_import_to_file(const tfi_options *o, const char *path, tf_error *err)
{
    tf_profile p, check;
    char *json = NULL;
    int rc = tfi_import(o, &p, err);
    if (rc)
        return rc;
    rc = tf_profile_to_json(&p, &json, err);
    tf_profile_free(&p);
    /* What tf-plan will read: a profile the planner refuses is not written. */
    if (rc == 0 && (rc = tf_profile_parse(json, path, &check, err)) == 0)
        tf_profile_free(&check);
    if (rc == 0)
        rc = tf_write_file_atomic(path, json, strlen(json), err);
    free(json);
    return rc;
}
