/* test_cuda_model.c - the model on the CUDA backend against the CPU.
 *
 * The same seed and batch go through (a) one CPU stage holding the whole
 * model and (b) two CUDA stages on two ranks joined by a transport: the
 * "cuda" transport with both ranks on device 0 (two streams), and when two
 * GPUs are visible also across devices and over NCCL.  The loss and every
 * parameter gradient must agree (norm-wise 1e-4: FP32 sums in another order
 * through a few layers), and freezing must skip exactly the frozen tensors'
 * dW work on the GPU as it does on the CPU.  Skipped (77) without a GPU.
 */
#include <math.h>
#include <stdint.h>

#include "test_util.h"
#include "cuda_test_util.h"
#include "tfx/model.h"

#define MICROBATCHES 2
#define TOL_LOSS 1e-5
#define TOL_GRAD 1e-4

typedef struct reference {
    tfx_model_config cfg;
    int32_t *tokens, *targets;
    double loss;
    float **grad;      /* per global tensor */
    int n_tensors;
    tfx_dw_counts counts;
} reference;

static void config(tfx_model_config *c)
{
    tfx_model_config_default(c);
    c->layers = 4;
    c->hidden = 64;
    c->heads = 4;
    c->ffn = 256;
    c->context = 16;
    c->microbatch_size = 4;
}

static float scale_of(const tfx_model_config *c)
{
    return 1.0f / ((float)tfx_model_microbatch_tokens(c) * MICROBATCHES);
}

#define OK(call)                                                                           \
    do {                                                                                   \
        tf_error e_ = {0};                                                                 \
        tf_error *err = &e_;                                                               \
        if ((call) != 0)                                                                   \
            fail_msg("%s: %s", #call, e_.msg);                                             \
        (void)err;                                                                         \
    } while (0)

/* The whole model on one CPU stage. */
static void cpu_reference(reference *ref, const unsigned char *frozen)
{
    tfx_model_layout l;
    tfx_stage st;
    tfx_backend cpu;
    config(&ref->cfg);
    const int N = tfx_model_microbatch_tokens(&ref->cfg);
    OK(tfx_model_layout_build(&ref->cfg, 1, &l, err));
    OK(tfx_backend_cpu_create(0, &cpu, err));
    OK(tfx_stage_create(&(tfx_stage_spec){&l, 0, cpu, MICROBATCHES, 0, 1234, 0, NULL, 0}, &st, err));
    ref->loss = 0;
    for (int m = 0; m < MICROBATCHES; m++) {
        OK(tfx_stage_forward(&st, m, ref->tokens + m * N, ref->targets + m * N,
                             scale_of(&ref->cfg), err));
        ref->loss += st.act[m].loss_sum;
    }
    for (int m = MICROBATCHES - 1; m >= 0; m--) {
        OK(tfx_stage_backward_input(&st, m, err));
        OK(tfx_stage_backward_weight(&st, m, frozen ? frozen + (size_t)m * l.n_tensors : NULL,
                                     err));
    }
    ref->n_tensors = l.n_tensors;
    ref->counts = st.counts;
    ref->grad = calloc((size_t)l.n_tensors, sizeof *ref->grad);
    for (int t = 0; t < l.n_tensors; t++) {
        ref->grad[t] = malloc(l.tensors[t].count * sizeof(float));
        memcpy(ref->grad[t], st.grad[t], l.tensors[t].count * sizeof(float));
    }
    tfx_stage_destroy(&st);
    cpu.ops->destroy(cpu.ctx);
    tfx_model_layout_free(&l);
}

static void reference_free(reference *ref)
{
    for (int t = 0; t < ref->n_tensors; t++)
        free(ref->grad[t]);
    free(ref->grad);
}

enum { VIA_CUDA = 0, VIA_NCCL = 1 };

/* Two CUDA stages on ranks 0 and 1 (devices d0, d1) joined by a transport,
 * driven by this thread in a GPipe order; compares with ref. */
static void gpu_pipeline(const reference *ref, const unsigned char *frozen, int via, int d0,
                         int d1)
{
    tfx_model_layout l;
    tfx_backend be[2];
    tfx_stage st[2];
    tfx_transport tr;
    const int N = tfx_model_microbatch_tokens(&ref->cfg);
    OK(tfx_model_layout_build(&ref->cfg, 2, &l, err));
    OK(tfx_backend_cuda_create(0, d0, &be[0], err));
    OK(tfx_backend_cuda_create(1, d1, &be[1], err));
    if (via == VIA_CUDA) {
        OK(tfx_transport_cuda_create(2, be, &tr, err));
    } else {
        int ranks[2] = {0, 1}, stage_rank[2] = {0, 1};
        tfx_nccl_options o = {2, 2, ranks, be, 2, stage_rank, NULL, NULL, 60.0};
        OK(tfx_transport_nccl_create(&o, &tr, err));
    }
    for (int s = 0; s < 2; s++)
        OK(tfx_stage_create(&(tfx_stage_spec){&l, s, be[s], MICROBATCHES, 0, 1234, 0, NULL, 0}, &st[s], err));
    const size_t bytes = tfx_stage_boundary_bytes(&st[0]);
    double loss = 0;
    for (int m = 0; m < MICROBATCHES; m++) {
        OK(tfx_stage_forward(&st[0], m, ref->tokens + m * N, NULL, scale_of(&ref->cfg), err));
        OK(tr.ops->send(tr.ctx, 0, 1, m, tfx_stage_output(&st[0], m), bytes, err));
    }
    for (int m = 0; m < MICROBATCHES; m++) {
        OK(tr.ops->recv(tr.ctx, 1, 0, m, tfx_stage_input(&st[1], m), bytes, err));
        OK(tfx_stage_forward(&st[1], m, NULL, ref->targets + m * N, scale_of(&ref->cfg), err));
        loss += st[1].act[m].loss_sum;
    }
    for (int m = MICROBATCHES - 1; m >= 0; m--) {
        const unsigned char *f = frozen ? frozen + (size_t)m * l.n_tensors : NULL;
        OK(tfx_stage_backward_input(&st[1], m, err));
        OK(tfx_stage_backward_weight(&st[1], m, f ? f + st[1].first_tensor : NULL, err));
        OK(tr.ops->send(tr.ctx, 1, 0, 100 + m, tfx_stage_grad_out(&st[1], m), bytes, err));
    }
    /* Stage 0 receives the gradients in the other order: the transport
     * matches by tag, not by arrival. */
    for (int m = 0; m < MICROBATCHES; m++) {
        const unsigned char *f = frozen ? frozen + (size_t)m * l.n_tensors : NULL;
        OK(tr.ops->recv(tr.ctx, 0, 1, 100 + m, tfx_stage_grad_in(&st[0], m), bytes, err));
        OK(tfx_stage_backward_input(&st[0], m, err));
        OK(tfx_stage_backward_weight(&st[0], m, f ? f + st[0].first_tensor : NULL, err));
    }
    assert_int_equal(tr.ops->reset(tr.ctx), 0);
    assert_close(loss, ref->loss, TOL_LOSS);

    tfx_dw_counts counts = {0, 0, 0};
    for (int s = 0; s < 2; s++) {
        counts.gemms += st[s].counts.gemms;
        counts.reductions += st[s].counts.reductions;
        counts.skipped += st[s].counts.skipped;
        for (int i = 0; i < st[s].n_tensors; i++) {
            int t = st[s].first_tensor + i;
            size_t n = l.tensors[t].count;
            float *got = malloc(n * sizeof *got);
            be[s].ops->download(be[s].ctx, got, st[s].grad[i], n * sizeof *got);
            double e = normwise_error(ref->grad[t], got, n);
            int all_zero = 1;
            for (size_t k = 0; k < n; k++)
                all_zero &= ref->grad[t][k] == 0.0f && got[k] == 0.0f;
            if (!all_zero && !(e <= TOL_GRAD))
                fail_msg("%s (via %s): gradient norm-wise error %.3g exceeds %.1g",
                         l.tensors[t].name, via == VIA_CUDA ? "cuda" : "nccl", e, TOL_GRAD);
            free(got);
        }
    }
    assert_int_equal(counts.gemms, ref->counts.gemms);
    assert_int_equal(counts.reductions, ref->counts.reductions);
    assert_int_equal(counts.skipped, ref->counts.skipped);
    tfx_stage_destroy(&st[0]);
    tfx_stage_destroy(&st[1]);
    tr.ops->destroy(tr.ctx);
    be[0].ops->destroy(be[0].ctx);
    be[1].ops->destroy(be[1].ctx);
    tfx_model_layout_free(&l);
}

static void batch(reference *ref)
{
    config(&ref->cfg);
    const int n = tfx_model_microbatch_tokens(&ref->cfg) * MICROBATCHES;
    ref->tokens = malloc(sizeof(int32_t) * n);
    ref->targets = malloc(sizeof(int32_t) * n);
    tfx_rng r = tfx_rng_for(99, TFX_RNG_TEST, 0, 0, 0);
    for (int i = 0; i < n; i++) {
        ref->tokens[i] = (int32_t)tfx_rng_below(&r, 256);
        ref->targets[i] = (int32_t)tfx_rng_below(&r, 256);
    }
}

static void run_all(const unsigned char *frozen)
{
    reference ref = {0};
    batch(&ref);
    cpu_reference(&ref, frozen);
    gpu_pipeline(&ref, frozen, VIA_CUDA, 0, 0);
    if (tfx_cuda_device_count() >= 2) {
        gpu_pipeline(&ref, frozen, VIA_CUDA, 0, 1);
        gpu_pipeline(&ref, frozen, VIA_NCCL, 0, 1);
    } else {
        printf("one GPU: the two-device and NCCL variants are not run\n");
    }
    reference_free(&ref);
    free(ref.tokens);
    free(ref.targets);
}

static void test_unfrozen(void **state)
{
    (void)state;
    run_all(NULL);
}

/* Every other tensor frozen in microbatch 0, everything in microbatch 1. */
static void test_frozen(void **state)
{
    (void)state;
    tfx_model_config c;
    config(&c);
    tfx_model_layout l;
    OK(tfx_model_layout_build(&c, 1, &l, err));
    unsigned char *frozen = calloc((size_t)MICROBATCHES * l.n_tensors, 1);
    for (int t = 0; t < l.n_tensors; t++) {
        frozen[t] = t % 2;
        frozen[l.n_tensors + t] = 1;
    }
    run_all(frozen);
    free(frozen);
    tfx_model_layout_free(&l);
}

/* NCCL refuses two ranks of one communicator on one GPU (NCCL < 2.30). */
static void test_nccl_same_device_refused(void **state)
{
    (void)state;
    tfx_backend be[2];
    tfx_transport tr;
    tf_error err = {0};
    assert_int_equal(tfx_backend_cuda_create(0, 0, &be[0], &err), 0);
    assert_int_equal(tfx_backend_cuda_create(1, 0, &be[1], &err), 0);
    int ranks[2] = {0, 1}, stage_rank[2] = {0, 1};
    tfx_nccl_options o = {2, 2, ranks, be, 2, stage_rank, NULL, NULL, 10.0};
    int rc = tfx_transport_nccl_create(&o, &tr, &err);
    if (getenv("NCCL_MULTI_RANK_GPU_ENABLE")) {
        if (rc == 0)
            tr.ops->destroy(tr.ctx);
    } else {
        assert_int_equal(rc, TF_EINVAL);
        assert_contains(err.msg, "--transport cuda");
    }
    be[0].ops->destroy(be[0].ctx);
    be[1].ops->destroy(be[1].ctx);
}

int main(void)
{
    if (!cuda_tests_available("test_cuda_model"))
        return TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unfrozen),
        cmocka_unit_test(test_frozen),
        cmocka_unit_test(test_nccl_same_device_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
