/* kernels.cu - the CUDA backend's own kernels (everything but the GEMMs).
 *
 * Each kernel mirrors its CPU twin in executor/cpu/kernels_cpu.c; the
 * differences are the order of floating-point sums (warp / block trees
 * instead of a left-to-right loop) and float instead of double for some
 * partial sums, which docs/cuda.md turns into the tolerances of the
 * comparison test.  Reductions run in a fixed order, so a kernel gives the
 * same bits every time, except the embedding gradient, whose scatter-add
 * uses atomics (rows with the same token add in any order).
 */
#include "cuda_internal.h"

#include <math.h>

#define WARP 32
#define ROWS_PER_BLOCK 8 /* warps per block in the row kernels */

static unsigned int blocks_for(size_t count, unsigned int threads)
{
    size_t b = (count + threads - 1) / threads;
    /* Grid-stride loops below cover whatever one launch does not. */
    return (unsigned int)(b > 65535u * 16u ? 65535u * 16u : b);
}

__device__ static float warp_sum(float v)
{
    for (int off = WARP / 2; off > 0; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ static float warp_max(float v)
{
    for (int off = WARP / 2; off > 0; off /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* ---- embedding ----------------------------------------------------------- */

__global__ static void embedding_forward_kernel(const float *table, const int32_t *tokens,
                                                int rows, int cols, float *out)
{
    size_t total = (size_t)rows * cols;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t i = e / cols, j = e % cols;
        out[e] = table[(size_t)tokens[i] * cols + j];
    }
}

__global__ static void embedding_backward_kernel(float *dtable, const int32_t *tokens,
                                                 int rows, int cols, const float *dout)
{
    size_t total = (size_t)rows * cols;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t i = e / cols, j = e % cols;
        /* Several rows may carry the same token. */
        atomicAdd(&dtable[(size_t)tokens[i] * cols + j], dout[e]);
    }
}

extern "C" cudaError_t tfxk_embedding_forward(cudaStream_t s, const float *table,
                                              const int32_t *tokens, int rows, int cols,
                                              float *out)
{
    size_t n = (size_t)rows * cols;
    if (n == 0)
        return cudaSuccess;
    embedding_forward_kernel<<<blocks_for(n, 256), 256, 0, s>>>(table, tokens, rows, cols, out);
    return cudaGetLastError();
}

extern "C" cudaError_t tfxk_embedding_backward_acc(cudaStream_t s, float *dtable,
                                                   const int32_t *tokens, int rows, int cols,
                                                   const float *dout)
{
    size_t n = (size_t)rows * cols;
    if (n == 0)
        return cudaSuccess;
    embedding_backward_kernel<<<blocks_for(n, 256), 256, 0, s>>>(dtable, tokens, rows, cols,
                                                                 dout);
    return cudaGetLastError();
}

/* ---- LayerNorm: one warp per row ---------------------------------------- */

__global__ static void layernorm_forward_kernel(const float *x, const float *weight,
                                                const float *bias, int rows, int cols,
                                                float eps, float *out, float *mean,
                                                float *rstd)
{
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= rows)
        return;
    const float *xi = x + (size_t)row * cols;
    float *oi = out + (size_t)row * cols;
    float s = 0.0f;
    for (int j = lane; j < cols; j += WARP)
        s += xi[j];
    float m = warp_sum(s) / cols;
    /* Two passes, as the CPU: the variance of x - mean, not E[x^2] - m^2. */
    float ss = 0.0f;
    for (int j = lane; j < cols; j += WARP)
        ss += (xi[j] - m) * (xi[j] - m);
    float r = rsqrtf(warp_sum(ss) / cols + eps);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
    for (int j = lane; j < cols; j += WARP)
        oi[j] = (xi[j] - m) * r * weight[j] + bias[j];
}

__global__ static void layernorm_backward_input_kernel(const float *dout, const float *x,
                                                       const float *weight, const float *mean,
                                                       const float *rstd, int rows, int cols,
                                                       float *dx)
{
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= rows)
        return;
    const float *xi = x + (size_t)row * cols, *gi = dout + (size_t)row * cols;
    float *dxi = dx + (size_t)row * cols;
    const float m = mean[row], r = rstd[row];
    float sg = 0.0f, sgx = 0.0f;
    for (int j = lane; j < cols; j += WARP) {
        float g = gi[j] * weight[j];
        sg += g;
        sgx += g * (xi[j] - m) * r;
    }
    const float mg = warp_sum(sg) / cols, mgx = warp_sum(sgx) / cols;
    /* dx may alias dout: each lane reads its columns before writing them. */
    for (int j = lane; j < cols; j += WARP) {
        float xhat = (xi[j] - m) * r;
        dxi[j] = r * (gi[j] * weight[j] - mg - xhat * mgx);
    }
}

extern "C" cudaError_t tfxk_layernorm_forward(cudaStream_t s, const float *x,
                                              const float *weight, const float *bias, int rows,
                                              int cols, float eps, float *out, float *mean,
                                              float *rstd)
{
    if (rows <= 0 || cols <= 0)
        return cudaSuccess;
    unsigned int blocks = (unsigned int)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    layernorm_forward_kernel<<<blocks, ROWS_PER_BLOCK * WARP, 0, s>>>(x, weight, bias, rows,
                                                                      cols, eps, out, mean,
                                                                      rstd);
    return cudaGetLastError();
}

extern "C" cudaError_t tfxk_layernorm_backward_input(cudaStream_t s, const float *dout,
                                                     const float *x, const float *weight,
                                                     const float *mean, const float *rstd,
                                                     int rows, int cols, float *dx)
{
    if (rows <= 0 || cols <= 0)
        return cudaSuccess;
    unsigned int blocks = (unsigned int)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    layernorm_backward_input_kernel<<<blocks, ROWS_PER_BLOCK * WARP, 0, s>>>(
        dout, x, weight, mean, rstd, rows, cols, dx);
    return cudaGetLastError();
}

/* ---- attention's softmax: one warp per row of a score matrix ------------ */

/* Row r of `rows` rows of seq scores belongs to query i = r mod seq: its
 * entries j <= i become the softmax, the others 0. */
__global__ static void causal_softmax_kernel(float *p, int rows, int seq)
{
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= rows)
        return;
    float *pi = p + (size_t)row * seq;
    const int i = row % seq;
    float mx = -INFINITY;
    for (int j = lane; j <= i; j += WARP)
        mx = fmaxf(mx, pi[j]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j <= i; j += WARP) {
        float e = expf(pi[j] - mx);
        pi[j] = e;
        sum += e;
    }
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < seq; j += WARP)
        pi[j] = j <= i ? pi[j] * inv : 0.0f;
}

/* ds = p * (ds - rowsum(p * ds)) * scale below the diagonal, 0 above: the
 * softmax's backward, in place on the probabilities' gradient. */
__global__ static void causal_softmax_backward_kernel(const float *p, float *ds, int rows,
                                                      int seq, float scale)
{
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= rows)
        return;
    const float *pi = p + (size_t)row * seq;
    float *di = ds + (size_t)row * seq;
    const int i = row % seq;
    float dot = 0.0f;
    for (int j = lane; j <= i; j += WARP)
        dot += pi[j] * di[j];
    dot = warp_sum(dot);
    for (int j = lane; j < seq; j += WARP)
        di[j] = j <= i ? pi[j] * (di[j] - dot) * scale : 0.0f;
}

extern "C" cudaError_t tfxk_causal_softmax(cudaStream_t s, float *p, int rows, int seq)
{
    if (rows <= 0 || seq <= 0)
        return cudaSuccess;
    unsigned int blocks = (unsigned int)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    causal_softmax_kernel<<<blocks, ROWS_PER_BLOCK * WARP, 0, s>>>(p, rows, seq);
    return cudaGetLastError();
}

extern "C" cudaError_t tfxk_causal_softmax_backward(cudaStream_t s, const float *p, float *ds,
                                                    int rows, int seq, float scale)
{
    if (rows <= 0 || seq <= 0)
        return cudaSuccess;
    unsigned int blocks = (unsigned int)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    causal_softmax_backward_kernel<<<blocks, ROWS_PER_BLOCK * WARP, 0, s>>>(p, ds, rows, seq,
                                                                            scale);
    return cudaGetLastError();
}

/* ---- column sums (bias and LayerNorm weight gradients) ------------------------------- */

/* A block owns 32 columns; its 32 x 32 threads each sum a strided set of
 * rows, then a fixed tree adds the 32 partial sums of a column.  No atomics:
 * each column's result is written by one thread, so it is deterministic. */
#define COL_TILE 32
#define ROW_THREADS 32

__global__ static void column_sum_kernel(const float *dout, const float *x, const float *mean,
                                         const float *rstd, int rows, int cols, float *out)
{
    __shared__ float part[ROW_THREADS][COL_TILE + 1];
    int col = blockIdx.x * COL_TILE + threadIdx.x;
    float acc = 0.0f;
    if (col < cols) {
        for (int i = threadIdx.y; i < rows; i += ROW_THREADS) {
            float g = dout[(size_t)i * cols + col];
            acc += x ? g * (x[(size_t)i * cols + col] - mean[i]) * rstd[i] : g;
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    for (int half = ROW_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.y < half)
            part[threadIdx.y][threadIdx.x] += part[threadIdx.y + half][threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.y == 0 && col < cols)
        out[col] += part[0][threadIdx.x];
}

extern "C" cudaError_t tfxk_column_sum_acc(cudaStream_t s, const float *dout, const float *x,
                                           const float *mean, const float *rstd, int rows,
                                           int cols, float *out)
{
    if (rows <= 0 || cols <= 0)
        return cudaSuccess;
    dim3 threads(COL_TILE, ROW_THREADS);
    unsigned int blocks = (unsigned int)((cols + COL_TILE - 1) / COL_TILE);
    column_sum_kernel<<<blocks, threads, 0, s>>>(dout, x, mean, rstd, rows, cols, out);
    return cudaGetLastError();
}

/* ---- element-wise -------------------------------------------------------- */

__global__ static void bias_forward_kernel(float *out, const float *bias, int rows, int cols)
{
    size_t total = (size_t)rows * cols;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x)
        out[e] += bias[e % cols];
}

extern "C" cudaError_t tfxk_bias_forward(cudaStream_t s, float *out, const float *bias,
                                         int rows, int cols)
{
    size_t n = (size_t)rows * cols;
    if (rows <= 0 || cols <= 0)
        return cudaSuccess;
    bias_forward_kernel<<<blocks_for(n, 256), 256, 0, s>>>(out, bias, rows, cols);
    return cudaGetLastError();
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

/* aux keeps the tanh term for the backward pass, as on the CPU. */
__global__ static void gelu_forward_kernel(const float *x, size_t count, float *out, float *aux)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
        aux[i] = t;
        out[i] = 0.5f * v * (1.0f + t);
    }
}

__global__ static void gelu_backward_kernel(const float *x, const float *aux, const float *dout,
                                            size_t count, float *dx)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i], t = aux[i];
        float du = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
        dx[i] = d * dout[i]; /* dx may alias dout (the model does that) */
    }
}

__global__ static void add_kernel(float *y, const float *x, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

extern "C" cudaError_t tfxk_gelu_forward(cudaStream_t s, const float *x, size_t count,
                                         float *out, float *aux)
{
    if (count == 0)
        return cudaSuccess;
    gelu_forward_kernel<<<blocks_for(count, 256), 256, 0, s>>>(x, count, out, aux);
    return cudaGetLastError();
}

extern "C" cudaError_t tfxk_gelu_backward(cudaStream_t s, const float *x, const float *aux,
                                          const float *dout, size_t count, float *dx)
{
    if (count == 0)
        return cudaSuccess;
    gelu_backward_kernel<<<blocks_for(count, 256), 256, 0, s>>>(x, aux, dout, count, dx);
    return cudaGetLastError();
}

__global__ static void scale_kernel(float *y, float alpha, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] *= alpha;
}

extern "C" cudaError_t tfxk_scale(cudaStream_t s, float *y, float alpha, size_t count)
{
    if (count == 0)
        return cudaSuccess;
    scale_kernel<<<blocks_for(count, 256), 256, 0, s>>>(y, alpha, count);
    return cudaGetLastError();
}

extern "C" cudaError_t tfxk_add(cudaStream_t s, float *y, const float *x, size_t count)
{
    if (count == 0)
        return cudaSuccess;
    add_kernel<<<blocks_for(count, 256), 256, 0, s>>>(y, x, count);
    return cudaGetLastError();
}

/* ---- softmax cross-entropy: one block per row ---------------------------- */

#define XENT_THREADS 256

/* Block-wide reduction of one value per thread through shared memory
 * (XENT_THREADS / WARP warps); every thread gets the result. */
template <bool IS_MAX>
__device__ static float block_reduce(float v, float *shared)
{
    int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    float r = lane < XENT_THREADS / WARP ? shared[lane] : (IS_MAX ? -INFINITY : 0.0f);
    r = IS_MAX ? warp_max(r) : warp_sum(r);
    __syncthreads(); /* shared is reused by the next reduction */
    return r;
}

__global__ static void softmax_xent_kernel(const float *logits, const int32_t *targets,
                                           int vocab, float scale, float *dlogits,
                                           double *row_loss)
{
    __shared__ float shared[XENT_THREADS / WARP];
    int row = blockIdx.x;
    const float *li = logits + (size_t)row * vocab;
    float *di = dlogits + (size_t)row * vocab;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < vocab; j += XENT_THREADS)
        mx = fmaxf(mx, li[j]);
    mx = block_reduce<true>(mx, shared);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < vocab; j += XENT_THREADS)
        sum += expf(li[j] - mx);
    sum = block_reduce<false>(sum, shared);
    float lse = mx + logf(sum);
    int t = targets[row];
    if (threadIdx.x == 0)
        row_loss[row] = (double)lse - (double)li[t];
    /* Everyone has read li[t] and the sums before any write (the reductions'
     * barriers), and each thread rewrites only its own columns, so dlogits
     * may alias logits. */
    __syncthreads();
    for (int j = threadIdx.x; j < vocab; j += XENT_THREADS) {
        float p = expf(li[j] - lse);
        di[j] = scale * (p - (j == t ? 1.0f : 0.0f));
    }
}

__global__ static void sum_rows_kernel(const double *row_loss, int rows, double *total)
{
    __shared__ double part[1024];
    double acc = 0.0;
    for (int i = threadIdx.x; i < rows; i += blockDim.x)
        acc += row_loss[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *total = part[0];
}

extern "C" cudaError_t tfxk_softmax_xent(cudaStream_t s, const float *logits,
                                         const int32_t *targets, int rows, int vocab,
                                         float scale, float *dlogits, double *row_loss)
{
    if (rows <= 0 || vocab <= 0)
        return cudaSuccess;
    softmax_xent_kernel<<<(unsigned int)rows, XENT_THREADS, 0, s>>>(logits, targets, vocab,
                                                                   scale, dlogits, row_loss);
    return cudaGetLastError();
}

extern "C" cudaError_t tfxk_sum_rows(cudaStream_t s, const double *row_loss, int rows,
                                     double *total)
{
    sum_rows_kernel<<<1, 1024, 0, s>>>(row_loss, rows > 0 ? rows : 0, total);
    return cudaGetLastError();
}

/* ---- AdamW --------------------------------------------------------------- */

__global__ static void adamw_kernel(float *param, const float *grad, float *m, float *v,
                                    size_t count, float lr, float beta1, float beta2, float eps,
                                    float weight_decay, double c1, double c2)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        /* As the CPU: the bias-corrected moments and the step in double. */
        double mhat = mi / c1, vhat = vi / c2;
        float p = param[i];
        param[i] = p - (float)(lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p));
    }
}

extern "C" cudaError_t tfxk_adamw(cudaStream_t s, float *param, const float *grad, float *m,
                                  float *v, size_t count, float lr, float beta1, float beta2,
                                  float eps, float weight_decay, double c1, double c2)
{
    if (count == 0)
        return cudaSuccess;
    adamw_kernel<<<blocks_for(count, 256), 256, 0, s>>>(param, grad, m, v, count, lr, beta1,
                                                        beta2, eps, weight_decay, c1, c2);
    return cudaGetLastError();
}
