/* bench_cuda_gemm.c - tf-cuda-bench: GEMM throughput of the CUDA backend
 * against the device's peak, FP32 and TF32, at the model's shapes and at
 * large square ones.  Prints one line per case with TFLOP/s and the ratio
 * to the peak computed from the device (SMs x clock x FLOPs per SM and
 * clock), measured in one run (no assertions: a benchmark, not a test).
 *
 * usage: tf-cuda-bench [--device D] [--repeat N]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "tfx/cuda.h"

typedef struct shape {
    const char *label;
    int m, n, k;
} shape;

/* Peak FLOP/s per SM and clock: FP32 FMA lanes x 2, TF32 tensor cores. */
static void per_sm_clock(int major, int minor, double *fp32, double *tf32)
{
    *fp32 = (major == 8 && minor == 0) ? 128.0 : 256.0; /* A100: 64 lanes; sm_86+/90: 128 */
    *tf32 = major >= 9 ? 2048.0 : 1024.0;               /* dense TF32: H100 495, A100 156 */
}

/* Parses --device D and --repeat N.  Returns 0, 1 for --help, or -1
 * after saying what is wrong. */
static int parse_args(int argc, char **argv, int *device, int *repeat)
{
    static const struct option longopts[] = {{"device", required_argument, NULL, 'd'},
                                             {"repeat", required_argument, NULL, 'r'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        char *end = NULL;
        long v = (c == 'd' || c == 'r') ? strtol(optarg, &end, 10) : 0;
        if (c == 'h')
            return 1;
        if ((c == 'd' || c == 'r') && (end == optarg || *end || v < (c == 'd' ? 0 : 1) ||
                                       v > 1000000)) {
            fprintf(stderr, "tf-cuda-bench: %s \"%s\": expected a number\n",
                    c == 'd' ? "--device" : "--repeat", optarg);
            return -1;
        }
        if (c == 'd')
            *device = (int)v;
        else if (c == 'r')
            *repeat = (int)v;
        else {
            fprintf(stderr, "tf-cuda-bench: %s: %s (see --help)\n", argv[optind - 1],
                    c == ':' ? "missing value" : "unknown option");
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tf-cuda-bench: unexpected argument \"%s\"\n", argv[optind]);
        return -1;
    }
    return 0;
}

/* Prints the device and returns its peak FP32 and TF32 FLOP/s. */
static int describe_device(int device, double *peak_fp32, double *peak_tf32, tf_error *err)
{
    int major = 0, minor = 0, sms = 0, khz = 0;
    char name[256];
    tfx_cuda_device_name(device, name, sizeof name, err);
    int rc = tfx_cuda_device_attributes(device, &major, &minor, &sms, &khz, err);
    if (rc < 0)
        return rc;
    double fp32_sm, tf32_sm;
    per_sm_clock(major, minor, &fp32_sm, &tf32_sm);
    *peak_fp32 = sms * (khz * 1e3) * fp32_sm;
    *peak_tf32 = sms * (khz * 1e3) * tf32_sm;
    printf("device %d: %s, %d SMs at %.2f GHz: peak FP32 %.1f TFLOP/s, TF32 %.1f TFLOP/s\n",
           device, name, sms, khz / 1e6, *peak_fp32 / 1e12, *peak_tf32 / 1e12);
    return 0;
}

/* Times one shape in FP32 and TF32 (mean of `repeat` GEMMs after a
 * warm-up) and prints a line each.  Returns 0 or the backend's error. */
static int time_shape(tfx_backend *be, const shape *sh, int repeat, const double peak[2],
                      tf_error *err)
{
    size_t na = (size_t)sh->m * sh->k, nb = (size_t)sh->k * sh->n, nc = (size_t)sh->m * sh->n;
    void *a = NULL, *b = NULL, *c = NULL;
    int rc = be->ops->alloc(be->ctx, na * 4, &a, err);
    if (rc == 0)
        rc = be->ops->alloc(be->ctx, nb * 4, &b, err);
    if (rc == 0)
        rc = be->ops->alloc(be->ctx, nc * 4, &c, err);
    for (int tf32 = 0; rc == 0 && tf32 < 2; tf32++) {
        double ms = 0.0;
        tfx_backend_cuda_set_tf32(be, tf32, err);
        be->ops->gemm(be->ctx, 0, 0, sh->m, sh->n, sh->k, 1.0f, a, sh->k, b, sh->n, 0.0f, c,
                      sh->n); /* warm-up */
        if (be->ops->timer_start(be->ctx, err) != 0)
            break;
        for (int r = 0; r < repeat; r++)
            be->ops->gemm(be->ctx, 0, 0, sh->m, sh->n, sh->k, 1.0f, a, sh->k, b, sh->n, 0.0f, c,
                          sh->n);
        if (be->ops->timer_stop(be->ctx, &ms, err) != 0)
            break;
        ms /= repeat;
        double flops = 2.0 * sh->m * sh->n * sh->k / (ms / 1e3);
        printf("%-32s %6s %10.4f %10.2f %7.1f%%\n", sh->label, tf32 ? "tf32" : "fp32", ms,
               flops / 1e12, 100.0 * flops / peak[tf32]);
    }
    be->ops->free(be->ctx, a);
    be->ops->free(be->ctx, b);
    be->ops->free(be->ctx, c);
    return rc;
}

int main(int argc, char **argv)
{
    int device = 0, repeat = 20;
    int rc = parse_args(argc, argv, &device, &repeat);
    if (rc != 0) {
        if (rc > 0)
            printf("usage: tf-cuda-bench [--device D] [--repeat N]\n");
        return rc > 0 ? 0 : 2;
    }
    if (tfx_cuda_device_count() == 0) {
        fprintf(stderr, "tf-cuda-bench: no CUDA device\n");
        return 77;
    }
    tf_error err = {0};
    tfx_backend be;
    double peak[2];
    if (tfx_backend_cuda_create(0, device, &be, &err) != 0 ||
        describe_device(device, &peak[0], &peak[1], &err) != 0) {
        fprintf(stderr, "tf-cuda-bench: %s\n", err.msg);
        return 1;
    }
    /* N = tokens per microbatch; the model's GEMMs are N x H x F and
     * transposes of it (defaults H=128, F=512; larger models below). */
    const shape shapes[] = {
        {"fc1 fwd  N=512 H=128 F=512", 512, 512, 128},
        {"fc1 fwd  N=8192 H=1024 F=4096", 8192, 4096, 1024},
        {"fc1 dW   H=1024 F=4096 N=8192", 1024, 4096, 8192},
        {"square 4096", 4096, 4096, 4096},
        {"square 8192", 8192, 8192, 8192},
    };
    printf("%-32s %6s %10s %10s %8s\n", "shape", "math", "ms", "TFLOP/s", "of peak");
    for (size_t s = 0; rc == 0 && s < sizeof shapes / sizeof shapes[0]; s++)
        rc = time_shape(&be, &shapes[s], repeat, peak, &err);
    if (rc == 0)
        rc = be.ops->synchronize(be.ctx, &err);
    if (rc != 0)
        fprintf(stderr, "tf-cuda-bench: %s\n", err.msg);
    be.ops->destroy(be.ctx);
    return rc != 0;
}
