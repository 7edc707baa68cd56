/* test_exec_model.c - the model's layers and stages against finite
 * differences, the layout / partition rules, and the independence of the
 * initial tensors. */
#include <math.h>

#include "model_flops.h"
#include "test_util.h"
#include "tf/schedule.h"
#include "tfx/backend.h"
#include "tfx/model.h"
#include "tfx/runtime.h"

/* max |fd - an| over max |an| (the norm-relative error), with a floor. */
static double rel_error(const double *fd, const double *an, int n)
{
    double diff = 0.0, scale = 1e-6;
    for (int i = 0; i < n; i++) {
        diff = fmax(diff, fabs(fd[i] - an[i]));
        scale = fmax(scale, fabs(an[i]));
    }
    return diff / scale;
}

static void fill(float *x, int n, uint64_t *rng, double scale)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)((2.0 * test_random(rng) - 1.0) * scale);
}

static double dot(const float *a, const float *b, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

#define ROWS 5
#define COLS 7
#define EPS 1e-2f
#define LAYER_TOL 1e-2

typedef struct ctx {
    tfx_backend be;
    const tfx_backend_ops *o;
} ctx;

static int setup(void **state)
{
    ctx *c = calloc(1, sizeof *c);
    assert_int_equal(tfx_backend_cpu_create(0, &c->be, NULL), 0);
    c->o = c->be.ops;
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    ctx *c = *state;
    c->o->destroy(c->be.ctx);
    free(c);
    return 0;
}

/* Objective of the norm: sum(R * layernorm(x; w, b)). */
static double norm_objective(ctx *c, const float *x, const float *w, const float *b,
                             const float *R)
{
    float out[ROWS * COLS], mean[ROWS], rstd[ROWS];
    c->o->layernorm_forward(c->be.ctx, x, w, b, ROWS, COLS, 1e-5f, out, mean, rstd);
    return dot(out, R, ROWS * COLS);
}

/* Central differences of objective() with respect to param[0..n), against
 * the analytic gradient an_grad (minus `offset`, a value it was accumulated
 * onto). */
#define CHECK_FD(param, n, an_grad, offset, objective)                                    \
    do {                                                                                  \
        double fd_[512], an_[512];                                                        \
        assert_true((n) <= 512);                                                          \
        for (int i_ = 0; i_ < (n); i_++) {                                                \
            float keep_ = (param)[i_];                                                    \
            (param)[i_] = keep_ + EPS;                                                    \
            double up_ = (objective);                                                     \
            (param)[i_] = keep_ - EPS;                                                    \
            double down_ = (objective);                                                   \
            (param)[i_] = keep_;                                                          \
            fd_[i_] = (up_ - down_) / (2 * EPS);                                          \
            an_[i_] = (an_grad)[i_] - (offset);                                           \
        }                                                                                 \
        double e_ = rel_error(fd_, an_, (n));                                             \
        if (!(e_ < LAYER_TOL))                                                            \
            fail_msg("%s: finite differences differ by %.3g", #an_grad, e_);              \
    } while (0)

static void test_layernorm_gradients(void **state)
{
    ctx *c = *state;
    uint64_t rng = 11;
    float x[ROWS * COLS], w[COLS], b[COLS], R[ROWS * COLS], out[ROWS * COLS];
    float mean[ROWS], rstd[ROWS], dx[ROWS * COLS], dw[COLS], db[COLS];
    fill(x, ROWS * COLS, &rng, 1.0);
    fill(w, COLS, &rng, 1.0);
    fill(b, COLS, &rng, 1.0);
    fill(R, ROWS * COLS, &rng, 1.0);
    for (int j = 0; j < COLS; j++)
        dw[j] = db[j] = 1.0f; /* accumulation onto a known value */
    c->o->layernorm_forward(c->be.ctx, x, w, b, ROWS, COLS, 1e-5f, out, mean, rstd);
    /* Known answer: the statistics of row 0, by hand. */
    double mu = 0, var = 0;
    for (int j = 0; j < COLS; j++)
        mu += x[j] / (double)COLS;
    for (int j = 0; j < COLS; j++)
        var += (x[j] - mu) * (x[j] - mu) / COLS;
    assert_float_equal(mean[0], mu, 1e-6);
    assert_float_equal(rstd[0], 1.0 / sqrt(var + 1e-5), 1e-5);
    c->o->layernorm_backward_input(c->be.ctx, R, x, w, mean, rstd, ROWS, COLS, dx);
    c->o->layernorm_backward_weight_acc(c->be.ctx, R, x, mean, rstd, ROWS, COLS, dw);
    c->o->bias_backward_acc(c->be.ctx, R, ROWS, COLS, db);
    CHECK_FD(x, ROWS * COLS, dx, 0.0, norm_objective(c, x, w, b, R));
    CHECK_FD(w, COLS, dw, 1.0, norm_objective(c, x, w, b, R));
    CHECK_FD(b, COLS, db, 1.0, norm_objective(c, x, w, b, R));
}

/* Attention: 2 sequences of 5 tokens, 2 heads of 3. */
enum { AB = 2, AT = 5, AH = 2, AS = 3, AC = AH * AS, AN = AB * AT };

static double attention_objective(ctx *c, const float *qkv, const float *R)
{
    float out[AN * AC], probs[AB * AH * AT * AT];
    c->o->attention_forward(c->be.ctx, qkv, AB, AT, AH, AS, out, probs);
    return dot(out, R, AN * AC);
}

/* The objective with part `part` (0 q, 1 k, 2 v) of qkv replaced by p. */
static double attention_part_objective(ctx *c, float *qkv, int part, const float *p,
                                       const float *R)
{
    for (int i = 0; i < AN; i++)
        for (int j = 0; j < AC; j++)
            qkv[i * 3 * AC + part * AC + j] = p[i * AC + j];
    return attention_objective(c, qkv, R);
}

static void test_attention_gradients(void **state)
{
    ctx *c = *state;
    uint64_t rng = 16;
    float qkv[AN * 3 * AC], R[AN * AC], out[AN * AC], probs[AB * AH * AT * AT];
    float scratch[AB * AH * AT * AT], dqkv[AN * 3 * AC];
    fill(qkv, AN * 3 * AC, &rng, 1.5);
    fill(R, AN * AC, &rng, 1.0);
    c->o->attention_forward(c->be.ctx, qkv, AB, AT, AH, AS, out, probs);
    /* Causal: each row of weights sums to 1 with nothing above the diagonal,
     * and the first token attends only to itself, so its output is its v. */
    for (int r = 0; r < AB * AH * AT; r++) {
        const float *p = probs + (size_t)r * AT;
        int i = r % AT;
        double sum = 0;
        for (int j = 0; j < AT; j++) {
            sum += p[j];
            if (j > i)
                assert_float_equal(p[j], 0.0f, 0.0);
        }
        assert_float_equal(sum, 1.0, 1e-6);
    }
    for (int b = 0; b < AB; b++)
        for (int j = 0; j < AC; j++)
            assert_float_equal(out[(size_t)b * AT * AC + j],
                               qkv[(size_t)b * AT * 3 * AC + 2 * AC + j], 1e-6);
    c->o->attention_backward(c->be.ctx, R, qkv, probs, AB, AT, AH, AS, scratch, dqkv);
    for (int part = 0; part < 3; part++) {
        /* q, k and v of every token, one part at a time (the macro's buffer
         * is 512 entries). */
        float q[AN * AC], g[AN * AC];
        for (int i = 0; i < AN; i++)
            for (int j = 0; j < AC; j++) {
                q[i * AC + j] = qkv[i * 3 * AC + part * AC + j];
                g[i * AC + j] = dqkv[i * 3 * AC + part * AC + j];
            }
        CHECK_FD(q, AN * AC, g, 0.0, attention_part_objective(c, qkv, part, q, R));
        attention_part_objective(c, qkv, part, q, R); /* restores the last entry */
    }
}

static void test_gelu_gradients(void **state)
{
    ctx *c = *state;
    uint64_t rng = 12;
    enum { N = 41 };
    float x[N], R[N], out[N], dx[N], aux[N];
    fill(x, N, &rng, 3.0);
    fill(R, N, &rng, 1.0);
    c->o->gelu_forward(c->be.ctx, x, N, out, aux);
    c->o->gelu_backward(c->be.ctx, x, aux, R, N, dx);
    double fd[N], an[N];
    for (int i = 0; i < N; i++) {
        float keep = x[i];
        x[i] = keep + EPS;
        c->o->gelu_forward(c->be.ctx, x, N, out, aux);
        double up = dot(out, R, N);
        x[i] = keep - EPS;
        c->o->gelu_forward(c->be.ctx, x, N, out, aux);
        double down = dot(out, R, N);
        x[i] = keep;
        fd[i] = (up - down) / (2 * EPS);
        an[i] = dx[i];
    }
    assert_true(rel_error(fd, an, N) < LAYER_TOL);
    /* Known values: gelu(0) = 0, gelu(x) -> x for large x. */
    float probe[2] = {0.0f, 10.0f}, res[2], paux[2];
    c->o->gelu_forward(c->be.ctx, probe, 2, res, paux);
    assert_float_equal(res[0], 0.0f, 1e-7);
    assert_float_equal(res[1], 10.0f, 1e-5);
}

/* Linear layer y = x W + b through the backend's GEMMs exactly as the model
 * uses them: dX = dy W^T, dW += x^T dy, db += colsum dy. */
static double linear_objective(ctx *c, const float *x, const float *W, const float *b,
                               const float *R)
{
    enum { IN = COLS, OUT = 4 };
    float y[ROWS * OUT];
    c->o->gemm(c->be.ctx, 0, 0, ROWS, OUT, IN, 1.0f, x, IN, W, OUT, 0.0f, y, OUT);
    c->o->bias_forward(c->be.ctx, y, b, ROWS, OUT);
    return dot(y, R, ROWS * OUT);
}

static void test_linear_gradients(void **state)
{
    ctx *c = *state;
    enum { IN = COLS, OUT = 4 };
    uint64_t rng = 13;
    float x[ROWS * IN], W[IN * OUT], b[OUT], R[ROWS * OUT];
    float dx[ROWS * IN], dW[IN * OUT], db[OUT];
    fill(x, ROWS * IN, &rng, 1.0);
    fill(W, IN * OUT, &rng, 1.0);
    fill(b, OUT, &rng, 1.0);
    fill(R, ROWS * OUT, &rng, 1.0);
    /* Accumulation: start dW and db from a known value and check it stays. */
    for (int i = 0; i < IN * OUT; i++)
        dW[i] = 1.0f;
    for (int i = 0; i < OUT; i++)
        db[i] = 1.0f;
    c->o->gemm(c->be.ctx, 0, 1, ROWS, IN, OUT, 1.0f, R, OUT, W, OUT, 0.0f, dx, IN);
    c->o->gemm(c->be.ctx, 1, 0, IN, OUT, ROWS, 1.0f, x, IN, R, OUT, 1.0f, dW, OUT);
    c->o->bias_backward_acc(c->be.ctx, R, ROWS, OUT, db);

    double fd[ROWS * IN], an[ROWS * IN];
    float *params[3] = {x, W, b};
    float *grads[3] = {dx, dW, db};
    int counts[3] = {ROWS * IN, IN * OUT, OUT};
    double offset[3] = {0.0, 1.0, 1.0};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < counts[k]; i++) {
            float keep = params[k][i];
            params[k][i] = keep + EPS;
            double up = linear_objective(c, x, W, b, R);
            params[k][i] = keep - EPS;
            double down = linear_objective(c, x, W, b, R);
            params[k][i] = keep;
            fd[i] = (up - down) / (2 * EPS);
            an[i] = grads[k][i] - offset[k];
        }
        assert_true(rel_error(fd, an, counts[k]) < LAYER_TOL);
    }
}

static void test_embedding_gradients(void **state)
{
    ctx *c = *state;
    enum { V = 6, H = 3, N = 5 };
    int32_t tokens[N] = {2, 0, 2, 5, 1};
    float table[V * H], R[N * H], out[N * H], dtable[V * H] = {0};
    uint64_t rng = 14;
    fill(table, V * H, &rng, 1.0);
    fill(R, N * H, &rng, 1.0);
    c->o->embedding_forward(c->be.ctx, table, tokens, N, H, out);
    for (int j = 0; j < H; j++)
        assert_float_equal(out[3 * H + j], table[5 * H + j], 0.0);
    c->o->embedding_backward_acc(c->be.ctx, dtable, tokens, N, H, R);
    /* Linear in the table: finite differences are exact up to rounding. */
    double fd[V * H], an[V * H];
    for (int i = 0; i < V * H; i++) {
        float keep = table[i];
        table[i] = keep + EPS;
        c->o->embedding_forward(c->be.ctx, table, tokens, N, H, out);
        double up = dot(out, R, N * H);
        table[i] = keep - EPS;
        c->o->embedding_forward(c->be.ctx, table, tokens, N, H, out);
        double down = dot(out, R, N * H);
        table[i] = keep;
        fd[i] = (up - down) / (2 * EPS);
        an[i] = dtable[i];
    }
    assert_true(rel_error(fd, an, V * H) < LAYER_TOL);
    /* Token 3 and 4 never occur: zero gradient. */
    for (int j = 0; j < H; j++)
        assert_float_equal(dtable[3 * H + j], 0.0f, 0.0);
}

static void test_softmax_xent_gradients(void **state)
{
    ctx *c = *state;
    enum { N = 4, V = 9 };
    int32_t targets[N] = {0, 8, 3, 3};
    float logits[N * V], dlogits[N * V];
    uint64_t rng = 15;
    fill(logits, N * V, &rng, 2.0);
    double loss;
    c->o->softmax_xent(c->be.ctx, logits, targets, N, V, 1.0f, dlogits, &loss);
    double fd[N * V], an[N * V];
    float scratch[N * V];
    for (int i = 0; i < N * V; i++) {
        float keep = logits[i];
        double up, down;
        logits[i] = keep + EPS;
        c->o->softmax_xent(c->be.ctx, logits, targets, N, V, 1.0f, scratch, &up);
        logits[i] = keep - EPS;
        c->o->softmax_xent(c->be.ctx, logits, targets, N, V, 1.0f, scratch, &down);
        logits[i] = keep;
        fd[i] = (up - down) / (2 * EPS);
        an[i] = dlogits[i];
    }
    assert_true(rel_error(fd, an, N * V) < LAYER_TOL);
    /* Known answer: equal logits give ln V per row. */
    float flat[N * V] = {0};
    c->o->softmax_xent(c->be.ctx, flat, targets, N, V, 1.0f, scratch, &loss);
    assert_float_equal(loss, N * log((double)V), 1e-9);
    /* In place (dlogits aliasing logits) gives the same gradient. */
    c->o->softmax_xent(c->be.ctx, logits, targets, N, V, 0.5f, logits, &loss);
    for (int i = 0; i < N * V; i++)
        assert_float_equal(logits[i], 0.5f * dlogits[i], 1e-7);
}

static void test_adamw_known_step(void **state)
{
    ctx *c = *state;
    /* First step with bias correction: update = lr * sign(g) (+ decay). */
    float p[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.5f, -4.0f, 0.0f}, m[3] = {0}, v[3] = {0};
    c->o->adamw(c->be.ctx, p, g, m, v, 3, 0.1f, 0.9f, 0.95f, 1e-8f, 0.0f, 1);
    assert_float_equal(p[0], 0.9f, 1e-6);
    assert_float_equal(p[1], -1.9f, 1e-6);
    assert_float_equal(p[2], 0.5f, 1e-6);
    c->o->adamw(c->be.ctx, p, (float[3]){0, 0, 0}, m, v, 3, 0.1f, 0.9f, 0.95f, 1e-8f, 0.5f, 2);
    /* decay alone on p[2]: 0.5 - 0.1 * 0.5 * 0.5 */
    assert_float_equal(p[2], 0.475f, 1e-6);
}

/* The whole model on one stage: finite differences of the batch loss
 * against the pipeline's accumulated gradients, for entries of every
 * tensor. */
static void test_model_gradients(void **state)
{
    (void)state;
    tfx_model_config cfg = {.layers = 2, .hidden = 8, .heads = 2, .ffn = 12, .context = 6,
                            .microbatch_size = 2};
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("GPipe", 1, 1, 2, &s, &err), 0);
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    po.seed = 5;
    tfx_pipeline *p;
    assert_int_equal(tfx_pipeline_create(&s, &cfg, &po, &p, &err), 0);
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    const int N = cfg.context * cfg.microbatch_size, M = 2;
    int32_t tokens[2 * 12], targets[2 * 12];
    uint64_t rng = 3;
    for (int i = 0; i < M * N; i++) {
        tokens[i] = (int32_t)(test_random(&rng) * 256);
        targets[i] = (int32_t)(test_random(&rng) * 256);
    }
    /* Larger head weights than the default init so its gradients are not tiny. */
    for (int t = 0; t < l->n_tensors; t++) {
        float *buf = malloc(l->tensors[t].count * sizeof *buf);
        tfx_pipeline_read_tensor(p, t, TFX_BUF_PARAM, buf);
        for (size_t i = 0; i < l->tensors[t].count; i++)
            buf[i] += (float)(0.3 * (2 * test_random(&rng) - 1));
        tfx_pipeline_write_tensor(p, t, TFX_BUF_PARAM, buf);
        free(buf);
    }
    tfx_step_input in = {.tokens = tokens, .targets = targets, .frozen = NULL,
                         .apply_optimizer = 0};
    tfx_step_result res;
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    assert_true(res.loss > 0);
    for (int t = 0; t < l->n_tensors; t++) {
        size_t n = l->tensors[t].count;
        float *param = malloc(n * sizeof *param), *grad = malloc(n * sizeof *grad);
        tfx_pipeline_read_tensor(p, t, TFX_BUF_GRAD, grad);
        tfx_pipeline_read_tensor(p, t, TFX_BUF_PARAM, param);
        enum { PROBES = 12 };
        double fd[PROBES], an[PROBES];
        /* Probe the entries with the largest gradient plus a spread of others. */
        for (int k = 0; k < PROBES; k++) {
            size_t i = (size_t)k * n / PROBES;
            if (k == 0)
                for (size_t j = 0; j < n; j++)
                    if (fabsf(grad[j]) > fabsf(grad[i]))
                        i = j;
            float keep = param[i];
            const float eps = 5e-3f;
            param[i] = keep + eps;
            tfx_pipeline_write_tensor(p, t, TFX_BUF_PARAM, param);
            assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
            double up = res.loss;
            param[i] = keep - eps;
            tfx_pipeline_write_tensor(p, t, TFX_BUF_PARAM, param);
            assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
            double down = res.loss;
            param[i] = keep;
            tfx_pipeline_write_tensor(p, t, TFX_BUF_PARAM, param);
            fd[k] = (up - down) / (2 * eps);
            an[k] = grad[i];
        }
        double e = rel_error(fd, an, PROBES);
        if (getenv("TFX_TEST_VERBOSE"))
            fprintf(stderr, "%-20s |g| %.3g  fd error %.3g\n", l->tensors[t].name,
                    fabs(an[0]), e);
        if (!(e < 3e-2))
            fail_msg("tensor %s: finite differences differ by %.3g (relative)",
                     l->tensors[t].name, e);
        free(param);
        free(grad);
    }
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

static void test_layout_partition(void **state)
{
    (void)state;
    tfx_model_config cfg;
    tfx_model_config_default(&cfg);
    cfg.layers = 5;
    tfx_model_layout l;
    tf_error err = {0};
    assert_int_equal(tfx_model_layout_build(&cfg, 2, &l, &err), 0);
    assert_int_equal(l.n_tensors, 2 + 12 * 5 + 3);
    /* blocks 0,1 on stage 0 with the embedding; 2,3,4 and the head on stage 1 */
    assert_int_equal(l.stage_first_tensor[1], 2 + 2 * 12);
    assert_string_equal(l.tensors[0].name, "embed.token");
    assert_string_equal(l.tensors[1].name, "embed.position");
    assert_string_equal(l.tensors[l.stage_first_tensor[1]].name, "block2.ln1.weight");
    assert_string_equal(l.tensors[l.stage_first_tensor[1] + 2].name, "block2.attn.qkv.weight");
    assert_int_equal(l.tensors[l.stage_first_tensor[1] + 2].rows, 3 * 192);
    assert_string_equal(l.tensors[l.n_tensors - 1].name, "head.weight");
    assert_int_equal(l.tensors[l.n_tensors - 1].stage, 1);
    assert_int_equal(l.tensors[l.n_tensors - 1].index_in_stage, 3 * 12 + 2);
    const double C = 192, F = 768, T = 64;
    double block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (F * C + F) + (C * F + C);
    double total = 256 * C + T * C + 5 * block + 2 * C + 256 * C;
    assert_float_equal(tfx_model_parameter_count(&l, -1), total, 0.0);
    assert_float_equal(tfx_model_parameter_count(&l, 0) + tfx_model_parameter_count(&l, 1),
                       total, 0.0);
    /* FLOPs: 2 N per weight entry for each of forward, dX and dW, plus the
     * attention GEMMs (2 B C T^2 each: two forward, four backward). */
    const double N = T * 8, weights = 5 * (3 * C * C + C * C + 2 * F * C) + 256 * C;
    const double att = 2 * 8 * C * T * T;
    tfx_model_flops f = tfx_model_microbatch_flops(&l, -1);
    assert_float_equal(f.forward, 2 * N * weights + 5 * 2 * att, 1.0);
    assert_float_equal(f.backward_input, 2 * N * weights + 5 * 4 * att, 1.0);
    assert_float_equal(f.backward_weight, 2 * N * weights, 1.0);
    tfx_model_flops f0 = tfx_model_microbatch_flops(&l, 0), f1 = tfx_model_microbatch_flops(&l, 1);
    assert_float_equal(f0.forward + f1.forward, f.forward, 1.0);
    assert_float_equal(f0.forward, 2 * N * 2 * (3 * C * C + C * C + 2 * F * C) + 2 * 2 * att, 1.0);
    tfx_model_layout_free(&l);
    /* More stages than blocks: an error naming --layers. */
    assert_int_equal(tfx_model_layout_build(&cfg, 6, &l, &err), TF_EINVAL);
    assert_contains(err.msg, "--layers 5");
    /* Heads must divide the width. */
    cfg.heads = 5;
    assert_int_equal(tfx_model_layout_build(&cfg, 2, &l, &err), TF_EINVAL);
    assert_contains(err.msg, "--heads 5");
    /* Default heads: 32 wide where 32 divides the width, else the largest
     * divisor below width / 32. */
    assert_int_equal(tfx_model_default_heads(192), 6);
    assert_int_equal(tfx_model_default_heads(64), 2);
    assert_int_equal(tfx_model_default_heads(16), 1);
    assert_int_equal(tfx_model_default_heads(100), 2);
    assert_int_equal(tfx_model_default_heads(97), 1);
}

/* Pearson correlation of x[0, n) and y[0, n); 0 when either is constant. */
static double correlation(const float *x, const float *y, size_t n)
{
    double mx = 0.0, my = 0.0, sxy = 0.0, sxx = 0.0, syy = 0.0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    for (size_t i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0.0 && syy > 0.0 ? sxy / sqrt(sxx * syy) : 0.0;
}

/* The default model's random tensors (the 35 that are not LayerNorm
 * constants) are independent: the correlation of equal-length prefixes of
 * every pair, and of each tensor under seeds 1 and 2, is near 0.  For n
 * independent pairs of values sqrt(n) r is nearly standard normal, so the
 * bound 5 / sqrt(n) is crossed by chance with probability 5.7e-7 per pair,
 * under 4e-4 over these 630. */
static void test_initial_tensors_uncorrelated(void **state)
{
    (void)state;
    tfx_model_config cfg;
    tfx_model_config_default(&cfg);
    tfx_model_layout l;
    assert_int_equal(tfx_model_layout_build(&cfg, 1, &l, NULL), 0);
    float *v[2][64] = {{NULL}};
    int random[64], n_random = 0;
    assert_true(l.n_tensors <= 64);
    for (int t = 0; t < l.n_tensors; t++) {
        for (int s = 0; s < 2; s++) {
            v[s][t] = malloc(l.tensors[t].count * sizeof(float));
            tfx_model_init_tensor(&l, t, (uint64_t)s + 1, v[s][t]);
        }
        float first = v[0][t][0];
        size_t i = 1;
        while (i < l.tensors[t].count && v[0][t][i] == first)
            i++;
        if (i < l.tensors[t].count)
            random[n_random++] = t;
    }
    assert_int_equal(n_random, 2 + 8 * cfg.layers + 1);
    for (int a = 0; a < n_random; a++)
        for (int b = a; b < n_random; b++) {
            int ta = random[a], tb = random[b];
            size_t n = l.tensors[ta].count < l.tensors[tb].count ? l.tensors[ta].count
                                                                  : l.tensors[tb].count;
            /* A tensor with itself only across seeds. */
            double r = correlation(v[0][ta], v[a == b][tb], n);
            if (fabs(r) > 5.0 / sqrt((double)n))
                fail_msg("%s and %s%s: correlation %.4f over %zu values, bound %.4f",
                         l.tensors[ta].name, l.tensors[tb].name,
                         a == b ? " of seed 2" : "", r, n, 5.0 / sqrt((double)n));
        }
    for (int t = 0; t < l.n_tensors; t++) {
        free(v[0][t]);
        free(v[1][t]);
    }
    tfx_model_layout_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layernorm_gradients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attention_gradients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gelu_gradients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_linear_gradients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embedding_gradients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_softmax_xent_gradients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adamw_known_step, setup, teardown),
        cmocka_unit_test(test_model_gradients),
        cmocka_unit_test(test_layout_partition),
        cmocka_unit_test(test_initial_tensors_uncorrelated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
