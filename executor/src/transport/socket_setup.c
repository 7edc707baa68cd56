/* socket_setup.c - how the processes of a socket transport find and
 * connect to each other (see socket_internal.h).
 *
 * One connection per pair of processes (a full mesh), so that any process
 * can tell every other one that it failed.  Each process listens on a port
 * and publishes "host port" in the rendezvous folder; process j connects to
 * every process i < j and then accepts the connections of every process
 * k > j.  A connect completes from the listen backlog before the peer
 * accepts, and a process only waits for the acknowledgements of lower
 * processes, which accept as soon as their own connects are done: the waits
 * point downwards, so the set-up cannot deadlock in any start order.  Every
 * connection starts with a hello and its acknowledgement, which check the
 * run, the process and rank counts and the byte order.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "socket_internal.h"
#include "tf/util.h"
#include "tfx/launch.h"

#define HELLO_MAGIC 0x54465848u /* "TFXH" */
#define HELLO_VERSION 1u

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

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* What the set-up needs besides the transport. */
typedef struct setup {
    tfx_socket *t;
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
 * process (minus a minute of slack for clocks).  Returns 1 when read, 0
 * when there is no such file yet, -1 when it holds something other than
 * "HOST PORT" (described in why: files are written whole by a rename, so
 * it is not one being written). */
static int read_addr(const setup *s, int q, char *host, size_t host_size, int *port,
                     char *why, size_t why_size)
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
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    char fmt[32], end = '\0';
    snprintf(fmt, sizeof fmt, "%%%zus %%d %%c", host_size - 1);
    if (sscanf(line, fmt, host, port, &end) == 2 && *port > 0 && *port < 65536)
        return 1;
    line[strcspn(line, "\n")] = '\0';
    snprintf(why, why_size, "its address file %s holds \"%.60s\", not \"HOST PORT\"", path,
             line);
    return -1;
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
                int pr = poll(&pfd, 1, tfx_socket_poll_ms(deadline));
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
                if ((pr < 0 && errno != EINTR) || tf_now_seconds() >= deadline) {
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
    const tfx_socket *t = s->t;
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
    tfx_socket *t = s->t;
    char host[256] = "", last[600] = "its address file did not appear";
    int port = 0;
    while (tf_now_seconds() < s->deadline) {
        /* A malformed file may be replaced by the right one (a rerun in the
         * same folder), so it is remembered, not final. */
        if (read_addr(s, q, host, sizeof host, &port, last, sizeof last) != 1) {
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
        if (tfx_socket_write_all(fd, &h, sizeof h, s->deadline) != 0 ||
            tfx_socket_read_all(fd, &ack, sizeof ack, s->deadline) != 0) {
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

/* The processes above this one that have not connected, e.g. "2, 3". */
static void missing_list(const tfx_socket *t, char *list, size_t size)
{
    size_t at = 0;
    list[0] = '\0';
    for (int q = t->self + 1; q < t->processes && at + 16 < size; q++)
        if (t->peers[q].fd < 0)
            at += (size_t)snprintf(list + at, size - at, "%s%d", at ? ", " : "", q);
}

/* Why a hello from a higher process cannot be accepted (0: it can). */
static int refuse_hello(const setup *s, const hello *h, char *why, size_t size)
{
    const tfx_socket *t = s->t;
    if (check_hello(s, h, -1, why, size) != 0)
        return -1;
    if (h->process <= t->self || h->process >= t->processes) {
        snprintf(why, size, "process %d should not connect to process %d", h->process, t->self);
        return -1;
    }
    if (t->peers[h->process].fd >= 0) {
        snprintf(why, size, "two processes claim process rank %d (RANK / WORLD_SIZE given twice?)",
                 h->process);
        return -1;
    }
    return 0;
}

/* Answers the hello on a fresh connection.  Returns 1 when fd is now a
 * peer's, 0 when it was dropped (a stranger, or a peer that gave up and
 * will retry), or TF_EINVAL when a peer of this run must be refused. */
static int accept_one(setup *s, int fd, tf_error *err)
{
    tfx_socket *t = s->t;
    hello h, ack;
    /* A stranger that sends nothing must not hold the set-up up long. */
    double hello_deadline = tf_now_seconds() + 10.0;
    if (hello_deadline > s->deadline)
        hello_deadline = s->deadline;
    if (tfx_socket_read_all(fd, &h, sizeof h, hello_deadline) != 0 || h.magic != HELLO_MAGIC) {
        close(fd); /* not one of ours: ignore it */
        return 0;
    }
    char why[256];
    int bad = refuse_hello(s, &h, why, sizeof why);
    make_hello(s, h.process, &ack);
    ack.status = bad ? 1 : 0;
    snprintf(ack.reason, sizeof ack.reason, "%s", bad ? why : "");
    int wrote = tfx_socket_write_all(fd, &ack, sizeof ack, s->deadline);
    if (bad || wrote != 0) {
        close(fd);
        if (!bad)
            return 0; /* it gave up; it retries until its deadline */
        return tf_fail(err, TF_EINVAL, "socket transport: process %d refused a connection "
                                       "from process %d: %s",
                       t->self, h.process, why);
    }
    tune(fd);
    t->peers[h.process].fd = fd;
    return 1;
}

/* Accepts the connections of every higher process. */
static int accept_higher(setup *s, tf_error *err)
{
    tfx_socket *t = s->t;
    int missing = t->processes - 1 - t->self;
    while (missing > 0) {
        if (tf_now_seconds() >= s->deadline) {
            char list[256];
            missing_list(t, list, sizeof list);
            return tf_fail(err, TF_ERUNTIME,
                           "socket transport: process(es) %s did not connect to process %d "
                           "within %.0f s (are they running, with the same TFX_RUN_ID and "
                           "rendezvous folder %s (%s)? see TFX_TIMEOUT)",
                           list, t->self, t->timeout_s, s->dir, s->dir_from);
        }
        struct pollfd pfd = {s->listen_fd, POLLIN, 0};
        int pr = poll(&pfd, 1, tfx_socket_poll_ms(s->deadline));
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
        int rc = accept_one(s, fd, err);
        if (rc < 0)
            return rc;
        missing -= rc;
    }
    return 0;
}

/* The address to listen on and the host name to publish: the options, the
 * environment (TFX_SOCKET_BIND, TFX_SOCKET_HOST), else loopback, or this
 * machine's name when listening on every interface. */
static int addresses(const tfx_socket_options *o, const char **bind_addr, const char **host,
                     char *hostname, size_t size, tf_error *err)
{
    *bind_addr = o->bind_addr && *o->bind_addr ? o->bind_addr : getenv("TFX_SOCKET_BIND");
    if (!*bind_addr || !**bind_addr)
        *bind_addr = "127.0.0.1";
    *host = o->advertise_host && *o->advertise_host ? o->advertise_host
                                                    : getenv("TFX_SOCKET_HOST");
    if (!*host || !**host) {
        *host = *bind_addr;
        if (is_wildcard(*bind_addr)) {
            if (gethostname(hostname, size) != 0)
                return tf_fail(err, TF_ERUNTIME,
                               "socket transport: gethostname(): %s (set TFX_SOCKET_HOST)",
                               strerror(errno));
            hostname[size - 1] = '\0';
            *host = hostname;
        }
    }
    if (strchr(*host, ' ') || strlen(*host) > 200)
        return tf_fail(err, TF_EINVAL,
                       "socket transport: host \"%s\" (TFX_SOCKET_HOST): not a host name", *host);
    return 0;
}

static int check_folder(const setup *s, tf_error *err)
{
    struct stat st;
    if (stat(s->dir, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    return tf_fail(err, TF_EIO, "rendezvous folder %s (%s): %s", s->dir, s->dir_from,
                   stat(s->dir, &st) != 0 ? strerror(errno) : "not a directory");
}

int tfx_socket_connect_peers(tfx_socket *t, const tfx_socket_options *o, tf_error *err)
{
    setup s = {.t = t, .listen_fd = -1};
    const char *bind_addr, *host;
    char hostname[256];
    int port = 0;
    s.dir = tfx_launch_rendezvous_dir(o->rendezvous_dir, &s.dir_from);
    tfx_launch_run_key(o->run_id, s.run, sizeof s.run);
    s.started = time(NULL);
    s.deadline = tf_now_seconds() + t->timeout_s;
    int rc = addresses(o, &bind_addr, &host, hostname, sizeof hostname, err);
    if (rc == 0)
        rc = check_folder(&s, err);
    if (rc == 0)
        rc = start_listening(&s, bind_addr, &port, err);
    if (rc == 0)
        rc = publish(&s, host, port, err);
    for (int q = 0; rc == 0 && q < t->self; q++)
        rc = connect_lower(&s, q, err);
    if (rc == 0)
        rc = accept_higher(&s, err);
    /* Connected (or failed): nobody reads the file any more. */
    if (s.published)
        remove(s.addr_path);
    if (s.listen_fd >= 0)
        close(s.listen_fd);
    return rc;
}
