/* import.c - a profile from the traces of a run (and of a frozen run). */
#include "import.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe.h"
#include "tf/util.h"

/* The cap written into the profile: the planner's documented default
 * (docs/formats.md); tf-plan --max-freeze-ratio overrides it. */
#define TFI_DEFAULT_CAP 0.9
/* The reference's frozen times when no frozen run was measured. */
#define TFI_DEFAULT_B_FROZEN 0.5
#define TFI_DEFAULT_W_FROZEN 0.01

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

/* The median of `from` over the actions of one stage and type that run
 * alone (a pair's time is the pair's, not its halves'); 0 if none. */
static double stage_median(const tf_schedule *s, const double *from, int stage,
                           tf_action_type type, double *scratch)
{
    int n = 0;
    for (int i = 0; i < s->n_actions; i++)
        if (s->actions[i].stage == stage && s->actions[i].type == type &&
            s->actions[i].pair == TF_PAIR_NONE)
            scratch[n++] = from[i];
    return n ? tf_median(scratch, n) : 0.0;
}

/* A stage whose every B runs in a pair (DualPipeV's first stage, say) has
 * no B of its own to time: its I + W stand in for it, as a full backward
 * is those two, so that the planner can tell what freezing saves in the
 * pairs.  Returns 1 when it did so. */
static int backward_from_split(tf_stage_times *st)
{
    if (st->backward_ms > 0 || st->backward_input_ms + st->backward_weight_ms <= 0)
        return 0;
    st->backward_ms = st->backward_input_ms + st->backward_weight_ms;
    st->backward_frozen_ms = st->backward_input_ms + st->backward_weight_frozen_ms;
    return 1;
}

/* Stage timings (the medians of the stage's action times, per type) and
 * one override per action carrying its own measured times; a pair's one
 * span becomes a measured pair (its frozen time only when measured). */
static int fill_times(const tfi_options *o, tf_profile *p, const double *ms,
                      const double *frozen, tf_error *err)
{
    const tf_schedule *s = &p->schedule;
    double *x = malloc(((size_t)s->n_actions + 1) * sizeof *x);
    p->stages = calloc((size_t)s->stages, sizeof *p->stages);
    p->overrides = calloc((size_t)s->n_actions + 1, sizeof *p->overrides);
    p->pairs = calloc((size_t)s->n_actions / 2 + 1, sizeof *p->pairs);
    p->max_freeze_ratio = calloc((size_t)s->stages, sizeof *p->max_freeze_ratio);
    if (!x || !p->stages || !p->overrides || !p->pairs || !p->max_freeze_ratio) {
        free(x);
        return tf_fail(err, TF_ENOMEM, "out of memory");
    }
    for (int k = 0; k < s->stages; k++) {
        tf_stage_times *st = &p->stages[k];
        st->forward_ms = stage_median(s, ms, k, TF_ACT_F, x);
        st->backward_ms = stage_median(s, ms, k, TF_ACT_B, x);
        st->backward_frozen_ms = stage_median(s, frozen, k, TF_ACT_B, x);
        st->backward_input_ms = stage_median(s, ms, k, TF_ACT_I, x);
        st->backward_weight_ms = stage_median(s, ms, k, TF_ACT_W, x);
        st->backward_weight_frozen_ms = stage_median(s, frozen, k, TF_ACT_W, x);
        p->max_freeze_ratio[k] = TFI_DEFAULT_CAP;
        if (tf_schedule_has_pairs(s) && backward_from_split(st))
            note(o, 0, "stage %d runs every full backward in an overlapped pair: its "
                 "backward_ms is its I + W (%.4g ms)", k, st->backward_ms);
    }
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        if (a->pair == TF_PAIR_FIRST && i + 1 < s->n_actions) {
            p->pairs[p->n_pairs++] = (tf_pair_time){*a, s->actions[i + 1], ms[i],
                                                    o->n_frozen > 0 ? frozen[i] : -1.0};
            i++;
            continue;
        }
        int freezable = a->type == TF_ACT_B || a->type == TF_ACT_W;
        p->overrides[p->n_overrides++] = (tf_action_time){a->type, a->stage, a->microbatch,
                                                          ms[i], freezable ? frozen[i] : -1.0};
    }
    free(x);
    return 0;
}

/* Does action i of s get shorter when frozen: a B or a W, or (for its
 * one span) a pair whose backward is a B? */
static int freezes(const tf_schedule *s, int i)
{
    const tf_action *a = &s->actions[i];
    if (a->pair != TF_PAIR_NONE) {
        int first = a->pair == TF_PAIR_FIRST ? i : i - 1;
        return first + 1 < s->n_actions && s->actions[first + 1].type == TF_ACT_B;
    }
    return a->type == TF_ACT_B || a->type == TF_ACT_W;
}

/* Frozen times of B and W (and of pairs) from the frozen run, capped at
 * the unfrozen time (noise can invert them); F and I do not change when
 * frozen. */
static int measured_frozen(const tfi_options *o, const tf_schedule *s, const double *ms,
                           double *frozen, tf_error *err)
{
    if (o->n_frozen != o->n_traces)
        return tf_fail(err, TF_EINVAL, "--frozen: %d traces given for a run of %d ranks (one "
                       "per rank is needed)", o->n_frozen, o->n_traces);
    tfi_run run;
    int rc = tfi_run_load(o->frozen, o->n_frozen, "--frozen ", o->first_step, o->last_step,
                          &run, err);
    if (rc == 0)
        rc = tfi_action_medians(&run, s, frozen, err);
    tfi_run_free(&run);
    if (rc)
        return rc;
    int capped = 0;
    for (int i = 0; i < s->n_actions; i++)
        if (!freezes(s, i))
            frozen[i] = ms[i];
        else if (frozen[i] > ms[i]) {
            frozen[i] = ms[i];
            capped++;
        }
    if (capped)
        note(o, 0, "%d frozen times exceeded their unfrozen time (measurement noise) and were "
             "set equal to it", capped);
    return 0;
}

/* Frozen times: measured, or the reference's defaults. */
static int frozen_times(const tfi_options *o, const tf_schedule *s, const double *ms,
                        double *frozen, tf_error *err)
{
    if (o->n_frozen > 0)
        return measured_frozen(o, s, ms, frozen, err);
    note(o, 1, "no --frozen traces: the frozen times are the reference's defaults, B x %g and "
         "W x %g; measure a run with every parameter frozen for real ones",
         TFI_DEFAULT_B_FROZEN, TFI_DEFAULT_W_FROZEN);
    for (int i = 0; i < s->n_actions; i++)
        frozen[i] = ms[i] * (s->actions[i].type == TF_ACT_W ? TFI_DEFAULT_W_FROZEN
                             : s->actions[i].type == TF_ACT_B ? TFI_DEFAULT_B_FROZEN : 1.0);
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
    rc = tfi_observed_schedule(&run, o, &out->schedule, err);
    const tf_schedule *s = &out->schedule;
    double *ms = rc ? NULL : calloc((size_t)s->n_actions + 1, sizeof *ms);
    double *frozen = rc ? NULL : calloc((size_t)s->n_actions + 1, sizeof *frozen);
    if (rc == 0 && (!ms || !frozen))
        rc = tf_fail(err, TF_ENOMEM, "out of memory");
    if (rc == 0)
        rc = tfi_action_medians(&run, s, ms, err);
    if (rc == 0)
        describe(o, &run, s);
    if (rc == 0)
        rc = frozen_times(o, s, ms, frozen, err);
    if (rc == 0) {
        out->p2p_ms = lag_of(o, &run, s);
        rc = fill_times(o, out, ms, frozen, err);
    }
    if (rc == 0 && out->n_pairs > 0)
        note(o, 0, "%d overlapped pairs (OVERLAP_F_B) timed as one span each; tf-plan splits "
             "each over its forward and backward (docs/formats.md)", out->n_pairs);
    free(ms);
    free(frozen);
    tfi_run_free(&run);
    if (rc)
        tf_profile_free(out);
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
