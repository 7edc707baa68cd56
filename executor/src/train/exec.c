/* exec.c - profiling and training runs of tf-exec (see exec.h). */
#include "tfx/exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tf/plan.h"
#include "tf/profile.h"
#include "tf/schedule.h"
#include "tf/util.h"
#include "tfx/checkpoint.h"
#include "tfx/corpus.h"
#include "tfx/runtime.h"

#define BUILTIN_CORPUS_BYTES (1u << 20)

void tfx_exec_options_default(tfx_exec_options *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "cpu";
    o->steps = 60;
    o->warmup = 10;
    o->ramp = 10;
    o->checkpoint_every = 10;
    o->seed = 1;
    o->select = TFX_SELECT_RANDOM;
    tfx_model_config_default(&o->model);
    tfx_adamw_config_default(&o->adamw);
    o->max_freeze_ratio = 0.9;
    o->profile_warmup = 3;
    o->profile_steps = 5;
    o->progress = -1;
    o->fail_rank = -1;
    o->fail_action = -1;
    memset(&o->launch, 0, sizeof o->launch);
    o->launch.world_size = 1;
    o->launch.local_rank = -1;
}

static int launched(const tfx_exec_options *o)
{
    return o->launch.world_size > 1;
}

/* Checks that the launch fits the pipeline: its process count must divide
 * the ranks (`what` names where the ranks came from). */
static int check_launch(const tfx_exec_options *o, const tf_schedule *s, const char *what,
                        tf_error *err)
{
    const tfx_launch_env *e = &o->launch;
    if (!launched(o))
        return 0;
    if (s->ranks % e->world_size != 0)
        return tf_fail(err, TF_EINVAL,
                       "environment %s=%d: %d processes cannot run the %d pipeline ranks of %s "
                       "(start one process per rank, or a number of processes that divides "
                       "the ranks)",
                       e->size_var[0] ? e->size_var : "WORLD_SIZE", e->world_size,
                       e->world_size, s->ranks, what);
    if (o->checkpoint_dir)
        return tf_fail(err, TF_EINVAL,
                       "--checkpoint %s: not supported with one process per rank (%s=%d); run "
                       "in one process to checkpoint",
                       o->checkpoint_dir, e->size_var[0] ? e->size_var : "WORLD_SIZE",
                       e->world_size);
    return 0;
}

/* Where the ranks of a pipeline came from, for messages. */
static void ranks_source(const tfx_exec_options *o, char *buf, size_t size)
{
    if (o->plan_path)
        snprintf(buf, size, "the plan %s", o->plan_path);
    else if (o->ranks)
        snprintf(buf, size, "--ranks %d", o->ranks);
    else
        snprintf(buf, size, "the default --ranks 2");
}

/* Launched processes other than 0 print nothing: their output goes to
 * /dev/null (*null, closed by the caller). */
static int output_stream(const tfx_exec_options *o, FILE **out, FILE **null, tf_error *err)
{
    *null = NULL;
    *out = o->out ? o->out : stdout;
    if (launched(o) && o->launch.rank != 0) {
        *null = fopen("/dev/null", "w");
        if (!*null)
            return tf_fail(err, TF_EIO, "/dev/null: cannot open for writing");
        *out = *null;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n-1] (sorts v); 0 for n == 0. */
static double median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Builds the schedule the options name (without a plan). */
static int options_schedule(const tfx_exec_options *o, tf_schedule *out, tf_error *err)
{
    const char *name = o->schedule ? o->schedule : "1F1B";
    if (!tf_schedule_is_builtin(name))
        return tf_fail(err, TF_EINVAL, "--schedule \"%s\": unknown schedule (known: %s)", name,
                       tf_schedule_builtin_names());
    int ranks = o->ranks ? o->ranks : 2;
    int spr = o->stages_per_rank ? o->stages_per_rank : tf_schedule_default_stages_per_rank(name);
    int mbs = o->microbatches ? o->microbatches : 4;
    if (ranks < 1 || ranks > 1024)
        return tf_fail(err, TF_EINVAL, "--ranks %d: must be between 1 and 1024", ranks);
    if (mbs < 1 || mbs > 4096)
        return tf_fail(err, TF_EINVAL, "--microbatches %d: must be between 1 and 4096", mbs);
    if (spr < 1 || spr > 64)
        return tf_fail(err, TF_EINVAL, "--stages-per-rank %d: must be between 1 and 64", spr);
    return tf_schedule_build(name, ranks, spr, mbs, out, err);
}

/* Checks that the plan fits the options and the model; errors name the plan
 * field, its value and the conflicting option. */
static int check_plan(const tfx_exec_options *o, const tf_plan *plan, tf_error *err)
{
    const tf_schedule *s = &plan->schedule;
    const char *path = o->plan_path;
    const char *given = o->schedule ? tf_schedule_canonical_name(o->schedule) : NULL;
    if (o->schedule && strcmp(given ? given : o->schedule, s->name) != 0)
        return tf_fail(err, TF_EINVAL,
                       "%s: schedule = \"%s\", but --schedule %s was given (the plan was made "
                       "for another schedule)",
                       path, s->name, o->schedule);
    if (o->ranks && o->ranks != s->ranks)
        return tf_fail(err, TF_EINVAL, "%s: ranks = %d, but --ranks %d was given", path,
                       s->ranks, o->ranks);
    if (o->stages_per_rank && o->stages_per_rank != s->stages_per_rank)
        return tf_fail(err, TF_EINVAL,
                       "%s: stages_per_rank = %d, but --stages-per-rank %d was given", path,
                       s->stages_per_rank, o->stages_per_rank);
    if (o->microbatches && o->microbatches != s->microbatches)
        return tf_fail(err, TF_EINVAL, "%s: microbatches = %d, but --microbatches %d was given",
                       path, s->microbatches, o->microbatches);
    int tokens = tfx_model_microbatch_tokens(&o->model);
    if (plan->microbatch_tokens > 0 && plan->microbatch_tokens != tokens)
        return tf_fail(err, TF_EINVAL,
                       "%s: microbatch_tokens = %g, but the model's microbatch has %d tokens "
                       "(--context %d x --microbatch-size %d)",
                       path, plan->microbatch_tokens, tokens, o->model.context,
                       o->model.microbatch_size);
    if (o->model.layers < s->stages)
        return tf_fail(err, TF_EINVAL,
                       "%s: %d stages (ranks %d x stages_per_rank %d), but the model has only "
                       "--layers %d blocks (one or more per stage needed)",
                       path, s->stages, s->ranks, s->stages_per_rank, o->model.layers);
    return 0;
}

static int open_corpus(const tfx_exec_options *o, tfx_corpus *c, tf_error *err)
{
    if (o->data_path)
        return tfx_corpus_load(o->data_path, (size_t)o->model.context + 1, c, err);
    return tfx_corpus_builtin(BUILTIN_CORPUS_BYTES, c, err);
}

/* Stage tensor counts, for the freeze selector. */
static int selector_for(const tfx_model_layout *l, const tfx_exec_options *o,
                        tfx_freeze_selector *sel, tf_error *err)
{
    int rc = 0;
    int *k = NULL;
    TFX_CALLOC(k, l->stages);
    for (int s = 0; s < l->stages; s++)
        k[s] = l->stage_first_tensor[s + 1] - l->stage_first_tensor[s];
    rc = tfx_freeze_selector_init(sel, o->select, o->seed, l->stages, k, err);
fail:
    free(k);
    return rc;
}

static void pipeline_options(const tfx_exec_options *o, tfx_pipeline_options *po)
{
    tfx_pipeline_options_default(po);
    po->backend = o->backend;
    po->devices = o->devices;
    po->transport = o->transport;
    po->tf32 = o->tf32;
    po->seed = o->seed;
    po->adamw = o->adamw;
    po->fail_rank = o->fail_rank;
    po->fail_action = o->fail_action;
    if (launched(o)) {
        po->processes = o->launch.world_size;
        po->process_rank = o->launch.rank;
        po->local_rank = o->launch.local_rank;
    }
}

/* ---- profiling ------------------------------------------------------------ */

int tfx_exec_profile(const tfx_exec_options *o, tf_error *err)
{
    int rc = 0;
    tf_schedule sched = {0};
    tfx_pipeline *p = NULL;
    tfx_corpus corpus = {0};
    tf_profile prof = {0};
    int32_t *tokens = NULL, *targets = NULL;
    unsigned char *all_frozen = NULL;
    double *full = NULL, *frozen = NULL, *sample = NULL;
    FILE *out = NULL, *null_out = NULL;
    char source[4200];

    if (o->profile_steps < 1 || o->profile_warmup < 0)
        return tf_fail(err, TF_EINVAL, "--profile-steps %d / --profile-warmup %d: need >= 1 / >= 0",
                       o->profile_steps, o->profile_warmup);
    if (!(o->max_freeze_ratio >= 0.0 && o->max_freeze_ratio <= 1.0))
        return tf_fail(err, TF_EINVAL, "--max-freeze-ratio %g: must be in [0, 1]",
                       o->max_freeze_ratio);
    TFX_TRY(options_schedule(o, &sched, err));
    ranks_source(o, source, sizeof source);
    TFX_TRY(check_launch(o, &sched, source, err));
    TFX_TRY(output_stream(o, &out, &null_out, err));
    TFX_TRY(open_corpus(o, &corpus, err));
    tfx_pipeline_options po;
    pipeline_options(o, &po);
    TFX_TRY(tfx_pipeline_create(&sched, &o->model, &po, &p, err));

    const tfx_model_layout *l = tfx_pipeline_layout(p);
    const int M = sched.microbatches, N = tfx_model_microbatch_tokens(&o->model);
    const int n = sched.n_actions, S = o->profile_steps;
    TFX_CALLOC(tokens, (size_t)M * N);
    TFX_CALLOC(targets, (size_t)M * N);
    TFX_CALLOC(all_frozen, (size_t)M * l->n_tensors);
    memset(all_frozen, 1, (size_t)M * l->n_tensors);
    TFX_CALLOC(full, (size_t)n * S);
    TFX_CALLOC(frozen, (size_t)n * S);
    TFX_CALLOC(sample, 2 * S);

    fprintf(out, "profiling %s: %d ranks x %d stages per rank, %d microbatches x %d tokens, "
                 "%.0f parameters (%s backend)\n",
            sched.name, sched.ranks, sched.stages_per_rank, M, N,
            tfx_model_parameter_count(l, -1), o->backend);
    long step = 0;
    for (int w = 0; w < o->profile_warmup; w++, step++) {
        tfx_step_result res;
        tfx_corpus_batch(&corpus, o->seed, step, M, o->model.microbatch_size,
                         o->model.context, tokens, targets);
        tfx_step_input in = {tokens, targets, NULL, 1};
        TFX_TRY(tfx_pipeline_step(p, &in, &res, err));
    }
    /* Alternate unfrozen and frozen steps so slow drifts (frequency, other
     * load) affect both measurements alike. */
    for (int k = 0; k < S; k++) {
        for (int f = 0; f < 2; f++, step++) {
            tfx_step_result res;
            tfx_corpus_batch(&corpus, o->seed, step, M, o->model.microbatch_size,
                             o->model.context, tokens, targets);
            tfx_step_input in = {tokens, targets, f ? all_frozen : NULL, 1};
            TFX_TRY(tfx_pipeline_step(p, &in, &res, err));
            const double *ms = tfx_pipeline_action_ms(p);
            for (int i = 0; i < n; i++)
                (f ? frozen : full)[(size_t)i * S + k] = ms[i];
        }
    }

    /* Per action: median full and frozen time.  F and I do not depend on
     * freezing, so all 2S samples count. */
    prof.microbatch_tokens = N;
    prof.p2p_ms = 0.0;
    TFX_TRY(tf_schedule_copy(&sched, &prof.schedule) < 0
                ? tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__)
                : 0);
    TFX_CALLOC(prof.max_freeze_ratio, sched.stages);
    TFX_CALLOC(prof.stages, sched.stages);
    TFX_CALLOC(prof.overrides, n);
    int *count = NULL;
    double(*sum)[6] = NULL; /* per stage: F, B, Bfrozen, I, W, Wfrozen */
    TFX_CALLOC(count, (size_t)sched.stages * 4);
    sum = calloc((size_t)sched.stages, sizeof *sum);
    if (!sum) {
        free(count);
        rc = tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        const tf_action *a = &sched.actions[i];
        tf_action_time *ov = &prof.overrides[prof.n_overrides++];
        ov->type = a->type;
        ov->stage = a->stage;
        ov->microbatch = a->microbatch;
        int c = 0;
        for (int k = 0; k < S; k++) {
            sample[c++] = full[(size_t)i * S + k];
            if (a->type == TF_ACT_F || a->type == TF_ACT_I)
                sample[c++] = frozen[(size_t)i * S + k];
        }
        ov->ms = median(sample, c);
        ov->frozen_ms = -1.0;
        if (a->type == TF_ACT_B || a->type == TF_ACT_W) {
            for (int k = 0; k < S; k++)
                sample[k] = frozen[(size_t)i * S + k];
            /* Noise can make a frozen median exceed the full one; never let it. */
            ov->frozen_ms = fmin(median(sample, S), ov->ms);
        }
        double *acc = sum[a->stage];
        count[a->stage * 4 + a->type]++;
        switch (a->type) {
        case TF_ACT_F: acc[0] += ov->ms; break;
        case TF_ACT_B: acc[1] += ov->ms; acc[2] += ov->frozen_ms; break;
        case TF_ACT_I: acc[3] += ov->ms; break;
        case TF_ACT_W: acc[4] += ov->ms; acc[5] += ov->frozen_ms; break;
        }
    }
    for (int st = 0; st < sched.stages; st++) {
        tf_stage_times *t = &prof.stages[st];
        int nf = count[st * 4 + TF_ACT_F], nb = count[st * 4 + TF_ACT_B],
            ni = count[st * 4 + TF_ACT_I], nw = count[st * 4 + TF_ACT_W];
        t->forward_ms = nf ? sum[st][0] / nf : 0.0;
        t->backward_input_ms = ni ? sum[st][3] / ni : 0.0;
        t->backward_weight_ms = nw ? sum[st][4] / nw : 0.0;
        t->backward_weight_frozen_ms = nw ? sum[st][5] / nw : 0.0;
        if (nb) {
            t->backward_ms = sum[st][1] / nb;
            t->backward_frozen_ms = sum[st][2] / nb;
        } else { /* split stage: a full backward is I + W */
            t->backward_ms = t->backward_input_ms + t->backward_weight_ms;
            t->backward_frozen_ms = t->backward_input_ms + t->backward_weight_frozen_ms;
        }
        t->parameters = tfx_model_parameter_count(l, st);
        prof.max_freeze_ratio[st] = o->max_freeze_ratio;
        fprintf(out,
                "  stage %d (rank %d): F %.3f ms, B %.3f ms, B frozen %.3f ms%s, %.0f "
                "parameters\n",
                st, sched.stage_rank[st], t->forward_ms, t->backward_ms, t->backward_frozen_ms,
                ni ? " (split I/W)" : "", t->parameters);
    }
    free(count);
    free(sum);
    /* Launched: every process has every action's times; process 0 writes. */
    if (!launched(o) || o->launch.rank == 0) {
        TFX_TRY(tf_profile_save(&prof, o->profile_out, err));
        fprintf(out, "wrote %s (%d actions, median of %d steps each, unfrozen and frozen)\n",
                o->profile_out, n, S);
    }
fail:
    if (rc < 0)
        tfx_pipeline_abort(p, err ? err->msg : "failed");
    if (null_out)
        fclose(null_out);
    free(tokens);
    free(targets);
    free(all_frozen);
    free(full);
    free(frozen);
    free(sample);
    tf_profile_free(&prof);
    tfx_pipeline_destroy(p);
    tfx_corpus_free(&corpus);
    tf_schedule_free(&sched);
    return rc;
}

/* ---- training ------------------------------------------------------------- */

/* Fraction of the plan's ratios applied at `step` (0-based). */
static double phase_factor(const tfx_exec_options *o, long step)
{
    if (o->no_freeze || step < o->warmup)
        return 0.0;
    if (o->ramp <= 0)
        return 1.0;
    double f = (double)(step - o->warmup + 1) / o->ramp;
    return f < 1.0 ? f : 1.0;
}

static void print_progress(FILE *out, int bar, long step, long steps, double loss,
                           double batch_ms, double tokens_per_s, double ratio)
{
    if (bar) {
        const int width = 30;
        int filled = (int)((double)step / steps * width);
        char cells[64];
        for (int i = 0; i < width; i++)
            cells[i] = i < filled ? '#' : '.';
        cells[width] = '\0';
        fprintf(out, "\r[%s] %ld/%ld loss %.4f  %.1f ms  %.0f tok/s  freeze %.2f ", cells,
                step, steps, loss, batch_ms, tokens_per_s, ratio);
        if (step == steps)
            fputc('\n', out);
    } else {
        fprintf(out, "step %ld/%ld loss %.4f batch %.1f ms %.0f tokens/s freeze %.3f\n", step,
                steps, loss, batch_ms, tokens_per_s, ratio);
    }
    fflush(out);
}

/* Keeps the log lines of steps up to `last_step`: a run that stopped after
 * its last checkpoint logged steps that the resumed run repeats.  The log is
 * rewritten atomically; a missing log is fine. */
static int truncate_log(const char *path, long last_step, tf_error *err)
{
    char *text;
    size_t len;
    if (tf_read_file(path, &text, &len, NULL) != 0)
        return 0;
    size_t kept = 0;
    for (char *line = text; line < text + len;) {
        char *end = memchr(line, '\n', (size_t)(text + len - line));
        size_t n = end ? (size_t)(end - line) + 1 : (size_t)(text + len - line);
        const char *field = strstr(line, "\"step\":");
        long step = field && field < line + n ? strtol(field + 7, NULL, 10) : 0;
        if (step <= last_step) {
            memmove(text + kept, line, n);
            kept += n;
        }
        line += n;
    }
    int rc = tf_write_file_atomic(path, text, kept, err);
    free(text);
    return rc;
}

int tfx_exec_train(const tfx_exec_options *o, tfx_train_summary *summary, tf_error *err)
{
    int rc = 0;
    tf_plan plan = {0};
    int have_plan = 0;
    tf_schedule sched = {0};
    tfx_pipeline *p = NULL;
    tfx_corpus corpus = {0};
    tfx_freeze_selector sel = {0};
    int32_t *tokens = NULL, *targets = NULL;
    unsigned char *mask = NULL;
    double *ratio_of = NULL, *unfrozen_ms = NULL, *frozen_ms = NULL, *unfrozen_step = NULL,
           *frozen_step = NULL;
    FILE *log = NULL;
    FILE *out = NULL, *null_out = NULL;
    char source[4200];
    tfx_train_summary sum = {0};

    if (o->steps < 0 || o->warmup < 0 || o->ramp < 0)
        return tf_fail(err, TF_EINVAL, "--steps %d / --warmup %d / --ramp %d: must be >= 0",
                       o->steps, o->warmup, o->ramp);
    TFX_TRY(tfx_model_config_check(&o->model, err));
    if (o->plan_path) {
        TFX_TRY(tf_plan_load(o->plan_path, &plan, err));
        have_plan = 1;
        TFX_TRY(check_plan(o, &plan, err));
        TFX_TRY(tf_schedule_copy(&plan.schedule, &sched) < 0
                    ? tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__)
                    : 0);
    } else {
        TFX_TRY(options_schedule(o, &sched, err));
    }
    ranks_source(o, source, sizeof source);
    TFX_TRY(check_launch(o, &sched, source, err));
    TFX_TRY(output_stream(o, &out, &null_out, err));
    TFX_TRY(open_corpus(o, &corpus, err));
    tfx_pipeline_options po;
    pipeline_options(o, &po);
    TFX_TRY(tfx_pipeline_create(&sched, &o->model, &po, &p, err));
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    TFX_TRY(selector_for(l, o, &sel, err));

    const int M = sched.microbatches, N = tfx_model_microbatch_tokens(&o->model);
    const int S = sched.stages;
    TFX_CALLOC(tokens, (size_t)M * N);
    TFX_CALLOC(targets, (size_t)M * N);
    TFX_CALLOC(mask, (size_t)M * l->n_tensors);
    TFX_CALLOC(ratio_of, (size_t)S * M);
    TFX_CALLOC(unfrozen_ms, o->steps + 1);
    TFX_CALLOC(frozen_ms, o->steps + 1);
    TFX_CALLOC(unfrozen_step, o->steps + 1);
    TFX_CALLOC(frozen_step, o->steps + 1);
    int any_freezing = 0;
    if (!have_plan && o->freeze_ratio > 0.0) {
        /* A uniform ratio (measurements, baselines): every B / W action. */
        for (int i = 0; i < sched.n_actions; i++) {
            const tf_action *a = &sched.actions[i];
            if (a->type == TF_ACT_B || a->type == TF_ACT_W)
                ratio_of[a->stage * M + a->microbatch] = o->freeze_ratio;
        }
        any_freezing = 1;
    }
    if (have_plan)
        for (int i = 0; i < sched.n_actions; i++) {
            const tf_plan_action *a = &plan.actions[i];
            if (a->action.type == TF_ACT_B || a->action.type == TF_ACT_W) {
                ratio_of[a->action.stage * M + a->action.microbatch] = a->freeze_ratio;
                any_freezing |= a->freeze_ratio > 0.0;
            }
        }

    long start = 0;
    if (o->checkpoint_dir) {
        tfx_checkpoint_meta meta = {o->model, S, M, o->seed, (int)o->select, "", 0};
        snprintf(meta.schedule, sizeof meta.schedule, "%s", sched.name);
        int found = 0;
        TFX_TRY(tfx_checkpoint_load(o->checkpoint_dir, p, &sel, &meta, &start, &found, err));
        if (found)
            fprintf(out, "resuming from %s at step %ld\n", o->checkpoint_dir, start);
    }
    const int writes_log = o->log_path && (!launched(o) || o->launch.rank == 0);
    if (writes_log && start > 0)
        TFX_TRY(truncate_log(o->log_path, start, err));
    if (writes_log) {
        log = fopen(o->log_path, start > 0 ? "a" : "w");
        if (!log) {
            rc = tf_fail(err, TF_EIO, "--log %s: cannot open for writing", o->log_path);
            goto fail;
        }
    }
    int bar = o->progress < 0 ? isatty(fileno(out)) : o->progress;
    fprintf(out, "training %s: %d ranks x %d stages per rank, %d microbatches x %d tokens, "
                 "%.0f parameters, %s%s\n",
            sched.name, sched.ranks, sched.stages_per_rank, M, N,
            tfx_model_parameter_count(l, -1),
            !have_plan ? (o->freeze_ratio > 0 && !o->no_freeze ? "uniform freeze ratio"
                                                                : "no plan (no freezing)")
                       : o->no_freeze ? "plan ignored (--no-freeze)" : "plan ",
            have_plan && !o->no_freeze ? o->plan_path : "");
    fprintf(out, "data: %s\n", corpus.source);

    const double batch_tokens = (double)M * N;
    int n_unfrozen = 0, n_frozen = 0;
    const long steps = o->steps;
    for (long step = start; step < steps; step++) {
        double factor = phase_factor(o, step);
        long frozen_count = 0, slots = 0;
        for (int st = 0; st < S; st++) {
            int first = l->stage_first_tensor[st];
            int K = l->stage_first_tensor[st + 1] - first;
            for (int m = 0; m < M; m++) {
                frozen_count += tfx_freeze_select(&sel, step, st, m,
                                                  ratio_of[st * M + m] * factor,
                                                  mask + (size_t)m * l->n_tensors + first);
                slots += K;
            }
        }
        tfx_corpus_batch(&corpus, o->seed, step, M, o->model.microbatch_size,
                         o->model.context, tokens, targets);
        tfx_step_input in = {tokens, targets, mask, 1};
        tfx_step_result res;
        TFX_TRY(tfx_pipeline_step(p, &in, &res, err));
        if (!isfinite(res.loss)) {
            rc = tf_fail(err, TF_ERUNTIME, "step %ld: the loss is %g (diverged)", step + 1,
                         res.loss);
            goto fail;
        }
        double ratio = slots ? (double)frozen_count / slots : 0.0;
        /* Mean compute time of the step's forward and weight-gradient
         * carrying (B or W) actions: what the LP models as functions of r. */
        double f_ms = 0.0, b_ms = 0.0;
        int nf = 0, nb = 0;
        for (int i = 0; i < sched.n_actions; i++) {
            tf_action_type t = sched.actions[i].type;
            if (t == TF_ACT_F)
                f_ms += tfx_pipeline_action_ms(p)[i], nf++;
            else if (t == TF_ACT_B || t == TF_ACT_W)
                b_ms += tfx_pipeline_action_ms(p)[i], nb++;
        }
        double tps = batch_tokens / (res.step_ms / 1e3);
        if (sum.steps_run == 0)
            sum.first_loss = res.loss;
        sum.final_loss = res.loss;
        sum.steps_run++;
        sum.dw_gemms += res.counts.gemms;
        /* The first step of a process runs on cold caches: keep it out of
         * the timing medians. */
        if (sum.steps_run > 1 && factor == 0.0) {
            unfrozen_ms[n_unfrozen] = res.pipeline_ms;
            unfrozen_step[n_unfrozen++] = res.step_ms;
        } else if (sum.steps_run > 1 && factor == 1.0 && any_freezing) {
            frozen_ms[n_frozen] = res.pipeline_ms;
            frozen_step[n_frozen++] = res.step_ms;
        }
        print_progress(out, bar, step + 1, steps, res.loss, res.pipeline_ms, tps, ratio);
        if (log) {
            const char *phase = factor == 0.0 ? (o->no_freeze || !any_freezing ? "unfrozen"
                                                                                 : "warmup")
                                : factor < 1.0 ? "ramp" : "frozen";
            fprintf(log,
                    "{\"step\": %ld, \"loss\": %.6f, \"batch_ms\": %.3f, \"step_ms\": %.3f, "
                    "\"tokens_per_s\": %.1f, \"freeze_ratio\": %.4f, \"phase\": \"%s\", "
                    "\"dw_gemms\": %ld, \"forward_ms\": %.3f, \"backward_ms\": %.3f}\n",
                    step + 1, res.loss, res.pipeline_ms, res.step_ms, tps, ratio, phase,
                    res.counts.gemms, nf ? f_ms / nf : 0.0, nb ? b_ms / nb : 0.0);
            fflush(log);
        }
        if (o->checkpoint_dir &&
            ((o->checkpoint_every > 0 && (step + 1) % o->checkpoint_every == 0) ||
             step + 1 == steps)) {
            tfx_checkpoint_meta meta = {o->model, S, M, o->seed, (int)o->select, "", step + 1};
            snprintf(meta.schedule, sizeof meta.schedule, "%s", sched.name);
            TFX_TRY(tfx_checkpoint_save(o->checkpoint_dir, p, &sel, &meta, err));
        }
    }
    sum.last_step = steps > start ? steps : start;
    sum.entropy_floor = corpus.entropy_floor;
    sum.unfrozen_batch_ms = median(unfrozen_ms, n_unfrozen);
    sum.frozen_batch_ms = median(frozen_ms, n_frozen);
    double us = median(unfrozen_step, n_unfrozen), fs = median(frozen_step, n_frozen);
    sum.unfrozen_tokens_per_s = us > 0 ? batch_tokens / (us / 1e3) : 0.0;
    sum.frozen_tokens_per_s = fs > 0 ? batch_tokens / (fs / 1e3) : 0.0;
    if (have_plan) {
        sum.planned_unfrozen_ms = plan.batch_ms_unfrozen;
        sum.planned_ms = plan.batch_ms_planned;
    }

    if (sum.steps_run == 0) {
        fprintf(out, "nothing to do: the checkpoint is at step %ld of %ld\n", start, steps);
    } else {
        fprintf(out, "final loss %.4f (first %.4f)", sum.final_loss, sum.first_loss);
        if (sum.entropy_floor >= 0)
            fprintf(out, ", entropy floor of the source %.4f, gap %.4f nats/byte",
                    sum.entropy_floor, sum.final_loss - sum.entropy_floor);
        fputc('\n', out);
        if (n_unfrozen)
            fprintf(out, "batch time without freezing: measured %.2f ms (median of %d steps)%s",
                    sum.unfrozen_batch_ms, n_unfrozen, have_plan ? "" : "\n");
        if (n_unfrozen && have_plan)
            fprintf(out, ", planned %.2f ms\n", sum.planned_unfrozen_ms);
        if (n_frozen && have_plan)
            fprintf(out,
                    "batch time with the plan's freezing: measured %.2f ms (median of %d "
                    "steps), planned %.2f ms\n",
                    sum.frozen_batch_ms, n_frozen, sum.planned_ms);
        else if (n_frozen)
            fprintf(out, "batch time with freeze ratio %.2f: measured %.2f ms (median of %d "
                         "steps)\n",
                    o->freeze_ratio, sum.frozen_batch_ms, n_frozen);
        if (n_unfrozen)
            fprintf(out, "tokens/s without freezing: %.0f\n", sum.unfrozen_tokens_per_s);
        if (n_frozen)
            fprintf(out, "tokens/s with freezing:    %.0f (%+.1f%%)\n",
                    sum.frozen_tokens_per_s,
                    sum.unfrozen_tokens_per_s > 0
                        ? 100.0 * (sum.frozen_tokens_per_s / sum.unfrozen_tokens_per_s - 1.0)
                        : 0.0);
        if (n_unfrozen && n_frozen && have_plan && plan.batch_ms_planned > 0)
            fprintf(out, "speedup: measured %.3fx, planned %.3fx\n",
                    sum.unfrozen_batch_ms / sum.frozen_batch_ms, plan.speedup);
    }
    if (summary)
        *summary = sum;
fail:
    if (log && fclose(log) != 0 && rc == 0)
        rc = tf_fail(err, TF_EIO, "--log %s: write failed", o->log_path);
    if (rc < 0)
        tfx_pipeline_abort(p, err ? err->msg : "failed");
    if (null_out)
        fclose(null_out);
    free(tokens);
    free(targets);
    free(mask);
    free(ratio_of);
    free(unfrozen_ms);
    free(frozen_ms);
    free(unfrozen_step);
    free(frozen_step);
    tfx_freeze_selector_free(&sel);
    tfx_pipeline_destroy(p);
    tfx_corpus_free(&corpus);
    tf_schedule_free(&sched);
    if (have_plan)
        tf_plan_free(&plan);
    return rc;
}
