/* backend.h - the compute backend: memory and the kernels the model needs.
 *
 * The runtime never touches tensor memory directly; it calls these function
 * pointers on buffers the backend allocated ("device memory").  The CPU
 * backend (cpu/) implements them with CBLAS and plain C; a CUDA backend
 * implements the same table with cuBLAS and its own kernels, one instance per
 * GPU/stream.  Each rank thread owns one backend instance and is the only
 * thread that calls it, so instances need no locking.
 *
 * Conventions: matrices are row-major float32; `count`/`rows`/`cols` are
 * element counts; kernels that end in `_acc` add into their output (gradient
 * accumulation), all others overwrite it.  Kernels return nothing: a backend
 * that can fail asynchronously (CUDA) reports the failure from the next
 * `synchronize`, which the runtime calls after every action.
 */
#ifndef TFX_BACKEND_H
#define TFX_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "tf/error.h"

typedef struct tfx_backend_ops {
    const char *name;  /* "cpu", "cuda" */

    /* Memory.  alloc returns 0 and zero-filled memory in *out, or TF_ENOMEM
     * with a message; free accepts NULL.  upload/download copy between host
     * and device memory, copy within the device. */
    int (*alloc)(void *ctx, size_t bytes, void **out, tf_error *err);
    void (*free)(void *ctx, void *ptr);
    void (*zero)(void *ctx, void *ptr, size_t bytes);
    void (*upload)(void *ctx, void *dst, const void *host_src, size_t bytes);
    void (*download)(void *ctx, void *host_dst, const void *src, size_t bytes);
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes);

    /* C[m x n] = alpha * op(A) op(B) + beta * C, row-major, op = transpose
     * when trans_* is non-zero (A is m x k after op, B is k x n after op). */
    void (*gemm)(void *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc);

    /* out[i, :] = table[tokens[i], :] for i < rows; table is vocab x cols. */
    void (*embedding_forward)(void *ctx, const float *table, const int32_t *tokens, int rows,
                              int cols, float *out);
    /* dtable[tokens[i], :] += dout[i, :]  (scatter-add, in row order). */
    void (*embedding_backward_acc)(void *ctx, float *dtable, const int32_t *tokens, int rows,
                                   int cols, const float *dout);

    /* LayerNorm over each row: mean[i], rstd[i] = 1/sqrt(var_i + eps) (the
     * biased variance), out = (x - mean) * rstd * weight + bias. */
    void (*layernorm_forward)(void *ctx, const float *x, const float *weight, const float *bias,
                              int rows, int cols, float eps, float *out, float *mean,
                              float *rstd);
    /* dx = gradient of the input given dout (overwrites dx). */
    void (*layernorm_backward_input)(void *ctx, const float *dout, const float *x,
                                     const float *weight, const float *mean, const float *rstd,
                                     int rows, int cols, float *dx);
    /* dweight[j] += sum_i dout[i,j] * (x[i,j] - mean[i]) * rstd[i].  (The
     * bias's gradient is bias_backward_acc of dout.) */
    void (*layernorm_backward_weight_acc)(void *ctx, const float *dout, const float *x,
                                          const float *mean, const float *rstd, int rows,
                                          int cols, float *dweight);

    /* Causal multi-head self-attention of `batch` sequences of `seq` tokens,
     * C = heads * head_size.  qkv is (batch * seq) x 3C, row = [q | k | v],
     * head h in columns h * head_size of each part; out is (batch * seq) x C
     * (heads side by side); probs (batch x heads x seq x seq) receives the
     * softmax weights softmax(q k^T / sqrt(head_size)) with the entries
     * above the diagonal 0, for the backward. */
    void (*attention_forward)(void *ctx, const float *qkv, int batch, int seq, int heads,
                              int head_size, float *out, float *probs);
    /* dqkv = gradient of qkv given dout (overwrites dqkv); scratch has room
     * for batch x heads x seq x seq floats. */
    void (*attention_backward)(void *ctx, const float *dout, const float *qkv,
                               const float *probs, int batch, int seq, int heads,
                               int head_size, float *scratch, float *dqkv);

    /* out[i, j] += bias[j]. */
    void (*bias_forward)(void *ctx, float *out, const float *bias, int rows, int cols);
    /* dbias[j] += sum_i dout[i, j]. */
    void (*bias_backward_acc)(void *ctx, const float *dout, int rows, int cols, float *dbias);

    /* GELU (tanh approximation): out = gelu(x), and aux (count floats) keeps
     * the tanh term so the backward need not recompute it; dx = gelu'(x) *
     * dout from x and that aux (dx may alias dout). */
    void (*gelu_forward)(void *ctx, const float *x, size_t count, float *out, float *aux);
    void (*gelu_backward)(void *ctx, const float *x, const float *aux, const float *dout,
                          size_t count, float *dx);

    /* y += x. */
    void (*add)(void *ctx, float *y, const float *x, size_t count);
    /* y *= alpha. */
    void (*scale)(void *ctx, float *y, float alpha, size_t count);

    /* Softmax cross-entropy over rows of logits (rows x vocab) with integer
     * targets: *loss_sum (host) = sum of the rows' losses in double;
     * dlogits = scale * (softmax - onehot) (may alias logits). */
    void (*softmax_xent)(void *ctx, const float *logits, const int32_t *targets, int rows,
                         int vocab, float scale, float *dlogits, double *loss_sum);

    /* One AdamW update with bias correction for step t >= 1:
     * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * p -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p). */
    void (*adamw)(void *ctx, float *param, const float *grad, float *m, float *v,
                  size_t count, float lr, float beta1, float beta2, float eps,
                  float weight_decay, long t);

    /* Waits for queued work; returns 0 or a negative TF_E* code with a
     * message for a failure of earlier kernels. */
    int (*synchronize)(void *ctx, tf_error *err);

    /* Compute time of one action, as the profile reports it: timer_start
     * before the action's first kernel, timer_stop after its last; stop
     * stores the elapsed milliseconds in *ms.  Each backend times on its
     * own clock: the CPU's ops finish before they return, so the monotonic
     * clock of the host is right; a CUDA stream runs asynchronously, so the
     * CUDA backend records events on it and stop waits for them.  Both
     * return 0 or the backend's pending failure (TF_ERUNTIME). */
    int (*timer_start)(void *ctx, tf_error *err);
    int (*timer_stop)(void *ctx, double *ms, tf_error *err);

    /* Releases the instance (ctx).  Buffers must have been freed. */
    void (*destroy)(void *ctx);
} tfx_backend_ops;

typedef struct tfx_backend {
    const tfx_backend_ops *ops;
    void *ctx;
} tfx_backend;

/* Creates the CPU backend for one rank (GEMMs through CBLAS, single-threaded
 * BLAS so that the rank threads do not oversubscribe the cores).
 * Returns 0 or TF_ENOMEM; release with out->ops->destroy(out->ctx). */
int tfx_backend_cpu_create(int rank, tfx_backend *out, tf_error *err);

/* The CUDA backend is declared in tfx/cuda.h; tfx/registry.h creates either
 * by name. */

#endif
