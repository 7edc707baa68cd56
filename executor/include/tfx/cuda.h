/* cuda.h - the CUDA backend of tf-exec and its two transports.
 *
 * Built when CMake found nvcc, cuBLAS and NCCL (TF_CUDA=AUTO|ON).  Every
 * build links these functions: without CUDA, tfexec_cuda is the stand-in
 * executor/cuda/cuda_absent.c, where tfx_cuda_built and
 * tfx_cuda_device_count return 0 and everything else fails with TF_EINVAL
 * saying that the build has no CUDA backend.  So no caller needs the
 * preprocessor; tf-exec picks backends through tfx/registry.h.
 *
 * Backend: one instance per pipeline rank, bound to one device and owning
 * one CUDA stream and one cuBLAS handle, so several ranks may share a GPU
 * (each on its own stream) or each have their own.  It implements the table
 * of tfx/backend.h with cuBLAS GEMMs (FP32, or TF32 tensor cores with FP32
 * accumulation when enabled) and its own kernels.  Every op queues work on
 * the stream and returns; the first CUDA / cuBLAS failure is kept (file,
 * line, call, CUDA's message) and reported as TF_ERUNTIME by the next
 * `synchronize`.  `softmax_xent` writes *loss_sum when the stream reaches
 * it: the value is valid after the next `synchronize` (which the model code
 * calls at the end of every action).  `download` waits for its copy.
 *
 * Transports: "cuda" moves messages between ranks of this process with
 * device-to-device copies ordered by events (any devices, including one
 * device shared by all ranks); "nccl" uses ncclSend/ncclRecv and works both
 * for one process driving several GPUs and for one process per GPU started
 * by mpirun / srun / torchrun.  Both are eager and never deadlock: see
 * docs/cuda.md.
 */
#ifndef TFX_CUDA_H
#define TFX_CUDA_H

/* The project's headers are C: give them C linkage from the .cu files. */
#ifdef __cplusplus
extern "C" {
#endif

#include "tf/error.h"
#include "tfx/backend.h"
#include "tfx/launch.h"
#include "tfx/transport.h"

/* 1 when this build has the CUDA backend, 0 when it has the stand-in. */
int tfx_cuda_built(void);

/* Number of CUDA devices this process sees; 0 when there is no GPU or no
 * usable driver (never fails, never prints). */
int tfx_cuda_device_count(void);

/* Describes device `device` ("NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB") into
 * buf; returns 0 or TF_ERUNTIME. */
int tfx_cuda_device_name(int device, char *buf, size_t size, tf_error *err);

/* Compute capability, number of SMs and peak clock (kHz) of `device`, for
 * peak-throughput estimates.  Returns 0 or TF_ERUNTIME. */
int tfx_cuda_device_attributes(int device, int *major, int *minor, int *sms, int *clock_khz,
                               tf_error *err);

/* The device of pipeline rank `rank`.  `spec` is a comma-separated device
 * list ("0,1,2,3"; "0" puts every rank on device 0, each on its own stream);
 * rank r gets entry r mod length.  spec NULL or "" reads the environment
 * variable TFX_CUDA_DEVICES, and without it uses rank mod device count.
 * Returns 0, or TF_EINVAL naming the bad entry / TF_ERUNTIME when no GPU is
 * visible. */
int tfx_cuda_device_for_rank(const char *spec, int rank, int *device, tf_error *err);

/* Creates the CUDA backend of `rank` on `device` (its own stream and cuBLAS
 * handle).  TF32 starts as the environment variable TFX_CUDA_TF32 says
 * ("1": on; default off).  Returns 0, or TF_ERUNTIME naming the device and
 * CUDA's message (no GPU, bad device, out of memory).  Release with
 * out->ops->destroy(out->ctx). */
int tfx_backend_cuda_create(int rank, int device, tfx_backend *out, tf_error *err);

/* Whether be is a CUDA backend instance. */
int tfx_backend_is_cuda(const tfx_backend *be);

/* Switches the GEMMs of a CUDA backend to TF32 tensor-core math with FP32
 * accumulation (on != 0) or back to plain FP32.  Returns 0 or TF_EINVAL
 * when be is not a CUDA backend. */
int tfx_backend_cuda_set_tf32(tfx_backend *be, int on, tf_error *err);

/* The in-process CUDA transport for `ranks` rank threads whose backends
 * (backends[r], all CUDA, used not owned) may sit on any devices.  A send
 * copies the tensor into a transport-owned device buffer on the sender's
 * stream and returns; the receive copies it (peer copy across devices) on
 * the receiver's stream after an event says it is there.  Returns 0,
 * TF_EINVAL when a backend is not CUDA, or TF_ENOMEM. */
int tfx_transport_cuda_create(int ranks, const tfx_backend *backends, tfx_transport *out,
                              tf_error *err);

/* Where the ranks of a NCCL transport are and how they meet. */
typedef struct tfx_nccl_options {
    int world_size;                    /* pipeline ranks over all processes */
    int n_local;                       /* ranks driven by this process */
    const int *local_ranks;            /* their global ranks (n_local) */
    const tfx_backend *local_backends; /* their CUDA backends (n_local), used not owned */
    int stages;                        /* pipeline stages */
    const int *stage_rank;             /* rank of each stage: neighbours talk */
    const char *rendezvous_dir;        /* multi-process: folder all processes see, for
                                          the ncclUniqueIds (NULL: $TFX_RENDEZVOUS_DIR,
                                          else /tmp) */
    const char *run_id;                /* names this run's files (NULL: $TFX_RUN_ID, the
                                          Slurm job/step, PMIx/Open MPI job id) */
    double timeout_s;                  /* a receive waiting longer fails the run
                                          (<= 0: $TFX_NCCL_TIMEOUT, else 600) */
} tfx_nccl_options;

/* Creates the NCCL transport.  Every directed pair of ranks that exchanges
 * messages (stage_rank[s] <-> stage_rank[s+1] on different ranks) gets its
 * own two-rank, non-blocking NCCL communicator, a sender thread on one end
 * and a receiver thread on the other that always drains it, so sends are
 * eager.  When both ends are local the communicator is made with a grouped
 * ncclCommInitRankConfig (what ncclCommInitAll does); otherwise the sending
 * rank writes the ncclUniqueId to the rendezvous folder and the receiving
 * one reads it.  NCCL 2.28 forbids two ranks of one communicator on the same
 * device: such a pair is TF_EINVAL (use the "cuda" transport).  Errors: an
 * asynchronous NCCL error, a peer's abort, or a receive waiting longer than
 * the timeout aborts the transport (every blocked rank returns TF_ERUNTIME
 * with the cause) and the communicators are aborted with ncclCommAbort.
 * Returns 0, TF_EINVAL, TF_EIO (rendezvous), TF_ERUNTIME or TF_ENOMEM. */
int tfx_transport_nccl_create(const tfx_nccl_options *o, tfx_transport *out, tf_error *err);

/* The launch environment (tfx_launch_env, tfx_launch_env_read) is declared
 * in tfx/launch.h, included above; it is plain C and part of every build. */

#ifdef __cplusplus
}
#endif

#endif
