/* backend_cuda.cu - the CUDA backend: memory, cuBLAS GEMMs, kernel calls.
 *
 * One instance per rank: a device, a non-blocking stream and a cuBLAS handle
 * bound to it, so ranks sharing a GPU overlap like separate GPUs would.
 * Rank threads are started afresh for every step, so every entry point
 * makes its device current first (cheap when it already is).
 *
 * The ops of backend.h return nothing, so the first failure of a CUDA or
 * cuBLAS call (file, line, call and CUDA's message) is kept in the context;
 * later ops do nothing and the next `synchronize` reports it.  Nothing here
 * prints or exits.
 */
#include "cuda_internal.h"

#include <cublas_v2.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A loss that softmax_xent computed on the device and that `synchronize`
 * hands to the caller's host double once the stream has reached it. */
typedef struct pending_loss {
    double *host_dst;   /* the caller's *loss_sum */
    int slot;           /* index into loss_dev / loss_pinned */
} pending_loss;

#define LOSS_SLOTS 64   /* softmax_xent calls between two synchronizes */

typedef struct cuda_ctx {
    int rank, device;
    cudaStream_t stream;
    cublasHandle_t blas;
    int tf32;
    int stream_ordered;         /* cudaMallocAsync / cudaFreeAsync are available */
    int failed;                 /* first failure recorded in `failure` */
    char failure[768];
    double *row_loss;           /* device, row_loss_cap doubles */
    int row_loss_cap;
    double *loss_dev;           /* device, LOSS_SLOTS totals */
    double *loss_pinned;        /* pinned host copies of loss_dev */
    pending_loss pending[LOSS_SLOTS];
    int n_pending;
    cudaEvent_t timer_begin, timer_end;
    void *blas_workspace;       /* given to cuBLAS so it never allocates mid-run */
} cuda_ctx;

/* cuBLAS's recommended workspace on Hopper; smaller GPUs need less. */
#define BLAS_WORKSPACE_BYTES ((size_t)32 << 20)

static void record_failure(cuda_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void record_failure(cuda_ctx *c, const char *fmt, ...)
{
    if (c->failed)
        return; /* the first failure is the cause; later ones follow from it */
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->failure, sizeof c->failure, fmt, ap);
    va_end(ap);
}

/* Checks a CUDA call inside a void op: records the failure and returns 1. */
#define CUDA_OK(c, call) cuda_ok((c), (call), #call, __FILE__, __LINE__)
#define CUBLAS_OK(c, call) cublas_ok((c), (call), #call, __FILE__, __LINE__)

static int cuda_ok(cuda_ctx *c, cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess)
        return 1;
    record_failure(c, "%s:%d: %s: %s (%s)", file, line, call, cudaGetErrorName(e),
                   cudaGetErrorString(e));
    return 0;
}

static int cublas_ok(cuda_ctx *c, cublasStatus_t s, const char *call, const char *file,
                     int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 1;
    record_failure(c, "%s:%d: %s: %s (%s)", file, line, call, cublasGetStatusName(s),
                   cublasGetStatusString(s));
    return 0;
}

/* Makes the device current and says whether the op should run at all. */
static int enter(cuda_ctx *c)
{
    if (c->failed)
        return 0;
    return CUDA_OK(c, cudaSetDevice(c->device));
}

static int failure_error(cuda_ctx *c, tf_error *err)
{
    return tf_fail(err, TF_ERUNTIME, "cuda backend (rank %d, device %d): %s", c->rank,
                   c->device, c->failure);
}

static int cuda_synchronize(void *ctx, tf_error *err);

/* ---- memory --------------------------------------------------------------- */

static int cuda_alloc(void *ctx, size_t bytes, void **out, tf_error *err)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    *out = NULL;
    if (!enter(c))
        return failure_error(c, err);
    void *p = NULL;
    /* Keep every buffer a valid pointer, as the CPU backend does.  The
     * stream-ordered allocator never synchronises the device, which matters:
     * the NCCL transport keeps a receive posted on the device at all times,
     * and a device-wide synchronisation (cudaFree does one) would wait for
     * it forever. */
    cudaError_t e = c->stream_ordered ? cudaMallocAsync(&p, bytes ? bytes : 1, c->stream)
                                      : cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is not sticky */
        return tf_fail(err, e == cudaErrorMemoryAllocation ? TF_ENOMEM : TF_ERUNTIME,
                       "%s:%d: cudaMalloc of %zu bytes on device %d: %s (%s)", __FILE__,
                       __LINE__, bytes, c->device, cudaGetErrorName(e), cudaGetErrorString(e));
    }
    /* Other ranks' streams (transport copies) may touch the buffer: make
     * the allocation and the zero-fill complete before handing it out. */
    if ((bytes && !CUDA_OK(c, cudaMemsetAsync(p, 0, bytes, c->stream))) ||
        !CUDA_OK(c, cudaStreamSynchronize(c->stream))) {
        if (c->stream_ordered)
            cudaFreeAsync(p, c->stream);
        else
            cudaFree(p);
        return failure_error(c, err);
    }
    *out = p;
    return 0;
}

static void cuda_free(void *ctx, void *ptr)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!ptr)
        return;
    /* Free even after a failure: destroy paths must release everything. */
    cudaSetDevice(c->device);
    if (c->stream_ordered) {
        /* After the work queued on the stream, without a device-wide wait. */
        CUDA_OK(c, cudaFreeAsync(ptr, c->stream));
    } else {
        cudaStreamSynchronize(c->stream); /* queued work may still use it */
        CUDA_OK(c, cudaFree(ptr));
    }
}

static void cuda_zero(void *ctx, void *ptr, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (bytes && enter(c))
        CUDA_OK(c, cudaMemsetAsync(ptr, 0, bytes, c->stream));
}

/* From pageable memory the copy returns once the source may be reused. */
static void cuda_upload(void *ctx, void *dst, const void *host_src, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (bytes && enter(c))
        CUDA_OK(c, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, c->stream));
}

/* The caller reads host_dst right away: wait for the copy.  After a failure
 * the destination is zero-filled so nobody reads garbage. */
static void cuda_download(void *ctx, void *host_dst, const void *src, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!bytes)
        return;
    if (!enter(c) ||
        !CUDA_OK(c, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, c->stream)) ||
        !CUDA_OK(c, cudaStreamSynchronize(c->stream)))
        memset(host_dst, 0, bytes);
}

static void cuda_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (bytes && dst != src && enter(c))
        CUDA_OK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}

/* ---- GEMM ----------------------------------------------------------------- */

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the
 * operands and the sizes, keep the transpose flags and leading dimensions. */
static void cuda_gemm(void *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *cm,
                      int ldc)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (m <= 0 || n <= 0 || !enter(c))
        return;
    CUBLAS_OK(c, cublasSgemm(c->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a,
                             lda, &beta, cm, ldc));
}

/* ---- kernels -------------------------------------------------------------- */

#define LAUNCH(c, call)                                                                    \
    do {                                                                                   \
        if (enter(c))                                                                      \
            CUDA_OK((c), (call));                                                          \
    } while (0)

static void cuda_embedding_forward(void *ctx, const float *table, const int32_t *tokens,
                                   int rows, int cols, float *out)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_embedding_forward(c->stream, table, tokens, rows, cols, out));
}

static void cuda_embedding_backward_acc(void *ctx, float *dtable, const int32_t *tokens,
                                        int rows, int cols, const float *dout)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_embedding_backward_acc(c->stream, dtable, tokens, rows, cols, dout));
}

static void cuda_layernorm_forward(void *ctx, const float *x, const float *weight,
                                   const float *bias, int rows, int cols, float eps, float *out,
                                   float *mean, float *rstd)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_layernorm_forward(c->stream, x, weight, bias, rows, cols, eps, out, mean,
                                     rstd));
}

static void cuda_layernorm_backward_input(void *ctx, const float *dout, const float *x,
                                          const float *weight, const float *mean,
                                          const float *rstd, int rows, int cols, float *dx)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_layernorm_backward_input(c->stream, dout, x, weight, mean, rstd, rows, cols,
                                            dx));
}

static void cuda_layernorm_backward_weight_acc(void *ctx, const float *dout, const float *x,
                                               const float *mean, const float *rstd, int rows,
                                               int cols, float *dweight)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_column_sum_acc(c->stream, dout, x, mean, rstd, rows, cols, dweight));
}

/* ---- attention: per sequence, one strided-batched GEMM over the heads ----- */

/* Row-major op(A) op(B) for `batch` matrices spaced stride_* floats apart,
 * through column-major cuBLAS as in cuda_gemm. */
static void gemm_heads(cuda_ctx *c, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, long long stride_a, const float *b, int ldb,
                       long long stride_b, float *cm, int ldc, long long stride_c, int batch)
{
    const float beta = 0.0f;
    CUBLAS_OK(c, cublasSgemmStridedBatched(c->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                           b, ldb, stride_b, a, lda, stride_a, &beta, cm, ldc,
                                           stride_c, batch));
}

/* q, k and v of head h of a sequence start h * head_size floats into its
 * rows of qkv (row stride 3C), so the heads of one sequence are one
 * strided batch; the sequences are a loop. */
static void cuda_attention_forward(void *ctx, const float *qkv, int batch, int seq, int heads,
                                   int head_size, float *out, float *probs)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (batch <= 0 || seq <= 0 || !enter(c))
        return;
    const int C = heads * head_size, ld = 3 * C;
    const long long tt = (long long)seq * seq;
    const float scale = 1.0f / sqrtf((float)head_size);
    for (int b = 0; b < batch && !c->failed; b++) {
        const float *q = qkv + (size_t)b * seq * ld, *k = q + C, *v = q + 2 * C;
        float *p = probs + (size_t)b * heads * tt;
        gemm_heads(c, 0, 1, seq, seq, head_size, scale, q, ld, head_size, k, ld, head_size, p,
                   seq, tt, heads);
        CUDA_OK(c, tfxk_causal_softmax(c->stream, p, heads * seq, seq));
        gemm_heads(c, 0, 0, seq, head_size, seq, 1.0f, p, seq, tt, v, ld, head_size,
                   out + (size_t)b * seq * C, C, head_size, heads);
    }
}

static void cuda_attention_backward(void *ctx, const float *dout, const float *qkv,
                                    const float *probs, int batch, int seq, int heads,
                                    int head_size, float *scratch, float *dqkv)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (batch <= 0 || seq <= 0 || !enter(c))
        return;
    const int C = heads * head_size, ld = 3 * C;
    const long long tt = (long long)seq * seq;
    const float scale = 1.0f / sqrtf((float)head_size);
    for (int b = 0; b < batch && !c->failed; b++) {
        const size_t off = (size_t)b * seq * ld;
        const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
        const float *p = probs + (size_t)b * heads * tt, *dy = dout + (size_t)b * seq * C;
        float *ds = scratch + (size_t)b * heads * tt;
        /* dP = dy v^T, dv = P^T dy, dS = softmax backward, dq = dS k, dk = dS^T q */
        gemm_heads(c, 0, 1, seq, seq, head_size, 1.0f, dy, C, head_size, v, ld, head_size, ds,
                   seq, tt, heads);
        gemm_heads(c, 1, 0, seq, head_size, seq, 1.0f, p, seq, tt, dy, C, head_size, dv, ld,
                   head_size, heads);
        CUDA_OK(c, tfxk_causal_softmax_backward(c->stream, p, ds, heads * seq, seq, scale));
        gemm_heads(c, 0, 0, seq, head_size, seq, 1.0f, ds, seq, tt, k, ld, head_size, dq, ld,
                   head_size, heads);
        gemm_heads(c, 1, 0, seq, head_size, seq, 1.0f, ds, seq, tt, q, ld, head_size, dk, ld,
                   head_size, heads);
    }
}

static void cuda_bias_forward(void *ctx, float *out, const float *bias, int rows, int cols)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_bias_forward(c->stream, out, bias, rows, cols));
}

static void cuda_bias_backward_acc(void *ctx, const float *dout, int rows, int cols,
                                   float *dbias)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_column_sum_acc(c->stream, dout, NULL, NULL, NULL, rows, cols, dbias));
}

static void cuda_gelu_forward(void *ctx, const float *x, size_t count, float *out, float *aux)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_gelu_forward(c->stream, x, count, out, aux));
}

static void cuda_gelu_backward(void *ctx, const float *x, const float *aux, const float *dout,
                               size_t count, float *dx)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_gelu_backward(c->stream, x, aux, dout, count, dx));
}

static void cuda_scale(void *ctx, float *y, float alpha, size_t count)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_scale(c->stream, y, alpha, count));
}

static void cuda_add(void *ctx, float *y, const float *x, size_t count)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    LAUNCH(c, tfxk_add(c->stream, y, x, count));
}

/* The per-row losses are summed on the device in a fixed order, copied to a
 * pinned slot, and handed to *loss_sum by the next synchronize: no extra
 * host wait in the middle of a forward pass. */
static void cuda_softmax_xent(void *ctx, const float *logits, const int32_t *targets, int rows,
                              int vocab, float scale, float *dlogits, double *loss_sum)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    *loss_sum = 0.0;
    if (!enter(c))
        return;
    if (c->n_pending == LOSS_SLOTS) {
        /* More softmax_xent calls than slots without a synchronize: drain. */
        tf_error ignored;
        if (cuda_synchronize(c, &ignored) < 0)
            return;
    }
    if (rows > c->row_loss_cap) {
        /* Grows once to the largest microbatch; through alloc/free so that it
         * never synchronises the device either. */
        tf_error ignored;
        void *grown = NULL;
        if (cuda_alloc(c, sizeof(double) * (size_t)rows, &grown, &ignored) < 0) {
            record_failure(c, "%s", ignored.msg);
            return;
        }
        cuda_free(c, c->row_loss);
        c->row_loss = (double *)grown;
        c->row_loss_cap = rows;
    }
    int slot = c->n_pending;
    if (!CUDA_OK(c, tfxk_softmax_xent(c->stream, logits, targets, rows, vocab, scale, dlogits,
                                      c->row_loss)) ||
        !CUDA_OK(c, tfxk_sum_rows(c->stream, c->row_loss, rows, c->loss_dev + slot)) ||
        !CUDA_OK(c, cudaMemcpyAsync(c->loss_pinned + slot, c->loss_dev + slot, sizeof(double),
                                    cudaMemcpyDeviceToHost, c->stream)))
        return;
    c->pending[c->n_pending++] = (pending_loss){loss_sum, slot};
}

static void cuda_adamw(void *ctx, float *param, const float *grad, float *m, float *v,
                       size_t count, float lr, float beta1, float beta2, float eps,
                       float weight_decay, long t)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    double c1 = 1.0 - pow(beta1, (double)t);
    double c2 = 1.0 - pow(beta2, (double)t);
    LAUNCH(c, tfxk_adamw(c->stream, param, grad, m, v, count, lr, beta1, beta2, eps,
                         weight_decay, c1, c2));
}

/* ---- synchronisation and lifetime ----------------------------------------- */

static int cuda_synchronize(void *ctx, tf_error *err)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (enter(c)) {
        CUDA_OK(c, cudaStreamSynchronize(c->stream));
        /* Also catch a kernel fault that surfaced on another call. */
        CUDA_OK(c, cudaGetLastError());
    }
    if (c->failed) {
        c->n_pending = 0;
        return failure_error(c, err);
    }
    for (int i = 0; i < c->n_pending; i++)
        *c->pending[i].host_dst = c->loss_pinned[c->pending[i].slot];
    c->n_pending = 0;
    return 0;
}

/* Device time on the rank's stream: the kernels run asynchronously to the
 * host, whose clock would measure only their launch. */
static int cuda_timer_start(void *ctx, tf_error *err)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!enter(c) || !CUDA_OK(c, cudaEventRecord(c->timer_begin, c->stream)))
        return failure_error(c, err);
    return 0;
}

static int cuda_timer_stop(void *ctx, double *ms, tf_error *err)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    float elapsed = 0.0f;
    *ms = 0.0;
    if (!enter(c) || !CUDA_OK(c, cudaEventRecord(c->timer_end, c->stream)) ||
        !CUDA_OK(c, cudaEventSynchronize(c->timer_end)) ||
        !CUDA_OK(c, cudaEventElapsedTime(&elapsed, c->timer_begin, c->timer_end)))
        return failure_error(c, err);
    *ms = elapsed;
    return 0;
}

static void cuda_destroy(void *ctx)
{
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!c)
        return;
    cudaSetDevice(c->device);
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->timer_begin)
        cudaEventDestroy(c->timer_begin);
    if (c->timer_end)
        cudaEventDestroy(c->timer_end);
    if (c->row_loss)
        cudaFree(c->row_loss);
    if (c->blas_workspace)
        cudaFree(c->blas_workspace);
    if (c->loss_dev)
        cudaFree(c->loss_dev);
    if (c->loss_pinned)
        cudaFreeHost(c->loss_pinned);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    free(c);
}

/* Filled by name, so the table does not depend on the order of the fields
 * in backend.h (C++17 has no designated initialisers). */
static tfx_backend_ops make_cuda_ops(void)
{
    tfx_backend_ops o;
    memset(&o, 0, sizeof o);
    o.name = "cuda";
    o.alloc = cuda_alloc;
    o.free = cuda_free;
    o.zero = cuda_zero;
    o.upload = cuda_upload;
    o.download = cuda_download;
    o.copy = cuda_copy;
    o.gemm = cuda_gemm;
    o.embedding_forward = cuda_embedding_forward;
    o.embedding_backward_acc = cuda_embedding_backward_acc;
    o.layernorm_forward = cuda_layernorm_forward;
    o.layernorm_backward_input = cuda_layernorm_backward_input;
    o.layernorm_backward_weight_acc = cuda_layernorm_backward_weight_acc;
    o.attention_forward = cuda_attention_forward;
    o.attention_backward = cuda_attention_backward;
    o.bias_forward = cuda_bias_forward;
    o.bias_backward_acc = cuda_bias_backward_acc;
    o.gelu_forward = cuda_gelu_forward;
    o.gelu_backward = cuda_gelu_backward;
    o.add = cuda_add;
    o.scale = cuda_scale;
    o.softmax_xent = cuda_softmax_xent;
    o.adamw = cuda_adamw;
    o.synchronize = cuda_synchronize;
    o.timer_start = cuda_timer_start;
    o.timer_stop = cuda_timer_stop;
    o.destroy = cuda_destroy;
    return o;
}

static const tfx_backend_ops cuda_ops = make_cuda_ops();

/* ---- public entry points -------------------------------------------------- */

extern "C" int tfx_cuda_built(void)
{
    return 1;
}

extern "C" int tfx_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver / no GPU is an answer, not an error */
        return 0;
    }
    return n;
}

extern "C" int tfx_cuda_device_name(int device, char *buf, size_t size, tf_error *err)
{
    int rc = 0;
    cudaDeviceProp prop;
    TFX_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    snprintf(buf, size, "%s, sm_%d%d, %.1f GiB", prop.name, prop.major, prop.minor,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return 0;
fail:
    if (size)
        buf[0] = '\0';
    return rc;
}

extern "C" int tfx_cuda_device_attributes(int device, int *major, int *minor, int *sms,
                                          int *clock_khz, tf_error *err)
{
    int rc = 0;
    TFX_CUDA_TRY(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device));
    TFX_CUDA_TRY(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, device));
    TFX_CUDA_TRY(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device));
    TFX_CUDA_TRY(cudaDeviceGetAttribute(clock_khz, cudaDevAttrClockRate, device));
fail:
    return rc;
}

extern "C" int tfx_cuda_device_for_rank(const char *spec, int rank, int *device, tf_error *err)
{
    if (!spec || !*spec)
        spec = getenv("TFX_CUDA_DEVICES");
    int count = tfx_cuda_device_count();
    if (count == 0)
        return tf_fail(err, TF_ERUNTIME,
                       "--backend cuda: no CUDA device is visible (driver missing, no GPU, or "
                       "CUDA_VISIBLE_DEVICES empty)");
    if (!spec || !*spec) {
        *device = rank % count;
        return 0;
    }
    /* Entry rank mod (number of entries). */
    int entries = 1;
    for (const char *p = spec; *p; p++)
        entries += *p == ',';
    int want = rank % entries, index = 0;
    const char *p = spec;
    for (; index < want; p++)
        if (*p == ',')
            index++;
    char *end;
    long d = strtol(p, &end, 10);
    if (end == p || (*end && *end != ',') || d < 0 || d >= count)
        return tf_fail(err, TF_EINVAL,
                       "--devices \"%s\": entry %d is not a device number from 0 to %d", spec,
                       want, count - 1);
    *device = (int)d;
    return 0;
}

extern "C" int tfx_backend_cuda_create(int rank, int device, tfx_backend *out, tf_error *err)
{
    int rc = 0;
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    if (!c)
        return tf_fail(err, TF_ENOMEM, "cuda backend: out of memory");
    c->rank = rank;
    c->device = device;
    int count = tfx_cuda_device_count();
    if (device < 0 || device >= count) {
        free(c);
        return tf_fail(err, TF_ERUNTIME,
                       "cuda backend for rank %d: device %d does not exist (%d visible)", rank,
                       device, count);
    }
    TFX_CUDA_TRY(cudaSetDevice(device));
    TFX_CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    TFX_CUDA_TRY(cudaDeviceGetAttribute(&c->stream_ordered, cudaDevAttrMemoryPoolsSupported,
                                        device));
    {
        cublasStatus_t s = cublasCreate(&c->blas);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasSetStream(c->blas, c->stream);
        /* After cublasSetStream, which resets the workspace.  cuBLAS would
         * otherwise allocate one at the first GEMM, possibly while the NCCL
         * transport has a receive posted on the device. */
        if (s == CUBLAS_STATUS_SUCCESS &&
            cudaMalloc(&c->blas_workspace, BLAS_WORKSPACE_BYTES) == cudaSuccess)
            s = cublasSetWorkspace(c->blas, c->blas_workspace, BLAS_WORKSPACE_BYTES);
        else
            (void)cudaGetLastError(); /* no workspace of our own: cuBLAS's default */
        if (s != CUBLAS_STATUS_SUCCESS) {
            rc = tf_fail(err, TF_ERUNTIME, "%s:%d: cuBLAS set-up on device %d: %s (%s)",
                         __FILE__, __LINE__, device, cublasGetStatusName(s),
                         cublasGetStatusString(s));
            goto fail;
        }
    }
    TFX_CUDA_TRY(cudaMalloc((void **)&c->loss_dev, sizeof(double) * LOSS_SLOTS));
    TFX_CUDA_TRY(cudaMallocHost((void **)&c->loss_pinned, sizeof(double) * LOSS_SLOTS));
    TFX_CUDA_TRY(cudaEventCreate(&c->timer_begin));
    TFX_CUDA_TRY(cudaEventCreate(&c->timer_end));
    out->ops = &cuda_ops;
    out->ctx = c;
    {
        const char *tf32 = getenv("TFX_CUDA_TF32");
        if (tf32 && strcmp(tf32, "1") == 0 && (rc = tfx_backend_cuda_set_tf32(out, 1, err)) < 0)
            goto fail;
    }
    return 0;
fail:
    cuda_destroy(c);
    out->ops = NULL;
    out->ctx = NULL;
    return rc;
}

extern "C" int tfx_backend_is_cuda(const tfx_backend *be)
{
    return be && be->ops == &cuda_ops;
}

extern "C" int tfx_backend_cuda_set_tf32(tfx_backend *be, int on, tf_error *err)
{
    if (!tfx_backend_is_cuda(be))
        return tf_fail(err, TF_EINVAL, "--tf32: the backend is not cuda");
    cuda_ctx *c = (cuda_ctx *)be->ctx;
    if (!enter(c) ||
        !CUBLAS_OK(c, cublasSetMathMode(c->blas, on ? CUBLAS_TF32_TENSOR_OP_MATH
                                                    : CUBLAS_DEFAULT_MATH)))
        return failure_error(c, err);
    c->tf32 = on != 0;
    return 0;
}

extern "C" cudaStream_t tfx_cuda_backend_stream(const tfx_backend *be)
{
    return ((const cuda_ctx *)be->ctx)->stream;
}

extern "C" int tfx_cuda_backend_device(const tfx_backend *be)
{
    return ((const cuda_ctx *)be->ctx)->device;
}
