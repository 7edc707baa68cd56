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
 * on a separate stream) and an abort flag checked while polling; the socket
 * transport joins ranks in several processes (host memory, TCP), and in a
 * launched run also carries the small control messages between processes.
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
    /* Whether recv(to, from, tag) would return at once: 1 when the message
     * is there or the transport was aborted, 0 otherwise.  Lets a rank use
     * a wait for other work.  May be NULL (the transport cannot tell). */
    int (*ready)(void *ctx, int to, int from, long tag);
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

/* Where the processes of a socket transport are and how they meet. */
typedef struct tfx_socket_options {
    int ranks;                  /* pipeline ranks over all processes */
    int processes;              /* processes (1: every rank here, no socket is opened) */
    int process_rank;           /* this process, 0 .. processes-1 */
    /* Ranks are split into contiguous blocks: process q drives ranks
     * [q R/P, (q+1) R/P); ranks must be a multiple of processes. */
    const char *rendezvous_dir; /* NULL: $TFX_RENDEZVOUS_DIR, else /tmp (tfx/launch.h) */
    const char *run_id;         /* NULL: $TFX_RUN_ID, the launcher's job id, "default" */
    const char *bind_addr;      /* address to listen on (NULL: $TFX_SOCKET_BIND, else
                                   127.0.0.1; 0.0.0.0 for every interface) */
    const char *advertise_host; /* how peers reach this process (NULL: $TFX_SOCKET_HOST,
                                   else the bind address, or the host name when the
                                   bind address is 0.0.0.0 / ::) */
    double timeout_s;           /* a receive, a send or the set-up waiting longer fails
                                   the run (<= 0: $TFX_TIMEOUT, else 600) */
    /* Called (from a receiver thread, no lock held) when the transport is
     * aborted from outside this process: a peer's ABORT frame or a
     * connection that closed without a goodbye.  May be NULL. */
    void (*on_remote_abort)(void *arg, int rank, const char *msg);
    void *on_remote_abort_arg;
} tfx_socket_options;

/* Creates the socket transport.  Each process listens on a TCP port of
 * bind_addr and publishes "host port" in <dir>/tfx-sock-<run>-<process>.addr
 * (temporary file + rename); every process connects to every process of
 * lower rank (a full mesh: every process can tell every other one of a
 * failure) and each connection starts with a hello / acknowledgement that
 * checks the run, the process and rank counts.  A send writes a frame
 * (header and payload) to the peer's socket; a receiver thread per
 * connection drains frames into a queue, so sends are eager.  Messages
 * between ranks of this process never touch a socket.  recv waits at most
 * the timeout.  abort sends an ABORT frame (rank and message) to every peer;
 * a peer whose connection closes without a goodbye aborts the transport
 * naming that process.  destroy says goodbye to every peer.
 * Returns 0; TF_EINVAL for inconsistent options or a peer from another run
 * shape (naming both); TF_EIO when the rendezvous folder cannot be written
 * (naming the folder and where it came from, e.g. TFX_RENDEZVOUS_DIR);
 * TF_ERUNTIME for socket failures or a peer that did not arrive within the
 * timeout (naming the process and the address tried); TF_ENOMEM. */
int tfx_transport_socket_create(const tfx_socket_options *o, tfx_transport *out,
                                tf_error *err);

/* For a socket transport: whether it was aborted, and if so by which rank
 * and why (msg gets up to size bytes, may be NULL).  Returns 1 when
 * aborted, 0 when not, -1 when t is not a socket transport. */
int tfx_transport_socket_abort_cause(const tfx_transport *t, int *rank, char *msg,
                                     size_t size);

#endif
