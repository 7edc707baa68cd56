/* exec_run.c - what profiling and training share: the options' defaults
 * and schedule, the checks of a launched run, and a pipeline with its data
 * (see exec_internal.h). */
#include "exec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tf/util.h"

#define BUILTIN_CORPUS_BYTES (1u << 20)

void tfx_exec_options_default(tfx_exec_options *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "cpu";
    o->steps = 60;
    o->warmup = 10;
    o->ramp = 10;
    o->checkpoint_every = 10;
    o->eval_batches = 4;
    o->seed = 1;
    o->select = TFX_SELECT_RANDOM;
    tfx_model_config_default(&o->model);
    tfx_adamw_config_default(&o->adamw);
    tfx_kfac_config_default(&o->kfac);
    o->max_freeze_ratio = 0.9;
    o->profile_warmup = 3;
    o->profile_steps = 5;
    o->progress = -1;
    o->fail_rank = -1;
    o->fail_action = -1;
    o->slow_rank = -1;
    o->slow_factor = 1.0;
    o->objective = TF_OBJECTIVE_LEAST_FREEZE;
    o->solver = TF_SOLVER_AUTO;
    o->replan_threshold = 0.1;
    o->max_action_ratio = 1.0;
    o->replan_patience = 3;
    o->replan_interval = 20;
    o->replan_steps = 2;
    memset(&o->launch, 0, sizeof o->launch);
    o->launch.world_size = 1;
    o->launch.local_rank = -1;
}

int tfx_exec_launched(const tfx_exec_options *o)
{
    return o->launch.world_size > 1;
}

/* --schedule-csv: the order in the file, whose shape must agree with the
 * pipeline options given beside it. */
static int schedule_from_csv(const tfx_exec_options *o, tf_schedule *out, tf_error *err)
{
    int rc = tf_schedule_read_csv(o->schedule_csv, out, err);
    if (rc < 0)
        return rc;
    if (o->ranks && o->ranks != out->ranks)
        rc = tf_fail(err, TF_EINVAL, "--schedule-csv %s: %d ranks, but --ranks %d was given",
                     o->schedule_csv, out->ranks, o->ranks);
    else if (o->microbatches && o->microbatches != out->microbatches)
        rc = tf_fail(err, TF_EINVAL,
                     "--schedule-csv %s: %d microbatches, but --microbatches %d was given",
                     o->schedule_csv, out->microbatches, o->microbatches);
    else if (o->stages_per_rank && o->stages_per_rank != out->stages_per_rank)
        rc = tf_fail(err, TF_EINVAL,
                     "--schedule-csv %s: %d stages per rank, but --stages-per-rank %d was given",
                     o->schedule_csv, out->stages_per_rank, o->stages_per_rank);
    if (rc < 0)
        tf_schedule_free(out);
    return rc;
}

int tfx_exec_options_schedule(const tfx_exec_options *o, tf_schedule *out, tf_error *err)
{
    if (o->schedule_csv)
        return schedule_from_csv(o, out, err);
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

/* Checks that the launch fits the pipeline: its process count must divide
 * the ranks, and nothing is checkpointed. */
static int check_launch(const tfx_exec_options *o, const tf_schedule *s, tf_error *err)
{
    const tfx_launch_env *e = &o->launch;
    const char *size_var = e->size_var[0] ? e->size_var : "WORLD_SIZE";
    if (!tfx_exec_launched(o))
        return 0;
    if (s->ranks % e->world_size != 0) {
        char what[4200];
        ranks_source(o, what, sizeof what);
        return tf_fail(err, TF_EINVAL,
                       "environment %s=%d: %d processes cannot run the %d pipeline ranks of %s "
                       "(start one process per rank, or a number of processes that divides "
                       "the ranks)",
                       size_var, e->world_size, e->world_size, s->ranks, what);
    }
    if (o->checkpoint_dir)
        return tf_fail(err, TF_EINVAL,
                       "--checkpoint %s: not supported with one process per rank (%s=%d); run "
                       "in one process to checkpoint",
                       o->checkpoint_dir, size_var, e->world_size);
    return 0;
}

/* Launched processes other than 0 print nothing: their output goes to
 * /dev/null. */
static int open_output(tfx_exec_run *r, tf_error *err)
{
    const tfx_exec_options *o = r->o;
    r->out = o->out ? o->out : stdout;
    if (tfx_exec_launched(o) && o->launch.rank != 0) {
        r->null_out = fopen("/dev/null", "w");
        if (!r->null_out)
            return tf_fail(err, TF_EIO, "/dev/null: cannot open for writing");
        r->out = r->null_out;
    }
    return 0;
}

static int open_corpus(const tfx_exec_options *o, tfx_corpus *c, tf_error *err)
{
    if (o->data_path)
        return tfx_corpus_load(o->data_path, o->model.context, c, err);
    return tfx_corpus_builtin(o->source ? o->source : "base", BUILTIN_CORPUS_BYTES,
                              o->model.context, c, err);
}

int tfx_exec_write_source(const tfx_exec_options *o, tf_error *err)
{
    tfx_corpus c;
    int rc = tfx_corpus_builtin(o->source ? o->source : "base", BUILTIN_CORPUS_BYTES,
                                o->model.context, &c, err);
    if (rc < 0)
        return rc;
    rc = tf_write_file_atomic(o->source_out, c.bytes, c.len, err);
    if (rc == 0)
        fprintf(o->out ? o->out : stdout, "wrote %s: the %s\n", o->source_out, c.source);
    tfx_corpus_free(&c);
    return rc;
}

static int create_pipeline(tfx_exec_run *r, tf_error *err)
{
    const tfx_exec_options *o = r->o;
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    po.backend = o->backend;
    po.devices = o->devices;
    po.transport = o->transport;
    po.tf32 = o->tf32;
    po.seed = o->seed;
    po.adamw = o->adamw;
    po.kfac = o->kfac;
    po.fail_rank = o->fail_rank;
    po.fail_action = o->fail_action;
    /* Always able to: a profile measures recomputation, and the static bytes
     * it counts (one block's buffers for recomputed forwards) are the same
     * in every run. */
    po.recompute = 1;
    if (tfx_exec_launched(o)) {
        po.processes = o->launch.world_size;
        po.process_rank = o->launch.rank;
        po.local_rank = o->launch.local_rank;
    }
    return tfx_pipeline_create(&r->sched, &o->model, &po, &r->p, err);
}

int tfx_exec_run_open(tfx_exec_run *r, const tfx_exec_options *o, tf_error *err)
{
    int rc = 0;
    r->o = o;
    r->microbatches = r->sched.microbatches;
    r->tokens = tfx_model_microbatch_tokens(&o->model);
    TFX_TRY(check_launch(o, &r->sched, err));
    if (o->slow_rank >= r->sched.ranks)
        TFX_TRY(tf_fail(err, TF_EINVAL, "--test-slow-rank %d: the pipeline has %d ranks",
                        o->slow_rank, r->sched.ranks));
    TFX_TRY(open_output(r, err));
    TFX_TRY(open_corpus(o, &r->corpus, err));
    TFX_TRY(create_pipeline(r, err));
    TFX_CALLOC(r->batch_tokens, (size_t)r->microbatches * r->tokens);
    TFX_CALLOC(r->batch_targets, (size_t)r->microbatches * r->tokens);
fail:
    return rc;
}

/* The run's batch buffers, shaped for its model and pipeline. */
static tfx_batch run_batch(const tfx_exec_run *r)
{
    return (tfx_batch){r->microbatches, r->o->model.microbatch_size, r->o->model.context,
                       r->batch_tokens, r->batch_targets};
}

int tfx_exec_run_step(tfx_exec_run *r, long step, const unsigned char *frozen,
                      tfx_step_result *res, tf_error *err)
{
    const tfx_exec_options *o = r->o;
    if (o->slow_rank >= 0 && step + 1 >= o->slow_from)
        tfx_pipeline_set_slowdown(r->p, o->slow_rank, o->slow_factor);
    const tfx_batch batch = run_batch(r);
    tfx_corpus_batch(&r->corpus, o->seed, step, &batch);
    tfx_step_input in = {.tokens = r->batch_tokens, .targets = r->batch_targets,
                         .frozen = frozen, .apply_optimizer = 1,
                         .rescale_frozen = o->freeze_rescale,
                         .frozen_saves_memory = !o->no_freeze_memory,
                         .recompute_blocks = r->recompute_blocks};
    return tfx_pipeline_step(r->p, &in, res, err);
}

int tfx_exec_run_evaluate(tfx_exec_run *r, double *loss, tf_error *err)
{
    const tfx_exec_options *o = r->o;
    const int K = o->eval_batches > 0 ? o->eval_batches : 1;
    double sum = 0.0;
    for (int b = 0; b < K; b++) {
        tfx_step_result res;
        const tfx_batch batch = run_batch(r);
        tfx_corpus_validation_batch(&r->corpus, b, K, &batch);
        tfx_step_input in = {.tokens = r->batch_tokens, .targets = r->batch_targets,
                             .forward_only = 1};
        int rc = tfx_pipeline_step(r->p, &in, &res, err);
        if (rc < 0)
            return rc;
        sum += res.loss;
    }
    *loss = sum / K;
    return 0;
}

void tfx_exec_run_close(tfx_exec_run *r, int rc, const tf_error *err)
{
    if (rc < 0)
        tfx_pipeline_abort(r->p, err ? err->msg : "failed");
    if (r->null_out)
        fclose(r->null_out);
    free(r->batch_tokens);
    free(r->batch_targets);
    tfx_pipeline_destroy(r->p);
    tfx_corpus_free(&r->corpus);
    tf_schedule_free(&r->sched);
    memset(r, 0, sizeof *r);
}

void tfx_exec_run_describe(const tfx_exec_run *r, const char *what)
{
    const tf_schedule *s = &r->sched;
    fprintf(r->out, "%s %s: %d %s x %d %s per rank, %d %s x %d tokens, %.0f parameters", what,
            s->name, s->ranks, tf_plural(s->ranks, "rank", "ranks"), s->stages_per_rank,
            tf_plural(s->stages_per_rank, "stage", "stages"), s->microbatches,
            tf_plural(s->microbatches, "microbatch", "microbatches"), r->tokens,
            tfx_model_parameter_count(tfx_pipeline_layout(r->p), -1));
}

int tfx_exec_check_writable(const tfx_exec_options *o, const char *flag, const char *path,
                            tf_error *err)
{
    if (!path || (tfx_exec_launched(o) && o->launch.rank != 0) || access(path, W_OK) == 0)
        return 0;
    int why = errno;
    if (why == ENOENT) {
        char folder[4096];
        snprintf(folder, sizeof folder, "%s", path);
        char *slash = strrchr(folder, '/');
        if (!slash)
            snprintf(folder, sizeof folder, ".");
        else
            slash[slash == folder] = '\0';
        if (access(folder, W_OK) == 0)
            return 0;
        why = errno;
    }
    return tf_fail(err, TF_EIO, "%s %s: cannot write there: %s", flag, path, strerror(why));
}
