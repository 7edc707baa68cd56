/* registry.h - the backends and transports of this build, and the one place
 * that turns --backend, --devices, --tf32 and --transport into a backend
 * instance per rank and the transport between the ranks.
 *
 * Backends: "cpu" (executor/cpu, always built) and "cuda" (executor/cuda,
 * built when CMake found CUDA, cuBLAS and NCCL).  A transport moves one
 * backend's memory: the CPU backend has "local" (rank threads of one
 * process, the default) and "socket" (TCP, the default with one process per
 * rank); the CUDA backend has "cuda" (device copies within one process, the
 * default) and "nccl" (the default with one process per rank).  A new
 * backend or transport is one row in src/registry/registry.c besides its own
 * files; the runtime asks only this module.
 */
#ifndef TFX_REGISTRY_H
#define TFX_REGISTRY_H

#include "tf/error.h"
#include "tfx/backend.h"
#include "tfx/transport.h"

/* Whether `name` is a backend of this build (1) or not (0). */
int tfx_registry_has_backend(const char *name);

/* What a backend instance is made for. */
typedef struct tfx_backend_spec {
    const char *backend;  /* --backend: "cpu" (also when NULL) or "cuda" */
    const char *devices;  /* cuda: --devices, e.g. "0,1" or "0" (every rank on GPU 0);
                             NULL: $TFX_CUDA_DEVICES, else the GPU modulo their count */
    int tf32;             /* cuda: TF32 tensor-core GEMMs; ignored by the cpu backend */
    int rank;             /* the pipeline rank the instance serves */
    int device_index;     /* which entry of devices (or GPU) the rank takes */
} tfx_backend_spec;

/* Creates the backend instance spec describes.  Returns 0 (release with
 * out->ops->destroy(out->ctx)); TF_EINVAL naming the backend when it is
 * unknown (with the known ones) or not in this build (with how to build
 * it); or the backend's own error (no GPU, a bad --devices entry,
 * TF_ENOMEM). */
int tfx_registry_create_backend(const tfx_backend_spec *spec, tfx_backend *out,
                                tf_error *err);

/* Checks, before anything waits for other processes, that `backend` exists
 * and that `transport` (NULL: the backend's default) is one of the
 * backend's and can join `processes` processes.  Returns 0, or TF_EINVAL
 * naming the backend or the transport and what to use instead. */
int tfx_registry_check_transport(const char *backend, const char *transport, int processes,
                                 tf_error *err);

/* What a transport is made for. */
typedef struct tfx_transport_spec {
    const char *backend;          /* whose memory it moves ("cpu" when NULL) */
    const char *transport;        /* --transport; NULL: the backend's default */
    int ranks;                    /* pipeline ranks over all processes */
    int processes;                /* 1: every rank is a thread of this process */
    int first_local, n_local;     /* this process's ranks */
    const tfx_backend *backends;  /* indexed by rank: those of this process are set */
    int stages;                   /* pipeline stages, and the rank of each: */
    const int *stage_rank;        /* neighbouring stages exchange messages */
    const char *rendezvous_dir;   /* several processes: where they meet (tfx/launch.h) */
    const char *run_id;
    double timeout_s;             /* <= 0: the transport's environment variable, else 600 */
    const tfx_transport *control; /* several processes: the connected socket transport
                                     between them (the cpu backend's data go over it) */
} tfx_transport_spec;

/* Creates the transport spec describes.  Returns 0 with *out, TF_EINVAL for
 * a transport the backend does not have or that cannot join the processes
 * (as tfx_registry_check_transport), or the transport's own error.  With
 * several processes the cpu backend's transport is spec->control itself
 * (out->ctx == spec->control->ctx): destroy it once. */
int tfx_registry_create_transport(const tfx_transport_spec *spec, tfx_transport *out,
                                  tf_error *err);

#endif
