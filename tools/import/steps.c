/* steps.c - cutting one rank's trace into steps of pipeline actions. */
#include "steps.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "waits.h"

static int is_compute(const tfi_span *s)
{
    return s->kind == TFI_SPAN_PP && (s->pp == TFI_PP_COMPUTE || s->pp == TFI_PP_OVERLAP);
}

/* The highest stage an event proves to exist: its own, or the next one it
 * sends forward to or receives gradients from. */
static int stage_named(const tfi_span *s)
{
    int next = s->pp == TFI_PP_SEND_F || s->pp == TFI_PP_RECV_B;
    if (s->pp == TFI_PP_OVERLAP && s->u.pp.stage[1] > s->u.pp.stage[0])
        return s->u.pp.stage[1];
    return s->u.pp.stage[0] + next;
}

/* A sort key and what it sorts: steps by id, actions by key. */
typedef struct keyed {
    int64_t key;
    int pos;
} keyed;

static int by_key_then_pos(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* Step spans of one side: counted (r NULL) or appended to r->steps in time
 * order.  Returns how many. */
static int collect_steps(const tfi_trace *t, int gpu, tfi_rank_run *r)
{
    int n = 0;
    for (int i = 0; i < t->n_spans; i++) {
        const tfi_span *s = &t->spans[i];
        if (s->kind != TFI_SPAN_STEP || s->gpu != gpu)
            continue;
        if (r)
            r->steps[r->n_steps++] = (tfi_step){.id = s->u.step, .start = s->start,
                                                .end = s->end, .acts = NULL, .by_key = NULL};
        n++;
    }
    return n;
}

/* The event of step k's span, for messages (the k-th step span of the side). */
static int step_event(const tfi_trace *t, int gpu, int k)
{
    for (int i = 0, seen = 0; i < t->n_spans; i++)
        if (t->spans[i].kind == TFI_SPAN_STEP && t->spans[i].gpu == gpu && seen++ == k)
            return t->spans[i].index;
    return -1;
}

/* Sorts the steps by id into r->by_id; a number twice is an error. */
static int index_steps(const tfi_trace *t, int gpu, tfi_rank_run *r, tf_error *err)
{
    keyed *order = malloc(((size_t)r->n_steps + 1) * sizeof *order);
    r->by_id = malloc(((size_t)r->n_steps + 1) * sizeof *r->by_id);
    int rc = order && r->by_id ? 0 : tf_fail(err, TF_ENOMEM, "%s: out of memory indexing its %d "
                                                  "steps", t->path, r->n_steps);
    for (int k = 0; rc == 0 && k < r->n_steps; k++)
        order[k] = (keyed){r->steps[k].id, k};
    if (rc == 0)
        qsort(order, (size_t)r->n_steps, sizeof *order, by_key_then_pos);
    for (int k = 0; rc == 0 && k < r->n_steps; k++) {
        r->by_id[k] = order[k].pos;
        if (k > 0 && order[k].key == order[k - 1].key)
            rc = tf_fail(err, TF_EINVAL, "%s: event %d: ProfilerStep#%ld appears twice",
                         t->path, step_event(t, gpu, order[k].pos), (long)order[k].key);
    }
    free(order);
    return rc;
}

/* r->steps from the trace's ProfilerStep spans, or one step for all. */
static int make_steps(const tfi_trace *t, tfi_rank_run *r, tf_error *err)
{
    int side = r->gpu;
    if (collect_steps(t, side, NULL) == 0)
        side = 0;
    r->steps = calloc((size_t)collect_steps(t, side, NULL) + 1, sizeof *r->steps);
    if (!r->steps)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for its steps", t->path);
    collect_steps(t, side, r);
    if (r->n_steps == 0) {
        r->steps[0] = (tfi_step){.id = -1, .start = -INFINITY, .end = INFINITY};
        r->n_steps = 1;
    }
    return index_steps(t, side, r, err);
}

/* Notes the stages each PP: event of the side names and counts each
 * step's compute actions (into n_acts), refusing a step of more than
 * TF_MAX_ACTIONS as soon as it has one too many. */
static int count_actions(const tfi_trace *t, tfi_rank_run *r, tf_error *err)
{
    for (int i = 0; i < t->n_spans; i++) {
        const tfi_span *s = &t->spans[i];
        if (s->kind != TFI_SPAN_PP || s->gpu != r->gpu)
            continue;
        if (stage_named(s) > r->max_stage_named)
            r->max_stage_named = stage_named(s);
        if (!is_compute(s))
            continue;
        int k = tfi_step_at(r, s->start);
        if (k < 0) {
            r->outside++;
            continue;
        }
        tfi_step *st = &r->steps[k];
        st->n_acts += s->pp == TFI_PP_OVERLAP ? 2 : 1;
        r->n_acts += s->pp == TFI_PP_OVERLAP ? 2 : 1;
        if (st->n_acts > TF_MAX_ACTIONS) {
            char step[32];
            return tf_fail(err, TF_EINVAL, "%s: %s holds more than %d actions, the most the "
                           "planner accepts in one step (event %d)", t->path,
                           tfi_step_label(st->id, step), TF_MAX_ACTIONS, s->index);
        }
    }
    return 0;
}

/* Places each step's actions in one array, step after step. */
static int allocate_actions(const tfi_trace *t, tfi_rank_run *r, tf_error *err)
{
    r->acts = malloc(((size_t)r->n_acts + 1) * sizeof *r->acts);
    r->keys = malloc(((size_t)r->n_acts + 1) * sizeof *r->keys);
    if (!r->acts || !r->keys)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for %ld actions", t->path, r->n_acts);
    long used = 0;
    for (int k = 0; k < r->n_steps; k++) {
        r->steps[k].acts = r->acts + used;
        r->steps[k].by_key = r->keys + used;
        used += r->steps[k].n_acts;
        r->steps[k].n_acts = 0;
    }
    return 0;
}

/* Appends the compute span s (one action, or a pair's two) to its step. */
static void add_span(tfi_rank_run *r, const tfi_span *s, tfi_step *st)
{
    for (int which = 0; which < (s->pp == TFI_PP_OVERLAP ? 2 : 1); which++) {
        tfi_act *a = &st->acts[st->n_acts++];
        tfi_span_action(s, which, &a->a);
        a->event = s->index;
        a->start = a->compute_start = s->start;
        a->end = s->end;
        a->input_timed = r->gpu;
        if (a->a.stage < r->min_stage)
            r->min_stage = a->a.stage;
    }
}

static void fill_actions(const tfi_trace *t, tfi_rank_run *r)
{
    for (int i = 0; i < t->n_spans; i++) {
        const tfi_span *s = &t->spans[i];
        int k = s->gpu == r->gpu && is_compute(s) ? tfi_step_at(r, s->start) : -1;
        if (k >= 0)
            add_span(r, s, &r->steps[k]);
    }
}

/* The order actions are indexed in: stage, microbatch, type. */
static int64_t action_key(const tf_action *a)
{
    return ((int64_t)a->stage << 20 | (int64_t)a->microbatch << 2) | a->type;
}

/* "PP:0F3", or the pair's name for either half of a pair, of act i. */
static const char *act_name(const tfi_step *st, int i, char *buf)
{
    const tfi_act *a = &st->acts[i];
    char cell[TF_CELL_MAX];
    if (a->a.pair == TF_PAIR_NONE)
        tf_action_format(&a->a, cell);
    else if (a->a.pair == TF_PAIR_FIRST)
        tf_pair_format(&a->a, &st->acts[i + 1].a, cell);
    else
        tf_pair_format(&st->acts[i - 1].a, &a->a, cell);
    snprintf(buf, TF_CELL_MAX + 3, "PP:%s", cell);
    return buf;
}

/* Sorts step st's actions by key (order: room for them); an action twice
 * is an error. */
static int index_actions(const tfi_trace *t, tfi_step *st, keyed *order, tf_error *err)
{
    for (int i = 0; i < st->n_acts; i++)
        order[i] = (keyed){action_key(&st->acts[i].a), i};
    qsort(order, (size_t)st->n_acts, sizeof *order, by_key_then_pos);
    for (int i = 0; i < st->n_acts; i++)
        st->by_key[i] = order[i].pos;
    for (int i = 1; i < st->n_acts; i++) {
        if (order[i].key != order[i - 1].key)
            continue;
        int later = order[i].pos;
        char cell[32], name[TF_CELL_MAX + 3], step[32];
        if (st->id < 0)
            return tf_fail(err, TF_EINVAL, "%s: event %d \"%s\": the action appears twice, and "
                           "the trace has no ProfilerStep#N spans to tell steps apart (profile "
                           "with a torch.profiler schedule, or pass one step's trace)", t->path,
                           st->acts[later].event, act_name(st, later, name));
        return tf_fail(err, TF_EINVAL, "%s: event %d \"%s\": the action %s appears twice in %s",
                       t->path, st->acts[later].event, act_name(st, later, name),
                       tf_action_format(&st->acts[later].a, cell), tfi_step_label(st->id, step));
    }
    return 0;
}

/* Two actions of one rank cannot run at once: each span must start after
 * the ones before it ended (a pair's halves share one span). */
static int check_overlap(const tfi_trace *t, const tfi_step *st, tf_error *err)
{
    int last = -1; /* the action whose span ends latest so far */
    for (int i = 0; i < st->n_acts; i++) {
        if (st->acts[i].a.pair == TF_PAIR_SECOND)
            continue;
        if (last >= 0 && st->acts[i].start < st->acts[last].end - TFI_OVERLAP_SLACK_US) {
            char a[TF_CELL_MAX + 3], b[TF_CELL_MAX + 3], step[32];
            return tf_fail(err, TF_EINVAL, "%s: event %d \"%s\" (%.3f to %.3f us) overlaps event "
                           "%d \"%s\" (%.3f to %.3f us) in %s: a rank runs one action at a "
                           "time, so its action spans cannot overlap", t->path,
                           st->acts[i].event, act_name(st, i, a), st->acts[i].start,
                           st->acts[i].end, st->acts[last].event, act_name(st, last, b),
                           st->acts[last].start, st->acts[last].end,
                           tfi_step_label(st->id, step));
        }
        if (last < 0 || st->acts[i].end > st->acts[last].end)
            last = i;
    }
    return 0;
}

/* The side's PP: events must all be the runtime's, and some must exist. */
static int check_names(const tfi_trace *t, int gpu, tf_error *err)
{
    const tfi_bad_name *bad = &t->bad[gpu];
    if (bad->index >= 0)
        return tf_fail(err, TF_EINVAL, "%s: event %d \"%s\": not an action name of PyTorch's "
                       "pipelining runtime (expected PP:<stage><F|B|I|W><microbatch>, e.g. "
                       "PP:0F3, or a pair PP:(0F7;7B3)OVERLAP_F_B)", t->path, bad->index,
                       bad->name);
    if (t->pp_events[gpu] == 0)
        return tf_fail(err, TF_EINVAL,
                       "%s: no PP: events: not a trace of PyTorch's pipelining runtime, which "
                       "annotates every action as PP:<stage><type><microbatch> (e.g. PP:0F3)",
                       t->path);
    return 0;
}

/* Counts, stores, indexes and checks the actions of every step. */
static int cut_actions(const tfi_trace *t, tfi_rank_run *r, tf_error *err)
{
    int rc = count_actions(t, r, err);
    if (rc == 0 && r->n_acts == 0)
        rc = tf_fail(err, TF_EINVAL, "%s: no PP: compute action (F, B, I or W) inside a "
                     "ProfilerStep#N span", t->path);
    if (rc == 0)
        rc = allocate_actions(t, r, err);
    if (rc)
        return rc;
    fill_actions(t, r);
    int most = 0;
    for (int k = 0; k < r->n_steps; k++)
        most = r->steps[k].n_acts > most ? r->steps[k].n_acts : most;
    keyed *order = malloc(((size_t)most + 1) * sizeof *order);
    if (!order)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory indexing a step of %d actions",
                       t->path, most);
    for (int k = 0; rc == 0 && k < r->n_steps; k++)
        if ((rc = index_actions(t, &r->steps[k], order, err)) == 0)
            rc = check_overlap(t, &r->steps[k], err);
    free(order);
    return rc;
}

int tfi_rank_run_build(const tfi_trace *t, tfi_rank_run *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    out->trace = t;
    out->max_stage_named = -1;
    out->min_stage = TFI_MAX_INDEX + 1;
    out->gpu = t->pp_events[1] > 0;
    int rc = check_names(t, out->gpu, err);
    if (rc == 0)
        rc = make_steps(t, out, err);
    if (rc == 0)
        rc = cut_actions(t, out, err);
    if (rc == 0 && !out->gpu)
        rc = tfi_trim_waits(t, out, err);
    if (rc)
        tfi_rank_run_free(out);
    return rc;
}

void tfi_rank_run_free(tfi_rank_run *r)
{
    free(r->steps);
    free(r->by_id);
    free(r->acts);
    free(r->keys);
    memset(r, 0, sizeof *r);
}

const char *tfi_step_label(long id, char *buf)
{
    if (id < 0)
        snprintf(buf, 32, "the whole trace");
    else
        snprintf(buf, 32, "ProfilerStep#%ld", id);
    return buf;
}

int tfi_step_at(const tfi_rank_run *r, double x)
{
    int lo = 0, hi = r->n_steps - 1, found = -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->steps[mid].start <= x) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found >= 0 && x <= r->steps[found].end ? found : -1;
}

const tfi_step *tfi_rank_run_step(const tfi_rank_run *r, long id)
{
    int lo = 0, hi = r->n_steps - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const tfi_step *s = &r->steps[r->by_id[mid]];
        if (s->id == id)
            return s;
        if (s->id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const tfi_act *tfi_step_find(const tfi_step *s, tf_action_type type, int stage, int microbatch)
{
    if (stage < 0 || stage > TFI_MAX_INDEX || microbatch < 0 || microbatch > TFI_MAX_INDEX)
        return NULL;
    const tf_action want = {.type = type, .stage = stage, .microbatch = microbatch};
    int64_t key = action_key(&want);
    int lo = 0, hi = s->n_acts - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const tfi_act *a = &s->acts[s->by_key[mid]];
        int64_t here = action_key(&a->a);
        if (here == key)
            return a;
        if (here < key)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}
