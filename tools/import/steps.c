/* steps.c - cutting one rank's trace into steps of pipeline actions. */
#include "steps.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    PP_COMPUTE,   /* F, B, I, W */
    PP_SEND_F,
    PP_RECV_F,
    PP_SEND_B,
    PP_RECV_B,
    PP_STAGE_ONLY, /* UNSHARD, RESHARD, REDUCE_GRAD: no microbatch */
    PP_OVERLAP     /* (aFm;bBn)OVERLAP_F_B */
} pp_kind;

typedef struct pp_name {
    pp_kind kind;
    tf_action a;
    tf_action b;           /* PP_OVERLAP: the pair's backward (a its forward) */
} pp_name;

/* Reads 1-6 digits at *p into *value (<= TFI_MAX_INDEX); advances *p. */
static int read_index(const char **p, int *value)
{
    const char *c = *p;
    long v = 0;
    while (*c >= '0' && *c <= '9' && c - *p < 6)
        v = v * 10 + (*c++ - '0');
    if (c == *p || (*c >= '0' && *c <= '9') || v > TFI_MAX_INDEX)
        return -1;
    *value = (int)v;
    *p = c;
    return 0;
}

/* Parses what follows "PP:" as _Action.__repr__ writes it.  Returns 0, or
 * -1 when the name is not one of the runtime's. */
static int parse_pp(const char *name, pp_name *out)
{
    static const struct { const char *word; pp_kind kind; } words[] = {
        {"SEND_F", PP_SEND_F}, {"RECV_F", PP_RECV_F}, {"SEND_B", PP_SEND_B},
        {"RECV_B", PP_RECV_B}, {"UNSHARD", PP_STAGE_ONLY}, {"RESHARD", PP_STAGE_ONLY},
        {"REDUCE_GRAD", PP_STAGE_ONLY}, {"F", PP_COMPUTE}, {"B", PP_COMPUTE},
        {"I", PP_COMPUTE}, {"W", PP_COMPUTE}};
    const char *p = name + 3;
    size_t n = strlen(p);
    memset(out, 0, sizeof *out);
    out->a.rank = out->b.rank = -1;
    if (p[0] == '(') {
        tf_action pair[2];
        int count;
        if (tf_cell_parse(p, pair, &count, NULL) || count != 2 ||
            pair[0].stage > TFI_MAX_INDEX || pair[0].microbatch > TFI_MAX_INDEX ||
            pair[1].stage > TFI_MAX_INDEX || pair[1].microbatch > TFI_MAX_INDEX)
            return -1;
        out->kind = PP_OVERLAP;
        out->a = pair[0];
        out->b = pair[1];
        return 0;
    }
    (void)n;
    if (read_index(&p, &out->a.stage))
        return -1;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t len = strlen(words[w].word);
        if (strncmp(p, words[w].word, len) != 0)
            continue;
        p += len;
        out->kind = words[w].kind;
        if (out->kind == PP_COMPUTE)
            tf_action_type_parse(words[w].word[0], &out->a.type);
        if (out->kind == PP_STAGE_ONLY)
            return *p ? -1 : 0;
        return read_index(&p, &out->a.microbatch) || *p ? -1 : 0;
    }
    return -1;
}

/* The highest stage an event proves to exist: its own, or the next one it
 * sends forward to or receives gradients from. */
static int stage_named(const pp_name *pp)
{
    int next = pp->kind == PP_SEND_F || pp->kind == PP_RECV_B;
    if (pp->kind == PP_OVERLAP && pp->b.stage > pp->a.stage)
        return pp->b.stage;
    return pp->a.stage + next;
}

/* Index of the step whose span holds time x, or -1. */
static int step_at(const tfi_rank_run *r, double x)
{
    int lo = 0, hi = r->n_steps - 1, found = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (r->steps[mid].start <= x) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    if (found >= 0 && x > r->steps[found].end)
        return -1;
    return found;
}

static int pp_on_side(const tfi_span *s, int gpu)
{
    return s->kind == TFI_SPAN_PP && s->gpu == gpu;
}

/* The step spans of one side into r->steps; 0 found is not an error. */
static int collect_steps(const tfi_trace *t, int gpu, tfi_rank_run *r, tf_error *err)
{
    for (int i = 0; i < t->n_spans; i++) {
        const tfi_span *s = &t->spans[i];
        if (s->kind != TFI_SPAN_STEP || s->gpu != gpu)
            continue;
        for (int k = 0; k < r->n_steps; k++)
            if (r->steps[k].id == s->step)
                return tf_fail(err, TF_EINVAL, "%s: event %d: ProfilerStep#%ld appears twice",
                               t->path, s->index, s->step);
        tfi_step *st = &r->steps[r->n_steps++];
        st->id = s->step;
        st->start = s->start;
        st->end = s->end;
    }
    return 0;
}

/* r->steps from the trace's ProfilerStep spans, or one step for all. */
static int make_steps(const tfi_trace *t, tfi_rank_run *r, tf_error *err)
{
    r->steps = calloc((size_t)t->n_spans + 1, sizeof *r->steps);
    if (!r->steps)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", t->path);
    int rc = collect_steps(t, r->gpu, r, err);
    if (rc == 0 && r->n_steps == 0 && r->gpu)
        rc = collect_steps(t, 0, r, err);
    if (rc)
        return rc;
    if (r->n_steps == 0) {
        r->steps[0] = (tfi_step){.id = -1, .start = -INFINITY, .end = INFINITY};
        r->n_steps = 1;
    }
    return 0;
}

static tfi_act *find_act(const tfi_step *s, tf_action_type type, int stage, int microbatch)
{
    for (int i = 0; i < s->n_acts; i++) {
        tfi_act *a = &s->acts[i];
        if (a->a.type == type && a->a.stage == stage && a->a.microbatch == microbatch)
            return a;
    }
    return NULL;
}

static int fail_name(const tfi_trace *t, const tfi_span *s, const char *why, tf_error *err)
{
    return tf_fail(err, TF_EINVAL, "%s: event %d \"%s\": %s", t->path, s->index, s->name, why);
}

/* Checks every PP: name of the side, notes the highest stage named, and
 * counts the compute actions of each step (into n_acts). */
static int scan_names(const tfi_trace *t, tfi_rank_run *r, int *computes, tf_error *err)
{
    *computes = 0;
    for (int i = 0; i < t->n_spans; i++) {
        const tfi_span *s = &t->spans[i];
        pp_name pp;
        if (!pp_on_side(s, r->gpu))
            continue;
        if (parse_pp(s->name, &pp))
            return fail_name(t, s, "not an action name of PyTorch's pipelining runtime "
                             "(expected PP:<stage><F|B|I|W><microbatch>, e.g. PP:0F3, or a pair "
                             "PP:(0F7;7B3)OVERLAP_F_B)", err);
        if (stage_named(&pp) > r->max_stage_named)
            r->max_stage_named = stage_named(&pp);
        if (pp.kind != PP_COMPUTE && pp.kind != PP_OVERLAP)
            continue;
        int k = step_at(r, s->start);
        if (k < 0)
            r->outside++;
        else
            r->steps[k].n_acts += pp.kind == PP_OVERLAP ? 2 : 1, (*computes)++;
    }
    return 0;
}

/* Appends action a of span s (one of a pair's two, or alone) to step st;
 * rejects a repeat. */
static int add_act(const tfi_trace *t, const tfi_span *s, tfi_step *st, const tf_action *a,
                   tf_error *err)
{
    const tfi_act *seen = tfi_step_find(st, a->type, a->stage, a->microbatch);
    if (seen && st->id < 0)
        return fail_name(t, s, "the action appears twice, and the trace has no "
                         "ProfilerStep#N spans to tell steps apart (profile with a "
                         "torch.profiler schedule, or pass one step's trace)", err);
    if (seen) {
        char why[128], cell[32];
        snprintf(why, sizeof why, "the action %s appears twice in ProfilerStep#%ld",
                 tf_action_format(a, cell), st->id);
        return fail_name(t, s, why, err);
    }
    st->acts[st->n_acts++] = (tfi_act){*a, s->start, s->end, s->start, s->name};
    return 0;
}

/* Fills each step's actions in start order; rejects repeats. */
static int fill_actions(const tfi_trace *t, tfi_rank_run *r, tf_error *err)
{
    for (int k = 0; k < r->n_steps; k++) {
        r->steps[k].acts = calloc((size_t)r->steps[k].n_acts + 1, sizeof(tfi_act));
        if (!r->steps[k].acts)
            return tf_fail(err, TF_ENOMEM, "%s: out of memory", t->path);
        r->steps[k].n_acts = 0;
    }
    for (int i = 0; i < t->n_spans; i++) {
        const tfi_span *s = &t->spans[i];
        pp_name pp;
        int k = pp_on_side(s, r->gpu) ? step_at(r, s->start) : -1;
        if (k < 0 || parse_pp(s->name, &pp) || (pp.kind != PP_COMPUTE && pp.kind != PP_OVERLAP))
            continue;
        tfi_step *st = &r->steps[k];
        int rc = add_act(t, s, st, &pp.a, err);
        if (rc == 0 && pp.kind == PP_OVERLAP)
            rc = add_act(t, s, st, &pp.b, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* When the receive posted in RECV span `recv` ended: the latest end of the
 * receive events that started inside it, or -INFINITY. */
static double arrival(const tfi_trace *t, const tfi_span *recv)
{
    double latest = -INFINITY;
    for (const tfi_span *s = recv + 1; s < t->spans + t->n_spans && s->start <= recv->end; s++)
        if (s->kind == TFI_SPAN_RECV && s->end > latest)
            latest = s->end;
    return latest;
}

/* CPU side: starts each compute action that waited for a receive when the
 * data arrived (see steps.h). */
static void trim_waits(const tfi_trace *t, tfi_rank_run *r)
{
    for (int i = 0; i < t->n_spans; i++) {
        const tfi_span *s = &t->spans[i];
        pp_name pp;
        int k = pp_on_side(s, 0) ? step_at(r, s->start) : -1;
        if (k < 0 || parse_pp(s->name, &pp) || (pp.kind != PP_RECV_F && pp.kind != PP_RECV_B))
            continue;
        const tfi_step *st = &r->steps[k];
        tf_action_type want = pp.kind == PP_RECV_F ? TF_ACT_F : TF_ACT_B;
        tfi_act *a = find_act(st, want, pp.a.stage, pp.a.microbatch);
        if (!a && want == TF_ACT_B)
            a = find_act(st, TF_ACT_I, pp.a.stage, pp.a.microbatch);
        double when = arrival(t, s);
        if (!a || !(when > a->start))
            continue;
        a->compute_start = when < a->end ? when : a->end;
        r->wait_trimmed++;
    }
    /* A pair computes once the inputs of both halves are in. */
    for (int k = 0; k < r->n_steps; k++)
        for (int i = 0; i + 1 < r->steps[k].n_acts; i++) {
            tfi_act *first = &r->steps[k].acts[i], *second = first + 1;
            if (first->a.pair != TF_PAIR_FIRST)
                continue;
            double start = fmax(first->compute_start, second->compute_start);
            first->compute_start = second->compute_start = start;
        }
}

int tfi_rank_run_build(const tfi_trace *t, tfi_rank_run *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    out->trace = t;
    out->max_stage_named = -1;
    for (int i = 0; i < t->n_spans && !out->gpu; i++)
        out->gpu = pp_on_side(&t->spans[i], 1);
    int computes = 0, rc = make_steps(t, out, err);
    if (rc == 0)
        rc = scan_names(t, out, &computes, err);
    if (rc == 0 && out->max_stage_named < 0)
        rc = tf_fail(err, TF_EINVAL,
                     "%s: no PP: events: not a trace of PyTorch's pipelining runtime, which "
                     "annotates every action as PP:<stage><type><microbatch> (e.g. PP:0F3)",
                     t->path);
    if (rc == 0 && computes == 0)
        rc = tf_fail(err, TF_EINVAL, "%s: no PP: compute action (F, B, I or W) inside a "
                     "ProfilerStep#N span", t->path);
    if (rc == 0)
        rc = fill_actions(t, out, err);
    if (rc) {
        tfi_rank_run_free(out);
        return rc;
    }
    if (!out->gpu)
        trim_waits(t, out);
    return 0;
}

void tfi_rank_run_free(tfi_rank_run *r)
{
    for (int k = 0; k < r->n_steps; k++)
        free(r->steps[k].acts);
    free(r->steps);
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

const tfi_step *tfi_rank_run_step(const tfi_rank_run *r, long id)
{
    for (int k = 0; k < r->n_steps; k++)
        if (r->steps[k].id == id)
            return &r->steps[k];
    return NULL;
}

const tfi_act *tfi_step_find(const tfi_step *s, tf_action_type type, int stage, int microbatch)
{
    return find_act(s, type, stage, microbatch);
}
