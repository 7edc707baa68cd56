/* profile.c - tf-exec --profile-out: measures every action of the schedule
 * unfrozen and fully frozen and writes a profile tf-plan reads (see
 * exec.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_internal.h"
#include "tf/profile.h"

/* Compute times of every action: S samples each, unfrozen and frozen. */
typedef struct samples {
    int n_actions, steps;
    double *full, *frozen; /* [action * steps + k] */
} samples;

/* Warms up, then alternates unfrozen and fully frozen steps so that slow
 * drifts (frequency, other load) affect both measurements alike. */
static int measure(tfx_exec_run *r, samples *t, tf_error *err)
{
    int rc = 0;
    const tfx_model_layout *l = tfx_pipeline_layout(r->p);
    const size_t mask_bytes = (size_t)r->microbatches * l->n_tensors;
    unsigned char *all_frozen = NULL;
    TFX_CALLOC(all_frozen, mask_bytes);
    memset(all_frozen, 1, mask_bytes);
    long step = 0;
    tfx_step_result res;
    for (int w = 0; w < r->o->profile_warmup; w++, step++)
        TFX_TRY(tfx_exec_run_step(r, step, NULL, &res, err));
    for (int k = 0; k < t->steps; k++) {
        for (int f = 0; f < 2; f++, step++) {
            TFX_TRY(tfx_exec_run_step(r, step, f ? all_frozen : NULL, &res, err));
            const double *ms = tfx_pipeline_action_ms(r->p);
            for (int i = 0; i < t->n_actions; i++)
                (f ? t->frozen : t->full)[(size_t)i * t->steps + k] = ms[i];
        }
    }
fail:
    free(all_frozen);
    return rc;
}

/* Per action: the median full and frozen time.  F and I do not depend on
 * freezing, so all 2S samples count for them. */
static int action_medians(const tf_schedule *s, const samples *t, tf_profile *prof,
                          tf_error *err)
{
    int rc = 0;
    const int S = t->steps;
    double *sample = NULL;
    TFX_CALLOC(sample, 2 * S);
    TFX_CALLOC(prof->overrides, s->n_actions);
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        tf_action_time *ov = &prof->overrides[prof->n_overrides++];
        ov->type = a->type;
        ov->stage = a->stage;
        ov->microbatch = a->microbatch;
        int c = 0;
        for (int k = 0; k < S; k++) {
            sample[c++] = t->full[(size_t)i * S + k];
            if (a->type == TF_ACT_F || a->type == TF_ACT_I)
                sample[c++] = t->frozen[(size_t)i * S + k];
        }
        ov->ms = tfx_exec_median(sample, c);
        ov->frozen_ms = -1.0;
        if (a->type == TF_ACT_B || a->type == TF_ACT_W) {
            for (int k = 0; k < S; k++)
                sample[k] = t->frozen[(size_t)i * S + k];
            /* Noise can make a frozen median exceed the full one; never let it. */
            ov->frozen_ms = fmin(tfx_exec_median(sample, S), ov->ms);
        }
    }
fail:
    free(sample);
    return rc;
}

/* Mean action times of one stage, by kind. */
typedef struct stage_sums {
    double f, b, b_frozen, i, w, w_frozen;
    int nf, nb, ni, nw;
} stage_sums;

static void add_action(stage_sums *sum, const tf_action_time *ov)
{
    switch (ov->type) {
    case TF_ACT_F: sum->f += ov->ms; sum->nf++; break;
    case TF_ACT_B: sum->b += ov->ms; sum->b_frozen += ov->frozen_ms; sum->nb++; break;
    case TF_ACT_I: sum->i += ov->ms; sum->ni++; break;
    case TF_ACT_W: sum->w += ov->ms; sum->w_frozen += ov->frozen_ms; sum->nw++; break;
    }
}

static void stage_means(const stage_sums *sum, tf_stage_times *t)
{
    t->forward_ms = sum->nf ? sum->f / sum->nf : 0.0;
    t->backward_input_ms = sum->ni ? sum->i / sum->ni : 0.0;
    t->backward_weight_ms = sum->nw ? sum->w / sum->nw : 0.0;
    t->backward_weight_frozen_ms = sum->nw ? sum->w_frozen / sum->nw : 0.0;
    if (sum->nb) {
        t->backward_ms = sum->b / sum->nb;
        t->backward_frozen_ms = sum->b_frozen / sum->nb;
    } else { /* split stage: a full backward is I + W */
        t->backward_ms = t->backward_input_ms + t->backward_weight_ms;
        t->backward_frozen_ms = t->backward_input_ms + t->backward_weight_frozen_ms;
    }
}

/* The per-stage part of the profile from its per-action times, one line
 * each on the run's output. */
static int stage_times(const tfx_exec_run *r, tf_profile *prof, tf_error *err)
{
    int rc = 0;
    const tf_schedule *s = &r->sched;
    stage_sums *sums = NULL;
    TFX_CALLOC(sums, s->stages);
    TFX_CALLOC(prof->max_freeze_ratio, s->stages);
    TFX_CALLOC(prof->stages, s->stages);
    for (int i = 0; i < prof->n_overrides; i++)
        add_action(&sums[prof->overrides[i].stage], &prof->overrides[i]);
    for (int st = 0; st < s->stages; st++) {
        tf_stage_times *t = &prof->stages[st];
        stage_means(&sums[st], t);
        t->parameters = tfx_model_parameter_count(tfx_pipeline_layout(r->p), st);
        prof->max_freeze_ratio[st] = r->o->max_freeze_ratio;
        fprintf(r->out,
                "  stage %d (rank %d): F %.3f ms, B %.3f ms, B frozen %.3f ms%s, %.0f "
                "parameters\n",
                st, s->stage_rank[st], t->forward_ms, t->backward_ms, t->backward_frozen_ms,
                sums[st].ni ? " (split I/W)" : "", t->parameters);
    }
fail:
    free(sums);
    return rc;
}

static int check_options(const tfx_exec_options *o, tf_error *err)
{
    if (o->profile_steps < 1 || o->profile_warmup < 0)
        return tf_fail(err, TF_EINVAL, "--profile-steps %d / --profile-warmup %d: need >= 1 / >= 0",
                       o->profile_steps, o->profile_warmup);
    if (!(o->max_freeze_ratio >= 0.0 && o->max_freeze_ratio <= 1.0))
        return tf_fail(err, TF_EINVAL, "--max-freeze-ratio %g: must be in [0, 1]",
                       o->max_freeze_ratio);
    return 0;
}

int tfx_exec_profile(const tfx_exec_options *o, tf_error *err)
{
    int rc = 0;
    tfx_exec_run r = {0};
    tf_profile prof = {0};
    samples t = {0};
    TFX_TRY(check_options(o, err));
    TFX_TRY(tfx_exec_options_schedule(o, &r.sched, err));
    TFX_TRY(tfx_exec_run_open(&r, o, err));
    t.n_actions = r.sched.n_actions;
    t.steps = o->profile_steps;
    TFX_CALLOC(t.full, (size_t)t.n_actions * t.steps);
    TFX_CALLOC(t.frozen, (size_t)t.n_actions * t.steps);

    tfx_exec_run_describe(&r, "profiling");
    fprintf(r.out, " (%s backend)\n", o->backend);
    TFX_TRY(measure(&r, &t, err));
    prof.microbatch_tokens = r.tokens;
    prof.p2p_ms = 0.0; /* in-process copies are negligible */
    TFX_TRY(tf_schedule_copy(&r.sched, &prof.schedule) < 0
                ? tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__)
                : 0);
    TFX_TRY(action_medians(&r.sched, &t, &prof, err));
    TFX_TRY(stage_times(&r, &prof, err));
    /* Launched: every process has every action's times; process 0 writes. */
    if (!tfx_exec_launched(o) || o->launch.rank == 0) {
        TFX_TRY(tf_profile_save(&prof, o->profile_out, err));
        fprintf(r.out, "wrote %s (%d actions, median of %d %s each, unfrozen and frozen)\n",
                o->profile_out, t.n_actions, t.steps, tfx_plural(t.steps, "step", "steps"));
    }
fail:
    tfx_exec_run_close(&r, rc, err);
    free(t.full);
    free(t.frozen);
    tf_profile_free(&prof);
    return rc;
}
