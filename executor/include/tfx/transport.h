/* transport.h - stage-to-stage messages between ranks.
 *
 * A message is one tensor identified by (sender rank, receiver rank, tag).
 * `send` is eager: it returns as soon as the buffer may be reused, so a rank
 * never waits for its peer to post the matching receive (any order the DAG
 * accepts then runs without deadlock).  `recv` blocks until the matching
 * message arrives or the transport is aborted.  `abort` wakes every blocked
 * receive on every rank, which then returns TF_ERUNTIME naming the rank that
 * failed: this is how one failing rank stops all the others.
 *
 * The in-process transport (threads sharing memory) is the CPU backend's; a
 * NCCL transport implements the same table with device buffers (eager send
 * on a separate stream) and an abort flag checked while polling.
 */
#ifndef TFX_TRANSPORT_H
#define TFX_TRANSPORT_H

#include <stddef.h>
#include "tf/error.h"

typedef struct tfx_transport_ops {
    const char *name;
    /* Sends `bytes` from buf (backend memory of rank `from`) to rank `to`.
     * Returns 0, TF_ENOMEM, or TF_ERUNTIME if the transport was aborted. */
    int (*send)(void *ctx, int from, int to, long tag, const void *buf, size_t bytes,
                tf_error *err);
    /* Receives the message (from, to, tag) into buf, which must be exactly
     * `bytes` long (a size mismatch is TF_ERUNTIME).  Blocks; returns 0 or
     * TF_ERUNTIME when aborted. */
    int (*recv)(void *ctx, int to, int from, long tag, void *buf, size_t bytes,
                tf_error *err);
    /* Marks the transport failed because `rank` failed with `msg`; the first
     * abort wins and is what later calls report.  Safe from any thread. */
    void (*abort)(void *ctx, int rank, const char *msg);
    /* Between steps: drops undelivered messages and clears an abort.
     * Returns the number of messages dropped (0 after a clean step). */
    int (*reset)(void *ctx);
    void (*destroy)(void *ctx);
} tfx_transport_ops;

typedef struct tfx_transport {
    const tfx_transport_ops *ops;
    void *ctx;
} tfx_transport;

/* Creates the in-process transport for `ranks` rank threads of one process
 * (messages are copied through host memory).  Returns 0 or TF_ENOMEM. */
int tfx_transport_local_create(int ranks, tfx_transport *out, tf_error *err);

#endif
