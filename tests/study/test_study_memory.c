/* test_study_memory.c - a transformer's bytes from its shape: each formula of
 * Korthikanti et al. (MLSys 2023) checked against the paper's closed form,
 * the frozen and weight-gradient shares against their tensor lists, and the
 * paper's Figure 1 reproduced through the planner's liveness by the bundled
 * example studies (tools/examples/activation-memory/). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "study/study.h"
#include "study/study_memory.h"

static const double GiB = 1073741824.0;

/* A GPT layer of the paper's 22B model (Table 3) with t-way tensor
 * parallelism. */
static tf_transformer_shape gpt(int t)
{
    tf_transformer_shape m = {0};
    m.hidden = 6144;
    m.heads = m.kv_heads = 64;
    m.sequence_length = 2048;
    m.microbatch_size = 4;
    m.ffn_hidden = 4 * m.hidden;
    m.vocab = 51200;
    m.bytes_per_value = 2;
    m.tensor_parallel = t;
    m.dropout = 1;
    return m;
}

static double sbh(const tf_transformer_shape *m)
{
    return m->sequence_length * m->microbatch_size * m->hidden;
}

/* as/h, the attention scores' share. */
static double scores(const tf_transformer_shape *m)
{
    return m->heads * m->sequence_length / m->hidden;
}

static tf_activation_bytes layer(const tf_transformer_shape *m, int sp, tf_recompute r)
{
    tf_activation_bytes b;
    tf_transformer_layer_bytes(m, sp, r, &b);
    return b;
}

/* The paper's three closed forms (section 4.1 and 4.2.2), and selective
 * recomputation dropping the 5as/(ht) term (section 4.3). */
static void test_paper_formulas(void **state)
{
    (void)state;
    tf_transformer_shape one = gpt(1), m = gpt(8);
    const double t = 8, x = sbh(&m), as_h = scores(&m);
    assert_float_equal(layer(&one, 0, TF_RECOMPUTE_NONE).activation, x * (34 + 5 * as_h), 1e-3);
    assert_float_equal(layer(&m, 0, TF_RECOMPUTE_NONE).activation,
                       x * (10 + 24 / t + 5 * as_h / t), 1e-3);
    assert_float_equal(layer(&m, 1, TF_RECOMPUTE_NONE).activation, x * (34 / t + 5 * as_h / t),
                       1e-3);
    assert_float_equal(layer(&m, 1, TF_RECOMPUTE_SELECTIVE).activation, x * 34 / t, 1e-3);
    assert_float_equal(layer(&m, 0, TF_RECOMPUTE_SELECTIVE).activation, x * (10 + 24 / t),
                       1e-3);
    /* "auto" keeps everything, as "none" does; the planner recomputes. */
    assert_float_equal(layer(&m, 0, TF_RECOMPUTE_AUTO).activation,
                       layer(&m, 0, TF_RECOMPUTE_NONE).activation, 0);
}

/* Full recomputation keeps the layer's input, 2sbh (sharded under sequence
 * parallelism), frozen or not. */
static void test_full_recompute(void **state)
{
    (void)state;
    tf_transformer_shape m = gpt(8);
    tf_activation_bytes full = layer(&m, 0, TF_RECOMPUTE_FULL);
    assert_float_equal(full.activation, 2 * sbh(&m), 1e-3);
    assert_float_equal(full.activation_frozen, full.activation, 0);
    assert_float_equal(full.checkpoint, full.activation, 0);
    assert_float_equal(layer(&m, 1, TF_RECOMPUTE_FULL).activation, 2 * sbh(&m) / 8, 1e-3);
    assert_float_equal(layer(&m, 0, TF_RECOMPUTE_NONE).checkpoint, 2 * sbh(&m), 1e-3);
}

/* A frozen backward needs no GEMM input that serves only a weight
 * gradient: the QKV and FC1 inputs (replicated without sequence
 * parallelism, 2sbh each), the attention projection's input (2sbh / t) and
 * FC2's (8sbh / t).  A split backward keeps those four plus the GEMM
 * output gradients from I to W: QKV's 6sbh / t, the projection's 2sbh,
 * FC1's 8sbh / t and FC2's 2sbh. */
static void test_frozen_and_weight_grad_shares(void **state)
{
    (void)state;
    tf_transformer_shape one = gpt(1), m = gpt(8);
    const double x = sbh(&m);
    tf_activation_bytes b = layer(&one, 0, TF_RECOMPUTE_NONE);
    assert_float_equal(b.activation - b.activation_frozen, 14 * x, 1e-3);
    assert_float_equal(b.weight_grad, 14 * x + 18 * x, 1e-3);
    b = layer(&m, 0, TF_RECOMPUTE_NONE);
    assert_float_equal(b.activation - b.activation_frozen, 4 * x + 10 * x / 8, 1e-3);
    assert_float_equal(b.weight_grad, (4 * x + 10 * x / 8) + (6 * x / 8 + 2 * x + 8 * x / 8 + 2 * x),
                       1e-3);
    b = layer(&m, 1, TF_RECOMPUTE_SELECTIVE);
    assert_float_equal(b.activation - b.activation_frozen, 14 * x / 8, 1e-3);
}

/* LLaMA-style layers: grouped-query attention shrinks K and V, a gated FFN
 * keeps both its inputs, no dropout keeps no masks, and flash attention
 * keeps the row-wise fp32 logsumexp instead of the s x s scores, and its
 * backward reads the attention output, so the projection's input is kept
 * when frozen. */
static void test_llama_variant(void **state)
{
    (void)state;
    tf_transformer_shape m = {0};
    m.hidden = 4096;
    m.heads = 32;
    m.kv_heads = 8;
    m.sequence_length = 8192;
    m.microbatch_size = 1;
    m.ffn_hidden = 14336;
    m.bytes_per_value = 2;
    m.tensor_parallel = 1;
    m.gated_ffn = m.flash_attention = 1;
    const double x = sbh(&m), xf = 8192.0 * 14336.0, lse = 4.0 * 32 * 8192;
    /* norms 2 x 2sbh, QKV input 2sbh, Q 2sbh, K and V 2 x 0.5sbh, output
     * 2sbh; FC1 input 2sbh, gate and up 4sbf, FC2 input 2sbf. */
    tf_activation_bytes b = layer(&m, 0, TF_RECOMPUTE_NONE);
    assert_float_equal(b.activation, 13 * x + 6 * xf + lse, 1e-3);
    assert_float_equal(b.activation_frozen, b.activation - 4 * x - 2 * xf, 1e-3);
    assert_float_equal(layer(&m, 0, TF_RECOMPUTE_SELECTIVE).activation, b.activation, 0);
    /* GEMM inputs (QKV, output, FC1, FC2) and output gradients (QKV's
     * 1.5 x 2sbh with 8 of 32 KV heads, the projection's, gate and up,
     * FC2's). */
    assert_float_equal(b.weight_grad, (6 * x + 2 * xf) + (3 * x + 2 * x + 4 * xf + 2 * x), 1e-3);
}

/* The output layer with sequence parallelism: 4sbh/t (1 + v/h) (the
 * paper's section 4.3, v the vocabulary); the embedding's dropout mask
 * sbh/t; p2p buffers of one activation and one gradient. */
static void test_ends_and_static(void **state)
{
    (void)state;
    tf_transformer_shape m = gpt(8);
    const double x = sbh(&m);
    tf_activation_bytes head;
    tf_transformer_head_bytes(&m, 1, &head);
    assert_float_equal(head.activation, 4 * x / 8 * (1 + m.vocab / m.hidden), 1e-3);
    assert_float_equal(tf_transformer_embedding_bytes(&m, 1), x / 8, 1e-3);
    assert_float_equal(tf_transformer_embedding_bytes(&m, 0), x, 1e-3);
    assert_float_equal(tf_transformer_p2p_bytes(&m, 0), 4 * x, 1e-3);
    tf_transformer_shape one = gpt(1);
    assert_float_equal(tf_transformer_layer_parameters(&one),
                       12 * one.hidden * one.hidden + 2 * one.hidden, 1e-3);
    assert_float_equal(tf_bytes_per_parameter(0, 64), 18, 0);
    assert_float_equal(tf_bytes_per_parameter(1, 8), 7.5, 0);
}

/* Loads tools/examples/activation-memory/<file> under the source tree
 * (root) and expands its sweep into *configs (caller frees); returns how
 * many. */
static int load_example(const char *root, const char *file, tf_study *s,
                        tf_study_config **configs)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tools/examples/activation-memory/%s", root, file);
    tf_error err = {0};
    int rc = tf_study_load(path, s, &err), n = 0;
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(tf_study_configs(s, configs, &n, &err), 0);
    return n;
}

/* Figure 1 of the paper: activation memory of the first pipeline stage,
 * per GPU, t = 8, without (tensor parallelism alone) and with sequence
 * parallelism and selective recomputation; the 175B and 530B runs
 * interleave 3 stages per rank, which holds 1 + (p - 1)/(p m) times the
 * layers' share.  Here through the example studies, each planned with the
 * planner's liveness over its schedule's order. */
static void test_figure_1(void **state)
{
    (void)state;
    const char *root = getenv("TF_SOURCE_DIR");
    if (!root)
        skip();
    static const struct {
        const char *file;
        double without, with;
    } figure[] = {{"22b.json", 59.25, 9.5625},
                  {"175b.json", 66.84375, 12.3515625},
                  {"530b.json", 114.0234375, 23.076171875},
                  {"1t.json", 131.25, 26.5625}};
    for (size_t k = 0; k < sizeof figure / sizeof *figure; k++) {
        tf_study s;
        tf_study_config *configs;
        int n = load_example(root, figure[k].file, &s, &configs), seen = 0;
        for (int i = 0; i < n; i++) {
            const tf_study_config *c = &configs[i];
            int baseline = !c->sequence_parallel && c->recompute == TF_RECOMPUTE_NONE;
            int both = c->sequence_parallel && c->recompute == TF_RECOMPUTE_SELECTIVE;
            if (!baseline && !both)
                continue;
            tf_study_row row;
            tf_study_solve(&s, c, TF_OBJECTIVE_LEAST_FREEZE, &row);
            if (row.status != TF_STUDY_SOLVED)
                fprintf(stderr, "%s: %s\n", figure[k].file, row.reason);
            assert_int_equal(row.status, TF_STUDY_SOLVED);
            assert_float_equal(row.peak_activation_bytes / GiB,
                               baseline ? figure[k].without : figure[k].with, 1e-9);
            seen++;
        }
        assert_int_equal(seen, 2);
        free(configs);
        tf_study_free(&s);
    }
}

/* A small GPT on 2 ranks of GPipe with recomputation left to the planner
 * ("auto") and no freezing: without a limit nothing is recomputed; under a
 * limit between the smallest reachable peak and the unfrozen one the row
 * fits by recomputing, within the limit and slower; under one below every
 * plan it is marked as not fitting, with the unlimited plan's figures. */
static const char *const auto_study =
    "{ \"model\": { \"layers\": 8, \"layer_forward_ms\": 1, \"layer_backward_ms\": 2,"
    "  \"hidden\": 1024, \"heads\": 16, \"sequence_length\": 2048, \"microbatch_size\": 1,"
    "  \"recompute\": \"auto\" },"
    "  \"sweep\": { \"schedule\": \"GPipe\", \"ranks\": 2, \"microbatches\": 8,"
    "  \"max_freeze_ratio\": 0 } }";

static void solve_one(tf_study *s, tf_study_row *row)
{
    tf_study_config *configs;
    int n;
    tf_error err = {0};
    assert_int_equal(tf_study_configs(s, &configs, &n, &err), 0);
    assert_int_equal(n, 1);
    tf_study_solve(s, &configs[0], TF_OBJECTIVE_LEAST_FREEZE, row);
    free(configs);
    if (row->status != TF_STUDY_SOLVED)
        fprintf(stderr, "%s\n", row->reason);
    assert_int_equal(row->status, TF_STUDY_SOLVED);
}

static void test_fit_by_recomputation(void **state)
{
    (void)state;
    tf_study s;
    tf_error err = {0};
    assert_int_equal(tf_study_parse(auto_study, "auto.json", &s, &err), 0);
    tf_study_row free_row, fit_row, over_row;
    solve_one(&s, &free_row);
    assert_int_equal(free_row.fits, -1);
    /* Each rank's 4 layers per microbatch: 8 in flight on rank 0. */
    tf_activation_bytes layer_bytes;
    tf_transformer_layer_bytes(&s.shape, 0, TF_RECOMPUTE_NONE, &layer_bytes);
    assert_float_equal(free_row.peak_activation_bytes, 8 * 4 * layer_bytes.activation, 1e-3);

    const double half = free_row.peak_memory_bytes - free_row.peak_activation_bytes / 2;
    assert_int_equal(tf_study_set_gpu_memory(&s, half, &err), 0);
    solve_one(&s, &fit_row);
    assert_int_equal(fit_row.fits, 1);
    assert_true(fit_row.fit_recomputes);
    assert_false(fit_row.fit_freezes);
    assert_true(fit_row.peak_memory_bytes <= half * (1 + 1e-9));
    assert_true(fit_row.batch_ms_planned > free_row.batch_ms_planned);

    assert_int_equal(tf_study_set_gpu_memory(&s, free_row.peak_memory_bytes -
                                                     free_row.peak_activation_bytes, &err), 0);
    solve_one(&s, &over_row);
    assert_int_equal(over_row.fits, 0);
    assert_float_equal(over_row.batch_ms_planned, free_row.batch_ms_planned, 1e-9);
    assert_float_equal(over_row.peak_memory_bytes, free_row.peak_memory_bytes, 1e-3);
    tf_study_free(&s);
}

/* Measured bytes per layer under recomputation: "full" keeps each layer's
 * checkpoint alone (A = A_f = C) while the ends keep theirs; "auto" keeps
 * everything and lets the planner recompute the layers, from the same
 * checkpoint, at the stage's forward time. */
static const char *const measured_study =
    "{ \"model\": { \"layers\": 4, \"layer_forward_ms\": 1.5, \"layer_backward_ms\": 3,"
    "  \"microbatch_tokens\": 512, \"activation_bytes_per_layer\": 1000,"
    "  \"checkpoint_bytes_per_layer\": 100, \"static_bytes_per_layer\": 7,"
    "  \"first_stage_extra_bytes\": { \"activation_bytes\": 50 },"
    "  \"recompute\": [\"full\", \"auto\"] },"
    "  \"sweep\": { \"schedule\": \"1F1B\", \"ranks\": 2, \"microbatches\": 2 } }";

static void test_measured_recompute(void **state)
{
    (void)state;
    tf_study s;
    tf_error err = {0};
    tf_study_config *configs;
    int n;
    assert_int_equal(tf_study_parse(measured_study, "measured.json", &s, &err), 0);
    assert_int_equal(tf_study_configs(&s, &configs, &n, &err), 0);
    assert_int_equal(n, 2);
    tf_profile full, with_auto;
    assert_int_equal(configs[0].recompute, TF_RECOMPUTE_FULL);
    assert_int_equal(tf_study_make_profile(&s, &configs[0], &full, &err), 0);
    assert_int_equal(tf_study_make_profile(&s, &configs[1], &with_auto, &err), 0);
    const tf_stage_memory *f0 = &full.memory[0], *a0 = &with_auto.memory[0];
    assert_float_equal(f0->activation_bytes, 2 * 100 + 50, 0);
    assert_float_equal(f0->activation_frozen_bytes, 2 * 100 + 50, 0);
    assert_float_equal(f0->static_bytes, 2 * 7, 0);
    assert_false(f0->recomputes);
    /* The backward re-runs the stage's two layers' forward. */
    assert_float_equal(full.stages[0].backward_ms, 2 * 3 + 2 * 1.5, 1e-12);
    assert_float_equal(a0->activation_bytes, 2 * 1000 + 50, 0);
    assert_float_equal(a0->checkpoint_bytes, 2 * 100 + 50, 0);
    assert_true(a0->recomputes);
    assert_float_equal(a0->recompute_ms, 2 * 1.5, 1e-12);
    tf_profile_free(&full);
    tf_profile_free(&with_auto);
    free(configs);
    tf_study_free(&s);
}

/* Megatron-LM's theoretical_memory_usage for the first stage of the 1T
 * run (t = 8, p = 64, 1F1B, sequence parallelism and selective
 * recomputation, 18 bytes a parameter), written out here, against the
 * study's rank-0 peak.  They differ by exactly three things: Megatron
 * counts the LayerNorms' weights and biases divided by t (4h per layer over
 * t against 2h replicated here, and the final norm over p t), keeps the
 * embedding's int64 token ids (8sbp / t), and has no p2p buffers (2 x 2sbh
 * / t here). */
static void test_megatron_total(void **state)
{
    (void)state;
    const char *root = getenv("TF_SOURCE_DIR");
    if (!root)
        skip();
    const double h = 25600, L = 128, s = 2048, b = 1, t = 8, p = 64, V = 51200;
    const double layer_params = 12 * h * h + 4 * h, block = L * layer_params + 2 * h;
    const double weights = 18 * (block / p + V * h) / t;
    const double activations = (s * b * h * 34 * L + 8 * s * b * p + s * b * h * p) / t;
    const double megatron = weights + activations;
    const double differ = 18 * (4 * h - 8 * h / t - 2 * h / (p * t)) + 4 * s * b * h / t -
                          8 * s * b * p / t;

    tf_study st;
    tf_study_config *configs;
    int n = load_example(root, "1t.json", &st, &configs), seen = 0;
    for (int i = 0; i < n; i++) {
        if (!configs[i].sequence_parallel || configs[i].recompute != TF_RECOMPUTE_SELECTIVE)
            continue;
        tf_study_row row;
        tf_study_solve(&st, &configs[i], TF_OBJECTIVE_LEAST_FREEZE, &row);
        assert_int_equal(row.status, TF_STUDY_SOLVED);
        assert_float_equal(row.peak_memory_bytes, megatron + differ, 1.0);
        seen++;
    }
    assert_int_equal(seen, 1);
    free(configs);
    tf_study_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paper_formulas),
        cmocka_unit_test(test_full_recompute),
        cmocka_unit_test(test_frozen_and_weight_grad_shares),
        cmocka_unit_test(test_llama_variant),
        cmocka_unit_test(test_ends_and_static),
        cmocka_unit_test(test_figure_1),
        cmocka_unit_test(test_megatron_total),
        cmocka_unit_test(test_fit_by_recomputation),
        cmocka_unit_test(test_measured_recompute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
