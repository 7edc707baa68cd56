/* socket_internal.h - what the files of the socket transport share
 * (internal to the executor; see tfx/transport.h for the contract):
 *
 *   transport_socket.c  frames, the receiver threads, the transport's ops
 *   socket_setup.c      how the processes find and connect to each other
 *   socket_io.c         whole reads and writes with a deadline
 */
#ifndef TFX_SOCKET_INTERNAL_H
#define TFX_SOCKET_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mailbox.h"
#include "tf/error.h"
#include "tfx/transport.h"

enum { KIND_DATA = 1, KIND_ABORT = 2, KIND_CLOSE = 3 };
#define FRAME_MAGIC 0x54465853u /* "TFXS" */
/* A header announcing more than this is garbage, not a tensor. */
#define MAX_PAYLOAD ((uint64_t)1 << 36)
/* Bounds of the waits of a failing or ending process (seconds). */
#define ABORT_SEND_S 5.0
#define CLOSE_WAIT_S 2.0

typedef struct frame_header {
    uint32_t magic;
    uint32_t kind;
    int32_t from, to; /* ranks; ABORT: from is the rank that failed */
    int64_t tag;
    uint64_t bytes;   /* payload */
} frame_header;

struct tfx_socket;

typedef struct tfx_socket_peer {
    struct tfx_socket *t;
    int process;
    int fd;                    /* -1: this process, or not connected */
    pthread_mutex_t send_lock; /* one frame at a time on the socket */
    pthread_t thread;
    int thread_started;
    int closed;                /* goodbye received (t->mb.lock) */
    int broken;                /* connection failed (t->mb.lock) */
    int done;                  /* receiver thread finished (t->mb.lock) */
} tfx_socket_peer;

typedef struct tfx_socket {
    int ranks, processes, self, per_process;
    double timeout_s;
    tfx_socket_peer *peers;    /* processes */
    /* Messages for this process's ranks, and the abort.  Its lock also
     * guards the peers' flags and `closing`; a goodbye or a receiver thread
     * that ends wakes the waits too. */
    tfx_mailbox mb;
    int closing;
    void (*on_remote_abort)(void *arg, int rank, const char *msg);
    void *on_remote_abort_arg;
} tfx_socket;

/* poll()'s timeout for a wait until `deadline` (tf_now_seconds() clock):
 * at least 0, at most 200 ms, so that callers re-check their state. */
int tfx_socket_poll_ms(double deadline);

/* Writes len bytes to fd before deadline.  Returns 0, or -1 with errno
 * (ETIMEDOUT for the deadline). */
int tfx_socket_write_all(int fd, const void *buf, size_t len, double deadline);

/* Reads exactly len bytes.  deadline <= 0: block (receiver threads).
 * Returns 0, 1 for an orderly end of stream before the first byte, or -1
 * with errno (ECONNRESET for an end in the middle, ETIMEDOUT). */
int tfx_socket_read_all(int fd, void *buf, size_t len, double deadline);

/* Connects this process to every other one of t (t->processes > 1): a
 * connection per pair, each checked by a hello, in t->peers[q].fd.  Waits
 * at most t->timeout_s for the others.  Returns 0, or TF_EINVAL (options,
 * a peer of another run), TF_EIO (the rendezvous folder), TF_ERUNTIME (a
 * socket call, a peer that did not come), naming the process, the address
 * and the variable to set.  Leaves no file in the rendezvous folder either
 * way; the connections made so far stay in t->peers. */
int tfx_socket_connect_peers(tfx_socket *t, const tfx_socket_options *o, tf_error *err);

#endif
