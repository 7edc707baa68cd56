/* bench-exec: how close the CPU backend's training step comes to the
 * machine's single-thread SGEMM throughput.
 *
 * Each round times, back to back so that a shared machine's load drifts
 * over all of them alike:
 *   sgemm 1024^3   one thread, C = A B with n = 1024: the machine's SGEMM
 *   sgemm model    one thread, the model's largest GEMM (N x 4C x C)
 *   1 rank         a whole training step of the model on one rank (one
 *                  thread, GPipe), in GEMM-equivalent FLOP/s: the FLOPs of
 *                  every GEMM the step runs (attention's included) over the
 *                  step's wall time, so the rest of the step (norms, GELU,
 *                  softmax, AdamW, copies) counts as time without FLOPs
 *   2 ranks        the same on 2 ranks (1F1B, one thread each), per rank:
 *                  lower by the pipeline's bubbles
 * and prints each round, then the median of the ratios to sgemm 1024^3.
 * It prints measurements and asserts nothing.
 */
#include <cblas.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "tf/schedule.h"
#include "tf/util.h"
#include "tfx/corpus.h"
#include "tfx/runtime.h"

typedef struct options {
    tfx_model_config model;
    int rounds, steps;
} options;

/* GFLOP/s of one-thread SGEMM C (m x n) = A (m x k) B (k x n), over at
 * least a second after a warm-up call. */
static double sgemm_gflops(int m, int n, int k)
{
    float *a = calloc((size_t)m * k, sizeof *a), *b = calloc((size_t)k * n, sizeof *b);
    float *c = calloc((size_t)m * n, sizeof *c);
    for (size_t i = 0; i < (size_t)m * k; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)k * n; i++)
        b[i] = (float)(i % 5) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    long reps = 0;
    double t0 = tf_now_seconds(), t = 0.0;
    while (t < 1.0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f,
                    c, n);
        reps++;
        t = tf_now_seconds() - t0;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * m * n * k * reps / t / 1e9;
}

/* GEMM-equivalent GFLOP/s of training steps of o->model on `ranks` ranks
 * (GPipe for one, 1F1B for more; 4 microbatches), per rank, after two
 * warm-up steps.  Returns -1 after printing a failure. */
static double step_gflops(const options *o, int ranks)
{
    tf_schedule s;
    tf_error err = {0};
    tfx_pipeline *p = NULL;
    tfx_corpus corpus;
    double result = -1.0;
    const int M = 4, N = o->model.context * o->model.microbatch_size;
    int32_t *tokens = malloc(sizeof(int32_t) * M * N), *targets = malloc(sizeof(int32_t) * M * N);
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    if (tf_schedule_build(ranks == 1 ? "GPipe" : "1F1B", ranks, 1, M, &s, &err) ||
        tfx_corpus_builtin("base", 1 << 20, o->model.context, &corpus, &err) ||
        tfx_pipeline_create(&s, &o->model, &po, &p, &err)) {
        fprintf(stderr, "bench-exec: %s\n", err.msg);
        goto done;
    }
    double flops = 0.0, ms = 0.0;
    for (int step = 0; step < o->steps + 2; step++) {
        tfx_step_result res;
        const tfx_batch batch = {M, o->model.microbatch_size, o->model.context, tokens, targets};
        tfx_corpus_batch(&corpus, 1, step, &batch);
        tfx_step_input in = {.tokens = tokens, .targets = targets, .apply_optimizer = 1};
        if (tfx_pipeline_step(p, &in, &res, &err)) {
            fprintf(stderr, "bench-exec: %s\n", err.msg);
            goto done;
        }
        if (step >= 2) {
            flops += res.flops;
            ms += res.step_ms;
        }
    }
    result = flops / (ms * 1e6) / ranks;
done:
    tfx_pipeline_destroy(p);
    tfx_corpus_free(&corpus);
    tf_schedule_free(&s);
    free(tokens);
    free(targets);
    return result;
}

static int parse_args(int argc, char **argv, options *o)
{
    static const struct option longs[] = {
        {"rounds", required_argument, NULL, 'r'}, {"steps", required_argument, NULL, 's'},
        {"layers", required_argument, NULL, 'L'}, {"hidden", required_argument, NULL, 'C'},
        {"heads", required_argument, NULL, 'A'},  {"ffn", required_argument, NULL, 'F'},
        {"context", required_argument, NULL, 'T'},
        {"microbatch-size", required_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    int *field[128] = {0};
    field['r'] = &o->rounds, field['s'] = &o->steps, field['L'] = &o->model.layers;
    field['C'] = &o->model.hidden, field['A'] = &o->model.heads, field['F'] = &o->model.ffn;
    field['T'] = &o->model.context, field['B'] = &o->model.microbatch_size;
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (c == 'h' || c == '?' || c >= 128 || !field[c]) {
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: bench-exec [--rounds R (3)] [--steps N (10)] [--layers L]\n"
                    "                  [--hidden C] [--heads A] [--ffn F] [--context T]\n"
                    "                  [--microbatch-size B]   (model: tf-exec's defaults)\n");
            return c == 'h' ? 0 : 2;
        }
        char *end;
        long v = strtol(optarg, &end, 10);
        if (*end || v < 1 || v > 65536) {
            const char *name = "";
            for (int i = 0; longs[i].name; i++)
                if (longs[i].val == c)
                    name = longs[i].name;
            fprintf(stderr, "bench-exec: --%s \"%s\": expected an integer from 1 to 65536\n",
                    name, optarg);
            return 2;
        }
        *field[c] = (int)v;
    }
    return -1;
}

int main(int argc, char **argv)
{
    options o = {.rounds = 3, .steps = 10};
    tfx_model_config_default(&o.model);
    o.model.heads = o.model.ffn = 0; /* derived from the width unless given, as in tf-exec */
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (!o.model.heads)
        o.model.heads = tfx_model_default_heads(o.model.hidden);
    if (!o.model.ffn)
        o.model.ffn = tfx_model_default_ffn(o.model.hidden);
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(1); /* one thread, as the CPU backend runs it */
#endif
    const tfx_model_config *m = &o.model;
    const int N = m->context * m->microbatch_size;
    printf("model: %d layers, width %d, %d heads, MLP %d, %d x %d tokens per microbatch\n",
           m->layers, m->hidden, m->heads, m->ffn, m->microbatch_size, m->context);
    printf("GFLOP/s per thread; sgemm model is the model's largest GEMM, %d x %d x %d;\n"
           "ratios to sgemm 1024^3 of the same round\n\n", N, 4 * m->hidden, m->hidden);
    printf("round  sgemm 1024^3  sgemm model  1 rank  ratio  2 ranks  ratio\n");
    double r1[64], r2[64];
    for (int r = 0; r < o.rounds && r < 64; r++) {
        double ref = sgemm_gflops(1024, 1024, 1024);
        double shaped = sgemm_gflops(N, 4 * m->hidden, m->hidden);
        double one = step_gflops(&o, 1), two = step_gflops(&o, 2);
        if (one < 0 || two < 0)
            return 1;
        r1[r] = one / ref;
        r2[r] = two / ref;
        printf("%5d  %12.1f  %11.1f  %6.1f  %5.2f  %7.1f  %5.2f\n", r + 1, ref, shaped, one,
               r1[r], two, r2[r]);
        fflush(stdout);
    }
    printf("\nmedian ratio: 1 rank %.2f, 2 ranks %.2f per rank\n", tf_median(r1, o.rounds),
           tf_median(r2, o.rounds));
    return 0;
}
