/* backend_cpu.c - the CPU backend: host memory, CBLAS GEMMs, the wall
 * clock as the action timer, and the kernels of kernels_cpu.c in its ops
 * table.  Every other backend's kernels are tested against its
 * (tests/cuda).
 */
#include "tfx/backend.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "tf/util.h"

typedef struct cpu_ctx {
    int rank;
    double timer_begin; /* tf_now_seconds() at timer_start */
} cpu_ctx;

static int cpu_alloc(void *ctx, size_t bytes, void **out, tf_error *err)
{
    (void)ctx;
    /* calloc(0) may return NULL; keep every buffer a valid pointer. */
    *out = calloc(1, bytes ? bytes : 1);
    if (!*out)
        return tf_fail(err, TF_ENOMEM, "cpu backend: out of memory allocating %zu bytes", bytes);
    return 0;
}

static void cpu_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

static void cpu_zero(void *ctx, void *ptr, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memset(ptr, 0, bytes);
}

static void cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes && dst != src)
        memmove(dst, src, bytes);
}

static void cpu_gemm(void *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc)
{
    (void)ctx;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
}

static int cpu_synchronize(void *ctx, tf_error *err)
{
    (void)ctx;
    (void)err;
    return 0;
}

static int cpu_timer_start(void *ctx, tf_error *err)
{
    (void)err;
    ((cpu_ctx *)ctx)->timer_begin = tf_now_seconds();
    return 0;
}

static int cpu_timer_stop(void *ctx, double *ms, tf_error *err)
{
    (void)err;
    *ms = (tf_now_seconds() - ((cpu_ctx *)ctx)->timer_begin) * 1e3;
    return 0;
}

static void cpu_destroy(void *ctx)
{
    free(ctx);
}

static const tfx_backend_ops cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .gemm = cpu_gemm,
    .embedding_forward = tfxc_embedding_forward,
    .embedding_backward_acc = tfxc_embedding_backward_acc,
    .layernorm_forward = tfxc_layernorm_forward,
    .layernorm_backward_input = tfxc_layernorm_backward_input,
    .layernorm_backward_weight_acc = tfxc_layernorm_backward_weight_acc,
    .attention_forward = tfxc_attention_forward,
    .attention_backward = tfxc_attention_backward,
    .bias_forward = tfxc_bias_forward,
    .bias_backward_acc = tfxc_bias_backward_acc,
    .gelu_forward = tfxc_gelu_forward,
    .gelu_backward = tfxc_gelu_backward,
    .add = tfxc_add,
    .scale = tfxc_scale,
    .softmax_xent = tfxc_softmax_xent,
    .adamw = tfxc_adamw,
    .synchronize = cpu_synchronize,
    .timer_start = cpu_timer_start,
    .timer_stop = cpu_timer_stop,
    .destroy = cpu_destroy,
};

int tfx_backend_cpu_create(int rank, tfx_backend *out, tf_error *err)
{
#ifdef OPENBLAS_VERSION
    /* One rank thread per core: OpenBLAS must not start its own threads. */
    openblas_set_num_threads(1);
#endif
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return tf_fail(err, TF_ENOMEM, "cpu backend: out of memory");
    c->rank = rank;
    out->ops = &cpu_ops;
    out->ctx = c;
    return 0;
}
