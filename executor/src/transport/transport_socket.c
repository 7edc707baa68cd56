/* transport_socket.c - messages between ranks in different processes over
 * TCP (see transport.h).
 *
 * Connections: one per pair of processes (a full mesh), so that any process
 * can tell every other one that it failed.  Process j connects to every
 * process i < j and then accepts the connections of every process k > j.  A
 * connect completes from the listen backlog before the peer accepts, and a
 * process only waits for the acknowledgements of lower processes, which
 * accept as soon as their own connects are done: the waits point downwards,
 * so the set-up cannot deadlock in any start order.
 *
 * Frames: a 32-byte header (magic, kind, from rank, to rank, tag, payload
 * bytes) and the payload, in the host's byte order (every process runs the
 * same build; the hello checks the byte order).  DATA carries a tensor or a
 * control message, ABORT a failing rank and its message, CLOSE is the
 * goodbye after which the peer sends nothing more.
 *
 * Threads: a send writes its frame from the caller's thread under the
 * connection's send lock (bounded by the timeout); one receiver thread per
 * connection always drains frames into the transport's queue, so a send
 * completes whatever the peer's rank threads are doing (eager).  recv waits
 * on a condition variable with a deadline.  Nothing blocks without a
 * deadline except the receiver threads' reads, which destroy ends with
 * shutdown().
 */
#include "tfx/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "mailbox.h"
#include "tf/util.h"
#include "tfx/launch.h"

enum { KIND_DATA = 1, KIND_ABORT = 2, KIND_CLOSE = 3 };
#define FRAME_MAGIC 0x54465853u /* "TFXS" */
#define HELLO_MAGIC 0x54465848u /* "TFXH" */
#define HELLO_VERSION 1u
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

/* First bytes on a connection, both ways (the connector's hello, the
 * acceptor's acknowledgement). */
typedef struct hello {
    uint32_t magic, version;
    int32_t processes, ranks;
    int32_t process;      /* the sender's process rank */
    int32_t to_process;   /* the process it meant to reach */
    int32_t status;       /* acknowledgement: 0 accepted, else refused (reason) */
    int32_t reserved;
    char run[128];        /* run key */
    char reason[256];     /* why it was refused */
} hello;

struct socket_transport;

typedef struct peer {
    struct socket_transport *t;
    int process;
    int fd;                    /* -1: this process, or not connected */
    pthread_mutex_t send_lock; /* one frame at a time on the socket */
    pthread_t thread;
    int thread_started;
    int closed;                /* goodbye received (t->mb.lock) */
    int broken;                /* connection failed (t->mb.lock) */
    int done;                  /* receiver thread finished (t->mb.lock) */
} peer;

typedef struct socket_transport {
    int ranks, processes, self, per_process;
    double timeout_s;
    peer *peers;               /* processes */
    /* Messages for this process's ranks, and the abort.  Its lock also
     * guards the peers' flags and `closing`; a goodbye or a receiver thread
     * that ends wakes the waits too. */
    tfx_mailbox mb;
    int closing;
    void (*on_remote_abort)(void *arg, int rank, const char *msg);
    void *on_remote_abort_arg;
} socket_transport;

static int process_of(const socket_transport *t, int rank)
{
    return rank / t->per_process;
}

static double now_s(void)
{
    return tf_now_seconds();
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Milliseconds left until deadline for poll, at least 0, at most 200 (the
 * callers re-check their state between polls). */
static int poll_ms(double deadline)
{
    double left = (deadline - now_s()) * 1e3;
    if (left <= 0)
        return 0;
    return left > 200 ? 200 : (int)left + 1;
}

/* Writes len bytes to fd before deadline.  Returns 0, or -1 with errno
 * (ETIMEDOUT for the deadline). */
static int write_all(int fd, const void *buf, size_t len, double deadline)
{
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (now_s() >= deadline) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pfd = {fd, POLLOUT, 0};
        if (poll(&pfd, 1, poll_ms(deadline)) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

/* Reads exactly len bytes.  deadline <= 0: block (receiver threads).
 * Returns 0, 1 for an orderly end of stream before the first byte, or -1
 * with errno (ECONNRESET for an end in the middle, ETIMEDOUT). */
static int read_all(int fd, void *buf, size_t len, double deadline)
{
    unsigned char *p = buf;
    size_t got = 0;
    while (got < len) {
        if (deadline > 0) {
            struct pollfd pfd = {fd, POLLIN, 0};
            int r = poll(&pfd, 1, poll_ms(deadline));
            if (r < 0 && errno != EINTR)
                return -1;
            if (r <= 0) {
                if (now_s() >= deadline) {
                    errno = ETIMEDOUT;
                    return -1;
                }
                continue;
            }
        }
        ssize_t n = recv(fd, p + got, len - got, 0);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            if (got == 0)
                return 1;
            errno = ECONNRESET;
            return -1;
        } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            return -1;
        }
    }
    return 0;
}

static void rank_span(const socket_transport *t, int process, char *buf, size_t size)
{
    int lo = process * t->per_process, hi = lo + t->per_process - 1;
    if (lo == hi)
        snprintf(buf, size, "rank %d", lo);
    else
        snprintf(buf, size, "ranks %d-%d", lo, hi);
}

/* Sends one frame to peer p before deadline (holding its send lock, which
 * is taken with the same deadline).  Returns 0 or -1 with errno. */
static int send_frame(peer *p, const frame_header *h, const void *payload, double deadline)
{
    struct timespec until;
    double left = deadline - now_s();
    clock_gettime(CLOCK_REALTIME, &until);
    if (left > 0) {
        until.tv_sec += (time_t)left;
        until.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    int e = pthread_mutex_timedlock(&p->send_lock, &until);
    if (e != 0) {
        errno = e == ETIMEDOUT ? ETIMEDOUT : e;
        return -1;
    }
    int rc = write_all(p->fd, h, sizeof *h, deadline);
    if (rc == 0 && h->bytes)
        rc = write_all(p->fd, payload, (size_t)h->bytes, deadline);
    int saved = errno;
    pthread_mutex_unlock(&p->send_lock);
    errno = saved;
    return rc;
}

/* Marks the transport failed because `rank` failed with msg (the first
 * abort wins) and wakes every waiting receive.  With `tell`, an ABORT frame
 * goes to every peer still connected (bounded wait each).  Returns 1 when
 * this call aborted the transport, 0 when it already was. */
static int abort_transport(socket_transport *t, int rank, const char *msg, int tell)
{
    pthread_mutex_lock(&t->mb.lock);
    if (!tfx_mailbox_abort_locked(&t->mb, rank, msg)) {
        pthread_mutex_unlock(&t->mb.lock);
        return 0;
    }
    int *send_to = calloc((size_t)t->processes, sizeof *send_to);
    for (int q = 0; send_to && q < t->processes; q++) {
        peer *p = &t->peers[q];
        send_to[q] = tell && p->fd >= 0 && !p->broken && !p->closed;
    }
    char text[512];
    snprintf(text, sizeof text, "%s", t->mb.abort_msg);
    pthread_mutex_unlock(&t->mb.lock);
    if (!send_to)
        return 1; /* out of memory: the peers learn from the closed connection */
    frame_header h = {FRAME_MAGIC, KIND_ABORT, rank, -1, 0, strlen(text) + 1};
    for (int q = 0; q < t->processes; q++)
        if (send_to[q] && send_frame(&t->peers[q], &h, text, now_s() + ABORT_SEND_S) < 0) {
            pthread_mutex_lock(&t->mb.lock);
            t->peers[q].broken = 1;
            pthread_mutex_unlock(&t->mb.lock);
        }
    free(send_to);
    return 1;
}

/* The transport was aborted by another process: abort here (without
 * telling the others, who heard it themselves) and call the hook. */
static void remote_abort(socket_transport *t, int rank, const char *msg, int tell)
{
    if (abort_transport(t, rank, msg, tell) && t->on_remote_abort)
        t->on_remote_abort(t->on_remote_abort_arg, rank, msg);
}

static void *receiver_thread(void *arg)
{
    peer *p = arg;
    socket_transport *t = p->t;
    char msg[512], span[64];
    rank_span(t, p->process, span, sizeof span);
    for (;;) {
        frame_header h;
        int r = read_all(p->fd, &h, sizeof h, 0);
        if (r == 0 && (h.magic != FRAME_MAGIC || h.bytes > MAX_PAYLOAD ||
                       (h.kind == KIND_DATA && (h.to < 0 || h.to >= t->ranks ||
                                                process_of(t, h.to) != t->self)))) {
            snprintf(msg, sizeof msg,
                     "socket transport: garbled frame from process %d (%s): magic %#x, kind "
                     "%u, %llu bytes",
                     p->process, span, h.magic, h.kind, (unsigned long long)h.bytes);
            pthread_mutex_lock(&t->mb.lock);
            p->broken = 1;
            pthread_mutex_unlock(&t->mb.lock);
            remote_abort(t, p->process * t->per_process, msg, 1);
            break;
        }
        if (r != 0) {
            int e = errno;
            pthread_mutex_lock(&t->mb.lock);
            int quiet = t->closing || p->closed;
            p->broken = 1;
            pthread_mutex_unlock(&t->mb.lock);
            if (!quiet) {
                snprintf(msg, sizeof msg,
                         "process %d (%s) closed its connection without a goodbye (%s): it "
                         "died or was killed",
                         p->process, span, r == 1 ? "end of stream" : strerror(e));
                remote_abort(t, p->process * t->per_process, msg, 1);
            }
            break;
        }
        if (h.kind == KIND_DATA) {
            tfx_mail *m = tfx_mail_host(h.from, h.to, (long)h.tag, (size_t)h.bytes, NULL);
            if (!m) {
                snprintf(msg, sizeof msg,
                         "socket transport: out of memory for a %llu-byte message from "
                         "process %d",
                         (unsigned long long)h.bytes, p->process);
                remote_abort(t, t->self * t->per_process, msg, 1);
                break;
            }
            if (h.bytes && read_all(p->fd, m->payload, m->bytes, 0) != 0) {
                int e = errno;
                tfx_mail_free(m);
                pthread_mutex_lock(&t->mb.lock);
                int quiet = t->closing;
                p->broken = 1;
                pthread_mutex_unlock(&t->mb.lock);
                if (!quiet) {
                    snprintf(msg, sizeof msg,
                             "process %d (%s) closed its connection in the middle of a "
                             "message (%s): it died or was killed",
                             p->process, span, strerror(e));
                    remote_abort(t, p->process * t->per_process, msg, 1);
                }
                break;
            }
            /* After an abort nobody receives it: the step has failed. */
            if (tfx_mailbox_post(&t->mb, m, NULL) < 0)
                tfx_mail_free(m);
        } else if (h.kind == KIND_ABORT) {
            char text[1024] = "";
            size_t n = (size_t)h.bytes;
            size_t keep = n < sizeof text ? n : sizeof text - 1;
            int rr = keep ? read_all(p->fd, text, keep, 0) : 0;
            /* Skip what does not fit (never more than a short message). */
            for (size_t skipped = keep; rr == 0 && skipped < n; skipped++) {
                char c;
                rr = read_all(p->fd, &c, 1, 0);
            }
            text[keep < sizeof text ? keep : sizeof text - 1] = '\0';
            if (rr != 0)
                snprintf(text, sizeof text, "process %d (%s) failed (its message was cut off)",
                         p->process, span);
            remote_abort(t, h.from, text, 0);
        } else if (h.kind == KIND_CLOSE) {
            pthread_mutex_lock(&t->mb.lock);
            p->closed = 1;
            tfx_mailbox_wake(&t->mb);
            pthread_mutex_unlock(&t->mb.lock);
            break;
        } else {
            snprintf(msg, sizeof msg, "socket transport: unknown frame kind %u from process %d",
                     h.kind, p->process);
            pthread_mutex_lock(&t->mb.lock);
            p->broken = 1;
            pthread_mutex_unlock(&t->mb.lock);
            remote_abort(t, p->process * t->per_process, msg, 1);
            break;
        }
    }
    pthread_mutex_lock(&t->mb.lock);
    p->done = 1;
    tfx_mailbox_wake(&t->mb);
    pthread_mutex_unlock(&t->mb.lock);
    return NULL;
}

static int socket_send(void *ctx, int from, int to, long tag, const void *buf, size_t bytes,
                       tf_error *err)
{
    socket_transport *t = ctx;
    if (to < 0 || to >= t->ranks || from < 0 || from >= t->ranks)
        return tf_fail(err, TF_ERUNTIME, "transport: send from rank %d to rank %d of %d", from,
                       to, t->ranks);
    const int q = process_of(t, to);
    if (q == t->self) {
        tfx_mail *m = tfx_mail_host(from, to, tag, bytes, buf);
        if (!m)
            return tf_fail(err, TF_ENOMEM, "transport: out of memory for a %zu-byte message",
                           bytes);
        int rc = tfx_mailbox_post(&t->mb, m, err);
        if (rc < 0)
            tfx_mail_free(m);
        return rc;
    }
    peer *p = &t->peers[q];
    pthread_mutex_lock(&t->mb.lock);
    int rc = tfx_mailbox_check_locked(&t->mb, from, err);
    if (rc == 0 && (p->closed || p->broken))
        rc = tf_fail(err, TF_ERUNTIME,
                     "rank %d cannot send to rank %d: process %d has %s", from, to, q,
                     p->closed ? "ended (it said goodbye)" : "lost its connection");
    pthread_mutex_unlock(&t->mb.lock);
    if (rc < 0)
        return rc;
    frame_header h = {FRAME_MAGIC, KIND_DATA, from, to, tag, bytes};
    if (send_frame(p, &h, buf, now_s() + t->timeout_s) < 0) {
        int e = errno;
        char msg[512];
        if (e == ETIMEDOUT)
            snprintf(msg, sizeof msg,
                     "rank %d could not send %zu bytes to rank %d within %.0f s: process %d "
                     "hangs (see TFX_TIMEOUT)",
                     from, bytes, to, t->timeout_s, q);
        else
            snprintf(msg, sizeof msg, "rank %d could not send to rank %d (process %d): %s", from,
                     to, q, strerror(e));
        pthread_mutex_lock(&t->mb.lock);
        p->broken = 1;
        pthread_mutex_unlock(&t->mb.lock);
        abort_transport(t, from, msg, 1);
        return tf_fail(err, TF_ERUNTIME, "%s", msg);
    }
    return 0;
}

/* What a receive from another process waits for besides its message. */
typedef struct peer_watch {
    socket_transport *t;
    int to, from, q;
    long tag;
} peer_watch;

/* A receive from a process that said goodbye or lost its connection will
 * never be served (mailbox lock held). */
static int peer_gone(void *arg, tf_error *err)
{
    const peer_watch *w = arg;
    const peer *p = &w->t->peers[w->q];
    if (w->q == w->t->self || !(p->closed || p->broken))
        return 0;
    return tf_fail(err, TF_ERUNTIME,
                   "rank %d waits for a message from rank %d (tag %ld), but process %d has %s",
                   w->to, w->from, w->tag, w->q,
                   p->closed ? "ended (it said goodbye)" : "lost its connection");
}

static int socket_recv(void *ctx, int to, int from, long tag, void *buf, size_t bytes,
                       tf_error *err)
{
    socket_transport *t = ctx;
    if (to < 0 || to >= t->ranks || from < 0 || from >= t->ranks)
        return tf_fail(err, TF_ERUNTIME, "transport: receive by rank %d from rank %d of %d", to,
                       from, t->ranks);
    peer_watch watch = {t, to, from, process_of(t, from), tag};
    tfx_mailbox_wait wait = {now_s() + t->timeout_s, peer_gone, &watch};
    tfx_mail *m;
    int rc = tfx_mailbox_take(&t->mb, to, from, tag, &wait, &m, err);
    if (rc == TFX_MAILBOX_TIMEOUT) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "rank %d received nothing from rank %d (tag %ld) within %.0f s: rank %d "
                 "(process %d) died or hangs (see TFX_TIMEOUT)",
                 to, from, tag, t->timeout_s, from, watch.q);
        abort_transport(t, to, msg, 1);
        return tf_fail(err, TF_ERUNTIME, "%s", msg);
    }
    if (rc < 0)
        return rc;
    rc = tfx_mail_read(m, buf, bytes, err);
    tfx_mail_free(m);
    return rc;
}

static void socket_abort(void *ctx, int rank, const char *msg)
{
    abort_transport(ctx, rank, msg, 1);
}

static int socket_reset(void *ctx)
{
    return tfx_mailbox_reset(&((socket_transport *)ctx)->mb);
}

static void socket_destroy(void *ctx)
{
    socket_transport *t = ctx;
    if (!t)
        return;
    /* Goodbye to every peer, then wait (bounded) for theirs, so that no
     * connection closes with unread data (which would reset it and could
     * lose the goodbye on the other side).  A failed process first repeats
     * the cause on the same connection: a peer may read this goodbye before
     * the ABORT that another process sent it, and must not take the
     * goodbye for the failure. */
    pthread_mutex_lock(&t->mb.lock);
    t->closing = 1;
    int failed = t->mb.aborted;
    char cause[512];
    snprintf(cause, sizeof cause, "%s", t->mb.abort_msg);
    frame_header why = {FRAME_MAGIC, KIND_ABORT, t->mb.abort_rank, -1, 0, strlen(cause) + 1};
    pthread_mutex_unlock(&t->mb.lock);
    frame_header bye = {FRAME_MAGIC, KIND_CLOSE, t->self * t->per_process, -1, 0, 0};
    for (int q = 0; t->peers && q < t->processes; q++) {
        peer *p = &t->peers[q];
        if (p->fd < 0)
            continue;
        pthread_mutex_lock(&t->mb.lock);
        int live = !p->broken, tell = failed && !p->closed;
        pthread_mutex_unlock(&t->mb.lock);
        const double until = now_s() + (failed ? 1.0 : ABORT_SEND_S);
        if (live && (!tell || send_frame(p, &why, cause, until) == 0) &&
            send_frame(p, &bye, NULL, until) == 0)
            shutdown(p->fd, SHUT_WR);
    }
    const double deadline = now_s() + (failed ? 1.0 : (t->timeout_s < CLOSE_WAIT_S
                                                           ? t->timeout_s : CLOSE_WAIT_S));
    pthread_mutex_lock(&t->mb.lock);
    for (;;) {
        int waiting = 0;
        for (int q = 0; t->peers && q < t->processes; q++)
            waiting |= t->peers[q].thread_started && !t->peers[q].done;
        double left = deadline - now_s();
        if (!waiting || left <= 0)
            break;
        tfx_mailbox_sleep_locked(&t->mb, left < 0.2 ? left : 0.2);
    }
    pthread_mutex_unlock(&t->mb.lock);
    for (int q = 0; t->peers && q < t->processes; q++) {
        peer *p = &t->peers[q];
        if (p->fd >= 0)
            shutdown(p->fd, SHUT_RDWR); /* ends a receiver still reading */
        if (p->thread_started)
            pthread_join(p->thread, NULL);
        if (p->fd >= 0)
            close(p->fd);
        pthread_mutex_destroy(&p->send_lock);
    }
    tfx_mailbox_destroy(&t->mb);
    free(t->peers);
    free(t);
}

static const tfx_transport_ops socket_ops = {
    .name = "socket",
    .send = socket_send,
    .recv = socket_recv,
    .abort = socket_abort,
    .reset = socket_reset,
    .destroy = socket_destroy,
};

int tfx_transport_socket_abort_cause(const tfx_transport *tr, int *rank, char *msg,
                                     size_t size)
{
    if (!tr || tr->ops != &socket_ops)
        return -1;
    return tfx_mailbox_cause(&((socket_transport *)tr->ctx)->mb, rank, msg, size);
}

/* ---- set-up ----------------------------------------------------------------- */

/* What the set-up needs besides the transport. */
typedef struct setup {
    socket_transport *t;
    const char *dir, *dir_from;
    char run[128];
    double deadline;
    time_t started;
    int listen_fd;
    char addr_path[4096];
    int published;
} setup;

static void addr_path(const setup *s, int process, char *buf, size_t size)
{
    snprintf(buf, size, "%s/tfx-sock-%s-%d.addr", s->dir, s->run, process);
}

static int is_wildcard(const char *host)
{
    return !strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*");
}

/* Opens the listening socket on bind_addr (any free port). */
static int start_listening(setup *s, const char *bind_addr, int *port, tf_error *err)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    const char *node = is_wildcard(bind_addr) ? (strcmp(bind_addr, "::") ? "0.0.0.0" : "::")
                                              : bind_addr;
    int e = getaddrinfo(node, "0", &hints, &res);
    if (e != 0)
        return tf_fail(err, TF_EINVAL, "socket transport: bind address \"%s\" (TFX_SOCKET_BIND): %s",
                       bind_addr, gai_strerror(e));
    int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (fd < 0) {
        freeaddrinfo(res);
        return tf_fail(err, TF_ERUNTIME, "socket transport: socket(): %s", strerror(errno));
    }
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
        listen(fd, s->t->processes + 4) != 0) {
        int saved = errno;
        freeaddrinfo(res);
        close(fd);
        return tf_fail(err, TF_ERUNTIME,
                       "socket transport: cannot listen on %s (TFX_SOCKET_BIND): %s", bind_addr,
                       strerror(saved));
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        int saved = errno;
        close(fd);
        return tf_fail(err, TF_ERUNTIME, "socket transport: getsockname(): %s", strerror(saved));
    }
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    s->listen_fd = fd;
    return 0;
}

/* Publishes "host port" atomically (temporary file + rename). */
static int publish(setup *s, const char *host, int port, tf_error *err)
{
    char tmp[4200];
    addr_path(s, s->t->self, s->addr_path, sizeof s->addr_path);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", s->addr_path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return tf_fail(err, TF_EIO,
                       "rendezvous folder %s (%s): cannot write %s: %s (set TFX_RENDEZVOUS_DIR "
                       "to a folder every process can write)",
                       s->dir, s->dir_from, tmp, strerror(errno));
    int ok = fprintf(f, "%s %d\n", host, port) > 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, s->addr_path) != 0) {
        int saved = errno;
        remove(tmp);
        return tf_fail(err, TF_EIO, "rendezvous folder %s (%s): cannot write %s: %s", s->dir,
                       s->dir_from, s->addr_path, strerror(saved));
    }
    s->published = 1;
    return 0;
}

/* Reads process q's address if its file is there and not older than this
 * process (minus a minute of slack for clocks).  Returns 1 when read. */
static int read_addr(const setup *s, int q, char *host, size_t host_size, int *port)
{
    char path[4096];
    struct stat st;
    addr_path(s, q, path, sizeof path);
    if (stat(path, &st) != 0 || st.st_mtime < s->started - 60)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512] = "";
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char fmt[32];
    snprintf(fmt, sizeof fmt, "%%%zus %%d", host_size - 1);
    return ok && sscanf(line, fmt, host, port) == 2 && *port > 0 && *port < 65536;
}

static void make_hello(const setup *s, int to_process, hello *h)
{
    memset(h, 0, sizeof *h);
    h->magic = HELLO_MAGIC;
    h->version = HELLO_VERSION;
    h->processes = s->t->processes;
    h->ranks = s->t->ranks;
    h->process = s->t->self;
    h->to_process = to_process;
    snprintf(h->run, sizeof h->run, "%s", s->run);
}

/* Connects to host:port before the deadline (non-blocking connect).
 * Returns the socket, or -1 with errno. */
static int connect_to(const char *host, int port, double deadline)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0) {
        errno = EHOSTUNREACH;
        return -1;
    }
    int fd = -1, saved = ECONNREFUSED;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int flags = fcntl(fd, F_GETFL);
        int r = flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
        if (r == 0)
            r = connect(fd, a->ai_addr, a->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
            for (;;) {
                struct pollfd pfd = {fd, POLLOUT, 0};
                int pr = poll(&pfd, 1, poll_ms(deadline));
                if (pr > 0) {
                    int soerr = 0;
                    socklen_t len = sizeof soerr;
                    r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
                    if (r == 0 && soerr != 0) {
                        errno = soerr;
                        r = -1;
                    }
                    break;
                }
                if ((pr < 0 && errno != EINTR) || now_s() >= deadline) {
                    if (pr == 0)
                        errno = ETIMEDOUT;
                    r = -1;
                    break;
                }
            }
        }
        if (r == 0 && flags >= 0)
            r = fcntl(fd, F_SETFL, flags); /* blocking again: the receiver reads block */
        if (r != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        errno = saved;
    return fd;
}

static void tune(int fd)
{
    int one = 1;
    /* Small control messages must not wait for Nagle; failure only costs
     * latency. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Checks a peer's hello / acknowledgement against this process. */
static int check_hello(const setup *s, const hello *h, int expect_process, char *why,
                       size_t size)
{
    const socket_transport *t = s->t;
    if (h->magic != HELLO_MAGIC) {
        snprintf(why, size, "it is not a tf-exec socket transport (or has another byte order)");
        return -1;
    }
    if (h->version != HELLO_VERSION) {
        snprintf(why, size, "it speaks version %u of the protocol, this process %u",
                 h->version, HELLO_VERSION);
        return -1;
    }
    if (strncmp(h->run, s->run, sizeof h->run) != 0) {
        snprintf(why, size, "it belongs to run \"%.100s\", this process to \"%s\" (TFX_RUN_ID)",
                 h->run, s->run);
        return -1;
    }
    if (h->processes != t->processes || h->ranks != t->ranks) {
        snprintf(why, size,
                 "it has %d processes (WORLD_SIZE) and %d pipeline ranks, this process %d and %d",
                 h->processes, h->ranks, t->processes, t->ranks);
        return -1;
    }
    if (expect_process >= 0 && h->process != expect_process) {
        snprintf(why, size, "it is process %d, not %d", h->process, expect_process);
        return -1;
    }
    if (h->to_process != t->self) {
        snprintf(why, size, "it wanted process %d, this is process %d", h->to_process, t->self);
        return -1;
    }
    return 0;
}

/* Connects to lower process q: retries (its file may be missing, stale or
 * not listening yet) until the deadline. */
static int connect_lower(setup *s, int q, tf_error *err)
{
    socket_transport *t = s->t;
    char host[256] = "", last[300] = "its address file did not appear";
    int port = 0;
    while (now_s() < s->deadline) {
        if (!read_addr(s, q, host, sizeof host, &port)) {
            nap_ms(20);
            continue;
        }
        int fd = connect_to(host, port, s->deadline);
        if (fd < 0) {
            snprintf(last, sizeof last, "connecting to %s port %d: %s", host, port,
                     strerror(errno));
            nap_ms(20);
            continue;
        }
        hello h, ack;
        make_hello(s, q, &h);
        if (write_all(fd, &h, sizeof h, s->deadline) != 0 ||
            read_all(fd, &ack, sizeof ack, s->deadline) != 0) {
            snprintf(last, sizeof last, "no acknowledgement from %s port %d: %s", host, port,
                     strerror(errno));
            close(fd);
            nap_ms(20);
            continue;
        }
        char why[300];
        if (check_hello(s, &ack, q, why, sizeof why) != 0) {
            close(fd);
            return tf_fail(err, TF_EINVAL, "socket transport: process %d at %s port %d does not "
                                           "match this process %d: %s",
                           q, host, port, t->self, why);
        }
        if (ack.status != 0) {
            close(fd);
            ack.reason[sizeof ack.reason - 1] = '\0';
            return tf_fail(err, TF_EINVAL, "socket transport: process %d refused process %d: %s",
                           q, t->self, ack.reason);
        }
        tune(fd);
        t->peers[q].fd = fd;
        return 0;
    }
    char path[4096];
    addr_path(s, q, path, sizeof path);
    return tf_fail(err, TF_ERUNTIME,
                   "socket transport: process %d could not reach process %d within %.0f s (%s; "
                   "is it running, with the same TFX_RUN_ID, and is the rendezvous folder %s "
                   "(%s) shared by every process? see TFX_TIMEOUT)",
                   t->self, q, t->timeout_s, last, s->dir, s->dir_from);
}

/* Accepts the connections of every higher process. */
static int accept_higher(setup *s, tf_error *err)
{
    socket_transport *t = s->t;
    int missing = t->processes - 1 - t->self;
    while (missing > 0) {
        if (now_s() >= s->deadline) {
            char list[256] = "";
            size_t at = 0;
            for (int q = t->self + 1; q < t->processes && at < sizeof list - 16; q++)
                if (t->peers[q].fd < 0)
                    at += (size_t)snprintf(list + at, sizeof list - at, "%s%d", at ? ", " : "", q);
            return tf_fail(err, TF_ERUNTIME,
                           "socket transport: process(es) %s did not connect to process %d "
                           "within %.0f s (are they running, with the same TFX_RUN_ID and "
                           "rendezvous folder %s (%s)? see TFX_TIMEOUT)",
                           list, t->self, t->timeout_s, s->dir, s->dir_from);
        }
        struct pollfd pfd = {s->listen_fd, POLLIN, 0};
        int pr = poll(&pfd, 1, poll_ms(s->deadline));
        if (pr < 0 && errno != EINTR)
            return tf_fail(err, TF_ERUNTIME, "socket transport: poll(): %s", strerror(errno));
        if (pr <= 0)
            continue;
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                continue;
            return tf_fail(err, TF_ERUNTIME, "socket transport: accept(): %s", strerror(errno));
        }
        hello h, ack;
        /* A stranger that sends nothing must not hold the set-up up long. */
        double hello_deadline = now_s() + 10.0;
        if (hello_deadline > s->deadline)
            hello_deadline = s->deadline;
        if (read_all(fd, &h, sizeof h, hello_deadline) != 0) {
            close(fd);
            continue;
        }
        make_hello(s, h.process, &ack);
        char why[256];
        int bad = check_hello(s, &h, -1, why, sizeof why);
        if (bad == 0 && (h.process <= t->self || h.process >= t->processes)) {
            snprintf(why, sizeof why, "process %d should not connect to process %d", h.process,
                     t->self);
            bad = -1;
        }
        if (bad == 0 && t->peers[h.process].fd >= 0) {
            snprintf(why, sizeof why,
                     "two processes claim process rank %d (RANK / WORLD_SIZE given twice?)",
                     h.process);
            bad = -1;
        }
        if (h.magic != HELLO_MAGIC) {
            close(fd); /* not one of ours: ignore it */
            continue;
        }
        ack.status = bad ? 1 : 0;
        snprintf(ack.reason, sizeof ack.reason, "%s", bad ? why : "");
        int wrote = write_all(fd, &ack, sizeof ack, s->deadline);
        if (bad) {
            close(fd);
            return tf_fail(err, TF_EINVAL, "socket transport: process %d refused a connection "
                                           "from process %d: %s",
                           t->self, h.process, why);
        }
        if (wrote != 0) {
            close(fd);
            continue; /* it gave up; it retries until its deadline */
        }
        tune(fd);
        t->peers[h.process].fd = fd;
        missing--;
    }
    return 0;
}

int tfx_transport_socket_create(const tfx_socket_options *o, tfx_transport *out,
                                tf_error *err)
{
    int rc = 0;
    socket_transport *t = NULL;
    setup s;
    memset(&s, 0, sizeof s);
    s.listen_fd = -1;
    if (o->processes < 1 || o->ranks < 1 || o->process_rank < 0 ||
        o->process_rank >= o->processes)
        return tf_fail(err, TF_EINVAL, "socket transport: process %d of %d, %d ranks",
                       o->process_rank, o->processes, o->ranks);
    if (o->ranks % o->processes != 0)
        return tf_fail(err, TF_EINVAL,
                       "socket transport: %d ranks cannot be split evenly over %d processes",
                       o->ranks, o->processes);
    t = calloc(1, sizeof *t);
    if (!t)
        return tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
    t->ranks = o->ranks;
    t->processes = o->processes;
    t->self = o->process_rank;
    t->per_process = o->ranks / o->processes;
    t->on_remote_abort = o->on_remote_abort;
    t->on_remote_abort_arg = o->on_remote_abort_arg;
    t->timeout_s = o->timeout_s;
    if (t->timeout_s <= 0) {
        const char *e = getenv("TFX_TIMEOUT");
        char *end = NULL;
        double v = e && *e ? strtod(e, &end) : 0.0;
        if (e && *e && (!end || *end || !(v > 0))) {
            free(t);
            return tf_fail(err, TF_EINVAL,
                           "environment TFX_TIMEOUT=\"%s\": expected a number of seconds > 0", e);
        }
        t->timeout_s = v > 0 ? v : 600.0;
    }
    tfx_mailbox_init(&t->mb, NULL, NULL);
    t->peers = calloc((size_t)t->processes, sizeof *t->peers);
    if (!t->peers) {
        rc = tf_fail(err, TF_ENOMEM, "%s:%d: out of memory", __FILE__, __LINE__);
        goto fail;
    }
    for (int q = 0; q < t->processes; q++) {
        t->peers[q] = (peer){.t = t, .process = q, .fd = -1};
        pthread_mutex_init(&t->peers[q].send_lock, NULL);
    }
    if (t->processes > 1) {
        s.t = t;
        s.dir = tfx_launch_rendezvous_dir(o->rendezvous_dir, &s.dir_from);
        tfx_launch_run_key(o->run_id, s.run, sizeof s.run);
        s.started = time(NULL);
        s.deadline = now_s() + t->timeout_s;
        const char *bind_addr = o->bind_addr && *o->bind_addr ? o->bind_addr
                                                               : getenv("TFX_SOCKET_BIND");
        if (!bind_addr || !*bind_addr)
            bind_addr = "127.0.0.1";
        const char *host = o->advertise_host && *o->advertise_host ? o->advertise_host
                                                                    : getenv("TFX_SOCKET_HOST");
        char hostname[256];
        if (!host || !*host) {
            host = bind_addr;
            if (is_wildcard(bind_addr)) {
                if (gethostname(hostname, sizeof hostname) != 0) {
                    rc = tf_fail(err, TF_ERUNTIME,
                                 "socket transport: gethostname(): %s (set TFX_SOCKET_HOST)",
                                 strerror(errno));
                    goto fail;
                }
                hostname[sizeof hostname - 1] = '\0';
                host = hostname;
            }
        }
        if (strchr(host, ' ') || strlen(host) > 200) {
            rc = tf_fail(err, TF_EINVAL, "socket transport: host \"%s\" (TFX_SOCKET_HOST): not a "
                                         "host name",
                         host);
            goto fail;
        }
        struct stat st;
        if (stat(s.dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            rc = tf_fail(err, TF_EIO, "rendezvous folder %s (%s): %s", s.dir, s.dir_from,
                         stat(s.dir, &st) != 0 ? strerror(errno) : "not a directory");
            goto fail;
        }
        int port = 0;
        if ((rc = start_listening(&s, bind_addr, &port, err)) < 0 ||
            (rc = publish(&s, host, port, err)) < 0)
            goto fail;
        for (int q = 0; q < t->self; q++)
            if ((rc = connect_lower(&s, q, err)) < 0)
                goto fail;
        if ((rc = accept_higher(&s, err)) < 0)
            goto fail;
        /* Everybody is connected: nobody reads the file any more. */
        remove(s.addr_path);
        s.published = 0;
        close(s.listen_fd);
        s.listen_fd = -1;
        for (int q = 0; q < t->processes; q++) {
            peer *p = &t->peers[q];
            if (p->fd < 0)
                continue;
            if (pthread_create(&p->thread, NULL, receiver_thread, p) != 0) {
                rc = tf_fail(err, TF_ERUNTIME, "socket transport: could not start a thread");
                goto fail;
            }
            p->thread_started = 1;
        }
    }
    out->ops = &socket_ops;
    out->ctx = t;
    return 0;
fail:
    if (s.published)
        remove(s.addr_path);
    if (s.listen_fd >= 0)
        close(s.listen_fd);
    /* The peers connected so far learn of the failure from an ABORT frame. */
    if (t->peers)
        abort_transport(t, t->self * t->per_process, err ? err->msg : "set-up failed", 1);
    socket_destroy(t);
    return rc;
}
