/* launch_env.c - which process of a launched job this is (tfx/launch.h).
 *
 * Moved here from executor/cuda/ so that the CPU build can run one process
 * per rank as well: nothing in it needs CUDA.
 */
#include "tfx/launch.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One launcher's variable names. */
typedef struct launcher_vars {
    const char *source, *rank, *size, *local_rank;
} launcher_vars;

static const launcher_vars LAUNCHERS[] = {
    {"RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"OMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

/* Parses variable `name` as an integer in [lo, hi] into *out.  Returns 0,
 * 1 when it is not set, or TF_EINVAL naming it. */
static int env_int(const char *name, int lo, int hi, int *out, tf_error *err)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return tf_fail(err, TF_EINVAL, "environment %s=\"%s\": expected an integer from %d to %d",
                       name, s, lo, hi);
    *out = (int)v;
    return 0;
}

/* A size above 1 without a rank means several processes were started, but
 * this one cannot tell which it is: running alone would train a pipeline
 * the others also train, and exit 0.  A size of 1 is harmless. */
static int size_without_rank(const launcher_vars *l, tf_error *err)
{
    int size = 0;
    tf_error ignored;
    if (env_int(l->size, 1, INT_MAX, &size, &ignored) != 0 || size == 1)
        return 0;
    return tf_fail(err, TF_EINVAL, "environment %s=%d is set but %s is not: which process is "
                   "this? (set %s, or unset %s to run one process)",
                   l->size, size, l->rank, l->rank, l->size);
}

int tfx_launch_env_read(tfx_launch_env *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    out->world_size = 1;
    out->local_rank = -1;
    for (size_t i = 0; i < sizeof LAUNCHERS / sizeof LAUNCHERS[0]; i++) {
        const launcher_vars *l = &LAUNCHERS[i];
        int rank = 0, size = 0, local = -1;
        int rc = env_int(l->rank, 0, INT_MAX - 1, &rank, err);
        if (rc < 0)
            return rc;
        if (rc == 1 && size_without_rank(l, err) < 0)
            return TF_EINVAL;
        if (rc == 1)
            continue; /* this launcher did not start us */
        rc = env_int(l->size, 1, INT_MAX, &size, err);
        if (rc < 0)
            return rc;
        if (rc == 1)
            return tf_fail(err, TF_EINVAL, "environment %s is set but %s is not", l->rank,
                           l->size);
        if (rank >= size)
            return tf_fail(err, TF_EINVAL, "environment %s=%d is not below %s=%d", l->rank,
                           rank, l->size, size);
        rc = env_int(l->local_rank, 0, INT_MAX - 1, &local, err);
        if (rc < 0)
            return rc;
        out->launched = 1;
        out->rank = rank;
        out->world_size = size;
        out->local_rank = rc == 1 ? -1 : local;
        snprintf(out->source, sizeof out->source, "%s", l->source);
        snprintf(out->rank_var, sizeof out->rank_var, "%s", l->rank);
        snprintf(out->size_var, sizeof out->size_var, "%s", l->size);
        return 0;
    }
    return 0;
}

const char *tfx_launch_rendezvous_dir(const char *dir, const char **from)
{
    const char *where = "the option";
    if (!dir || !*dir) {
        dir = getenv("TFX_RENDEZVOUS_DIR");
        where = "TFX_RENDEZVOUS_DIR";
    }
    if (!dir || !*dir) {
        dir = "/tmp";
        where = "the default";
    }
    if (from)
        *from = where;
    return dir;
}

void tfx_launch_run_key(const char *run_id, char *buf, size_t size)
{
    const char *id = run_id;
    if (!id || !*id)
        id = getenv("TFX_RUN_ID");
    if (id && *id) {
        snprintf(buf, size, "%s", id);
    } else if (getenv("SLURM_JOB_ID")) {
        snprintf(buf, size, "slurm%s.%s", getenv("SLURM_JOB_ID"),
                 getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID") : "0");
    } else if (getenv("PMIX_NAMESPACE")) {
        snprintf(buf, size, "%s", getenv("PMIX_NAMESPACE"));
    } else if (getenv("OMPI_MCA_ess_base_jobid")) {
        snprintf(buf, size, "ompi%s", getenv("OMPI_MCA_ess_base_jobid"));
    } else if (getenv("TORCHELASTIC_RUN_ID")) {
        snprintf(buf, size, "%s", getenv("TORCHELASTIC_RUN_ID"));
    } else {
        snprintf(buf, size, "default");
    }
    /* Keep it a file name. */
    for (char *p = buf; *p; p++)
        if (*p == '/' || *p == ' ')
            *p = '_';
}
