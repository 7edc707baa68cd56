/* waits.c - the end of each CPU-side compute action's wait for its input. */
#include "waits.h"

#include <math.h>
#include <stdlib.h>

/* The receive events in start order, and a tree over their ends that
 * answers "the latest end among receives first..last" in O(log n), so
 * that nested or crowded RECV spans cost no rescans. */
typedef struct receives {
    double *start;
    double *tree; /* tree[n + i] = end of receive i; tree[k] = max of its two children */
    int n;
} receives;

static int receives_make(const tfi_trace *t, receives *rx)
{
    rx->n = 0;
    for (int i = 0; i < t->n_spans; i++)
        rx->n += t->spans[i].kind == TFI_SPAN_RECV;
    rx->start = malloc(((size_t)rx->n + 1) * sizeof *rx->start);
    rx->tree = malloc((2 * (size_t)rx->n + 1) * sizeof *rx->tree);
    if (!rx->start || !rx->tree)
        return TF_ENOMEM;
    for (int i = 0, k = 0; i < t->n_spans; i++)
        if (t->spans[i].kind == TFI_SPAN_RECV) {
            rx->start[k] = t->spans[i].start;
            rx->tree[rx->n + k++] = t->spans[i].end;
        }
    for (int k = rx->n - 1; k > 0; k--)
        rx->tree[k] = fmax(rx->tree[2 * k], rx->tree[2 * k + 1]);
    return 0;
}

/* The first receive that starts at or after x (by < or <=). */
static int first_from(const receives *rx, double x, int strictly_after)
{
    int lo = 0, hi = rx->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (rx->start[mid] < x || (strictly_after && rx->start[mid] == x))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The latest end among the receives that start inside [from, to], or
 * -INFINITY when none does. */
static double latest_end(const receives *rx, double from, double to)
{
    double best = -INFINITY;
    int lo = first_from(rx, from, 0) + rx->n, hi = first_from(rx, to, 1) + rx->n;
    for (; lo < hi; lo /= 2, hi /= 2) {
        if (lo & 1)
            best = fmax(best, rx->tree[lo++]);
        if (hi & 1)
            best = fmax(best, rx->tree[--hi]);
    }
    return best;
}

/* The compute action a RECV span feeds, in its step, or NULL. */
static tfi_act *fed_action(const tfi_rank_run *r, const tfi_span *s)
{
    int k = tfi_step_at(r, s->start);
    if (k < 0)
        return NULL;
    const tfi_step *st = &r->steps[k];
    int stage = s->u.pp.stage[0], mb = s->u.pp.microbatch[0];
    const tfi_act *a = tfi_step_find(st, s->pp == TFI_PP_RECV_F ? TF_ACT_F : TF_ACT_B, stage, mb);
    if (!a && s->pp == TFI_PP_RECV_B)
        a = tfi_step_find(st, TF_ACT_I, stage, mb);
    return (tfi_act *)a; /* r's own array */
}

/* A pair computes once the inputs of both halves are in. */
static void join_pairs(tfi_rank_run *r)
{
    for (long i = 0; i + 1 < r->n_acts; i++) {
        tfi_act *first = &r->acts[i], *second = first + 1;
        if (first->a.pair != TF_PAIR_FIRST)
            continue;
        first->compute_start = second->compute_start =
            fmax(first->compute_start, second->compute_start);
    }
}

int tfi_trim_waits(const tfi_trace *t, tfi_rank_run *r, tf_error *err)
{
    receives rx = {0};
    if (receives_make(t, &rx)) {
        free(rx.start);
        free(rx.tree);
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for its receive events", t->path);
    }
    for (int i = 0; i < t->n_spans; i++) {
        const tfi_span *s = &t->spans[i];
        if (s->kind != TFI_SPAN_PP || s->gpu || (s->pp != TFI_PP_RECV_F && s->pp != TFI_PP_RECV_B))
            continue;
        tfi_act *a = fed_action(r, s);
        double when = a ? latest_end(&rx, s->start, s->end) : -INFINITY;
        if (when == -INFINITY)
            continue;
        a->input_timed = 1;
        if (when > a->start) {
            a->compute_start = when < a->end ? when : a->end;
            r->wait_trimmed++;
        }
    }
    join_pairs(r);
    free(rx.start);
    free(rx.tree);
    return 0;
}
