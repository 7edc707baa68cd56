/* cuda_absent.c - tfexec_cuda in a build without CUDA (see tfx/cuda.h).
 *
 * The same entry points as the real backend, each saying that it was not
 * built, so that the registry and the tools link in every build and ask
 * tfx_cuda_built() instead of the preprocessor.
 */
#include "tfx/cuda.h"

static int not_built(tf_error *err)
{
    return tf_fail(err, TF_EINVAL, "this build has no CUDA backend (configured with TF_CUDA=OFF, "
                                   "or nvcc, cuBLAS or NCCL was not found)");
}

int tfx_cuda_built(void)
{
    return 0;
}

int tfx_cuda_device_count(void)
{
    return 0;
}

int tfx_cuda_device_name(int device, char *buf, size_t size, tf_error *err)
{
    (void)device;
    if (size)
        buf[0] = '\0';
    return not_built(err);
}

int tfx_cuda_device_attributes(int device, int *major, int *minor, int *sms, int *clock_khz,
                               tf_error *err)
{
    (void)device;
    *major = *minor = *sms = *clock_khz = 0;
    return not_built(err);
}

int tfx_cuda_device_for_rank(const char *spec, int rank, int *device, tf_error *err)
{
    (void)spec;
    (void)rank;
    *device = -1;
    return not_built(err);
}

int tfx_backend_cuda_create(int rank, int device, tfx_backend *out, tf_error *err)
{
    (void)rank;
    (void)device;
    out->ops = NULL;
    out->ctx = NULL;
    return not_built(err);
}

int tfx_backend_is_cuda(const tfx_backend *be)
{
    (void)be;
    return 0;
}

int tfx_backend_cuda_set_tf32(tfx_backend *be, int on, tf_error *err)
{
    (void)be;
    (void)on;
    return not_built(err);
}

int tfx_transport_cuda_create(int ranks, const tfx_backend *backends, tfx_transport *out,
                              tf_error *err)
{
    (void)ranks;
    (void)backends;
    (void)out;
    return not_built(err);
}

int tfx_transport_nccl_create(const tfx_nccl_options *o, tfx_transport *out, tf_error *err)
{
    (void)o;
    (void)out;
    return not_built(err);
}
