/* test_exec_pipeline.c - the pipeline runtime: every schedule against one
 * rank, freezing semantics and dW accounting, failures and deadlocks. */
#include <math.h>
#include <string.h>

#include "model_flops.h"
#include "test_util.h"
#include "small_plan.h"
#include "tf/schedule.h"
#include "tfx/freeze_select.h"
#include "tfx/runtime.h"

#define M 4

static const tfx_model_config CFG = {.layers = 4, .hidden = 16, .heads = 2, .ffn = 24,
                                     .context = 8, .microbatch_size = 2};
enum { N = 16 }; /* context x microbatch_size */

typedef struct batch {
    int32_t tokens[M * N], targets[M * N];
} batch;

static void make_batch(batch *b, uint64_t seed)
{
    for (int i = 0; i < M * N; i++) {
        b->tokens[i] = (int32_t)(test_random(&seed) * 256);
        b->targets[i] = (int32_t)(test_random(&seed) * 256);
    }
}

static tfx_pipeline *make_pipeline(const tf_schedule *s, const tfx_model_config *cfg)
{
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    po.seed = 7;
    tfx_pipeline *p = NULL;
    tf_error err = {0};
    int rc = tfx_pipeline_create(s, cfg, &po, &p, &err);
    if (rc)
        fail_msg("pipeline for %s: %s", s->name, err.msg);
    return p;
}

/* Every tensor's buffer of `kind`, concatenated in model order (malloc'd). */
static float *all_tensors(tfx_pipeline *p, tfx_buffer_kind kind, size_t *total)
{
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    size_t n = 0;
    for (int t = 0; t < l->n_tensors; t++)
        n += l->tensors[t].count;
    float *out = malloc(n * sizeof *out);
    size_t at = 0;
    for (int t = 0; t < l->n_tensors; t++) {
        tfx_pipeline_read_tensor(p, t, kind, out + at);
        at += l->tensors[t].count;
    }
    *total = n;
    return out;
}

/* Norm-relative comparison of two tensors: max |a-b| <= tol * max(|a|, tiny). */
static void assert_tensors_close(const float *a, const float *b, size_t n, double tol,
                                 const char *what)
{
    double diff = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)a[i]));
    }
    if (diff > tol * scale)
        fail_msg("%s: max difference %.3g exceeds %.3g x %.3g", what, diff, tol, scale);
}

typedef struct reference {
    double loss;
    float *grad, *param_after;
    size_t n;
} reference;

/* One rank running the whole model: loss and gradients of one batch, and
 * the parameters after two optimizer steps. */
static void run_reference(const batch *b, reference *ref)
{
    tf_schedule s;
    assert_int_equal(tf_schedule_build("GPipe", 1, 1, M, &s, NULL), 0);
    tfx_model_config cfg = CFG;
    tfx_pipeline *p = make_pipeline(&s, &cfg);
    tfx_step_input in = {.tokens = b->tokens, .targets = b->targets, .frozen = NULL,
                         .apply_optimizer = 0};
    tfx_step_result res;
    tf_error err = {0};
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    ref->loss = res.loss;
    ref->grad = all_tensors(p, TFX_BUF_GRAD, &ref->n);
    in.apply_optimizer = 1;
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    ref->param_after = all_tensors(p, TFX_BUF_PARAM, &ref->n);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

static void check_against_reference(const tf_schedule *s, const batch *b, const reference *ref)
{
    tfx_model_config cfg = CFG;
    tfx_pipeline *p = make_pipeline(s, &cfg);
    tfx_step_input in = {.tokens = b->tokens, .targets = b->targets, .frozen = NULL,
                         .apply_optimizer = 0};
    tfx_step_result res;
    tf_error err = {0};
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    assert_close(res.loss, ref->loss, 1e-5);
    size_t n;
    float *grad = all_tensors(p, TFX_BUF_GRAD, &n);
    assert_int_equal(n, ref->n);
    assert_tensors_close(ref->grad, grad, n, 1e-5, s->name);
    in.apply_optimizer = 1;
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    float *param = all_tensors(p, TFX_BUF_PARAM, &n);
    assert_tensors_close(ref->param_after, param, n, 1e-5, s->name);
    /* Every dW was executed: 4 GEMM tensors per block (qkv, proj, fc1,
     * fc2) and the head. */
    assert_int_equal(res.counts.gemms, (long)M * (4 * CFG.layers + 1));
    assert_int_equal(res.counts.skipped, 0);
    free(grad);
    free(param);
    tfx_pipeline_destroy(p);
}

static void test_schedules_match_single_rank(void **state)
{
    (void)state;
    batch b;
    make_batch(&b, 99);
    reference ref;
    run_reference(&b, &ref);
    static const struct {
        const char *name;
        int ranks, spr;
    } cases[] = {
        {"GPipe", 2, 1},           {"1F1B", 2, 1},
        {"1F1B", 4, 1},            {"Interleaved1F1B", 2, 2},
        {"InterleavedZeroBubble", 2, 2}, {"ZBVZeroBubble", 2, 2},
        /* LoopedBFS runs every stage's backwards from the last microbatch
         * down; DualPipeV mixes B with I + W on a stage and runs its
         * overlapped pairs back to back. */
        {"LoopedBFS", 2, 2},       {"LoopedBFS", 4, 1},
        {"DualPipeV", 2, 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tf_schedule s;
        tf_error err = {0};
        int rc = tf_schedule_build(cases[k].name, cases[k].ranks, cases[k].spr, M, &s, &err);
        if (rc)
            fail_msg("%s: %s", cases[k].name, err.msg);
        check_against_reference(&s, &b, &ref);
        tf_schedule_free(&s);
    }
    /* A custom order: stage 0 splits its backward (I, then W later), stage 1
     * does not. */
    const char *r0[] = {"0F0", "0F1", "0F2", "0F3", "0I0", "0I1", "0W0",
                        "0I2", "0W1", "0I3", "0W2", "0W3"};
    const char *r1[] = {"1F0", "1B0", "1F1", "1B1", "1F2", "1B2", "1F3", "1B3"};
    const char *const *rows[2] = {r0, r1};
    int len[2] = {12, 8};
    tf_schedule s;
    tf_error err = {0};
    int rc = tf_schedule_from_cells(&(tf_cell_rows){rows, len, 2}, M, "order", &s, &err);
    if (rc)
        fail_msg("custom order: %s", err.msg);
    check_against_reference(&s, &b, &ref);
    tf_schedule_free(&s);
    free(ref.grad);
    free(ref.param_after);
}

/* DualPipeV's overlapped pairs run as the planner models them, one node:
 * a pair's backward starts after its forward has ended, and the forward's
 * activation leaves only when the whole pair is done, so the next stage's
 * forward of that microbatch on another rank starts after the pair's end. */
static void test_pairs_run_as_one_node(void **state)
{
    (void)state;
    batch b;
    make_batch(&b, 3);
    tf_schedule s;
    assert_int_equal(tf_schedule_build("DualPipeV", 2, 2, M, &s, NULL), 0);
    tfx_model_config cfg = CFG;
    tfx_pipeline *p = make_pipeline(&s, &cfg);
    tfx_step_input in = {.tokens = b.tokens, .targets = b.targets};
    tfx_step_result res;
    assert_int_equal(tfx_pipeline_step(p, &in, &res, NULL), 0);
    const double *ms = tfx_pipeline_action_ms(p), *start = tfx_pipeline_action_start_ms(p);
    int pairs = 0, checked = 0;
    for (int i = 0; i + 1 < s.n_actions; i++) {
        if (s.actions[i].pair != TF_PAIR_FIRST)
            continue;
        pairs++;
        const tf_action *f = &s.actions[i];
        double pair_end = start[i + 1] + ms[i + 1];
        assert_true(start[i + 1] >= start[i] + ms[i] - 0.01);
        int next = tf_schedule_find(&s, TF_ACT_F, f->stage + 1, f->microbatch);
        if (next < 0 || s.actions[next].rank == f->rank)
            continue;
        if (start[next] < pair_end - 0.01)
            fail_msg("%s starts at %.4f ms, before its input's pair ends at %.4f ms",
                     "the next stage's forward", start[next], pair_end);
        checked++;
    }
    assert_true(pairs >= 4 && checked >= 2);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

/* Freezing: a frozen tensor's gradient is exactly the sum of the gradients
 * of its unfrozen microbatches (each computed alone on one rank), a tensor
 * frozen everywhere keeps its value and optimizer state, and the dW work
 * counted equals what the mask asks for. */
static void test_frozen_gradient_is_unfrozen_microbatches(void **state)
{
    (void)state;
    batch b;
    make_batch(&b, 5);
    tf_schedule s1, s;
    assert_int_equal(tf_schedule_build("GPipe", 1, 1, 1, &s1, NULL), 0);
    assert_int_equal(tf_schedule_build("ZBVZeroBubble", 2, 2, M, &s, NULL), 0);
    tfx_model_config cfg = CFG;

    /* Per-microbatch gradients from a one-rank, one-microbatch pipeline. */
    float *g_mb[M];
    size_t n = 0;
    for (int m = 0; m < M; m++) {
        tfx_pipeline *p1 = make_pipeline(&s1, &cfg);
        tfx_step_input in = {.tokens = b.tokens + m * N, .targets = b.targets + m * N};
        tfx_step_result res;
        assert_int_equal(tfx_pipeline_step(p1, &in, &res, NULL), 0);
        g_mb[m] = all_tensors(p1, TFX_BUF_GRAD, &n);
        tfx_pipeline_destroy(p1);
    }

    tfx_pipeline *p = make_pipeline(&s, &cfg);
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    const int T = l->n_tensors;
    unsigned char *frozen = calloc((size_t)M * T, 1);
    uint64_t rng = 17;
    long expect_gemms = 0, expect_reductions = 0, expect_skipped = 0;
    for (int m = 0; m < M; m++)
        for (int t = 0; t < T; t++) {
            /* tensor 2 (block0.ln1.weight) frozen in every microbatch */
            frozen[m * T + t] = t == 2 || test_random(&rng) < 0.4;
            if (frozen[m * T + t])
                expect_skipped++;
            else if (l->tensors[t].kind == TFX_TENSOR_WEIGHT)
                expect_gemms++;
            else
                expect_reductions++;
        }
    float *before = all_tensors(p, TFX_BUF_PARAM, &n);
    tfx_step_input in = {.tokens = b.tokens, .targets = b.targets, .frozen = frozen,
                         .apply_optimizer = 1};
    tfx_step_result res;
    tf_error err = {0};
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    assert_int_equal(res.counts.gemms, expect_gemms);
    assert_int_equal(res.counts.reductions, expect_reductions);
    assert_int_equal(res.counts.skipped, expect_skipped);

    size_t at = 0;
    int expect_updated = 0;
    float *after = all_tensors(p, TFX_BUF_PARAM, &n);
    for (int t = 0; t < T; t++) {
        size_t c = l->tensors[t].count;
        float *grad = malloc(c * sizeof *grad), *expect = calloc(c, sizeof *expect);
        tfx_pipeline_read_tensor(p, t, TFX_BUF_GRAD, grad);
        int unfrozen = 0;
        for (int m = 0; m < M; m++) {
            if (frozen[m * T + t])
                continue;
            unfrozen++;
            for (size_t i = 0; i < c; i++)
                expect[i] += g_mb[m][at + i] / M; /* the batch loss averages microbatches */
        }
        expect_updated += unfrozen > 0;
        if (unfrozen == 0) {
            for (size_t i = 0; i < c; i++) {
                assert_float_equal(grad[i], 0.0f, 0.0);
                assert_memory_equal(&before[at + i], &after[at + i], sizeof(float));
            }
            assert_int_equal(tfx_pipeline_tensor_steps(p, t), 0);
        } else {
            assert_tensors_close(expect, grad, c, 1e-5, l->tensors[t].name);
            assert_int_equal(tfx_pipeline_tensor_steps(p, t), 1);
        }
        at += c;
        free(grad);
        free(expect);
    }
    assert_true(expect_updated <= T - 1); /* tensor 2 at least stays frozen */
    assert_int_equal(res.tensors_updated, expect_updated);
    free(before);
    free(after);
    free(frozen);
    for (int m = 0; m < M; m++)
        free(g_mb[m]);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
    tf_schedule_free(&s1);
}

/* With a real plan from the planner, the dW work executed equals the plan's:
 * every freezable action freezes round(r K) of its stage's K tensors. */
static void test_dw_count_matches_plan(void **state)
{
    (void)state;
    tf_plan plan;
    tf_error err = {0};
    small_1f1b_plan(&plan);
    tfx_model_config cfg = CFG;
    tfx_pipeline *p = make_pipeline(&plan.schedule, &cfg);
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    const int T = l->n_tensors;
    int K[2] = {l->stage_first_tensor[1], T - l->stage_first_tensor[1]};
    for (int method = 0; method < 2; method++) {
        tfx_freeze_selector sel;
        assert_int_equal(tfx_freeze_selector_init(&sel, method, 3, 2, K, NULL), 0);
        unsigned char *frozen = calloc((size_t)M * T, 1);
        long expect_frozen = 0, expect_active = 0, any = 0;
        for (int i = 0; i < plan.schedule.n_actions; i++) {
            const tf_plan_action *a = &plan.actions[i];
            if (a->action.type != TF_ACT_B)
                continue;
            int st = a->action.stage, m = a->action.microbatch;
            int k = tfx_freeze_select(&sel, 0, st, m, a->freeze_ratio,
                                      frozen + m * T + l->stage_first_tensor[st]);
            assert_int_equal(k, (int)floor(a->freeze_ratio * K[st] + 0.5));
            expect_frozen += k;
            expect_active += K[st] - k;
            any += a->freeze_ratio > 0;
        }
        assert_true(any > 0); /* the plan does freeze something */
        batch b;
        make_batch(&b, 8);
        tfx_step_input in = {.tokens = b.tokens, .targets = b.targets, .frozen = frozen,
                             .apply_optimizer = 1};
        tfx_step_result res;
        assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
        assert_int_equal(res.counts.skipped, expect_frozen);
        assert_int_equal(res.counts.gemms + res.counts.reductions, expect_active);
        long gemms = 0;
        for (int m = 0; m < M; m++)
            for (int t = 0; t < T; t++)
                gemms += !frozen[m * T + t] && l->tensors[t].kind == TFX_TENSOR_WEIGHT;
        assert_int_equal(res.counts.gemms, gemms);
        free(frozen);
        tfx_freeze_selector_free(&sel);
    }
    tfx_pipeline_destroy(p);
    tf_plan_free(&plan);
}

/* A failing rank stops every rank (blocked receives included) and the step
 * reports that rank's error; the pipeline then runs cleanly again. */
static void test_rank_failure_stops_all_ranks(void **state)
{
    (void)state;
    batch b;
    make_batch(&b, 1);
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 3, 1, M, &s, NULL), 0);
    static const int where[][2] = {{0, 0}, {1, 3}, {2, 5}, {0, 7}};
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++) {
        tfx_pipeline_options po;
        tfx_pipeline_options_default(&po);
        po.fail_rank = where[k][0];
        po.fail_action = where[k][1];
        tfx_pipeline *p;
        tf_error err = {0};
        tfx_model_config cfg = CFG;
        assert_int_equal(tfx_pipeline_create(&s, &cfg, &po, &p, &err), 0);
        tfx_step_input in = {.tokens = b.tokens, .targets = b.targets, .frozen = NULL,
                             .apply_optimizer = 1};
        tfx_step_result res;
        assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), TF_ERUNTIME);
        char expect[64];
        snprintf(expect, sizeof expect, "rank %d failed", where[k][0]);
        assert_contains(err.msg, expect);
        assert_contains(err.msg, "injected failure");
        tfx_pipeline_destroy(p);
    }
    tf_schedule_free(&s);
}

static void test_deadlocking_order_is_refused(void **state)
{
    (void)state;
    /* Rank 0 waits for 1B0 before running 0F0's successor on rank 1. */
    const char *r0[] = {"0F0", "0B0"};
    const char *r1[] = {"1B0", "1F0"};
    const char *const *rows[2] = {r0, r1};
    int len[2] = {2, 2};
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){rows, len, 2}, 1, "order", &s, &err),
                     0);
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    tfx_pipeline *p = NULL;
    tfx_model_config cfg = CFG;
    assert_int_equal(tfx_pipeline_create(&s, &cfg, &po, &p, &err), TF_ECYCLE);
    assert_null(p);
    tf_schedule_free(&s);
    /* Too many stages for the model. */
    assert_int_equal(tf_schedule_build("1F1B", 8, 1, 8, &s, NULL), 0);
    assert_int_equal(tfx_pipeline_create(&s, &cfg, &po, &p, &err), TF_EINVAL);
    assert_contains(err.msg, "--layers 4");
    tf_schedule_free(&s);
}

/* An evaluation (forward only) gives the loss a training step computes on
 * the same batch and changes nothing: not the weights, not the gradients
 * of the last training step, not its action times. */
static void test_forward_only_changes_nothing(void **state)
{
    (void)state;
    batch b, other;
    make_batch(&b, 21);
    make_batch(&other, 22);
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, M, &s, NULL), 0);
    tfx_model_config cfg = CFG;
    tfx_pipeline *p = make_pipeline(&s, &cfg);
    tf_error err = {0};
    tfx_step_result train, eval;
    tfx_step_input in = {.tokens = other.tokens, .targets = other.targets};
    assert_int_equal(tfx_pipeline_step(p, &in, &train, &err), 0);
    size_t n;
    float *grad0 = all_tensors(p, TFX_BUF_GRAD, &n), *param0 = all_tensors(p, TFX_BUF_PARAM, &n);
    double *times0 = malloc(sizeof(double) * s.n_actions);
    memcpy(times0, tfx_pipeline_action_ms(p), sizeof(double) * s.n_actions);

    tfx_step_input ev = {.tokens = b.tokens, .targets = b.targets, .forward_only = 1};
    assert_int_equal(tfx_pipeline_step(p, &ev, &eval, &err), 0);
    float *grad1 = all_tensors(p, TFX_BUF_GRAD, &n), *param1 = all_tensors(p, TFX_BUF_PARAM, &n);
    assert_memory_equal(grad0, grad1, n * sizeof *grad0);
    assert_memory_equal(param0, param1, n * sizeof *param0);
    assert_memory_equal(times0, tfx_pipeline_action_ms(p), sizeof(double) * s.n_actions);
    assert_int_equal(eval.counts.gemms + eval.counts.reductions, 0);
    /* The same loss as a training step on that batch. */
    in = (tfx_step_input){.tokens = b.tokens, .targets = b.targets};
    assert_int_equal(tfx_pipeline_step(p, &in, &train, &err), 0);
    assert_true(eval.loss == train.loss);
    /* An evaluation has nothing for AdamW. */
    ev.apply_optimizer = 1;
    assert_int_equal(tfx_pipeline_step(p, &ev, &eval, &err), TF_EINVAL);
    assert_contains(err.msg, "forward-only");
    free(grad0);
    free(grad1);
    free(param0);
    free(param1);
    free(times0);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

/* With rescale_frozen, a tensor frozen in k of the M microbatches gets its
 * unfrozen microbatches' gradient times M / (M - k); one never frozen or
 * frozen everywhere is as without it.  The FLOPs a step reports are the
 * model's per microbatch, less the dW GEMMs of the frozen weights. */
static void test_rescale_and_flops(void **state)
{
    (void)state;
    batch b;
    make_batch(&b, 31);
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, M, &s, NULL), 0);
    tfx_model_config cfg = CFG;
    tfx_pipeline *p = make_pipeline(&s, &cfg);
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    const int T = l->n_tensors;
    unsigned char *frozen = calloc((size_t)M * T, 1);
    int k_of[64] = {0};
    double frozen_flops = 0.0;
    for (int t = 0; t < T; t++) {
        k_of[t] = t % (M + 1); /* 0 .. M microbatches frozen */
        for (int m = 0; m < k_of[t]; m++)
            frozen[m * T + t] = 1;
        if (l->tensors[t].kind == TFX_TENSOR_WEIGHT)
            frozen_flops += k_of[t] * 2.0 * N * (double)l->tensors[t].count;
    }
    tf_error err = {0};
    tfx_step_result plain, scaled;
    tfx_step_input in = {.tokens = b.tokens, .targets = b.targets, .frozen = frozen};
    assert_int_equal(tfx_pipeline_step(p, &in, &plain, &err), 0);
    size_t n;
    float *g0 = all_tensors(p, TFX_BUF_GRAD, &n);
    in.rescale_frozen = 1;
    assert_int_equal(tfx_pipeline_step(p, &in, &scaled, &err), 0);
    float *g1 = all_tensors(p, TFX_BUF_GRAD, &n);
    size_t at = 0;
    for (int t = 0; t < T; t++) {
        const int k = k_of[t];
        const float factor = k > 0 && k < M ? (float)M / (float)(M - k) : 1.0f;
        for (size_t i = 0; i < l->tensors[t].count; i++)
            assert_true(g1[at + i] == g0[at + i] * factor);
        at += l->tensors[t].count;
    }
    tfx_model_flops f = tfx_model_microbatch_flops(l, -1);
    double expect = M * (f.forward + f.backward_input + f.backward_weight) - frozen_flops;
    assert_float_equal(plain.flops, expect, 1.0);
    assert_float_equal(scaled.flops, expect, 1.0);
    free(g0);
    free(g1);
    free(frozen);
    tfx_pipeline_destroy(p);
    tf_schedule_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedules_match_single_rank),
        cmocka_unit_test(test_pairs_run_as_one_node),
        cmocka_unit_test(test_frozen_gradient_is_unfrozen_microbatches),
        cmocka_unit_test(test_dw_count_matches_plan),
        cmocka_unit_test(test_rank_failure_stops_all_ranks),
        cmocka_unit_test(test_deadlocking_order_is_refused),
        cmocka_unit_test(test_forward_only_changes_nothing),
        cmocka_unit_test(test_rescale_and_flops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
