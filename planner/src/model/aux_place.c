/* aux_place.c - aux work into a rank's idle windows, first fit, and what
 * spills into later steps (tf/aux.h). */
#include "aux_place.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct window {
    double end;  /* the usable end: the window's end less the margin */
    double fill; /* where the next piece may start */
} window;

/* Where the placement of one rank goes: out's slices, or nowhere when
 * only the amount that fits is wanted. */
typedef struct sink {
    tf_aux_placement *out; /* NULL: count only */
    int *capacity;
    int rank, step;
} sink;

static void open_windows(const tf_aux_rank_input *in, window *w)
{
    for (int k = 0; k < in->n_windows; k++) {
        double start = in->windows[2 * k], end = in->windows[2 * k + 1];
        w[k].end = end - in->margin * (end - start);
        w[k].fill = start;
    }
}

static int add_slice(const sink *to, const tf_aux_item *it, double start, double ms)
{
    tf_aux_placement *out = to->out;
    if (!out)
        return 0;
    if (out->n_slices == *to->capacity) {
        int grown = *to->capacity ? 2 * *to->capacity : 64;
        tf_aux_slice *s = realloc(out->slices, (size_t)grown * sizeof *s);
        if (!s)
            return TF_ENOMEM;
        out->slices = s;
        *to->capacity = grown;
    }
    out->slices[out->n_slices++] = (tf_aux_slice){to->rank, it->work, it->microbatch, to->step,
                                                  start, ms};
    return 0;
}

/* Places what it can of `left` ms of item it, ready at `ready`, first fit
 * (split when divisible); returns what is left, or -1 out of memory. */
static double fit(window *w, int n_windows, const tf_aux_item *it, int divisible, double ready,
                  double left, const sink *to)
{
    for (int k = 0; k < n_windows && left > 0.0; k++) {
        double from = fmax(w[k].fill, ready), room = w[k].end - from;
        double tiny = 1e-12 * fmax(1.0, fabs(w[k].end));
        if (room <= tiny || (!divisible && room + tiny < left))
            continue;
        double take = fmin(room, left);
        if (add_slice(to, it, from, take))
            return -1.0;
        w[k].fill = from + take;
        left = left - take <= tiny ? 0.0 : left - take;
    }
    return left;
}

static int by_ready(const void *a, const void *b)
{
    const tf_aux_item *x = a, *y = b;
    if (x->ready_ms != y->ready_ms)
        return x->ready_ms < y->ready_ms ? -1 : 1;
    return x->work != y->work ? x->work - y->work : x->microbatch - y->microbatch;
}

/* The longest usable window, which an indivisible item must fit. */
static double longest_window(const tf_aux_rank_input *in)
{
    double longest = 0.0;
    for (int k = 0; k < in->n_windows; k++) {
        double len = (in->windows[2 * k + 1] - in->windows[2 * k]) * (1.0 - in->margin);
        longest = fmax(longest, len);
    }
    return longest;
}

/* The most of the items the step's windows can take: every item split,
 * first fit by ready time, which never leaves a window idle while ready
 * work waits. */
static double exact_amount(const tf_aux_rank_input *in, window *w)
{
    open_windows(in, w);
    sink none = {0};
    double placed = 0.0;
    for (int i = 0; i < in->n_items; i++) {
        const tf_aux_item *it = &in->items[i];
        placed += it->ms - fit(w, in->n_windows, it, 1, it->ready_ms, it->ms, &none);
    }
    return placed;
}

/* The first step: each item from its ready time; left[i] keeps what
 * spills (0 from the start: an item left out). */
static int place_first_step(const tf_aux_rank_input *in, window *w, double *left, sink *to,
                            tf_aux_rank *r)
{
    open_windows(in, w);
    for (int i = 0; i < in->n_items; i++) {
        const tf_aux_item *it = &in->items[i];
        if (left[i] == 0.0)
            continue;
        left[i] = fit(w, in->n_windows, it, it->divisible, it->ready_ms, left[i], to);
        if (left[i] < 0.0)
            return TF_ENOMEM;
        r->placed_ms += it->ms - left[i];
    }
    return 0;
}

/* Later steps: what spilled, ready from each step's start, until none is
 * left or max_steps; refresh_steps counts the steps used. */
static int place_spill(const tf_aux_rank_input *in, window *w, double *left, sink *to,
                       tf_aux_rank *r)
{
    int pending = 0;
    for (int i = 0; i < in->n_items; i++)
        pending += left[i] > 0.0;
    for (to->step = 1; pending && to->step < in->max_steps; to->step++) {
        open_windows(in, w);
        for (int i = 0; i < in->n_items; i++) {
            if (left[i] <= 0.0)
                continue;
            const tf_aux_item *it = &in->items[i];
            left[i] = fit(w, in->n_windows, it, it->divisible, -INFINITY, left[i], to);
            if (left[i] < 0.0)
                return TF_ENOMEM;
            pending -= left[i] == 0.0;
        }
    }
    r->refresh_steps = pending ? 0 : to->step;
    return 0;
}

int tf_aux_place_rank(const tf_aux_rank_input *in, tf_aux_placement *out, int *capacity,
                      tf_error *err)
{
    tf_aux_rank *r = &out->per_rank[in->rank];
    memset(r, 0, sizeof *r);
    if (in->n_items > 1)
        qsort(in->items, (size_t)in->n_items, sizeof *in->items, by_ready);
    window *w = malloc(((size_t)in->n_windows + 1) * sizeof *w);
    double *left = malloc(((size_t)in->n_items + 1) * sizeof *left);
    int rc = !w || !left ? TF_ENOMEM : 0;
    const double longest = longest_window(in);
    int unplaceable = 0;
    for (int i = 0; i < in->n_items && !rc; i++) {
        const tf_aux_item *it = &in->items[i];
        r->demand_ms += it->ms;
        /* An item no window can hold never runs: left out, and the work
         * of a step then never completes (refresh_steps 0). */
        int never = !it->divisible ? it->ms > longest : longest <= 0.0;
        left[i] = never ? 0.0 : it->ms;
        unplaceable |= never;
    }
    sink to = {out, capacity, in->rank, 0};
    if (!rc)
        r->exact_ms = exact_amount(in, w);
    if (!rc)
        rc = place_first_step(in, w, left, &to, r);
    if (!rc)
        rc = place_spill(in, w, left, &to, r);
    if (unplaceable)
        r->refresh_steps = 0;
    r->spilled_ms = r->demand_ms - r->placed_ms;
    free(w);
    free(left);
    return rc ? tf_fail(err, TF_ENOMEM, "out of memory placing rank %d's aux work", in->rank)
              : 0;
}

int tf_aux_refresh_steps(const tf_aux_placement *p)
{
    int slowest = 1;
    for (int r = 0; r < p->ranks; r++) {
        const tf_aux_rank *a = &p->per_rank[r];
        if (a->demand_ms <= 0)
            continue;
        if (a->refresh_steps == 0)
            return 0;
        if (a->refresh_steps > slowest)
            slowest = a->refresh_steps;
    }
    return slowest;
}

void tf_aux_placement_free(tf_aux_placement *p)
{
    free(p->per_rank);
    free(p->slices);
    memset(p, 0, sizeof *p);
}

const char *tf_aux_after_name(tf_aux_after after)
{
    static const char *const names[] = {"F", "B", "W", "step"};
    return after >= TF_AUX_AFTER_F && after <= TF_AUX_AFTER_STEP ? names[after] : "?";
}
