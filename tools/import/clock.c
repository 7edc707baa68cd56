/* clock.c - the ranks' clocks on one time line, whether the traces are one
 * run, and the lag between ranks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe.h"
#include "tf/util.h"

#define CLOCK_HINT                                                                             \
    "the traces look like different runs, or their clocks are not synchronised; --p2p-ms MS " \
    "imports them with that lag, without reading the clocks"

/* One cross-rank dependency in one step: `got` (on rank `to`) takes the
 * output of `sent` (on rank `from`). */
typedef struct message {
    int k, from, to;
    const tfi_act *sent, *got;
    double idle_since; /* rank to's clock: the end of the action before got */
} message;

/* What the passes over the messages share. */
typedef struct clock_work {
    const tfi_run *run;
    double *off;        /* per rank: microseconds added to its times */
    double *need;       /* ranks x ranks: the largest (sent end - got time), local clocks */
    double *ext;        /* per rank and step: its first start and last end, local clock */
    int have_worst;
    message worst;      /* the message whose receiver is furthest ahead of its sender */
    double worst_gap;
    double *gaps;       /* waiting gaps, microseconds */
    int n_gaps, room;
    int timed;          /* messages whose receiver's compute start is known */
} clock_work;

typedef int (*message_fn)(clock_work *w, const message *m, tf_error *err);

/* When got took its input, on its own clock: its compute start when the
 * wait is known, else its end (it cannot end before its input arrived). */
static double got_time(const message *m)
{
    return m->got->input_timed ? m->got->compute_start : m->got->end;
}

/* The message into act i of step st (on rank r), if it takes one. */
static int message_into(const tfi_run *run, const tf_schedule *s, const int *index, int k,
                        int r, int i, message *m)
{
    const tfi_step *st = tfi_run_step(run, r, k);
    const tf_action *a = &st->acts[i].a;
    int v = tf_schedule_lookup(s, index, a->type, a->stage, a->microbatch);
    int u = v >= 0 && s->actions[v].rank == r ? tf_schedule_sender(s, index, v) : -1;
    if (u < 0)
        return 0;
    const tf_action *from = &s->actions[u];
    const tfi_act *sent = tfi_step_find(tfi_run_step(run, from->rank, k), from->type,
                                        from->stage, from->microbatch);
    if (!sent)
        return 0;
    int before = i - (a->pair == TF_PAIR_SECOND ? 2 : 1);
    *m = (message){k, from->rank, r, sent, &st->acts[i],
                   before >= 0 ? st->acts[before].end : -INFINITY};
    return 1;
}

/* Calls fn on every message of every step. */
static int each_message(clock_work *w, const tf_schedule *s, const int *index, message_fn fn,
                        tf_error *err)
{
    const tfi_run *run = w->run;
    message m;
    for (int k = 0; k < run->n_steps; k++)
        for (int r = 0; r < run->ranks; r++)
            for (int i = 0; i < tfi_run_step(run, r, k)->n_acts; i++) {
                int rc = message_into(run, s, index, k, r, i, &m) ? fn(w, &m, err) : 0;
                if (rc)
                    return rc;
            }
    return 0;
}

static int note_need(clock_work *w, const message *m, tf_error *err)
{
    (void)err;
    double *need = &w->need[(size_t)m->from * (size_t)w->run->ranks + (size_t)m->to];
    *need = fmax(*need, m->sent->end - got_time(m));
    return 0;
}

/* Offsets from the messages: breadth first from rank 0, each rank placed
 * against one already placed at the middle of what their messages allow
 * (the quickest message as quick each way).  Returns how many ranks were
 * placed. */
static int align_by_messages(clock_work *w)
{
    int n = w->run->ranks, placed = 1, *queue = malloc((size_t)n * sizeof *queue);
    char *done = calloc((size_t)n, 1);
    if (!queue || !done) {
        free(queue);
        free(done);
        return -1;
    }
    queue[0] = 0;
    done[0] = 1;
    for (int head = 0; head < placed; head++) {
        int a = queue[head];
        for (int b = 0; b < n; b++) {
            double lo = w->need[(size_t)a * n + b], hi = -w->need[(size_t)b * n + a];
            if (done[b] || !isfinite(lo) || !isfinite(hi))
                continue;
            w->off[b] = w->off[a] + (lo + hi) / 2;
            done[b] = 1;
            queue[placed++] = b;
        }
    }
    free(queue);
    free(done);
    return placed;
}

/* How the clocks are aligned, with w->off set (the message pass fills
 * w->need first when there is no shared clock). */
static int align(clock_work *w, const tf_schedule *s, const int *index, tfi_clock_kind *kind,
                 tf_error *err)
{
    const tfi_run *run = w->run;
    int shared = 1;
    int64_t base = INT64_MAX;
    for (int r = 0; r < run->ranks; r++) {
        shared &= run->traces[r].has_clock;
        if (run->traces[r].base_ns < base)
            base = run->traces[r].base_ns;
    }
    if (run->ranks == 1) {
        *kind = TFI_CLOCK_ONE_RANK;
        return 0;
    }
    if (shared) {
        /* Integer differences first: nanoseconds since 1970 do not fit a
         * double's 53 bits exactly, their differences do. */
        for (int r = 0; r < run->ranks; r++)
            w->off[r] = (double)(run->traces[r].base_ns - base) / 1000.0;
        *kind = TFI_CLOCK_SHARED;
        return 0;
    }
    for (size_t i = 0; i < (size_t)run->ranks * (size_t)run->ranks; i++)
        w->need[i] = -INFINITY;
    int rc = each_message(w, s, index, note_need, err);
    int placed = rc ? 0 : align_by_messages(w);
    if (placed < 0)
        return tf_fail(err, TF_ENOMEM, "out of memory aligning the clocks of %d ranks",
                       run->ranks);
    *kind = placed == run->ranks ? TFI_CLOCK_MESSAGES : TFI_CLOCK_UNALIGNED;
    return rc;
}

/* Rank r's first start and last end in step k, on its own clock. */
static void extents(clock_work *w)
{
    const tfi_run *run = w->run;
    for (int r = 0; r < run->ranks; r++)
        for (int k = 0; k < run->n_steps; k++) {
            const tfi_step *st = tfi_run_step(run, r, k);
            double *e = &w->ext[2 * ((size_t)r * run->n_steps + k)];
            e[0] = st->n_acts ? st->acts[0].start : INFINITY;
            e[1] = -INFINITY;
            for (int i = 0; i < st->n_acts; i++)
                e[1] = fmax(e[1], st->acts[i].end);
        }
}

/* "12.5 ms" or "3600 s" for a span of us microseconds. */
static const char *duration(double us, char *buf)
{
    double ms = fabs(us) / 1000.0;
    if (ms < 1e4)
        snprintf(buf, 32, "%.4g ms", ms);
    else
        snprintf(buf, 32, "%.6g s", ms / 1000.0);
    return buf;
}

/* With shared clocks the steps of two ranks that exchange data overlap. */
static int check_overlap(clock_work *w, const message *m, tf_error *err)
{
    const tfi_run *run = w->run;
    const double *a = &w->ext[2 * ((size_t)m->from * run->n_steps + m->k)];
    const double *b = &w->ext[2 * ((size_t)m->to * run->n_steps + m->k)];
    double a0 = a[0] + w->off[m->from], a1 = a[1] + w->off[m->from];
    double b0 = b[0] + w->off[m->to], b1 = b[1] + w->off[m->to];
    if (a0 <= b1 && b0 <= a1)
        return 0;
    char step[32], apart[32];
    return tf_fail(err, TF_EINVAL, "%s%s: the actions of %s (rank %d) and of %s (rank %d) do not "
                   "overlap in time (they are %s apart on the clocks of the traces), though "
                   "rank %d takes rank %d's data: " CLOCK_HINT, run->label,
                   tfi_step_label(run->steps[m->k], step), run->traces[m->from].path, m->from,
                   run->traces[m->to].path, m->to, duration(a0 > b1 ? a0 - b1 : b0 - a1, apart),
                   m->to, m->from);
}

static int note_worst(clock_work *w, const message *m, tf_error *err)
{
    int rc = w->ext ? check_overlap(w, m, err) : 0;
    double gap = got_time(m) + w->off[m->to] - (m->sent->end + w->off[m->from]);
    if (rc == 0 && (!w->have_worst || gap < w->worst_gap)) {
        w->worst = *m;
        w->have_worst = 1;
        w->worst_gap = gap;
    }
    return rc;
}

/* The receiver furthest ahead of its sender must not be ahead by more
 * than the slack. */
static int check_causal(const clock_work *w, tfi_clock_kind kind, tf_error *err)
{
    const message *m = &w->worst;
    if (!w->have_worst || w->worst_gap >= -TFI_CLOCK_SLACK_US)
        return 0;
    const tfi_run *run = w->run;
    char step[32], ahead[32], got[32], sent[32];
    return tf_fail(err, TF_EINVAL, "%s%s: %s's PP:%s (rank %d) %s %s before %s's PP:%s (rank %d), "
                   "whose output it takes, ends%s: " CLOCK_HINT, run->label,
                   tfi_step_label(run->steps[m->k], step), run->traces[m->to].path,
                   tf_action_format(&m->got->a, got), m->to,
                   m->got->input_timed ? "starts computing" : "ends",
                   duration(w->worst_gap, ahead), run->traces[m->from].path,
                   tf_action_format(&m->sent->a, sent), m->from,
                   kind == TFI_CLOCK_MESSAGES ? " (the traces share no clock, and no offset "
                                                "between them puts every action after the data "
                                                "it takes)" : "");
}

/* A gap when the receiver waited for this message alone: it was idle
 * from before the sender ended until it started. */
static int note_gap(clock_work *w, const message *m, tf_error *err)
{
    double sent_end = m->sent->end + w->off[m->from];
    double start = m->got->compute_start + w->off[m->to];
    w->timed += m->got->input_timed;
    if (!m->got->input_timed || m->idle_since + w->off[m->to] > sent_end || sent_end > start)
        return 0;
    if (w->n_gaps == w->room) {
        int room = w->room ? 2 * w->room : 256;
        double *bigger = realloc(w->gaps, (size_t)room * sizeof *bigger);
        if (!bigger)
            return tf_fail(err, TF_ENOMEM, "out of memory for %d gaps between ranks", room);
        w->gaps = bigger;
        w->room = room;
    }
    w->gaps[w->n_gaps++] = start - sent_end;
    return 0;
}

/* The median step: from the first start of any rank to the last end. */
static double median_step_ms(const clock_work *w)
{
    const tfi_run *run = w->run;
    double *len = malloc(((size_t)run->n_steps + 1) * sizeof *len);
    if (!len)
        return NAN;
    for (int k = 0; k < run->n_steps; k++) {
        double first = INFINITY, last = -INFINITY;
        for (int r = 0; r < run->ranks; r++) {
            const double *e = &w->ext[2 * ((size_t)r * run->n_steps + k)];
            first = fmin(first, e[0] + w->off[r]);
            last = fmax(last, e[1] + w->off[r]);
        }
        len[k] = last > first ? (last - first) / 1000.0 : 0.0;
    }
    double median = tf_median(len, run->n_steps);
    free(len);
    return median;
}

/* The lag must be a small share of the step. */
static int check_lag(const tfi_run *run, const tfi_clock *c, tf_error *err)
{
    if (c->samples == 0 || !(c->lag_ms > TFI_MAX_LAG_SHARE * c->step_ms))
        return 0;
    return tf_fail(err, TF_EINVAL, "%sp2p_ms would be %.4g ms, %.0f%% of a step (median %.4g ms), "
                   "more than the %.0f%% the messages between ranks plausibly take: " CLOCK_HINT,
                   run->label, c->lag_ms, 100 * c->lag_ms / c->step_ms, c->step_ms,
                   100 * TFI_MAX_LAG_SHARE);
}

/* The checks and the lag, once the clocks are aligned. */
static int measure(clock_work *w, const tf_schedule *s, const int *index, tfi_clock *out,
                   tf_error *err)
{
    int aligned = out->kind == TFI_CLOCK_SHARED || out->kind == TFI_CLOCK_MESSAGES;
    int rc = 0;
    if (aligned) {
        double *ext = w->ext;
        w->ext = out->kind == TFI_CLOCK_SHARED ? ext : NULL; /* overlap: shared clocks only */
        rc = each_message(w, s, index, note_worst, err);
        w->ext = ext;
    }
    if (rc == 0 && aligned)
        rc = check_causal(w, out->kind, err);
    if (rc == 0 && aligned)
        rc = each_message(w, s, index, note_gap, err);
    if (rc)
        return rc;
    out->samples = w->n_gaps;
    out->timed = w->timed;
    out->lag_ms = w->n_gaps ? tf_median(w->gaps, w->n_gaps) / 1000.0 : 0.0;
    out->step_ms = median_step_ms(w);
    return check_lag(w->run, out, err);
}

int tfi_clock_check(const tfi_run *run, const tf_schedule *s, tfi_clock *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    size_t n = (size_t)run->ranks;
    clock_work w = {.run = run};
    w.off = calloc(n, sizeof *w.off);
    w.need = malloc(n * n * sizeof *w.need);
    w.ext = malloc(2 * n * (size_t)run->n_steps * sizeof *w.ext + 1);
    int *index = tf_schedule_index(s);
    int rc = 0;
    if (!w.off || !w.need || !w.ext || !index)
        rc = tf_fail(err, TF_ENOMEM, "out of memory aligning the clocks of %d ranks over %d "
                     "steps", run->ranks, run->n_steps);
    if (rc == 0) {
        extents(&w);
        rc = align(&w, s, index, &out->kind, err);
    }
    if (rc == 0)
        rc = measure(&w, s, index, out, err);
    free(w.off);
    free(w.need);
    free(w.ext);
    free(w.gaps);
    free(index);
    return rc;
}
