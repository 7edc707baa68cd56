/* cuda_test_util.h - helpers of the CUDA tests (tests/cuda).
 *
 * Every CUDA test starts with cuda_tests_available(): without a GPU it first
 * checks that the backend refuses cleanly (an error with a message, no crash)
 * and then the test exits with 77, which ctest reports as skipped.
 */
#ifndef TFX_CUDA_TEST_UTIL_H
#define TFX_CUDA_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfx/cuda.h"
#include "tfx/rng.h"

#define TEST_SKIP 77

/* Returns 1 when a CUDA device is visible.  Otherwise checks the error path
 * of the backend and returns 0 (the caller exits with TEST_SKIP), or exits
 * with 1 when the error path misbehaves. */
static inline int cuda_tests_available(const char *test)
{
    if (tfx_cuda_device_count() > 0)
        return 1;
    tf_error err = {0};
    tfx_backend be = {0};
    int rc = tfx_backend_cuda_create(0, 0, &be, &err);
    if (rc != TF_ERUNTIME || !err.msg[0] || be.ops) {
        fprintf(stderr, "%s: without a GPU, tfx_backend_cuda_create returned %d (\"%s\")\n",
                test, rc, err.msg);
        exit(1);
    }
    int device = -1;
    tf_error err2 = {0};
    if (tfx_cuda_device_for_rank("0", 0, &device, &err2) != TF_ERUNTIME || !err2.msg[0]) {
        fprintf(stderr, "%s: without a GPU, tfx_cuda_device_for_rank did not fail\n", test);
        exit(1);
    }
    printf("%s: skipped, no CUDA device (the backend refused cleanly: %s)\n", test, err.msg);
    return 0;
}

/* Uniform values in [-scale, scale). */
static inline void random_fill(float *x, size_t n, uint64_t seed, double scale)
{
    tfx_rng r = tfx_rng_for(seed, TFX_RNG_TEST, n, 0, 0);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((2.0 * tfx_rng_uniform(&r) - 1.0) * scale);
}

/* max |got - ref| / max |ref|: the norm-wise relative error, which does not
 * blow up on elements that cancel to nearly zero. */
static inline double normwise_error(const float *ref, const float *got, size_t n)
{
    double diff = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)got[i] - ref[i]));
        scale = fmax(scale, fabs((double)ref[i]));
        if (isnan(got[i]) != isnan(ref[i]))
            return INFINITY;
    }
    return diff / scale;
}

/* Device copy of n floats (or bytes when elem is 1) from host. */
static inline void *device_copy_of(tfx_backend *g, const void *host, size_t bytes)
{
    void *dev = NULL;
    tf_error err = {0};
    if (g->ops->alloc(g->ctx, bytes, &dev, &err) != 0) {
        fprintf(stderr, "device allocation failed: %s\n", err.msg);
        exit(1);
    }
    if (host)
        g->ops->upload(g->ctx, dev, host, bytes);
    return dev;
}

#endif
