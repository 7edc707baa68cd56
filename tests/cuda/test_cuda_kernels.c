/* test_cuda_kernels.c - every op of the CUDA backend against the same op
 * of the CPU backend, on random inputs.
 *
 * Tolerances (norm-wise relative error, see docs/cuda.md for the reasons):
 *   element-wise ops and copies          1e-6  (a rounding or two, FMA)
 *   FP32 reductions and GEMMs            2e-5  (sums in another order)
 *   TF32 GEMMs                           4e-3  (inputs rounded to 10 bits)
 * Skipped (exit 77) without a GPU, after checking that the backend refuses
 * cleanly there.
 */
#include <math.h>
#include <stdint.h>

#include "test_util.h"
#include "cuda_test_util.h"

#define TOL_ELEMENTWISE 1e-6
#define TOL_REDUCTION 2e-5
#define TOL_TF32 4e-3

typedef struct pair {
    tfx_backend cpu, gpu;
} pair;

static int setup(void **state)
{
    pair *p = calloc(1, sizeof *p);
    tf_error err = {0};
    assert_int_equal(tfx_backend_cpu_create(0, &p->cpu, &err), 0);
    if (tfx_backend_cuda_create(0, 0, &p->gpu, &err) != 0)
        fail_msg("cuda backend: %s", err.msg);
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    pair *p = *state;
    p->cpu.ops->destroy(p->cpu.ctx);
    p->gpu.ops->destroy(p->gpu.ctx);
    free(p);
    return 0;
}

/* Downloads n floats of dev after synchronising, checking no failure. */
static void fetch(pair *p, float *host, const void *dev, size_t n)
{
    tf_error err = {0};
    if (p->gpu.ops->synchronize(p->gpu.ctx, &err) != 0)
        fail_msg("cuda synchronize: %s", err.msg);
    p->gpu.ops->download(p->gpu.ctx, host, dev, n * sizeof(float));
}

static void expect_close(const char *what, const float *ref, const float *got, size_t n,
                         double tol)
{
    double e = normwise_error(ref, got, n);
    if (!(e <= tol))
        fail_msg("%s: norm-wise error %.3g exceeds %.1g", what, e, tol);
}

/* ---- GEMM ------------------------------------------------------------------ */

static void gemm_case(pair *p, int ta, int tb, double tol, const char *label)
{
    const int m = 37, n = 53, k = 67, pad = 3;
    const int a_rows = ta ? k : m, a_cols = ta ? m : k;
    const int b_rows = tb ? n : k, b_cols = tb ? k : n;
    const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
    size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)m * ldc;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
    float *c = malloc(nc * sizeof *c), *got = malloc(nc * sizeof *got);
    random_fill(a, na, 1 + ta, 1.0);
    random_fill(b, nb, 3 + tb, 1.0);
    random_fill(c, nc, 5, 1.0);
    float *da = device_copy_of(&p->gpu, a, na * 4), *db = device_copy_of(&p->gpu, b, nb * 4);
    float *dc = device_copy_of(&p->gpu, c, nc * 4);
    p->cpu.ops->gemm(p->cpu.ctx, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, c, ldc);
    p->gpu.ops->gemm(p->gpu.ctx, ta, tb, m, n, k, 0.7f, da, lda, db, ldb, 0.3f, dc, ldc);
    fetch(p, got, dc, nc);
    char what[64];
    snprintf(what, sizeof what, "%s gemm trans_a=%d trans_b=%d", label, ta, tb);
    expect_close(what, c, got, nc, tol);
    /* The padding columns of C are not part of the product: untouched. */
    float *c0 = malloc(nc * sizeof *c0);
    random_fill(c0, nc, 5, 1.0);
    for (int i = 0; i < m; i++)
        for (int j = n; j < ldc; j++)
            assert_true(got[(size_t)i * ldc + j] == c0[(size_t)i * ldc + j]);
    free(c0);
    p->gpu.ops->free(p->gpu.ctx, da);
    p->gpu.ops->free(p->gpu.ctx, db);
    p->gpu.ops->free(p->gpu.ctx, dc);
    free(a);
    free(b);
    free(c);
    free(got);
}

static void test_gemm_fp32(void **state)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            gemm_case(*state, ta, tb, TOL_REDUCTION, "fp32");
}

static void test_gemm_tf32(void **state)
{
    pair *p = *state;
    tf_error err = {0};
    assert_int_equal(tfx_backend_cuda_set_tf32(&p->gpu, 1, &err), 0);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            gemm_case(p, ta, tb, TOL_TF32, "tf32");
    assert_int_equal(tfx_backend_cuda_set_tf32(&p->gpu, 0, &err), 0);
    /* The CPU backend is not CUDA: asking it for TF32 is an error. */
    assert_int_equal(tfx_backend_cuda_set_tf32(&p->cpu, 1, &err), TF_EINVAL);
}

/* ---- embedding --------------------------------------------------------------- */

static void test_embedding(void **state)
{
    pair *p = *state;
    const int vocab = 256, rows = 301, cols = 45;
    float *table = malloc(sizeof(float) * vocab * cols), *out = malloc(sizeof(float) * rows * cols);
    float *dout = malloc(sizeof(float) * rows * cols), *dtable = malloc(sizeof(float) * vocab * cols);
    float *got = malloc(sizeof(float) * vocab * cols);
    int32_t *tokens = malloc(sizeof(int32_t) * rows);
    tfx_rng r = tfx_rng_for(11, TFX_RNG_TEST, 0, 0, 0);
    for (int i = 0; i < rows; i++) /* few distinct tokens: many repeats to add up */
        tokens[i] = (int32_t)tfx_rng_below(&r, 17) * 13;
    random_fill(table, (size_t)vocab * cols, 12, 1.0);
    random_fill(dout, (size_t)rows * cols, 13, 1.0);
    random_fill(dtable, (size_t)vocab * cols, 14, 1.0);
    float *d_table = device_copy_of(&p->gpu, table, sizeof(float) * vocab * cols);
    float *d_out = device_copy_of(&p->gpu, NULL, sizeof(float) * rows * cols);
    float *d_dout = device_copy_of(&p->gpu, dout, sizeof(float) * rows * cols);
    float *d_dtable = device_copy_of(&p->gpu, dtable, sizeof(float) * vocab * cols);
    int32_t *d_tokens = device_copy_of(&p->gpu, tokens, sizeof(int32_t) * rows);

    p->cpu.ops->embedding_forward(p->cpu.ctx, table, tokens, rows, cols, out);
    p->gpu.ops->embedding_forward(p->gpu.ctx, d_table, d_tokens, rows, cols, d_out);
    fetch(p, got, d_out, (size_t)rows * cols);
    expect_close("embedding_forward", out, got, (size_t)rows * cols, 0.0);

    p->cpu.ops->embedding_backward_acc(p->cpu.ctx, dtable, tokens, rows, cols, dout);
    p->gpu.ops->embedding_backward_acc(p->gpu.ctx, d_dtable, d_tokens, rows, cols, d_dout);
    fetch(p, got, d_dtable, (size_t)vocab * cols);
    expect_close("embedding_backward_acc", dtable, got, (size_t)vocab * cols, TOL_REDUCTION);

    void *bufs[] = {d_table, d_out, d_dout, d_dtable, d_tokens};
    for (size_t i = 0; i < 5; i++)
        p->gpu.ops->free(p->gpu.ctx, bufs[i]);
    free(table); free(out); free(dout); free(dtable); free(got); free(tokens);
}

/* ---- LayerNorm ----------------------------------------------------------------- */

static void test_layernorm(void **state)
{
    pair *p = *state;
    const int rows = 203, cols = 96;
    const size_t n = (size_t)rows * cols;
    float *x = malloc(n * 4), *w = malloc(cols * 4), *b = malloc(cols * 4), *out = malloc(n * 4);
    float *mean = malloc(rows * 4), *rstd = malloc(rows * 4), *dout = malloc(n * 4);
    float *dx = malloc(n * 4), *dw = malloc(cols * 4), *got = malloc(n * 4);
    random_fill(x, n, 21, 2.0);
    for (size_t i = 0; i < n; i++)
        x[i] += 0.5f; /* a mean away from 0, which the two-pass variance must handle */
    random_fill(w, cols, 22, 1.5);
    random_fill(b, cols, 23, 1.0);
    random_fill(dout, n, 24, 1.0);
    random_fill(dw, cols, 25, 1.0);
    float *d_x = device_copy_of(&p->gpu, x, n * 4), *d_w = device_copy_of(&p->gpu, w, cols * 4);
    float *d_b = device_copy_of(&p->gpu, b, cols * 4), *d_out = device_copy_of(&p->gpu, NULL, n * 4);
    float *d_mean = device_copy_of(&p->gpu, NULL, rows * 4);
    float *d_rstd = device_copy_of(&p->gpu, NULL, rows * 4);
    float *d_dout = device_copy_of(&p->gpu, dout, n * 4), *d_dx = device_copy_of(&p->gpu, NULL, n * 4);
    float *d_dw = device_copy_of(&p->gpu, dw, cols * 4);

    p->cpu.ops->layernorm_forward(p->cpu.ctx, x, w, b, rows, cols, 1e-5f, out, mean, rstd);
    p->gpu.ops->layernorm_forward(p->gpu.ctx, d_x, d_w, d_b, rows, cols, 1e-5f, d_out, d_mean,
                                  d_rstd);
    fetch(p, got, d_out, n);
    expect_close("layernorm_forward out", out, got, n, TOL_REDUCTION);
    fetch(p, got, d_mean, rows);
    expect_close("layernorm_forward mean", mean, got, rows, TOL_REDUCTION);
    fetch(p, got, d_rstd, rows);
    expect_close("layernorm_forward rstd", rstd, got, rows, TOL_REDUCTION);

    p->cpu.ops->layernorm_backward_input(p->cpu.ctx, dout, x, w, mean, rstd, rows, cols, dx);
    p->gpu.ops->layernorm_backward_input(p->gpu.ctx, d_dout, d_x, d_w, d_mean, d_rstd, rows,
                                         cols, d_dx);
    fetch(p, got, d_dx, n);
    expect_close("layernorm_backward_input", dx, got, n, TOL_REDUCTION);

    p->cpu.ops->layernorm_backward_weight_acc(p->cpu.ctx, dout, x, mean, rstd, rows, cols, dw);
    p->gpu.ops->layernorm_backward_weight_acc(p->gpu.ctx, d_dout, d_x, d_mean, d_rstd, rows,
                                              cols, d_dw);
    fetch(p, got, d_dw, cols);
    expect_close("layernorm_backward_weight_acc", dw, got, cols, TOL_REDUCTION);

    void *bufs[] = {d_x, d_w, d_b, d_out, d_mean, d_rstd, d_dout, d_dx, d_dw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        p->gpu.ops->free(p->gpu.ctx, bufs[i]);
    free(x); free(w); free(b); free(out); free(mean); free(rstd); free(dout); free(dx);
    free(dw); free(got);
}

/* ---- attention ----------------------------------------------------------------- */

static void test_attention(void **state)
{
    pair *p = *state;
    /* Odd sizes: a sequence that is not a multiple of the warp, a head size
     * that is not a power of two. */
    const int batch = 3, seq = 37, heads = 4, hs = 12, C = heads * hs;
    const size_t nqkv = (size_t)batch * seq * 3 * C, nout = (size_t)batch * seq * C;
    const size_t nprobs = (size_t)batch * heads * seq * seq;
    float *qkv = malloc(nqkv * 4), *out = malloc(nout * 4), *probs = malloc(nprobs * 4);
    float *dout = malloc(nout * 4), *dqkv = malloc(nqkv * 4), *scratch = malloc(nprobs * 4);
    float *got = malloc(nprobs * 4 > nqkv * 4 ? nprobs * 4 : nqkv * 4);
    random_fill(qkv, nqkv, 51, 2.0);
    random_fill(dout, nout, 52, 1.0);
    float *d_qkv = device_copy_of(&p->gpu, qkv, nqkv * 4), *d_out = device_copy_of(&p->gpu, NULL, nout * 4);
    float *d_probs = device_copy_of(&p->gpu, NULL, nprobs * 4);
    float *d_dout = device_copy_of(&p->gpu, dout, nout * 4);
    float *d_dqkv = device_copy_of(&p->gpu, NULL, nqkv * 4);
    float *d_scratch = device_copy_of(&p->gpu, NULL, nprobs * 4);

    p->cpu.ops->attention_forward(p->cpu.ctx, qkv, batch, seq, heads, hs, out, probs);
    p->gpu.ops->attention_forward(p->gpu.ctx, d_qkv, batch, seq, heads, hs, d_out, d_probs);
    fetch(p, got, d_probs, nprobs);
    expect_close("attention_forward probs", probs, got, nprobs, TOL_REDUCTION);
    for (int r = 0; r < batch * heads * seq; r++) /* exact zeros above the diagonal */
        for (int j = r % seq + 1; j < seq; j++)
            assert_true(got[(size_t)r * seq + j] == 0.0f);
    fetch(p, got, d_out, nout);
    expect_close("attention_forward out", out, got, nout, TOL_REDUCTION);

    p->cpu.ops->attention_backward(p->cpu.ctx, dout, qkv, probs, batch, seq, heads, hs, scratch,
                                   dqkv);
    p->gpu.ops->attention_backward(p->gpu.ctx, d_dout, d_qkv, d_probs, batch, seq, heads, hs,
                                   d_scratch, d_dqkv);
    fetch(p, got, d_dqkv, nqkv);
    expect_close("attention_backward", dqkv, got, nqkv, TOL_REDUCTION);

    void *bufs[] = {d_qkv, d_out, d_probs, d_dout, d_dqkv, d_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        p->gpu.ops->free(p->gpu.ctx, bufs[i]);
    free(qkv); free(out); free(probs); free(dout); free(dqkv); free(scratch); free(got);
}

/* ---- bias, GELU, add ----------------------------------------------------------- */

static void test_bias(void **state)
{
    pair *p = *state;
    const int rows = 129, cols = 70;
    const size_t n = (size_t)rows * cols;
    float *out = malloc(n * 4), *bias = malloc(cols * 4), *dbias = malloc(cols * 4), *got = malloc(n * 4);
    random_fill(out, n, 31, 1.0);
    random_fill(bias, cols, 32, 1.0);
    random_fill(dbias, cols, 33, 1.0);
    float *d_out = device_copy_of(&p->gpu, out, n * 4), *d_bias = device_copy_of(&p->gpu, bias, cols * 4);
    float *d_dbias = device_copy_of(&p->gpu, dbias, cols * 4);
    p->cpu.ops->bias_forward(p->cpu.ctx, out, bias, rows, cols);
    p->gpu.ops->bias_forward(p->gpu.ctx, d_out, d_bias, rows, cols);
    fetch(p, got, d_out, n);
    expect_close("bias_forward", out, got, n, TOL_ELEMENTWISE);
    p->cpu.ops->bias_backward_acc(p->cpu.ctx, out, rows, cols, dbias);
    p->gpu.ops->bias_backward_acc(p->gpu.ctx, d_out, rows, cols, d_dbias);
    fetch(p, got, d_dbias, cols);
    expect_close("bias_backward_acc", dbias, got, cols, TOL_REDUCTION);
    p->gpu.ops->free(p->gpu.ctx, d_out);
    p->gpu.ops->free(p->gpu.ctx, d_bias);
    p->gpu.ops->free(p->gpu.ctx, d_dbias);
    free(out); free(bias); free(dbias); free(got);
}

static void test_gelu_add_scale(void **state)
{
    pair *p = *state;
    const size_t n = 10007;
    float *x = malloc(n * 4), *out = malloc(n * 4), *aux = malloc(n * 4), *dout = malloc(n * 4);
    float *dx = malloc(n * 4), *got = malloc(n * 4);
    random_fill(x, n, 41, 5.0);
    random_fill(dout, n, 42, 1.0);
    float *d_x = device_copy_of(&p->gpu, x, n * 4), *d_out = device_copy_of(&p->gpu, NULL, n * 4);
    float *d_aux = device_copy_of(&p->gpu, NULL, n * 4), *d_dout = device_copy_of(&p->gpu, dout, n * 4);
    p->cpu.ops->gelu_forward(p->cpu.ctx, x, n, out, aux);
    p->gpu.ops->gelu_forward(p->gpu.ctx, d_x, n, d_out, d_aux);
    fetch(p, got, d_out, n);
    expect_close("gelu_forward", out, got, n, TOL_ELEMENTWISE);
    fetch(p, got, d_aux, n);
    expect_close("gelu_forward aux", aux, got, n, TOL_ELEMENTWISE);
    /* In place, as the model calls it (dx aliases dout); the GPU gets the
     * CPU's aux so that the backward is compared alone. */
    p->gpu.ops->upload(p->gpu.ctx, d_aux, aux, n * 4);
    memcpy(dx, dout, n * 4);
    p->cpu.ops->gelu_backward(p->cpu.ctx, x, aux, dx, n, dx);
    p->gpu.ops->gelu_backward(p->gpu.ctx, d_x, d_aux, d_dout, n, d_dout);
    fetch(p, got, d_dout, n);
    expect_close("gelu_backward", dx, got, n, TOL_ELEMENTWISE);
    /* add: y += x */
    p->cpu.ops->add(p->cpu.ctx, dx, x, n);
    p->gpu.ops->add(p->gpu.ctx, d_dout, d_x, n);
    fetch(p, got, d_dout, n);
    expect_close("add", dx, got, n, TOL_ELEMENTWISE);
    /* scale: y *= alpha */
    p->cpu.ops->scale(p->cpu.ctx, dx, 1.75f, n);
    p->gpu.ops->scale(p->gpu.ctx, d_dout, 1.75f, n);
    fetch(p, got, d_dout, n);
    expect_close("scale", dx, got, n, TOL_ELEMENTWISE);
    p->gpu.ops->free(p->gpu.ctx, d_x);
    p->gpu.ops->free(p->gpu.ctx, d_out);
    p->gpu.ops->free(p->gpu.ctx, d_aux);
    p->gpu.ops->free(p->gpu.ctx, d_dout);
    free(x); free(out); free(aux); free(dout); free(dx); free(got);
}

/* ---- softmax cross-entropy ------------------------------------------------------ */

static void test_softmax_xent(void **state)
{
    pair *p = *state;
    const int rows = 150, vocab = 256;
    const size_t n = (size_t)rows * vocab;
    float *logits = malloc(n * 4), *dl = malloc(n * 4), *got = malloc(n * 4);
    int32_t *targets = malloc(rows * sizeof(int32_t));
    random_fill(logits, n, 51, 6.0);
    tfx_rng r = tfx_rng_for(52, TFX_RNG_TEST, 0, 0, 0);
    for (int i = 0; i < rows; i++)
        targets[i] = (int32_t)tfx_rng_below(&r, vocab);
    float *d_logits = device_copy_of(&p->gpu, logits, n * 4);
    int32_t *d_targets = device_copy_of(&p->gpu, targets, rows * sizeof(int32_t));
    double loss_cpu = 0, loss_gpu = -1;
    const float scale = 1.0f / (rows * 3);
    p->cpu.ops->softmax_xent(p->cpu.ctx, logits, targets, rows, vocab, scale, dl, &loss_cpu);
    /* In place on the GPU (dlogits aliases logits), as the model does. */
    p->gpu.ops->softmax_xent(p->gpu.ctx, d_logits, d_targets, rows, vocab, scale, d_logits,
                             &loss_gpu);
    fetch(p, got, d_logits, n);
    assert_close(loss_gpu, loss_cpu, TOL_REDUCTION);
    expect_close("softmax_xent dlogits", dl, got, n, TOL_REDUCTION);
    p->gpu.ops->free(p->gpu.ctx, d_logits);
    p->gpu.ops->free(p->gpu.ctx, d_targets);
    free(logits); free(dl); free(got); free(targets);
}

/* ---- AdamW ------------------------------------------------------------------------ */

static void test_adamw(void **state)
{
    pair *p = *state;
    const size_t n = 4099;
    float *param = malloc(n * 4), *grad = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    float *got = malloc(n * 4);
    random_fill(param, n, 61, 1.0);
    random_fill(grad, n, 62, 0.1);
    memset(m, 0, n * 4);
    memset(v, 0, n * 4);
    float *d_param = device_copy_of(&p->gpu, param, n * 4), *d_grad = device_copy_of(&p->gpu, grad, n * 4);
    float *d_m = device_copy_of(&p->gpu, m, n * 4), *d_v = device_copy_of(&p->gpu, v, n * 4);
    for (long t = 1; t <= 5; t++) {
        p->cpu.ops->adamw(p->cpu.ctx, param, grad, m, v, n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.01f, t);
        p->gpu.ops->adamw(p->gpu.ctx, d_param, d_grad, d_m, d_v, n, 3e-3f, 0.9f, 0.95f, 1e-8f,
                          0.01f, t);
    }
    fetch(p, got, d_param, n);
    expect_close("adamw param", param, got, n, TOL_ELEMENTWISE);
    fetch(p, got, d_m, n);
    expect_close("adamw m", m, got, n, TOL_ELEMENTWISE);
    fetch(p, got, d_v, n);
    expect_close("adamw v", v, got, n, TOL_ELEMENTWISE);
    p->gpu.ops->free(p->gpu.ctx, d_param);
    p->gpu.ops->free(p->gpu.ctx, d_grad);
    p->gpu.ops->free(p->gpu.ctx, d_m);
    p->gpu.ops->free(p->gpu.ctx, d_v);
    free(param); free(grad); free(m); free(v); free(got);
}

/* ---- memory, timing and errors ----------------------------------------------------- */

static void test_memory(void **state)
{
    pair *p = *state;
    const size_t n = 1000;
    float *host = malloc(n * 4), *got = malloc(n * 4), *zeros = calloc(n, 4);
    random_fill(host, n, 71, 1.0);
    float *a = device_copy_of(&p->gpu, NULL, n * 4);
    float *b = device_copy_of(&p->gpu, NULL, n * 4);
    fetch(p, got, a, n); /* alloc zero-fills */
    expect_close("alloc zero-fill", zeros, got, n, 0.0);
    p->gpu.ops->upload(p->gpu.ctx, a, host, n * 4);
    p->gpu.ops->copy(p->gpu.ctx, b, a, n * 4);
    fetch(p, got, b, n);
    assert_memory_equal(got, host, n * 4);
    p->gpu.ops->zero(p->gpu.ctx, b, n * 4);
    fetch(p, got, b, n);
    expect_close("zero", zeros, got, n, 0.0);
    /* Device timing of a GEMM. */
    double ms = -1;
    tf_error err = {0};
    assert_int_equal(p->gpu.ops->timer_start(p->gpu.ctx, &err), 0);
    p->gpu.ops->add(p->gpu.ctx, a, b, n);
    assert_int_equal(p->gpu.ops->timer_stop(p->gpu.ctx, &ms, &err), 0);
    assert_true(ms >= 0.0 && ms < 1000.0);
    p->gpu.ops->free(p->gpu.ctx, a);
    p->gpu.ops->free(p->gpu.ctx, b);
    p->gpu.ops->free(p->gpu.ctx, NULL);
    free(host); free(got); free(zeros);
}

/* A failing call is reported by the next synchronize, naming file and line. */
static void test_error_reported(void **state)
{
    (void)state;
    tfx_backend g = {0};
    tf_error err = {0};
    assert_int_equal(tfx_backend_cuda_create(0, 0, &g, &err), 0);
    float *a = device_copy_of(&g, NULL, 64 * 4);
    /* lda smaller than the row length: cuBLAS refuses the call. */
    g.ops->gemm(g.ctx, 0, 0, 8, 8, 8, 1.0f, a, 2, a, 8, 0.0f, a, 8);
    assert_int_equal(g.ops->synchronize(g.ctx, &err), TF_ERUNTIME);
    assert_contains(err.msg, "backend_cuda.cu:");
    assert_contains(err.msg, "cublasSgemm");
    /* Sticky: later ops do nothing and the failure stays reported. */
    g.ops->add(g.ctx, a, a, 64);
    assert_int_equal(g.ops->synchronize(g.ctx, &err), TF_ERUNTIME);
    g.ops->free(g.ctx, a);
    g.ops->destroy(g.ctx);
    /* A device that does not exist. */
    assert_int_equal(tfx_backend_cuda_create(0, 4096, &g, &err), TF_ERUNTIME);
    assert_contains(err.msg, "device 4096");
    int device = -1;
    assert_int_equal(tfx_cuda_device_for_rank("0,x", 1, &device, &err), TF_EINVAL);
    assert_int_equal(tfx_cuda_device_for_rank("0", 5, &device, &err), 0);
    assert_int_equal(device, 0);
}

int main(void)
{
    if (!cuda_tests_available("test_cuda_kernels"))
        return TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gemm_fp32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gemm_tf32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embedding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layernorm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attention, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bias, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gelu_add_scale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_softmax_xent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adamw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory, setup, teardown),
        cmocka_unit_test(test_error_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
