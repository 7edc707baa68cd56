/* train.c - tf-exec --plan: training with a plan's freeze ratios (or a
 * uniform ratio, or none), through warm-up and ramp, with progress, a JSON
 * log, checkpoints and a summary against the plan (see exec.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoplan.h"
#include "check.h"
#include "exec_internal.h"
#include "run_log.h"
#include "tf/dag.h"
#include "tf/plan.h"
#include "tf/util.h"
#include "tfx/checkpoint.h"

typedef struct trainer {
    tfx_exec_run run;
    const tfx_exec_options *o;
    tf_plan plan;
    int have_plan;
    int autoplan;         /* --auto-plan: ap says the phases and makes the plans */
    tfx_autoplan ap;
    tf_dag dag;           /* of the plan in use (its lag), to replay the steps' times */
    double *scratch;      /* n_actions: the replay's start times */
    tfx_freeze_selector sel;
    float *grad_host;     /* stable: one tensor's gradient, read after a step */
    double *ratio_of;     /* stage x microbatch: the ratio once the ramp is done */
    int *recompute_blocks; /* stage x microbatch: blocks recomputed (the run's) */
    int any_freezing;     /* some ratio is above 0 */
    unsigned char *mask;  /* microbatch x tensor: frozen in this step */
    unsigned char *every; /* tensor: all 1, a mask with everything frozen */
    long start;           /* steps done before this call (resumed from a checkpoint) */
    int resumed;          /* the weights came from --checkpoint */
    double train_ms;      /* wall time of the steps run so far (no evaluations) */
    double flops;         /* GEMM-equivalent FLOPs of those steps */
    tfx_run_log log;      /* --log (process 0 only) */
    int bar;              /* progress as a bar (else one line per step) */
    /* Timing samples: steps without freezing, and steps at the full ratios. */
    double *unfrozen_ms, *unfrozen_step, *frozen_ms, *frozen_step;
    /* ... and the longest path of the plan's DAG under each step's own
     * measured action times (with a plan only) */
    double *unfrozen_replay, *frozen_replay;
    int n_unfrozen, n_frozen, n_unfrozen_replay, n_frozen_replay;
    tfx_train_summary sum;
    long long step_peak[64]; /* per rank: the last step's peak of microbatch bytes */
    long over_limit_unplanned; /* steps over the limit not at a plan's full ratios */
} trainer;

/* What one step did, for the progress line and the log. */
typedef struct step_report {
    long step;            /* 1-based */
    const char *phase;    /* its name in the log and the progress */
    int all_frozen;       /* --auto-plan measuring: every tensor frozen */
    double factor;        /* share of the full ratios applied */
    double ratio;         /* tensors frozen / tensor slots */
    double select_ms;     /* choosing the frozen tensors, and stable's statistics */
    double tokens_per_s;
    double forward_ms, backward_ms; /* mean compute time of F and of B / W actions */
    double val_loss;      /* after the step, or NaN when it was not evaluated */
    int over_limit;       /* some rank's static + peak bytes exceeded --memory-limit */
    tfx_step_result res;
} step_report;

/* ---- set-up ---------------------------------------------------------------- */

/* Checks that the plan fits the options and the model; errors name the plan
 * field, its value and the conflicting option. */
static int check_plan_fits(const tfx_exec_options *o, const tf_plan *plan, tf_error *err)
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

/* The schedule: the plan's (checked against the options), else the one the
 * options name. */
static int load_schedule(trainer *tr, tf_error *err)
{
    const tfx_exec_options *o = tr->o;
    if (!o->plan_path)
        return tfx_exec_options_schedule(o, &tr->run.sched, err);
    int rc = tf_plan_load(o->plan_path, &tr->plan, err);
    if (rc < 0)
        return rc;
    tr->have_plan = 1;
    if ((rc = check_plan_fits(o, &tr->plan, err)) < 0)
        return rc;
    if (tf_schedule_copy(&tr->plan.schedule, &tr->run.sched) < 0)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    return 0;
}

/* stable: statistics for the stages this process runs, and a host buffer
 * for the largest tensor's gradient. */
static int track_gradients(trainer *tr, tf_error *err)
{
    int rc = 0;
    const tfx_model_layout *l = tfx_pipeline_layout(tr->run.p);
    size_t *sizes = NULL, largest = 1;
    TFX_CALLOC(sizes, l->n_tensors);
    for (int t = 0; t < l->n_tensors; t++) {
        sizes[t] = l->tensors[t].count;
        largest = sizes[t] > largest ? sizes[t] : largest;
    }
    TFX_CALLOC(tr->grad_host, largest);
    for (int s = 0; s < l->stages; s++)
        if (tfx_pipeline_has_stage(tr->run.p, s))
            TFX_TRY(tfx_freeze_selector_track(&tr->sel, s, sizes + l->stage_first_tensor[s],
                                              err));
fail:
    free(sizes);
    return rc;
}

/* The freeze selector, with each stage's tensor count. */
static int open_selector(trainer *tr, tf_error *err)
{
    int rc = 0;
    const tfx_model_layout *l = tfx_pipeline_layout(tr->run.p);
    int *k = NULL;
    TFX_CALLOC(k, l->stages);
    for (int s = 0; s < l->stages; s++)
        k[s] = l->stage_first_tensor[s + 1] - l->stage_first_tensor[s];
    TFX_TRY(tfx_freeze_selector_init(&tr->sel, tr->o->select, tr->o->seed, l->stages, k, err));
    if (tr->o->select == TFX_SELECT_STABLE)
        TFX_TRY(track_gradients(tr, err));
fail:
    free(k);
    return rc;
}

/* The ratio of every B / W action once the ramp is done: the plan's, or a
 * uniform --freeze-ratio (measurements, baselines). */
static void full_ratios(trainer *tr)
{
    const tf_schedule *s = &tr->run.sched;
    const int M = s->microbatches;
    tr->any_freezing = 0;
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = tr->have_plan ? &tr->plan.actions[i].action : &s->actions[i];
        if (a->type != TF_ACT_B && a->type != TF_ACT_W)
            continue;
        double r = tr->have_plan ? tr->plan.actions[i].freeze_ratio : tr->o->freeze_ratio;
        tr->ratio_of[a->stage * M + a->microbatch] = r;
        tr->any_freezing |= r > 0.0;
    }
}

/* Under a plan made for a memory limit, whether the executor rounds its
 * discrete choices (tensors, blocks) towards less memory than the plan's
 * ratios count, so that a rank the plan fits in its limit fits in it. */
static int fits_memory(const trainer *tr)
{
    return tr->have_plan && tr->plan.memory_limit != NULL;
}

/* Rank r's memory limit: --memory-limit, else the plan's, else 0 (none). */
static double limit_of(const trainer *tr, int r)
{
    if (tr->o->memory_limit)
        return (double)tr->o->memory_limit;
    return fits_memory(tr) ? tr->plan.memory_limit[r] : 0.0;
}

/* The recomputation of every (stage, microbatch): the plan's, round(q K) of
 * the stage's K blocks for its backward's recompute ratio q (halves up, as
 * the freeze count; under a plan made for a memory limit ceil(q K), so the
 * rank keeps at most what the plan counts; in full from the first step: it
 * keeps the rank within its limit, it is not freezing to ramp in), else
 * what --recompute says. */
static void recompute_blocks(trainer *tr)
{
    const tf_schedule *s = &tr->run.sched;
    const tfx_model_layout *l = tfx_pipeline_layout(tr->run.p);
    const int M = s->microbatches;
    for (int st = 0; st < s->stages; st++)
        for (int m = 0; m < M; m++)
            tr->recompute_blocks[st * M + m] =
                tr->o->recompute == TFX_RECOMPUTE_FULL        ? tfx_model_stage_blocks(l, st)
                : tr->o->recompute == TFX_RECOMPUTE_SELECTIVE ? TFX_RECOMPUTE_ATTENTION
                                                              : 0;
    for (int i = 0; tr->have_plan && i < s->n_actions; i++) {
        const tf_plan_action *pa = &tr->plan.actions[i];
        const int K = tfx_model_stage_blocks(l, pa->action.stage);
        const double q = pa->recompute_ratio;
        if (q > 0)
            tr->recompute_blocks[pa->action.stage * M + pa->action.microbatch] =
                fits_memory(tr) ? (int)ceil(q * K - 1e-9) : tfx_freeze_count(q, K);
    }
    tr->run.recompute_blocks = tr->recompute_blocks;
}

/* The DAG of the plan in use, with its lag, to replay each step's measured
 * action times on. */
static int plan_dag(trainer *tr, tf_error *err)
{
    tf_dag_free(&tr->dag);
    return tf_dag_build(&tr->run.sched, tr->plan.p2p_ms, &tr->dag, err);
}

/* --auto-plan: the plan just solved replaces the one in use. */
static int install_plan(trainer *tr, tf_plan *plan, tf_error *err)
{
    if (tr->have_plan)
        tf_plan_free(&tr->plan);
    tr->plan = *plan;
    memset(plan, 0, sizeof *plan);
    tr->have_plan = 1;
    full_ratios(tr);
    recompute_blocks(tr);
    return plan_dag(tr, err);
}

static void checkpoint_meta(const trainer *tr, long step, tfx_checkpoint_meta *meta)
{
    const tfx_exec_options *o = tr->o;
    *meta = (tfx_checkpoint_meta){o->model, tr->run.sched.stages, tr->run.sched.microbatches,
                                  o->seed, (int)o->select, "", step};
    snprintf(meta->schedule, sizeof meta->schedule, "%s", tr->run.sched.name);
}

static int resume(trainer *tr, tf_error *err)
{
    if (!tr->o->checkpoint_dir)
        return 0;
    tfx_checkpoint_meta meta;
    int found = 0;
    checkpoint_meta(tr, 0, &meta);
    int rc = tfx_checkpoint_load(tr->o->checkpoint_dir, tr->run.p, &tr->sel, &meta, &found, err);
    if (rc == 0 && found) {
        tr->start = meta.step;
        fprintf(tr->run.out, "resuming from %s at step %ld\n", tr->o->checkpoint_dir, tr->start);
    }
    tr->resumed = found;
    return rc;
}

/* --init: the weights of another run's checkpoint, unless this run resumes
 * its own. */
static int init_weights(trainer *tr, tf_error *err)
{
    const char *dir = tr->o->init_dir;
    if (!dir || tr->resumed)
        return 0;
    int rc = tfx_checkpoint_load_weights(dir, tr->run.p, err);
    if (rc == 0)
        fprintf(tr->run.out, "starting from the weights in %s (fresh optimizer)\n", dir);
    return rc;
}

/* --log: written by process 0 only; a resumed run keeps the lines of the
 * steps up to its checkpoint. */
static int open_log(trainer *tr, tf_error *err)
{
    const tfx_exec_options *o = tr->o;
    int writes = o->log_path && !(tfx_exec_launched(o) && o->launch.rank != 0);
    tfx_run_log_init(&tr->log, writes ? o->log_path : NULL, tr->start);
    return tfx_exec_check_writable(o, "--log", o->log_path, err);
}

/* --auto-plan: the phases to come. */
static void print_auto_header(const trainer *tr)
{
    const tfx_exec_options *o = tr->o;
    const long w = o->warmup, m = 2L * o->profile_steps;
    fprintf(tr->run.out,
            "auto-plan: warm-up steps 1-%ld unfrozen, measuring steps %ld-%ld (%d unfrozen and "
            "%d fully frozen, alternating), then the plan (%s, cap %.2f) ramped in over %d %s",
            w, w + 1, w + m, o->profile_steps, o->profile_steps, tf_objective_name(o->objective),
            o->max_freeze_ratio, o->ramp, tf_plural(o->ramp, "step", "steps"));
    if (o->replan_threshold > 0)
        fprintf(tr->run.out, "; re-plan beyond %.1f%% drift for %d %s\n",
                100.0 * o->replan_threshold, o->replan_patience,
                tf_plural(o->replan_patience, "step", "steps"));
    else
        fprintf(tr->run.out, "; no re-planning\n");
}

static void print_header(const trainer *tr)
{
    const tfx_exec_options *o = tr->o;
    if (tr->autoplan) {
        tfx_exec_run_describe(&tr->run, "training");
        fprintf(tr->run.out, ", auto-plan\ndata: %s\n", tr->run.corpus.source);
        print_auto_header(tr);
        return;
    }
    const char *what = !tr->have_plan ? (o->freeze_ratio > 0 && !o->no_freeze
                                             ? "uniform freeze ratio"
                                             : "no plan (no freezing)")
                       : o->no_freeze ? "plan ignored (--no-freeze)"
                                      : "plan ";
    tfx_exec_run_describe(&tr->run, "training");
    fprintf(tr->run.out, ", %s%s\n", what, tr->have_plan && !o->no_freeze ? o->plan_path : "");
    fprintf(tr->run.out, "data: %s\n", tr->run.corpus.source);
}

static int trainer_open(trainer *tr, const tfx_exec_options *o, tf_error *err)
{
    int rc = 0;
    tr->o = o;
    TFX_TRY(tfx_model_config_check(&o->model, err));
    TFX_TRY(load_schedule(tr, err));
    TFX_TRY(tfx_exec_run_open(&tr->run, o, err));
    TFX_TRY(open_selector(tr, err));
    const int M = tr->run.microbatches, S = tr->run.sched.stages;
    const int n_tensors = tfx_pipeline_layout(tr->run.p)->n_tensors;
    TFX_CALLOC(tr->mask, (size_t)M * n_tensors);
    TFX_CALLOC(tr->every, (size_t)n_tensors);
    memset(tr->every, 1, (size_t)n_tensors);
    TFX_CALLOC(tr->ratio_of, (size_t)S * M);
    TFX_CALLOC(tr->recompute_blocks, (size_t)S * M);
    TFX_CALLOC(tr->unfrozen_ms, o->steps + 1);
    TFX_CALLOC(tr->frozen_ms, o->steps + 1);
    TFX_CALLOC(tr->unfrozen_step, o->steps + 1);
    TFX_CALLOC(tr->frozen_step, o->steps + 1);
    TFX_CALLOC(tr->unfrozen_replay, o->steps + 1);
    TFX_CALLOC(tr->frozen_replay, o->steps + 1);
    TFX_CALLOC(tr->scratch, tr->run.sched.n_actions);
    if (tr->have_plan || o->freeze_ratio > 0.0)
        full_ratios(tr);
    if (tr->have_plan)
        TFX_TRY(plan_dag(tr, err));
    recompute_blocks(tr);
    tr->autoplan = o->auto_plan;
    if (tr->autoplan)
        TFX_TRY(tfx_autoplan_open(&tr->ap, o, &tr->run.sched, err));
    TFX_TRY(resume(tr, err));
    TFX_TRY(init_weights(tr, err));
    TFX_TRY(open_log(tr, err));
    tr->bar = o->progress < 0 ? isatty(fileno(tr->run.out)) : o->progress;
    print_header(tr);
fail:
    return rc;
}

/* Returns rc, or TF_EIO when the log could not be written. */
static int trainer_close(trainer *tr, int rc, tf_error *err)
{
    tf_error log_err = {0};
    if (tfx_run_log_close(&tr->log, &log_err) != 0 && rc == 0)
        rc = tf_fail(err, TF_EIO, "%s", log_err.msg);
    tfx_exec_run_close(&tr->run, rc, err);
    free(tr->mask);
    free(tr->every);
    free(tr->grad_host);
    free(tr->ratio_of);
    free(tr->recompute_blocks);
    free(tr->unfrozen_ms);
    free(tr->frozen_ms);
    free(tr->unfrozen_step);
    free(tr->frozen_step);
    free(tr->unfrozen_replay);
    free(tr->frozen_replay);
    free(tr->scratch);
    tf_dag_free(&tr->dag);
    if (tr->autoplan)
        tfx_autoplan_close(&tr->ap);
    tfx_freeze_selector_free(&tr->sel);
    if (tr->have_plan)
        tf_plan_free(&tr->plan);
    return rc;
}

/* ---- one step -------------------------------------------------------------- */

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

/* The phase of `step` (0-based): its name and the share of the full ratios
 * it applies. */
static void step_phase(const trainer *tr, long step, step_report *rep)
{
    if (tr->autoplan) {
        tfx_phase ph = tfx_autoplan_phase(&tr->ap, step, &rep->factor);
        rep->phase = tfx_phase_name(ph);
        rep->all_frozen = ph == TFX_PHASE_MEASURE_FROZEN;
        return;
    }
    rep->factor = phase_factor(tr->o, step);
    /* A run that never freezes has one phase, whatever the warm-up. */
    rep->phase = tr->o->no_freeze || !tr->any_freezing ? "unfrozen"
                 : rep->factor == 0.0                  ? "warmup"
                 : rep->factor < 1.0                   ? "ramp"
                                                       : "frozen";
}

/* How far mask `frozen` leaves a microbatch of st above the plan's count
 * at freeze ratio r, which is linear between nothing and everything frozen
 * (tf/memory.h: A(r), X (1 - r), G (1 - r)); 0 when within it. */
static double over_plan(tfx_stage *st, const unsigned char *frozen, double r,
                        const tfx_mask_bytes *none, const tfx_mask_bytes *all)
{
    const tfx_mask_bytes b = tfx_stage_mask_bytes(st, frozen);
    return fmax(b.forward - (none->forward - r * (none->forward - all->forward)), 0.0) +
           fmax(b.input_rise - (1.0 - r) * none->input_rise, 0.0) +
           fmax(b.input_kept - (1.0 - r) * none->input_kept, 0.0);
}

/* Freezes more of local stage st's tensors (frozen: its K of them), in
 * order, each one that brings a microbatch closer to the plan's count at
 * ratio r, until it holds no more than that count: a tensor count drawn at
 * random saves more or less than r of the bytes.  none and all: st's
 * counts with nothing and everything frozen.  Returns how many it added. */
static int top_up(tfx_stage *st, int K, double r, unsigned char *frozen,
                  const tfx_mask_bytes *none, const tfx_mask_bytes *all)
{
    double over = over_plan(st, frozen, r, none, all);
    int added = 0;
    for (int i = 0; i < K && over > 0.0; i++) {
        if (frozen[i])
            continue;
        frozen[i] = 1;
        const double now = over_plan(st, frozen, r, none, all);
        if (now < over) {
            over = now;
            added++;
        } else {
            frozen[i] = 0;
        }
    }
    return added;
}

/* Fills the mask of `step` at `factor` times the full ratios; returns the
 * share of tensor slots frozen. */
static double select_frozen(trainer *tr, long step, double factor)
{
    const tfx_model_layout *l = tfx_pipeline_layout(tr->run.p);
    const int M = tr->run.microbatches;
    if (factor == 0.0 && !tr->any_freezing) { /* nothing to draw (no plan yet) */
        memset(tr->mask, 0, (size_t)M * l->n_tensors);
        return 0.0;
    }
    long frozen = 0, slots = 0;
    for (int st = 0; st < l->stages; st++) {
        int first = l->stage_first_tensor[st];
        int K = l->stage_first_tensor[st + 1] - first;
        /* Under a plan made for a memory limit, the stage's counts bound
         * each microbatch's top-up (tfx/model.h). */
        tfx_stage *here = fits_memory(tr) && !tr->o->no_freeze_memory
                              ? tfx_pipeline_local_stage(tr->run.p, st)
                              : NULL;
        tfx_mask_bytes none = {0}, all = {0};
        if (here) {
            none = tfx_stage_mask_bytes(here, NULL);
            all = tfx_stage_mask_bytes(here, tr->every);
        }
        for (int m = 0; m < M; m++) {
            const double r = tr->ratio_of[st * M + m] * factor;
            unsigned char *mask = tr->mask + (size_t)m * l->n_tensors + first;
            frozen += tfx_freeze_select(&tr->sel, step, st, m, r, mask);
            if (here)
                frozen += top_up(here, K, r, mask, &none, &all);
            slots += K;
        }
    }
    return slots ? (double)frozen / slots : 0.0;
}

/* stable: each tracked tensor's gradient of the step just run, or none
 * when the step froze it in every microbatch. */
static void observe_gradients(trainer *tr)
{
    const tfx_model_layout *l = tfx_pipeline_layout(tr->run.p);
    const int M = tr->run.microbatches;
    for (int st = 0; st < l->stages; st++) {
        if (!tfx_pipeline_has_stage(tr->run.p, st))
            continue;
        for (int t = l->stage_first_tensor[st]; t < l->stage_first_tensor[st + 1]; t++) {
            int frozen = 0;
            for (int m = 0; m < M; m++)
                frozen += tr->mask[(size_t)m * l->n_tensors + t];
            if (frozen < M)
                tfx_pipeline_read_tensor(tr->run.p, t, TFX_BUF_GRAD, tr->grad_host);
            tfx_freeze_selector_observe(&tr->sel, st, t - l->stage_first_tensor[st],
                                        frozen < M ? tr->grad_host : NULL);
        }
    }
}

/* Mean compute time of the step's forward and weight-gradient carrying (B
 * or W) actions: what the LP models as functions of r. */
static void action_means(const trainer *tr, step_report *rep)
{
    const tf_schedule *s = &tr->run.sched;
    const double *ms = tfx_pipeline_action_ms(tr->run.p);
    double f_ms = 0.0, b_ms = 0.0;
    int nf = 0, nb = 0;
    for (int i = 0; i < s->n_actions; i++) {
        tf_action_type t = s->actions[i].type;
        if (t == TF_ACT_F)
            f_ms += ms[i], nf++;
        else if (t == TF_ACT_B || t == TF_ACT_W)
            b_ms += ms[i], nb++;
    }
    rep->forward_ms = nf ? f_ms / nf : 0.0;
    rep->backward_ms = nb ? b_ms / nb : 0.0;
}

/* Adds the step to the summary and to the timing samples.  The first step
 * of a process runs on cold caches: it stays out of the timing medians. */
static void record(trainer *tr, const step_report *rep)
{
    tfx_train_summary *sum = &tr->sum;
    if (sum->steps_run == 0)
        sum->first_loss = rep->res.loss;
    sum->final_loss = rep->res.loss;
    sum->steps_run++;
    sum->dw_gemms += rep->res.counts.gemms;
    const double step_ms = rep->res.step_ms + rep->select_ms;
    tr->train_ms += step_ms;
    tr->flops += rep->res.flops;
    if (sum->steps_run <= 1 || rep->all_frozen)
        return;
    /* The DAG of the plan in use under this step's own action times: what
     * the plan would predict had it known them. */
    const double *ms = tfx_pipeline_action_ms(tr->run.p);
    const double replay = tr->dag.n ? tf_dag_longest_path(&tr->dag, ms, tr->scratch) : -1.0;
    /* A run that never freezes (no plan, ratio 0) has only unfrozen steps,
     * whatever its warm-up says. */
    if (rep->factor == 0.0 || !tr->any_freezing) {
        tr->unfrozen_ms[tr->n_unfrozen] = rep->res.pipeline_ms;
        tr->unfrozen_step[tr->n_unfrozen++] = step_ms;
        if (replay >= 0)
            tr->unfrozen_replay[tr->n_unfrozen_replay++] = replay;
    } else if (rep->factor == 1.0 && tr->any_freezing) {
        tr->frozen_ms[tr->n_frozen] = rep->res.pipeline_ms;
        tr->frozen_step[tr->n_frozen++] = step_ms;
        if (replay >= 0)
            tr->frozen_replay[tr->n_frozen_replay++] = replay;
    }
}

static void print_progress(FILE *out, int bar, const step_report *rep, long steps)
{
    const double loss = rep->res.loss, batch_ms = rep->res.pipeline_ms;
    if (bar) {
        const int width = 30;
        int filled = (int)((double)rep->step / steps * width);
        char cells[64];
        for (int i = 0; i < width; i++)
            cells[i] = i < filled ? '#' : '.';
        cells[width] = '\0';
        fprintf(out, "\r[%s] %ld/%ld loss %.4f  %.1f ms  %.0f tok/s  freeze %.2f  %-16s", cells,
                rep->step, steps, loss, batch_ms, rep->tokens_per_s, rep->ratio, rep->phase);
        if (!isnan(rep->val_loss))
            fprintf(out, " val %.4f ", rep->val_loss);
        if (rep->step == steps)
            fputc('\n', out);
    } else {
        fprintf(out, "step %ld/%ld loss %.4f batch %.1f ms %.0f tokens/s freeze %.3f phase %s",
                rep->step, steps, loss, batch_ms, rep->tokens_per_s, rep->ratio, rep->phase);
        if (!isnan(rep->val_loss))
            fprintf(out, " validation %.4f", rep->val_loss);
        fputc('\n', out);
    }
    fflush(out);
}

/* --auto-plan's fields of a log line: the plan in use, the drift from it,
 * and on a step that changed something what it did (and the new plan). */
static void log_auto(FILE *out, const trainer *tr, const step_report *rep, int solved)
{
    const tfx_autoplan *a = &tr->ap;
    fprintf(out, ", \"plan\": %d", a->plans);
    if (a->drift_stage >= 0 && !solved && rep->factor > 0.0)
        fprintf(out, ", \"drift\": %.4f, \"drift_stage\": %d", a->drift, a->drift_stage);
    if (a->event[0])
        fprintf(out, ", \"event\": \"%s\"", a->event);
    if (!solved)
        return;
    fprintf(out, ", \"planned_ms\": %.3f, \"planned_unfrozen_ms\": %.3f, \"p2p_ms\": %.4f, "
                     "\"freeze_ratio_per_stage\": [",
            tr->plan.batch_ms_planned, tr->plan.batch_ms_unfrozen, tr->plan.p2p_ms);
    for (int st = 0; st < tr->plan.schedule.stages; st++)
        fprintf(out, "%s%.4f", st ? ", " : "", tr->plan.freeze_ratio_stage[st]);
    fputc(']', out);
}

/* A log line's bytes: per rank the static bytes and the step's peak of
 * microbatch bytes (a launched process 0 knows its own ranks only: the
 * others read 0), and the limit with whether the step kept within it. */
static void log_memory(FILE *out, const trainer *tr, const step_report *rep)
{
    const tfx_train_summary *sum = &tr->sum;
    fputs(", \"static_bytes\": [", out);
    for (int r = 0; r < sum->memory_ranks; r++)
        fprintf(out, "%s%lld", r ? ", " : "", sum->static_bytes[r]);
    fputs("], \"peak_bytes\": [", out);
    for (int r = 0; r < sum->memory_ranks; r++)
        fprintf(out, "%s%lld", r ? ", " : "", tr->step_peak[r]);
    fputc(']', out);
    if (limit_of(tr, 0) <= 0)
        return;
    fputs(", \"memory_limit_bytes\": [", out);
    for (int r = 0; r < sum->memory_ranks; r++)
        fprintf(out, "%s%.0f", r ? ", " : "", limit_of(tr, r));
    fprintf(out, "], \"within_limit\": %s", rep->over_limit ? "false" : "true");
}

static void format_log_line(FILE *out, const trainer *tr, const step_report *rep, int solved)
{
    const char *phase = rep->phase;
    fprintf(out,
            "{\"step\": %ld, \"loss\": %.6f, \"batch_ms\": %.3f, \"step_ms\": %.3f, "
            "\"select_ms\": %.3f, \"train_ms\": %.3f, \"tokens_per_s\": %.1f, "
            "\"freeze_ratio\": %.4f, \"phase\": \"%s\", \"dw_gemms\": %ld, \"gflop\": %.4f, "
            "\"forward_ms\": %.3f, \"backward_ms\": %.3f",
            rep->step, rep->res.loss, rep->res.pipeline_ms, rep->res.step_ms, rep->select_ms,
            tr->train_ms, rep->tokens_per_s, rep->ratio, phase, rep->res.counts.gemms,
            rep->res.flops / 1e9, rep->forward_ms, rep->backward_ms);
    if (!isnan(rep->val_loss))
        fprintf(out, ", \"val_loss\": %.6f", rep->val_loss);
    log_memory(out, tr, rep);
    if (tr->autoplan)
        log_auto(out, tr, rep, solved);
    fputs("}\n", out);
}

/* The step's line in --log.  Returns 0, or an error when it could not be
 * written: a log cut short must not pass for a whole one. */
static int log_step(trainer *tr, const step_report *rep, int solved, tf_error *err)
{
    if (!tr->log.path)
        return 0;
    char *line = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&line, &len);
    if (!out)
        return tf_fail(err, TF_ENOMEM, "--log: out of memory");
    format_log_line(out, tr, rep, solved);
    int rc = fclose(out) == 0 ? tfx_run_log_write(&tr->log, line, len, err)
                              : tf_fail(err, TF_ENOMEM, "--log: out of memory");
    free(line);
    return rc;
}

/* Saves every --checkpoint-every steps and after the last one. */
static int maybe_checkpoint(const trainer *tr, long done, tf_error *err)
{
    const tfx_exec_options *o = tr->o;
    if (!o->checkpoint_dir ||
        !((o->checkpoint_every > 0 && done % o->checkpoint_every == 0) || done == o->steps))
        return 0;
    tfx_checkpoint_meta meta;
    checkpoint_meta(tr, done, &meta);
    return tfx_checkpoint_save(o->checkpoint_dir, tr->run.p, &tr->sel, &meta, err);
}

/* The validation loss after step `done` (1-based), every --eval-every
 * steps and after the last; NaN in between. */
static int maybe_evaluate(trainer *tr, long done, double *loss, tf_error *err)
{
    const tfx_exec_options *o = tr->o;
    *loss = NAN;
    if (!(done == o->steps || (o->eval_every > 0 && done % o->eval_every == 0)))
        return 0;
    int rc = tfx_exec_run_evaluate(&tr->run, loss, err);
    if (rc == 0)
        tr->sum.val_loss = *loss;
    return rc;
}

/* --auto-plan after a step: measuring, watching the drift, or a new plan
 * (*solved).  A bar in progress gets its own line before the solve prints. */
static int autoplan_step(trainer *tr, long step, const step_report *rep, int *solved,
                         tf_error *err)
{
    *solved = 0;
    if (!tr->autoplan)
        return 0;
    tfx_phase ph = tfx_autoplan_phase(&tr->ap, step, &(double){0});
    if (tr->bar && ph == TFX_PHASE_MEASURE_FROZEN &&
        step == tr->ap.measure_from + 2L * tr->ap.measure_pairs - 1)
        fputc('\n', tr->run.out);
    tf_plan plan = {0};
    int rc = tfx_autoplan_after_step(&tr->ap, &tr->run, step, ph, &rep->res,
                                     tr->have_plan ? &tr->plan : NULL, tr->mask, &plan, solved,
                                     err);
    if (rc == 0 && *solved)
        rc = install_plan(tr, &plan, err);
    /* A re-plan's measuring starts: the timing samples restart with it, as
     * the steps before ran on another clock and are set against another
     * plan; its unfrozen steps are the new plan's unfrozen samples. */
    if (rc == 0 && tr->have_plan && tr->ap.measure_from == step + 1)
        tr->n_unfrozen = tr->n_frozen = tr->n_unfrozen_replay = tr->n_frozen_replay = 0;
    tf_plan_free(&plan);
    return rc;
}

/* What --auto-plan did after the step, on a line of its own. */
static void print_event(const trainer *tr)
{
    if (!tr->autoplan || !tr->ap.event[0])
        return;
    fprintf(tr->run.out, "%sauto-plan: %s\n", tr->bar ? "\n" : "", tr->ap.event);
    fflush(tr->run.out);
}

/* The step's mask, timed into rep->select_ms. */
static void choose_frozen(trainer *tr, long step, step_report *rep)
{
    const double began = tf_now_seconds();
    if (rep->all_frozen) {
        const int tensors = tfx_pipeline_layout(tr->run.p)->n_tensors;
        memset(tr->mask, 1, (size_t)tr->run.microbatches * tensors);
        rep->ratio = 1.0;
    } else {
        rep->ratio = select_frozen(tr, step, rep->factor);
    }
    rep->select_ms = 1e3 * (tf_now_seconds() - began);
}

/* stable: the step's gradients into the statistics, timed into
 * rep->select_ms: a cost of the method, so it counts as training time. */
static void observe_step(trainer *tr, step_report *rep)
{
    if (tr->o->select != TFX_SELECT_STABLE)
        return;
    const double began = tf_now_seconds();
    observe_gradients(tr);
    rep->select_ms += 1e3 * (tf_now_seconds() - began);
}

/* The ranks of this process: the step's peak of microbatch bytes into the
 * summary's largest, and whether static + peak exceeded the limit. */
static void note_memory(trainer *tr, step_report *rep)
{
    tfx_train_summary *sum = &tr->sum;
    const int ranks = tr->run.sched.ranks < 64 ? tr->run.sched.ranks : 64;
    sum->memory_ranks = ranks;
    for (int r = 0; r < ranks; r++) {
        tfx_rank_memory mem;
        if (!tfx_pipeline_rank_memory(tr->run.p, r, &mem))
            continue;
        sum->static_bytes[r] = mem.static_bytes;
        if (mem.peak_bytes > sum->peak_bytes[r])
            sum->peak_bytes[r] = mem.peak_bytes;
        tr->step_peak[r] = mem.peak_bytes;
        const double limit = limit_of(tr, r);
        if (limit > 0 && (double)(mem.static_bytes + mem.peak_bytes) > limit)
            rep->over_limit = 1;
    }
    /* Steps at a plan's full ratios are the ones the plan fits; warm-up,
     * measuring and ramp steps hold what they hold. */
    if (tr->have_plan && rep->factor >= 1.0 && !rep->all_frozen)
        sum->over_limit_steps += rep->over_limit;
    else
        tr->over_limit_unplanned += rep->over_limit;
}

static int train_step(trainer *tr, long step, tf_error *err)
{
    step_report rep = {.step = step + 1};
    step_phase(tr, step, &rep);
    choose_frozen(tr, step, &rep);
    int rc = tfx_exec_run_step(&tr->run, step, tr->mask, &rep.res, err);
    if (rc < 0)
        return rc;
    if (!isfinite(rep.res.loss))
        return tf_fail(err, TF_ERUNTIME, "step %ld: the loss is %g (diverged)", step + 1,
                       rep.res.loss);
    observe_step(tr, &rep);
    note_memory(tr, &rep);
    const double batch_tokens = (double)tr->run.microbatches * tr->run.tokens;
    rep.tokens_per_s = batch_tokens / ((rep.res.step_ms + rep.select_ms) / 1e3);
    action_means(tr, &rep);
    /* Recorded against the plan it ran with, before a re-plan's measuring
     * restarts the samples. */
    record(tr, &rep);
    int solved = 0;
    if ((rc = autoplan_step(tr, step, &rep, &solved, err)) < 0)
        return rc;
    if ((rc = maybe_evaluate(tr, step + 1, &rep.val_loss, err)) < 0)
        return rc;
    print_progress(tr->run.out, tr->bar, &rep, tr->o->steps);
    print_event(tr);
    if ((rc = log_step(tr, &rep, solved, err)) < 0)
        return rc;
    return maybe_checkpoint(tr, step + 1, err);
}

/* ---- summary --------------------------------------------------------------- */

static void summarize(trainer *tr)
{
    tfx_train_summary *sum = &tr->sum;
    const double batch_tokens = (double)tr->run.microbatches * tr->run.tokens;
    sum->last_step = tr->o->steps > tr->start ? tr->o->steps : tr->start;
    sum->entropy_floor = tr->run.corpus.entropy_floor;
    sum->best_bigram = tr->run.corpus.best_bigram;
    sum->gflops = tr->train_ms > 0 ? tr->flops / (tr->train_ms * 1e6) : 0.0;
    sum->unfrozen_batch_ms = tf_median(tr->unfrozen_ms, tr->n_unfrozen);
    sum->frozen_batch_ms = tf_median(tr->frozen_ms, tr->n_frozen);
    double us = tf_median(tr->unfrozen_step, tr->n_unfrozen);
    double fs = tf_median(tr->frozen_step, tr->n_frozen);
    sum->unfrozen_tokens_per_s = us > 0 ? batch_tokens / (us / 1e3) : 0.0;
    sum->frozen_tokens_per_s = fs > 0 ? batch_tokens / (fs / 1e3) : 0.0;
    if (tr->have_plan) {
        sum->planned_unfrozen_ms = tr->plan.batch_ms_unfrozen;
        sum->planned_ms = tr->plan.batch_ms_planned;
    }
    sum->unfrozen_replay_ms = tf_median(tr->unfrozen_replay, tr->n_unfrozen_replay);
    sum->frozen_replay_ms = tf_median(tr->frozen_replay, tr->n_frozen_replay);
    sum->plans = tr->autoplan ? tr->ap.plans : 0;
}

/* Where measured and planned batch times part: the plan's DAG (with its
 * lag) under each step's own measured action times gives what the plan
 * would say had it known them; the clock's excess over that is what the DAG
 * does not model (thread start, sends, wake-ups beyond the lag, joins). */
static void print_replay(const trainer *tr, FILE *out)
{
    const tfx_train_summary *sum = &tr->sum;
    if (!tr->n_unfrozen_replay && !tr->n_frozen_replay)
        return;
    fprintf(out, "the plan's DAG (lag %.3f ms) under each step's measured action times:",
            tr->plan.p2p_ms);
    if (tr->n_unfrozen_replay)
        fprintf(out, " unfrozen %.2f ms (clock %+.2f ms)", sum->unfrozen_replay_ms,
                sum->unfrozen_batch_ms - sum->unfrozen_replay_ms);
    if (tr->n_frozen_replay)
        fprintf(out, "%s with the plan %.2f ms (clock %+.2f ms)", tr->n_unfrozen_replay ? "," : "",
                sum->frozen_replay_ms, sum->frozen_batch_ms - sum->frozen_replay_ms);
    fputc('\n', out);
}

/* Measured against planned batch time, and tokens/s with and without
 * freezing. */
static void print_timing(const trainer *tr, FILE *out)
{
    const tfx_train_summary *sum = &tr->sum;
    const int nu = tr->n_unfrozen, nf = tr->n_frozen, plan = tr->have_plan;
    if (nu)
        fprintf(out, "batch time without freezing: measured %.2f ms (median of %d %s)%s",
                sum->unfrozen_batch_ms, nu, tf_plural(nu, "step", "steps"), plan ? "" : "\n");
    if (nu && plan)
        fprintf(out, ", planned %.2f ms\n", sum->planned_unfrozen_ms);
    if (nf && plan)
        fprintf(out,
                "batch time with the plan's freezing: measured %.2f ms (median of %d %s), "
                "planned %.2f ms\n",
                sum->frozen_batch_ms, nf, tf_plural(nf, "step", "steps"), sum->planned_ms);
    else if (nf)
        fprintf(out, "batch time with freeze ratio %.2f: measured %.2f ms (median of %d %s)\n",
                tr->o->freeze_ratio, sum->frozen_batch_ms, nf, tf_plural(nf, "step", "steps"));
    if (nu)
        fprintf(out, "tokens/s without freezing: %.0f\n", sum->unfrozen_tokens_per_s);
    if (nf)
        fprintf(out, "tokens/s with freezing:    %.0f (%+.1f%%)\n", sum->frozen_tokens_per_s,
                sum->unfrozen_tokens_per_s > 0
                    ? 100.0 * (sum->frozen_tokens_per_s / sum->unfrozen_tokens_per_s - 1.0)
                    : 0.0);
    if (nu && nf && plan && tr->plan.batch_ms_planned > 0)
        fprintf(out, "speedup: measured %.3fx, planned %.3fx\n",
                sum->unfrozen_batch_ms / sum->frozen_batch_ms, tr->plan.speedup);
    if (plan)
        print_replay(tr, out);
    if (tr->autoplan)
        fprintf(out, "auto-plan: %d %s solved in the run (%d %s)\n", sum->plans,
                tf_plural(sum->plans, "plan", "plans"), sum->plans > 0 ? sum->plans - 1 : 0,
                tf_plural(sum->plans - 1, "re-plan", "re-plans"));
}

/* Per rank its static bytes and the most microbatch bytes it held in a
 * step; under a limit (--memory-limit or the plan's), whether every step
 * kept within it. */
static void print_memory(const trainer *tr, FILE *out)
{
    const tfx_train_summary *sum = &tr->sum;
    for (int r = 0; r < sum->memory_ranks; r++) {
        if (!sum->static_bytes[r])
            continue; /* a rank of another process */
        fprintf(out, "memory rank %d: static %.3f MiB, peak activations %.3f MiB (%lld bytes), "
                     "together %.3f MiB\n",
                r, sum->static_bytes[r] / 1048576.0, sum->peak_bytes[r] / 1048576.0,
                sum->peak_bytes[r], (sum->static_bytes[r] + sum->peak_bytes[r]) / 1048576.0);
    }
    if (limit_of(tr, 0) <= 0)
        return;
    fprintf(out, "memory limit %.3f MiB (rank 0): %s", limit_of(tr, 0) / 1048576.0,
            sum->over_limit_steps ? "exceeded at the plan's ratios"
                                  : "every step at the plan's ratios within it on every rank");
    if (sum->over_limit_steps)
        fprintf(out, " (%ld %s)", sum->over_limit_steps,
                tf_plural(sum->over_limit_steps, "step", "steps"));
    if (tr->over_limit_unplanned)
        fprintf(out, "; %ld warm-up, measuring or ramp %s over it", tr->over_limit_unplanned,
                tf_plural(tr->over_limit_unplanned, "step", "steps"));
    fputc('\n', out);
}

static void print_summary(const trainer *tr)
{
    const tfx_train_summary *sum = &tr->sum;
    FILE *out = tr->run.out;
    if (sum->steps_run == 0) {
        fprintf(out, "nothing to do: the checkpoint is at step %ld of %d\n", tr->start,
                tr->o->steps);
        return;
    }
    fprintf(out, "final loss %.4f (first %.4f), validation %.4f nats/byte", sum->final_loss,
            sum->first_loss, sum->val_loss);
    if (sum->entropy_floor >= 0)
        fprintf(out, "; entropy floor %.4f, best bigram %.4f", sum->entropy_floor,
                sum->best_bigram);
    else
        fprintf(out, "; best bigram %.4f (the training bytes' own)", sum->best_bigram);
    fputc('\n', out);
    print_timing(tr, out);
    print_memory(tr, out);
    const int ranks = tr->run.sched.ranks;
    fprintf(out, "compute: %.2f GFLOP/s (GEMM-equivalent, %.2f per rank) over %.1f s of steps\n",
            sum->gflops, sum->gflops / ranks, tr->train_ms / 1e3);
}

int tfx_exec_train(const tfx_exec_options *o, tfx_train_summary *summary, tf_error *err)
{
    if (o->steps < 0 || o->warmup < 0 || o->ramp < 0)
        return tf_fail(err, TF_EINVAL, "--steps %d / --warmup %d / --ramp %d: must be >= 0",
                       o->steps, o->warmup, o->ramp);
    trainer tr = {0};
    int rc = trainer_open(&tr, o, err);
    for (long step = tr.start; rc == 0 && step < o->steps; step++)
        rc = train_step(&tr, step, err);
    if (rc == 0) {
        summarize(&tr);
        print_summary(&tr);
        if (summary)
            *summary = tr.sum;
    }
    return trainer_close(&tr, rc, err);
}
