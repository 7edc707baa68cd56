/* bytes.c - each stage's bytes from a run's "[memory]" events (bytes.h). */
#include "bytes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tf/profile_samples.h"
#include "tf/util.h"

/* One trace's memory events on its device, ready for range sums. */
typedef struct device_log {
    double *ts;       /* n times, ascending */
    double *before;   /* n + 1: before[k] = sum of the Bytes of events 0..k-1 */
    double *total;    /* n: Total Allocated after event k */
    double start;     /* the live bytes before the first event */
    double peak;      /* the largest Total Allocated */
    int n;
} device_log;

/* Per stage, the growth samples of one kind of action. */
typedef struct samples {
    double *x;        /* stages x cap */
    int *n;           /* stages */
    int cap;
} samples;

/* The device the pipeline computes on: the first accelerator's events
 * (type, id), else the CPU's (0, any id). */
static void pick_device(const tfi_trace *t, int *type, int *id)
{
    *type = 0;
    *id = -2; /* every id */
    for (int i = 0; i < t->n_mem; i++)
        if (t->mem[i].device_type != 0) {
            *type = t->mem[i].device_type;
            *id = t->mem[i].device_id;
            return;
        }
}

static void log_free(device_log *l)
{
    free(l->ts);
    free(l->before);
    free(l->total);
    memset(l, 0, sizeof *l);
}

/* The events of t on its device (pick_device) into *l. */
static int log_build(const tfi_trace *t, device_log *l, int *cpu, tf_error *err)
{
    int type, id;
    pick_device(t, &type, &id);
    *cpu = type == 0;
    memset(l, 0, sizeof *l);
    size_t room = (size_t)t->n_mem + 1;
    l->ts = malloc(room * sizeof *l->ts);
    l->before = malloc(room * sizeof *l->before);
    l->total = malloc(room * sizeof *l->total);
    if (!l->ts || !l->before || !l->total) {
        log_free(l);
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for %d [memory] events", t->path,
                       t->n_mem);
    }
    l->before[0] = 0;
    for (int i = 0; i < t->n_mem; i++) {
        const tfi_mem_event *m = &t->mem[i];
        if (m->device_type != type || (id != -2 && m->device_id != id))
            continue;
        if (l->n == 0)
            l->start = m->total - m->bytes;
        l->ts[l->n] = m->ts;
        l->total[l->n] = m->total;
        l->before[l->n + 1] = l->before[l->n] + m->bytes;
        l->peak = fmax(l->peak, m->total);
        l->n++;
    }
    return 0;
}

/* The number of events of l before time x.  O(log n). */
static int events_before(const device_log *l, double x)
{
    int lo = 0, hi = l->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (l->ts[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The live bytes at time x. */
static double live_at(const device_log *l, double x)
{
    int k = events_before(l, x);
    return k ? l->total[k - 1] : l->start;
}

/* What the events in [a, b) allocated less what they freed. */
static double growth(const device_log *l, double a, double b)
{
    return l->before[events_before(l, b)] - l->before[events_before(l, a)];
}

static void add_sample(samples *s, int stage, double v)
{
    if (s->n[stage] < s->cap)
        s->x[(size_t)stage * (size_t)s->cap + (size_t)s->n[stage]++] = v;
}

/* The samples of rank r's steps (all but the first when there are
 * several): its live bytes at each step's first action into live[], the
 * growth across each F and I into act and wg. */
static void sample_rank(const tfi_run *run, int r, const device_log *l, samples *act,
                        samples *wg, double *live, int *n_live)
{
    *n_live = 0;
    for (int k = run->n_steps > 1 ? 1 : 0; k < run->n_steps; k++) {
        const tfi_step *st = tfi_run_step(run, r, k);
        if (st->n_acts == 0)
            continue;
        live[(*n_live)++] = live_at(l, st->acts[0].start);
        for (int i = 0; i < st->n_acts; i++) {
            const tf_action *a = &st->acts[i].a;
            double next = i + 1 < st->n_acts ? st->acts[i + 1].start : st->end;
            if (a->pair != TF_PAIR_NONE || (a->type != TF_ACT_F && a->type != TF_ACT_I))
                continue;
            add_sample(a->type == TF_ACT_F ? act : wg, a->stage,
                       growth(l, st->acts[i].start, next));
        }
    }
}

/* base plus the median of stage's samples into *out (NAN without any);
 * a result that is no size (negative, or above peak) is recorded as
 * implausible. */
static void stage_median(samples *s, int stage, double base, double peak, const char *what,
                         double *out, tfi_bytes *b)
{
    *out = NAN;
    if (s->n[stage] == 0)
        return;
    double m = base + tf_sample_statistic(s->x + (size_t)stage * (size_t)s->cap, s->n[stage]);
    if (m >= 0 && m <= peak) {
        *out = m;
    } else if (b->implausible_stage < 0 || (strcmp(what, "activation_bytes") == 0 &&
                                            strcmp(b->implausible_what, what) != 0)) {
        /* The first of each kind, activation_bytes first: it decides whether
         * any memory field is written. */
        b->implausible_stage = stage;
        b->implausible_what = what;
        b->implausible_value = m;
    }
}

/* Rank r's figures into b: its static bytes split over its stages. */
static int measure_rank(const tfi_run *run, const tf_schedule *s, int r, samples *act,
                        samples *wg, tfi_bytes *b, tf_error *err)
{
    device_log l;
    int cpu = 0;
    int rc = log_build(&run->traces[r], &l, &cpu, err);
    b->cpu_ranks += cpu;
    double *live = rc ? NULL : malloc(((size_t)run->n_steps + 1) * sizeof *live);
    if (rc == 0 && !live)
        rc = tf_fail(err, TF_ENOMEM, "out of memory");
    if (rc == 0) {
        int n_live;
        sample_rank(run, r, &l, act, wg, live, &n_live);
        double rank_static = tf_sample_statistic(live, n_live);
        for (int st = 0; st < s->stages; st++) {
            if (s->stage_rank[st] != r)
                continue;
            b->static_bytes[st] = rank_static / s->stages_per_rank;
            stage_median(act, st, 0, l.peak, "activation_bytes", &b->activation[st], b);
            /* After its I a microbatch holds what its F kept plus the I's growth
             * (negative where the I frees some of it): G, as the planner counts
             * it from the I's end. */
            stage_median(wg, st, b->activation[st], l.peak, "weight_grad_bytes",
                         &b->weight_grad[st], b);
        }
    }
    free(live);
    log_free(&l);
    return rc;
}

static int alloc_arrays(const tfi_run *run, const tf_schedule *s, samples *act, samples *wg,
                        tfi_bytes *b, tf_error *err)
{
    size_t n = (size_t)s->stages;
    int cap = s->microbatches * run->n_steps;
    act->cap = wg->cap = cap;
    act->x = malloc(n * (size_t)cap * sizeof *act->x);
    wg->x = malloc(n * (size_t)cap * sizeof *wg->x);
    act->n = calloc(n, sizeof *act->n);
    wg->n = calloc(n, sizeof *wg->n);
    b->static_bytes = malloc(n * sizeof *b->static_bytes);
    b->activation = malloc(n * sizeof *b->activation);
    b->weight_grad = malloc(n * sizeof *b->weight_grad);
    if (!act->x || !wg->x || !act->n || !wg->n || !b->static_bytes || !b->activation ||
        !b->weight_grad)
        return tf_fail(err, TF_ENOMEM, "out of memory for the stages' bytes");
    for (size_t k = 0; k < n; k++)
        b->static_bytes[k] = b->activation[k] = b->weight_grad[k] = NAN;
    b->stages = s->stages;
    return 0;
}

int tfi_bytes_measure(const tfi_run *run, const tf_schedule *s, tfi_bytes *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    out->implausible_stage = -1;
    for (int r = 0; r < run->ranks; r++)
        out->traces_with_events += run->traces[r].n_mem > 0;
    if (out->traces_with_events < run->ranks)
        return 0;
    samples act = {0}, wg = {0};
    int rc = alloc_arrays(run, s, &act, &wg, out, err);
    for (int r = 0; rc == 0 && r < run->ranks; r++)
        rc = measure_rank(run, s, r, &act, &wg, out, err);
    free(act.x);
    free(act.n);
    free(wg.x);
    free(wg.n);
    if (rc) {
        int with = out->traces_with_events;
        tfi_bytes_free(out);
        out->traces_with_events = with;
    }
    return rc;
}

/* Says why a run's figures give no memory fields; 1 when they do not. */
static int refuse_memory(const tfi_options *o, const tfi_bytes *b, int ranks)
{
    if (!b->static_bytes) {
        if (b->traces_with_events > 0)
            tfi_note(o, 1, "memory: only %d of the %d traces hold [memory] events "
                     "(profile_memory=True): no memory fields written", b->traces_with_events,
                     ranks);
        return 1;
    }
    if (b->implausible_stage >= 0 && strcmp(b->implausible_what, "activation_bytes") == 0) {
        tfi_note(o, 1, "memory: stage %d's activation_bytes would be %.0f bytes, the median "
                 "growth across its forwards, which is no size (negative, or above the most "
                 "its rank ever held): no memory fields written", b->implausible_stage,
                 b->implausible_value);
        return 1;
    }
    for (int st = 0; st < b->stages; st++)
        if (isnan(b->activation[st])) {
            tfi_note(o, 1, "memory: stage %d has no forward outside an overlapped pair to "
                     "measure: no memory fields written", st);
            return 1;
        }
    return 0;
}

/* The --frozen run's activation bytes of stage st, or a (no saving) with
 * a note when it has none that is plausible and at most a. */
static double frozen_activation(const tfi_options *o, const tfi_bytes *frozen, int st, double a)
{
    if (!frozen || !frozen->activation)
        return a;
    double af = frozen->activation[st];
    if (isnan(af))
        tfi_note(o, 0, "memory: stage %d: the --frozen run gives no plausible activation "
                 "bytes: activation_frozen_bytes left out", st);
    else if (af > a)
        tfi_note(o, 0, "memory: stage %d: the --frozen run's forwards keep %.0f bytes, more than "
                 "the run's %.0f: activation_frozen_bytes left out", st, af, a);
    return isnan(af) || af > a ? a : af;
}

int tfi_bytes_to_profile(const tfi_options *o, const tfi_bytes *run, const tfi_bytes *frozen,
                         tf_profile *p, tf_error *err)
{
    const tf_schedule *s = &p->schedule;
    if (refuse_memory(o, run, s->ranks))
        return 0;
    if (frozen && frozen->traces_with_events > 0 && !frozen->static_bytes)
        frozen = NULL; /* some frozen traces lack events: no frozen figures */
    if (!(p->memory = calloc((size_t)s->stages + 1, sizeof *p->memory)))
        return tf_fail(err, TF_ENOMEM, "out of memory");
    for (int st = 0; st < s->stages; st++) {
        tf_stage_memory *m = &p->memory[st];
        m->static_bytes = run->static_bytes[st];
        m->activation_bytes = run->activation[st];
        m->weight_grad_bytes = isnan(run->weight_grad[st]) ? m->activation_bytes
                                                           : run->weight_grad[st];
        m->activation_frozen_bytes = frozen_activation(o, frozen, st, m->activation_bytes);
    }
    if (run->implausible_stage >= 0)
        tfi_note(o, 1, "memory: stage %d's weight_grad_bytes would be %.0f bytes, its "
                 "activation_bytes plus the median growth across its I actions, which is no "
                 "size: left out",
                 run->implausible_stage, run->implausible_value);
    if (run->cpu_ranks > 0)
        tfi_note(o, 1, "memory: %d %s measured on the CPU, where torch counts only what was "
                 "allocated while the profiler recorded: static_bytes leaves out the weights "
                 "and anything else allocated before; add those by hand", run->cpu_ranks,
                 tf_plural(run->cpu_ranks, "rank", "ranks"));
    tfi_note(o, 0, "memory: from the [memory] events, medians over the steps after the first "
             "and the microbatches%s", s->stages_per_rank > 1 ? "; each rank's static bytes "
             "split evenly over its stages (the traces do not say which stage holds which "
             "parameters)" : "");
    return 0;
}

void tfi_bytes_free(tfi_bytes *b)
{
    free(b->static_bytes);
    free(b->activation);
    free(b->weight_grad);
    memset(b, 0, sizeof *b);
    b->implausible_stage = -1;
}
