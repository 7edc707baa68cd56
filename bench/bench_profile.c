/* bench_profile.c - synthetic profiles shared by the benchmarks. */
#include "bench_profile.h"

#include <stdlib.h>
#include <string.h>

#include "tf/memory.h"
#include "tf/planner.h"
#include "tf/schedule.h"
#include "tf/util.h"

/* A linear congruential generator: uniform in [0, 1), same on every
 * platform.  The sequence of draws fixes the profile, so the order of calls
 * below must not change (bench-plan's published figures depend on it). */
static double jitter(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (double)(*state >> 8) / (double)(1u << 24);
}

static int is_interleaved(const char *name)
{
    return strcmp(name, "Interleaved1F1B") == 0 || strcmp(name, "InterleavedZeroBubble") == 0;
}

int bench_microbatches_for(const char *schedule, int ranks, int stages_per_rank, int actions,
                           int *microbatches, tf_error *err)
{
    const char *name = tf_schedule_canonical_name(schedule);
    if (!name)
        return tf_fail(err, TF_EINVAL, "schedule \"%s\" is not built in (built in: %s)",
                       schedule, tf_schedule_builtin_names());
    if (ranks < 1 || stages_per_rank < 1)
        return tf_fail(err, TF_EINVAL, "%s: ranks = %d and stages_per_rank = %d must be >= 1",
                       name, ranks, stages_per_rank);
    long per_microbatch =
        (long)ranks * stages_per_rank * (tf_schedule_splits_backward(name) ? 3 : 2);
    long m = actions / per_microbatch;
    if (is_interleaved(name) && m > ranks)
        m -= m % ranks;
    if (m < 1)
        return tf_fail(err, TF_EINVAL,
                       "%s: %d %s fewer than one microbatch (%ld actions on %d %s x %d %s)",
                       name, actions, actions == 1 ? "action is" : "actions are", per_microbatch,
                       ranks, tf_plural(ranks, "rank", "ranks"), stages_per_rank,
                       tf_plural(stages_per_rank, "stage", "stages"));
    *microbatches = (int)m;
    return 0;
}

int bench_make_profile(const char *schedule, int ranks, int stages_per_rank, int microbatches,
                       tf_profile *p, tf_error *err)
{
    memset(p, 0, sizeof *p);
    int rc = tf_schedule_build(schedule, ranks, stages_per_rank, microbatches, &p->schedule, err);
    if (rc)
        return rc;
    const int n = p->schedule.n_actions, stages = p->schedule.stages;
    p->stages = calloc((size_t)stages, sizeof *p->stages);
    p->max_freeze_ratio = calloc((size_t)stages, sizeof *p->max_freeze_ratio);
    p->overrides = calloc((size_t)n, sizeof *p->overrides);
    if (!p->stages || !p->max_freeze_ratio || !p->overrides) {
        tf_profile_free(p);
        return tf_fail(err, TF_ENOMEM, "out of memory building a %d-action profile", n);
    }
    p->microbatch_tokens = 8192;
    unsigned seed = 42;
    for (int s = 0; s < stages; s++) {
        tf_stage_times *st = &p->stages[s];
        st->forward_ms = 14 + 2 * jitter(&seed);
        st->backward_ms = 40 + 6 * jitter(&seed);
        st->backward_frozen_ms = 0.45 * st->backward_ms;
        st->backward_input_ms = 0.5 * st->backward_ms;
        st->backward_weight_ms = 0.5 * st->backward_ms;
        st->backward_weight_frozen_ms = 0.01 * st->backward_weight_ms;
        p->max_freeze_ratio[s] = 0.8;
    }
    for (int i = 0; i < n; i++) {
        const tf_action *a = &p->schedule.actions[i];
        const tf_stage_times *st = &p->stages[a->stage];
        tf_action_time *o = &p->overrides[p->n_overrides++];
        o->type = a->type;
        o->stage = a->stage;
        o->microbatch = a->microbatch;
        double base = a->type == TF_ACT_F   ? st->forward_ms
                      : a->type == TF_ACT_B ? st->backward_ms
                      : a->type == TF_ACT_I ? st->backward_input_ms
                                            : st->backward_weight_ms;
        o->ms = base * (0.95 + 0.1 * jitter(&seed));
        if (a->type == TF_ACT_B)
            o->frozen_ms = o->ms * (0.4 + 0.1 * jitter(&seed));
        else if (a->type == TF_ACT_W)
            o->frozen_ms = o->ms * (0.01 + 0.04 * jitter(&seed));
        else
            o->frozen_ms = -1;
    }
    return 0;
}

void bench_stage_times_only(tf_profile *p)
{
    free(p->overrides);
    p->overrides = NULL;
    p->n_overrides = 0;
}

/* The largest peak over the ranks with nothing frozen or recomputed. */
static int unfrozen_peak(const tf_profile *p, double *peak, tf_error *err)
{
    tf_memory_model m;
    int rc = tf_memory_model_build(&p->schedule, p->memory, NULL, &m, err);
    tf_memory_peak *peaks = rc ? NULL : malloc(((size_t)m.ranks + 1) * sizeof *peaks);
    if (!rc && !peaks)
        rc = tf_fail(err, TF_ENOMEM, "out of memory counting the unfrozen peaks");
    *peak = 0.0;
    if (!rc) {
        tf_memory_peaks(&m, NULL, NULL, peaks);
        for (int r = 0; r < m.ranks; r++)
            *peak = peaks[r].bytes > *peak ? peaks[r].bytes : *peak;
    }
    free(peaks);
    tf_memory_model_free(&m); /* zeroed when the build failed */
    return rc;
}

int bench_add_memory(tf_profile *p, double share, tf_error *err)
{
    const double gib = 1073741824.0;
    const int stages = p->schedule.stages, ranks = p->schedule.ranks;
    p->memory = calloc((size_t)stages + 1, sizeof *p->memory);
    if (!p->memory)
        return tf_fail(err, TF_ENOMEM, "out of memory giving the profile memory");
    for (int s = 0; s < stages; s++)
        p->memory[s] = (tf_stage_memory){.static_bytes = 20 * gib,
                                         .activation_bytes = 2 * gib,
                                         .activation_frozen_bytes = 1.2 * gib,
                                         .weight_grad_bytes = 1 * gib,
                                         .checkpoint_bytes = 0.25 * gib,
                                         .recompute_ms = p->stages[s].forward_ms,
                                         .recomputes = 1};
    double floor = 0.0, peak = 0.0;
    int rc = unfrozen_peak(p, &peak, err);
    if (!rc)
        rc = tf_plan_memory_floor(p, NULL, &floor, err);
    if (!rc && !(p->memory_limit = calloc((size_t)ranks + 1, sizeof *p->memory_limit)))
        rc = tf_fail(err, TF_ENOMEM, "out of memory giving the profile memory");
    for (int r = 0; r < ranks && !rc; r++)
        p->memory_limit[r] = floor + share * (peak - floor);
    if (rc) {
        free(p->memory);
        p->memory = NULL;
    }
    return rc;
}

/* The rows of rank r (in m) that f and q leave at its limit. */
static int rank_rows_at_limit(const tf_memory_model *m, int r, const double *f,
                              const double *q, double limit, int *rows)
{
    double live = m->static_bytes[r];
    int at_limit = 0;
    for (int k = m->event_offset[r]; k < m->event_offset[r + 1]; k++) {
        live += tf_memory_event_delta(&m->events[k], f, q);
        if (!tf_memory_event_can_rise(&m->events[k]))
            continue;
        ++*rows;
        at_limit += live >= limit * (1.0 - 1e-7);
    }
    return at_limit;
}

int bench_count_memory_rows(const tf_plan *plan, bench_memory_rows *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    if (!plan->memory || !plan->memory_limit)
        return 0;
    const int n = plan->schedule.n_actions;
    double *f = calloc((size_t)n + 1, sizeof *f), *q = calloc((size_t)n + 1, sizeof *q);
    tf_memory_options o = {plan->freeze_saves_memory, plan->max_freeze_ratio};
    tf_memory_model m = {0};
    int rc = !f || !q ? tf_fail(err, TF_ENOMEM, "out of memory counting memory rows")
                      : tf_memory_model_build(&plan->schedule, plan->memory, &o, &m, err);
    for (int i = 0; i < n && !rc; i++) {
        f[i] = plan->actions[i].freeze_ratio;
        q[i] = plan->actions[i].recompute_ratio;
    }
    /* A limit that the unfrozen peaks meet adds no rows (planner.md). */
    const int binds = !rc && tf_memory_first_over(&m, plan->memory_limit) >= 0;
    for (int r = 0; r < m.ranks && binds; r++) {
        int k = rank_rows_at_limit(&m, r, f, q, plan->memory_limit[r], &out->rows);
        out->at_limit += k;
        out->most_on_rank = k > out->most_on_rank ? k : out->most_on_rank;
    }
    tf_memory_model_free(&m);
    free(f);
    free(q);
    return rc;
}
