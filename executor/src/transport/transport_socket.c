/* transport_socket.c - messages between ranks in different processes over
 * TCP (see transport.h; the connections are made by socket_setup.c).
 *
 * Frames: a 32-byte header (magic, kind, from rank, to rank, tag, payload
 * bytes) and the payload, in the host's byte order (every process runs the
 * same build; the hello checks the byte order).  DATA carries a tensor or a
 * control message, ABORT a failing rank and its message, CLOSE is the
 * goodbye after which the peer sends nothing more.
 *
 * Threads: a send writes its frame from the caller's thread under the
 * connection's send lock (bounded by the timeout); one receiver thread per
 * connection always drains frames into the mailbox, so a send completes
 * whatever the peer's rank threads are doing (eager).  recv waits in the
 * mailbox with a deadline.  Nothing blocks without a deadline except the
 * receiver threads' reads, which destroy ends with shutdown().
 */
#include "tfx/transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "socket_internal.h"
#include "tf/util.h"

static int process_of(const tfx_socket *t, int rank)
{
    return rank / t->per_process;
}

static void rank_span(const tfx_socket *t, int process, char *buf, size_t size)
{
    int lo = process * t->per_process, hi = lo + t->per_process - 1;
    if (lo == hi)
        snprintf(buf, size, "rank %d", lo);
    else
        snprintf(buf, size, "ranks %d-%d", lo, hi);
}

/* Sends one frame to peer p before deadline (holding its send lock, which
 * is taken with the same deadline).  Returns 0 or -1 with errno. */
static int send_frame(tfx_socket_peer *p, const frame_header *h, const void *payload,
                      double deadline)
{
    struct timespec until;
    double left = deadline - tf_now_seconds();
    clock_gettime(CLOCK_REALTIME, &until);
    if (left > 0) {
        until.tv_sec += (time_t)left;
        until.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    int e = pthread_mutex_timedlock(&p->send_lock, &until);
    if (e != 0) {
        errno = e == ETIMEDOUT ? ETIMEDOUT : e;
        return -1;
    }
    int rc = tfx_socket_write_all(p->fd, h, sizeof *h, deadline);
    if (rc == 0 && h->bytes)
        rc = tfx_socket_write_all(p->fd, payload, (size_t)h->bytes, deadline);
    int saved = errno;
    pthread_mutex_unlock(&p->send_lock);
    errno = saved;
    return rc;
}

/* Marks the transport failed because `rank` failed with msg (the first
 * abort wins) and wakes every waiting receive.  With `tell`, an ABORT frame
 * goes to every peer still connected (bounded wait each).  Returns 1 when
 * this call aborted the transport, 0 when it already was. */
static int abort_transport(tfx_socket *t, int rank, const char *msg, int tell)
{
    pthread_mutex_lock(&t->mb.lock);
    if (!tfx_mailbox_abort_locked(&t->mb, rank, msg)) {
        pthread_mutex_unlock(&t->mb.lock);
        return 0;
    }
    int *send_to = calloc((size_t)t->processes, sizeof *send_to);
    for (int q = 0; send_to && q < t->processes; q++) {
        tfx_socket_peer *p = &t->peers[q];
        send_to[q] = tell && p->fd >= 0 && !p->broken && !p->closed;
    }
    char text[512];
    snprintf(text, sizeof text, "%s", t->mb.abort_msg);
    pthread_mutex_unlock(&t->mb.lock);
    if (!send_to)
        return 1; /* out of memory: the peers learn from the closed connection */
    frame_header h = {FRAME_MAGIC, KIND_ABORT, rank, -1, 0, strlen(text) + 1};
    for (int q = 0; q < t->processes; q++)
        if (send_to[q] &&
            send_frame(&t->peers[q], &h, text, tf_now_seconds() + ABORT_SEND_S) < 0) {
            pthread_mutex_lock(&t->mb.lock);
            t->peers[q].broken = 1;
            pthread_mutex_unlock(&t->mb.lock);
        }
    free(send_to);
    return 1;
}

/* The transport was aborted by another process: abort here (without
 * telling the others, who heard it themselves) and call the hook. */
static void remote_abort(tfx_socket *t, int rank, const char *msg, int tell)
{
    if (abort_transport(t, rank, msg, tell) && t->on_remote_abort)
        t->on_remote_abort(t->on_remote_abort_arg, rank, msg);
}

/* Peer p's connection failed: mark it and, unless its end was expected
 * (this transport is closing, or the peer said goodbye), abort the
 * transport naming the process (`what` says how it failed). */
static void connection_lost(tfx_socket_peer *p, int ended_after_goodbye, const char *what)
{
    tfx_socket *t = p->t;
    char msg[512];
    pthread_mutex_lock(&t->mb.lock);
    int quiet = t->closing || (ended_after_goodbye && p->closed);
    p->broken = 1;
    pthread_mutex_unlock(&t->mb.lock);
    if (quiet)
        return;
    snprintf(msg, sizeof msg, "%s", what);
    remote_abort(t, p->process * t->per_process, msg, 1);
}

/* The peer sent something that is not a frame of ours. */
static void protocol_error(tfx_socket_peer *p, const char *msg)
{
    tfx_socket *t = p->t;
    pthread_mutex_lock(&t->mb.lock);
    p->broken = 1;
    pthread_mutex_unlock(&t->mb.lock);
    remote_abort(t, p->process * t->per_process, msg, 1);
}

static int frame_valid(const tfx_socket *t, const frame_header *h)
{
    return h->magic == FRAME_MAGIC && h->bytes <= MAX_PAYLOAD &&
           (h->kind != KIND_DATA ||
            (h->to >= 0 && h->to < t->ranks && process_of(t, h->to) == t->self));
}

/* Reads a DATA frame's payload into the mailbox.  Returns 0 to go on, or
 * -1 when the connection is done for. */
static int receive_data(tfx_socket_peer *p, const frame_header *h, const char *span)
{
    tfx_socket *t = p->t;
    char msg[512];
    tfx_mail *m = tfx_mail_host(h->from, h->to, (long)h->tag, (size_t)h->bytes, NULL);
    if (!m) {
        snprintf(msg, sizeof msg,
                 "socket transport: out of memory for a %llu-byte message from process %d",
                 (unsigned long long)h->bytes, p->process);
        remote_abort(t, t->self * t->per_process, msg, 1);
        return -1;
    }
    if (h->bytes && tfx_socket_read_all(p->fd, m->payload, m->bytes, 0) != 0) {
        int e = errno;
        tfx_mail_free(m);
        snprintf(msg, sizeof msg,
                 "process %d (%s) closed its connection in the middle of a message (%s): it "
                 "died or was killed",
                 p->process, span, strerror(e));
        connection_lost(p, 0, msg);
        return -1;
    }
    /* After an abort nobody receives it: the step has failed. */
    if (tfx_mailbox_post(&t->mb, m, NULL) < 0)
        tfx_mail_free(m);
    return 0;
}

/* Reads an ABORT frame's message and aborts this process too (without
 * telling the others, who heard it from the failing process). */
static void receive_abort(tfx_socket_peer *p, const frame_header *h, const char *span)
{
    char text[1024] = "";
    size_t n = (size_t)h->bytes;
    size_t keep = n < sizeof text ? n : sizeof text - 1;
    int rr = keep ? tfx_socket_read_all(p->fd, text, keep, 0) : 0;
    /* Skip what does not fit (never more than a short message). */
    for (size_t skipped = keep; rr == 0 && skipped < n; skipped++) {
        char c;
        rr = tfx_socket_read_all(p->fd, &c, 1, 0);
    }
    text[keep < sizeof text ? keep : sizeof text - 1] = '\0';
    if (rr != 0)
        snprintf(text, sizeof text, "process %d (%s) failed (its message was cut off)",
                 p->process, span);
    remote_abort(p->t, h->from, text, 0);
}

/* Handles one frame.  Returns 0 to read the next, or -1 when the
 * connection is done (a goodbye, or a failure already reported). */
static int receive_frame(tfx_socket_peer *p, const frame_header *h, const char *span)
{
    tfx_socket *t = p->t;
    char msg[512];
    switch (h->kind) {
    case KIND_DATA:
        return receive_data(p, h, span);
    case KIND_ABORT:
        receive_abort(p, h, span);
        return 0;
    case KIND_CLOSE:
        pthread_mutex_lock(&t->mb.lock);
        p->closed = 1;
        tfx_mailbox_wake(&t->mb);
        pthread_mutex_unlock(&t->mb.lock);
        return -1;
    default:
        snprintf(msg, sizeof msg, "socket transport: unknown frame kind %u from process %d",
                 h->kind, p->process);
        protocol_error(p, msg);
        return -1;
    }
}

/* Drains one connection into the mailbox until the goodbye or a failure. */
static void *receiver_thread(void *arg)
{
    tfx_socket_peer *p = arg;
    tfx_socket *t = p->t;
    char msg[512], span[64];
    rank_span(t, p->process, span, sizeof span);
    for (;;) {
        frame_header h;
        int r = tfx_socket_read_all(p->fd, &h, sizeof h, 0);
        if (r != 0) {
            int e = errno;
            snprintf(msg, sizeof msg,
                     "process %d (%s) closed its connection without a goodbye (%s): it died or "
                     "was killed",
                     p->process, span, r == 1 ? "end of stream" : strerror(e));
            connection_lost(p, 1, msg);
            break;
        }
        if (!frame_valid(t, &h)) {
            snprintf(msg, sizeof msg,
                     "socket transport: garbled frame from process %d (%s): magic %#x, kind "
                     "%u, %llu bytes",
                     p->process, span, h.magic, h.kind, (unsigned long long)h.bytes);
            protocol_error(p, msg);
            break;
        }
        if (receive_frame(p, &h, span) != 0)
            break;
    }
    pthread_mutex_lock(&t->mb.lock);
    p->done = 1;
    tfx_mailbox_wake(&t->mb);
    pthread_mutex_unlock(&t->mb.lock);
    return NULL;
}

static int socket_send(void *ctx, int from, int to, long tag, const void *buf, size_t bytes,
                       tf_error *err)
{
    tfx_socket *t = ctx;
    if (to < 0 || to >= t->ranks || from < 0 || from >= t->ranks)
        return tf_fail(err, TF_ERUNTIME, "transport: send from rank %d to rank %d of %d", from,
                       to, t->ranks);
    const int q = process_of(t, to);
    if (q == t->self) {
        return tfx_mailbox_post_copy(&t->mb, from, to, tag, buf, bytes, err);
    }
    tfx_socket_peer *p = &t->peers[q];
    pthread_mutex_lock(&t->mb.lock);
    int rc = tfx_mailbox_check_locked(&t->mb, from, err);
    if (rc == 0 && (p->closed || p->broken))
        rc = tf_fail(err, TF_ERUNTIME,
                     "rank %d cannot send to rank %d: process %d has %s", from, to, q,
                     p->closed ? "ended (it said goodbye)" : "lost its connection");
    pthread_mutex_unlock(&t->mb.lock);
    if (rc < 0)
        return rc;
    frame_header h = {FRAME_MAGIC, KIND_DATA, from, to, tag, bytes};
    if (send_frame(p, &h, buf, tf_now_seconds() + t->timeout_s) < 0) {
        int e = errno;
        char msg[512];
        if (e == ETIMEDOUT)
            snprintf(msg, sizeof msg,
                     "rank %d could not send %zu bytes to rank %d within %.0f s: process %d "
                     "hangs (see TFX_TIMEOUT)",
                     from, bytes, to, t->timeout_s, q);
        else
            snprintf(msg, sizeof msg, "rank %d could not send to rank %d (process %d): %s", from,
                     to, q, strerror(e));
        pthread_mutex_lock(&t->mb.lock);
        p->broken = 1;
        pthread_mutex_unlock(&t->mb.lock);
        abort_transport(t, from, msg, 1);
        return tf_fail(err, TF_ERUNTIME, "%s", msg);
    }
    return 0;
}

/* What a receive from another process waits for besides its message. */
typedef struct peer_watch {
    tfx_socket *t;
    int to, from, q;
    long tag;
} peer_watch;

/* A receive from a process that said goodbye or lost its connection will
 * never be served (mailbox lock held). */
static int peer_gone(void *arg, tf_error *err)
{
    const peer_watch *w = arg;
    const tfx_socket_peer *p = &w->t->peers[w->q];
    if (w->q == w->t->self || !(p->closed || p->broken))
        return 0;
    return tf_fail(err, TF_ERUNTIME,
                   "rank %d waits for a message from rank %d (tag %ld), but process %d has %s",
                   w->to, w->from, w->tag, w->q,
                   p->closed ? "ended (it said goodbye)" : "lost its connection");
}

static int socket_recv(void *ctx, int to, int from, long tag, void *buf, size_t bytes,
                       tf_error *err)
{
    tfx_socket *t = ctx;
    if (to < 0 || to >= t->ranks || from < 0 || from >= t->ranks)
        return tf_fail(err, TF_ERUNTIME, "transport: receive by rank %d from rank %d of %d", to,
                       from, t->ranks);
    peer_watch watch = {t, to, from, process_of(t, from), tag};
    tfx_mailbox_wait wait = {tf_now_seconds() + t->timeout_s, peer_gone, &watch};
    int rc = tfx_mailbox_take_copy(&t->mb, to, from, tag, &wait, buf, bytes, err);
    if (rc == TFX_MAILBOX_TIMEOUT) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "rank %d received nothing from rank %d (tag %ld) within %.0f s: rank %d "
                 "(process %d) died or hangs (see TFX_TIMEOUT)",
                 to, from, tag, t->timeout_s, from, watch.q);
        abort_transport(t, to, msg, 1);
        return tf_fail(err, TF_ERUNTIME, "%s", msg);
    }
    return rc;
}

static int socket_ready(void *ctx, int to, int from, long tag)
{
    return tfx_mailbox_ready(&((tfx_socket *)ctx)->mb, to, from, tag);
}

static void socket_abort(void *ctx, int rank, const char *msg)
{
    abort_transport(ctx, rank, msg, 1);
}

static int socket_reset(void *ctx)
{
    return tfx_mailbox_reset(&((tfx_socket *)ctx)->mb);
}

static void socket_destroy(void *ctx)
{
    tfx_socket *t = ctx;
    if (!t)
        return;
    /* Goodbye to every peer, then wait (bounded) for theirs, so that no
     * connection closes with unread data (which would reset it and could
     * lose the goodbye on the other side).  A failed process first repeats
     * the cause on the same connection: a peer may read this goodbye before
     * the ABORT that another process sent it, and must not take the
     * goodbye for the failure. */
    pthread_mutex_lock(&t->mb.lock);
    t->closing = 1;
    int failed = t->mb.aborted;
    char cause[512];
    snprintf(cause, sizeof cause, "%s", t->mb.abort_msg);
    frame_header why = {FRAME_MAGIC, KIND_ABORT, t->mb.abort_rank, -1, 0, strlen(cause) + 1};
    pthread_mutex_unlock(&t->mb.lock);
    frame_header bye = {FRAME_MAGIC, KIND_CLOSE, t->self * t->per_process, -1, 0, 0};
    for (int q = 0; t->peers && q < t->processes; q++) {
        tfx_socket_peer *p = &t->peers[q];
        if (p->fd < 0)
            continue;
        pthread_mutex_lock(&t->mb.lock);
        int live = !p->broken, tell = failed && !p->closed;
        pthread_mutex_unlock(&t->mb.lock);
        const double until = tf_now_seconds() + (failed ? 1.0 : ABORT_SEND_S);
        if (live && (!tell || send_frame(p, &why, cause, until) == 0) &&
            send_frame(p, &bye, NULL, until) == 0)
            shutdown(p->fd, SHUT_WR);
    }
    const double deadline = tf_now_seconds() + (failed ? 1.0 : (t->timeout_s < CLOSE_WAIT_S
                                                           ? t->timeout_s : CLOSE_WAIT_S));
    pthread_mutex_lock(&t->mb.lock);
    for (;;) {
        int waiting = 0;
        for (int q = 0; t->peers && q < t->processes; q++)
            waiting |= t->peers[q].thread_started && !t->peers[q].done;
        double left = deadline - tf_now_seconds();
        if (!waiting || left <= 0)
            break;
        tfx_mailbox_sleep_locked(&t->mb, left < 0.2 ? left : 0.2);
    }
    pthread_mutex_unlock(&t->mb.lock);
    for (int q = 0; t->peers && q < t->processes; q++) {
        tfx_socket_peer *p = &t->peers[q];
        if (p->fd >= 0)
            shutdown(p->fd, SHUT_RDWR); /* ends a receiver still reading */
        if (p->thread_started)
            pthread_join(p->thread, NULL);
        if (p->fd >= 0)
            close(p->fd);
        pthread_mutex_destroy(&p->send_lock);
    }
    tfx_mailbox_destroy(&t->mb);
    free(t->peers);
    free(t);
}

static const tfx_transport_ops socket_ops = {
    .name = "socket",
    .send = socket_send,
    .recv = socket_recv,
    .ready = socket_ready,
    .abort = socket_abort,
    .reset = socket_reset,
    .destroy = socket_destroy,
};

int tfx_transport_socket_abort_cause(const tfx_transport *tr, int *rank, char *msg,
                                     size_t size)
{
    if (!tr || tr->ops != &socket_ops)
        return -1;
    return tfx_mailbox_cause(&((tfx_socket *)tr->ctx)->mb, rank, msg, size);
}

/* The timeout: the option, else $TFX_TIMEOUT, else 600 s. */
static int timeout_of(const tfx_socket_options *o, double *out, tf_error *err)
{
    *out = o->timeout_s;
    if (*out > 0)
        return 0;
    const char *e = getenv("TFX_TIMEOUT");
    char *end = NULL;
    double v = e && *e ? strtod(e, &end) : 0.0;
    if (e && *e && (!end || *end || !(v > 0)))
        return tf_fail(err, TF_EINVAL,
                       "environment TFX_TIMEOUT=\"%s\": expected a number of seconds > 0", e);
    *out = v > 0 ? v : 600.0;
    return 0;
}

static int start_receivers(tfx_socket *t, tf_error *err)
{
    for (int q = 0; q < t->processes; q++) {
        tfx_socket_peer *p = &t->peers[q];
        if (p->fd < 0)
            continue;
        if (pthread_create(&p->thread, NULL, receiver_thread, p) != 0)
            return tf_fail(err, TF_ERUNTIME, "socket transport: could not start a thread");
        p->thread_started = 1;
    }
    return 0;
}

int tfx_transport_socket_create(const tfx_socket_options *o, tfx_transport *out,
                                tf_error *err)
{
    double timeout_s;
    if (o->processes < 1 || o->ranks < 1 || o->process_rank < 0 ||
        o->process_rank >= o->processes)
        return tf_fail(err, TF_EINVAL, "socket transport: process %d of %d, %d ranks",
                       o->process_rank, o->processes, o->ranks);
    if (o->ranks % o->processes != 0)
        return tf_fail(err, TF_EINVAL,
                       "socket transport: %d ranks cannot be split evenly over %d processes",
                       o->ranks, o->processes);
    int rc = timeout_of(o, &timeout_s, err);
    if (rc < 0)
        return rc;
    tfx_socket *t = calloc(1, sizeof *t);
    if (!t)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    *t = (tfx_socket){.ranks = o->ranks,
                      .processes = o->processes,
                      .self = o->process_rank,
                      .per_process = o->ranks / o->processes,
                      .timeout_s = timeout_s,
                      .on_remote_abort = o->on_remote_abort,
                      .on_remote_abort_arg = o->on_remote_abort_arg};
    tfx_mailbox_init(&t->mb, NULL, NULL);
    t->peers = calloc((size_t)t->processes, sizeof *t->peers);
    if (!t->peers) {
        rc = tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
        goto fail;
    }
    for (int q = 0; q < t->processes; q++) {
        t->peers[q] = (tfx_socket_peer){.t = t, .process = q, .fd = -1};
        pthread_mutex_init(&t->peers[q].send_lock, NULL);
    }
    if (t->processes > 1 && ((rc = tfx_socket_connect_peers(t, o, err)) < 0 ||
                             (rc = start_receivers(t, err)) < 0))
        goto fail;
    out->ops = &socket_ops;
    out->ctx = t;
    return 0;
fail:
    /* The peers connected so far learn of the failure from an ABORT frame. */
    if (t->peers)
        abort_transport(t, t->self * t->per_process, err ? err->msg : "set-up failed", 1);
    socket_destroy(t);
    return rc;
}
