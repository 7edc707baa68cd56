/* kernels_cpu.h - the CPU backend's kernels (internal to cpu/).
 *
 * One function per op of tfx_backend_ops (tfx/backend.h says what each
 * computes); ctx is the backend's and unused.  They run on the calling
 * thread and return when done.
 */
#ifndef TFX_KERNELS_CPU_H
#define TFX_KERNELS_CPU_H

#include <stddef.h>
#include <stdint.h>

void tfxc_embedding_forward(void *ctx, const float *table, const int32_t *tokens, int rows,
                            int cols, float *out);
void tfxc_embedding_backward_acc(void *ctx, float *dtable, const int32_t *tokens, int rows,
                                 int cols, const float *dout);
void tfxc_layernorm_forward(void *ctx, const float *x, const float *weight, const float *bias,
                            int rows, int cols, float eps, float *out, float *mean, float *rstd);
void tfxc_layernorm_backward_input(void *ctx, const float *dout, const float *x,
                                   const float *weight, const float *mean, const float *rstd,
                                   int rows, int cols, float *dx);
void tfxc_layernorm_backward_weight_acc(void *ctx, const float *dout, const float *x,
                                        const float *mean, const float *rstd, int rows,
                                        int cols, float *dweight);
void tfxc_attention_forward(void *ctx, const float *qkv, int batch, int seq, int heads,
                            int head_size, float *out, float *probs);
void tfxc_attention_backward(void *ctx, const float *dout, const float *qkv,
                             const float *probs, int batch, int seq, int heads, int head_size,
                             float *scratch, float *dqkv);
void tfxc_bias_forward(void *ctx, float *out, const float *bias, int rows, int cols);
void tfxc_bias_backward_acc(void *ctx, const float *dout, int rows, int cols, float *dbias);
void tfxc_gelu_forward(void *ctx, const float *x, size_t count, float *out, float *aux);
void tfxc_gelu_backward(void *ctx, const float *x, const float *aux, const float *dout,
                        size_t count, float *dx);
void tfxc_scale(void *ctx, float *y, float alpha, size_t count);
void tfxc_add(void *ctx, float *y, const float *x, size_t count);
void tfxc_softmax_xent(void *ctx, const float *logits, const int32_t *targets, int rows,
                       int vocab, float scale, float *dlogits, double *loss_sum);
void tfxc_adamw(void *ctx, float *param, const float *grad, float *m, float *v, size_t count,
                float lr, float beta1, float beta2, float eps, float weight_decay, long t);

#endif
