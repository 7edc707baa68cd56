/* step.c - one step on this process's ranks: a thread per rank runs its
 * actions in the schedule's order, receiving and sending the tensors
 * between stages, then a thread per rank applies AdamW (see runtime.h). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "kfac/kfac.h"
#include "runtime_internal.h"
#include "tf/util.h"

enum { MSG_ACTIVATION = 0, MSG_GRADIENT = 1 };

static long message_tag(const tfx_pipeline *p, int kind, int stage, int mb)
{
    return ((long)kind * p->schedule.stages + stage) * p->schedule.microbatches + mb;
}

/* Testing (tfx_pipeline_set_slowdown): sleeps about ms milliseconds and
 * returns the time actually slept, so the action's time says what the rank
 * really spent. */
static double stretch(double ms)
{
    const double t0 = tf_now_seconds();
    struct timespec ts = {.tv_sec = (time_t)(ms / 1e3),
                          .tv_nsec = (long)(fmod(ms, 1e3) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        continue;
    return (tf_now_seconds() - t0) * 1e3;
}

/* Compute time of an action, on the backend's own clock (backend.h);
 * begin also records the wall-clock start (for start offsets) in *t_begin. */
static int compute_begin(tfx_rank_job *job, double *t_begin, tf_error *err)
{
    const tfx_backend *be = &job->p->backends[job->rank];
    *t_begin = tf_now_seconds();
    return be->ops->timer_start(be->ctx, err);
}

static int compute_end(tfx_rank_job *job, double *ms, tf_error *err)
{
    const tfx_pipeline *p = job->p;
    const tfx_backend *be = &p->backends[job->rank];
    int rc = be->ops->timer_stop(be->ctx, ms, err);
    if (rc == 0 && job->rank == p->slow_rank && p->slow_factor > 1.0)
        *ms += stretch(*ms * (p->slow_factor - 1.0));
    return rc;
}

/* Receives message (from, tag) of the rank into buf.  With K-FAC
 * statistics on, a wait is idle time: until the message is there the rank
 * runs its pending statistics items (kfac/kfac.h), then blocks as before
 * when none is left.  Returns 0 or an error in job->err. */
static int recv_message(tfx_rank_job *job, int from, long tag, void *buf, size_t bytes)
{
    tfx_pipeline *p = job->p;
    const tfx_transport tr = p->transport;
    int rc = p->kfac ? tfx_kfac_fill_wait(p->kfac, job->rank, &tr, from, tag, &job->err) : 0;
    return rc < 0 ? rc : tr.ops->recv(tr.ctx, job->rank, from, tag, buf, bytes, &job->err);
}

/* Receives what action `index` waits for from another stage: F the
 * activation of the stage before, B and I the gradient of the stage after;
 * W nothing.  Returns 0 or an error in job->err. */
static int receive_input(tfx_rank_job *job, int index)
{
    tfx_pipeline *p = job->p;
    const tf_schedule *s = &p->schedule;
    const tf_action *a = &s->actions[index];
    tfx_stage *st = &p->stages[a->stage];
    const size_t bytes = tfx_stage_boundary_bytes(st);
    const int m = a->microbatch;
    if (a->type == TF_ACT_F && a->stage > 0)
        return recv_message(job, s->stage_rank[a->stage - 1],
                            message_tag(p, MSG_ACTIVATION, a->stage, m),
                            tfx_stage_input(st, m), bytes);
    if ((a->type == TF_ACT_B || a->type == TF_ACT_I) && a->stage < s->stages - 1)
        return recv_message(job, s->stage_rank[a->stage + 1],
                            message_tag(p, MSG_GRADIENT, a->stage, m),
                            tfx_stage_grad_in(st, m), bytes);
    return 0;
}

/* Sends what action `index` produced for another stage: F's activation
 * forward, B's and I's input gradient back.  Returns 0 or an error. */
static int send_output(tfx_rank_job *job, int index)
{
    tfx_pipeline *p = job->p;
    const tf_schedule *s = &p->schedule;
    const tf_action *a = &s->actions[index];
    tfx_stage *st = &p->stages[a->stage];
    const tfx_transport tr = p->transport;
    const size_t bytes = tfx_stage_boundary_bytes(st);
    const int m = a->microbatch;
    if (a->type == TF_ACT_F && a->stage < s->stages - 1)
        return tr.ops->send(tr.ctx, job->rank, s->stage_rank[a->stage + 1],
                            message_tag(p, MSG_ACTIVATION, a->stage + 1, m),
                            tfx_stage_output(st, m), bytes, &job->err);
    if ((a->type == TF_ACT_B || a->type == TF_ACT_I) && a->stage > 0)
        return tr.ops->send(tr.ctx, job->rank, s->stage_rank[a->stage - 1],
                            message_tag(p, MSG_GRADIENT, a->stage - 1, m),
                            tfx_stage_grad_out(st, m), bytes, &job->err);
    return 0;
}

static const unsigned char *memory_mask(const tfx_rank_job *job, const tf_action *a);

/* A backward whose forward left blocks to recompute and that no R served
 * re-runs them at its own start (as the planner models it). */
static int recompute_at_backward(tfx_rank_job *job, const tf_action *a)
{
    tfx_pipeline *p = job->p;
    tfx_stage *st = &p->stages[a->stage];
    if (!tfx_stage_recompute_pending(st, a->microbatch))
        return 0;
    const double t0 = tf_now_seconds();
    int rc = tfx_stage_hold(st, a->microbatch, TFX_PASS_R, memory_mask(job, a), 0, &job->err);
    if (rc == 0)
        rc = tfx_stage_recompute(st, a->microbatch, &job->err);
    if (rc == 0 && !job->in->forward_only)
        p->recompute_ms[a - p->schedule.actions] = (tf_now_seconds() - t0) * 1e3;
    return rc;
}

/* The compute of action `index`, timed (the times of the last training
 * step are kept; t_enter is when the rank turned to the action, before
 * waiting for its input).  Returns 0 or an error in job->err. */
static int compute(tfx_rank_job *job, int index, double t_enter)
{
    tfx_pipeline *p = job->p;
    const tf_schedule *s = &p->schedule;
    const tf_action *a = &s->actions[index];
    tfx_stage *st = &p->stages[a->stage];
    const int M = s->microbatches, N = st->tokens, m = a->microbatch;
    const int first = a->stage == 0, last = a->stage == s->stages - 1;
    tf_error *err = &job->err;
    int rc = 0;
    double t_begin = t_enter, ms = 0.0;

    const unsigned char *frozen = NULL;
    if (job->in->frozen)
        frozen = job->in->frozen + (size_t)m * p->layout.n_tensors + st->first_tensor;

    p->recompute_ms[index] = 0.0;
    TFX_TRY(compute_begin(job, &t_begin, err));
    switch (a->type) {
    case TF_ACT_F:
        TFX_TRY(tfx_stage_forward(st, m, first ? job->in->tokens + (size_t)m * N : NULL,
                                  last ? job->in->targets + (size_t)m * N : NULL,
                                  1.0f / ((float)N * M), err));
        break;
    case TF_ACT_B:
    case TF_ACT_I:
        TFX_TRY(recompute_at_backward(job, a));
        TFX_TRY(tfx_stage_backward_input(st, m, err));
        if (a->type == TF_ACT_B)
            TFX_TRY(tfx_stage_backward_weight(st, m, frozen, err));
        break;
    case TF_ACT_W: TFX_TRY(tfx_stage_backward_weight(st, m, frozen, err)); break;
    case TF_ACT_R: TFX_TRY(tfx_stage_recompute(st, m, err)); break;
    }
    TFX_TRY(compute_end(job, &ms, err));
    if (!job->in->forward_only) { /* the times are those of the last training step */
        p->action_ms[index] = ms;
        p->action_start_ms[index] = (t_begin - job->t0) * 1e3;
        p->action_enter_ms[index] = (t_enter - job->t0) * 1e3;
    }
fail:
    return rc;
}

/* ---- the microbatch buffers of an action ---------------------------------- */

static tfx_pass pass_of(tf_action_type t)
{
    switch (t) {
    case TF_ACT_F: return TFX_PASS_F;
    case TF_ACT_I: return TFX_PASS_I;
    case TF_ACT_W: return TFX_PASS_W;
    case TF_ACT_R: return TFX_PASS_R;
    default: return TFX_PASS_B;
    }
}

/* The mask the stage's buffers follow for action `index`: its microbatch's
 * frozen tensors when freezing saves memory, else none. */
static const unsigned char *memory_mask(const tfx_rank_job *job, const tf_action *a)
{
    const tfx_pipeline *p = job->p;
    if (!job->in->frozen || !job->in->frozen_saves_memory)
        return NULL;
    return job->in->frozen + (size_t)a->microbatch * p->layout.n_tensors +
           p->stages[a->stage].first_tensor;
}

/* Before the receive of action `index`: the buffers it writes (model.h's
 * tfx_stage_hold).  action_bytes[index] holds the stage's bytes before it
 * until release_buffers turns it into the change; action_rise[index] is
 * what the hold added. */
static int hold_buffers(tfx_rank_job *job, int index)
{
    tfx_pipeline *p = job->p;
    const tf_action *a = &p->schedule.actions[index];
    tfx_stage *st = &p->stages[a->stage];
    if (!job->in->forward_only)
        p->action_bytes[index] = (double)st->held_bytes;
    const int *rb = job->in->recompute_blocks;
    const int recompute = rb ? rb[a->stage * p->schedule.microbatches + a->microbatch] : 0;
    int rc = tfx_stage_hold(st, a->microbatch, pass_of(a->type), memory_mask(job, a), recompute,
                            &job->err);
    if (rc == 0 && !job->in->forward_only)
        p->action_rise[index] = (double)st->held_bytes - p->action_bytes[index];
    return rc;
}

/* After the send of action `index`: frees what nothing later reads (after
 * an evaluation's forward: everything).  An evaluation leaves
 * action_bytes as the last training step set it. */
static void release_buffers(tfx_rank_job *job, int index)
{
    tfx_pipeline *p = job->p;
    const tf_action *a = &p->schedule.actions[index];
    tfx_stage *st = &p->stages[a->stage];
    tfx_pass pass = job->in->forward_only ? TFX_PASS_B : pass_of(a->type);
    tfx_stage_release(st, a->microbatch, pass, memory_mask(job, a));
    if (!job->in->forward_only)
        p->action_bytes[index] = (double)st->held_bytes - p->action_bytes[index];
}

/* K-FAC statistics: after action `index`'s compute, before its buffers are
 * released, the items it feeds are queued.  Returns 0 or an error. */
static int aux_after(tfx_rank_job *job, int index)
{
    const tf_action *a = &job->p->schedule.actions[index];
    if (!job->p->kfac)
        return 0;
    return tfx_kfac_after(job->p->kfac, job->rank, a->type, a->stage, a->microbatch,
                          &job->err);
}

/* Runs one action of rank job->rank: its buffers held, its input in, its
 * compute, its output out, its buffers released.  Returns 0 or an error in
 * job->err. */
static int run_action(tfx_rank_job *job, int index)
{
    const double t_enter = tf_now_seconds();
    int rc = hold_buffers(job, index);
    if (rc == 0)
        rc = receive_input(job, index);
    if (rc == 0)
        rc = compute(job, index, t_enter);
    if (rc == 0)
        rc = aux_after(job, index);
    if (rc == 0)
        rc = send_output(job, index);
    if (rc == 0)
        release_buffers(job, index);
    return rc;
}

/* Runs an overlapped pair (its forward at `index`, its backward next) as
 * the planner models it, one node: the inputs of both in, then the two
 * computes back to back, then the outputs of both out.  This is also what
 * PyTorch's runtime does with OVERLAP_F_B when no custom function overlaps
 * them: its lowering posts both receives before the pair and both sends
 * after it.  Returns 0 or an error in job->err. */
static int run_pair(tfx_rank_job *job, int index)
{
    const double t_enter = tf_now_seconds();
    int rc = hold_buffers(job, index);
    if (rc == 0)
        rc = hold_buffers(job, index + 1);
    if (rc == 0)
        rc = receive_input(job, index);
    if (rc == 0)
        rc = receive_input(job, index + 1);
    if (rc == 0)
        rc = compute(job, index, t_enter);
    /* The forward's items are queued before the backward can recompute
     * into buffers the forward's point at. */
    if (rc == 0)
        rc = aux_after(job, index);
    /* The backward's input is in by now: it waited on nothing of its own. */
    if (rc == 0)
        rc = compute(job, index + 1, tf_now_seconds());
    if (rc == 0)
        rc = aux_after(job, index + 1);
    if (rc == 0)
        rc = send_output(job, index);
    if (rc == 0)
        rc = send_output(job, index + 1);
    if (rc == 0) {
        release_buffers(job, index);
        release_buffers(job, index + 1);
    }
    return rc;
}

/* Microbatches in which tensor i of the model was frozen. */
static int frozen_count(const tfx_pipeline *p, const unsigned char *frozen, int i)
{
    int k = 0;
    for (int m = 0; frozen && m < p->schedule.microbatches; m++)
        k += frozen[(size_t)m * p->layout.n_tensors + i] != 0;
    return k;
}

/* Whether tensor i of the model is updated: unfrozen in at least one
 * microbatch (frozen NULL: every tensor). */
static int tensor_updated(const tfx_pipeline *p, const unsigned char *frozen, int i)
{
    return frozen_count(p, frozen, i) < p->schedule.microbatches;
}

/* With rescale_frozen, a tensor frozen in k of M microbatches holds the sum
 * of M - k microbatch gradients over M: scaled by M / (M - k) it is their
 * mean, an unbiased estimate of the batch gradient. */
static void rescale_frozen(const tfx_pipeline *p, const tfx_step_input *in, tfx_stage *st)
{
    const int M = p->schedule.microbatches;
    for (int i = 0; in->rescale_frozen && i < st->n_tensors; i++) {
        int k = frozen_count(p, in->frozen, st->first_tensor + i);
        if (k > 0 && k < M)
            st->be.ops->scale(st->be.ctx, st->grad[i], (float)M / (float)(M - k),
                              p->layout.tensors[st->first_tensor + i].count);
    }
}

static void *rank_actions_thread(void *arg)
{
    tfx_rank_job *job = arg;
    tfx_pipeline *p = job->p;
    const tf_schedule *s = &p->schedule;
    const int forward_only = job->in->forward_only;
    char name[32];
    if (p->kfac)
        tfx_kfac_step_begin(p->kfac, job->rank, job->t0, !forward_only);
    for (int st = 0; st < s->stages && !forward_only; st++)
        if (s->stage_rank[st] == job->rank)
            tfx_stage_zero_grads(&p->stages[st]);
    for (int i = s->rank_offset[job->rank]; i < s->rank_offset[job->rank + 1]; i++) {
        /* The forward actions alone, in the schedule's order, cannot
         * deadlock: they are a part of an order that does not (a pair's
         * forward then runs alone, its receive no longer waiting on its
         * backward's). */
        int pair = !forward_only && s->actions[i].pair == TF_PAIR_FIRST &&
                   i + 1 < s->rank_offset[job->rank + 1];
        if (forward_only && s->actions[i].type != TF_ACT_F)
            continue;
        if (job->rank == p->opts.fail_rank &&
            i - s->rank_offset[job->rank] == p->opts.fail_action) {
            job->rc = tf_fail(&job->err, TF_ERUNTIME, "injected failure before action %s",
                              tf_action_format(&s->actions[i], name));
        } else if (pair) {
            job->rc = run_pair(job, i);
            i++;
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
    if (p->kfac) /* what is left stays queued: running it now would lengthen the step */
        tfx_kfac_step_end(p->kfac, job->rank);
    for (int st = 0; st < s->stages && job->in->rescale_frozen; st++)
        if (s->stage_rank[st] == job->rank)
            rescale_frozen(p, job->in, &p->stages[st]);
    return NULL;
}

static void *rank_optimizer_thread(void *arg)
{
    tfx_rank_job *job = arg;
    tfx_pipeline *p = job->p;
    unsigned char *update = malloc((size_t)p->layout.n_tensors);
    if (!update) {
        job->rc = tf_fail(&job->err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
        return NULL;
    }
    for (int st = 0; st < p->schedule.stages; st++) {
        if (p->schedule.stage_rank[st] != job->rank)
            continue;
        const tfx_stage *stage = &p->stages[st];
        for (int i = 0; i < stage->n_tensors; i++)
            update[i] = (unsigned char)tensor_updated(p, job->in->frozen, stage->first_tensor + i);
        tfx_stage_optimizer_step(&p->stages[st], update, &p->opts.adamw);
    }
    free(update);
    job->rc = p->backends[job->rank].ops->synchronize(p->backends[job->rank].ctx, &job->err);
    return NULL;
}

/* Runs fn on one thread per job (jobs[i].rank == jobs[0].rank + i) and
 * joins them.  Returns 0 or the error of the rank that failed first (when
 * the threads record one), whose job *cause_job (may be NULL) points to. */
static int run_ranks(tfx_pipeline *p, tfx_rank_job *jobs, int R, void *(*fn)(void *),
                     atomic_int *first_failure, tfx_rank_job **cause_job, tf_error *err)
{
    if (cause_job)
        *cause_job = NULL;
    pthread_t *threads = calloc(R > 0 ? (size_t)R : 1, sizeof *threads);
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

int tfx_step_begin(tfx_step_run *sr, tfx_pipeline *p, const tfx_step_input *in,
                   tf_error *err)
{
    memset(sr, 0, sizeof *sr);
    sr->p = p;
    sr->in = in;
    atomic_init(&sr->first_failure, -1);
    for (int st = 0; st < p->schedule.stages; st++) {
        memset(&p->stages[st].counts, 0, sizeof p->stages[st].counts);
        p->stages[st].flops = 0.0;
    }
    for (int r = 0; r < p->schedule.ranks; r++)
        p->meters[r].peak = p->meters[r].held;
    sr->jobs = calloc((size_t)p->n_local, sizeof *sr->jobs);
    if (!sr->jobs)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    sr->t0 = tf_now_seconds();
    return 0;
}

/* One phase: fn on a fresh thread per local rank. */
static int run_phase(tfx_step_run *sr, void *(*fn)(void *), tf_error *err)
{
    tfx_pipeline *p = sr->p;
    for (int i = 0; i < p->n_local; i++)
        sr->jobs[i] = (tfx_rank_job){.p = p, .rank = p->first_local + i, .in = sr->in,
                                     .t0 = sr->t0, .first_failure = &sr->first_failure};
    return run_ranks(p, sr->jobs, p->n_local, fn, &sr->first_failure, &sr->cause, err);
}

int tfx_step_actions(tfx_step_run *sr, tf_error *err)
{
    int rc = run_phase(sr, rank_actions_thread, err);
    sr->t1 = tf_now_seconds();
    return rc;
}

int tfx_step_optimizer(tfx_step_run *sr, tfx_step_result *res, tf_error *err)
{
    const tfx_pipeline *p = sr->p;
    int rc = run_phase(sr, rank_optimizer_thread, err);
    for (int i = 0; rc == 0 && i < p->layout.n_tensors; i++)
        res->tensors_updated += tensor_updated(p, sr->in->frozen, i);
    return rc;
}

void tfx_step_end(tfx_step_run *sr)
{
    free(sr->jobs);
    sr->jobs = NULL;
}

void tfx_step_totals_local(const tfx_pipeline *p, tfx_step_totals *t)
{
    const tf_schedule *s = &p->schedule;
    memset(t, 0, sizeof *t);
    if (tfx_pipeline_is_local(p, s->stage_rank[s->stages - 1])) {
        const tfx_stage *last = &p->stages[s->stages - 1];
        double loss = 0.0;
        for (int m = 0; m < s->microbatches; m++)
            loss += last->act[m].loss_sum;
        t->loss = loss / ((double)last->tokens * s->microbatches);
        t->has_loss = 1;
    }
    for (int st = 0; st < s->stages; st++) {
        t->flops += p->stages[st].flops;
        t->counts.gemms += p->stages[st].counts.gemms;
        t->counts.reductions += p->stages[st].counts.reductions;
        t->counts.skipped += p->stages[st].counts.skipped;
    }
}

int tfx_step_single(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                    tf_error *err)
{
    tfx_step_run sr;
    memset(res, 0, sizeof *res);
    int rc = tfx_step_begin(&sr, p, in, err);
    if (rc == 0) {
        rc = tfx_step_actions(&sr, err);
        int dropped = p->transport.ops->reset(p->transport.ctx);
        if (rc == 0 && dropped)
            rc = tf_fail(err, TF_ERUNTIME,
                         "pipeline: %d messages were sent but never received", dropped);
    }
    if (rc == 0 && p->kfac && !in->forward_only)
        rc = tfx_kfac_step_report(p->kfac, p->first_local, p->n_local, err);
    if (rc == 0 && in->apply_optimizer)
        rc = tfx_step_optimizer(&sr, res, err);
    if (rc == 0) {
        tfx_step_totals t;
        tfx_step_totals_local(p, &t);
        res->loss = t.loss;
        res->counts = t.counts;
        res->flops = t.flops;
        res->pipeline_ms = (sr.t1 - sr.t0) * 1e3;
        res->step_ms = (tf_now_seconds() - sr.t0) * 1e3;
    }
    tfx_step_end(&sr);
    return rc;
}
