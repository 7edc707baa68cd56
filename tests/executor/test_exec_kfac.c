/* test_exec_kfac.c - the K-FAC statistics (src/kfac) against x^T x and
 * dY^T dY computed here, in double, from the tensors a single stage saved.
 *
 * The reference is one stage holding the whole model with a gradient slot
 * per microbatch, so every microbatch's layer inputs and output gradients
 * are still there after its backward; the same seed gives it the weights
 * the pipelines' stages get.  Each factor is the running average, in queue
 * order, of per-microbatch factors: the first sets it, the others fold in
 * with the decay.  Float32 GEMMs over 16 rows against double sums differ by
 * about 1e-7 of the factor's scale; 1e-5 leaves room.  A factor built from
 * the wrong microbatch, a slot overwritten before its item ran, a missing
 * bias column or a wrong scale is off by 1e-2 or more. */
#include <math.h>

#include "kfac/kfac.h"
#include "runtime/runtime_internal.h"
#include "test_util.h"
#include "tf/schedule.h"
#include "tf/util.h"
#include "tfx/runtime.h"

#define M 3
#define SEED 11
#define DECAY 0.7
#define TOL 1e-5

static const tfx_model_config CFG = {.layers = 4, .hidden = 16, .heads = 2, .ffn = 24,
                                     .context = 8, .microbatch_size = 2};
enum { N = 16, C = 16, F = 24, LAYERS = 4 * 4 + 1 };

typedef struct batch {
    int32_t tokens[M * N], targets[M * N];
} batch;

/* Bytes that differ between seeds and between microbatches. */
static void make_batch(batch *b, int seed)
{
    for (int i = 0; i < M * N; i++) {
        b->tokens[i] = (int32_t)((i * 131 + seed * 17) % 256);
        b->targets[i] = (int32_t)((i * 71 + seed * 29 + 5) % 256);
    }
}

/* ---- the reference: one stage, the whole model ------------------------------ */

typedef struct ref_stage {
    tfx_model_layout layout;
    tfx_backend be;
    tfx_stage st;
} ref_stage;

static void ref_open(ref_stage *r, int split_backward)
{
    tf_error err = {0};
    assert_int_equal(tfx_model_layout_build(&CFG, 1, &r->layout, &err), 0);
    assert_int_equal(tfx_backend_cpu_create(0, &r->be, &err), 0);
    /* Not lazy: every buffer stays, so items read the slots in place
     * until an action overwrites them (the pipeline tests below run lazy
     * stages, where items read copies). */
    const tfx_stage_spec spec = {.layout = &r->layout, .stage = 0, .backend = r->be,
                                 .microbatches = M, .split_backward = split_backward,
                                 .seed = SEED, .lazy = 0};
    assert_int_equal(tfx_stage_create(&spec, &r->st, &err), 0);
}

static void ref_close(ref_stage *r)
{
    tfx_stage_destroy(&r->st);
    r->be.ops->destroy(r->be.ctx);
    tfx_model_layout_free(&r->layout);
}

static void ref_forward(ref_stage *r, const batch *b, int mb)
{
    tf_error err = {0};
    assert_int_equal(tfx_stage_forward(&r->st, mb, b->tokens + mb * N, b->targets + mb * N,
                                       1.0f / (N * M), &err),
                     0);
}

static void ref_backward(ref_stage *r, int mb)
{
    tf_error err = {0};
    assert_int_equal(tfx_stage_backward_input(&r->st, mb, &err), 0);
}

/* Global layer g (block g / 4, in model order; g = 16 the head): its input
 * width, output width and bias. */
static void layer_shape(int g, int *in, int *out, int *bias)
{
    static const int shape[4][2] = {{C, 3 * C}, {C, C}, {C, F}, {F, C}};
    *bias = g < 16;
    *in = g < 16 ? shape[g % 4][0] : C;
    *out = g < 16 ? shape[g % 4][1] : TFX_VOCAB;
}

/* What factor f of global layer g reads for microbatch mb, written here
 * from the model's description (tfx/model.h), not from src/kfac. */
static const float *layer_io(const tfx_stage *st, int g, tfx_kfac_factor f, int mb)
{
    const tfx_activation_slot *a = &st->act[mb];
    const tfx_gradient_slot *gs = tfx_stage_gradient_slot(st, mb);
    if (g == 16)
        return f == TFX_KFAC_A ? a->lnf : a->dlogits;
    const int k = g / 4;
    const tfx_block_acts *x = &a->blk[k];
    const tfx_block_grads *d = &gs->blk[k];
    switch (g % 4) {
    case 0: return f == TFX_KFAC_A ? x->ln1 : d->dqkv;
    case 1: return f == TFX_KFAC_A ? x->att : d->dmid;
    case 2: return f == TFX_KFAC_A ? x->ln2 : d->dfc1;
    default: return f == TFX_KFAC_A ? x->gelu : gs->gs[k + 1];
    }
}

/* Rows of a microbatch the factors use (--kfac-sample: the first ones). */
static int used_rows = N;

/* Host copy of what factor f of layer g reads for microbatch mb, with the
 * ones column appended for A of a layer with a bias: N x *width (the
 * first used_rows of them count). */
static double *host_rows(const tfx_stage *st, int g, tfx_kfac_factor f, int mb, int *width)
{
    int in, out, bias;
    layer_shape(g, &in, &out, &bias);
    const int cols = f == TFX_KFAC_A ? in : out;
    *width = f == TFX_KFAC_A ? in + bias : out;
    float *raw = malloc((size_t)N * cols * sizeof *raw);
    st->be.ops->download(st->be.ctx, raw, layer_io(st, g, f, mb),
                         (size_t)N * cols * sizeof *raw);
    double *rows = malloc((size_t)N * *width * sizeof *rows);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < *width; j++)
            rows[(size_t)n * *width + j] = j < cols ? raw[(size_t)n * cols + j] : 1.0;
    free(raw);
    return rows;
}

/* ref = (first ? 0 : DECAY ref) + (first ? 1 : 1 - DECAY) rows^T rows / R
 * over the first R = used_rows rows. */
static void fold(double *ref, const double *rows, int w, int first)
{
    const double keep = first ? 0.0 : DECAY, add = (first ? 1.0 : 1.0 - DECAY) / used_rows;
    for (int i = 0; i < w; i++)
        for (int j = 0; j < w; j++) {
            double s = 0.0;
            for (int n = 0; n < used_rows; n++)
                s += rows[(size_t)n * w + i] * rows[(size_t)n * w + j];
            ref[(size_t)i * w + j] = keep * ref[(size_t)i * w + j] + add * s;
        }
}

/* The factors every global layer should have after the microbatches in
 * order[0..count) (the reference stage holding them, for all of one kind). */
typedef struct expected {
    double *f[LAYERS][2];
    int dim[LAYERS][2];
    long updates[LAYERS][2];
} expected;

static void expect_fold(expected *e, const tfx_stage *st, int g, tfx_kfac_factor f, int mb)
{
    int w;
    double *rows = host_rows(st, g, f, mb, &w);
    if (!e->f[g][f])
        e->f[g][f] = calloc((size_t)w * w, sizeof(double));
    e->dim[g][f] = w;
    fold(e->f[g][f], rows, w, e->updates[g][f] == 0);
    e->updates[g][f]++;
    free(rows);
}

static void expected_free(expected *e)
{
    for (int g = 0; g < LAYERS; g++) {
        free(e->f[g][0]);
        free(e->f[g][1]);
    }
}

/* Factor f of local layer i of stage `stage` in k equals e's of global
 * layer g: max |got - ref| <= TOL max |ref|. */
static void assert_factor(const tfx_kfac *k, int stage, int i, int g, tfx_kfac_factor f,
                          const expected *e, const char *what)
{
    tf_error err = {0};
    int dim;
    long updates;
    assert_int_equal(tfx_kfac_read(k, stage, i, f, NULL, &dim, &updates, &err), 0);
    assert_int_equal(dim, e->dim[g][f]);
    assert_int_equal(updates, e->updates[g][f]);
    float *got = malloc((size_t)dim * dim * sizeof *got);
    assert_int_equal(tfx_kfac_read(k, stage, i, f, got, &dim, &updates, &err), 0);
    double diff = 0.0, scale = 1e-30;
    for (size_t j = 0; j < (size_t)dim * dim; j++) {
        diff = fmax(diff, fabs(got[j] - e->f[g][f][j]));
        scale = fmax(scale, fabs(e->f[g][f][j]));
    }
    if (diff > TOL * scale)
        fail_msg("%s: stage %d layer %d factor %s: max difference %.3g > %g x %.3g", what,
                 stage, i, f == TFX_KFAC_A ? "A" : "G", diff, TOL, scale);
    free(got);
}

/* ---- the queue on one stage, by hand ---------------------------------------- */

static tfx_kfac *kfac_on(tfx_stage *stages, int n_stages, const int *stage_rank, int ranks,
                         int queue)
{
    tfx_kfac_config c;
    tfx_kfac_config_default(&c);
    c.enabled = 1;
    c.decay = DECAY;
    c.queue = queue;
    c.sample = (double)used_rows / N;
    tfx_kfac *k = NULL;
    tf_error err = {0};
    assert_int_equal(tfx_kfac_create(&c, stages, n_stages, stage_rank, ranks, &k, &err), 0);
    return k;
}

/* Items still pending when their slot is overwritten read what was there
 * when they were queued: the activation slot of microbatch 0 is rewritten
 * by the next step's forward, the one gradient slot by every backward.
 * Nothing runs until the end (no waits here), so every item is pending at
 * each overwrite. */
static void check_pending_items(void)
{
    ref_stage r;
    ref_open(&r, 0);
    batch b1, b2;
    make_batch(&b1, 5);
    make_batch(&b2, 6);
    const int rank_of[1] = {0};
    tfx_kfac *k = kfac_on(&r.st, 1, rank_of, 1, 0);
    expected e = {0};
    tf_error err = {0};
    tfx_kfac_step_begin(k, 0, tf_now_seconds(), 1);
    for (int mb = 0; mb < 2; mb++) {
        ref_forward(&r, &b1, mb);
        assert_int_equal(tfx_kfac_after(k, 0, TF_ACT_F, 0, mb, &err), 0);
        for (int g = 0; g < LAYERS; g++)
            expect_fold(&e, &r.st, g, TFX_KFAC_A, mb);
        ref_backward(&r, mb);
        assert_int_equal(tfx_kfac_after(k, 0, TF_ACT_B, 0, mb, &err), 0);
        for (int g = 0; g < LAYERS; g++)
            expect_fold(&e, &r.st, g, TFX_KFAC_G, mb);
    }
    tfx_kfac_step_end(k, 0);
    tfx_kfac_step_begin(k, 0, tf_now_seconds(), 1);
    ref_forward(&r, &b2, 0); /* overwrites microbatch 0's slot, queues nothing more */
    assert_int_equal(tfx_kfac_drain(k, 0, &err), 0);
    for (int g = 0; g < LAYERS; g++) {
        assert_factor(k, 0, g, g, TFX_KFAC_A, &e, "by hand");
        assert_factor(k, 0, g, g, TFX_KFAC_G, &e, "by hand");
    }
    expected_free(&e);
    tfx_kfac_destroy(k);
    ref_close(&r);
}

static void test_pending_items_keep_their_inputs(void **state)
{
    (void)state;
    check_pending_items();
}

/* --kfac-sample 0.25: the factors of the first 4 of the 16 rows (the first
 * sequence of each microbatch's two is 8 rows: a quarter cuts inside it). */
static void test_sample_uses_the_first_rows(void **state)
{
    (void)state;
    used_rows = N / 4;
    check_pending_items();
    used_rows = N;
}

/* A full queue drops its oldest items: with room for one microbatch's
 * items (A and G of every layer) and nothing run until the end, only the
 * last microbatch's remain. */
static void test_full_queue_drops_oldest(void **state)
{
    (void)state;
    ref_stage r;
    ref_open(&r, 1);
    batch b;
    make_batch(&b, 8);
    const int rank_of[1] = {0};
    tfx_kfac *k = kfac_on(&r.st, 1, rank_of, 1, 2 * LAYERS);
    expected e = {0};
    tf_error err = {0};
    tfx_kfac_step_begin(k, 0, tf_now_seconds(), 1);
    for (int mb = 0; mb < M; mb++) {
        ref_forward(&r, &b, mb);
        assert_int_equal(tfx_kfac_after(k, 0, TF_ACT_F, 0, mb, &err), 0);
        ref_backward(&r, mb);
        assert_int_equal(tfx_kfac_after(k, 0, TF_ACT_B, 0, mb, &err), 0);
    }
    for (int g = 0; g < LAYERS; g++) {
        expect_fold(&e, &r.st, g, TFX_KFAC_A, M - 1);
        expect_fold(&e, &r.st, g, TFX_KFAC_G, M - 1);
    }
    assert_int_equal(tfx_kfac_drain(k, 0, &err), 0);
    for (int g = 0; g < LAYERS; g++) {
        assert_factor(k, 0, g, g, TFX_KFAC_A, &e, "full queue");
        assert_factor(k, 0, g, g, TFX_KFAC_G, &e, "full queue");
    }
    expected_free(&e);
    tfx_kfac_destroy(k);
    ref_close(&r);
}

/* ---- the pipeline's hooks ----------------------------------------------------- */

/* Two steps on the pipeline (no AdamW, so the weights stay), the items run
 * in the ranks' waits or carried into the next step, then drained; the
 * reference folds the same microbatches in the order each stage's actions
 * ran them. */
static void check_pipeline(const char *name, int ranks, int spr)
{
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build(name, ranks, spr, M, &s, &err), 0);
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    po.seed = SEED;
    po.kfac.enabled = 1;
    po.kfac.decay = DECAY;
    tfx_pipeline *p = NULL;
    assert_int_equal(tfx_pipeline_create(&s, &CFG, &po, &p, &err), 0);
    ref_stage r;
    ref_open(&r, 1);
    batch b[2];
    make_batch(&b[0], 21);
    make_batch(&b[1], 22);
    expected e[8]; /* per pipeline stage */
    memset(e, 0, sizeof e);
    for (int step = 0; step < 2; step++) {
        tfx_step_input in = {.tokens = b[step].tokens, .targets = b[step].targets};
        tfx_step_result res;
        assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
        for (int mb = 0; mb < M; mb++) {
            ref_forward(&r, &b[step], mb);
            ref_backward(&r, mb);
        }
        for (int i = 0; i < s.n_actions; i++) {
            const tf_action *a = &s.actions[i];
            const tfx_stage *st = &p->stages[a->stage];
            if (a->type == TF_ACT_W)
                continue;
            const tfx_kfac_factor f = a->type == TF_ACT_F ? TFX_KFAC_A : TFX_KFAC_G;
            const int g0 = 4 * st->first_block;
            for (int l = 0; l < tfx_kfac_layers(p->kfac, a->stage); l++) {
                const int g = l < 4 * st->n_blocks ? g0 + l : 16;
                expect_fold(&e[a->stage], &r.st, g, f, a->microbatch);
            }
        }
    }
    for (int rank = 0; rank < s.ranks; rank++)
        assert_int_equal(tfx_kfac_drain(p->kfac, rank, &err), 0);
    for (int stage = 0; stage < s.stages; stage++) {
        const tfx_stage *st = &p->stages[stage];
        for (int l = 0; l < tfx_kfac_layers(p->kfac, stage); l++) {
            const int g = l < 4 * st->n_blocks ? 4 * st->first_block + l : 16;
            assert_factor(p->kfac, stage, l, g, TFX_KFAC_A, &e[stage], name);
            assert_factor(p->kfac, stage, l, g, TFX_KFAC_G, &e[stage], name);
        }
        expected_free(&e[stage]);
    }
    ref_close(&r);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

static void test_pipeline_factors(void **state)
{
    (void)state;
    check_pipeline("1F1B", 2, 1);   /* one gradient slot per stage */
    check_pipeline("GPipe", 2, 1);
    check_pipeline("InterleavedZeroBubble", 2, 2); /* split backward, 4 stages */
}

/* The statistics only read: the same steps with and without them give
 * bit-identical losses and weights. */
static void test_statistics_change_nothing(void **state)
{
    (void)state;
    float *param[2] = {NULL, NULL};
    double loss[2][3];
    const tfx_model_layout *layout = NULL;
    size_t total = 0;
    for (int on = 0; on < 2; on++) {
        tf_schedule s;
        tf_error err = {0};
        assert_int_equal(tf_schedule_build("1F1B", 2, 1, M, &s, &err), 0);
        tfx_pipeline_options po;
        tfx_pipeline_options_default(&po);
        po.seed = SEED;
        po.kfac.enabled = on;
        tfx_pipeline *p = NULL;
        assert_int_equal(tfx_pipeline_create(&s, &CFG, &po, &p, &err), 0);
        assert_int_equal(p->kfac != NULL, on);
        for (int step = 0; step < 3; step++) {
            batch b;
            make_batch(&b, 40 + step);
            tfx_step_input in = {.tokens = b.tokens, .targets = b.targets,
                                 .apply_optimizer = 1};
            tfx_step_result res;
            assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
            loss[on][step] = res.loss;
        }
        layout = tfx_pipeline_layout(p);
        total = 0;
        for (int t = 0; t < layout->n_tensors; t++)
            total += layout->tensors[t].count;
        param[on] = malloc(total * sizeof(float));
        for (int t = 0, at = 0; t < layout->n_tensors; at += (int)layout->tensors[t].count, t++)
            tfx_pipeline_read_tensor(p, t, TFX_BUF_PARAM, param[on] + at);
        tfx_pipeline_destroy(p);
        tf_schedule_free(&s);
    }
    for (int step = 0; step < 3; step++)
        assert_memory_equal(&loss[0][step], &loss[1][step], sizeof(double));
    assert_memory_equal(param[0], param[1], total * sizeof(float));
    free(param[0]);
    free(param[1]);
}

static void test_bad_config_is_named(void **state)
{
    (void)state;
    tfx_kfac_config c;
    tfx_kfac_config_default(&c);
    c.enabled = 1;
    c.decay = 1.0;
    tfx_kfac *k = NULL;
    tf_error err = {0};
    const int rank_of[1] = {0};
    assert_int_equal(tfx_kfac_create(&c, NULL, 0, rank_of, 1, &k, &err), TF_EINVAL);
    assert_contains(err.msg, "--kfac-decay 1");
    assert_null(k);
    c.decay = 0.5;
    c.sample = 0.0;
    assert_int_equal(tfx_kfac_create(&c, NULL, 0, rank_of, 1, &k, &err), TF_EINVAL);
    assert_contains(err.msg, "--kfac-sample 0");
    assert_null(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pending_items_keep_their_inputs),
        cmocka_unit_test(test_sample_uses_the_first_rows),
        cmocka_unit_test(test_full_queue_drops_oldest),
        cmocka_unit_test(test_pipeline_factors),
        cmocka_unit_test(test_statistics_change_nothing),
        cmocka_unit_test(test_bad_config_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
