/* model.c - the byte-level language model: layout, initialisation, and the
 * forward / split backward / optimizer of one pipeline stage. */
#include "tfx/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfx/rng.h"

#define NORM_EPS 1e-5f

void tfx_model_config_default(tfx_model_config *c)
{
    c->layers = 4;
    c->hidden = 128;
    c->ffn = 512;
    c->context = 64;
    c->microbatch_size = 8;
}

int tfx_model_config_check(const tfx_model_config *c, tf_error *err)
{
    struct {
        const char *flag;
        int value;
    } f[] = {{"--layers", c->layers},   {"--hidden", c->hidden},
             {"--ffn", c->ffn},         {"--context", c->context},
             {"--microbatch-size", c->microbatch_size}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].value < 1 || f[i].value > 65536)
            return tf_fail(err, TF_EINVAL, "%s %d: must be between 1 and 65536", f[i].flag,
                           f[i].value);
    if ((long long)c->context * c->microbatch_size > (1 << 24))
        return tf_fail(err, TF_EINVAL,
                       "--context %d x --microbatch-size %d: more than 16777216 tokens per "
                       "microbatch",
                       c->context, c->microbatch_size);
    return 0;
}

int tfx_model_microbatch_tokens(const tfx_model_config *c)
{
    return c->context * c->microbatch_size;
}

static void add_tensor(tfx_model_layout *l, const char *name, tfx_tensor_kind kind, int rows,
                       int cols, int unit)
{
    tfx_tensor_info *t = &l->tensors[l->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->rows = rows;
    t->cols = cols;
    t->count = (size_t)rows * cols;
    t->unit = unit;
}

int tfx_model_layout_build(const tfx_model_config *c, int stages, tfx_model_layout *out,
                           tf_error *err)
{
    int rc = 0;
    memset(out, 0, sizeof *out);
    TFX_TRY(tfx_model_config_check(c, err));
    if (stages < 1 || c->layers < stages)
        return tf_fail(err, TF_EINVAL,
                       "--layers %d: the model needs at least one block per pipeline stage "
                       "(%d stages)",
                       c->layers, stages);
    out->config = *c;
    out->stages = stages;
    out->n_units = c->layers + 2;
    TFX_CALLOC(out->tensors, 1 + 5 * c->layers + 3);
    TFX_CALLOC(out->stage_first_unit, stages + 1);
    TFX_CALLOC(out->stage_first_tensor, stages + 1);

    const int H = c->hidden, F = c->ffn;
    char name[48];
    add_tensor(out, "embed.weight", TFX_TENSOR_EMBEDDING, TFX_VOCAB, H, 0);
    for (int b = 0; b < c->layers; b++) {
        snprintf(name, sizeof name, "block%d.norm.gain", b);
        add_tensor(out, name, TFX_TENSOR_GAIN, 1, H, 1 + b);
        snprintf(name, sizeof name, "block%d.fc1.weight", b);
        add_tensor(out, name, TFX_TENSOR_WEIGHT, H, F, 1 + b);
        snprintf(name, sizeof name, "block%d.fc1.bias", b);
        add_tensor(out, name, TFX_TENSOR_BIAS, 1, F, 1 + b);
        snprintf(name, sizeof name, "block%d.fc2.weight", b);
        add_tensor(out, name, TFX_TENSOR_WEIGHT, F, H, 1 + b);
        snprintf(name, sizeof name, "block%d.fc2.bias", b);
        add_tensor(out, name, TFX_TENSOR_BIAS, 1, H, 1 + b);
    }
    add_tensor(out, "final.norm.gain", TFX_TENSOR_GAIN, 1, H, c->layers + 1);
    add_tensor(out, "head.weight", TFX_TENSOR_WEIGHT, H, TFX_VOCAB, c->layers + 1);
    add_tensor(out, "head.bias", TFX_TENSOR_BIAS, 1, TFX_VOCAB, c->layers + 1);

    /* Blocks as evenly as possible; stage s gets blocks [s L / S, (s+1) L / S).
     * Units: stage 0 starts at the embedding (unit 0); the last stage ends
     * with the final unit. */
    for (int s = 0; s <= stages; s++) {
        int first_block = (int)((long)s * c->layers / stages);
        out->stage_first_unit[s] = s == 0 ? 0 : 1 + first_block;
    }
    out->stage_first_unit[stages] = out->n_units;
    for (int s = 0, t = 0; s < stages; s++) {
        out->stage_first_tensor[s] = t;
        int k = 0;
        while (t < out->n_tensors && out->tensors[t].unit < out->stage_first_unit[s + 1]) {
            out->tensors[t].stage = s;
            out->tensors[t].index_in_stage = k++;
            t++;
        }
    }
    out->stage_first_tensor[stages] = out->n_tensors;
    return 0;
fail:
    tfx_model_layout_free(out);
    return rc;
}

void tfx_model_layout_free(tfx_model_layout *l)
{
    free(l->tensors);
    free(l->stage_first_unit);
    free(l->stage_first_tensor);
    memset(l, 0, sizeof *l);
}

double tfx_model_parameter_count(const tfx_model_layout *l, int stage)
{
    double n = 0;
    for (int t = 0; t < l->n_tensors; t++)
        if (stage < 0 || l->tensors[t].stage == stage)
            n += (double)l->tensors[t].count;
    return n;
}

void tfx_model_init_tensor(const tfx_model_layout *l, int tensor, uint64_t seed,
                           float *host_out)
{
    const tfx_tensor_info *t = &l->tensors[tensor];
    const tfx_model_config *c = &l->config;
    double std = 0.0;
    switch (t->kind) {
    case TFX_TENSOR_GAIN:
        for (size_t i = 0; i < t->count; i++)
            host_out[i] = 1.0f;
        return;
    case TFX_TENSOR_BIAS:
        memset(host_out, 0, t->count * sizeof *host_out);
        return;
    case TFX_TENSOR_EMBEDDING:
        std = 1.0;
        break;
    case TFX_TENSOR_WEIGHT:
        if (t->unit == c->layers + 1)
            std = 0.02; /* head: start near the uniform prediction, loss ~ ln 256 */
        else if (t->rows == c->hidden)
            std = 1.0 / sqrt((double)c->hidden); /* fc1 */
        else
            std = 1.0 / sqrt((double)c->ffn) / sqrt(2.0 * c->layers); /* fc2: residual */
        break;
    }
    tfx_rng r = tfx_rng_for(seed, 0x1417, (uint64_t)tensor, 0);
    for (size_t i = 0; i < t->count; i++)
        host_out[i] = (float)(std * tfx_rng_normal(&r));
}

/* ---- stage ---------------------------------------------------------------- */

/* n device buffers of `floats` floats each, in a new array *arr.  After a
 * failure, free_buffers releases what was allocated. */
static int alloc_buffers(tfx_stage *s, float ***arr, int n, size_t floats, tf_error *err)
{
    int rc = 0;
    TFX_CALLOC(*arr, n);
    for (int k = 0; k < n; k++)
        TFX_DEV_ALLOC(s->be, (*arr)[k], floats * sizeof(float));
fail:
    return rc;
}

/* Frees the n buffers of arr (NULL: none) and arr. */
static void free_buffers(tfx_backend be, float **arr, int n)
{
    for (int k = 0; arr && k < n; k++)
        be.ops->free(be.ctx, arr[k]);
    free(arr);
}

static int slot_alloc(tfx_stage *s, tfx_activation_slot *a, tf_error *err)
{
    int rc = 0;
    const size_t N = (size_t)s->tokens, H = (size_t)s->layout->config.hidden,
                 F = (size_t)s->layout->config.ffn;
    const int nb = s->n_blocks;
    TFX_TRY(alloc_buffers(s, &a->xs, nb + 1, N * H, err));
    TFX_TRY(alloc_buffers(s, &a->nrm, nb, N * H, err));
    TFX_TRY(alloc_buffers(s, &a->rstd, nb, N, err));
    TFX_TRY(alloc_buffers(s, &a->h, nb, N * F, err));
    TFX_TRY(alloc_buffers(s, &a->a, nb, N * F, err));
    TFX_TRY(alloc_buffers(s, &a->gelu_aux, nb, N * F, err));
    if (s->has_embedding)
        TFX_DEV_ALLOC(s->be, a->tokens, N * sizeof(int32_t));
    if (s->has_head) {
        TFX_DEV_ALLOC(s->be, a->targets, N * sizeof(int32_t));
        TFX_DEV_ALLOC(s->be, a->nrm_f, N * H * sizeof(float));
        TFX_DEV_ALLOC(s->be, a->rstd_f, N * sizeof(float));
        TFX_DEV_ALLOC(s->be, a->dlogits, N * TFX_VOCAB * sizeof(float));
    }
fail:
    return rc;
}

static void slot_free(tfx_stage *s, tfx_activation_slot *a)
{
    const tfx_backend be = s->be;
    const int nb = s->n_blocks;
    free_buffers(be, a->xs, nb + 1);
    free_buffers(be, a->nrm, nb);
    free_buffers(be, a->rstd, nb);
    free_buffers(be, a->h, nb);
    free_buffers(be, a->a, nb);
    free_buffers(be, a->gelu_aux, nb);
    be.ops->free(be.ctx, a->tokens);
    be.ops->free(be.ctx, a->targets);
    be.ops->free(be.ctx, a->nrm_f);
    be.ops->free(be.ctx, a->rstd_f);
    be.ops->free(be.ctx, a->dlogits);
}

static int gslot_alloc(tfx_stage *s, tfx_gradient_slot *g, tf_error *err)
{
    int rc = 0;
    const size_t N = (size_t)s->tokens, H = (size_t)s->layout->config.hidden,
                 F = (size_t)s->layout->config.ffn;
    const int nb = s->n_blocks;
    TFX_TRY(alloc_buffers(s, &g->gs, nb + 1, N * H, err));
    TFX_TRY(alloc_buffers(s, &g->dh, nb, N * F, err));
    TFX_TRY(alloc_buffers(s, &g->dn, nb, N * H, err));
    if (s->has_head)
        TFX_DEV_ALLOC(s->be, g->dn_f, N * H * sizeof(float));
fail:
    return rc;
}

static void gslot_free(tfx_stage *s, tfx_gradient_slot *g)
{
    const tfx_backend be = s->be;
    free_buffers(be, g->gs, s->n_blocks + 1);
    free_buffers(be, g->dh, s->n_blocks);
    free_buffers(be, g->dn, s->n_blocks);
    be.ops->free(be.ctx, g->dn_f);
}

int tfx_stage_create(const tfx_model_layout *l, int stage, tfx_backend be, int microbatches,
                     int split_backward, uint64_t seed, tfx_stage *out, tf_error *err)
{
    int rc = 0;
    float *host = NULL;
    memset(out, 0, sizeof *out);
    out->layout = l;
    out->stage = stage;
    out->be = be;
    out->has_embedding = stage == 0;
    out->has_head = stage == l->stages - 1;
    int u0 = l->stage_first_unit[stage], u1 = l->stage_first_unit[stage + 1];
    out->first_block = (u0 == 0 ? 1 : u0) - 1;
    out->n_blocks = (u1 == l->n_units ? u1 - 1 : u1) - (u0 == 0 ? 1 : u0);
    out->first_tensor = l->stage_first_tensor[stage];
    out->n_tensors = l->stage_first_tensor[stage + 1] - out->first_tensor;
    out->tokens = tfx_model_microbatch_tokens(&l->config);
    out->microbatches = microbatches;
    out->n_grad_slots = split_backward ? microbatches : 1;

    TFX_CALLOC(out->param, out->n_tensors);
    TFX_CALLOC(out->grad, out->n_tensors);
    TFX_CALLOC(out->adam_m, out->n_tensors);
    TFX_CALLOC(out->adam_v, out->n_tensors);
    TFX_CALLOC(out->adam_t, out->n_tensors);
    size_t max_count = 0;
    for (int i = 0; i < out->n_tensors; i++)
        if (l->tensors[out->first_tensor + i].count > max_count)
            max_count = l->tensors[out->first_tensor + i].count;
    TFX_CALLOC(host, max_count);
    for (int i = 0; i < out->n_tensors; i++) {
        size_t bytes = l->tensors[out->first_tensor + i].count * sizeof(float);
        TFX_DEV_ALLOC(be, out->param[i], bytes);
        TFX_DEV_ALLOC(be, out->grad[i], bytes);
        TFX_DEV_ALLOC(be, out->adam_m[i], bytes);
        TFX_DEV_ALLOC(be, out->adam_v[i], bytes);
        tfx_model_init_tensor(l, out->first_tensor + i, seed, host);
        be.ops->upload(be.ctx, out->param[i], host, bytes);
    }
    TFX_CALLOC(out->act, microbatches);
    for (int m = 0; m < microbatches; m++)
        TFX_TRY(slot_alloc(out, &out->act[m], err));
    TFX_CALLOC(out->gslot, out->n_grad_slots);
    for (int m = 0; m < out->n_grad_slots; m++)
        TFX_TRY(gslot_alloc(out, &out->gslot[m], err));
    free(host);
    return 0;
fail:
    free(host);
    tfx_stage_destroy(out);
    return rc;
}

void tfx_stage_destroy(tfx_stage *s)
{
    if (!s->be.ops)
        return;
    const tfx_backend be = s->be;
    for (int i = 0; i < s->n_tensors; i++) {
        if (s->param) be.ops->free(be.ctx, s->param[i]);
        if (s->grad) be.ops->free(be.ctx, s->grad[i]);
        if (s->adam_m) be.ops->free(be.ctx, s->adam_m[i]);
        if (s->adam_v) be.ops->free(be.ctx, s->adam_v[i]);
    }
    for (int m = 0; s->act && m < s->microbatches; m++)
        slot_free(s, &s->act[m]);
    for (int m = 0; s->gslot && m < s->n_grad_slots; m++)
        gslot_free(s, &s->gslot[m]);
    free(s->param);
    free(s->grad);
    free(s->adam_m);
    free(s->adam_v);
    free(s->adam_t);
    free(s->act);
    free(s->gslot);
    memset(s, 0, sizeof *s);
}

static tfx_gradient_slot *gslot_of(tfx_stage *s, int mb)
{
    return &s->gslot[s->n_grad_slots == 1 ? 0 : mb];
}

float *tfx_stage_input(tfx_stage *s, int mb)
{
    return s->act[mb].xs[0];
}

const float *tfx_stage_output(const tfx_stage *s, int mb)
{
    return s->act[mb].xs[s->n_blocks];
}

float *tfx_stage_grad_in(tfx_stage *s, int mb)
{
    return gslot_of(s, mb)->gs[s->n_blocks];
}

const float *tfx_stage_grad_out(const tfx_stage *s, int mb)
{
    return s->gslot[s->n_grad_slots == 1 ? 0 : mb].gs[0];
}

size_t tfx_stage_boundary_bytes(const tfx_stage *s)
{
    return (size_t)s->tokens * s->layout->config.hidden * sizeof(float);
}

/* Local tensor indices: the embedding is tensor 0 of stage 0; block k of the
 * stage starts at block_tensor(k); the final unit's three tensors are last. */
enum { T_GAIN = 0, T_FC1_W = 1, T_FC1_B = 2, T_FC2_W = 3, T_FC2_B = 4 };

static int block_tensor(const tfx_stage *s, int k)
{
    return s->has_embedding + 5 * k;
}

static int final_tensor(const tfx_stage *s)
{
    return s->has_embedding + 5 * s->n_blocks;
}

int tfx_stage_forward(tfx_stage *s, int mb, const int32_t *host_tokens,
                      const int32_t *host_targets, float loss_scale, tf_error *err)
{
    const tfx_backend_ops *o = s->be.ops;
    void *c = s->be.ctx;
    tfx_activation_slot *a = &s->act[mb];
    const int N = s->tokens, H = s->layout->config.hidden, F = s->layout->config.ffn;

    if (s->has_embedding) {
        o->upload(c, a->tokens, host_tokens, (size_t)N * sizeof(int32_t));
        o->embedding_forward(c, s->param[0], a->tokens, N, H, a->xs[0]);
    }
    for (int k = 0; k < s->n_blocks; k++) {
        float *const *p = &s->param[block_tensor(s, k)];
        o->rmsnorm_forward(c, a->xs[k], p[T_GAIN], N, H, NORM_EPS, a->nrm[k], a->rstd[k]);
        o->gemm(c, 0, 0, N, F, H, 1.0f, a->nrm[k], H, p[T_FC1_W], F, 0.0f, a->h[k], F);
        o->bias_forward(c, a->h[k], p[T_FC1_B], N, F);
        o->gelu_forward(c, a->h[k], (size_t)N * F, a->a[k], a->gelu_aux[k]);
        /* out = x + fc2(a): start from x, add the GEMM with beta = 1 */
        o->copy(c, a->xs[k + 1], a->xs[k], (size_t)N * H * sizeof(float));
        o->gemm(c, 0, 0, N, H, F, 1.0f, a->a[k], F, p[T_FC2_W], H, 1.0f, a->xs[k + 1], H);
        o->bias_forward(c, a->xs[k + 1], p[T_FC2_B], N, H);
    }
    if (s->has_head) {
        float *const *p = &s->param[final_tensor(s)];
        const float *x = a->xs[s->n_blocks];
        o->upload(c, a->targets, host_targets, (size_t)N * sizeof(int32_t));
        o->rmsnorm_forward(c, x, p[0], N, H, NORM_EPS, a->nrm_f, a->rstd_f);
        o->gemm(c, 0, 0, N, TFX_VOCAB, H, 1.0f, a->nrm_f, H, p[1], TFX_VOCAB, 0.0f,
                a->dlogits, TFX_VOCAB);
        o->bias_forward(c, a->dlogits, p[2], N, TFX_VOCAB);
        o->softmax_xent(c, a->dlogits, a->targets, N, TFX_VOCAB, loss_scale, a->dlogits,
                        &a->loss_sum);
    }
    return o->synchronize(c, err);
}

int tfx_stage_backward_input(tfx_stage *s, int mb, tf_error *err)
{
    const tfx_backend_ops *o = s->be.ops;
    void *c = s->be.ctx;
    tfx_activation_slot *a = &s->act[mb];
    tfx_gradient_slot *g = gslot_of(s, mb);
    const int N = s->tokens, H = s->layout->config.hidden, F = s->layout->config.ffn;
    const int nb = s->n_blocks;

    if (s->has_head) {
        float *const *p = &s->param[final_tensor(s)];
        /* d(norm out) = dlogits @ head^T; d(x) through the norm */
        o->gemm(c, 0, 1, N, H, TFX_VOCAB, 1.0f, a->dlogits, TFX_VOCAB, p[1], TFX_VOCAB, 0.0f,
                g->dn_f, H);
        o->rmsnorm_backward_input(c, g->dn_f, a->xs[nb], p[0], a->rstd_f, N, H, g->gs[nb]);
    }
    for (int k = nb - 1; k >= 0; k--) {
        float *const *p = &s->param[block_tensor(s, k)];
        /* dy = gs[k+1] (kept for dW2); da = dy @ W2^T into dh, then gelu' */
        o->gemm(c, 0, 1, N, F, H, 1.0f, g->gs[k + 1], H, p[T_FC2_W], H, 0.0f, g->dh[k], F);
        o->gelu_backward(c, a->h[k], a->gelu_aux[k], g->dh[k], (size_t)N * F, g->dh[k]);
        o->gemm(c, 0, 1, N, H, F, 1.0f, g->dh[k], F, p[T_FC1_W], F, 0.0f, g->dn[k], H);
        o->rmsnorm_backward_input(c, g->dn[k], a->xs[k], p[T_GAIN], a->rstd[k], N, H,
                                  g->gs[k]);
        o->add(c, g->gs[k], g->gs[k + 1], (size_t)N * H); /* residual path */
    }
    return o->synchronize(c, err);
}

int tfx_stage_backward_weight(tfx_stage *s, int mb, const unsigned char *frozen,
                              tf_error *err)
{
    const tfx_backend_ops *o = s->be.ops;
    void *c = s->be.ctx;
    tfx_activation_slot *a = &s->act[mb];
    tfx_gradient_slot *g = gslot_of(s, mb);
    const int N = s->tokens, H = s->layout->config.hidden, F = s->layout->config.ffn;
    const int nb = s->n_blocks;
#define ACTIVE(i) (!frozen || !frozen[(i)] ? 1 : (s->counts.skipped++, 0))

    if (s->has_embedding && ACTIVE(0)) {
        o->embedding_backward_acc(c, s->grad[0], a->tokens, N, H, g->gs[0]);
        s->counts.reductions++;
    }
    for (int k = 0; k < nb; k++) {
        int t = block_tensor(s, k);
        float *const *d = &s->grad[t];
        if (ACTIVE(t + T_GAIN)) {
            o->rmsnorm_backward_gain_acc(c, g->dn[k], a->xs[k], a->rstd[k], N, H, d[T_GAIN]);
            s->counts.reductions++;
        }
        if (ACTIVE(t + T_FC1_W)) {
            o->gemm(c, 1, 0, H, F, N, 1.0f, a->nrm[k], H, g->dh[k], F, 1.0f, d[T_FC1_W], F);
            s->counts.gemms++;
        }
        if (ACTIVE(t + T_FC1_B)) {
            o->bias_backward_acc(c, g->dh[k], N, F, d[T_FC1_B]);
            s->counts.reductions++;
        }
        if (ACTIVE(t + T_FC2_W)) {
            o->gemm(c, 1, 0, F, H, N, 1.0f, a->a[k], F, g->gs[k + 1], H, 1.0f, d[T_FC2_W], H);
            s->counts.gemms++;
        }
        if (ACTIVE(t + T_FC2_B)) {
            o->bias_backward_acc(c, g->gs[k + 1], N, H, d[T_FC2_B]);
            s->counts.reductions++;
        }
    }
    if (s->has_head) {
        int t = final_tensor(s);
        float *const *d = &s->grad[t];
        if (ACTIVE(t)) {
            o->rmsnorm_backward_gain_acc(c, g->dn_f, a->xs[nb], a->rstd_f, N, H, d[0]);
            s->counts.reductions++;
        }
        if (ACTIVE(t + 1)) {
            o->gemm(c, 1, 0, H, TFX_VOCAB, N, 1.0f, a->nrm_f, H, a->dlogits, TFX_VOCAB, 1.0f,
                    d[1], TFX_VOCAB);
            s->counts.gemms++;
        }
        if (ACTIVE(t + 2)) {
            o->bias_backward_acc(c, a->dlogits, N, TFX_VOCAB, d[2]);
            s->counts.reductions++;
        }
    }
#undef ACTIVE
    return o->synchronize(c, err);
}

void tfx_stage_zero_grads(tfx_stage *s)
{
    for (int i = 0; i < s->n_tensors; i++)
        s->be.ops->zero(s->be.ctx, s->grad[i],
                        s->layout->tensors[s->first_tensor + i].count * sizeof(float));
}

void tfx_adamw_config_default(tfx_adamw_config *c)
{
    c->lr = 3e-3f;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->weight_decay = 0.01f;
}

void tfx_stage_optimizer_step(tfx_stage *s, const unsigned char *update,
                              const tfx_adamw_config *c)
{
    for (int i = 0; i < s->n_tensors; i++) {
        if (update && !update[i])
            continue;
        const tfx_tensor_info *t = &s->layout->tensors[s->first_tensor + i];
        int decay = t->kind == TFX_TENSOR_WEIGHT || t->kind == TFX_TENSOR_EMBEDDING;
        s->adam_t[i]++;
        s->be.ops->adamw(s->be.ctx, s->param[i], s->grad[i], s->adam_m[i], s->adam_v[i],
                         t->count, c->lr, c->beta1, c->beta2, c->eps,
                         decay ? c->weight_decay : 0.0f, s->adam_t[i]);
    }
}
