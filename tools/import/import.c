/* import.c - a profile from the traces of a run (and of a frozen run). */
#include "import.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "observe.h"
#include "tf/util.h"

void tfi_note(const tfi_options *o, int warning, const char *fmt, ...)
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
    o->p2p_ms = -1.0;
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
        return tf_fail(err, TF_ENOMEM, "out of memory for %zu samples of the actions' times",
                       room);
    set->x = x;
    return tfi_action_samples(run, s, frozen, set->x, &set->n, err);
}

/* A frozen trace with the events of an unfrozen one is not a frozen run. */
static int check_not_unfrozen(const tfi_run *frozen, const tfi_run *run, tf_error *err)
{
    for (int f = 0; f < frozen->ranks; f++)
        for (int r = 0; r < run->ranks; r++)
            if (frozen->traces[f].fingerprint == run->traces[r].fingerprint)
                return tf_fail(err, TF_EINVAL, "--frozen %s holds the same events as %s, a "
                               "trace of the run measured: the frozen times need the traces of "
                               "a run with every parameter frozen", frozen->traces[f].path,
                               run->traces[r].path);
    return 0;
}

/* Adds the samples of the frozen run (one trace per rank, the same
 * actions, its clocks checked as the run's are) and measures its bytes into
 * *bytes, or warns that there is none.  run's traces are compared with it. */
static int add_frozen_run(const tfi_options *o, const tfi_run *run, const tf_schedule *s,
                          sample_buffer *set, tfi_bytes *bytes, tf_error *err)
{
    if (o->n_frozen == 0) {
        tfi_note(o, 1, "no --frozen traces: the frozen times are the reference's defaults, B x %g "
             "and W x %g; measure a run with every parameter frozen for real ones",
             TF_DEFAULT_B_FROZEN, TF_DEFAULT_W_FROZEN);
        return 0;
    }
    if (o->n_frozen != o->n_traces)
        return tf_fail(err, TF_EINVAL, "--frozen: %d traces given for a run of %d ranks (one "
                       "per rank is needed)", o->n_frozen, o->n_traces);
    tfi_run frozen;
    tfi_clock clock;
    int rc = tfi_run_load(o, 1, &frozen, err);
    if (rc == 0)
        rc = check_not_unfrozen(&frozen, run, err);
    if (rc == 0)
        rc = add_run(set, &frozen, s, 1, err);
    if (rc == 0)
        rc = tfi_bytes_measure(&frozen, s, bytes, err);
    if (rc == 0 && o->p2p_ms < 0)
        rc = tfi_clock_check(&frozen, s, &clock, err);
    tfi_run_free(&frozen);
    return rc;
}

/* A frozen backward skips its weight gradients: one that takes about as
 * long as the unfrozen one suggests a run that froze nothing. */
#define TFI_FROZEN_SUSPECT 0.9

/* Warns when the --frozen run's B and W add up to nearly the run's. */
static void check_frozen_shorter(const tfi_options *o, const tf_profile *p)
{
    double ms = 0, frozen = 0;
    for (int k = 0; k < p->n_overrides; k++) {
        const tf_action_time *t = &p->overrides[k];
        if ((t->type == TF_ACT_B || t->type == TF_ACT_W) && t->frozen_ms >= 0) {
            ms += t->ms;
            frozen += t->frozen_ms;
        }
    }
    if (o->n_frozen > 0 && ms > 0 && frozen >= TFI_FROZEN_SUSPECT * ms)
        tfi_note(o, 1, "the --frozen run's B and W take %.0f%% of the run's: was every parameter "
             "frozen in it? (a frozen backward skips its weight gradients)", 100 * frozen / ms);
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
        tfi_note(o, 0, "%d frozen times exceeded their unfrozen time (measurement noise) and were "
             "set equal to it", report.capped);
    if (report.split_stages)
        tfi_note(o, 0, "%d %s no full backward of its own (split into I and W, or every B in an "
             "overlapped pair): backward_ms is I + W", report.split_stages,
             report.split_stages == 1 ? "stage has" : "stages have");
    if (out->n_pairs > 0)
        tfi_note(o, 0, "%d overlapped pairs (OVERLAP_F_B) timed as one span each; tf-plan splits "
             "each over its forward and backward (docs/formats.md)", out->n_pairs);
    check_frozen_shorter(o, out);
    return 0;
}

/* The lag as measured (clock.c), with a note saying how it was found. */
static int measured_lag(const tfi_options *o, const tfi_run *run, const tf_schedule *s,
                        double *lag, tf_error *err)
{
    tfi_clock c;
    int rc = tfi_clock_check(run, s, &c, err);
    if (rc)
        return rc;
    *lag = c.lag_ms;
    if (c.kind == TFI_CLOCK_ONE_RANK)
        tfi_note(o, 0, "p2p_ms = 0: one rank, so nothing passes between ranks");
    else if (c.kind == TFI_CLOCK_UNALIGNED)
        tfi_note(o, 0, "p2p_ms = 0: the traces share no clock (no baseTimeNanoseconds) and some "
             "pair of ranks sends data one way only, so their clocks cannot be aligned");
    else if (c.timed == 0)
        tfi_note(o, 0, "p2p_ms = 0: the CPU-side traces show no receive event (gloo:recv, "
             "nccl:recv) in the RECV spans of the actions that take another rank's data, so "
             "when that data arrived is unknown");
    else if (c.samples == 0)
        tfi_note(o, 0, "p2p_ms = 0: no action was seen waiting for another rank's data alone");
    else
        tfi_note(o, 0, "p2p_ms = %.4g: median of %d gaps between a sender's end and its receiver's "
             "start%s", c.lag_ms, c.samples,
             c.kind == TFI_CLOCK_MESSAGES ? " (the traces share no clock: aligned by their "
                                            "messages, data taken to travel as fast each way)"
                                          : "");
    return 0;
}

/* The lag: the one given, or the one measured. */
static int lag_of(const tfi_options *o, const tfi_run *run, const tf_schedule *s, double *lag,
                  tf_error *err)
{
    if (o->p2p_ms >= 0) {
        *lag = o->p2p_ms;
        tfi_note(o, 0, "p2p_ms = %g, as given by --p2p-ms: the traces' clocks were not read", *lag);
    } else {
        int rc = measured_lag(o, run, s, lag, err);
        if (rc)
            return rc;
    }
    if (*lag >= 0 && *lag <= TF_MAX_DURATION_MS)
        return 0;
    return tf_fail(err, TF_EINVAL, "p2p_ms would be %g ms, outside the 0 to %g ms the planner "
                   "accepts", *lag, TF_MAX_DURATION_MS);
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
    static const char *const from[] = {"from distributedInfo.rank",
                                       "from the stages they run: rank r runs stage r",
                                       "in the order of the files"};
    tfi_note(o, 0, "%d %s (%s) x %d %s per rank, %d %s, schedule %s; %d %s (%s to %s); %s-side "
         "annotations", run->ranks, tf_plural(run->ranks, "rank", "ranks"), from[run->rank_source],
         s->stages_per_rank, tf_plural(s->stages_per_rank, "stage", "stages"), s->microbatches,
         tf_plural(s->microbatches, "microbatch", "microbatches"), s->name, run->n_steps,
         tf_plural(run->n_steps, "step", "steps"),
         tfi_step_label(run->steps[0], first), tfi_step_label(run->steps[run->n_steps - 1], last),
         gpu == run->ranks ? "GPU" : gpu == 0 ? "CPU" : "GPU- and CPU");
    if (run->reordered)
        tfi_note(o, 0, "the traces were not given in rank order: rank 0 is %s", run->traces[0].path);
    if (trimmed)
        tfi_note(o, 0, "%d action spans started before their input arrived; their wait was taken "
             "off", trimmed);
    if (outside)
        tfi_note(o, 0, "%d PP: events outside every ProfilerStep#N span were ignored", outside);
}

/* Each path may be given once: as a trace of one rank, or as a frozen one. */
static int check_paths(const tfi_options *o, tf_error *err)
{
    int n = o->n_traces + o->n_frozen;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            const char *a = j < o->n_traces ? o->traces[j] : o->frozen[j - o->n_traces];
            const char *b = i < o->n_traces ? o->traces[i] : o->frozen[i - o->n_traces];
            if (!tf_same_file(a, b))
                continue;
            if (i < o->n_traces)
                return tf_fail(err, TF_EINVAL, "%s is given twice (one trace per rank is "
                               "needed)", b);
            if (j >= o->n_traces)
                return tf_fail(err, TF_EINVAL, "--frozen %s is given twice (one trace per rank "
                               "is needed)", b);
            return tf_fail(err, TF_EINVAL, "--frozen %s is %s%s a trace of the run measured: the "
                           "frozen times need the traces of a run with every parameter frozen",
                           b, strcmp(a, b) ? a : "also given as", strcmp(a, b) ? "," : "");
        }
    return 0;
}

int tfi_import(const tfi_options *o, tf_profile *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    if (o->n_traces < 1)
        return tf_fail(err, TF_EINVAL, "no trace given (one per rank is needed)");
    tfi_run run = {0};
    tf_schedule s = {0};
    sample_buffer set = {0};
    tfi_bytes bytes = {.implausible_stage = -1}, frozen_bytes = {.implausible_stage = -1};
    double lag = 0;
    int rc = check_paths(o, err);
    if (rc == 0)
        rc = tfi_run_load(o, 0, &run, err);
    tf_progress_note(o->progress, "checking the order of %d %s", run.n_steps,
                     tf_plural(run.n_steps, "step", "steps"));
    if (rc == 0)
        rc = tfi_observed_schedule(&run, o, &s, err);
    if (rc == 0)
        rc = add_run(&set, &run, &s, 0, err);
    if (rc == 0) {
        describe(o, &run, &s);
        tf_progress_note(o->progress, "measuring the lag between %d %s", run.ranks,
                         tf_plural(run.ranks, "rank", "ranks"));
        rc = lag_of(o, &run, &s, &lag, err);
    }
    if (rc == 0)
        rc = tfi_bytes_measure(&run, &s, &bytes, err);
    tfi_run_drop_steps(&run);
    if (rc == 0)
        rc = add_frozen_run(o, &run, &s, &set, &frozen_bytes, err);
    tf_progress_note(o->progress, "building the profile from %zu samples", set.n);
    if (rc == 0)
        rc = build_profile(o, &s, &set, out, err);
    if (rc == 0)
        out->p2p_ms = lag;
    if (rc == 0 && (rc = tfi_bytes_to_profile(o, &bytes, o->n_frozen ? &frozen_bytes : NULL, out,
                                              err)))
        tf_profile_free(out);
    tfi_bytes_free(&bytes);
    tfi_bytes_free(&frozen_bytes);
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
    if (rc == 0 && (rc = tf_profile_parse(json, "the profile made from the traces", &check,
                                          err)) == 0)
        tf_profile_free(&check);
    if (rc == 0)
        rc = tf_write_file_atomic(path, json, strlen(json), err);
    free(json);
    return rc;
}
