/* runtime.c - the pipeline runtime: rank threads, messages, optimizer. */
#include "tfx/runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tf/dag.h"
#include "tf/util.h"
#ifdef TF_HAVE_CUDA
#include "tfx_cuda.h"
#endif

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
    int on_gpu;               /* backends are CUDA: time actions with events */
};

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
}

/* The backend of one rank: CUDA on the GPU the devices list names (with
 * TF32 GEMMs if asked), anything else by name. */
static int create_backend(const tfx_pipeline_options *o, int rank, tfx_backend *out,
                          tf_error *err)
{
#ifdef TF_HAVE_CUDA
    if (strcmp(o->backend, "cuda") == 0) {
        int device, rc = tfx_cuda_device_for_rank(o->devices, rank, &device, err);
        if (rc == 0)
            rc = tfx_backend_cuda_create(rank, device, out, err);
        if (rc == 0 && o->tf32)
            rc = tfx_backend_cuda_set_tf32(out, 1, err);
        return rc;
    }
#endif
    return tfx_backend_create(o->backend, rank, out, err);
}

/* The transport between the rank threads: host copies for the CPU backend,
 * device copies or NCCL for CUDA (host copies of device pointers would be
 * wrong there). */
static int create_transport(tfx_pipeline *p, tf_error *err)
{
    const tfx_pipeline_options *o = &p->opts;
    const tf_schedule *s = &p->schedule;
#ifdef TF_HAVE_CUDA
    if (p->on_gpu) {
        if (!o->transport || strcmp(o->transport, "cuda") == 0)
            return tfx_transport_cuda_create(s->ranks, p->backends, &p->transport, err);
        if (strcmp(o->transport, "nccl") == 0) {
            int *local_ranks = malloc(sizeof *local_ranks * (size_t)s->ranks);
            if (!local_ranks)
                return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
            for (int r = 0; r < s->ranks; r++)
                local_ranks[r] = r;
            tfx_nccl_options nccl = {.world_size = s->ranks,
                                     .n_local = s->ranks,
                                     .local_ranks = local_ranks,
                                     .local_backends = p->backends,
                                     .stages = s->stages,
                                     .stage_rank = s->stage_rank};
            int rc = tfx_transport_nccl_create(&nccl, &p->transport, err);
            free(local_ranks);
            return rc;
        }
        return tf_fail(err, TF_EINVAL, "--transport \"%s\": unknown for the cuda backend "
                                       "(cuda or nccl)", o->transport);
    }
#endif
    if (o->transport && strcmp(o->transport, "local") != 0)
        return tf_fail(err, TF_EINVAL, "--transport \"%s\": the %s backend has only the "
                                       "in-process transport (local)",
                       o->transport, o->backend);
    return tfx_transport_local_create(s->ranks, &p->transport, err);
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
    TFX_TRY(tf_schedule_copy(s, &p->schedule) < 0
                ? tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__)
                : 0);
    TFX_TRY(tfx_model_layout_build(c, s->stages, &p->layout, err));
    for (int i = 0; i < s->n_actions; i++)
        if (s->actions[i].type == TF_ACT_I || s->actions[i].type == TF_ACT_W)
            p->split_backward = 1;
    TFX_CALLOC(p->action_ms, s->n_actions);
    TFX_CALLOC(p->action_start_ms, s->n_actions);
    TFX_CALLOC(p->backends, s->ranks);
    for (int r = 0; r < s->ranks; r++)
        TFX_TRY(create_backend(&p->opts, r, &p->backends[r], err));
#ifdef TF_HAVE_CUDA
    p->on_gpu = tfx_backend_is_cuda(&p->backends[0]);
#endif
    TFX_TRY(create_transport(p, err));
    TFX_CALLOC(p->stages, s->stages);
    for (int st = 0; st < s->stages; st++) {
        int r = s->stage_rank[st];
        if (r < 0 || r >= s->ranks) {
            rc = tf_fail(err, TF_EINVAL, "pipeline: stage %d is on rank %d of %d", st, r,
                         s->ranks);
            goto fail;
        }
        TFX_TRY(tfx_stage_create(&p->layout, st, p->backends[r], s->microbatches,
                                 p->split_backward, p->opts.seed, &p->stages[st], err));
    }
    *out = p;
    return 0;
fail:
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
    if (p->transport.ops)
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

/* Compute time of an action: CUDA events on the GPU, where kernels run
 * asynchronously to the host, else the monotonic clock.  begin records the
 * wall-clock start (for start offsets) in *t_begin. */
static int compute_begin(rank_job *job, double *t_begin, tf_error *err)
{
    *t_begin = tf_now_seconds();
#ifdef TF_HAVE_CUDA
    if (job->p->on_gpu)
        return tfx_backend_cuda_timer_start(&job->p->backends[job->rank], err);
#else
    (void)job;
    (void)err;
#endif
    return 0;
}

static int compute_end(rank_job *job, double t_begin, double *ms, tf_error *err)
{
    *ms = (tf_now_seconds() - t_begin) * 1e3;
#ifdef TF_HAVE_CUDA
    if (job->p->on_gpu)
        return tfx_backend_cuda_timer_stop(&job->p->backends[job->rank], ms, err);
#else
    (void)job;
    (void)err;
#endif
    return 0;
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
        TFX_TRY(compute_end(job, t_begin, &ms, err));
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
        TFX_TRY(compute_end(job, t_begin, &ms, err));
        if (!first)
            TFX_TRY(tr.ops->send(tr.ctx, job->rank, s->stage_rank[a->stage - 1],
                                 message_tag(p, MSG_GRADIENT, a->stage - 1, m),
                                 tfx_stage_grad_out(st, m), bytes, err));
        break;
    case TF_ACT_W:
        TFX_TRY(compute_begin(job, &t_begin, err));
        TFX_TRY(tfx_stage_backward_weight(st, m, frozen, err));
        TFX_TRY(compute_end(job, t_begin, &ms, err));
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

/* Runs fn on one thread per rank and joins them.  Returns 0 or the error of
 * rank *failed_rank (the first failure when the threads record one). */
static int run_ranks(tfx_pipeline *p, rank_job *jobs, void *(*fn)(void *),
                     atomic_int *first_failure, tf_error *err)
{
    const int R = p->schedule.ranks;
    pthread_t *threads = calloc((size_t)R, sizeof *threads);
    if (!threads)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    int started = 0, rc = 0;
    for (; started < R; started++) {
        if (pthread_create(&threads[started], NULL, fn, &jobs[started]) != 0) {
            rc = tf_fail(err, TF_ERUNTIME, "could not start the thread of rank %d", started);
            p->transport.ops->abort(p->transport.ctx, started, err->msg);
            break;
        }
    }
    for (int r = 0; r < started; r++)
        pthread_join(threads[r], NULL);
    free(threads);
    if (rc < 0)
        return rc;
    int cause = atomic_load(first_failure);
    for (int r = 0; cause < 0 && r < R; r++)
        if (jobs[r].rc < 0)
            cause = r;
    if (cause >= 0)
        return tf_fail(err, jobs[cause].rc, "rank %d failed (all ranks stopped): %s", cause,
                       jobs[cause].err.msg);
    return 0;
}

int tfx_pipeline_step(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                      tf_error *err)
{
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
    rc = run_ranks(p, jobs, rank_actions_thread, &first_failure, err);
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
        TFX_TRY(run_ranks(p, jobs, rank_optimizer_thread, &first_failure, err));
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
    tfx_stage *st;
    const float *buf = tensor_buffer(p, tensor, kind, &st);
    st->be.ops->download(st->be.ctx, host, buf,
                         p->layout.tensors[tensor].count * sizeof(float));
}

void tfx_pipeline_write_tensor(tfx_pipeline *p, int tensor, tfx_buffer_kind kind,
                               const float *host)
{
    tfx_stage *st;
    float *buf = tensor_buffer(p, tensor, kind, &st);
    st->be.ops->upload(st->be.ctx, buf, host, p->layout.tensors[tensor].count * sizeof(float));
}

long tfx_pipeline_tensor_steps(const tfx_pipeline *p, int tensor)
{
    const tfx_tensor_info *t = &p->layout.tensors[tensor];
    return p->stages[t->stage].adam_t[t->index_in_stage];
}

void tfx_pipeline_set_tensor_steps(tfx_pipeline *p, int tensor, long steps)
{
    const tfx_tensor_info *t = &p->layout.tensors[tensor];
    p->stages[t->stage].adam_t[t->index_in_stage] = steps;
}
