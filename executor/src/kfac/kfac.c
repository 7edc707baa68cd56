/* kfac.c - K-FAC factor statistics run in a rank's waits (see kfac.h and
 * tfx/kfac.h). */
#include "kfac.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tf/util.h"

/* Spans kept per rank and step for the log; more are counted, not kept. */
#define MAX_SPANS 256
/* An item runs in chunks of factor rows of about this many FLOPs (about a
 * millisecond of one CPU core), the readiness of the awaited message checked
 * between chunks: a message that arrives mid-item then waits for one chunk,
 * not for the whole item (a 768 x 768 G over 512 rows is 600 MFLOP). */
#define CHUNK_FLOPS 16e6
/* Chunks closer than this (ms) are one span of the log (which then
 * includes the gap). */
#define SPAN_JOIN_MS 0.05

enum { L_QKV, L_PROJ, L_FC1, L_FC2, L_HEAD, LAYERS_PER_BLOCK = 4 };

typedef struct layer {
    int block;                /* local block, or -1 for the head */
    int kind;                 /* L_* */
    int in, out, bias;
    float *factor[2];         /* A ((in+bias)^2) and G (out^2), device memory */
    long updates[2];          /* microbatches folded into each */
} layer;

typedef struct stage_stats {
    tfx_stage *st;            /* NULL: not in this process */
    int n_layers;
    layer *layers;
    int rows;                 /* a microbatch's rows (tokens) the factors use: the first */
    float *ones;              /* `rows` ones: the bias column of A */
    /* Buffers of copies no longer needed, kept for the next copy of the
     * same size: allocating on the step's path costs more than the copy
     * (fresh pages on the CPU, a synchronising cudaMalloc on a GPU). */
    struct spare {
        float *buf;
        size_t bytes;
    } *spares;
    int n_spares, cap_spares;
} stage_stats;

typedef struct item {
    int stage, mb, layer;
    tfx_kfac_factor f;
    const float *src;         /* N x cols: its copy once queued */
    float *copy;              /* owned: the input, copied when queued */
    size_t bytes;             /* of copy */
    int cols;
    int row;                  /* factor rows done (it runs in chunks of rows) */
    long origin;              /* training step that queued it */
    int closes;               /* the last item its step queued */
} item;

typedef struct rank_queue {
    item *ring;
    int cap, head, count;
    long step;                /* training steps begun */
    int training;
    double t0;
    long queued;              /* items queued in this step */
    /* Figures since the last training step's log line. */
    long ran, chunks, dropped, copied, spans_cut;
    double ms;
    double late_ms;           /* chunks during which an awaited message arrived */
    double last_chunk_ms;
    int n_spans;
    double spans[MAX_SPANS][2];
    long refresh;             /* steps the set that completed last took; 0: none */
} rank_queue;

struct tfx_kfac {
    double decay;
    stage_stats *stages;
    int n_stages, ranks;
    const int *stage_rank;    /* borrowed from the schedule */
    rank_queue *queues;       /* ranks */
    FILE *log;
    const char *log_path;
};

void tfx_kfac_config_default(tfx_kfac_config *c)
{
    memset(c, 0, sizeof *c);
    c->decay = 0.95;
    c->sample = 1.0;
}

/* ---- layers ----------------------------------------------------------------- */

static void describe_layers(stage_stats *ss)
{
    const tfx_model_config *m = &ss->st->layout->config;
    const int C = m->hidden, F = m->ffn;
    const int shape[LAYERS_PER_BLOCK][2] = {{C, 3 * C}, {C, C}, {C, F}, {F, C}};
    int n = 0;
    for (int b = 0; b < ss->st->n_blocks; b++)
        for (int j = 0; j < LAYERS_PER_BLOCK; j++)
            ss->layers[n++] = (layer){.block = b, .kind = j, .in = shape[j][0],
                                      .out = shape[j][1], .bias = 1};
    if (ss->st->has_head)
        ss->layers[n++] = (layer){.block = -1, .kind = L_HEAD, .in = C, .out = TFX_VOCAB};
}

static int factor_dim(const layer *l, tfx_kfac_factor f)
{
    return f == TFX_KFAC_A ? l->in + l->bias : l->out;
}

static int stage_stats_init(stage_stats *ss, tfx_stage *st, double sample, tf_error *err)
{
    int rc = 0;
    float *host = NULL;
    ss->st = st;
    ss->rows = (int)(sample * st->tokens + 0.5);
    ss->rows = ss->rows < 1 ? 1 : ss->rows;
    ss->n_layers = LAYERS_PER_BLOCK * st->n_blocks + st->has_head;
    TFX_CALLOC(ss->layers, ss->n_layers);
    describe_layers(ss);
    for (int i = 0; i < ss->n_layers; i++)
        for (int f = 0; f < 2; f++) {
            size_t d = (size_t)factor_dim(&ss->layers[i], (tfx_kfac_factor)f);
            TFX_DEV_ALLOC(st->be, ss->layers[i].factor[f], d * d * sizeof(float));
        }
    TFX_CALLOC(host, ss->rows);
    for (int i = 0; i < ss->rows; i++)
        host[i] = 1.0f;
    TFX_DEV_ALLOC(st->be, ss->ones, (size_t)ss->rows * sizeof(float));
    st->be.ops->upload(st->be.ctx, ss->ones, host, (size_t)ss->rows * sizeof(float));
fail:
    free(host);
    return rc;
}

static void stage_stats_free(stage_stats *ss)
{
    if (!ss->st)
        return;
    const tfx_backend be = ss->st->be;
    for (int i = 0; i < ss->n_spares; i++)
        be.ops->free(be.ctx, ss->spares[i].buf);
    free(ss->spares);
    for (int i = 0; ss->layers && i < ss->n_layers; i++) {
        be.ops->free(be.ctx, ss->layers[i].factor[0]);
        be.ops->free(be.ctx, ss->layers[i].factor[1]);
    }
    be.ops->free(be.ctx, ss->ones);
    free(ss->layers);
}

/* What item (stage, layer, f, mb) reads: *cols wide, N rows. */
static const float *item_source(const tfx_stage *st, const layer *l, tfx_kfac_factor f,
                                int mb, int *cols)
{
    const tfx_activation_slot *a = &st->act[mb];
    const tfx_gradient_slot *g = tfx_stage_gradient_slot(st, mb);
    *cols = f == TFX_KFAC_A ? l->in : l->out;
    if (l->kind == L_HEAD)
        return f == TFX_KFAC_A ? a->lnf : a->dlogits; /* dlogits: the logits' gradient */
    const tfx_block_acts *b = &a->blk[l->block];
    const tfx_block_grads *d = &g->blk[l->block];
    switch (l->kind) {
    case L_QKV: return f == TFX_KFAC_A ? b->ln1 : d->dqkv;
    case L_PROJ: return f == TFX_KFAC_A ? b->att : d->dmid;
    case L_FC1: return f == TFX_KFAC_A ? b->ln2 : d->dfc1;
    default: return f == TFX_KFAC_A ? b->gelu : g->gs[l->block + 1];
    }
}

/* ---- creation --------------------------------------------------------------- */

/* Items a step queues on `rank`: two per layer and microbatch. */
static long items_per_step(const tfx_kfac *k, int rank)
{
    long n = 0;
    for (int s = 0; s < k->n_stages; s++)
        if (k->stages[s].st && k->stage_rank[s] == rank)
            n += 2L * k->stages[s].n_layers * k->stages[s].st->microbatches;
    return n;
}

static int check_config(const tfx_kfac_config *c, tf_error *err)
{
    if (!(c->decay >= 0.0 && c->decay < 1.0))
        return tf_fail(err, TF_EINVAL, "--kfac-decay %g: must be in [0, 1)", c->decay);
    if (!(c->sample > 0.0 && c->sample <= 1.0))
        return tf_fail(err, TF_EINVAL, "--kfac-sample %g: must be in (0, 1]", c->sample);
    if (c->queue < 0)
        return tf_fail(err, TF_EINVAL, "--kfac-queue %d: must be 0 (automatic) or more",
                       c->queue);
    return 0;
}

static int queues_init(tfx_kfac *k, int queue, tf_error *err)
{
    int rc = 0;
    TFX_CALLOC(k->queues, k->ranks);
    for (int r = 0; r < k->ranks; r++) {
        long cap = queue > 0 ? queue : 4 * items_per_step(k, r);
        k->queues[r].cap = (int)(cap > 0 ? cap : 1);
        TFX_CALLOC(k->queues[r].ring, k->queues[r].cap);
    }
fail:
    return rc;
}

int tfx_kfac_create(const tfx_kfac_config *c, tfx_stage *stages, int n_stages,
                    const int *stage_rank, int ranks, tfx_kfac **out, tf_error *err)
{
    int rc = 0;
    tfx_kfac *k = NULL;
    *out = NULL;
    TFX_TRY(check_config(c, err));
    TFX_CALLOC(k, 1);
    k->decay = c->decay;
    k->n_stages = n_stages;
    k->ranks = ranks;
    k->stage_rank = stage_rank;
    TFX_CALLOC(k->stages, n_stages);
    for (int s = 0; s < n_stages; s++)
        if (stages[s].be.ops)
            TFX_TRY(stage_stats_init(&k->stages[s], &stages[s], c->sample, err));
    TFX_TRY(queues_init(k, c->queue, err));
    if (c->log_path) {
        k->log_path = c->log_path;
        k->log = fopen(c->log_path, "w");
        if (!k->log)
            TFX_TRY(tf_fail(err, TF_EIO, "--kfac-log %s: %s", c->log_path, strerror(errno)));
    }
    *out = k;
    return 0;
fail:
    tfx_kfac_destroy(k);
    return rc;
}

/* A buffer of `bytes` for a copy: a spare one of that size, or a new one.
 * Returns 0 or TF_ENOMEM. */
static int copy_buffer(stage_stats *ss, size_t bytes, float **out, tf_error *err)
{
    int rc = 0;
    for (int i = ss->n_spares - 1; i >= 0; i--)
        if (ss->spares[i].bytes == bytes) {
            *out = ss->spares[i].buf;
            ss->spares[i] = ss->spares[--ss->n_spares];
            return 0;
        }
    TFX_DEV_ALLOC(ss->st->be, *out, bytes);
fail:
    return rc;
}

/* Gives an item's copy back to its stage's spares (freed when they
 * cannot grow). */
static void item_release(tfx_kfac *k, item *it)
{
    stage_stats *ss = &k->stages[it->stage];
    if (!it->copy)
        return;
    if (ss->n_spares == ss->cap_spares) {
        int cap = ss->cap_spares ? 2 * ss->cap_spares : 16;
        struct spare *grown = realloc(ss->spares, (size_t)cap * sizeof *grown);
        if (grown) {
            ss->spares = grown;
            ss->cap_spares = cap;
        }
    }
    if (ss->n_spares < ss->cap_spares)
        ss->spares[ss->n_spares++] = (struct spare){it->copy, it->bytes};
    else
        ss->st->be.ops->free(ss->st->be.ctx, it->copy);
    it->copy = NULL;
}

void tfx_kfac_destroy(tfx_kfac *k)
{
    if (!k)
        return;
    for (int r = 0; k->queues && r < k->ranks; r++) {
        rank_queue *q = &k->queues[r];
        for (int i = 0; i < q->count; i++)
            item_release(k, &q->ring[(q->head + i) % q->cap]);
        free(q->ring);
    }
    for (int s = 0; k->stages && s < k->n_stages; s++)
        stage_stats_free(&k->stages[s]);
    if (k->log)
        fclose(k->log);
    free(k->queues);
    free(k->stages);
    free(k);
}

/* ---- the queue -------------------------------------------------------------- */

/* The set of items of step `origin` is complete (run or dropped) now. */
static void set_complete(rank_queue *q, long origin)
{
    q->refresh = q->step - origin + 1;
}

/* Removes the oldest item; returns it (the caller releases it). */
static item pop_oldest(rank_queue *q)
{
    item it = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    return it;
}

/* Drops the oldest item not started: one that is half done would leave its
 * factor with some rows updated and others not. */
static void drop_oldest(tfx_kfac *k, rank_queue *q)
{
    if (q->ring[q->head].row > 0 && q->count > 1) {
        item started = q->ring[q->head];
        q->ring[q->head] = q->ring[(q->head + 1) % q->cap];
        q->ring[(q->head + 1) % q->cap] = started;
    }
    item it = pop_oldest(q);
    q->dropped++;
    if (it.closes)
        set_complete(q, it.origin);
    item_release(k, &it);
}

/* Queues a copy of *it; returns where it is kept, or NULL when the new
 * item was the one dropped. */
static item *push(tfx_kfac *k, rank_queue *q, const item *it)
{
    q->queued++;
    if (q->count == q->cap && q->count == 1 && q->ring[q->head].row > 0) {
        q->dropped++; /* a queue of one, half way through its item: the new one goes */
        return NULL;
    }
    if (q->count == q->cap)
        drop_oldest(k, q);
    item *kept = &q->ring[(q->head + q->count) % q->cap];
    *kept = *it;
    q->count++;
    return kept;
}

/* Makes `it` read a copy of its input from now on.  Returns 0 or
 * TF_ENOMEM. */
static int copy_out(tfx_kfac *k, rank_queue *q, item *it, tf_error *err)
{
    stage_stats *ss = &k->stages[it->stage];
    const size_t bytes = (size_t)ss->rows * it->cols * sizeof(float);
    int rc = copy_buffer(ss, bytes, &it->copy, err);
    if (rc)
        return rc;
    it->bytes = bytes;
    ss->st->be.ops->copy(ss->st->be.ctx, it->copy, it->src, bytes);
    it->src = it->copy;
    q->copied++;
    return 0;
}

int tfx_kfac_after(tfx_kfac *k, int rank, tf_action_type type, int stage, int mb,
                   tf_error *err)
{
    rank_queue *q = &k->queues[rank];
    const stage_stats *ss = &k->stages[stage];
    if (!q->training || type == TF_ACT_W || type == TF_ACT_R)
        return 0;
    const tfx_kfac_factor f = type == TF_ACT_F ? TFX_KFAC_A : TFX_KFAC_G;
    for (int i = 0; i < ss->n_layers; i++) {
        item it = {.stage = stage, .mb = mb, .layer = i, .f = f, .origin = q->step};
        it.src = item_source(ss->st, &ss->layers[i], f, mb, &it.cols);
        item *kept = push(k, q, &it);
        /* The runtime's (lazy) stages free or reuse a microbatch's buffers
         * at the action's end (model.h), and on any stage a later action
         * rewrites the slot: the item cannot read them later. */
        int rc = kept ? copy_out(k, q, kept, err) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- running an item -------------------------------------------------------- */

/* Rows [r0, r1) of A = beta A + alpha [x 1]^T [x 1], the ones column only
 * with a bias (then row `in` is the bias row, its last entry the corner). */
static void update_a_rows(const stage_stats *ss, const layer *l, const float *x, int r0,
                          int r1, float alpha, float beta)
{
    const tfx_backend be = ss->st->be;
    const int N = ss->rows, in = l->in, D = in + l->bias;
    const int top = r1 < in ? r1 : in;
    float *A = l->factor[TFX_KFAC_A];
    if (top > r0) {
        be.ops->gemm(be.ctx, 1, 0, top - r0, in, N, alpha, x + r0, in, x, in, beta,
                     A + (size_t)r0 * D, D);
        if (l->bias)
            be.ops->gemm(be.ctx, 1, 0, top - r0, 1, N, alpha, x + r0, in, ss->ones, 1, beta,
                         A + (size_t)r0 * D + in, D);
    }
    if (r1 > in) {
        be.ops->gemm(be.ctx, 1, 0, 1, in, N, alpha, ss->ones, 1, x, in, beta,
                     A + (size_t)in * D, D);
        be.ops->gemm(be.ctx, 1, 0, 1, 1, N, alpha, ss->ones, 1, ss->ones, 1, beta,
                     A + (size_t)in * D + in, D);
    }
}

/* Rows [r0, r1) of G = beta G + alpha dY^T dY. */
static void update_g_rows(const stage_stats *ss, const layer *l, const float *dy, int r0,
                          int r1, float alpha, float beta)
{
    const tfx_backend be = ss->st->be;
    const int N = ss->rows, out = l->out;
    be.ops->gemm(be.ctx, 1, 0, r1 - r0, out, N, alpha, dy + r0, out, dy, out, beta,
                 l->factor[TFX_KFAC_G] + (size_t)r0 * out, out);
}

/* Runs the next chunk of rows of `it`.  Returns 1 when that finished the
 * item, 0 when rows are left, or the backend's error. */
static int run_chunk(tfx_kfac *k, item *it, tf_error *err)
{
    stage_stats *ss = &k->stages[it->stage];
    layer *l = &ss->layers[it->layer];
    const tfx_backend be = ss->st->be;
    const int N = ss->rows, D = factor_dim(l, it->f);
    const int first = l->updates[it->f] == 0;
    const float beta = first ? 0.0f : (float)k->decay;
    const float alpha = (first ? 1.0f : (float)(1.0 - k->decay)) / (float)N;
    int rows = (int)(CHUNK_FLOPS / (2.0 * N * D));
    rows = rows < 1 ? 1 : rows > D - it->row ? D - it->row : rows;
    if (it->f == TFX_KFAC_A)
        update_a_rows(ss, l, it->src, it->row, it->row + rows, alpha, beta);
    else
        update_g_rows(ss, l, it->src, it->row, it->row + rows, alpha, beta);
    it->row += rows;
    int rc = be.ops->synchronize(be.ctx, err);
    if (rc < 0)
        return rc;
    if (it->row < D)
        return 0;
    l->updates[it->f]++;
    return 1;
}

static void record_span(rank_queue *q, double start, double end)
{
    const double a = (start - q->t0) * 1e3, b = (end - q->t0) * 1e3;
    q->ms += b - a;
    q->chunks++;
    if (!q->training) /* an evaluation's spans are not on the training step's clock */
        return;
    if (q->n_spans > 0 && a - q->spans[q->n_spans - 1][1] < SPAN_JOIN_MS) {
        q->spans[q->n_spans - 1][1] = b;
        return;
    }
    if (q->n_spans == MAX_SPANS) {
        q->spans_cut++;
        return;
    }
    q->spans[q->n_spans][0] = a;
    q->spans[q->n_spans][1] = b;
    q->n_spans++;
}

int tfx_kfac_run_one(tfx_kfac *k, int rank, tf_error *err)
{
    rank_queue *q = &k->queues[rank];
    if (q->count == 0)
        return 0;
    const double start = tf_now_seconds();
    int rc = run_chunk(k, &q->ring[q->head], err);
    const double end = tf_now_seconds();
    record_span(q, start, end);
    q->last_chunk_ms = (end - start) * 1e3;
    if (rc <= 0)
        return rc < 0 ? rc : 1;
    item it = pop_oldest(q);
    q->ran++;
    if (it.closes)
        set_complete(q, it.origin);
    item_release(k, &it);
    return 1;
}

int tfx_kfac_fill_wait(tfx_kfac *k, int rank, const tfx_transport *tr, int from, long tag,
                       tf_error *err)
{
    int rc = 0, ran = 0;
    if (!tr->ops->ready)
        return 0;
    while (!tr->ops->ready(tr->ctx, rank, from, tag)) {
        if ((rc = tfx_kfac_run_one(k, rank, err)) <= 0)
            return rc; /* nothing pending: the rank blocks as it would without */
        ran = 1;
    }
    if (ran)
        k->queues[rank].late_ms += k->queues[rank].last_chunk_ms;
    return 0;
}

int tfx_kfac_drain(tfx_kfac *k, int rank, tf_error *err)
{
    int rc;
    while ((rc = tfx_kfac_run_one(k, rank, err)) > 0)
        continue;
    return rc;
}

/* ---- steps and figures ------------------------------------------------------ */

void tfx_kfac_step_begin(tfx_kfac *k, int rank, double t0, int training)
{
    rank_queue *q = &k->queues[rank];
    q->training = training;
    q->t0 = t0;
    if (!training)
        return;
    q->step++;
    q->queued = 0;
}

void tfx_kfac_step_end(tfx_kfac *k, int rank)
{
    rank_queue *q = &k->queues[rank];
    if (!q->training || q->queued == 0)
        return;
    item *newest = q->count ? &q->ring[(q->head + q->count - 1) % q->cap] : NULL;
    if (newest && newest->origin == q->step)
        newest->closes = 1;
    else
        set_complete(q, q->step);
}

int tfx_kfac_layers(const tfx_kfac *k, int stage)
{
    return stage >= 0 && stage < k->n_stages ? k->stages[stage].n_layers : 0;
}

int tfx_kfac_read(const tfx_kfac *k, int stage, int layer_index, tfx_kfac_factor f,
                  float *host, int *dim, long *updates, tf_error *err)
{
    if (stage < 0 || stage >= k->n_stages || !k->stages[stage].st || layer_index < 0 ||
        layer_index >= k->stages[stage].n_layers)
        return tf_fail(err, TF_EINVAL, "kfac: stage %d layer %d is not in this process", stage,
                       layer_index);
    const stage_stats *ss = &k->stages[stage];
    const layer *l = &ss->layers[layer_index];
    const int d = factor_dim(l, f);
    *dim = d;
    *updates = l->updates[f];
    if (host)
        ss->st->be.ops->download(ss->st->be.ctx, host, l->factor[f],
                                 (size_t)d * d * sizeof(float));
    return 0;
}

static void log_rank(FILE *f, const rank_queue *q, int rank)
{
    fprintf(f, "{\"step\":%ld,\"rank\":%d,\"aux_items\":%ld,\"aux_chunks\":%ld,"
               "\"aux_ms\":%.4f,\"late_ms\":%.4f,\"pending\":%d,\"dropped\":%ld,"
               "\"copied\":%ld,\"refresh_steps\":",
            q->step, rank, q->ran, q->chunks, q->ms, q->late_ms, q->count, q->dropped, q->copied);
    if (q->refresh > 0)
        fprintf(f, "%ld", q->refresh);
    else
        fputs("null", f);
    fprintf(f, ",\"spans_cut\":%ld,\"spans_ms\":[", q->spans_cut);
    for (int i = 0; i < q->n_spans; i++)
        fprintf(f, "%s[%.4f,%.4f]", i ? "," : "", q->spans[i][0], q->spans[i][1]);
    fputs("]}\n", f);
}

static void figures_reset(rank_queue *q)
{
    q->ran = q->chunks = q->dropped = q->copied = q->spans_cut = 0;
    q->ms = q->late_ms = 0.0;
    q->n_spans = 0;
    q->refresh = 0;
}

int tfx_kfac_step_report(tfx_kfac *k, int first_rank, int n_ranks, tf_error *err)
{
    for (int r = first_rank; k->log && r < first_rank + n_ranks; r++)
        log_rank(k->log, &k->queues[r], r);
    for (int r = first_rank; r < first_rank + n_ranks; r++)
        figures_reset(&k->queues[r]);
    if (k->log && (fflush(k->log) != 0 || ferror(k->log)))
        return tf_fail(err, TF_EIO, "--kfac-log %s: %s", k->log_path, strerror(errno));
    return 0;
}
