/* launched.c - a step of a launched run (one process per rank or per block
 * of ranks): the actions of this process's ranks, the exchange of the
 * step's figures through process 0, then AdamW (see runtime.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"
#include "tf/util.h"

/* Tags of the launched mode's control messages (data tags are >= 0). */
enum { TAG_REPORT = -1, TAG_VERDICT = -2 };

/* What a process reports to process 0 after the actions of a step, and what
 * process 0 sends back merged; followed on the wire by the compute times
 * and the start offsets of every action (n_actions doubles each; a report
 * fills the entries of its own ranks' actions). */
typedef struct step_report {
    double pipeline_ms;  /* report: this process's; merged: the largest */
    double loss;         /* mean token loss, from the process of the last stage */
    double flops;
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
        !tfx_pipeline_is_local(p, rank))
        rc = tf_fail(err, TF_ERUNTIME, "rank %d failed (all ranks stopped): %s", rank, msg);
    else
        p->control.ops->abort(p->control.ctx, p->first_local, err->msg);
    p->broken = 1;
    p->broken_err = *err;
    return rc;
}

/* This process's part of the result, computed as in one process. */
static void local_report(const tfx_step_run *sr, step_report *r)
{
    tfx_step_totals t;
    tfx_step_totals_local(sr->p, &t);
    *r = (step_report){.pipeline_ms = (sr->t1 - sr->t0) * 1e3,
                       .loss = t.loss,
                       .flops = t.flops,
                       .has_loss = t.has_loss,
                       .gemms = t.counts.gemms,
                       .reductions = t.counts.reductions,
                       .skipped = t.counts.skipped};
}

/* Process 0's side of the exchange: adds every other process's report to
 * its own (the batch time is the largest), then sends everyone the merged
 * one.  buf holds its packed report; other is room for one more. */
static int merge_reports(tfx_pipeline *p, step_report *mine, unsigned char *buf,
                         unsigned char *other, size_t bytes, tf_error *err)
{
    const tf_schedule *s = &p->schedule;
    const tfx_transport c = p->control;
    const int per = p->n_local;
    int rc = 0;
    for (int q = 1; q < p->processes; q++) {
        step_report theirs;
        if ((rc = c.ops->recv(c.ctx, 0, q * per, TAG_REPORT, other, bytes, err)) < 0)
            return rc;
        unpack_report(p, other, &theirs, s->rank_offset[q * per], s->rank_offset[(q + 1) * per]);
        if (theirs.pipeline_ms > mine->pipeline_ms)
            mine->pipeline_ms = theirs.pipeline_ms;
        if (theirs.has_loss) {
            mine->loss = theirs.loss;
            mine->has_loss = 1;
        }
        mine->flops += theirs.flops;
        mine->gemms += theirs.gemms;
        mine->reductions += theirs.reductions;
        mine->skipped += theirs.skipped;
    }
    pack_report(p, mine, buf);
    for (int q = 1; q < p->processes && rc == 0; q++)
        rc = c.ops->send(c.ctx, 0, q * per, TAG_VERDICT, buf, bytes, err);
    return rc;
}

/* Every process ends with the merged report in *mine and every action's
 * times in the pipeline.  The exchange is also the step's barrier. */
static int exchange_reports(tfx_pipeline *p, step_report *mine, tf_error *err)
{
    const size_t bytes = sizeof(step_report) + 2 * (size_t)p->schedule.n_actions * sizeof(double);
    const tfx_transport c = p->control;
    const int lead = p->first_local;
    unsigned char *buf = calloc(1, bytes), *other = calloc(1, bytes);
    int rc = 0;
    if (!buf || !other) {
        rc = tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    } else {
        pack_report(p, mine, buf);
        if (p->process == 0)
            rc = merge_reports(p, mine, buf, other, bytes, err);
        else if ((rc = c.ops->send(c.ctx, lead, 0, TAG_REPORT, buf, bytes, err)) == 0 &&
                 (rc = c.ops->recv(c.ctx, lead, 0, TAG_VERDICT, buf, bytes, err)) == 0)
            unpack_report(p, buf, mine, 0, p->schedule.n_actions);
    }
    free(buf);
    free(other);
    return rc;
}

/* The actions, the exchange and AdamW; any error goes to launched_failure. */
static int launched_phases(tfx_step_run *sr, tfx_step_result *res, tf_error *err)
{
    tfx_pipeline *p = sr->p;
    const tfx_transport c = p->control;
    int rc = tfx_step_actions(sr, err);
    if (rc < 0) {
        /* Tell every process (a no-op when the transport already knows). */
        if (sr->cause)
            c.ops->abort(c.ctx, sr->cause->rank, sr->cause->err.msg);
        return rc;
    }
    step_report mine;
    local_report(sr, &mine);
    if ((rc = exchange_reports(p, &mine, err)) < 0)
        return rc;
    if (!mine.has_loss)
        return tf_fail(err, TF_ERUNTIME, "pipeline: no process reported the loss of stage %d",
                       p->schedule.stages - 1);
    res->loss = mine.loss;
    res->pipeline_ms = mine.pipeline_ms;
    res->counts.gemms = mine.gemms;
    res->counts.reductions = mine.reductions;
    res->counts.skipped = mine.skipped;
    res->flops = mine.flops;
    if (sr->in->apply_optimizer && (rc = tfx_step_optimizer(sr, res, err)) < 0)
        return rc;
    res->step_ms = (tf_now_seconds() - sr->t0) * 1e3;
    return 0;
}

int tfx_launched_step(tfx_pipeline *p, const tfx_step_input *in, tfx_step_result *res,
                      tf_error *err)
{
    tf_error local_err = {0};
    tfx_step_run sr;
    if (!err)
        err = &local_err;
    memset(res, 0, sizeof *res);
    if (p->broken)
        return tf_fail(err, TF_ERUNTIME, "an earlier step failed: %s", p->broken_err.msg);
    int rc = tfx_step_begin(&sr, p, in, err);
    if (rc == 0)
        rc = launched_phases(&sr, res, err);
    if (rc < 0)
        rc = launched_failure(p, rc, err);
    tfx_step_end(&sr);
    return rc;
}
