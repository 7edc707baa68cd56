/* pipeline.c - creating and destroying a pipeline, and what its users read
 * and write between steps (see runtime.h; a step is in step.c and
 * launched.c). */
#include "tfx/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kfac/kfac.h"
#include "runtime_internal.h"
#include "tf/dag.h"
#include "tfx/registry.h"

void tfx_pipeline_options_default(tfx_pipeline_options *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "cpu";
    o->seed = 1;
    tfx_adamw_config_default(&o->adamw);
    o->fail_rank = -1;
    o->fail_action = -1;
    o->processes = 1;
    o->local_rank = -1;
    tfx_kfac_config_default(&o->kfac);
}

int tfx_pipeline_has_stage(const tfx_pipeline *p, int stage)
{
    return stage >= 0 && stage < p->schedule.stages &&
           tfx_pipeline_is_local(p, p->schedule.stage_rank[stage]);
}

tfx_stage *tfx_pipeline_local_stage(tfx_pipeline *p, int stage)
{
    return tfx_pipeline_has_stage(p, stage) ? &p->stages[stage] : NULL;
}

/* Which monotonic clock this process reads: processes of one kernel share
 * CLOCK_MONOTONIC, and the kernel's boot id names it (the host name where
 * there is none).  An FNV-1a hash, compared between processes only. */
static uint64_t tfx_clock_id(void)
{
    char text[256] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f || !fgets(text, sizeof text, f))
        gethostname(text, sizeof text - 1);
    if (f)
        fclose(f);
    uint64_t h = 1469598103934665603ull;
    for (const char *c = text; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return h;
}

/* The device entry of local rank i: the rank itself in one process; see
 * tfx_pipeline_options for the launched mode. */
static int device_index(const tfx_pipeline *p, int i)
{
    const tfx_pipeline_options *o = &p->opts;
    if (p->processes == 1)
        return p->first_local + i;
    if (o->devices && *o->devices)
        return i;
    return (o->local_rank >= 0 ? o->local_rank : p->process) * p->n_local + i;
}

static int create_backends(tfx_pipeline *p, tf_error *err)
{
    for (int i = 0; i < p->n_local; i++) {
        const int r = p->first_local + i;
        tfx_backend_spec spec = {.backend = p->opts.backend,
                                 .devices = p->opts.devices,
                                 .tf32 = p->opts.tf32,
                                 .rank = r,
                                 .device_index = device_index(p, i)};
        int rc = tfx_registry_create_backend(&spec, &p->backends[r], err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The transport between the rank threads, as the registry picks it. */
static int create_transport(tfx_pipeline *p, tf_error *err)
{
    const tfx_pipeline_options *o = &p->opts;
    const tf_schedule *s = &p->schedule;
    tfx_transport_spec spec = {.backend = o->backend,
                               .transport = o->transport,
                               .ranks = s->ranks,
                               .processes = p->processes,
                               .first_local = p->first_local,
                               .n_local = p->n_local,
                               .backends = p->backends,
                               .stages = s->stages,
                               .stage_rank = s->stage_rank,
                               .rendezvous_dir = o->rendezvous_dir,
                               .run_id = o->run_id,
                               .timeout_s = o->timeout_s,
                               .control = &p->control};
    int rc = tfx_registry_create_transport(&spec, &p->transport, err);
    p->control_shared = rc == 0 && p->control.ops && p->transport.ctx == p->control.ctx;
    return rc;
}

/* The control transport heard of a failure in another process: wake this
 * process's ranks blocked on the data transport too (NCCL). */
static void remote_abort_hook(void *arg, int rank, const char *msg)
{
    tfx_pipeline *p = arg;
    /* data_ready first: it orders the reads of control_shared and transport
     * after their writes in create_transport. */
    if (atomic_load(&p->data_ready) && !p->control_shared)
        p->transport.ops->abort(p->transport.ctx, rank, msg);
}

/* Launched mode: connects to the other processes (before anything that can
 * fail on one process only, so such a failure can be told to the others). */
static int create_control(tfx_pipeline *p, tf_error *err)
{
    const tfx_pipeline_options *o = &p->opts;
    tfx_socket_options so = {.ranks = p->schedule.ranks,
                             .processes = p->processes,
                             .process_rank = p->process,
                             .rendezvous_dir = o->rendezvous_dir,
                             .run_id = o->run_id,
                             .timeout_s = o->timeout_s,
                             .on_remote_abort = remote_abort_hook,
                             .on_remote_abort_arg = p};
    return tfx_transport_socket_create(&so, &p->control, err);
}

/* Refuses a schedule the runtime cannot run: no ranks, stages or
 * microbatches, a stage on a rank that does not exist, or an order whose
 * DAG has a cycle (it would block forever on a receive). */
static int check_schedule(const tf_schedule *s, tf_error *err)
{
    tf_dag dag = {0};
    if (s->ranks < 1 || s->stages < 1 || s->microbatches < 1)
        return tf_fail(err, TF_EINVAL, "pipeline: %d ranks, %d stages, %d microbatches",
                       s->ranks, s->stages, s->microbatches);
    int rc = tf_dag_build(s, 0.0, &dag, err);
    tf_dag_free(&dag);
    return rc;
}

static int check_stage_ranks(const tf_schedule *s, tf_error *err)
{
    for (int st = 0; st < s->stages; st++) {
        int r = s->stage_rank[st];
        if (r < 0 || r >= s->ranks)
            return tf_fail(err, TF_EINVAL, "pipeline: stage %d is on rank %d of %d", st, r,
                           s->ranks);
    }
    return 0;
}

/* This process's block of ranks: all of them in one process. */
static int split_ranks(tfx_pipeline *p, const tf_schedule *s, tf_error *err)
{
    const tfx_pipeline_options *o = &p->opts;
    p->processes = o->processes > 1 ? o->processes : 1;
    p->process = p->processes > 1 ? o->process_rank : 0;
    p->first_local = 0;
    p->n_local = s->ranks;
    if (p->processes == 1)
        return 0;
    if (p->process < 0 || p->process >= p->processes)
        return tf_fail(err, TF_EINVAL, "pipeline: process %d of %d", p->process, p->processes);
    if (s->ranks % p->processes != 0)
        return tf_fail(err, TF_EINVAL,
                       "pipeline: %d ranks cannot be split evenly over %d processes", s->ranks,
                       p->processes);
    p->n_local = s->ranks / p->processes;
    p->first_local = p->process * p->n_local;
    return 0;
}

/* The stages of this process's ranks, each on its rank's backend. */
static int create_stages(tfx_pipeline *p, tf_error *err)
{
    const tf_schedule *s = &p->schedule;
    int recompute = p->opts.recompute;
    for (int i = 0; i < s->n_actions; i++) {
        if (s->actions[i].type == TF_ACT_I || s->actions[i].type == TF_ACT_W)
            p->split_backward = 1;
        recompute |= s->actions[i].type == TF_ACT_R;
    }
    for (int st = 0; st < s->stages; st++) {
        int r = s->stage_rank[st];
        if (!tfx_pipeline_is_local(p, r))
            continue;
        const tfx_stage_spec spec = {&p->layout,    st,          p->backends[r],
                                     s->microbatches, p->split_backward, p->opts.seed,
                                     1,              &p->meters[r],       recompute};
        int rc = tfx_stage_create(&spec, &p->stages[st], err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The K-FAC statistics of the stages, when asked for. */
static int create_kfac(tfx_pipeline *p, tf_error *err)
{
    const tf_schedule *s = &p->schedule;
    if (!p->opts.kfac.enabled)
        return 0;
    if (p->processes > 1)
        return tf_fail(err, TF_EINVAL, "--kfac-stats: not in a launched run (%d processes)",
                       p->processes);
    if (!p->transport.ops->ready) /* its waits could not be used */
        return tf_fail(err, TF_EINVAL,
                       "--kfac-stats: the %s transport cannot say whether a message is there",
                       p->transport.ops->name);
    return tfx_kfac_create(&p->opts.kfac, p->stages, s->stages, s->stage_rank, s->ranks,
                           &p->kfac, err);
}

int tfx_pipeline_create(const tf_schedule *s, const tfx_model_config *c,
                        const tfx_pipeline_options *o, tfx_pipeline **out, tf_error *err)
{
    int rc = 0;
    tfx_pipeline *p = NULL;
    *out = NULL;
    TFX_TRY(check_schedule(s, err));
    TFX_CALLOC(p, 1);
    p->opts = *o;
    if (!p->opts.backend)
        p->opts.backend = "cpu";
    atomic_init(&p->data_ready, 0);
    TFX_TRY(split_ranks(p, s, err));
    TFX_TRY(tf_schedule_copy(s, &p->schedule) < 0
                ? tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__)
                : 0);
    TFX_TRY(tfx_model_layout_build(c, s->stages, &p->layout, err));
    TFX_CALLOC(p->action_ms, s->n_actions);
    TFX_CALLOC(p->action_start_ms, s->n_actions);
    TFX_CALLOC(p->action_enter_ms, s->n_actions);
    TFX_CALLOC(p->rank_clock_ms, s->ranks);
    TFX_CALLOC(p->action_bytes, s->n_actions);
    TFX_CALLOC(p->action_rise, s->n_actions);
    TFX_CALLOC(p->recompute_ms, s->n_actions);
    TFX_CALLOC(p->meters, s->ranks);
    p->slow_rank = -1;
    p->slow_factor = 1.0;
    p->clock_id = tfx_clock_id();
    TFX_TRY(check_stage_ranks(s, err));
    /* Refuse a backend or transport that cannot work before waiting for
     * peers. */
    TFX_TRY(tfx_registry_check_transport(p->opts.backend, o->transport, p->processes, err));
    if (p->processes > 1)
        TFX_TRY(create_control(p, err));
    TFX_CALLOC(p->backends, s->ranks);
    TFX_TRY(create_backends(p, err));
    TFX_TRY(create_transport(p, err));
    atomic_store(&p->data_ready, 1);
    TFX_CALLOC(p->stages, s->stages);
    TFX_TRY(create_stages(p, err));
    TFX_TRY(create_kfac(p, err));
    *out = p;
    return 0;
fail:
    /* The other processes must not wait for this one. */
    if (p && p->control.ops)
        p->control.ops->abort(p->control.ctx, p->first_local, err ? err->msg : "set-up failed");
    tfx_pipeline_destroy(p);
    return rc;
}

void tfx_pipeline_destroy(tfx_pipeline *p)
{
    if (!p)
        return;
    tfx_kfac_destroy(p->kfac); /* its copies live in the stages' backends */
    for (int st = 0; p->stages && st < p->schedule.stages; st++)
        tfx_stage_destroy(&p->stages[st]);
    free(p->stages);
    /* The control transport first: after it no remote-abort hook runs. */
    if (p->control.ops)
        p->control.ops->destroy(p->control.ctx);
    if (p->transport.ops && !p->control_shared)
        p->transport.ops->destroy(p->transport.ctx);
    for (int r = 0; p->backends && r < p->schedule.ranks; r++)
        if (p->backends[r].ops)
            p->backends[r].ops->destroy(p->backends[r].ctx);
    free(p->backends);
    free(p->action_ms);
    free(p->action_start_ms);
    free(p->action_enter_ms);
    free(p->rank_clock_ms);
    free(p->action_bytes);
    free(p->action_rise);
    free(p->recompute_ms);
    free(p->meters);
    tfx_model_layout_free(&p->layout);
    tf_schedule_free(&p->schedule);
    free(p);
}

int tfx_pipeline_step(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                      tf_error *err)
{
    if (in->forward_only && in->apply_optimizer)
        return tf_fail(err, TF_EINVAL, "pipeline: a forward-only step has no gradients to apply");
    return p->processes > 1 ? tfx_launched_step(p, in, res, err)
                            : tfx_step_single(p, in, res, err);
}

void tfx_pipeline_abort(tfx_pipeline *p, const char *msg)
{
    if (p && p->processes > 1 && p->control.ops)
        p->control.ops->abort(p->control.ctx, p->first_local, msg);
}

const tfx_model_layout *tfx_pipeline_layout(const tfx_pipeline *p)
{
    return &p->layout;
}

const double *tfx_pipeline_action_ms(const tfx_pipeline *p)
{
    return p->action_ms;
}

const double *tfx_pipeline_action_start_ms(const tfx_pipeline *p)
{
    return p->action_start_ms;
}

const double *tfx_pipeline_action_enter_ms(const tfx_pipeline *p)
{
    return p->action_enter_ms;
}

const double *tfx_pipeline_action_bytes(const tfx_pipeline *p)
{
    return p->action_bytes;
}

const double *tfx_pipeline_action_rise(const tfx_pipeline *p)
{
    return p->action_rise;
}

const double *tfx_pipeline_recompute_ms(const tfx_pipeline *p)
{
    return p->recompute_ms;
}

long long tfx_pipeline_stage_static_bytes(const tfx_pipeline *p, int stage)
{
    return tfx_pipeline_has_stage(p, stage) ? p->stages[stage].static_bytes : 0;
}

int tfx_pipeline_rank_memory(const tfx_pipeline *p, int rank, tfx_rank_memory *out)
{
    memset(out, 0, sizeof *out);
    if (rank < 0 || rank >= p->schedule.ranks || !tfx_pipeline_is_local(p, rank))
        return 0;
    for (int st = 0; st < p->schedule.stages; st++)
        if (p->schedule.stage_rank[st] == rank)
            out->static_bytes += tfx_pipeline_stage_static_bytes(p, st);
    out->held_bytes = p->meters[rank].held;
    out->peak_bytes = p->meters[rank].peak;
    return 1;
}

const double *tfx_pipeline_rank_clock_ms(const tfx_pipeline *p)
{
    return p->rank_clock_ms;
}

void tfx_pipeline_set_slowdown(tfx_pipeline *p, int rank, double factor)
{
    p->slow_rank = rank;
    p->slow_factor = factor > 1.0 ? factor : 1.0;
}

static float *tensor_buffer(tfx_pipeline *p, int tensor, tfx_buffer_kind kind,
                            tfx_stage **st_out)
{
    const tfx_tensor_info *t = &p->layout.tensors[tensor];
    tfx_stage *st = &p->stages[t->stage];
    *st_out = st;
    int i = t->index_in_stage;
    switch (kind) {
    case TFX_BUF_GRAD: return st->grad[i];
    case TFX_BUF_ADAM_M: return st->adam_m[i];
    case TFX_BUF_ADAM_V: return st->adam_v[i];
    default: return st->param[i];
    }
}

void tfx_pipeline_read_tensor(tfx_pipeline *p, int tensor, tfx_buffer_kind kind, float *host)
{
    if (!tfx_pipeline_has_stage(p, p->layout.tensors[tensor].stage)) {
        memset(host, 0, p->layout.tensors[tensor].count * sizeof(float));
        return;
    }
    tfx_stage *st;
    const float *buf = tensor_buffer(p, tensor, kind, &st);
    st->be.ops->download(st->be.ctx, host, buf,
                         p->layout.tensors[tensor].count * sizeof(float));
}

void tfx_pipeline_write_tensor(tfx_pipeline *p, int tensor, tfx_buffer_kind kind,
                               const float *host)
{
    if (!tfx_pipeline_has_stage(p, p->layout.tensors[tensor].stage))
        return;
    tfx_stage *st;
    float *buf = tensor_buffer(p, tensor, kind, &st);
    st->be.ops->upload(st->be.ctx, buf, host, p->layout.tensors[tensor].count * sizeof(float));
}

long tfx_pipeline_tensor_steps(const tfx_pipeline *p, int tensor)
{
    const tfx_tensor_info *t = &p->layout.tensors[tensor];
    if (!tfx_pipeline_has_stage(p, t->stage))
        return 0;
    return p->stages[t->stage].adam_t[t->index_in_stage];
}

void tfx_pipeline_set_tensor_steps(tfx_pipeline *p, int tensor, long steps)
{
    const tfx_tensor_info *t = &p->layout.tensors[tensor];
    if (tfx_pipeline_has_stage(p, t->stage))
        p->stages[t->stage].adam_t[t->index_in_stage] = steps;
}
