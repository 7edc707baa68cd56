/* registry.c - which backend and which transport the options name (see
 * registry.h).
 *
 * Two tables: the backends with their default transports, and the
 * transports with the backend whose memory they move.  Every rule the
 * command line has (a transport that only works inside one process, the
 * defaults with one or several processes, what a build without CUDA says)
 * is read from them, so the runtime never names a backend.
 */
#include "tfx/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfx/cuda.h"

typedef struct backend_row {
    const char *name;
    int (*built)(void);
    int (*create)(const tfx_backend_spec *s, tfx_backend *out, tf_error *err);
    const char *in_process;   /* default transport within one process */
    const char *across;       /* default transport with several processes */
    const char *choices;      /* its transports, for "unknown transport" */
    const char *launched_use; /* advice for one process per rank */
    const char *not_built;    /* what a build without it says */
} backend_row;

typedef struct transport_row {
    const char *backend, *name;
    const char *in_process_only; /* why it cannot join processes; NULL: it can */
    int (*create)(const tfx_transport_spec *s, tfx_transport *out, tf_error *err);
} transport_row;

/* ---- backends ------------------------------------------------------------- */

static int always(void)
{
    return 1;
}

static int create_cpu(const tfx_backend_spec *s, tfx_backend *out, tf_error *err)
{
    return tfx_backend_cpu_create(s->rank, out, err);
}

static int create_cuda(const tfx_backend_spec *s, tfx_backend *out, tf_error *err)
{
    int device, rc = tfx_cuda_device_for_rank(s->devices, s->device_index, &device, err);
    if (rc == 0)
        rc = tfx_backend_cuda_create(s->rank, device, out, err);
    if (rc == 0 && s->tf32)
        rc = tfx_backend_cuda_set_tf32(out, 1, err);
    return rc;
}

static const backend_row backends[] = {
    {"cpu", always, create_cpu, "local", "socket", "local, the in-process default, or socket",
     "the cpu backend uses --transport socket", NULL},
    {"cuda", tfx_cuda_built, create_cuda, "cuda", "nccl", "cuda or nccl", "use --transport nccl",
     "this build has no CUDA backend (reconfigure with -DTF_CUDA=ON where the CUDA Toolkit, "
     "cuBLAS and NCCL are installed)"},
};

enum { N_BACKENDS = sizeof backends / sizeof backends[0] };

int tfx_registry_has_backend(const char *name)
{
    for (int i = 0; i < N_BACKENDS; i++)
        if (name && strcmp(name, backends[i].name) == 0)
            return backends[i].built();
    return 0;
}

/* The row of a backend of this build, or TF_EINVAL saying why not. */
static int find_backend(const char *name, const backend_row **out, tf_error *err)
{
    if (!name)
        name = "cpu";
    for (int i = 0; i < N_BACKENDS; i++) {
        if (strcmp(name, backends[i].name) != 0)
            continue;
        if (!backends[i].built())
            return tf_fail(err, TF_EINVAL, "--backend %s: %s", name, backends[i].not_built);
        *out = &backends[i];
        return 0;
    }
    char known[128] = "";
    size_t at = 0;
    for (int i = 0; i < N_BACKENDS; i++)
        if (backends[i].built() && at < sizeof known)
            at += (size_t)snprintf(known + at, sizeof known - at, "%s%s", at ? ", " : "",
                                   backends[i].name);
    return tf_fail(err, TF_EINVAL, "--backend \"%s\": unknown backend (known: %s)", name, known);
}

int tfx_registry_create_backend(const tfx_backend_spec *spec, tfx_backend *out, tf_error *err)
{
    const backend_row *b = NULL;
    int rc = find_backend(spec->backend, &b, err);
    return rc < 0 ? rc : b->create(spec, out, err);
}

/* ---- transports ----------------------------------------------------------- */

static int create_local(const tfx_transport_spec *s, tfx_transport *out, tf_error *err)
{
    return tfx_transport_local_create(s->ranks, out, err);
}

static int create_socket(const tfx_transport_spec *s, tfx_transport *out, tf_error *err)
{
    if (s->processes > 1) { /* the processes are connected already */
        *out = *s->control;
        return 0;
    }
    tfx_socket_options so = {.ranks = s->ranks, .processes = 1, .process_rank = 0,
                             .timeout_s = s->timeout_s};
    return tfx_transport_socket_create(&so, out, err);
}

static int create_cuda_copies(const tfx_transport_spec *s, tfx_transport *out, tf_error *err)
{
    return tfx_transport_cuda_create(s->ranks, s->backends, out, err);
}

static int create_nccl(const tfx_transport_spec *s, tfx_transport *out, tf_error *err)
{
    int *local_ranks = malloc(sizeof *local_ranks * (size_t)s->n_local);
    if (!local_ranks)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    for (int i = 0; i < s->n_local; i++)
        local_ranks[i] = s->first_local + i;
    tfx_nccl_options nccl = {.world_size = s->ranks,
                             .n_local = s->n_local,
                             .local_ranks = local_ranks,
                             .local_backends = s->backends + s->first_local,
                             .stages = s->stages,
                             .stage_rank = s->stage_rank,
                             .rendezvous_dir = s->rendezvous_dir,
                             .run_id = s->run_id,
                             .timeout_s = s->timeout_s};
    int rc = tfx_transport_nccl_create(&nccl, out, err);
    free(local_ranks);
    return rc;
}

static const transport_row transports[] = {
    {"cpu", "local", "in-process only", create_local},
    {"cpu", "socket", NULL, create_socket},
    {"cuda", "cuda", "copies between ranks of one process only", create_cuda_copies},
    {"cuda", "nccl", NULL, create_nccl},
};

static const transport_row *find_transport(const backend_row *b, const char *name)
{
    for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++)
        if (strcmp(transports[i].backend, b->name) == 0 && strcmp(transports[i].name, name) == 0)
            return &transports[i];
    return NULL;
}

/* TF_EINVAL for a transport that cannot join `processes` processes (t NULL:
 * one the backend does not have), or 0. */
static int check_across(const backend_row *b, const char *name, const transport_row *t,
                        int processes, tf_error *err)
{
    if (processes <= 1 || (t && !t->in_process_only))
        return 0;
    return tf_fail(err, TF_EINVAL,
                   "--transport %s: %s; with one process per rank (%d processes) %s", name,
                   t ? t->in_process_only : "unknown", processes, b->launched_use);
}

static int unknown_transport(const backend_row *b, const char *name, tf_error *err)
{
    return tf_fail(err, TF_EINVAL, "--transport \"%s\": unknown for the %s backend (%s)", name,
                   b->name, b->choices);
}

int tfx_registry_check_transport(const char *backend, const char *transport, int processes,
                                 tf_error *err)
{
    const backend_row *b = NULL;
    int rc = find_backend(backend, &b, err);
    if (rc < 0 || !transport)
        return rc;
    const transport_row *t = find_transport(b, transport);
    if ((rc = check_across(b, transport, t, processes, err)) < 0)
        return rc;
    return t ? 0 : unknown_transport(b, transport, err);
}

int tfx_registry_create_transport(const tfx_transport_spec *spec, tfx_transport *out,
                                  tf_error *err)
{
    const backend_row *b = NULL;
    int rc = find_backend(spec->backend, &b, err);
    if (rc < 0)
        return rc;
    const char *name = spec->transport ? spec->transport
                                       : spec->processes > 1 ? b->across : b->in_process;
    const transport_row *t = find_transport(b, name);
    if ((rc = check_across(b, name, t, spec->processes, err)) < 0)
        return rc;
    if (!t)
        return unknown_transport(b, name, err);
    return t->create(spec, out, err);
}
