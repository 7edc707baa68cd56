/* kernels_cpu.c - the CPU backend's kernels: everything but the GEMMs.
 *
 * Each is what its CUDA twin in cuda/kernels.cu is tested against
 * (tests/cuda).  Reductions accumulate in double and run in a fixed order,
 * so results are deterministic for a given input: the pipeline tests rely on
 * that to compare schedules with a single rank.
 *
 * Speed: this file is compiled with -O3 -fno-trapping-math (CMakeLists.txt)
 * so that gcc vectorises the element-wise loops (at -O2 it vectorises no
 * loop of unknown length, and with trapping math it will not turn the
 * clamps and masks into selects), and the hottest loops are built for
 * AVX-512, AVX2 and plain x86-64 and chosen at load time (CPU_CLONES).
 */
#include "kernels_cpu.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Several versions of a function, the best for the CPU picked at load time
 * (GNU ifuncs); elsewhere a plain function. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_CLONES
#endif

void tfxc_embedding_forward(void *ctx, const float *table, const int32_t *tokens,
                                  int rows, int cols, float *out)
{
    (void)ctx;
    for (int i = 0; i < rows; i++)
        memcpy(out + (size_t)i * cols, table + (size_t)tokens[i] * cols,
               sizeof(float) * (size_t)cols);
}

void tfxc_embedding_backward_acc(void *ctx, float *dtable, const int32_t *tokens,
                                       int rows, int cols, const float *dout)
{
    (void)ctx;
    for (int i = 0; i < rows; i++) {
        float *d = dtable + (size_t)tokens[i] * cols;
        const float *g = dout + (size_t)i * cols;
        for (int j = 0; j < cols; j++)
            d[j] += g[j];
    }
}

CPU_CLONES void tfxc_layernorm_forward(void *ctx, const float *x, const float *weight,
                                  const float *bias, int rows, int cols, float eps, float *out,
                                  float *mean, float *rstd)
{
    (void)ctx;
    for (int i = 0; i < rows; i++) {
        const float *xi = x + (size_t)i * cols;
        float *oi = out + (size_t)i * cols;
        double s = 0.0;
        for (int j = 0; j < cols; j++)
            s += xi[j];
        const double mu = s / cols;
        double ss = 0.0;
        for (int j = 0; j < cols; j++)
            ss += (xi[j] - mu) * (xi[j] - mu);
        const float m = (float)mu, r = (float)(1.0 / sqrt(ss / cols + eps));
        mean[i] = m;
        rstd[i] = r;
        for (int j = 0; j < cols; j++)
            oi[j] = (xi[j] - m) * r * weight[j] + bias[j];
    }
}

CPU_CLONES void tfxc_layernorm_backward_input(void *ctx, const float *dout, const float *x,
                                         const float *weight, const float *mean,
                                         const float *rstd, int rows, int cols, float *dx)
{
    (void)ctx;
    for (int i = 0; i < rows; i++) {
        const float *xi = x + (size_t)i * cols, *gi = dout + (size_t)i * cols;
        float *dxi = dx + (size_t)i * cols;
        const float m = mean[i], r = rstd[i];
        /* With g = dout * weight and xhat = (x - mean) * rstd:
         * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). */
        double sg = 0.0, sgx = 0.0;
        for (int j = 0; j < cols; j++) {
            const double g = (double)gi[j] * weight[j];
            sg += g;
            sgx += g * (xi[j] - m) * r;
        }
        const float mg = (float)(sg / cols), mgx = (float)(sgx / cols);
        for (int j = 0; j < cols; j++) {
            const float xhat = (xi[j] - m) * r;
            dxi[j] = r * (gi[j] * weight[j] - mg - xhat * mgx);
        }
    }
}

CPU_CLONES void tfxc_layernorm_backward_weight_acc(void *ctx, const float *dout, const float *x,
                                                   const float *mean, const float *rstd,
                                                   int rows, int cols, float *dweight)
{
    (void)ctx;
    double *acc = calloc((size_t)cols, sizeof *acc);
    if (!acc) {
        /* A few KiB not to be had: accumulate in float instead. */
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++)
                dweight[j] += dout[(size_t)i * cols + j] * (x[(size_t)i * cols + j] - mean[i]) *
                              rstd[i];
        return;
    }
    for (int i = 0; i < rows; i++) {
        const float *xi = x + (size_t)i * cols, *gi = dout + (size_t)i * cols;
        const float m = mean[i], r = rstd[i];
        for (int j = 0; j < cols; j++)
            acc[j] += gi[j] * (xi[j] - m) * r;
    }
    for (int j = 0; j < cols; j++)
        dweight[j] += (float)acc[j];
    free(acc);
}

/* Softmax of row i of a causal score matrix in place: entries j <= i, the
 * rest set to 0. */
static void causal_softmax_row(float *row, int i, int seq)
{
    float mx = row[0];
    for (int j = 1; j <= i; j++)
        mx = row[j] > mx ? row[j] : mx;
    double sum = 0.0;
    for (int j = 0; j <= i; j++) {
        row[j] = expf(row[j] - mx);
        sum += row[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j <= i; j++)
        row[j] *= inv;
    for (int j = i + 1; j < seq; j++)
        row[j] = 0.0f;
}

void tfxc_attention_forward(void *ctx, const float *qkv, int batch, int seq, int heads,
                                  int head_size, float *out, float *probs)
{
    (void)ctx;
    const int C = heads * head_size, ld = 3 * C;
    const float scale = 1.0f / sqrtf((float)head_size);
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++) {
            const float *q = qkv + (size_t)b * seq * ld + (size_t)h * head_size;
            const float *k = q + C, *v = q + 2 * C;
            float *p = probs + ((size_t)b * heads + h) * seq * seq;
            float *y = out + (size_t)b * seq * C + (size_t)h * head_size;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, seq, head_size, scale, q,
                        ld, k, ld, 0.0f, p, seq);
            for (int i = 0; i < seq; i++)
                causal_softmax_row(p + (size_t)i * seq, i, seq);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, head_size, seq, 1.0f, p,
                        seq, v, ld, 0.0f, y, C);
        }
}

void tfxc_attention_backward(void *ctx, const float *dout, const float *qkv,
                                   const float *probs, int batch, int seq, int heads,
                                   int head_size, float *scratch, float *dqkv)
{
    (void)ctx;
    const int C = heads * head_size, ld = 3 * C;
    const float scale = 1.0f / sqrtf((float)head_size);
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++) {
            const size_t off = (size_t)b * seq * ld + (size_t)h * head_size;
            const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
            const float *p = probs + ((size_t)b * heads + h) * seq * seq;
            const float *dy = dout + (size_t)b * seq * C + (size_t)h * head_size;
            float *ds = scratch + ((size_t)b * heads + h) * seq * seq;
            /* dP = dy v^T, dv = P^T dy */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, seq, head_size, 1.0f, dy,
                        C, v, ld, 0.0f, ds, seq);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, seq, head_size, seq, 1.0f, p,
                        seq, dy, C, 0.0f, dv, ld);
            /* dS = P * (dP - rowsum(P * dP)) * scale, zero above the diagonal */
            for (int i = 0; i < seq; i++) {
                const float *pi = p + (size_t)i * seq;
                float *di = ds + (size_t)i * seq;
                double dot = 0.0;
                for (int j = 0; j <= i; j++)
                    dot += (double)pi[j] * di[j];
                for (int j = 0; j <= i; j++)
                    di[j] = pi[j] * (di[j] - (float)dot) * scale;
                for (int j = i + 1; j < seq; j++)
                    di[j] = 0.0f;
            }
            /* dq = dS k, dk = dS^T q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, head_size, seq, 1.0f,
                        ds, seq, k, ld, 0.0f, dq, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, seq, head_size, seq, 1.0f, ds,
                        seq, q, ld, 0.0f, dk, ld);
        }
}

CPU_CLONES void tfxc_bias_forward(void *ctx, float *out, const float *bias, int rows, int cols)
{
    (void)ctx;
    for (int i = 0; i < rows; i++) {
        float *oi = out + (size_t)i * cols;
        for (int j = 0; j < cols; j++)
            oi[j] += bias[j];
    }
}

CPU_CLONES void tfxc_bias_backward_acc(void *ctx, const float *dout, int rows, int cols,
                                  float *dbias)
{
    (void)ctx;
    double *acc = calloc((size_t)cols, sizeof *acc);
    if (!acc) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++)
                dbias[j] += dout[(size_t)i * cols + j];
        return;
    }
    for (int i = 0; i < rows; i++) {
        const float *gi = dout + (size_t)i * cols;
        for (int j = 0; j < cols; j++)
            acc[j] += gi[j];
    }
    for (int j = 0; j < cols; j++)
        dbias[j] += (float)acc[j];
    free(acc);
}

/* sqrt(2/pi) */
#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

/* tanh as a clamped rational function (the 13/6 minimax approximation Eigen
 * uses for float): pure arithmetic, so the loop vectorises; glibc's tanhf
 * dominated the forward pass.  Error within a few float ulps. */
static inline float fast_tanhf(float x)
{
    const float clamp = 7.90531110763549805f;
    x = x > clamp ? clamp : x < -clamp ? -clamp : x;
    const float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 - 8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    p = p * x;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return p / q;
}

CPU_CLONES void tfxc_gelu_forward(void *ctx, const float *x, size_t count, float *out, float *aux)
{
    (void)ctx;
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        float t = fast_tanhf(GELU_K * (v + GELU_C * v * v * v));
        aux[i] = t;
        out[i] = 0.5f * v * (1.0f + t);
    }
}

CPU_CLONES void tfxc_gelu_backward(void *ctx, const float *x, const float *aux, const float *dout,
                              size_t count, float *dx)
{
    (void)ctx;
    for (size_t i = 0; i < count; i++) {
        float v = x[i], t = aux[i];
        float du = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
        dx[i] = d * dout[i];
    }
}

CPU_CLONES void tfxc_scale(void *ctx, float *y, float alpha, size_t count)
{
    (void)ctx;
    for (size_t i = 0; i < count; i++)
        y[i] *= alpha;
}

CPU_CLONES void tfxc_add(void *ctx, float *y, const float *x, size_t count)
{
    (void)ctx;
    for (size_t i = 0; i < count; i++)
        y[i] += x[i];
}

void tfxc_softmax_xent(void *ctx, const float *logits, const int32_t *targets, int rows,
                             int vocab, float scale, float *dlogits, double *loss_sum)
{
    (void)ctx;
    double total = 0.0;
    for (int i = 0; i < rows; i++) {
        const float *li = logits + (size_t)i * vocab;
        float *di = dlogits + (size_t)i * vocab;
        const int t = targets[i];
        const float target_logit = li[t]; /* li may alias di: read it first */
        float mx = li[0];
        for (int j = 1; j < vocab; j++)
            if (li[j] > mx)
                mx = li[j];
        /* One exp per logit, kept in di, normalised in a second pass. */
        double sum = 0.0;
        for (int j = 0; j < vocab; j++) {
            float e = expf(li[j] - mx);
            di[j] = e;
            sum += e;
        }
        total += mx + log(sum) - target_logit;
        const float inv = (float)(scale / sum);
        for (int j = 0; j < vocab; j++)
            di[j] *= inv;
        di[t] -= scale;
    }
    *loss_sum = total;
}

CPU_CLONES void tfxc_adamw(void *ctx, float *param, const float *grad, float *m, float *v,
                      size_t count, float lr, float beta1, float beta2, float eps,
                      float weight_decay, long t)
{
    (void)ctx;
    double c1 = 1.0 - pow(beta1, (double)t);
    double c2 = 1.0 - pow(beta2, (double)t);
    for (size_t i = 0; i < count; i++) {
        float g = grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        double mhat = m[i] / c1;
        double vhat = v[i] / c2;
        param[i] -= (float)(lr * (mhat / (sqrt(vhat) + eps) + weight_decay * param[i]));
    }
}

