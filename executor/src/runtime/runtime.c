/* runtime.c - the pipeline runtime: rank threads, messages, optimizer, and
 * the launched mode's gathering of step results (see runtime.h). */
#include "tfx/runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tf/dag.h"
#include "tf/util.h"
#include "tfx/registry.h"

struct tfx_pipeline {
    tf_schedule schedule;
    tfx_model_layout layout;
    tfx_pipeline_options opts;
    int split_backward;
    tfx_backend *backends;    /* ranks */
    tfx_transport transport;
    tfx_stage *stages;        /* schedule.stages */
    double *action_ms;        /* n_actions */
    double *action_start_ms;  /* n_actions */
    /* Launched mode: this process runs ranks [first_local, first_local +
     * n_local) (all ranks in the single-process mode). */
    int processes, process, first_local, n_local;
    tfx_transport control;    /* launched: socket transport between processes */
    int control_shared;       /* control is also the data transport (registry.h) */
    atomic_int data_ready;    /* transport is set (for the remote-abort hook) */
    int broken;               /* launched: a step failed; later steps repeat it */
    tf_error broken_err;
};

/* Tags of the launched mode's control messages (data tags are >= 0). */
enum { TAG_REPORT = -1, TAG_VERDICT = -2 };

/* What one rank thread needs for one phase of a step. */
typedef struct rank_job {
    tfx_pipeline *p;
    int rank;
    const tfx_step_input *in;
    double t0;                /* step start (seconds) */
    atomic_int *first_failure;
    int rc;
    tf_error err;
} rank_job;

enum { MSG_ACTIVATION = 0, MSG_GRADIENT = 1 };

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
}

static int is_local_rank(const tfx_pipeline *p, int rank)
{
    return rank >= p->first_local && rank < p->first_local + p->n_local;
}

int tfx_pipeline_has_stage(const tfx_pipeline *p, int stage)
{
    return stage >= 0 && stage < p->schedule.stages &&
           is_local_rank(p, p->schedule.stage_rank[stage]);
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

static long message_tag(const tfx_pipeline *p, int kind, int stage, int mb)
{
    return ((long)kind * p->schedule.stages + stage) * p->schedule.microbatches + mb;
}

int tfx_pipeline_create(const tf_schedule *s, const tfx_model_config *c,
                        const tfx_pipeline_options *o, tfx_pipeline **out, tf_error *err)
{
    int rc = 0;
    tf_dag dag = {0};
    tfx_pipeline *p = NULL;
    *out = NULL;
    if (s->ranks < 1 || s->stages < 1 || s->microbatches < 1)
        return tf_fail(err, TF_EINVAL, "pipeline: %d ranks, %d stages, %d microbatches",
                       s->ranks, s->stages, s->microbatches);
    /* An order that deadlocks would block forever on a receive: refuse it. */
    TFX_TRY(tf_dag_build(s, 0.0, &dag, err));
    tf_dag_free(&dag);

    TFX_CALLOC(p, 1);
    p->opts = *o;
    if (!p->opts.backend)
        p->opts.backend = "cpu";
    atomic_init(&p->data_ready, 0);
    p->processes = o->processes > 1 ? o->processes : 1;
    p->process = p->processes > 1 ? o->process_rank : 0;
    p->first_local = 0;
    p->n_local = s->ranks;
    if (p->processes > 1) {
        if (p->process < 0 || p->process >= p->processes) {
            rc = tf_fail(err, TF_EINVAL, "pipeline: process %d of %d", p->process, p->processes);
            goto fail;
        }
        if (s->ranks % p->processes != 0) {
            rc = tf_fail(err, TF_EINVAL,
                         "pipeline: %d ranks cannot be split evenly over %d processes",
                         s->ranks, p->processes);
            goto fail;
        }
        p->n_local = s->ranks / p->processes;
        p->first_local = p->process * p->n_local;
    }
    TFX_TRY(tf_schedule_copy(s, &p->schedule) < 0
                ? tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__)
                : 0);
    TFX_TRY(tfx_model_layout_build(c, s->stages, &p->layout, err));
    for (int i = 0; i < s->n_actions; i++)
        if (s->actions[i].type == TF_ACT_I || s->actions[i].type == TF_ACT_W)
            p->split_backward = 1;
    TFX_CALLOC(p->action_ms, s->n_actions);
    TFX_CALLOC(p->action_start_ms, s->n_actions);
    for (int st = 0; st < s->stages; st++) {
        int r = s->stage_rank[st];
        if (r < 0 || r >= s->ranks) {
            rc = tf_fail(err, TF_EINVAL, "pipeline: stage %d is on rank %d of %d", st, r,
                         s->ranks);
            goto fail;
        }
    }
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
    for (int st = 0; st < s->stages; st++) {
        int r = s->stage_rank[st];
        if (!is_local_rank(p, r))
            continue;
        TFX_TRY(tfx_stage_create(&p->layout, st, p->backends[r], s->microbatches,
                                 p->split_backward, p->opts.seed, &p->stages[st], err));
    }
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
    tfx_model_layout_free(&p->layout);
    tf_schedule_free(&p->schedule);
    free(p);
}

/* Compute time of an action, on the backend's own clock (backend.h);
 * begin also records the wall-clock start (for start offsets) in *t_begin. */
static int compute_begin(rank_job *job, double *t_begin, tf_error *err)
{
    const tfx_backend *be = &job->p->backends[job->rank];
    *t_begin = tf_now_seconds();
    return be->ops->timer_start(be->ctx, err);
}

static int compute_end(rank_job *job, double *ms, tf_error *err)
{
    const tfx_backend *be = &job->p->backends[job->rank];
    return be->ops->timer_stop(be->ctx, ms, err);
}

/* Runs one action of rank job->rank; returns 0 or an error in job->err. */
static int run_action(rank_job *job, int index)
{
    tfx_pipeline *p = job->p;
    const tf_schedule *s = &p->schedule;
    const tf_action *a = &s->actions[index];
    tfx_stage *st = &p->stages[a->stage];
    const tfx_transport tr = p->transport;
    const int M = s->microbatches, N = st->tokens, m = a->microbatch;
    const size_t bytes = tfx_stage_boundary_bytes(st);
    const int first = a->stage == 0, last = a->stage == s->stages - 1;
    tf_error *err = &job->err;
    int rc = 0;
    double t_begin = 0.0, ms = 0.0;

    const unsigned char *frozen = NULL;
    if (job->in->frozen)
        frozen = job->in->frozen + (size_t)m * p->layout.n_tensors + st->first_tensor;

    switch (a->type) {
    case TF_ACT_F:
        if (!first)
            TFX_TRY(tr.ops->recv(tr.ctx, job->rank, s->stage_rank[a->stage - 1],
                                 message_tag(p, MSG_ACTIVATION, a->stage, m),
                                 tfx_stage_input(st, m), bytes, err));
        TFX_TRY(compute_begin(job, &t_begin, err));
        TFX_TRY(tfx_stage_forward(st, m, first ? job->in->tokens + (size_t)m * N : NULL,
                                  last ? job->in->targets + (size_t)m * N : NULL,
                                  1.0f / ((float)N * M), err));
        TFX_TRY(compute_end(job, &ms, err));
        if (!last)
            TFX_TRY(tr.ops->send(tr.ctx, job->rank, s->stage_rank[a->stage + 1],
                                 message_tag(p, MSG_ACTIVATION, a->stage + 1, m),
                                 tfx_stage_output(st, m), bytes, err));
        break;
    case TF_ACT_B:
    case TF_ACT_I:
        if (!last)
            TFX_TRY(tr.ops->recv(tr.ctx, job->rank, s->stage_rank[a->stage + 1],
                                 message_tag(p, MSG_GRADIENT, a->stage, m),
                                 tfx_stage_grad_in(st, m), bytes, err));
        TFX_TRY(compute_begin(job, &t_begin, err));
        TFX_TRY(tfx_stage_backward_input(st, m, err));
        if (a->type == TF_ACT_B)
            TFX_TRY(tfx_stage_backward_weight(st, m, frozen, err));
        TFX_TRY(compute_end(job, &ms, err));
        if (!first)
            TFX_TRY(tr.ops->send(tr.ctx, job->rank, s->stage_rank[a->stage - 1],
                                 message_tag(p, MSG_GRADIENT, a->stage - 1, m),
                                 tfx_stage_grad_out(st, m), bytes, err));
        break;
    case TF_ACT_W:
        TFX_TRY(compute_begin(job, &t_begin, err));
        TFX_TRY(tfx_stage_backward_weight(st, m, frozen, err));
        TFX_TRY(compute_end(job, &ms, err));
        break;
    }
    p->action_ms[index] = ms;
    p->action_start_ms[index] = (t_begin - job->t0) * 1e3;
fail:
    return rc;
}

static void *rank_actions_thread(void *arg)
{
    rank_job *job = arg;
    tfx_pipeline *p = job->p;
    const tf_schedule *s = &p->schedule;
    char name[32];
    for (int st = 0; st < s->stages; st++)
        if (s->stage_rank[st] == job->rank)
            tfx_stage_zero_grads(&p->stages[st]);
    for (int i = s->rank_offset[job->rank]; i < s->rank_offset[job->rank + 1]; i++) {
        if (job->rank == p->opts.fail_rank &&
            i - s->rank_offset[job->rank] == p->opts.fail_action) {
            job->rc = tf_fail(&job->err, TF_ERUNTIME, "injected failure before action %s",
                              tf_action_format(&s->actions[i], name));
        } else {
            job->rc = run_action(job, i);
        }
        if (job->rc < 0) {
            /* The first rank to fail is the cause; the others only stopped. */
            int none = -1;
            atomic_compare_exchange_strong(job->first_failure, &none, job->rank);
            p->transport.ops->abort(p->transport.ctx, job->rank, job->err.msg);
            return NULL;
        }
    }
    return NULL;
}

/* Tensors of stage st to update: unfrozen in at least one microbatch. */
static void updated_tensors(const tfx_pipeline *p, const tfx_stage *st,
                            const unsigned char *frozen, unsigned char *update)
{
    for (int i = 0; i < st->n_tensors; i++) {
        update[i] = frozen ? 0 : 1;
        for (int m = 0; frozen && m < p->schedule.microbatches && !update[i]; m++)
            if (!frozen[(size_t)m * p->layout.n_tensors + st->first_tensor + i])
                update[i] = 1;
    }
}

static void *rank_optimizer_thread(void *arg)
{
    rank_job *job = arg;
    tfx_pipeline *p = job->p;
    unsigned char *update = malloc((size_t)p->layout.n_tensors);
    if (!update) {
        job->rc = tf_fail(&job->err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
        return NULL;
    }
    for (int st = 0; st < p->schedule.stages; st++) {
        if (p->schedule.stage_rank[st] != job->rank)
            continue;
        updated_tensors(p, &p->stages[st], job->in->frozen, update);
        tfx_stage_optimizer_step(&p->stages[st], update, &p->opts.adamw);
    }
    free(update);
    job->rc = p->backends[job->rank].ops->synchronize(p->backends[job->rank].ctx, &job->err);
    return NULL;
}

/* Runs fn on one thread per job (jobs[i].rank == jobs[0].rank + i) and
 * joins them.  Returns 0 or the error of the rank that failed first (when
 * the threads record one), whose job *cause_job (may be NULL) points to. */
static int run_ranks(tfx_pipeline *p, rank_job *jobs, int R, void *(*fn)(void *),
                     atomic_int *first_failure, rank_job **cause_job, tf_error *err)
{
    if (cause_job)
        *cause_job = NULL;
    pthread_t *threads = calloc((size_t)R, sizeof *threads);
    if (!threads)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    int started = 0, rc = 0;
    for (; started < R; started++) {
        if (pthread_create(&threads[started], NULL, fn, &jobs[started]) != 0) {
            rc = tf_fail(err, TF_ERUNTIME, "could not start the thread of rank %d",
                         jobs[started].rank);
            p->transport.ops->abort(p->transport.ctx, jobs[started].rank, err->msg);
            break;
        }
    }
    for (int r = 0; r < started; r++)
        pthread_join(threads[r], NULL);
    free(threads);
    if (rc < 0)
        return rc;
    int cause = atomic_load(first_failure);
    cause = cause >= 0 ? cause - jobs[0].rank : -1;
    for (int r = 0; cause < 0 && r < R; r++)
        if (jobs[r].rc < 0)
            cause = r;
    if (cause >= 0) {
        if (cause_job)
            *cause_job = &jobs[cause];
        return tf_fail(err, jobs[cause].rc, "rank %d failed (all ranks stopped): %s",
                       jobs[cause].rank, jobs[cause].err.msg);
    }
    return 0;
}

static int step_launched(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                         tf_error *err);

int tfx_pipeline_step(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                      tf_error *err)
{
    if (p->processes > 1)
        return step_launched(p, in, res, err);
    const tf_schedule *s = &p->schedule;
    const int R = s->ranks;
    atomic_int first_failure;
    int rc = 0;
    rank_job *jobs = calloc((size_t)R, sizeof *jobs);
    if (!jobs)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    memset(res, 0, sizeof *res);
    for (int st = 0; st < s->stages; st++)
        memset(&p->stages[st].counts, 0, sizeof p->stages[st].counts);

    double t0 = tf_now_seconds();
    atomic_init(&first_failure, -1);
    for (int r = 0; r < R; r++)
        jobs[r] = (rank_job){.p = p, .rank = r, .in = in, .t0 = t0,
                             .first_failure = &first_failure};
    rc = run_ranks(p, jobs, R, rank_actions_thread, &first_failure, NULL, err);
    double t1 = tf_now_seconds();
    int dropped = p->transport.ops->reset(p->transport.ctx);
    if (rc == 0 && dropped)
        rc = tf_fail(err, TF_ERUNTIME, "pipeline: %d messages were sent but never received",
                     dropped);
    if (rc < 0)
        goto done;

    if (in->apply_optimizer) {
        for (int r = 0; r < R; r++)
            jobs[r] = (rank_job){.p = p, .rank = r, .in = in, .t0 = t0,
                                 .first_failure = &first_failure};
        TFX_TRY(run_ranks(p, jobs, R, rank_optimizer_thread, &first_failure, NULL, err));
        unsigned char *update = malloc((size_t)p->layout.n_tensors);
        if (!update) {
            rc = tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
            goto fail;
        }
        for (int st = 0; st < s->stages; st++) {
            updated_tensors(p, &p->stages[st], in->frozen, update);
            for (int i = 0; i < p->stages[st].n_tensors; i++)
                res->tensors_updated += update[i];
        }
        free(update);
    }
    double loss = 0.0;
    const tfx_stage *last = &p->stages[s->stages - 1];
    for (int m = 0; m < s->microbatches; m++)
        loss += last->act[m].loss_sum;
    res->loss = loss / ((double)last->tokens * s->microbatches);
    for (int st = 0; st < s->stages; st++) {
        res->counts.gemms += p->stages[st].counts.gemms;
        res->counts.reductions += p->stages[st].counts.reductions;
        res->counts.skipped += p->stages[st].counts.skipped;
    }
    res->pipeline_ms = (t1 - t0) * 1e3;
    res->step_ms = (tf_now_seconds() - t0) * 1e3;
fail:
done:
    free(jobs);
    return rc;
}

/* ---- launched mode ------------------------------------------------------------ */

/* What a process reports to process 0 after the actions of a step, and what
 * process 0 sends back merged; followed on the wire by the compute times
 * and the start offsets of every action (n_actions doubles each; a report
 * fills the entries of its own ranks' actions). */
typedef struct step_report {
    double pipeline_ms;  /* report: this process's; merged: the largest */
    double loss;         /* mean token loss, from the process of the last stage */
    int64_t has_loss;
    int64_t gemms, reductions, skipped;
} step_report;

static void pack_report(const tfx_pipeline *p, const step_report *r, unsigned char *buf)
{
    const size_t n = (size_t)p->schedule.n_actions;
    memcpy(buf, r, sizeof *r);
    memcpy(buf + sizeof *r, p->action_ms, n * sizeof(double));
    memcpy(buf + sizeof *r + n * sizeof(double), p->action_start_ms, n * sizeof(double));
}

/* Copies the head of a packed report into *r, and the timings of the
 * actions [a0, a1) into the pipeline's arrays. */
static void unpack_report(tfx_pipeline *p, const unsigned char *buf, step_report *r, int a0,
                          int a1)
{
    const size_t n = (size_t)p->schedule.n_actions;
    const unsigned char *ms = buf + sizeof *r, *start = ms + n * sizeof(double);
    memcpy(r, buf, sizeof *r);
    if (a1 > a0) {
        memcpy(p->action_ms + a0, ms + (size_t)a0 * sizeof(double),
               (size_t)(a1 - a0) * sizeof(double));
        memcpy(p->action_start_ms + a0, start + (size_t)a0 * sizeof(double),
               (size_t)(a1 - a0) * sizeof(double));
    }
}

/* A launched step failed with rc / err: name the rank that failed first as
 * the control transport heard of it, make sure every process hears of it,
 * and keep the error for later steps.  Returns the (possibly restated)
 * error code. */
static int launched_failure(tfx_pipeline *p, int rc, tf_error *err)
{
    int rank = -1;
    char msg[512];
    if (tfx_transport_socket_abort_cause(&p->control, &rank, msg, sizeof msg) == 1 &&
        !is_local_rank(p, rank))
        rc = tf_fail(err, TF_ERUNTIME, "rank %d failed (all ranks stopped): %s", rank, msg);
    else
        p->control.ops->abort(p->control.ctx, p->first_local, err->msg);
    p->broken = 1;
    p->broken_err = *err;
    return rc;
}

/* Launched mode: the actions of this process's ranks, the exchange of the
 * step's figures through process 0, then AdamW (see runtime.h). */
static int step_launched(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                         tf_error *err)
{
    const tf_schedule *s = &p->schedule;
    const tfx_model_layout *l = &p->layout;
    const int n = s->n_actions, per = p->n_local, lead = p->first_local;
    const size_t bytes = sizeof(step_report) + 2 * (size_t)n * sizeof(double);
    const tfx_transport c = p->control;
    tf_error local_err = {0};
    atomic_int first_failure;
    rank_job *jobs = NULL, *cause = NULL;
    unsigned char *buf = NULL, *other = NULL;
    int rc = 0;
    if (!err)
        err = &local_err;
    memset(res, 0, sizeof *res);
    if (p->broken)
        return tf_fail(err, TF_ERUNTIME, "an earlier step failed: %s", p->broken_err.msg);
    TFX_CALLOC(jobs, per);
    TFX_CALLOC(buf, bytes);
    TFX_CALLOC(other, bytes);
    for (int st = 0; st < s->stages; st++)
        memset(&p->stages[st].counts, 0, sizeof p->stages[st].counts);

    const double t0 = tf_now_seconds();
    atomic_init(&first_failure, -1);
    for (int i = 0; i < per; i++)
        jobs[i] = (rank_job){.p = p, .rank = lead + i, .in = in, .t0 = t0,
                             .first_failure = &first_failure};
    rc = run_ranks(p, jobs, per, rank_actions_thread, &first_failure, &cause, err);
    const double t1 = tf_now_seconds();
    if (rc < 0) {
        /* Tell every process (a no-op when the transport already knows). */
        if (cause)
            c.ops->abort(c.ctx, cause->rank, cause->err.msg);
        goto failed;
    }

    /* This process's part of the result, computed as in one process. */
    step_report mine = {.pipeline_ms = (t1 - t0) * 1e3};
    const int last_stage = s->stages - 1;
    if (tfx_pipeline_has_stage(p, last_stage)) {
        const tfx_stage *last = &p->stages[last_stage];
        double loss = 0.0;
        for (int m = 0; m < s->microbatches; m++)
            loss += last->act[m].loss_sum;
        mine.loss = loss / ((double)last->tokens * s->microbatches);
        mine.has_loss = 1;
    }
    for (int st = 0; st < s->stages; st++) {
        mine.gemms += p->stages[st].counts.gemms;
        mine.reductions += p->stages[st].counts.reductions;
        mine.skipped += p->stages[st].counts.skipped;
    }
    pack_report(p, &mine, buf);
    if (p->process != 0) {
        if ((rc = c.ops->send(c.ctx, lead, 0, TAG_REPORT, buf, bytes, err)) < 0 ||
            (rc = c.ops->recv(c.ctx, lead, 0, TAG_VERDICT, buf, bytes, err)) < 0)
            goto failed;
        unpack_report(p, buf, &mine, 0, n);
    } else {
        for (int q = 1; q < p->processes; q++) {
            step_report theirs;
            if ((rc = c.ops->recv(c.ctx, 0, q * per, TAG_REPORT, other, bytes, err)) < 0)
                goto failed;
            unpack_report(p, other, &theirs, s->rank_offset[q * per],
                          s->rank_offset[(q + 1) * per]);
            if (theirs.pipeline_ms > mine.pipeline_ms)
                mine.pipeline_ms = theirs.pipeline_ms;
            if (theirs.has_loss) {
                mine.loss = theirs.loss;
                mine.has_loss = 1;
            }
            mine.gemms += theirs.gemms;
            mine.reductions += theirs.reductions;
            mine.skipped += theirs.skipped;
        }
        pack_report(p, &mine, buf);
        for (int q = 1; q < p->processes; q++)
            if ((rc = c.ops->send(c.ctx, 0, q * per, TAG_VERDICT, buf, bytes, err)) < 0)
                goto failed;
    }
    if (!mine.has_loss) {
        rc = tf_fail(err, TF_ERUNTIME, "pipeline: no process reported the loss of stage %d",
                     last_stage);
        goto failed;
    }
    res->loss = mine.loss;
    res->pipeline_ms = mine.pipeline_ms;
    res->counts.gemms = mine.gemms;
    res->counts.reductions = mine.reductions;
    res->counts.skipped = mine.skipped;

    if (in->apply_optimizer) {
        for (int i = 0; i < per; i++)
            jobs[i] = (rank_job){.p = p, .rank = lead + i, .in = in, .t0 = t0,
                                 .first_failure = &first_failure};
        if ((rc = run_ranks(p, jobs, per, rank_optimizer_thread, &first_failure, NULL, err)) < 0)
            goto failed;
        /* Tensors updated over the whole model (the mask is the same
         * everywhere), as one process counts them. */
        for (int st = 0; st < s->stages; st++) {
            int first = l->stage_first_tensor[st], K = l->stage_first_tensor[st + 1] - first;
            for (int i = 0; i < K; i++) {
                int update = in->frozen ? 0 : 1;
                for (int m = 0; in->frozen && m < s->microbatches && !update; m++)
                    if (!in->frozen[(size_t)m * l->n_tensors + first + i])
                        update = 1;
                res->tensors_updated += update;
            }
        }
    }
    res->step_ms = (tf_now_seconds() - t0) * 1e3;
    goto done;
failed:
    rc = launched_failure(p, rc, err);
    goto done;
fail: /* TFX_CALLOC */
    rc = launched_failure(p, rc, err);
done:
    free(jobs);
    free(buf);
    free(other);
    return rc;
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

const tf_schedule *tfx_pipeline_schedule(const tfx_pipeline *p)
{
    return &p->schedule;
}

const double *tfx_pipeline_action_ms(const tfx_pipeline *p)
{
    return p->action_ms;
}

const double *tfx_pipeline_action_start_ms(const tfx_pipeline *p)
{
    return p->action_start_ms;
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
