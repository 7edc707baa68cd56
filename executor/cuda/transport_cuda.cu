/* transport_cuda.cu - in-process transport between CUDA rank threads.
 *
 * A message never touches host memory.  `send` copies the tensor on the
 * sender's stream into a staging buffer the transport owns (on the sender's
 * device) and records a `ready` event; the copy is queued behind the
 * kernels that produced the tensor and ahead of any that overwrite it, so
 * the sender may reuse its buffer at once (eager).  `recv` blocks on the
 * host until the message is listed, makes the receiver's stream wait for
 * `ready`, copies (a peer copy when the devices differ), and records
 * `consumed`; the next send that reuses the staging buffer first makes its
 * stream wait for `consumed`.  So neither thread waits for the GPU, and
 * ranks on one device (several streams) or on several devices behave alike.
 *
 * Staging buffers are pooled per directed rank pair: after the first step
 * no allocation happens (cudaMalloc may synchronise the device).
 */
#include "cuda_internal.h"
#include "mailbox.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct staging {
    struct staging *next;
    void *dev;             /* on the sender's device */
    size_t capacity;
    int from, to;
    cudaEvent_t ready;     /* sender's device: the copy into dev is done */
    cudaEvent_t consumed;  /* receiver's device: the copy out of dev is done */
} staging;

typedef struct cuda_transport {
    int ranks;
    tfx_backend *backends;   /* ranks, copies of the caller's handles */
    tfx_mailbox mb;          /* messages: their item is the staging buffer */
    staging **pool;          /* ranks x ranks free lists, [from * ranks + to];
                                guarded by mb.lock */
} cuda_transport;

#define TRY(call) TFX_CUDA_TRY(call)

static void staging_free(cuda_transport *t, staging *s)
{
    if (!s)
        return;
    cudaSetDevice(tfx_cuda_backend_device(&t->backends[s->from]));
    if (s->dev)
        cudaFree(s->dev);
    if (s->ready)
        cudaEventDestroy(s->ready);
    cudaSetDevice(tfx_cuda_backend_device(&t->backends[s->to]));
    if (s->consumed)
        cudaEventDestroy(s->consumed);
    free(s);
}

/* A new staging buffer for from -> to; leaves the sender's device current. */
static int staging_new(cuda_transport *t, int from, int to, size_t bytes, staging **out,
                       tf_error *err)
{
    int rc = 0;
    staging *s = (staging *)calloc(1, sizeof *s);
    if (!s)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    s->from = from;
    s->to = to;
    s->capacity = bytes ? bytes : 1;
    TRY(cudaSetDevice(tfx_cuda_backend_device(&t->backends[to])));
    TRY(cudaEventCreateWithFlags(&s->consumed, cudaEventDisableTiming));
    TRY(cudaSetDevice(tfx_cuda_backend_device(&t->backends[from])));
    TRY(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming));
    TRY(cudaMalloc(&s->dev, s->capacity));
    *out = s;
    return 0;
fail:
    staging_free(t, s);
    cudaSetDevice(tfx_cuda_backend_device(&t->backends[from]));
    return rc;
}

/* Takes a pooled buffer of at least `bytes` for from -> to, or NULL. */
static staging *pool_take(cuda_transport *t, int from, int to, size_t bytes)
{
    for (staging **p = &t->pool[from * t->ranks + to]; *p; p = &(*p)->next) {
        if ((*p)->capacity >= bytes) {
            staging *s = *p;
            *p = s->next;
            s->next = NULL;
            return s;
        }
    }
    return NULL;
}

/* Gives a buffer back to its pair's free list (mb.lock held). */
static void pool_put(cuda_transport *t, staging *s)
{
    s->next = t->pool[s->from * t->ranks + s->to];
    t->pool[s->from * t->ranks + s->to] = s;
}

/* A message nobody received: its buffer goes back to the pool.  Its copy
 * may still be queued on the sender's stream; the next copy into the
 * buffer is queued behind it on the same stream.  (mb.lock held) */
static void drop_message(void *arg, tfx_mail *m)
{
    pool_put((cuda_transport *)arg, (staging *)m->item);
}

/* pool_put, taking the lock. */
static void pool_return(cuda_transport *t, staging *s)
{
    pthread_mutex_lock(&t->mb.lock);
    pool_put(t, s);
    pthread_mutex_unlock(&t->mb.lock);
}

static int cuda_send(void *ctx, int from, int to, long tag, const void *buf, size_t bytes,
                     tf_error *err)
{
    cuda_transport *t = (cuda_transport *)ctx;
    int rc = 0;
    staging *s = NULL;
    tfx_mail *m = NULL;
    if (from < 0 || from >= t->ranks || to < 0 || to >= t->ranks)
        return tf_fail(err, TF_ERUNTIME, "transport: send from rank %d to rank %d of %d", from,
                       to, t->ranks);
    cudaStream_t stream = tfx_cuda_backend_stream(&t->backends[from]);
    m = tfx_mail_item(from, to, tag, bytes, NULL);
    if (!m)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    pthread_mutex_lock(&t->mb.lock);
    rc = tfx_mailbox_check_locked(&t->mb, from, err);
    if (rc == 0)
        s = pool_take(t, from, to, bytes);
    pthread_mutex_unlock(&t->mb.lock);
    if (rc < 0)
        goto fail;
    if (!s) {
        rc = staging_new(t, from, to, bytes, &s, err);
        if (rc < 0)
            goto fail;
    } else {
        TRY(cudaSetDevice(tfx_cuda_backend_device(&t->backends[from])));
    }
    /* The receiver may still be copying the previous message out of it. */
    TRY(cudaStreamWaitEvent(stream, s->consumed, 0));
    if (bytes)
        TRY(cudaMemcpyAsync(s->dev, buf, bytes, cudaMemcpyDeviceToDevice, stream));
    TRY(cudaEventRecord(s->ready, stream));
    m->item = s;
    if ((rc = tfx_mailbox_post(&t->mb, m, err)) < 0)
        goto fail;
    return 0;
fail:
    tfx_mail_free(m);
    if (s)
        pool_return(t, s);
    return rc;
}

/* Copies the message's staging buffer into buf on the receiver's stream,
 * once the sender's copy into it is done. */
static int copy_out(cuda_transport *t, const tfx_mail *m, void *buf, tf_error *err)
{
    int rc = 0;
    const staging *s = (const staging *)m->item;
    const int dst_dev = tfx_cuda_backend_device(&t->backends[m->to]);
    const int src_dev = tfx_cuda_backend_device(&t->backends[m->from]);
    cudaStream_t stream = tfx_cuda_backend_stream(&t->backends[m->to]);
    TRY(cudaSetDevice(dst_dev));
    TRY(cudaStreamWaitEvent(stream, s->ready, 0));
    if (m->bytes && dst_dev == src_dev)
        TRY(cudaMemcpyAsync(buf, s->dev, m->bytes, cudaMemcpyDeviceToDevice, stream));
    else if (m->bytes)
        TRY(cudaMemcpyPeerAsync(buf, dst_dev, s->dev, src_dev, m->bytes, stream));
    TRY(cudaEventRecord(s->consumed, stream));
fail:
    return rc;
}

static int cuda_recv(void *ctx, int to, int from, long tag, void *buf, size_t bytes,
                     tf_error *err)
{
    cuda_transport *t = (cuda_transport *)ctx;
    tfx_mail *m = NULL;
    if (from < 0 || from >= t->ranks || to < 0 || to >= t->ranks)
        return tf_fail(err, TF_ERUNTIME, "transport: receive by rank %d from rank %d of %d", to,
                       from, t->ranks);
    int rc = tfx_mailbox_take(&t->mb, to, from, tag, NULL, &m, err);
    if (rc < 0)
        return rc;
    rc = tfx_mail_check_size(m, bytes, err);
    if (rc == 0)
        rc = copy_out(t, m, buf, err);
    pool_return(t, (staging *)m->item);
    tfx_mail_free(m);
    return rc;
}

static void cuda_abort(void *ctx, int rank, const char *msg)
{
    tfx_mailbox_abort(&((cuda_transport *)ctx)->mb, rank, msg);
}

static int cuda_reset(void *ctx)
{
    return tfx_mailbox_reset(&((cuda_transport *)ctx)->mb);
}

static void cuda_transport_destroy(void *ctx)
{
    cuda_transport *t = (cuda_transport *)ctx;
    if (!t)
        return;
    cuda_reset(t);
    for (int r = 0; r < t->ranks; r++) {
        /* Queued copies may still read or write the staging buffers. */
        cudaSetDevice(tfx_cuda_backend_device(&t->backends[r]));
        cudaStreamSynchronize(tfx_cuda_backend_stream(&t->backends[r]));
    }
    for (int i = 0; i < t->ranks * t->ranks; i++) {
        while (t->pool[i]) {
            staging *s = t->pool[i];
            t->pool[i] = s->next;
            staging_free(t, s);
        }
    }
    tfx_mailbox_destroy(&t->mb);
    free(t->pool);
    free(t->backends);
    free(t);
}

static int cuda_ready(void *ctx, int to, int from, long tag)
{
    return tfx_mailbox_ready(&((cuda_transport *)ctx)->mb, to, from, tag);
}

static tfx_transport_ops make_cuda_transport_ops(void)
{
    tfx_transport_ops o;
    memset(&o, 0, sizeof o);
    o.name = "cuda";
    o.send = cuda_send;
    o.recv = cuda_recv;
    o.ready = cuda_ready;
    o.abort = cuda_abort;
    o.reset = cuda_reset;
    o.destroy = cuda_transport_destroy;
    return o;
}

static const tfx_transport_ops cuda_transport_ops = make_cuda_transport_ops();

/* Lets every pair of distinct devices in use copy directly when the hardware
 * allows it (NVLink / PCIe P2P); otherwise peer copies go through the host,
 * which is slower but still correct. */
static int enable_peer_access(const tfx_backend *backends, int ranks, tf_error *err)
{
    int rc = 0;
    for (int a = 0; a < ranks; a++) {
        for (int b = 0; b < ranks; b++) {
            int da = tfx_cuda_backend_device(&backends[a]);
            int db = tfx_cuda_backend_device(&backends[b]);
            int can = 0;
            if (da == db)
                continue;
            TRY(cudaDeviceCanAccessPeer(&can, da, db));
            if (!can)
                continue;
            TRY(cudaSetDevice(da));
            cudaError_t e = cudaDeviceEnablePeerAccess(db, 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled)
                (void)cudaGetLastError();
            else
                TRY(e);
        }
    }
fail:
    return rc;
}

extern "C" int tfx_transport_cuda_create(int ranks, const tfx_backend *backends,
                                         tfx_transport *out, tf_error *err)
{
    int rc = 0;
    if (ranks < 1)
        return tf_fail(err, TF_EINVAL, "cuda transport: %d ranks", ranks);
    for (int r = 0; r < ranks; r++)
        if (!tfx_backend_is_cuda(&backends[r]))
            return tf_fail(err, TF_EINVAL,
                           "cuda transport: rank %d does not use the cuda backend", r);
    cuda_transport *t = (cuda_transport *)calloc(1, sizeof *t);
    if (!t)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    t->ranks = ranks;
    t->backends = (tfx_backend *)calloc((size_t)ranks, sizeof *t->backends);
    t->pool = (staging **)calloc((size_t)ranks * ranks, sizeof *t->pool);
    if (!t->backends || !t->pool) {
        free(t->backends);
        free(t->pool);
        free(t);
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    }
    memcpy(t->backends, backends, sizeof *backends * (size_t)ranks);
    tfx_mailbox_init(&t->mb, drop_message, t);
    rc = enable_peer_access(backends, ranks, err);
    if (rc < 0) {
        cuda_transport_destroy(t);
        return rc;
    }
    out->ops = &cuda_transport_ops;
    out->ctx = t;
    return 0;
}
