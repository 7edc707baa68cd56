/* test_exec_memory.c - what the pipeline holds for its backwards: the
 * bytes a forward keeps, unfrozen and fully frozen, counted from the
 * model's definition; the peaks of 1F1B against their closed form; the
 * peaks of every schedule against the planner's walk of the same bytes;
 * and freezing that saves memory leaving every result bit for bit as it
 * was. */
#include <string.h>

#include "test_util.h"
#include "tf/memory.h"
#include "tf/schedule.h"
#include "tfx/runtime.h"

#define M 4

static const tfx_model_config CFG = {.layers = 4, .hidden = 16, .heads = 2, .ffn = 24,
                                     .context = 8, .microbatch_size = 2};

typedef struct batch {
    int32_t *tokens, *targets;
} batch;

static batch make_batch(uint64_t seed)
{
    const int n = M * CFG.context * CFG.microbatch_size;
    batch b = {malloc(n * sizeof(int32_t)), malloc(n * sizeof(int32_t))};
    for (int i = 0; i < n; i++) {
        b.tokens[i] = (int32_t)(test_random(&seed) * 256);
        b.targets[i] = (int32_t)(test_random(&seed) * 256);
    }
    return b;
}

static tfx_pipeline *make_pipeline_with(const tf_schedule *s, int recompute)
{
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    po.seed = 7;
    po.recompute = recompute;
    tfx_pipeline *p = NULL;
    tf_error err = {0};
    if (tfx_pipeline_create(s, &CFG, &po, &p, &err))
        fail_msg("pipeline for %s: %s", s->name, err.msg);
    return p;
}

static tfx_pipeline *make_pipeline(const tf_schedule *s)
{
    return make_pipeline_with(s, 0);
}

/* Bytes a forward of `stage` (of `stages`, the blocks split evenly) keeps,
 * from the model's definition: per block its input, ln1, qkv (3 C wide), the
 * attention weights, att, mid, ln2, fc1, gelu and gelu's tanh term, and
 * four row statistics; stage 0 the tokens, the last stage its input, the
 * final norm, its statistics and the logits.  Fully frozen, the inputs only
 * a weight's dW reads go: ln1, att, ln2, gelu, the tokens, the final norm. */
static double forward_keeps(int stage, int stages, int frozen)
{
    const double N = CFG.context * CFG.microbatch_size, C = CFG.hidden, F = CFG.ffn;
    const double probs = (double)CFG.microbatch_size * CFG.heads * CFG.context * CFG.context;
    const double blocks = CFG.layers / stages;
    double floats = blocks * (8 * N * C + 3 * N * F + 4 * N + probs);
    if (frozen)
        floats -= blocks * (3 * N * C + N * F);
    if (stage == stages - 1)
        floats += N * C + (frozen ? 0 : N * C) + 2 * N + N * TFX_VOCAB;
    double bytes = 4 * floats;
    if (stage == 0 && !frozen)
        bytes += 4 * N; /* int32 tokens */
    return bytes;
}

static void assert_bytes(double got, double want, const char *what)
{
    if (got != want)
        fail_msg("%s: %.0f bytes, expected %.0f", what, got, want);
}

static unsigned char *mask_all(const tfx_pipeline *p, int value)
{
    const size_t n = (size_t)M * tfx_pipeline_layout(p)->n_tensors;
    unsigned char *m = malloc(n);
    memset(m, value, n);
    return m;
}

static void run_step_recomputing(tfx_pipeline *p, const batch *b, const unsigned char *frozen,
                                 int saves, const int *recompute, tfx_step_result *res)
{
    tfx_step_input in = {.tokens = b->tokens, .targets = b->targets, .frozen = frozen,
                         .frozen_saves_memory = saves, .apply_optimizer = 1,
                         .recompute_blocks = recompute};
    tf_error err = {0};
    if (tfx_pipeline_step(p, &in, res, &err))
        fail_msg("step: %s", err.msg);
}

static void run_step(tfx_pipeline *p, const batch *b, const unsigned char *frozen, int saves,
                     tfx_step_result *res)
{
    run_step_recomputing(p, b, frozen, saves, NULL, res);
}

/* Every tensor's gradient then its parameters, concatenated (malloc'd). */
static float *read_all(tfx_pipeline *p)
{
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    size_t total = 0;
    for (int t = 0; t < l->n_tensors; t++)
        total += l->tensors[t].count;
    float *out = malloc(2 * total * sizeof(float));
    for (int k = 0, at = 0; k < 2; k++)
        for (int t = 0; t < l->n_tensors; at += (int)l->tensors[t].count, t++)
            tfx_pipeline_read_tensor(p, t, k ? TFX_BUF_PARAM : TFX_BUF_GRAD, out + at);
    return out;
}

/* Every F action's change of its stage's bytes is what the model's
 * definition says a forward keeps, unfrozen and fully frozen; after the
 * step nothing is held. */
static void test_forward_keeps_known_bytes(void **state)
{
    (void)state;
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, M, &s, NULL), 0);
    tfx_pipeline *p = make_pipeline(&s);
    batch b = make_batch(3);
    tfx_step_result res;
    /* The stage's count of a mask (the executor's top-up under a memory
     * limit), unfrozen and fully frozen, before any step ran. */
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    for (int st = 0; st < s.stages; st++) {
        const int K = l->stage_first_tensor[st + 1] - l->stage_first_tensor[st];
        unsigned char every[64];
        assert_true(K <= 64);
        memset(every, 1, (size_t)K);
        tfx_stage *here = tfx_pipeline_local_stage(p, st);
        const tfx_mask_bytes none = tfx_stage_mask_bytes(here, NULL);
        const tfx_mask_bytes all = tfx_stage_mask_bytes(here, every);
        assert_bytes(none.forward, forward_keeps(st, s.stages, 0), "mask count, none frozen");
        assert_bytes(all.forward, forward_keeps(st, s.stages, 1), "mask count, all frozen");
        assert_true(none.input_rise == 0 && none.input_kept == 0); /* 1F1B: no I */
    }
    for (int frozen = 0; frozen < 2; frozen++) {
        unsigned char *mask = mask_all(p, frozen);
        run_step(p, &b, mask, 1, &res);
        const double *bytes = tfx_pipeline_action_bytes(p);
        for (int i = 0; i < s.n_actions; i++) {
            const tf_action *a = &s.actions[i];
            double expect = forward_keeps(a->stage, s.stages, frozen);
            assert_bytes(bytes[i], a->type == TF_ACT_F ? expect : -expect, "action");
        }
        for (int r = 0; r < s.ranks; r++) {
            tfx_rank_memory mem;
            assert_int_equal(tfx_pipeline_rank_memory(p, r, &mem), 1);
            assert_int_equal(mem.held_bytes, 0);
            /* 1F1B: rank r of P holds min(P - r, M) forwards at once. */
            assert_bytes((double)mem.peak_bytes,
                         (s.ranks - r) * forward_keeps(r, s.stages, frozen), "peak");
            assert_true(mem.static_bytes > 0);
        }
        free(mask);
    }
    free(b.tokens);
    free(b.targets);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

/* The stage bytes measured from the actions (A from an F, A_f from a fully
 * frozen F, G = A + the I's change, X = what the I's start added), walked
 * by the planner over the same order, give each rank's measured peak to
 * the byte, unfrozen and fully frozen, on every kind of schedule. */
static void check_walk(const char *name, int ranks, int per_rank)
{
    tf_schedule s;
    assert_int_equal(tf_schedule_build(name, ranks, per_rank, M, &s, NULL), 0);
    tfx_pipeline *p = make_pipeline(&s);
    batch b = make_batch(11);
    tf_stage_memory *mem = calloc((size_t)s.stages, sizeof *mem);
    tfx_rank_memory measured[2][8];
    for (int frozen = 0; frozen < 2; frozen++) {
        unsigned char *mask = mask_all(p, frozen);
        tfx_step_result res;
        run_step(p, &b, mask, 1, &res);
        const double *bytes = tfx_pipeline_action_bytes(p);
        for (int i = 0; i < s.n_actions; i++) {
            const tf_action *a = &s.actions[i];
            tf_stage_memory *m = &mem[a->stage];
            if (a->type == TF_ACT_F)
                *(frozen ? &m->activation_frozen_bytes : &m->activation_bytes) = bytes[i];
            if (a->type == TF_ACT_I && !frozen) {
                m->weight_grad_bytes = bytes[i] + m->activation_bytes;
                m->backward_input_transient_bytes = tfx_pipeline_action_rise(p)[i];
                /* The stage's count of a mask says what its I held. */
                const tfx_mask_bytes c =
                    tfx_stage_mask_bytes(tfx_pipeline_local_stage(p, a->stage), NULL);
                assert_bytes(c.input_rise, m->backward_input_transient_bytes, "I's rise");
                assert_bytes(c.input_kept, m->weight_grad_bytes, "what I keeps");
            }
        }
        for (int r = 0; r < s.ranks; r++)
            tfx_pipeline_rank_memory(p, r, &measured[frozen][r]);
        free(mask);
    }
    tf_memory_model model;
    assert_int_equal(tf_memory_model_build(&s, mem, NULL, &model, NULL), 0);
    double *f = calloc((size_t)s.n_actions, sizeof *f);
    tf_memory_peak peaks[8];
    for (int frozen = 0; frozen < 2; frozen++) {
        for (int i = 0; i < s.n_actions; i++)
            f[i] = frozen && (s.actions[i].type == TF_ACT_B || s.actions[i].type == TF_ACT_W);
        tf_memory_peaks(&model, f, NULL, peaks);
        for (int r = 0; r < s.ranks; r++) {
            double got = (double)measured[frozen][r].peak_bytes, want = peaks[r].bytes;
            if (got != want)
                fail_msg("%s rank %d (%s): measured peak %.0f, the walk %.0f", name, r,
                         frozen ? "frozen" : "unfrozen", got, want);
        }
    }
    tf_memory_model_free(&model);
    free(f);
    free(mem);
    free(b.tokens);
    free(b.targets);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

static void test_peaks_follow_the_planners_walk(void **state)
{
    (void)state;
    check_walk("1F1B", 2, 1);
    check_walk("GPipe", 2, 1);
    check_walk("Interleaved1F1B", 2, 2);
    check_walk("ZBVZeroBubble", 2, 2);
}

/* A mixed mask (tensor 2 frozen everywhere, the others at random), with
 * and without the saving: the same loss, gradients and weights, bit for
 * bit, on a plain and a split schedule; and the saving holds less. */
static void check_bit_identical(const char *name, int ranks, int per_rank)
{
    tf_schedule s;
    assert_int_equal(tf_schedule_build(name, ranks, per_rank, M, &s, NULL), 0);
    batch b = make_batch(5);
    float *out[2][2];
    double loss[2];
    long long peak[2] = {0, 0};
    for (int saves = 0; saves < 2; saves++) {
        tfx_pipeline *p = make_pipeline(&s);
        const tfx_model_layout *l = tfx_pipeline_layout(p);
        const int T = l->n_tensors;
        unsigned char *mask = mask_all(p, 0);
        uint64_t rng = 17;
        for (int i = 0; i < M * T; i++)
            mask[i] = i % T == 2 || test_random(&rng) < 0.5;
        tfx_step_result res;
        run_step(p, &b, mask, saves, &res);
        run_step(p, &b, mask, saves, &res);
        loss[saves] = res.loss;
        size_t total = 0;
        for (int t = 0; t < T; t++)
            total += l->tensors[t].count;
        for (int k = 0; k < 2; k++) {
            out[saves][k] = malloc(total * sizeof(float));
            for (int t = 0, at = 0; t < T; at += (int)l->tensors[t].count, t++)
                tfx_pipeline_read_tensor(p, t, k ? TFX_BUF_PARAM : TFX_BUF_GRAD,
                                         out[saves][k] + at);
        }
        for (int r = 0; r < s.ranks; r++) {
            tfx_rank_memory mem;
            tfx_pipeline_rank_memory(p, r, &mem);
            peak[saves] += mem.peak_bytes;
        }
        if (saves)
            for (int k = 0; k < 2; k++)
                assert_memory_equal(out[0][k], out[1][k], total * sizeof(float));
        free(mask);
        tfx_pipeline_destroy(p);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof(double));
    assert_true(peak[1] < peak[0]);
    for (int k = 0; k < 2; k++) {
        free(out[0][k]);
        free(out[1][k]);
    }
    free(b.tokens);
    free(b.targets);
    tf_schedule_free(&s);
}

/* Recomputing (every block, or attention's weights only) on top of a mixed
 * freezing mask: the same loss, gradients and weights as without, bit for
 * bit (the same kernels run on the same inputs); less held at the peak; and
 * the forward of a fully recomputed microbatch keeps exactly the block
 * inputs (and the edges' buffers). */
static void check_recompute(const char *name, int ranks, int per_rank, int how)
{
    tf_schedule s;
    assert_int_equal(tf_schedule_build(name, ranks, per_rank, M, &s, NULL), 0);
    batch b = make_batch(9);
    int *blocks = malloc((size_t)s.stages * M * sizeof *blocks);
    float *out[2];
    double loss[2];
    long long peak[2] = {0, 0};
    for (int again = 0; again < 2; again++) {
        tfx_pipeline *p = make_pipeline_with(&s, again);
        const tfx_model_layout *l = tfx_pipeline_layout(p);
        for (int st = 0; st < s.stages; st++)
            for (int m = 0; m < M; m++)
                blocks[st * M + m] = how ? how : tfx_model_stage_blocks(l, st);
        unsigned char *mask = mask_all(p, 0);
        uint64_t rng = 23;
        for (int i = 0; i < M * l->n_tensors; i++)
            mask[i] = test_random(&rng) < 0.3;
        tfx_step_result res;
        for (int k = 0; k < 2; k++)
            run_step_recomputing(p, &b, mask, 1, again ? blocks : NULL, &res);
        loss[again] = res.loss;
        out[again] = read_all(p);
        for (int r = 0; r < s.ranks; r++) {
            tfx_rank_memory mem;
            tfx_pipeline_rank_memory(p, r, &mem);
            peak[again] += mem.peak_bytes;
            assert_int_equal(mem.held_bytes, 0);
        }
        if (again) {
            size_t n = 0;
            for (int t = 0; t < l->n_tensors; t++)
                n += l->tensors[t].count;
            assert_memory_equal(out[0], out[1], 2 * n * sizeof(float));
        }
        free(mask);
        tfx_pipeline_destroy(p);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof(double));
    assert_true(peak[1] < peak[0]);
    free(out[0]);
    free(out[1]);
    free(blocks);
    free(b.tokens);
    free(b.targets);
    tf_schedule_free(&s);
}

static void test_recompute_leaves_results_bit_identical(void **state)
{
    (void)state;
    check_recompute("1F1B", 2, 1, 0);
    check_recompute("ZBVZeroBubble", 2, 2, 0);
    check_recompute("GPipe", 2, 1, TFX_RECOMPUTE_ATTENTION);
}

/* A fully recomputed forward keeps each block's input and the edges'
 * buffers: unfrozen, stage 0 of two keeps its 2 block inputs and the
 * tokens, nothing more. */
static void test_checkpoint_bytes(void **state)
{
    (void)state;
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, M, &s, NULL), 0);
    tfx_pipeline *p = make_pipeline_with(&s, 1);
    batch b = make_batch(4);
    int blocks[2 * M];
    for (int i = 0; i < 2 * M; i++)
        blocks[i] = 2;
    tfx_step_result res;
    run_step_recomputing(p, &b, NULL, 1, blocks, &res);
    const double N = CFG.context * CFG.microbatch_size;
    const double *bytes = tfx_pipeline_action_bytes(p);
    for (int i = 0; i < s.n_actions; i++)
        if (s.actions[i].type == TF_ACT_F && s.actions[i].stage == 0)
            assert_bytes(bytes[i], 4 * (2 * N * CFG.hidden + N), "checkpoint");
    free(b.tokens);
    free(b.targets);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

static void test_saving_leaves_results_bit_identical(void **state)
{
    (void)state;
    check_bit_identical("1F1B", 2, 1);
    check_bit_identical("ZBVZeroBubble", 2, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_keeps_known_bytes),
        cmocka_unit_test(test_peaks_follow_the_planners_walk),
        cmocka_unit_test(test_saving_leaves_results_bit_identical),
        cmocka_unit_test(test_recompute_leaves_results_bit_identical),
        cmocka_unit_test(test_checkpoint_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
