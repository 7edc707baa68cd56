/* profile_samples.c - a profile from measured samples (see
 * tf/profile_samples.h). */
#include "tf/profile_samples.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/util.h"

void tf_sample_set_init(tf_sample_set *in)
{
    memset(in, 0, sizeof *in);
    in->max_freeze_ratio = TF_DEFAULT_CAP;
}

double tf_sample_statistic(double *x, int n)
{
    return tf_median(x, n);
}

/* Is action i the first of a pair timed as one span? */
static int span_start(const tf_sample_set *in, int i)
{
    const tf_schedule *s = in->schedule;
    return in->pair_spans && s->actions[i].pair == TF_PAIR_FIRST && i + 1 < s->n_actions;
}

/* Is action i timed on its own (not inside a pair span)? */
static int timed_alone(const tf_sample_set *in, int i)
{
    return !in->pair_spans || in->schedule->actions[i].pair == TF_PAIR_NONE;
}

/* Does what action i's samples time get shorter when frozen: a B or a W,
 * or a pair span whose backward is a B? */
static int unit_freezes(const tf_sample_set *in, int i)
{
    const tf_action *a = &in->schedule->actions[i];
    tf_action_type t = span_start(in, i) ? a[1].type : a->type;
    return t == TF_ACT_B || t == TF_ACT_W;
}

/* The name of what action i's samples time, into buf[TF_CELL_MAX]. */
static const char *unit_name(const tf_sample_set *in, int i, char *buf)
{
    const tf_action *a = &in->schedule->actions[i];
    return span_start(in, i) ? tf_pair_format(a, a + 1, buf) : tf_action_format(a, buf);
}

/* The fields of in other than the samples themselves. */
static int check_set(const tf_sample_set *in, tf_error *err)
{
    if (!in->schedule)
        return tf_fail(err, TF_EINVAL, "sample set: schedule is NULL");
    if (!in->samples && in->n > 0)
        return tf_fail(err, TF_EINVAL, "sample set: samples is NULL and n is %zu", in->n);
    if (!(in->max_freeze_ratio >= 0 && in->max_freeze_ratio <= 1))
        return tf_fail(err, TF_EINVAL, "sample set: max_freeze_ratio = %g: must be in [0, 1]",
                       in->max_freeze_ratio);
    return 0;
}

static int check_sample(const tf_sample_set *in, size_t k, tf_error *err)
{
    const tf_schedule *s = in->schedule;
    const tf_sample *x = &in->samples[k];
    char name[TF_CELL_MAX];
    if (x->action < 0 || x->action >= s->n_actions)
        return tf_fail(err, TF_EINVAL, "sample %zu: action %d is not one of schedule %s's %d "
                       "actions", k, x->action, s->name, s->n_actions);
    if (!isfinite(x->ms) || x->ms < 0)
        return tf_fail(err, TF_EINVAL, "sample %zu (%s): ms %g is not a duration (finite, >= 0)",
                       k, tf_action_format(&s->actions[x->action], name), x->ms);
    if (in->pair_spans && s->actions[x->action].pair == TF_PAIR_SECOND)
        return tf_fail(err, TF_EINVAL, "sample %zu (%s): the second action of an overlapped pair "
                       "timed as one span; its samples go on the pair's first action", k,
                       tf_action_format(&s->actions[x->action], name));
    return 0;
}

/* The samples in one list per action and kind: list 2i holds action i's
 * unfrozen samples (and its frozen ones where freezing does not change
 * it), list 2i + 1 its frozen ones. */
typedef struct sample_lists {
    size_t *offset; /* 2n + 1 */
    double *value;
} sample_lists;

static int list_of(const tf_sample_set *in, const tf_sample *x)
{
    return 2 * x->action + (x->frozen && unit_freezes(in, x->action));
}

static int sort_samples(const tf_sample_set *in, sample_lists *l, tf_error *err)
{
    const tf_sample *samples = in->samples;
    const size_t n = in->n, lists = 2 * (size_t)in->schedule->n_actions;
    l->offset = calloc(lists + 1, sizeof *l->offset);
    l->value = malloc((n + 1) * sizeof *l->value);
    size_t *fill = malloc((lists + 1) * sizeof *fill);
    int rc = 0;
    if (!l->offset || !l->value || !fill)
        rc = tf_fail(err, TF_ENOMEM, "out of memory sorting %zu samples", n);
    for (size_t k = 0; rc == 0 && k < n; k++)
        rc = check_sample(in, k, err);
    if (rc == 0) {
        for (size_t k = 0; k < n; k++)
            l->offset[list_of(in, &samples[k]) + 1]++;
        for (size_t j = 0; j < lists; j++)
            l->offset[j + 1] += l->offset[j];
        memcpy(fill, l->offset, lists * sizeof *fill);
        for (size_t k = 0; k < n; k++)
            l->value[fill[list_of(in, &samples[k])]++] = samples[k].ms;
    }
    free(fill);
    return rc;
}

/* The statistic of list j, or -1 when it is empty. */
static double list_statistic(const sample_lists *l, int j)
{
    size_t from = l->offset[j], count = l->offset[j + 1] - from;
    return count ? tf_sample_statistic(l->value + from, (int)count) : -1.0;
}

/* Per action: ms[i] and frozen[i] (-1 where freezing does not apply or,
 * for a pair span, was not measured); the second action of a pair span
 * gets -1 for both. */
static int action_figures(const tf_sample_set *in, const sample_lists *l, double *ms,
                          double *frozen, tf_sample_report *report, tf_error *err)
{
    const tf_schedule *s = in->schedule;
    char name[TF_CELL_MAX];
    for (int i = 0; i < s->n_actions; i++) {
        ms[i] = frozen[i] = -1.0;
        if (in->pair_spans && s->actions[i].pair == TF_PAIR_SECOND)
            continue;
        ms[i] = list_statistic(l, 2 * i);
        if (ms[i] < 0)
            return tf_fail(err, TF_EINVAL, "%s has no unfrozen sample", unit_name(in, i, name));
        if (ms[i] > TF_MAX_DURATION_MS)
            return tf_fail(err, TF_EINVAL, "%s takes %g ms (median), more than the planner "
                           "accepts (%g ms)", unit_name(in, i, name), ms[i], TF_MAX_DURATION_MS);
        if (!unit_freezes(in, i))
            continue;
        frozen[i] = list_statistic(l, 2 * i + 1);
        if (frozen[i] > ms[i]) {
            frozen[i] = ms[i];
            report->capped++;
        } else if (frozen[i] < 0) {
            report->defaulted++;
            if (!span_start(in, i))
                frozen[i] = ms[i] * (s->actions[i].type == TF_ACT_B ? TF_DEFAULT_B_FROZEN
                                                                    : TF_DEFAULT_W_FROZEN);
        }
    }
    return 0;
}

/* The actions timed alone, grouped by (stage, type): group g = 4 x stage +
 * type holds member[first[g] .. first[g + 1] - 1]. */
typedef struct stage_groups {
    int *first;  /* 4 x stages + 1 */
    int *member; /* n_actions */
} stage_groups;

static int group_actions(const tf_sample_set *in, stage_groups *g, tf_error *err)
{
    const tf_schedule *s = in->schedule;
    const size_t groups = 4 * (size_t)s->stages;
    g->first = calloc(groups + 1, sizeof *g->first);
    g->member = malloc(((size_t)s->n_actions + 1) * sizeof *g->member);
    int *fill = malloc((groups + 1) * sizeof *fill);
    if (!g->first || !g->member || !fill) {
        free(fill);
        return tf_fail(err, TF_ENOMEM, "out of memory grouping %d actions", s->n_actions);
    }
    for (int i = 0; i < s->n_actions; i++)
        if (timed_alone(in, i))
            g->first[4 * s->actions[i].stage + (int)s->actions[i].type + 1]++;
    for (size_t k = 0; k < groups; k++)
        g->first[k + 1] += g->first[k];
    memcpy(fill, g->first, groups * sizeof *fill);
    for (int i = 0; i < s->n_actions; i++)
        if (timed_alone(in, i))
            g->member[fill[4 * s->actions[i].stage + (int)s->actions[i].type]++] = i;
    free(fill);
    return 0;
}

/* The statistic of from[i] over the actions of one stage and type timed
 * alone; 0 when there are none.  scratch holds n_actions values. */
static double stage_statistic(const stage_groups *g, const double *from, int stage,
                              tf_action_type type, double *scratch)
{
    const int k = 4 * stage + (int)type;
    int count = 0;
    for (int j = g->first[k]; j < g->first[k + 1]; j++)
        scratch[count++] = from[g->member[j]];
    return tf_sample_statistic(scratch, count);
}

/* Stage k's times from its actions' figures.  A stage without a full
 * backward of its own gets I + W for it, as a full backward is those two
 * (the planner needs it to switch the stage to full backwards, and to
 * split a pair span). */
static void stage_figures(const stage_groups *g, const double *ms, const double *frozen, int k,
                          double *scratch, tf_stage_times *st, tf_sample_report *report)
{
    st->forward_ms = stage_statistic(g, ms, k, TF_ACT_F, scratch);
    st->backward_ms = stage_statistic(g, ms, k, TF_ACT_B, scratch);
    st->backward_frozen_ms = stage_statistic(g, frozen, k, TF_ACT_B, scratch);
    st->backward_input_ms = stage_statistic(g, ms, k, TF_ACT_I, scratch);
    st->backward_weight_ms = stage_statistic(g, ms, k, TF_ACT_W, scratch);
    st->backward_weight_frozen_ms = stage_statistic(g, frozen, k, TF_ACT_W, scratch);
    if (st->backward_ms > 0 || st->backward_input_ms + st->backward_weight_ms <= 0)
        return;
    st->backward_ms = st->backward_input_ms + st->backward_weight_ms;
    st->backward_frozen_ms = st->backward_input_ms + st->backward_weight_frozen_ms;
    report->split_stages++;
}

/* out's overrides and pairs from the per-action figures. */
static void measured_actions(const tf_sample_set *in, const double *ms, const double *frozen,
                             tf_profile *out)
{
    const tf_schedule *s = in->schedule;
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        if (span_start(in, i))
            out->pairs[out->n_pairs++] = (tf_pair_time){*a, s->actions[i + 1], ms[i],
                                                        frozen[i]};
        else if (timed_alone(in, i))
            out->overrides[out->n_overrides++] = (tf_action_time){a->type, a->stage,
                                                                  a->microbatch, ms[i],
                                                                  frozen[i]};
    }
}

static int allocate(const tf_schedule *s, tf_profile *out, tf_error *err)
{
    const size_t n = (size_t)s->n_actions, stages = (size_t)s->stages;
    out->stages = calloc(stages + 1, sizeof *out->stages);
    out->max_freeze_ratio = calloc(stages + 1, sizeof *out->max_freeze_ratio);
    out->overrides = calloc(n + 1, sizeof *out->overrides);
    out->pairs = calloc(n / 2 + 1, sizeof *out->pairs);
    if (!out->stages || !out->max_freeze_ratio || !out->overrides || !out->pairs ||
        tf_schedule_copy(s, &out->schedule) != 0)
        return tf_fail(err, TF_ENOMEM, "out of memory building a profile of %zu actions", n);
    return 0;
}

int tf_profile_from_samples(const tf_sample_set *in, tf_profile *out, tf_sample_report *report,
                            tf_error *err)
{
    tf_sample_report ignored;
    report = report ? report : &ignored;
    memset(report, 0, sizeof *report);
    memset(out, 0, sizeof *out);
    int rc = check_set(in, err);
    if (rc)
        return rc;
    const tf_schedule *s = in->schedule;
    sample_lists l = {0};
    stage_groups g = {0};
    const size_t actions = (size_t)s->n_actions + 1;
    double *ms = malloc(actions * sizeof *ms), *frozen = malloc(actions * sizeof *frozen);
    double *scratch = malloc(actions * sizeof *scratch);
    rc = !ms || !frozen || !scratch
             ? tf_fail(err, TF_ENOMEM, "out of memory building a profile of %d actions",
                       s->n_actions)
             : sort_samples(in, &l, err);
    if (rc == 0)
        rc = action_figures(in, &l, ms, frozen, report, err);
    if (rc == 0)
        rc = group_actions(in, &g, err);
    if (rc == 0)
        rc = allocate(s, out, err);
    for (int k = 0; rc == 0 && k < s->stages; k++) {
        stage_figures(&g, ms, frozen, k, scratch, &out->stages[k], report);
        out->max_freeze_ratio[k] = in->max_freeze_ratio;
    }
    if (rc == 0)
        measured_actions(in, ms, frozen, out);
    else
        tf_profile_free(out);
    free(l.offset);
    free(l.value);
    free(g.first);
    free(g.member);
    free(ms);
    free(frozen);
    free(scratch);
    return rc;
}
