/* transport_nccl.cu - stage-to-stage messages over NCCL send/recv.
 *
 * Why one communicator per directed rank pair ("channel"): NCCL runs the
 * operations of one communicator in the order they were issued, and a
 * ncclSend only completes once the peer posted the matching ncclRecv.  With
 * one shared communicator, a rank that issued "send to B" could not finish
 * a later "receive from C" until B posted its receive, and the pipeline
 * orders (1F1B, interleaved, zero-bubble) differ enough between ranks for
 * that to deadlock.  With a channel per direction, each communicator only
 * ever carries messages one way, in the order they were sent:
 *
 *   sender end:   a thread pops the channel's queue and, per message, sends
 *                 a 256-byte header (kind, tag, size) and then the payload;
 *   receiver end: a thread always has a header receive posted, then
 *                 receives the payload into a pooled device buffer and lists
 *                 the message for the rank thread's `recv` (matched by tag).
 *
 * The receiver drains whatever arrives, so every send completes no matter
 * in which order the ranks ask for their messages: `send` only copies the
 * tensor into a staging buffer on the compute stream (ordered behind the
 * kernels that made it) and queues it - eager, as transport.h demands.
 * The copy into the caller's buffer on `recv` is queued on the receiving
 * rank's compute stream behind an event the payload's arrival recorded.
 *
 * Failures: the communicators are non-blocking; every wait polls the
 * stream, ncclCommGetAsyncError and a deadline.  An NCCL error, a send that
 * does not complete, or a receive with no message within the timeout
 * aborts the transport: blocked ranks return TF_ERUNTIME with the cause,
 * and an ABORT header goes to every remote peer, whose transport aborts in
 * turn, so one failure ends every process with a message, never a hang.
 * A broken communicator is ended with ncclCommAbort.
 */
#include "cuda_internal.h"
#include "mailbox.h"

#include <nccl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { KIND_DATA = 1, KIND_ABORT = 2, KIND_CLOSE = 3 };
enum { ROLE_SEND = 0, ROLE_RECV = 1 };

/* What precedes every payload on the wire (device memory, 256 bytes). */
typedef struct wire_header {
    int64_t kind;
    int64_t tag;
    int64_t bytes;
    int32_t rank;          /* ABORT: the rank that failed */
    int32_t reserved;
    char msg[224];         /* ABORT: its message */
} wire_header;

/* A device buffer of one channel end, pooled. */
typedef struct buffer {
    struct buffer *next;
    void *dev;
    size_t capacity;
    /* sender end: the staging copy on the compute stream is done;
     * receiver end: the rank's copy out of it on the compute stream is done */
    cudaEvent_t event;
} buffer;

typedef struct out_msg {
    struct out_msg *next;
    long tag;
    size_t bytes;
    buffer *buf;
} out_msg;

struct nccl_transport;

/* One end of a directed pair from -> to that lives in this process. */
typedef struct channel {
    struct nccl_transport *t;
    int from, to, role;
    tfx_backend be;           /* the local end's backend (device, compute stream) */
    int device;
    ncclComm_t comm;
    int comm_ready;           /* initialised */
    int comm_broken;          /* aborted after an error: never use again */
    cudaStream_t stream;      /* NCCL's stream on this end */
    cudaStream_t alloc_stream; /* stream-ordered allocations (see buffer_take) */
    wire_header *hdr_dev;
    wire_header *hdr_host;    /* pinned */
    buffer *pool;             /* guarded by t->mb.lock */
    out_msg *head, *tail;     /* sender end: queue, guarded by t->mb.lock */
    int abort_pending;        /* sender end: forward an ABORT header */
    pthread_cond_t wake;      /* sender end: queue / abort / close changed */
    pthread_t thread;
    int thread_started;
} channel;

typedef struct nccl_transport {
    int world;
    int n_local;
    int *local_index;         /* world: index into local_be, -1 when remote */
    tfx_backend *local_be;
    channel *ch;
    int n_ch;
    double timeout_s;
    /* Received messages (their item is the receiving end's buffer) and the
     * abort.  Its lock also guards the channels' pools, queues and flags,
     * and `closing`. */
    tfx_mailbox mb;
    int closing;
    double close_deadline;
} nccl_transport;

/* ---- helpers --------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap(void)
{
    struct timespec ts = {0, 20000}; /* 20 us: polling must not starve the rank threads */
    nanosleep(&ts, NULL);
}

#define TRY(call) TFX_CUDA_TRY(call)

/* Checks a NCCL call on channel ch; ncclInProgress (non-blocking
 * communicator) is waited out by wait_comm. */
#define NCCL_TRY(ch, call)                                                                 \
    do {                                                                                   \
        ncclResult_t tfx_nr_ = (call);                                                     \
        if (tfx_nr_ == ncclInProgress)                                                     \
            tfx_nr_ = wait_comm((ch), 0.0);                                                \
        if (tfx_nr_ != ncclSuccess) {                                                      \
            rc = tf_fail(err, TF_ERUNTIME, "%s:%d: %s (channel %d -> %d): %s%s%s", __FILE__, \
                         __LINE__, #call, (ch)->from, (ch)->to, ncclGetErrorString(tfx_nr_), \
                         (ch)->comm ? ": " : "",                                           \
                         (ch)->comm ? ncclGetLastError((ch)->comm) : "");                  \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

/* Polls a non-blocking communicator until it is no longer in progress or
 * the deadline (0: none) passes; returns its state. */
static ncclResult_t wait_comm(channel *ch, double deadline)
{
    ncclResult_t state = ncclInProgress;
    while (ncclCommGetAsyncError(ch->comm, &state) == ncclSuccess && state == ncclInProgress) {
        if (deadline > 0 && now_s() > deadline)
            return ncclInProgress;
        nap();
    }
    return state;
}

/* Marks the transport failed (first cause wins), wakes every waiting rank,
 * and has every sender end whose peer is in another process forward an
 * ABORT header.  Caller holds t->mb.lock. */
static void abort_locked(nccl_transport *t, int rank, const char *msg)
{
    if (!tfx_mailbox_abort_locked(&t->mb, rank, msg))
        return;
    for (int i = 0; i < t->n_ch; i++) {
        channel *ch = &t->ch[i];
        if (ch->role == ROLE_SEND && t->local_index[ch->to] < 0) {
            ch->abort_pending = 1;
            pthread_cond_signal(&ch->wake);
        }
    }
}

/* A progress thread failed: abort the transport with its message and end
 * its communicator so nothing waits on it any more. */
static void channel_failed(channel *ch, const tf_error *err)
{
    nccl_transport *t = ch->t;
    pthread_mutex_lock(&t->mb.lock);
    if (err)
        abort_locked(t, ch->role == ROLE_SEND ? ch->from : ch->to, err->msg);
    int abort_comm = ch->comm && !ch->comm_broken;
    ch->comm_broken = 1;
    pthread_mutex_unlock(&t->mb.lock);
    /* Only this channel's own thread gets here, so one abort per comm. */
    if (abort_comm)
        ncclCommAbort(ch->comm);
}

/* Waits for the channel's stream to finish, watching NCCL's asynchronous
 * error and the deadline (0: none).  When `may_close` and the transport is
 * closing past its deadline, returns 1 (give up quietly).  Returns 0, 1, or
 * TF_ERUNTIME with the cause. */
static int wait_stream(channel *ch, double deadline, int may_close, const char *what,
                       tf_error *err)
{
    nccl_transport *t = ch->t;
    for (;;) {
        cudaError_t e = cudaStreamQuery(ch->stream);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return tf_fail(err, TF_ERUNTIME, "%s:%d: %s (channel %d -> %d): %s (%s)",
                           __FILE__, __LINE__, what, ch->from, ch->to, cudaGetErrorName(e),
                           cudaGetErrorString(e));
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(ch->comm, &state);
        if (state != ncclSuccess && state != ncclInProgress)
            return tf_fail(err, TF_ERUNTIME, "NCCL error while %s (channel %d -> %d): %s: %s",
                           what, ch->from, ch->to, ncclGetErrorString(state),
                           ncclGetLastError(ch->comm));
        double now = now_s();
        if (deadline > 0 && now > deadline)
            return tf_fail(err, TF_ERUNTIME,
                           "%s (channel %d -> %d) did not complete within %.0f s: rank %d "
                           "died or hangs",
                           what, ch->from, ch->to, t->timeout_s,
                           ch->role == ROLE_SEND ? ch->to : ch->from);
        if (may_close) {
            pthread_mutex_lock(&t->mb.lock);
            int give_up = t->closing && now > t->close_deadline;
            pthread_mutex_unlock(&t->mb.lock);
            if (give_up)
                return 1;
        }
        nap();
    }
}

static void buffer_free(buffer *b)
{
    if (!b)
        return;
    if (b->dev)
        cudaFree(b->dev);
    if (b->event)
        cudaEventDestroy(b->event);
    free(b);
}

/* A pooled buffer of at least `bytes` on the channel's device (current),
 * or a new one.  Returns 0 or an error. */
static int buffer_take(channel *ch, size_t bytes, buffer **out, tf_error *err)
{
    nccl_transport *t = ch->t;
    int rc = 0;
    buffer *b = NULL;
    pthread_mutex_lock(&t->mb.lock);
    for (buffer **p = &ch->pool; *p; p = &(*p)->next) {
        if ((*p)->capacity >= bytes) {
            b = *p;
            *p = b->next;
            b->next = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&t->mb.lock);
    if (b) {
        *out = b;
        return 0;
    }
    b = (buffer *)calloc(1, sizeof *b);
    if (!b)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    b->capacity = bytes ? bytes : 1;
    /* Receives stay posted on the device, so nothing here may synchronise
     * the whole device (cudaMalloc may): allocate stream-ordered on a
     * private stream and wait for that stream only. */
    TRY(cudaMallocAsync(&b->dev, b->capacity, ch->alloc_stream));
    TRY(cudaStreamSynchronize(ch->alloc_stream));
    TRY(cudaEventCreateWithFlags(&b->event, cudaEventDisableTiming));
    *out = b;
    return 0;
fail:
    buffer_free(b);
    return rc;
}

static void buffer_put(channel *ch, buffer *b)
{
    pthread_mutex_lock(&ch->t->mb.lock);
    b->next = ch->pool;
    ch->pool = b;
    pthread_mutex_unlock(&ch->t->mb.lock);
}

/* ---- sender end ------------------------------------------------------------ */

/* Sends one header (and the payload of a DATA message) and waits until both
 * left, within the timeout. */
static int ship(channel *ch, const wire_header *h, const out_msg *m, tf_error *err)
{
    int rc = 0;
    const double deadline = now_s() + ch->t->timeout_s;
    TRY(cudaSetDevice(ch->device));
    *ch->hdr_host = *h;
    if (m)
        TRY(cudaStreamWaitEvent(ch->stream, m->buf->event, 0)); /* staging copy done */
    TRY(cudaMemcpyAsync(ch->hdr_dev, ch->hdr_host, sizeof *h, cudaMemcpyHostToDevice,
                        ch->stream));
    NCCL_TRY(ch, ncclSend(ch->hdr_dev, sizeof *h, ncclChar, 1, ch->comm, ch->stream));
    if (m && m->bytes)
        NCCL_TRY(ch, ncclSend(m->buf->dev, m->bytes, ncclChar, 1, ch->comm, ch->stream));
    /* Waiting here also keeps hdr_host unchanged until its copy ran. */
    rc = wait_stream(ch, deadline, 0, "sending a message", err);
fail:
    return rc;
}

static void *sender_thread(void *arg)
{
    channel *ch = (channel *)arg;
    nccl_transport *t = ch->t;
    tf_error err;
    memset(&err, 0, sizeof err);
    for (;;) {
        wire_header h;
        memset(&h, 0, sizeof h);
        out_msg *m = NULL;
        pthread_mutex_lock(&t->mb.lock);
        while (!ch->head && !ch->abort_pending && !t->closing)
            pthread_cond_wait(&ch->wake, &t->mb.lock);
        if (ch->abort_pending) {
            /* The peer must hear about the failure before anything else. */
            ch->abort_pending = 0;
            h.kind = KIND_ABORT;
            h.rank = t->mb.abort_rank;
            snprintf(h.msg, sizeof h.msg, "%s", t->mb.abort_msg);
        } else if (ch->head) {
            m = ch->head;
            ch->head = m->next;
            if (!ch->head)
                ch->tail = NULL;
            h.kind = KIND_DATA;
            h.tag = m->tag;
            h.bytes = (int64_t)m->bytes;
        } else {
            h.kind = KIND_CLOSE;
        }
        pthread_mutex_unlock(&t->mb.lock);
        int rc = ship(ch, &h, m, &err);
        if (m) {
            buffer_put(ch, m->buf);
            free(m);
        }
        if (rc < 0) {
            channel_failed(ch, &err);
            break;
        }
        if (h.kind == KIND_CLOSE)
            break;
    }
    /* Drop what can no longer be sent. */
    pthread_mutex_lock(&t->mb.lock);
    while (ch->head) {
        out_msg *m = ch->head;
        ch->head = m->next;
        m->buf->next = ch->pool;
        ch->pool = m->buf;
        free(m);
    }
    ch->tail = NULL;
    pthread_mutex_unlock(&t->mb.lock);
    return NULL;
}

/* ---- receiver end ---------------------------------------------------------- */

static void *receiver_thread(void *arg)
{
    channel *ch = (channel *)arg;
    nccl_transport *t = ch->t;
    tf_error err_store;
    tf_error *err = &err_store;
    memset(err, 0, sizeof *err);
    int rc = 0;
    buffer *b = NULL;
    tfx_mail *m = NULL;
    TRY(cudaSetDevice(ch->device));
    for (;;) {
        /* A header receive is always posted, so senders never wait for us. */
        NCCL_TRY(ch, ncclRecv(ch->hdr_dev, sizeof(wire_header), ncclChar, 0, ch->comm,
                              ch->stream));
        TRY(cudaMemcpyAsync(ch->hdr_host, ch->hdr_dev, sizeof(wire_header),
                            cudaMemcpyDeviceToHost, ch->stream));
        rc = wait_stream(ch, 0.0, 1, "waiting for a message header", err);
        if (rc == 1) {
            /* Closing, and the peer never said goodbye (it died): end the
             * communicator, which also ends the posted receive. */
            channel_failed(ch, NULL);
            return NULL;
        }
        if (rc < 0)
            goto fail;
        wire_header h = *ch->hdr_host;
        if (h.kind == KIND_CLOSE)
            break;
        if (h.kind == KIND_ABORT) {
            h.msg[sizeof h.msg - 1] = '\0';
            char msg[400];
            snprintf(msg, sizeof msg, "%s (reported by rank %d over NCCL)", h.msg, ch->from);
            pthread_mutex_lock(&t->mb.lock);
            abort_locked(t, (int)h.rank, msg);
            pthread_mutex_unlock(&t->mb.lock);
            continue;
        }
        if (h.kind != KIND_DATA || h.bytes < 0) {
            rc = tf_fail(err, TF_ERUNTIME,
                         "channel %d -> %d: malformed header (kind %lld, %lld bytes)", ch->from,
                         ch->to, (long long)h.kind, (long long)h.bytes);
            goto fail;
        }
        rc = buffer_take(ch, (size_t)h.bytes, &b, err);
        if (rc < 0)
            goto fail;
        /* The rank may still be copying the buffer's previous message out. */
        TRY(cudaStreamWaitEvent(ch->stream, b->event, 0));
        if (h.bytes)
            NCCL_TRY(ch, ncclRecv(b->dev, (size_t)h.bytes, ncclChar, 0, ch->comm, ch->stream));
        m = tfx_mail_item(ch->from, ch->to, (long)h.tag, (size_t)h.bytes, NULL);
        if (!m) {
            rc = tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
            goto fail;
        }
        /* Wait for the payload here, so `recv` needs no per-message event:
         * the next header receive is posted right after. */
        rc = wait_stream(ch, now_s() + t->timeout_s, 0, "receiving a payload", err);
        if (rc < 0)
            goto fail;
        m->item = b;
        b = NULL;
        /* After an abort nobody receives it: the step has failed. */
        if (tfx_mailbox_post(&t->mb, m, NULL) < 0)
            tfx_mailbox_discard(&t->mb, m);
        m = NULL;
    }
    return NULL;
fail:
    tfx_mail_free(m);
    if (b)
        buffer_put(ch, b);
    channel_failed(ch, err);
    return NULL;
}

/* ---- transport ops ---------------------------------------------------------- */

static channel *find_channel(nccl_transport *t, int role, int from, int to)
{
    for (int i = 0; i < t->n_ch; i++)
        if (t->ch[i].role == role && t->ch[i].from == from && t->ch[i].to == to)
            return &t->ch[i];
    return NULL;
}

/* This process's end `role` of the channel from -> to, or TF_ERUNTIME. */
static int channel_here(nccl_transport *t, int role, int from, int to, channel **out,
                        tf_error *err)
{
    *out = find_channel(t, role, from, to);
    if (*out)
        return 0;
    return tf_fail(err, TF_ERUNTIME,
                   "nccl transport: no channel from rank %d to rank %d (not neighbouring "
                   "stages, or rank %d is not in this process)",
                   from, to, role == ROLE_SEND ? from : to);
}

/* A received message nobody took: its buffer goes back to its channel's
 * pool (t->mb.lock held). */
static void drop_message(void *arg, tfx_mail *m)
{
    channel *ch = find_channel((nccl_transport *)arg, ROLE_RECV, m->from, m->to);
    buffer *b = (buffer *)m->item;
    b->next = ch->pool;
    ch->pool = b;
}

static int nccl_send(void *ctx, int from, int to, long tag, const void *buf, size_t bytes,
                     tf_error *err)
{
    nccl_transport *t = (nccl_transport *)ctx;
    int rc = 0;
    buffer *b = NULL;
    out_msg *m = NULL;
    channel *ch = NULL;
    if ((rc = channel_here(t, ROLE_SEND, from, to, &ch, err)) < 0)
        return rc;
    cudaStream_t compute = tfx_cuda_backend_stream(&ch->be);
    pthread_mutex_lock(&t->mb.lock);
    rc = tfx_mailbox_check_locked(&t->mb, from, err);
    if (rc == 0 && ch->comm_broken)
        rc = tf_fail(err, TF_ERUNTIME, "nccl transport: channel %d -> %d failed earlier", from,
                     to);
    pthread_mutex_unlock(&t->mb.lock);
    if (rc < 0)
        return rc;
    TRY(cudaSetDevice(ch->device));
    rc = buffer_take(ch, bytes, &b, err);
    if (rc < 0)
        goto fail;
    /* Behind the kernels that produced buf, ahead of any that overwrite it. */
    if (bytes)
        TRY(cudaMemcpyAsync(b->dev, buf, bytes, cudaMemcpyDeviceToDevice, compute));
    TRY(cudaEventRecord(b->event, compute));
    m = (out_msg *)calloc(1, sizeof *m);
    if (!m) {
        rc = tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
        goto fail;
    }
    *m = (out_msg){NULL, tag, bytes, b};
    pthread_mutex_lock(&t->mb.lock);
    if (ch->tail)
        ch->tail->next = m;
    else
        ch->head = m;
    ch->tail = m;
    pthread_cond_signal(&ch->wake);
    pthread_mutex_unlock(&t->mb.lock);
    return 0;
fail:
    free(m);
    if (b)
        buffer_put(ch, b);
    return rc;
}

/* Copies a received payload into buf on the rank's compute stream (it is
 * complete: the receiver thread waited for it); the buffer's event tells a
 * later payload when the copy is done. */
static int copy_out(channel *ch, const tfx_mail *m, void *buf, tf_error *err)
{
    int rc = 0;
    buffer *b = (buffer *)m->item;
    cudaStream_t compute = tfx_cuda_backend_stream(&ch->be);
    TRY(cudaSetDevice(ch->device));
    if (m->bytes)
        TRY(cudaMemcpyAsync(buf, b->dev, m->bytes, cudaMemcpyDeviceToDevice, compute));
    TRY(cudaEventRecord(b->event, compute));
fail:
    return rc;
}

static int nccl_recv(void *ctx, int to, int from, long tag, void *buf, size_t bytes,
                     tf_error *err)
{
    nccl_transport *t = (nccl_transport *)ctx;
    tfx_mail *m = NULL;
    channel *ch = NULL;
    int rc = channel_here(t, ROLE_RECV, from, to, &ch, err);
    if (rc < 0)
        return rc;
    tfx_mailbox_wait wait = {now_s() + t->timeout_s, NULL, NULL};
    rc = tfx_mailbox_take(&t->mb, to, from, tag, &wait, &m, err);
    if (rc == TFX_MAILBOX_TIMEOUT) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "rank %d received nothing from rank %d (tag %ld) within %.0f s: rank %d "
                 "died or hangs (see TFX_NCCL_TIMEOUT)",
                 to, from, tag, t->timeout_s, from);
        pthread_mutex_lock(&t->mb.lock);
        abort_locked(t, to, msg);
        pthread_mutex_unlock(&t->mb.lock);
        return tf_fail(err, TF_ERUNTIME, "%s", msg);
    }
    if (rc < 0)
        return rc;
    rc = tfx_mail_check_size(m, bytes, err);
    if (rc == 0)
        rc = copy_out(ch, m, buf, err);
    buffer_put(ch, (buffer *)m->item);
    tfx_mail_free(m);
    return rc;
}

static void nccl_abort(void *ctx, int rank, const char *msg)
{
    nccl_transport *t = (nccl_transport *)ctx;
    pthread_mutex_lock(&t->mb.lock);
    abort_locked(t, rank, msg);
    pthread_mutex_unlock(&t->mb.lock);
}

/* abort_pending stays: a remote peer must still hear of the failure. */
static int nccl_reset(void *ctx)
{
    return tfx_mailbox_reset(&((nccl_transport *)ctx)->mb);
}

static void nccl_transport_destroy(void *ctx)
{
    nccl_transport *t = (nccl_transport *)ctx;
    if (!t)
        return;
    /* Senders say goodbye; receivers stop at the goodbye, or give up at the
     * deadline when a peer never sends one (it died). */
    pthread_mutex_lock(&t->mb.lock);
    t->closing = 1;
    t->close_deadline = now_s() + t->timeout_s;
    for (int i = 0; i < t->n_ch; i++)
        pthread_cond_signal(&t->ch[i].wake);
    pthread_mutex_unlock(&t->mb.lock);
    for (int i = 0; i < t->n_ch; i++)
        if (t->ch[i].thread_started)
            pthread_join(t->ch[i].thread, NULL);
    nccl_reset(t);
    for (int i = 0; i < t->n_ch; i++) {
        channel *ch = &t->ch[i];
        cudaSetDevice(ch->device);
        /* An aborted communicator's stream is not waited for. */
        if (ch->stream && !ch->comm_broken)
            cudaStreamSynchronize(ch->stream);
        if (ch->be.ops)
            cudaStreamSynchronize(tfx_cuda_backend_stream(&ch->be));
        if (ch->comm) {
            if (ch->comm_broken || !ch->comm_ready) {
                if (!ch->comm_broken)
                    ncclCommAbort(ch->comm);
            } else {
                /* Finalize flushes; with a non-blocking communicator it
                 * completes asynchronously: bounded wait, else abort. */
                ncclResult_t r = ncclCommFinalize(ch->comm);
                if (r == ncclInProgress)
                    r = wait_comm(ch, now_s() + 30.0);
                if (r == ncclSuccess)
                    ncclCommDestroy(ch->comm);
                else
                    ncclCommAbort(ch->comm);
            }
        }
        while (ch->pool) {
            buffer *b = ch->pool;
            ch->pool = b->next;
            buffer_free(b);
        }
        if (ch->hdr_dev)
            cudaFree(ch->hdr_dev);
        if (ch->hdr_host)
            cudaFreeHost(ch->hdr_host);
        if (ch->stream)
            cudaStreamDestroy(ch->stream);
        if (ch->alloc_stream)
            cudaStreamDestroy(ch->alloc_stream);
        pthread_cond_destroy(&ch->wake);
    }
    tfx_mailbox_destroy(&t->mb);
    free(t->ch);
    free(t->local_index);
    free(t->local_be);
    free(t);
}

static int nccl_ready(void *ctx, int to, int from, long tag)
{
    return tfx_mailbox_ready(&((nccl_transport *)ctx)->mb, to, from, tag);
}

static tfx_transport_ops make_nccl_ops(void)
{
    tfx_transport_ops o;
    memset(&o, 0, sizeof o);
    o.name = "nccl";
    o.send = nccl_send;
    o.recv = nccl_recv;
    o.ready = nccl_ready;
    o.abort = nccl_abort;
    o.reset = nccl_reset;
    o.destroy = nccl_transport_destroy;
    return o;
}

static const tfx_transport_ops nccl_ops = make_nccl_ops();

/* ---- rendezvous (multi-process) --------------------------------------------- */

/* <dir>/tfx-nccl-<run>-<from>-<to>.id, with the folder and run key of
 * tfx/launch.h (the socket transport uses the same conventions). */
static void id_path(const tfx_nccl_options *o, int from, int to, char *buf, size_t size)
{
    const char *dir = tfx_launch_rendezvous_dir(o->rendezvous_dir, NULL);
    char key[128];
    tfx_launch_run_key(o->run_id, key, sizeof key);
    snprintf(buf, size, "%s/tfx-nccl-%s-%d-%d.id", dir, key, from, to);
}

/* The sending end publishes the id atomically (temporary file + rename). */
static int publish_id(const char *path, const ncclUniqueId *id, tf_error *err)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return tf_fail(err, TF_EIO, "nccl rendezvous: cannot write %s (set TFX_RENDEZVOUS_DIR "
                                    "to a folder every process can write)", tmp);
    int ok = fwrite(id, sizeof *id, 1, f) == 1;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return tf_fail(err, TF_EIO, "nccl rendezvous: cannot write %s", path);
    }
    return 0;
}

/* The receiving end waits for the id, ignoring files older than this
 * process (a crashed earlier run with the same key), then removes it. */
static int fetch_id(const char *path, double timeout_s, time_t not_before, ncclUniqueId *id,
                    tf_error *err)
{
    const double deadline = now_s() + timeout_s;
    for (;;) {
        struct stat st;
        if (stat(path, &st) == 0 && st.st_mtime >= not_before) {
            FILE *f = fopen(path, "rb");
            if (f) {
                int ok = fread(id, sizeof *id, 1, f) == 1;
                fclose(f);
                if (ok) {
                    remove(path);
                    return 0;
                }
            }
        }
        if (now_s() > deadline)
            return tf_fail(err, TF_EIO,
                           "nccl rendezvous: %s did not appear within %.0f s (is the sending "
                           "process running, and TFX_RENDEZVOUS_DIR shared by all processes?)",
                           path, timeout_s);
        struct timespec ts = {0, 10000000}; /* 10 ms */
        nanosleep(&ts, NULL);
    }
}

/* ---- creation --------------------------------------------------------------- */

static int channel_setup(nccl_transport *t, channel *ch, tf_error *err)
{
    int rc = 0;
    ch->t = t;
    pthread_cond_init(&ch->wake, NULL);
    int local = t->local_index[ch->role == ROLE_SEND ? ch->from : ch->to];
    ch->be = t->local_be[local];
    ch->device = tfx_cuda_backend_device(&ch->be);
    TRY(cudaSetDevice(ch->device));
    TRY(cudaStreamCreateWithFlags(&ch->stream, cudaStreamNonBlocking));
    TRY(cudaStreamCreateWithFlags(&ch->alloc_stream, cudaStreamNonBlocking));
    TRY(cudaMalloc((void **)&ch->hdr_dev, sizeof(wire_header)));
    TRY(cudaMallocHost((void **)&ch->hdr_host, sizeof(wire_header)));
fail:
    return rc;
}

/* Starts the initialisation of channel ch's communicator (non-blocking):
 * `rank` 0 is the sender, 1 the receiver. */
static int channel_init_comm(channel *ch, ncclUniqueId id, int rank, tf_error *err)
{
    int rc = 0;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r;
    TRY(cudaSetDevice(ch->device));
    r = ncclCommInitRankConfig(&ch->comm, 2, id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress)
        rc = tf_fail(err, TF_ERUNTIME, "%s:%d: ncclCommInitRankConfig (channel %d -> %d): %s",
                     __FILE__, __LINE__, ch->from, ch->to, ncclGetErrorString(r));
fail:
    return rc;
}

/* Connects every channel before the progress threads start, by one header
 * exchange per channel.  NCCL connects peers lazily at their first
 * operation and allocates buffers then; doing it here means no connection
 * (and no allocation) happens later while another channel's receive is
 * posted on the same device.  Every end is queued before anything is waited
 * for, so processes that reach this point in any order all connect. */
static int connect_channels(nccl_transport *t, tf_error *err)
{
    int rc = 0;
    for (int i = 0; i < t->n_ch; i++) {
        channel *ch = &t->ch[i];
        int other_local = t->local_index[ch->role == ROLE_SEND ? ch->to : ch->from] >= 0;
        ncclResult_t r;
        if (other_local && ch->role == ROLE_RECV)
            continue; /* queued together with its sender end below */
        if (other_local) {
            channel *peer = find_channel(t, ROLE_RECV, ch->from, ch->to);
            ncclGroupStart();
            TRY(cudaSetDevice(ch->device));
            ncclSend(ch->hdr_dev, sizeof(wire_header), ncclChar, 1, ch->comm, ch->stream);
            TRY(cudaSetDevice(peer->device));
            ncclRecv(peer->hdr_dev, sizeof(wire_header), ncclChar, 0, peer->comm, peer->stream);
            r = ncclGroupEnd();
        } else {
            TRY(cudaSetDevice(ch->device));
            r = ch->role == ROLE_SEND
                    ? ncclSend(ch->hdr_dev, sizeof(wire_header), ncclChar, 1, ch->comm, ch->stream)
                    : ncclRecv(ch->hdr_dev, sizeof(wire_header), ncclChar, 0, ch->comm, ch->stream);
        }
        if (r != ncclSuccess && r != ncclInProgress) {
            rc = tf_fail(err, TF_ERUNTIME, "%s:%d: connecting channel %d -> %d: %s", __FILE__,
                         __LINE__, ch->from, ch->to, ncclGetErrorString(r));
            goto fail;
        }
    }
    for (int i = 0; i < t->n_ch; i++) {
        channel *ch = &t->ch[i];
        const double deadline = now_s() + t->timeout_s;
        ncclResult_t r = wait_comm(ch, deadline);
        if (r != ncclSuccess) {
            rc = tf_fail(err, TF_ERUNTIME, "connecting channel %d -> %d: %s", ch->from, ch->to,
                         r == ncclInProgress ? "timed out" : ncclGetErrorString(r));
            goto fail;
        }
        TRY(cudaSetDevice(ch->device));
        if ((rc = wait_stream(ch, deadline, 0, "connecting", err)) < 0)
            goto fail;
    }
fail:
    return rc;
}

static int same_device_allowed(void)
{
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
    const char *e = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    return e && strcmp(e, "1") == 0;
#else
    return 0;
#endif
}

/* Which ranks live here, and their backends. */
static int map_local_ranks(nccl_transport *t, const tfx_nccl_options *o, tf_error *err)
{
    t->local_index = (int *)malloc(sizeof(int) * (size_t)t->world);
    t->local_be = (tfx_backend *)calloc((size_t)t->n_local, sizeof *t->local_be);
    if (!t->local_index || !t->local_be)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    for (int r = 0; r < t->world; r++)
        t->local_index[r] = -1;
    for (int i = 0; i < t->n_local; i++) {
        int r = o->local_ranks[i];
        if (r < 0 || r >= t->world || t->local_index[r] >= 0)
            return tf_fail(err, TF_EINVAL, "nccl transport: local rank %d is out of range or "
                                           "listed twice (world %d)", r, t->world);
        if (!tfx_backend_is_cuda(&o->local_backends[i]))
            return tf_fail(err, TF_EINVAL, "nccl transport: rank %d does not use the cuda "
                                           "backend", r);
        t->local_index[r] = i;
        t->local_be[i] = o->local_backends[i];
    }
    return 0;
}

/* talks[a * world + b]: the directed pairs that exchange messages, the
 * ranks of neighbouring stages. */
static int neighbours(const nccl_transport *t, const tfx_nccl_options *o, unsigned char *talks,
                      tf_error *err)
{
    for (int s = 0; s + 1 < o->stages; s++) {
        int a = o->stage_rank[s], b = o->stage_rank[s + 1];
        if (a < 0 || a >= t->world || b < 0 || b >= t->world)
            return tf_fail(err, TF_EINVAL, "nccl transport: stage %d or %d is on a rank outside "
                                           "0..%d", s, s + 1, t->world - 1);
        if (a != b)
            talks[a * t->world + b] = talks[b * t->world + a] = 1;
    }
    return 0;
}

/* Adds this process's end `role` of the channel a -> b. */
static int add_end(nccl_transport *t, int a, int b, int role, tf_error *err)
{
    channel *ch = &t->ch[t->n_ch++];
    ch->from = a;
    ch->to = b;
    ch->role = role;
    return channel_setup(t, ch, err);
}

/* The ends of every channel that lives here, in one global order (sender,
 * receiver), both ends when both ranks are local. */
static int open_channels(nccl_transport *t, const unsigned char *talks, tf_error *err)
{
    int n = 0, rc = 0;
    for (int i = 0; i < t->world * t->world; i++)
        if (talks[i])
            n += (t->local_index[i / t->world] >= 0) + (t->local_index[i % t->world] >= 0);
    t->ch = (channel *)calloc((size_t)(n ? n : 1), sizeof *t->ch);
    if (!t->ch)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    for (int a = 0; a < t->world && rc == 0; a++) {
        for (int b = 0; b < t->world && rc == 0; b++) {
            if (!talks[a * t->world + b])
                continue;
            int la = t->local_index[a], lb = t->local_index[b];
            if (la >= 0 && lb >= 0 &&
                tfx_cuda_backend_device(&t->local_be[la]) ==
                    tfx_cuda_backend_device(&t->local_be[lb]) &&
                !same_device_allowed())
                return tf_fail(err, TF_EINVAL,
                               "nccl transport: ranks %d and %d are both on device %d; NCCL %d.%d "
                               "cannot put two ranks of one communicator on one GPU (NCCL >= "
                               "2.30 can with NCCL_MULTI_RANK_GPU_ENABLE=1): use --transport "
                               "cuda",
                               a, b, tfx_cuda_backend_device(&t->local_be[la]), NCCL_MAJOR,
                               NCCL_MINOR);
            if (la >= 0)
                rc = add_end(t, a, b, ROLE_SEND, err);
            if (rc == 0 && lb >= 0)
                rc = add_end(t, a, b, ROLE_RECV, err);
        }
    }
    return rc;
}

static int new_unique_id(ncclUniqueId *id, tf_error *err)
{
    ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess)
        return tf_fail(err, TF_ERUNTIME, "%s:%d: ncclGetUniqueId: %s", __FILE__, __LINE__,
                       ncclGetErrorString(r));
    return 0;
}

/* Both ends of ch are here: one communicator for the two ranks, started in
 * a group as ncclCommInitAll does. */
static int init_local_pair(nccl_transport *t, channel *ch, tf_error *err)
{
    channel *peer = find_channel(t, ROLE_RECV, ch->from, ch->to);
    ncclUniqueId id;
    int rc = new_unique_id(&id, err);
    if (rc < 0)
        return rc;
    ncclGroupStart();
    rc = channel_init_comm(ch, id, 0, err);
    if (rc == 0)
        rc = channel_init_comm(peer, id, 1, err);
    ncclResult_t r = ncclGroupEnd();
    if (rc == 0 && r != ncclSuccess && r != ncclInProgress)
        rc = tf_fail(err, TF_ERUNTIME, "%s:%d: ncclGroupEnd (channel %d -> %d): %s", __FILE__,
                     __LINE__, ch->from, ch->to, ncclGetErrorString(r));
    return rc;
}

/* The sending end of a channel to another process publishes its id. */
static int init_sending_end(const tfx_nccl_options *o, channel *ch, tf_error *err)
{
    char path[1024];
    ncclUniqueId id;
    int rc = new_unique_id(&id, err);
    if (rc < 0)
        return rc;
    id_path(o, ch->from, ch->to, path, sizeof path);
    if ((rc = publish_id(path, &id, err)) < 0)
        return rc;
    return channel_init_comm(ch, id, 0, err);
}

/* The receiving end of a channel from another process reads the id, from
 * a file not older than this process (a minute of slack for clocks and
 * slow starters). */
static int init_receiving_end(const nccl_transport *t, const tfx_nccl_options *o, channel *ch,
                              time_t started, tf_error *err)
{
    char path[1024];
    ncclUniqueId id;
    id_path(o, ch->from, ch->to, path, sizeof path);
    int rc = fetch_id(path, t->timeout_s, started - 60, &id, err);
    return rc < 0 ? rc : channel_init_comm(ch, id, 1, err);
}

/* Starts every communicator.  The ids of the channels this process sends
 * on are made and published first, so no process waits for a file while
 * holding back one another process waits for. */
static int init_communicators(nccl_transport *t, const tfx_nccl_options *o, time_t started,
                              tf_error *err)
{
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (int i = 0; i < t->n_ch && rc == 0; i++) {
            channel *ch = &t->ch[i];
            int other_local = t->local_index[ch->role == ROLE_SEND ? ch->to : ch->from] >= 0;
            if (other_local && ch->role == ROLE_SEND && pass == 0)
                rc = init_local_pair(t, ch, err); /* starts the receiving end too */
            else if (!other_local && ch->role == ROLE_SEND && pass == 0)
                rc = init_sending_end(o, ch, err);
            else if (!other_local && ch->role == ROLE_RECV && pass == 1)
                rc = init_receiving_end(t, o, ch, started, err);
        }
    }
    return rc;
}

/* Waits for every communicator (they connect in the background). */
static int wait_communicators(nccl_transport *t, tf_error *err)
{
    for (int i = 0; i < t->n_ch; i++) {
        channel *ch = &t->ch[i];
        ncclResult_t r = wait_comm(ch, now_s() + t->timeout_s);
        if (r != ncclSuccess)
            return tf_fail(err, TF_ERUNTIME,
                           "nccl transport: communicator of channel %d -> %d (device %d) failed "
                           "to start: %s%s%s",
                           ch->from, ch->to, ch->device,
                           r == ncclInProgress ? "timed out" : ncclGetErrorString(r),
                           r == ncclInProgress ? "" : ": ",
                           r == ncclInProgress ? "" : ncclGetLastError(ch->comm));
        ch->comm_ready = 1;
    }
    return 0;
}

static int start_threads(nccl_transport *t, tf_error *err)
{
    for (int i = 0; i < t->n_ch; i++) {
        channel *ch = &t->ch[i];
        if (pthread_create(&ch->thread, NULL,
                           ch->role == ROLE_SEND ? sender_thread : receiver_thread, ch) != 0)
            return tf_fail(err, TF_ERUNTIME, "nccl transport: could not start a thread");
        ch->thread_started = 1;
    }
    return 0;
}

/* The channels, their communicators and their threads. */
static int open_transport(nccl_transport *t, const tfx_nccl_options *o, tf_error *err)
{
    const time_t started = time(NULL);
    unsigned char *talks = (unsigned char *)calloc((size_t)t->world * t->world, 1);
    int rc = talks ? 0 : tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    if (rc == 0)
        rc = map_local_ranks(t, o, err);
    if (rc == 0)
        rc = neighbours(t, o, talks, err);
    if (rc == 0)
        rc = open_channels(t, talks, err);
    free(talks);
    if (rc == 0)
        rc = init_communicators(t, o, started, err);
    if (rc == 0)
        rc = wait_communicators(t, err);
    if (rc == 0)
        rc = connect_channels(t, err);
    if (rc == 0)
        rc = start_threads(t, err);
    return rc;
}

extern "C" int tfx_transport_nccl_create(const tfx_nccl_options *o, tfx_transport *out,
                                         tf_error *err)
{
    if (o->world_size < 1 || o->n_local < 1 || o->n_local > o->world_size || o->stages < 1)
        return tf_fail(err, TF_EINVAL, "nccl transport: %d ranks, %d local, %d stages",
                       o->world_size, o->n_local, o->stages);
    nccl_transport *t = (nccl_transport *)calloc(1, sizeof *t);
    if (!t)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    tfx_mailbox_init(&t->mb, drop_message, t);
    t->world = o->world_size;
    t->n_local = o->n_local;
    t->timeout_s = o->timeout_s;
    if (t->timeout_s <= 0) {
        const char *e = getenv("TFX_NCCL_TIMEOUT");
        t->timeout_s = e && atof(e) > 0 ? atof(e) : 600.0;
    }
    int rc = open_transport(t, o, err);
    if (rc < 0) {
        /* Do not wait long for peers that may never come: destroy aborts
         * the communicators that did not start. */
        t->timeout_s = 1.0;
        nccl_transport_destroy(t);
        return rc;
    }
    out->ops = &nccl_ops;
    out->ctx = t;
    return 0;
}
