/* test_exec_golden.c - tf-exec's GPT against PyTorch.
 *
 * tests/executor/golden/gpt_tiny.bin was written by
 * tools/reference/gpt_golden.py: the same model built from PyTorch's own
 * modules, run in float64 on float32 weights, with one microbatch's tokens,
 * targets, loss, logits and every parameter's gradient.  Here the weights go
 * into tf-exec's model, which runs the microbatch in float32 on the CPU
 * backend, once as one stage and once split over a two-rank pipeline.
 *
 * Tolerances.  The golden file is exact to float64; what differs is tf-exec's
 * float32 arithmetic.  A float32 dot product of length K carries a relative
 * error of order sqrt(K) * 6e-8 with random rounding (K * 6e-8 at worst);
 * the longest here are K = 32 tokens (dW) and 3 x 16 (dX), and a gradient
 * passes through about 30 such ops from the loss, so errors of 1e-6 of a
 * tensor's scale are expected and 1e-5 would need unusually unlucky
 * rounding.  Measured when the file was made: loss 1e-7 relative, every
 * gradient within 7e-7 of its tensor's largest entry.  So:
 *   loss                    1e-5 relative;
 *   probabilities           1e-4 relative per entry (1e-3 absolute floor);
 *   gradients               max |got - ref| <= 1e-5 x max |ref| of the
 *                           tensor, plus 1e-8 absolute.
 * A wrong op (a missing 1/sqrt(head_size), a mask one off, a transposed
 * weight) moves gradients by 1e-1 or more of their scale.
 */
#include <math.h>

#include "test_util.h"
#include "tf/schedule.h"
#include "tfx/model.h"
#include "tfx/runtime.h"

#define GOLDEN "tests/executor/golden/gpt_tiny.bin"

typedef struct golden {
    tfx_model_config cfg;
    int vocab, n_tensors;
    char (*names)[48];
    int32_t *tokens, *targets;
    double loss;
    float *logits;
    float **weights, **grads;
    size_t *counts;
} golden;

static void read_exact(FILE *f, void *buf, size_t bytes)
{
    if (fread(buf, 1, bytes, f) != bytes)
        fail_msg("%s: truncated", GOLDEN);
}

static int32_t read_i32(FILE *f)
{
    int32_t v;
    read_exact(f, &v, sizeof v);
    return v;
}

static void golden_load(golden *g)
{
    char path[1024];
    FILE *f = fopen(source_path(GOLDEN, path, sizeof path), "rb");
    assert_non_null(f);
    char magic[8];
    read_exact(f, magic, 8);
    assert_memory_equal(magic, "TFXGOLD1", 8);
    g->cfg.layers = read_i32(f);
    g->cfg.hidden = read_i32(f);
    g->cfg.heads = read_i32(f);
    g->cfg.ffn = read_i32(f);
    g->cfg.context = read_i32(f);
    g->cfg.microbatch_size = read_i32(f);
    g->vocab = read_i32(f);
    g->n_tensors = read_i32(f);
    assert_int_equal(g->vocab, TFX_VOCAB);
    const int T = g->n_tensors, N = g->cfg.context * g->cfg.microbatch_size;
    g->names = calloc((size_t)T, sizeof *g->names);
    g->counts = calloc((size_t)T, sizeof *g->counts);
    for (int t = 0; t < T; t++) {
        int len = read_i32(f);
        assert_true(len > 0 && len < 48);
        read_exact(f, g->names[t], (size_t)len);
        int rows = read_i32(f), cols = read_i32(f);
        g->counts[t] = (size_t)rows * cols;
    }
    g->tokens = malloc(sizeof(int32_t) * N);
    g->targets = malloc(sizeof(int32_t) * N);
    read_exact(f, g->tokens, sizeof(int32_t) * N);
    read_exact(f, g->targets, sizeof(int32_t) * N);
    read_exact(f, &g->loss, sizeof g->loss);
    g->logits = malloc(sizeof(float) * N * TFX_VOCAB);
    read_exact(f, g->logits, sizeof(float) * N * TFX_VOCAB);
    g->weights = calloc((size_t)T, sizeof *g->weights);
    g->grads = calloc((size_t)T, sizeof *g->grads);
    for (int t = 0; t < T; t++) {
        g->weights[t] = malloc(sizeof(float) * g->counts[t]);
        read_exact(f, g->weights[t], sizeof(float) * g->counts[t]);
    }
    for (int t = 0; t < T; t++) {
        g->grads[t] = malloc(sizeof(float) * g->counts[t]);
        read_exact(f, g->grads[t], sizeof(float) * g->counts[t]);
    }
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
}

static void golden_free(golden *g)
{
    for (int t = 0; t < g->n_tensors; t++) {
        free(g->weights[t]);
        free(g->grads[t]);
    }
    free(g->weights);
    free(g->grads);
    free(g->names);
    free(g->counts);
    free(g->tokens);
    free(g->targets);
    free(g->logits);
}

/* The layout names and shapes the tensors as the golden file does. */
static void check_layout_matches(const golden *g, const tfx_model_layout *l)
{
    assert_int_equal(l->n_tensors, g->n_tensors);
    for (int t = 0; t < g->n_tensors; t++) {
        assert_string_equal(l->tensors[t].name, g->names[t]);
        assert_int_equal(l->tensors[t].count, g->counts[t]);
    }
}

static void check_gradient(const golden *g, int t, const float *got)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < g->counts[t]; i++) {
        worst = fmax(worst, fabs((double)got[i] - g->grads[t][i]));
        scale = fmax(scale, fabs((double)g->grads[t][i]));
    }
    if (getenv("TFX_TEST_VERBOSE"))
        fprintf(stderr, "%-24s max|ref| %.3g  max error %.3g (%.2g relative)\n", g->names[t],
                scale, worst, worst / fmax(scale, 1e-30));
    if (!(worst <= 1e-5 * scale + 1e-8))
        fail_msg("%s: gradient differs from PyTorch by %.3g (max |ref| %.3g)", g->names[t],
                 worst, scale);
}

/* log softmax of one row of the golden file's logits, entry j. */
static double ref_log_prob(const float *row, int j)
{
    double mx = row[0], sum = 0.0;
    for (int k = 1; k < TFX_VOCAB; k++)
        mx = fmax(mx, row[k]);
    for (int k = 0; k < TFX_VOCAB; k++)
        sum += exp(row[k] - mx);
    return row[j] - mx - log(sum);
}

/* One stage on the CPU backend: loss, log-probabilities (recovered from the
 * logits' gradient, which the last stage keeps in place of the logits:
 * softmax = dlogits / scale + onehot) and every gradient. */
static void test_one_stage_matches_pytorch(void **state)
{
    (void)state;
    golden g;
    golden_load(&g);
    tf_error err = {0};
    tfx_model_layout l;
    assert_int_equal(tfx_model_layout_build(&g.cfg, 1, &l, &err), 0);
    check_layout_matches(&g, &l);
    tfx_backend be;
    assert_int_equal(tfx_backend_cpu_create(0, &be, &err), 0);
    tfx_stage s;
    const tfx_stage_spec spec = {.layout = &l, .stage = 0, .backend = be, .microbatches = 1,
                                 .seed = 1};
    assert_int_equal(tfx_stage_create(&spec, &s, &err), 0);
    for (int t = 0; t < l.n_tensors; t++)
        be.ops->upload(be.ctx, s.param[t], g.weights[t], g.counts[t] * sizeof(float));

    const int N = s.tokens;
    const float scale = 1.0f / (float)N;
    assert_int_equal(tfx_stage_forward(&s, 0, g.tokens, g.targets, scale, &err), 0);
    assert_close(s.act[0].loss_sum / N, g.loss, 1e-5);
    const float *d = s.act[0].dlogits;
    double worst = 0.0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < TFX_VOCAB; j++) {
            double p = d[(size_t)i * TFX_VOCAB + j] / scale + (j == g.targets[i]);
            double ref = exp(ref_log_prob(g.logits + (size_t)i * TFX_VOCAB, j));
            worst = fmax(worst, fabs(p - ref) / fmax(ref, 1e-3));
        }
    if (!(worst < 1e-4))
        fail_msg("probabilities differ from PyTorch's by %.3g relative", worst);

    assert_int_equal(tfx_stage_backward_input(&s, 0, &err), 0);
    assert_int_equal(tfx_stage_backward_weight(&s, 0, NULL, &err), 0);
    for (int t = 0; t < l.n_tensors; t++) {
        float *got = malloc(g.counts[t] * sizeof *got);
        be.ops->download(be.ctx, got, s.grad[t], g.counts[t] * sizeof(float));
        check_gradient(&g, t, got);
        free(got);
    }
    tfx_stage_destroy(&s);
    be.ops->destroy(be.ctx);
    tfx_model_layout_free(&l);
    golden_free(&g);
}

/* The same microbatch through a two-rank 1F1B pipeline: the split into
 * stages and the transport change nothing beyond float32 rounding. */
static void test_pipeline_matches_pytorch(void **state)
{
    (void)state;
    golden g;
    golden_load(&g);
    tf_error err = {0};
    tf_schedule sched;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 1, &sched, &err), 0);
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    tfx_pipeline *p;
    assert_int_equal(tfx_pipeline_create(&sched, &g.cfg, &po, &p, &err), 0);
    check_layout_matches(&g, tfx_pipeline_layout(p));
    for (int t = 0; t < g.n_tensors; t++)
        tfx_pipeline_write_tensor(p, t, TFX_BUF_PARAM, g.weights[t]);
    tfx_step_input in = {.tokens = g.tokens, .targets = g.targets, .frozen = NULL,
                         .apply_optimizer = 0};
    tfx_step_result res;
    assert_int_equal(tfx_pipeline_step(p, &in, &res, &err), 0);
    assert_close(res.loss, g.loss, 1e-5);
    for (int t = 0; t < g.n_tensors; t++) {
        float *got = malloc(g.counts[t] * sizeof *got);
        tfx_pipeline_read_tensor(p, t, TFX_BUF_GRAD, got);
        check_gradient(&g, t, got);
        free(got);
    }
    tfx_pipeline_destroy(p);
    tf_schedule_free(&sched);
    golden_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_stage_matches_pytorch),
        cmocka_unit_test(test_pipeline_matches_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
