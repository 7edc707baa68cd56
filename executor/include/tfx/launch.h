/* launch.h - which process of a launched job this is, and where its
 * processes meet.
 *
 * mpirun, srun and torchrun each export the process rank and count under
 * their own names; tf-exec needs no MPI library, only these variables and a
 * folder every process can read and write (the rendezvous folder) in which
 * the processes publish how to reach them.  Plain C: usable without a GPU.
 */
#ifndef TFX_LAUNCH_H
#define TFX_LAUNCH_H

#include <stddef.h>
#include "tf/error.h"

/* The launch environment of a process started by a launcher. */
typedef struct tfx_launch_env {
    int launched;         /* 1 when a launcher's variables were found */
    int rank, world_size; /* process rank and count (0 / 1 when not launched) */
    int local_rank;       /* rank on this node (-1 when unknown) */
    char source[32];      /* which variables: "RANK", "OMPI", "SLURM", "PMI", "" */
    char rank_var[32];    /* the variables read, for messages: "RANK", "SLURM_PROCID", ... */
    char size_var[32];    /* "WORLD_SIZE", "SLURM_NTASKS", ... ("" when not launched) */
} tfx_launch_env;

/* Reads RANK / WORLD_SIZE / LOCAL_RANK (torchrun and friends), then
 * OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (Open MPI), then PMI_RANK /
 * PMI_SIZE (MPICH, Intel MPI; MPI_LOCALRANKID), then SLURM_PROCID /
 * SLURM_NTASKS / SLURM_LOCALID.  Returns 0 (launched = 0 when none is set),
 * or TF_EINVAL naming the variable whose value is not a valid rank / size
 * (not a number, negative, rank not below the size, size without rank). */
int tfx_launch_env_read(tfx_launch_env *out, tf_error *err);

/* The rendezvous folder: `dir` when given, else $TFX_RENDEZVOUS_DIR, else
 * "/tmp" (one node only).  *from (may be NULL) gets where it came from for
 * messages: "the option", "TFX_RENDEZVOUS_DIR", "the default".  Returns a
 * pointer into dir, the environment or a literal (never freed). */
const char *tfx_launch_rendezvous_dir(const char *dir, const char **from);

/* The run's name for its rendezvous files (several jobs may share the
 * folder): `run_id` when given, else $TFX_RUN_ID, else the Slurm job and
 * step, PMIx namespace, Open MPI job id or torchrun run id, else "default";
 * '/' and ' ' become '_'.  Writes it to buf (size bytes). */
void tfx_launch_run_key(const char *run_id, char *buf, size_t size);

#endif
