/* test_cuda_transport.c - the transport contract (tfx/transport.h) for the
 * in-process CUDA transport (ranks on one GPU, separate streams) and, with
 * two GPUs, the NCCL transport: eager sends, receives matched by tag in any
 * order, size mismatches reported, abort waking a blocked receive with the
 * failing rank's message, reset dropping undelivered messages.  Skipped
 * (77) without a GPU.
 */
#include <pthread.h>
#include <stdint.h>

#include "test_util.h"
#include "cuda_test_util.h"

enum { VIA_CUDA = 0, VIA_NCCL = 1 };

typedef struct fixture {
    tfx_backend be[2];
    tfx_transport tr;
} fixture;

static void open_fixture(fixture *f, int via)
{
    tf_error err = {0};
    int two = tfx_cuda_device_count() >= 2;
    for (int r = 0; r < 2; r++)
        if (tfx_backend_cuda_create(r, two && via == VIA_NCCL ? r : 0, &f->be[r], &err) != 0)
            fail_msg("backend: %s", err.msg);
    int rc;
    if (via == VIA_CUDA) {
        rc = tfx_transport_cuda_create(2, f->be, &f->tr, &err);
    } else {
        int ranks[2] = {0, 1}, stage_rank[2] = {0, 1};
        tfx_nccl_options o = {2, 2, ranks, f->be, 2, stage_rank, NULL, NULL, 60.0};
        rc = tfx_transport_nccl_create(&o, &f->tr, &err);
    }
    if (rc != 0)
        fail_msg("transport: %s", err.msg);
}

static void close_fixture(fixture *f)
{
    f->tr.ops->destroy(f->tr.ctx);
    f->be[0].ops->destroy(f->be[0].ctx);
    f->be[1].ops->destroy(f->be[1].ctx);
}

static float *device_floats(tfx_backend *be, size_t n, float first)
{
    float *host = malloc(n * sizeof *host);
    for (size_t i = 0; i < n; i++)
        host[i] = first + (float)i;
    float *dev = device_copy_of(be, host, n * sizeof *host);
    free(host);
    return dev;
}

static void expect_floats(tfx_backend *be, const float *dev, size_t n, float first)
{
    tf_error err = {0};
    float *host = malloc(n * sizeof *host);
    if (be->ops->synchronize(be->ctx, &err) != 0)
        fail_msg("synchronize: %s", err.msg);
    be->ops->download(be->ctx, host, dev, n * sizeof *host);
    for (size_t i = 0; i < n; i++)
        if (host[i] != first + (float)i)
            fail_msg("element %zu is %g, expected %g", i, host[i], first + (float)i);
    free(host);
}

/* Sends tags 1, 2, 3 (different sizes), overwrites the source right after
 * each send (eager: the message must keep the old values), receives them
 * as 3, 1, 2, and sends back the other way. */
static void contract(int via)
{
    fixture f;
    open_fixture(&f, via);
    tfx_transport tr = f.tr;
    tf_error err = {0};
    const size_t sizes[4] = {0, 1000, 1, 300000};
    float *src = device_floats(&f.be[0], sizes[3], 0.0f);
    for (int tag = 1; tag <= 3; tag++) {
        float *msg = device_floats(&f.be[0], sizes[tag], 100.0f * tag);
        f.be[0].ops->copy(f.be[0].ctx, src, msg, sizes[tag] * sizeof(float));
        assert_int_equal(tr.ops->send(tr.ctx, 0, 1, tag, src, sizes[tag] * sizeof(float), &err), 0);
        f.be[0].ops->zero(f.be[0].ctx, src, sizes[3] * sizeof(float)); /* reuse at once */
        f.be[0].ops->free(f.be[0].ctx, msg);
    }
    const int order[3] = {3, 1, 2};
    for (int i = 0; i < 3; i++) {
        int tag = order[i];
        float *dst = device_copy_of(&f.be[1], NULL, sizes[tag] * sizeof(float));
        assert_int_equal(tr.ops->recv(tr.ctx, 1, 0, tag, dst, sizes[tag] * sizeof(float), &err), 0);
        expect_floats(&f.be[1], dst, sizes[tag], 100.0f * tag);
        f.be[1].ops->free(f.be[1].ctx, dst);
    }
    /* The other direction, a zero-byte message included. */
    float *back = device_floats(&f.be[1], 77, 5.0f);
    assert_int_equal(tr.ops->send(tr.ctx, 1, 0, 9, back, 77 * sizeof(float), &err), 0);
    assert_int_equal(tr.ops->send(tr.ctx, 1, 0, 10, back, 0, &err), 0);
    float *dst = device_copy_of(&f.be[0], NULL, 77 * sizeof(float));
    assert_int_equal(tr.ops->recv(tr.ctx, 0, 1, 10, dst, 0, &err), 0);
    assert_int_equal(tr.ops->recv(tr.ctx, 0, 1, 9, dst, 77 * sizeof(float), &err), 0);
    expect_floats(&f.be[0], dst, 77, 5.0f);
    /* A size mismatch is an error naming both sizes. */
    assert_int_equal(tr.ops->send(tr.ctx, 1, 0, 11, back, 77 * sizeof(float), &err), 0);
    assert_int_equal(tr.ops->recv(tr.ctx, 0, 1, 11, dst, 76 * sizeof(float), &err), TF_ERUNTIME);
    assert_contains(err.msg, "expected 304 bytes");
    /* Undelivered messages are dropped and counted by reset. */
    assert_int_equal(tr.ops->send(tr.ctx, 1, 0, 12, back, 77 * sizeof(float), &err), 0);
    assert_int_equal(tr.ops->send(tr.ctx, 1, 0, 13, back, 77 * sizeof(float), &err), 0);
    if (via == VIA_NCCL) {
        /* NCCL delivers in the background: wait until both arrived. */
        assert_int_equal(tr.ops->recv(tr.ctx, 0, 1, 13, dst, 77 * sizeof(float), &err), 0);
        assert_int_equal(tr.ops->reset(tr.ctx), 1);
    } else {
        assert_int_equal(tr.ops->reset(tr.ctx), 2);
    }
    assert_int_equal(tr.ops->reset(tr.ctx), 0);
    f.be[0].ops->free(f.be[0].ctx, src);
    f.be[0].ops->free(f.be[0].ctx, dst);
    f.be[1].ops->free(f.be[1].ctx, back);
    close_fixture(&f);
}

typedef struct blocked {
    tfx_transport tr;
    float *dst;
    int rc;
    tf_error err;
} blocked;

static void *blocked_receive(void *arg)
{
    blocked *b = arg;
    b->rc = b->tr.ops->recv(b->tr.ctx, 1, 0, 42, b->dst, 16, &b->err);
    return NULL;
}

/* A receive that can never be matched returns once another rank aborts. */
static void abort_wakes(int via)
{
    fixture f;
    open_fixture(&f, via);
    blocked b = {f.tr, NULL, 0, {0}};
    b.dst = device_copy_of(&f.be[1], NULL, 16);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, blocked_receive, &b), 0);
    struct timespec pause = {0, 100000000};
    nanosleep(&pause, NULL);
    f.tr.ops->abort(f.tr.ctx, 0, "injected failure");
    pthread_join(th, NULL);
    assert_int_equal(b.rc, TF_ERUNTIME);
    assert_contains(b.err.msg, "rank 0 failed: injected failure");
    /* Sends fail too until reset. */
    tf_error err = {0};
    assert_int_equal(f.tr.ops->send(f.tr.ctx, 0, 1, 1, b.dst, 16, &err), TF_ERUNTIME);
    assert_int_equal(f.tr.ops->reset(f.tr.ctx), 0);
    assert_int_equal(f.tr.ops->send(f.tr.ctx, 0, 1, 1, b.dst, 16, &err), 0);
    assert_int_equal(f.tr.ops->recv(f.tr.ctx, 1, 0, 1, b.dst, 16, &err), 0);
    f.be[1].ops->free(f.be[1].ctx, b.dst);
    close_fixture(&f);
}

static void test_cuda_contract(void **state)
{
    (void)state;
    contract(VIA_CUDA);
}

static void test_cuda_abort(void **state)
{
    (void)state;
    abort_wakes(VIA_CUDA);
}

static void test_nccl_contract(void **state)
{
    (void)state;
    if (tfx_cuda_device_count() < 2) {
        printf("one GPU: NCCL needs two devices for two ranks (NCCL < 2.30), not run\n");
        return;
    }
    contract(VIA_NCCL);
}

static void test_nccl_abort(void **state)
{
    (void)state;
    if (tfx_cuda_device_count() < 2)
        return;
    abort_wakes(VIA_NCCL);
}

/* The transport refuses a backend that is not CUDA. */
static void test_refuses_cpu_backend(void **state)
{
    (void)state;
    tfx_backend be[2];
    tfx_transport tr;
    tf_error err = {0};
    assert_int_equal(tfx_backend_cuda_create(0, 0, &be[0], &err), 0);
    assert_int_equal(tfx_backend_cpu_create(1, &be[1], &err), 0);
    assert_int_equal(tfx_transport_cuda_create(2, be, &tr, &err), TF_EINVAL);
    assert_contains(err.msg, "rank 1");
    be[0].ops->destroy(be[0].ctx);
    be[1].ops->destroy(be[1].ctx);
}

int main(void)
{
    if (!cuda_tests_available("test_cuda_transport"))
        return TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_contract),
        cmocka_unit_test(test_cuda_abort),
        cmocka_unit_test(test_nccl_contract),
        cmocka_unit_test(test_nccl_abort),
        cmocka_unit_test(test_refuses_cpu_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
