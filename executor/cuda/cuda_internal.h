/* cuda_internal.h - shared by the .cu files of executor/cuda (not installed).
 *
 * Error checks: every CUDA / cuBLAS / NCCL call goes through a macro that
 * turns a failure into TF_ERUNTIME with "file:line: call: NAME (message)".
 * Functions that return an error use TFX_CUDA_TRY / TFX_CUBLAS_TRY /
 * TFX_NCCL_TRY (they need `int rc` and a `fail:` label, like check.h); the
 * backend's void ops record the first failure in their context instead.
 *
 * Kernel launchers: plain functions with C linkage that queue one kernel on
 * `stream` and return cudaGetLastError(), so the backend checks launches
 * like any other call.  Shapes of zero queue nothing.
 */
#ifndef TFX_CUDA_INTERNAL_H
#define TFX_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "tfx/cuda.h"

#define TFX_CUDA_TRY(call)                                                                 \
    do {                                                                                   \
        cudaError_t tfx_ce_ = (call);                                                      \
        if (tfx_ce_ != cudaSuccess) {                                                      \
            rc = tf_fail(err, TF_ERUNTIME, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, \
                         cudaGetErrorName(tfx_ce_), cudaGetErrorString(tfx_ce_));          \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

extern "C" {

/* The stream and device of a CUDA backend (be must be one). */
cudaStream_t tfx_cuda_backend_stream(const tfx_backend *be);
int tfx_cuda_backend_device(const tfx_backend *be);

/* ---- kernels (kernels.cu) ------------------------------------------------ */

cudaError_t tfxk_embedding_forward(cudaStream_t s, const float *table, const int32_t *tokens,
                                   int rows, int cols, float *out);
cudaError_t tfxk_embedding_backward_acc(cudaStream_t s, float *dtable, const int32_t *tokens,
                                        int rows, int cols, const float *dout);
cudaError_t tfxk_layernorm_forward(cudaStream_t s, const float *x, const float *weight,
                                   const float *bias, int rows, int cols, float eps, float *out,
                                   float *mean, float *rstd);
cudaError_t tfxk_layernorm_backward_input(cudaStream_t s, const float *dout, const float *x,
                                          const float *weight, const float *mean,
                                          const float *rstd, int rows, int cols, float *dx);
/* out[j] += sum_i dout[i,j] * (x ? (x[i,j] - mean[i]) * rstd[i] : 1): the
 * LayerNorm weight and the bias gradients, one kernel. */
cudaError_t tfxk_column_sum_acc(cudaStream_t s, const float *dout, const float *x,
                                const float *mean, const float *rstd, int rows, int cols,
                                float *out);
/* Attention's softmax over `rows` rows of seq scores (row r is query
 * r mod seq; entries after it become 0), in place; and its backward:
 * ds = p * (ds - rowsum(p * ds)) * scale, in place on ds. */
cudaError_t tfxk_causal_softmax(cudaStream_t s, float *p, int rows, int seq);
cudaError_t tfxk_causal_softmax_backward(cudaStream_t s, const float *p, float *ds, int rows,
                                         int seq, float scale);
cudaError_t tfxk_bias_forward(cudaStream_t s, float *out, const float *bias, int rows,
                              int cols);
cudaError_t tfxk_gelu_forward(cudaStream_t s, const float *x, size_t count, float *out,
                              float *aux);
cudaError_t tfxk_gelu_backward(cudaStream_t s, const float *x, const float *aux,
                               const float *dout, size_t count, float *dx);
cudaError_t tfxk_add(cudaStream_t s, float *y, const float *x, size_t count);
cudaError_t tfxk_scale(cudaStream_t s, float *y, float alpha, size_t count);
/* Per-row losses go to row_loss (rows doubles, device); then
 * tfxk_sum_rows adds them in a fixed order into *total (device). */
cudaError_t tfxk_softmax_xent(cudaStream_t s, const float *logits, const int32_t *targets,
                              int rows, int vocab, float scale, float *dlogits,
                              double *row_loss);
cudaError_t tfxk_sum_rows(cudaStream_t s, const double *row_loss, int rows, double *total);
/* c1, c2: the bias corrections 1 - beta^t, computed in double on the host. */
cudaError_t tfxk_adamw(cudaStream_t s, float *param, const float *grad, float *m, float *v,
                       size_t count, float lr, float beta1, float beta2, float eps,
                       float weight_decay, double c1, double c2);

} /* extern "C" */

#endif
