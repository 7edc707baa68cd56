/* model.c - the byte-level GPT: layout, initialisation, and the forward /
 * split backward / optimizer of one pipeline stage. */
#include "tfx/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model_flops.h"
#include "tfx/rng.h"

#define NORM_EPS 1e-5f

/* Local tensor indices inside a block, in model order. */
enum {
    T_LN1_W, T_LN1_B, T_QKV_W, T_QKV_B, T_PROJ_W, T_PROJ_B,
    T_LN2_W, T_LN2_B, T_FC1_W, T_FC1_B, T_FC2_W, T_FC2_B
};
/* ... of the embedding unit and of the final unit. */
enum { T_TOKEN = 0, T_POSITION = 1 };
enum { T_LNF_W = 0, T_LNF_B = 1, T_HEAD = 2 };

void tfx_model_config_default(tfx_model_config *c)
{
    c->layers = 4;
    c->hidden = 192;
    c->heads = 6;
    c->ffn = 768;
    c->context = 64;
    c->microbatch_size = 8;
}

int tfx_model_default_heads(int hidden)
{
    int heads = hidden / 32 > 1 ? hidden / 32 : 1;
    while (hidden % heads != 0)
        heads--;
    return heads;
}

int tfx_model_default_ffn(int hidden)
{
    return hidden > 65536 / 4 ? 65536 : 4 * hidden;
}

int tfx_model_config_check(const tfx_model_config *c, tf_error *err)
{
    struct {
        const char *flag;
        int value;
    } f[] = {{"--layers", c->layers},   {"--hidden", c->hidden},
             {"--heads", c->heads},     {"--ffn", c->ffn},
             {"--context", c->context}, {"--microbatch-size", c->microbatch_size}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].value < 1 || f[i].value > 65536)
            return tf_fail(err, TF_EINVAL, "%s %d: must be between 1 and 65536", f[i].flag,
                           f[i].value);
    if (c->hidden % c->heads != 0)
        return tf_fail(err, TF_EINVAL, "--heads %d: --hidden %d is not a multiple of it",
                       c->heads, c->hidden);
    if ((long long)c->context * c->microbatch_size > (1 << 24))
        return tf_fail(err, TF_EINVAL,
                       "--context %d x --microbatch-size %d: more than 16777216 tokens per "
                       "microbatch",
                       c->context, c->microbatch_size);
    /* The largest buffers: attention weights (B h T^2) and QKV (3 N C). */
    long long probs = (long long)c->microbatch_size * c->heads * c->context * c->context;
    long long qkv = 3LL * c->context * c->microbatch_size * c->hidden;
    if (probs > (1LL << 31) - 1 || qkv > (1LL << 31) - 1)
        return tf_fail(err, TF_EINVAL,
                       "--context %d, --microbatch-size %d, --heads %d, --hidden %d: a "
                       "microbatch's attention buffers would exceed 2^31 floats",
                       c->context, c->microbatch_size, c->heads, c->hidden);
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

static void add_block_tensors(tfx_model_layout *l, int b)
{
    const int C = l->config.hidden, F = l->config.ffn;
    static const struct {
        const char *name;
        tfx_tensor_kind kind;
    } spec[TFX_BLOCK_TENSORS] = {
        {"ln1.weight", TFX_TENSOR_GAIN},         {"ln1.bias", TFX_TENSOR_BIAS},
        {"attn.qkv.weight", TFX_TENSOR_WEIGHT},  {"attn.qkv.bias", TFX_TENSOR_BIAS},
        {"attn.proj.weight", TFX_TENSOR_WEIGHT}, {"attn.proj.bias", TFX_TENSOR_BIAS},
        {"ln2.weight", TFX_TENSOR_GAIN},         {"ln2.bias", TFX_TENSOR_BIAS},
        {"mlp.fc1.weight", TFX_TENSOR_WEIGHT},   {"mlp.fc1.bias", TFX_TENSOR_BIAS},
        {"mlp.fc2.weight", TFX_TENSOR_WEIGHT},   {"mlp.fc2.bias", TFX_TENSOR_BIAS},
    };
    /* (rows, cols): (out, in) for weights, (1, width) for vectors. */
    const int shape[TFX_BLOCK_TENSORS][2] = {
        {1, C}, {1, C}, {3 * C, C}, {1, 3 * C}, {C, C}, {1, C},
        {1, C}, {1, C}, {F, C},     {1, F},     {C, F}, {1, C},
    };
    char name[48];
    for (int i = 0; i < TFX_BLOCK_TENSORS; i++) {
        snprintf(name, sizeof name, "block%d.%s", b, spec[i].name);
        add_tensor(l, name, spec[i].kind, shape[i][0], shape[i][1], 1 + b);
    }
}

/* Blocks as evenly as possible: stage s gets blocks [s L / S, (s+1) L / S);
 * stage 0 starts at the embedding (unit 0), the last stage ends with the
 * final unit. */
static void partition(tfx_model_layout *l)
{
    const int stages = l->stages, L = l->config.layers;
    for (int s = 0; s < stages; s++)
        l->stage_first_unit[s] = s == 0 ? 0 : 1 + (int)((long)s * L / stages);
    l->stage_first_unit[stages] = l->n_units;
    for (int s = 0, t = 0; s < stages; s++) {
        l->stage_first_tensor[s] = t;
        for (int k = 0; t < l->n_tensors && l->tensors[t].unit < l->stage_first_unit[s + 1];
             t++, k++) {
            l->tensors[t].stage = s;
            l->tensors[t].index_in_stage = k;
        }
    }
    l->stage_first_tensor[stages] = l->n_tensors;
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
    TFX_CALLOC(out->tensors, 2 + TFX_BLOCK_TENSORS * c->layers + 3);
    TFX_CALLOC(out->stage_first_unit, stages + 1);
    TFX_CALLOC(out->stage_first_tensor, stages + 1);

    const int C = c->hidden;
    add_tensor(out, "embed.token", TFX_TENSOR_EMBEDDING, TFX_VOCAB, C, 0);
    add_tensor(out, "embed.position", TFX_TENSOR_EMBEDDING, c->context, C, 0);
    for (int b = 0; b < c->layers; b++)
        add_block_tensors(out, b);
    add_tensor(out, "final.ln.weight", TFX_TENSOR_GAIN, 1, C, c->layers + 1);
    add_tensor(out, "final.ln.bias", TFX_TENSOR_BIAS, 1, C, c->layers + 1);
    add_tensor(out, "head.weight", TFX_TENSOR_WEIGHT, TFX_VOCAB, C, c->layers + 1);
    partition(out);
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

/* FLOPs of one attention GEMM pass over a microbatch: 2 T^2 head_size per
 * head and sequence, the whole T x T matrix (as the backends compute it). */
static double attention_gemm_flops(const tfx_model_config *m)
{
    return 2.0 * m->microbatch_size * m->hidden * (double)m->context * m->context;
}

int tfx_model_stage_blocks(const tfx_model_layout *l, int stage)
{
    if (stage < 0)
        return l->config.layers;
    int u0 = l->stage_first_unit[stage], u1 = l->stage_first_unit[stage + 1];
    int first = u0 < 1 ? 1 : u0, last = u1 > l->config.layers + 1 ? l->config.layers + 1 : u1;
    return last - first;
}

tfx_model_flops tfx_model_microbatch_flops(const tfx_model_layout *l, int stage)
{
    const tfx_model_config *c = &l->config;
    const double N = (double)c->context * c->microbatch_size;
    tfx_model_flops f = {0, 0, 0};
    for (int t = 0; t < l->n_tensors; t++) {
        const tfx_tensor_info *ti = &l->tensors[t];
        if ((stage < 0 || ti->stage == stage) && ti->kind == TFX_TENSOR_WEIGHT) {
            f.forward += 2.0 * N * (double)ti->count;
            f.backward_input += 2.0 * N * (double)ti->count;
            f.backward_weight += 2.0 * N * (double)ti->count;
        }
    }
    /* Attention: Q K^T and P V forward; its backward has four such GEMMs
     * and no weights. */
    const double att = attention_gemm_flops(c);
    f.forward += 2 * att * tfx_model_stage_blocks(l, stage);
    f.backward_input += 4 * att * tfx_model_stage_blocks(l, stage);
    return f;
}

/* A Linear's bias (the tensor after its weight) starts as PyTorch's
 * nn.Linear starts it, U(-1/sqrt(in), 1/sqrt(in)); a LayerNorm's at 0.
 * nanoGPT zeroes every bias, but on this toolkit's small runs the random
 * biases find the attention pattern of the built-in sources in about half
 * the steps (measured with the PyTorch model on the same data). */
static void linear_bias_init(const tfx_model_layout *l, int tensor, uint64_t seed, float *out)
{
    const tfx_tensor_info *t = &l->tensors[tensor], *w = &l->tensors[tensor - 1];
    if (tensor == 0 || w->kind != TFX_TENSOR_WEIGHT) {
        memset(out, 0, t->count * sizeof *out);
        return;
    }
    const double bound = 1.0 / sqrt((double)w->cols);
    tfx_rng r = tfx_rng_for(seed, TFX_RNG_WEIGHTS, (uint64_t)tensor, 0, 0);
    for (size_t i = 0; i < t->count; i++)
        out[i] = (float)(bound * (2.0 * tfx_rng_uniform(&r) - 1.0));
}

void tfx_model_init_tensor(const tfx_model_layout *l, int tensor, uint64_t seed,
                           float *host_out)
{
    const tfx_tensor_info *t = &l->tensors[tensor];
    double std = 0.02;
    switch (t->kind) {
    case TFX_TENSOR_GAIN:
        for (size_t i = 0; i < t->count; i++)
            host_out[i] = 1.0f;
        return;
    case TFX_TENSOR_BIAS:
        linear_bias_init(l, tensor, seed, host_out);
        return;
    case TFX_TENSOR_EMBEDDING:
        break;
    case TFX_TENSOR_WEIGHT:
        /* Residual projections shrink with depth, so the residual stream's
         * variance does not grow with L (GPT-2). */
        if (strstr(t->name, "attn.proj") || strstr(t->name, "mlp.fc2"))
            std /= sqrt(2.0 * l->config.layers);
        break;
    }
    tfx_rng r = tfx_rng_for(seed, TFX_RNG_WEIGHTS, (uint64_t)tensor, 0, 0);
    for (size_t i = 0; i < t->count; i++)
        host_out[i] = (float)(std * tfx_rng_normal(&r));
}

/* ---- stage buffers ---------------------------------------------------------- */

/* Every device allocation of a stage goes through these two, so that the
 * stage's (and its rank's) byte counts are the bytes really held. */
static void meter_add(tfx_stage *s, long long bytes)
{
    s->held_bytes += bytes;
    tfx_mem_meter *m = s->meter;
    if (!m)
        return;
    m->held += bytes;
    if (m->held > m->peak)
        m->peak = m->held;
}

static int dev_alloc(tfx_stage *s, void **ptr, size_t bytes, tf_error *err)
{
    int rc = 0;
    TFX_DEV_ALLOC(s->be, *ptr, bytes);
    meter_add(s, (long long)bytes);
fail:
    return rc;
}

static void dev_free(tfx_stage *s, void **ptr, size_t bytes)
{
    if (!*ptr)
        return;
    s->be.ops->free(s->be.ctx, *ptr);
    *ptr = NULL;
    meter_add(s, -(long long)bytes);
}

/* A list of device buffers to allocate or free together (the stage's
 * static ones). */
typedef struct buf_list {
    void **ptr[24];
    size_t bytes[24];
    int n;
} buf_list;

static void buf_add(buf_list *b, void *ptr_addr, size_t bytes)
{
    b->ptr[b->n] = (void **)ptr_addr;
    b->bytes[b->n] = bytes;
    b->n++;
}

static int buf_alloc(tfx_stage *s, const buf_list *b, tf_error *err)
{
    int rc = 0;
    for (int i = 0; i < b->n; i++)
        TFX_TRY(dev_alloc(s, b->ptr[i], b->bytes[i], err));
fail:
    return rc;
}

static void buf_free(tfx_stage *s, const buf_list *b)
{
    for (int i = 0; i < b->n; i++)
        dev_free(s, b->ptr[i], b->bytes[i]);
}

/* Sizes in floats of a microbatch's buffers. */
typedef struct sizes {
    size_t nc, nf, n, probs;
} sizes;

static sizes sizes_of(const tfx_stage *s)
{
    const tfx_model_config *c = &s->layout->config;
    const size_t N = (size_t)s->tokens;
    sizes z = {N * c->hidden, N * c->ffn, N,
               (size_t)c->microbatch_size * c->heads * c->context * c->context};
    return z;
}

static buf_list block_acts_list(tfx_stage *s, tfx_block_acts *b)
{
    const sizes z = sizes_of(s);
    const size_t f = sizeof(float);
    buf_list l = {.n = 0};
    buf_add(&l, &b->ln1, z.nc * f);
    buf_add(&l, &b->mean1, z.n * f);
    buf_add(&l, &b->rstd1, z.n * f);
    buf_add(&l, &b->qkv, 3 * z.nc * f);
    buf_add(&l, &b->probs, z.probs * f);
    buf_add(&l, &b->att, z.nc * f);
    buf_add(&l, &b->mid, z.nc * f);
    buf_add(&l, &b->ln2, z.nc * f);
    buf_add(&l, &b->mean2, z.n * f);
    buf_add(&l, &b->rstd2, z.n * f);
    buf_add(&l, &b->fc1, z.nf * f);
    buf_add(&l, &b->gelu, z.nf * f);
    buf_add(&l, &b->gelu_aux, z.nf * f);
    return l;
}

static buf_list block_grads_list(tfx_stage *s, tfx_block_grads *g)
{
    const sizes z = sizes_of(s);
    const size_t f = sizeof(float);
    buf_list l = {.n = 0};
    buf_add(&l, &g->dmid, z.nc * f);
    buf_add(&l, &g->dln2, z.nc * f);
    buf_add(&l, &g->dfc1, z.nf * f);
    buf_add(&l, &g->dqkv, 3 * z.nc * f);
    buf_add(&l, &g->dln1, z.nc * f);
    return l;
}

/* The gradient buffers one backward works in (a whole gradient slot). */
static int gslot_alloc(tfx_stage *s, tfx_gradient_slot *g, tf_error *err)
{
    int rc = 0;
    const int nb = s->n_blocks;
    const size_t nc_bytes = sizes_of(s).nc * sizeof(float);
    TFX_CALLOC(g->gs, nb + 1);
    TFX_CALLOC(g->blk, nb > 0 ? nb : 1);
    for (int k = 0; k <= nb; k++)
        TFX_TRY(dev_alloc(s, (void **)&g->gs[k], nc_bytes, err));
    for (int k = 0; k < nb; k++) {
        buf_list l = block_grads_list(s, &g->blk[k]);
        TFX_TRY(buf_alloc(s, &l, err));
    }
    if (s->has_head)
        TFX_TRY(dev_alloc(s, (void **)&g->dlnf, nc_bytes, err));
fail:
    return rc;
}

static void gslot_free(tfx_stage *s, tfx_gradient_slot *g)
{
    const size_t nc_bytes = sizes_of(s).nc * sizeof(float);
    for (int k = 0; g->blk && k < s->n_blocks; k++) {
        buf_list l = block_grads_list(s, &g->blk[k]);
        buf_free(s, &l);
    }
    for (int k = 0; g->gs && k <= s->n_blocks; k++)
        dev_free(s, (void **)&g->gs[k], nc_bytes);
    dev_free(s, (void **)&g->dlnf, nc_bytes);
    free(g->gs);
    free(g->blk);
}

/* Where a forward writes what it does not keep: one block's dW-only inputs,
 * the tokens, targets and final norm, and the output it sends. */
static buf_list spare_list(tfx_stage *s)
{
    const sizes z = sizes_of(s);
    const size_t f = sizeof(float);
    tfx_activation_slot *a = &s->spare;
    buf_list l = {.n = 0};
    if (s->n_blocks > 0) {
        buf_add(&l, &a->blk[0].ln1, z.nc * f);
        buf_add(&l, &a->blk[0].att, z.nc * f);
        buf_add(&l, &a->blk[0].ln2, z.nc * f);
        buf_add(&l, &a->blk[0].gelu, z.nf * f);
    }
    buf_add(&l, &s->spare_out, z.nc * f);
    if (s->has_embedding)
        buf_add(&l, &a->tokens, z.n * sizeof(int32_t));
    if (s->has_head) {
        buf_add(&l, &a->targets, z.n * sizeof(int32_t));
        buf_add(&l, &a->lnf, z.nc * f);
    }
    return l;
}

/* ---- per-microbatch buffers: who reads them, when they are held --------- */

/* One buffer of a microbatch: its field, its size, a stage buffer to write
 * instead when it is not kept (NULL: it is kept whenever its slot is), and
 * its readers after the action that writes it: the dX pass (`input`) and
 * the dW of up to two local tensors (-1: none). */
typedef struct tfx_mb_buf {
    void **ptr;
    void *spare;
    size_t bytes;
    unsigned char input, grad;
    int w[2];
    int block;      /* a block's own buffer (not its input): that block, else -1 */
    int probs;      /* the block's attention weights */
    void *rspare;   /* where that block's forward writes it when recomputed */
} mb_buf;

typedef struct mb_bufs {
    mb_buf *b;
    int n;
} mb_bufs;

static void put(mb_bufs *l, void *ptr_addr, void *spare, size_t bytes, int input, int w0,
                int w1)
{
    l->b[l->n++] =
        (mb_buf){(void **)ptr_addr, spare, bytes, (unsigned char)input, 0, {w0, w1}, -1, 0, NULL};
}

/* Local index of tensor `i` of block k; of the final unit's tensor `i`. */
static int block_tensor(const tfx_stage *s, int k, int i)
{
    return 2 * s->has_embedding + TFX_BLOCK_TENSORS * k + i;
}

static int final_tensor(const tfx_stage *s, int i)
{
    return 2 * s->has_embedding + TFX_BLOCK_TENSORS * s->n_blocks + i;
}

/* Who reads each of a block's buffers, in block_acts_list's order: the dX
 * pass, and the dW of one of its tensors (a T_* offset, -1 none).  Each
 * dW-only input (ln1 for the QKV weight, att for proj's, ln2 for fc1's,
 * gelu for fc2's) is the one buffer that weight alone reads, so a forward
 * whose backward freezes it need not keep it. */
static const struct {
    unsigned char input;
    signed char w;
} block_use[13] = {
    {0, T_QKV_W},  /* ln1 */      {1, T_LN1_W}, /* mean1 */ {1, T_LN1_W}, /* rstd1 */
    {1, -1},       /* qkv */      {1, -1},      /* probs */ {0, T_PROJ_W}, /* att */
    {1, T_LN2_W},  /* mid */      {0, T_FC1_W}, /* ln2 */   {1, T_LN2_W}, /* mean2 */
    {1, T_LN2_W},  /* rstd2 */    {1, -1},      /* fc1 */   {0, T_FC2_W}, /* gelu */
    {1, -1},       /* gelu_aux */
};

/* What block k's forward keeps; recomputed, it keeps none of it and
 * writes it in the stage's recomputation buffers. */
static void block_act_bufs(tfx_stage *s, int k, tfx_block_acts *b, mb_bufs *l)
{
    const buf_list own = block_acts_list(s, b);
    const buf_list sp = block_acts_list(s, &s->spare.blk[0]);
    const buf_list re = block_acts_list(s, &s->recompute_acts);
    const int t = block_tensor(s, k, 0);
    for (int i = 0; i < own.n; i++) {
        const int w = block_use[i].w < 0 ? -1 : t + block_use[i].w;
        put(l, own.ptr[i], *sp.ptr[i], own.bytes[i], block_use[i].input, w, -1);
        l->b[l->n - 1].block = k;
        l->b[l->n - 1].rspare = *re.ptr[i];
        l->b[l->n - 1].probs = own.ptr[i] == (void **)&b->probs;
    }
}

/* What a forward keeps: the block inputs (xs[0] is also where the input
 * arrives), the blocks' buffers and the edges'.  The output of a stage that
 * sends it is read by nobody later (sends are eager), and the targets only
 * by the forward's own loss. */
static void act_bufs(tfx_stage *s, tfx_activation_slot *a, mb_bufs *l)
{
    const sizes z = sizes_of(s);
    const size_t f = sizeof(float);
    const int nb = s->n_blocks;
    for (int k = 0; k < nb; k++) {
        put(l, &a->xs[k], NULL, z.nc * f, 1, block_tensor(s, k, T_LN1_W), -1);
        block_act_bufs(s, k, &a->blk[k], l);
    }
    if (!s->has_head)
        put(l, &a->xs[nb], s->spare_out, z.nc * f, 0, -1, -1);
    if (s->has_embedding)
        put(l, &a->tokens, s->spare.tokens, z.n * sizeof(int32_t), 0, T_TOKEN, -1);
    if (s->has_head) {
        const int t = final_tensor(s, 0);
        put(l, &a->xs[nb], NULL, z.nc * f, 1, t + T_LNF_W, -1);
        put(l, &a->targets, s->spare.targets, z.n * sizeof(int32_t), 0, -1, -1);
        put(l, &a->lnf, s->spare.lnf, z.nc * f, 0, t + T_HEAD, -1);
        put(l, &a->mean_f, NULL, z.n * f, 1, t + T_LNF_W, -1);
        put(l, &a->rstd_f, NULL, z.n * f, 1, t + T_LNF_W, -1);
        put(l, &a->dlogits, NULL, z.n * TFX_VOCAB * f, 1, t + T_HEAD, -1);
    }
}

/* With split backward, what I leaves for W: each gradient is read by the dW
 * of one weight and its bias (gs[0] by the embeddings'); one that no
 * unfrozen tensor reads is worked on in the stage's own gradient slot. */
static void grad_bufs(tfx_stage *s, tfx_gradient_slot *g, mb_bufs *l)
{
    const sizes z = sizes_of(s);
    const size_t f = sizeof(float);
    const tfx_gradient_slot *w = &s->work;
    const int nb = s->n_blocks, first = l->n;
    put(l, &g->gs[0], w->gs[0], z.nc * f, 0, s->has_embedding ? T_TOKEN : -1,
        s->has_embedding ? T_POSITION : -1);
    for (int k = 0; k < nb; k++) {
        const int t = block_tensor(s, k, 0);
        put(l, &g->gs[k + 1], w->gs[k + 1], z.nc * f, 0, t + T_FC2_W, t + T_FC2_B);
        put(l, &g->blk[k].dmid, w->blk[0].dmid, z.nc * f, 0, t + T_PROJ_W, t + T_PROJ_B);
        put(l, &g->blk[k].dln2, w->blk[0].dln2, z.nc * f, 0, t + T_LN2_W, t + T_LN2_B);
        put(l, &g->blk[k].dfc1, w->blk[0].dfc1, z.nf * f, 0, t + T_FC1_W, t + T_FC1_B);
        put(l, &g->blk[k].dqkv, w->blk[0].dqkv, 3 * z.nc * f, 0, t + T_QKV_W, t + T_QKV_B);
        put(l, &g->blk[k].dln1, w->blk[0].dln1, z.nc * f, 0, t + T_LN1_W, t + T_LN1_B);
    }
    if (s->has_head)
        put(l, &g->dlnf, w->dlnf, z.nc * f, 0, final_tensor(s, T_LNF_W),
            final_tensor(s, T_LNF_B));
    for (int i = first; i < l->n; i++)
        l->b[i].grad = 1;
}

/* Microbatch mb's buffers, activations then (split backward) gradients, in
 * the stage's table. */
static mb_bufs mb_list(tfx_stage *s, int mb)
{
    mb_bufs l = {s->buf_table, 0};
    act_bufs(s, &s->act[mb], &l);
    if (s->n_grad_slots > 1)
        grad_bufs(s, &s->gslot[mb], &l);
    return l;
}

/* Upper bound of mb_list's length. */
static int mb_list_capacity(const tfx_stage *s)
{
    return 20 * s->n_blocks + 12;
}

/* Whether an unfrozen tensor's dW reads b (frozen NULL: none frozen). */
static int read_by_dw(const mb_buf *b, const unsigned char *frozen)
{
    for (int j = 0; j < 2; j++)
        if (b->w[j] >= 0 && !(frozen && frozen[b->w[j]]))
            return 1;
    return 0;
}

static int read_later(const mb_buf *b, const unsigned char *frozen)
{
    return b->input || read_by_dw(b, frozen);
}

static int take(tfx_stage *s, const mb_buf *b, unsigned char *held, tf_error *err)
{
    if (*held)
        return 0;
    int rc = dev_alloc(s, b->ptr, b->bytes, err);
    *held = rc == 0;
    return rc;
}

static void drop(tfx_stage *s, const mb_buf *b, unsigned char *held)
{
    if (*held)
        dev_free(s, b->ptr, b->bytes);
    else
        *b->ptr = NULL;
    *held = 0;
}

/* Holds entry i of microbatch mb as `frozen` says: allocated when something
 * later reads it, else pointed at its spare. */
static int hold_one(tfx_stage *s, const mb_buf *b, unsigned char *held,
                    const unsigned char *frozen, tf_error *err)
{
    if (!b->spare || read_later(b, frozen))
        return take(s, b, held, err);
    *b->ptr = b->spare;
    return 0;
}

/* What the forward of microbatch a is to leave for recomputation. */
static void plan_recompute(const tfx_stage *s, tfx_activation_slot *a, int recompute)
{
    a->recompute_pending = 0;
    a->recompute_attention = s->can_recompute && recompute == TFX_RECOMPUTE_ATTENTION;
    if (s->can_recompute && recompute > 0)
        a->recompute_pending = recompute < s->n_blocks ? recompute : s->n_blocks;
}

static int recomputed(const tfx_activation_slot *a, const mb_buf *b)
{
    return b->block >= 0 && (b->block < a->recompute_pending || (b->probs && a->recompute_attention));
}

int tfx_stage_hold(tfx_stage *s, int mb, tfx_pass pass, const unsigned char *frozen,
                   int recompute, tf_error *err)
{
    int rc = 0;
    tfx_activation_slot *a = &s->act[mb];
    if (pass == TFX_PASS_F)
        plan_recompute(s, a, recompute);
    if (!s->lazy || pass == TFX_PASS_W)
        return 0;
    const int grads = pass != TFX_PASS_F && pass != TFX_PASS_R;
    const mb_bufs l = mb_list(s, mb);
    for (int i = 0; i < l.n; i++) {
        const mb_buf *b = &l.b[i];
        const int again = recomputed(a, b);
        if (b->grad != grads || (pass == TFX_PASS_R && !again))
            continue;
        if (pass == TFX_PASS_F && again)
            *b->ptr = b->rspare;
        else
            TFX_TRY(hold_one(s, b, &a->held[i], frozen, err));
    }
fail:
    return rc;
}

tfx_mask_bytes tfx_stage_mask_bytes(tfx_stage *s, const unsigned char *frozen)
{
    tfx_mask_bytes out = {0.0, 0.0, 0.0};
    const mb_bufs l = mb_list(s, 0);
    for (int i = 0; i < l.n; i++) {
        const mb_buf *b = &l.b[i];
        if (b->spare && !read_later(b, frozen)) /* hold_one points it at the spare */
            continue;
        if (b->grad)
            out.input_rise += (double)b->bytes;
        else
            out.forward += (double)b->bytes;
        if (s->n_grad_slots > 1 && read_by_dw(b, frozen)) /* what release after I keeps */
            out.input_kept += (double)b->bytes;
    }
    return out;
}

void tfx_stage_release(tfx_stage *s, int mb, tfx_pass pass, const unsigned char *frozen)
{
    if (!s->lazy || pass == TFX_PASS_F || pass == TFX_PASS_R)
        return;
    const mb_bufs l = mb_list(s, mb);
    unsigned char *held = s->act[mb].held;
    for (int i = 0; i < l.n; i++)
        if (pass != TFX_PASS_I || !read_by_dw(&l.b[i], frozen))
            drop(s, &l.b[i], &held[i]);
}

/* A microbatch's slot: its pointer arrays, and with `keep_all` every buffer
 * (a stage that is not lazy holds them from creation to destruction). */
static int slot_open(tfx_stage *s, int mb, int keep_all, tf_error *err)
{
    int rc = 0;
    tfx_activation_slot *a = &s->act[mb];
    const int nb = s->n_blocks;
    TFX_CALLOC(a->xs, nb + 1);
    TFX_CALLOC(a->blk, nb > 0 ? nb : 1);
    TFX_CALLOC(a->held, mb_list_capacity(s));
    if (s->n_grad_slots > 1) {
        TFX_CALLOC(s->gslot[mb].gs, nb + 1);
        TFX_CALLOC(s->gslot[mb].blk, nb > 0 ? nb : 1);
    }
    const mb_bufs l = mb_list(s, mb);
    for (int i = 0; keep_all && i < l.n; i++)
        TFX_TRY(take(s, &l.b[i], &a->held[i], err));
fail:
    return rc;
}

static void slot_close(tfx_stage *s, int mb)
{
    tfx_activation_slot *a = &s->act[mb];
    if (a->held) {
        const mb_bufs l = mb_list(s, mb);
        for (int i = 0; i < l.n; i++)
            drop(s, &l.b[i], &a->held[i]);
    }
    free(a->xs);
    free(a->blk);
    free(a->held);
    if (s->n_grad_slots > 1) {
        free(s->gslot[mb].gs);
        free(s->gslot[mb].blk);
    }
}

/* Parameters, gradients and AdamW state of the stage's tensors, the
 * parameters initialised from seed. */
static int params_alloc(tfx_stage *s, uint64_t seed, tf_error *err)
{
    int rc = 0;
    float *host = NULL;
    const tfx_model_layout *l = s->layout;
    TFX_CALLOC(s->param, s->n_tensors);
    TFX_CALLOC(s->grad, s->n_tensors);
    TFX_CALLOC(s->adam_m, s->n_tensors);
    TFX_CALLOC(s->adam_v, s->n_tensors);
    TFX_CALLOC(s->adam_t, s->n_tensors);
    size_t max_count = 0;
    for (int i = 0; i < s->n_tensors; i++)
        if (l->tensors[s->first_tensor + i].count > max_count)
            max_count = l->tensors[s->first_tensor + i].count;
    TFX_CALLOC(host, max_count);
    for (int i = 0; i < s->n_tensors; i++) {
        size_t bytes = l->tensors[s->first_tensor + i].count * sizeof(float);
        TFX_TRY(dev_alloc(s, (void **)&s->param[i], bytes, err));
        TFX_TRY(dev_alloc(s, (void **)&s->grad[i], bytes, err));
        TFX_TRY(dev_alloc(s, (void **)&s->adam_m[i], bytes, err));
        TFX_TRY(dev_alloc(s, (void **)&s->adam_v[i], bytes, err));
        tfx_model_init_tensor(l, s->first_tensor + i, seed, host);
        s->be.ops->upload(s->be.ctx, s->param[i], host, bytes);
    }
fail:
    free(host);
    return rc;
}

/* Buffers shared by the stage's microbatches: token positions, scratch. */
static int shared_alloc(tfx_stage *s, tf_error *err)
{
    int rc = 0;
    int32_t *host = NULL;
    const sizes z = sizes_of(s);
    TFX_TRY(dev_alloc(s, (void **)&s->scratch, z.nc * sizeof(float), err));
    TFX_TRY(dev_alloc(s, (void **)&s->att_scratch, z.probs * sizeof(float), err));
    if (s->has_embedding) {
        TFX_CALLOC(host, z.n);
        for (size_t i = 0; i < z.n; i++)
            host[i] = (int32_t)(i % (size_t)s->layout->config.context);
        TFX_TRY(dev_alloc(s, (void **)&s->positions, z.n * sizeof(int32_t), err));
        s->be.ops->upload(s->be.ctx, s->positions, host, z.n * sizeof(int32_t));
    }
fail:
    free(host);
    return rc;
}

/* Everything a stage holds all step: parameters, gradients, optimizer
 * state, scratch, the spares and the working gradient slot; counted in
 * static_bytes, not in the meter. */
static int static_alloc(tfx_stage *s, uint64_t seed, tf_error *err)
{
    int rc = 0;
    TFX_TRY(params_alloc(s, seed, err));
    TFX_TRY(shared_alloc(s, err));
    TFX_CALLOC(s->spare.blk, 1);
    buf_list spares = spare_list(s);
    TFX_TRY(buf_alloc(s, &spares, err));
    TFX_TRY(gslot_alloc(s, &s->work, err));
    if (s->can_recompute) {
        buf_list rl = block_acts_list(s, &s->recompute_acts);
        TFX_TRY(buf_alloc(s, &rl, err));
    }
fail:
    s->static_bytes = s->held_bytes;
    s->held_bytes = 0;
    return rc;
}

static void static_free(tfx_stage *s)
{
    s->held_bytes = s->static_bytes;
    for (int i = 0; i < s->n_tensors; i++) {
        size_t bytes = s->layout->tensors[s->first_tensor + i].count * sizeof(float);
        if (s->param) dev_free(s, (void **)&s->param[i], bytes);
        if (s->grad) dev_free(s, (void **)&s->grad[i], bytes);
        if (s->adam_m) dev_free(s, (void **)&s->adam_m[i], bytes);
        if (s->adam_v) dev_free(s, (void **)&s->adam_v[i], bytes);
    }
    const sizes z = sizes_of(s);
    dev_free(s, (void **)&s->positions, z.n * sizeof(int32_t));
    dev_free(s, (void **)&s->scratch, z.nc * sizeof(float));
    dev_free(s, (void **)&s->att_scratch, z.probs * sizeof(float));
    if (s->spare.blk) {
        buf_list spares = spare_list(s);
        buf_free(s, &spares);
    }
    gslot_free(s, &s->work);
    if (s->can_recompute) {
        buf_list rl = block_acts_list(s, &s->recompute_acts);
        buf_free(s, &rl);
    }
    free(s->spare.blk);
}

int tfx_stage_create(const tfx_stage_spec *spec, tfx_stage *out, tf_error *err)
{
    const tfx_model_layout *l = spec->layout;
    const int stage = spec->stage, microbatches = spec->microbatches;
    int rc = 0;
    memset(out, 0, sizeof *out);
    out->layout = l;
    out->stage = stage;
    out->be = spec->backend;
    out->has_embedding = stage == 0;
    out->has_head = stage == l->stages - 1;
    int u0 = l->stage_first_unit[stage], u1 = l->stage_first_unit[stage + 1];
    out->first_block = (u0 == 0 ? 1 : u0) - 1;
    out->n_blocks = (u1 == l->n_units ? u1 - 1 : u1) - (u0 == 0 ? 1 : u0);
    out->first_tensor = l->stage_first_tensor[stage];
    out->n_tensors = l->stage_first_tensor[stage + 1] - out->first_tensor;
    out->tokens = tfx_model_microbatch_tokens(&l->config);
    out->microbatches = microbatches;
    out->n_grad_slots = spec->split_backward ? microbatches : 0;
    out->lazy = spec->lazy;
    out->can_recompute = spec->recompute;

    TFX_TRY(static_alloc(out, spec->seed, err));
    out->meter = spec->meter;
    TFX_CALLOC(out->buf_table, mb_list_capacity(out));
    TFX_CALLOC(out->act, microbatches);
    TFX_CALLOC(out->gslot, out->n_grad_slots);
    for (int m = 0; m < microbatches; m++)
        TFX_TRY(slot_open(out, m, !spec->lazy, err));
    return 0;
fail:
    tfx_stage_destroy(out);
    return rc;
}

void tfx_stage_destroy(tfx_stage *s)
{
    if (!s->be.ops)
        return;
    for (int m = 0; s->act && m < s->microbatches; m++)
        slot_close(s, m);
    s->meter = NULL;
    static_free(s);
    free(s->param);
    free(s->grad);
    free(s->adam_m);
    free(s->adam_v);
    free(s->adam_t);
    free(s->act);
    free(s->gslot);
    free(s->buf_table);
    memset(s, 0, sizeof *s);
}

static tfx_gradient_slot *gslot_of(tfx_stage *s, int mb)
{
    return (tfx_gradient_slot *)tfx_stage_gradient_slot(s, mb);
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

const tfx_gradient_slot *tfx_stage_gradient_slot(const tfx_stage *s, int mb)
{
    return s->n_grad_slots ? &s->gslot[mb] : &s->work;
}

const float *tfx_stage_grad_out(const tfx_stage *s, int mb)
{
    return tfx_stage_gradient_slot(s, mb)->gs[0];
}

size_t tfx_stage_boundary_bytes(const tfx_stage *s)
{
    return (size_t)s->tokens * s->layout->config.hidden * sizeof(float);
}

/* ---- forward ---------------------------------------------------------------- */

/* y (rows x out) = x (rows x in) W^T + beta y, W stored (out, in). */
static void linear(tfx_stage *s, int rows, int out, int in, const float *x, const float *w,
                   float beta, float *y)
{
    s->flops += 2.0 * rows * out * in;
    s->be.ops->gemm(s->be.ctx, 0, 1, rows, out, in, 1.0f, x, in, w, in, beta, y, out);
}

/* dx (rows x in) = dy (rows x out) W. */
static void linear_dx(tfx_stage *s, int rows, int out, int in, const float *dy, const float *w,
                      float *dx)
{
    s->flops += 2.0 * rows * out * in;
    s->be.ops->gemm(s->be.ctx, 0, 0, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

/* dW (out x in) += dy^T x. */
static void linear_dw(tfx_stage *s, int rows, int out, int in, const float *dy, const float *x,
                      float *dw)
{
    s->flops += 2.0 * rows * out * in;
    s->be.ops->gemm(s->be.ctx, 1, 0, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dw, in);
}

static void embed_forward(tfx_stage *s, tfx_activation_slot *a, const int32_t *host_tokens)
{
    const tfx_backend_ops *o = s->be.ops;
    const int N = s->tokens, C = s->layout->config.hidden;
    o->upload(s->be.ctx, a->tokens, host_tokens, (size_t)N * sizeof(int32_t));
    o->embedding_forward(s->be.ctx, s->param[T_TOKEN], a->tokens, N, C, a->xs[0]);
    o->embedding_forward(s->be.ctx, s->param[T_POSITION], s->positions, N, C, s->scratch);
    o->add(s->be.ctx, a->xs[0], s->scratch, (size_t)N * C);
}

static void block_forward(tfx_stage *s, int k, const float *x, tfx_block_acts *b, float *y)
{
    const tfx_backend_ops *o = s->be.ops;
    void *c = s->be.ctx;
    const tfx_model_config *m = &s->layout->config;
    const int N = s->tokens, C = m->hidden, F = m->ffn;
    float *const *p = &s->param[block_tensor(s, k, 0)];

    o->layernorm_forward(c, x, p[T_LN1_W], p[T_LN1_B], N, C, NORM_EPS, b->ln1, b->mean1,
                         b->rstd1);
    linear(s, N, 3 * C, C, b->ln1, p[T_QKV_W], 0.0f, b->qkv);
    o->bias_forward(c, b->qkv, p[T_QKV_B], N, 3 * C);
    o->attention_forward(c, b->qkv, m->microbatch_size, m->context, m->heads, C / m->heads,
                         b->att, b->probs);
    s->flops += 2 * attention_gemm_flops(m);
    /* mid = x + proj(att): start from x, add the GEMM with beta = 1 */
    o->copy(c, b->mid, x, (size_t)N * C * sizeof(float));
    linear(s, N, C, C, b->att, p[T_PROJ_W], 1.0f, b->mid);
    o->bias_forward(c, b->mid, p[T_PROJ_B], N, C);

    o->layernorm_forward(c, b->mid, p[T_LN2_W], p[T_LN2_B], N, C, NORM_EPS, b->ln2, b->mean2,
                         b->rstd2);
    linear(s, N, F, C, b->ln2, p[T_FC1_W], 0.0f, b->fc1);
    o->bias_forward(c, b->fc1, p[T_FC1_B], N, F);
    o->gelu_forward(c, b->fc1, (size_t)N * F, b->gelu, b->gelu_aux);
    o->copy(c, y, b->mid, (size_t)N * C * sizeof(float));
    linear(s, N, C, F, b->gelu, p[T_FC2_W], 1.0f, y);
    o->bias_forward(c, y, p[T_FC2_B], N, C);
}

static void head_forward(tfx_stage *s, tfx_activation_slot *a, const int32_t *host_targets,
                         float loss_scale)
{
    const tfx_backend_ops *o = s->be.ops;
    void *c = s->be.ctx;
    const int N = s->tokens, C = s->layout->config.hidden;
    float *const *p = &s->param[final_tensor(s, 0)];
    o->upload(c, a->targets, host_targets, (size_t)N * sizeof(int32_t));
    o->layernorm_forward(c, a->xs[s->n_blocks], p[T_LNF_W], p[T_LNF_B], N, C, NORM_EPS,
                         a->lnf, a->mean_f, a->rstd_f);
    linear(s, N, TFX_VOCAB, C, a->lnf, p[T_HEAD], 0.0f, a->dlogits);
    o->softmax_xent(c, a->dlogits, a->targets, N, TFX_VOCAB, loss_scale, a->dlogits,
                    &a->loss_sum);
}

int tfx_stage_forward(tfx_stage *s, int mb, const int32_t *host_tokens,
                      const int32_t *host_targets, float loss_scale, tf_error *err)
{
    tfx_activation_slot *a = &s->act[mb];
    if (s->has_embedding)
        embed_forward(s, a, host_tokens);
    for (int k = 0; k < s->n_blocks; k++)
        block_forward(s, k, a->xs[k], &a->blk[k], a->xs[k + 1]);
    if (s->has_head)
        head_forward(s, a, host_targets, loss_scale);
    return s->be.ops->synchronize(s->be.ctx, err);
}

/* Attention's forward again, from the QKV the block kept: its weights
 * (and its output, the same values once more). */
static void attention_again(tfx_stage *s, tfx_block_acts *b)
{
    const tfx_model_config *m = &s->layout->config;
    s->be.ops->attention_forward(s->be.ctx, b->qkv, m->microbatch_size, m->context, m->heads,
                                 m->hidden / m->heads, b->att, b->probs);
    s->flops += 2 * attention_gemm_flops(m);
}

int tfx_stage_recompute(tfx_stage *s, int mb, tf_error *err)
{
    tfx_activation_slot *a = &s->act[mb];
    if (!tfx_stage_recompute_pending(s, mb))
        return 0;
    for (int k = 0; k < a->recompute_pending; k++)
        block_forward(s, k, a->xs[k], &a->blk[k], a->xs[k + 1]);
    for (int k = 0; a->recompute_attention && k < s->n_blocks; k++)
        attention_again(s, &a->blk[k]);
    a->recompute_pending = a->recompute_attention = 0;
    return s->be.ops->synchronize(s->be.ctx, err);
}

/* ---- backward: dX ----------------------------------------------------------- */

/* Given dy, the gradient of the block's output, computes dx and keeps the
 * gradients the block's dW needs in g.  dx may not alias dy. */
static void block_backward_input(tfx_stage *s, int k, const float *x, const tfx_block_acts *b,
                                 const float *dy, tfx_block_grads *g, float *dx)
{
    const tfx_backend_ops *o = s->be.ops;
    void *c = s->be.ctx;
    const tfx_model_config *m = &s->layout->config;
    const int N = s->tokens, C = m->hidden, F = m->ffn;
    float *const *p = &s->param[block_tensor(s, k, 0)];

    /* MLP: y = mid + fc2(gelu(fc1(ln2(mid)))) */
    linear_dx(s, N, C, F, dy, p[T_FC2_W], g->dfc1);
    o->gelu_backward(c, b->fc1, b->gelu_aux, g->dfc1, (size_t)N * F, g->dfc1);
    linear_dx(s, N, F, C, g->dfc1, p[T_FC1_W], g->dln2);
    o->layernorm_backward_input(c, g->dln2, b->mid, p[T_LN2_W], b->mean2, b->rstd2, N, C,
                                g->dmid);
    o->add(c, g->dmid, dy, (size_t)N * C);

    /* attention: mid = x + proj(attention(qkv(ln1(x)))) */
    float *datt = s->scratch;
    linear_dx(s, N, C, C, g->dmid, p[T_PROJ_W], datt);
    o->attention_backward(c, datt, b->qkv, b->probs, m->microbatch_size, m->context, m->heads,
                          C / m->heads, s->att_scratch, g->dqkv);
    s->flops += 4 * attention_gemm_flops(m);
    linear_dx(s, N, 3 * C, C, g->dqkv, p[T_QKV_W], g->dln1);
    o->layernorm_backward_input(c, g->dln1, x, p[T_LN1_W], b->mean1, b->rstd1, N, C, dx);
    o->add(c, dx, g->dmid, (size_t)N * C);
}

int tfx_stage_backward_input(tfx_stage *s, int mb, tf_error *err)
{
    const tfx_backend_ops *o = s->be.ops;
    void *c = s->be.ctx;
    tfx_activation_slot *a = &s->act[mb];
    tfx_gradient_slot *g = gslot_of(s, mb);
    const int N = s->tokens, C = s->layout->config.hidden, nb = s->n_blocks;

    if (s->has_head) {
        float *const *p = &s->param[final_tensor(s, 0)];
        linear_dx(s, N, TFX_VOCAB, C, a->dlogits, p[T_HEAD], g->dlnf);
        o->layernorm_backward_input(c, g->dlnf, a->xs[nb], p[T_LNF_W], a->mean_f, a->rstd_f, N,
                                    C, g->gs[nb]);
    }
    for (int k = nb - 1; k >= 0; k--)
        block_backward_input(s, k, a->xs[k], &a->blk[k], g->gs[k + 1], &g->blk[k], g->gs[k]);
    return o->synchronize(c, err);
}

/* ---- backward: dW ----------------------------------------------------------- */

/* Whether local tensor i is to get its gradient; counts a skip. */
static int active(tfx_stage *s, const unsigned char *frozen, int i)
{
    if (!frozen || !frozen[i])
        return 1;
    s->counts.skipped++;
    return 0;
}

/* dW of a Linear (weight local tensor w, bias w + 1 unless has_bias is 0). */
static void linear_grads(tfx_stage *s, const unsigned char *frozen, int w, int has_bias,
                         int out, int in, const float *dy, const float *x)
{
    const int N = s->tokens;
    if (active(s, frozen, w)) {
        linear_dw(s, N, out, in, dy, x, s->grad[w]);
        s->counts.gemms++;
    }
    if (has_bias && active(s, frozen, w + 1)) {
        s->be.ops->bias_backward_acc(s->be.ctx, dy, N, out, s->grad[w + 1]);
        s->counts.reductions++;
    }
}

/* dW of a LayerNorm (weight local tensor w, bias w + 1). */
static void norm_grads(tfx_stage *s, const unsigned char *frozen, int w, const float *dy,
                       const float *x, const float *mean, const float *rstd)
{
    const int N = s->tokens, C = s->layout->config.hidden;
    if (active(s, frozen, w)) {
        s->be.ops->layernorm_backward_weight_acc(s->be.ctx, dy, x, mean, rstd, N, C,
                                                 s->grad[w]);
        s->counts.reductions++;
    }
    if (active(s, frozen, w + 1)) {
        s->be.ops->bias_backward_acc(s->be.ctx, dy, N, C, s->grad[w + 1]);
        s->counts.reductions++;
    }
}

static void block_backward_weight(tfx_stage *s, int k, const unsigned char *frozen,
                                  const float *x, const tfx_block_acts *b, const float *dy,
                                  const tfx_block_grads *g)
{
    const int C = s->layout->config.hidden, F = s->layout->config.ffn;
    const int t = block_tensor(s, k, 0);
    norm_grads(s, frozen, t + T_LN1_W, g->dln1, x, b->mean1, b->rstd1);
    linear_grads(s, frozen, t + T_QKV_W, 1, 3 * C, C, g->dqkv, b->ln1);
    linear_grads(s, frozen, t + T_PROJ_W, 1, C, C, g->dmid, b->att);
    norm_grads(s, frozen, t + T_LN2_W, g->dln2, b->mid, b->mean2, b->rstd2);
    linear_grads(s, frozen, t + T_FC1_W, 1, F, C, g->dfc1, b->ln2);
    linear_grads(s, frozen, t + T_FC2_W, 1, C, F, dy, b->gelu);
}

int tfx_stage_backward_weight(tfx_stage *s, int mb, const unsigned char *frozen,
                              tf_error *err)
{
    const tfx_backend_ops *o = s->be.ops;
    void *c = s->be.ctx;
    tfx_activation_slot *a = &s->act[mb];
    tfx_gradient_slot *g = gslot_of(s, mb);
    const int N = s->tokens, C = s->layout->config.hidden, nb = s->n_blocks;

    if (s->has_embedding) {
        if (active(s, frozen, T_TOKEN)) {
            o->embedding_backward_acc(c, s->grad[T_TOKEN], a->tokens, N, C, g->gs[0]);
            s->counts.reductions++;
        }
        if (active(s, frozen, T_POSITION)) {
            o->embedding_backward_acc(c, s->grad[T_POSITION], s->positions, N, C, g->gs[0]);
            s->counts.reductions++;
        }
    }
    for (int k = 0; k < nb; k++)
        block_backward_weight(s, k, frozen, a->xs[k], &a->blk[k], g->gs[k + 1], &g->blk[k]);
    if (s->has_head) {
        const int t = final_tensor(s, 0);
        norm_grads(s, frozen, t + T_LNF_W, g->dlnf, a->xs[nb], a->mean_f, a->rstd_f);
        linear_grads(s, frozen, t + T_HEAD, 0, TFX_VOCAB, C, a->dlogits, a->lnf);
    }
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
