/* test_exec_socket.c - the socket transport: messages between processes
 * (two transport instances in one process, each set up on its own thread,
 * and a forked child for a peer that dies), eager sends, abort propagation,
 * timeouts, set-up errors. */
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "temp_dir.h"
#include "tf/util.h"
#include "tfx/transport.h"

typedef struct hook_log {
    pthread_mutex_t lock;
    int calls, rank;
    char msg[512];
} hook_log;

static void hook(void *arg, int rank, const char *msg)
{
    hook_log *h = arg;
    pthread_mutex_lock(&h->lock);
    h->calls++;
    h->rank = rank;
    snprintf(h->msg, sizeof h->msg, "%s", msg);
    pthread_mutex_unlock(&h->lock);
}

/* The hook's calls, after waiting (at most 5 s) for the first: it runs on
 * the receiver thread just after the abort has woken the waiting ranks. */
static int hook_calls(hook_log *h)
{
    int calls = 0;
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&h->lock);
        calls = h->calls;
        pthread_mutex_unlock(&h->lock);
        if (calls)
            break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return calls;
}

typedef struct maker {
    tfx_socket_options o;
    tfx_transport tr;
    int rc;
    tf_error err;
    hook_log hook;
} maker;

static void *make_thread(void *arg)
{
    maker *m = arg;
    m->rc = tfx_transport_socket_create(&m->o, &m->tr, &m->err);
    return NULL;
}

/* Sets up `processes` instances concurrently (as separate processes would)
 * with `ranks` ranks in dir; returns the first failure's code. */
static int make_all(maker *m, int processes, int ranks, const char *dir, double timeout)
{
    pthread_t th[8];
    for (int q = 0; q < processes; q++) {
        memset(&m[q], 0, sizeof m[q]);
        pthread_mutex_init(&m[q].hook.lock, NULL);
        m[q].hook.rank = -1;
        m[q].o = (tfx_socket_options){.ranks = ranks, .processes = processes, .process_rank = q,
                                      .rendezvous_dir = dir, .run_id = "unit",
                                      .timeout_s = timeout, .on_remote_abort = hook,
                                      .on_remote_abort_arg = &m[q].hook};
        assert_int_equal(pthread_create(&th[q], NULL, make_thread, &m[q]), 0);
    }
    int rc = 0;
    for (int q = 0; q < processes; q++) {
        pthread_join(th[q], NULL);
        if (m[q].rc < 0 && rc == 0)
            rc = m[q].rc;
    }
    return rc;
}

static void *destroy_thread(void *arg)
{
    maker *m = arg;
    if (m->rc == 0)
        m->tr.ops->destroy(m->tr.ctx);
    pthread_mutex_destroy(&m->hook.lock);
    return NULL;
}

/* Destroys every instance concurrently (processes end at about the same
 * time; each waits briefly for the others' goodbyes). */
static void destroy_all(maker *m, int processes)
{
    pthread_t th[8];
    for (int q = 0; q < processes; q++)
        assert_int_equal(pthread_create(&th[q], NULL, destroy_thread, &m[q]), 0);
    for (int q = 0; q < processes; q++)
        pthread_join(th[q], NULL);
}

static void fill(unsigned char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(i * 31 + (size_t)seed * 7);
}

enum { BIG = 64 * 1024, COUNT = 64 }; /* 4 MiB in flight: more than socket buffers */

static void test_messages_between_processes(void **state)
{
    (void)state;
    char dir[64];
    temp_dir_make("tfx_socket_test.", dir, sizeof dir);
    maker m[2];
    /* 4 ranks: 0, 1 in process 0; 2, 3 in process 1. */
    assert_int_equal(make_all(m, 2, 4, dir, 20.0), 0);
    const tfx_transport a = m[0].tr, b = m[1].tr;
    tf_error err = {0};
    unsigned char *buf = malloc(BIG), *got = malloc(BIG);

    /* Eager: every send returns before anything is received. */
    for (int i = 0; i < COUNT; i++) {
        fill(buf, BIG, i);
        assert_int_equal(a.ops->send(a.ctx, 1, 2, i, buf, BIG, &err), 0);
    }
    /* Received in another order than sent, matched by tag. */
    for (int i = COUNT - 1; i >= 0; i--) {
        assert_int_equal(b.ops->recv(b.ctx, 2, 1, i, got, BIG, &err), 0);
        fill(buf, BIG, i);
        assert_memory_equal(got, buf, BIG);
    }
    /* Back, between the other ranks, empty, and within one process. */
    int32_t v = 12345, w = 0;
    assert_int_equal(b.ops->send(b.ctx, 3, 0, -7, &v, sizeof v, &err), 0);
    assert_int_equal(a.ops->recv(a.ctx, 0, 3, -7, &w, sizeof w, &err), 0);
    assert_int_equal(w, 12345);
    assert_int_equal(a.ops->send(a.ctx, 0, 3, 5, NULL, 0, &err), 0);
    assert_int_equal(b.ops->recv(b.ctx, 3, 0, 5, NULL, 0, &err), 0);
    v = 77;
    assert_int_equal(a.ops->send(a.ctx, 0, 1, 9, &v, sizeof v, &err), 0);
    assert_int_equal(a.ops->recv(a.ctx, 1, 0, 9, &w, sizeof w, &err), 0);
    assert_int_equal(w, 77);

    /* A size mismatch is an error naming both sizes. */
    double d = 1.0;
    assert_int_equal(a.ops->send(a.ctx, 1, 2, 100, &d, sizeof d, &err), 0);
    assert_int_equal(b.ops->recv(b.ctx, 2, 1, 100, &v, sizeof v, &err), TF_ERUNTIME);
    assert_contains(err.msg, "expected 4 bytes from rank 1 (tag 100) but got 8");

    /* reset drops what was never received: the first message has arrived
     * once the second (same connection, sent later) has. */
    assert_int_equal(a.ops->send(a.ctx, 0, 2, 200, &v, sizeof v, &err), 0);
    assert_int_equal(a.ops->send(a.ctx, 0, 2, 201, &v, sizeof v, &err), 0);
    assert_int_equal(b.ops->recv(b.ctx, 2, 0, 201, &w, sizeof w, &err), 0);
    assert_int_equal(b.ops->reset(b.ctx), 1);
    assert_int_equal(a.ops->reset(a.ctx), 0);
    assert_int_equal(tfx_transport_socket_abort_cause(&a, NULL, NULL, 0), 0);
    assert_int_equal(m[0].hook.calls + m[1].hook.calls, 0);

    free(buf);
    free(got);
    destroy_all(m, 2);
    temp_dir_remove(dir);
}

typedef struct waiter {
    tfx_transport tr;
    int to, from;
    int rc;
    tf_error err;
    double seconds;
} waiter;

static void *recv_thread(void *arg)
{
    waiter *w = arg;
    int32_t v;
    double t0 = tf_now_seconds();
    w->rc = w->tr.ops->recv(w->tr.ctx, w->to, w->from, 1, &v, sizeof v, &w->err);
    w->seconds = tf_now_seconds() - t0;
    return NULL;
}

static void test_abort_reaches_every_process(void **state)
{
    (void)state;
    char dir[64];
    temp_dir_make("tfx_socket_test.", dir, sizeof dir);
    maker m[3];
    assert_int_equal(make_all(m, 3, 3, dir, 30.0), 0);
    /* Ranks 1 and 2 wait for messages that never come; rank 0 fails. */
    waiter w[2] = {{.tr = m[1].tr, .to = 1, .from = 0}, {.tr = m[2].tr, .to = 2, .from = 1}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, recv_thread, &w[i]), 0);
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    m[0].tr.ops->abort(m[0].tr.ctx, 0, "boom at F3");
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].rc, TF_ERUNTIME);
        assert_contains(w[i].err.msg, "because rank 0 failed: boom at F3");
        assert_true(w[i].seconds < 5.0);
    }
    /* Every other process heard it once, through the hook too. */
    for (int q = 1; q < 3; q++) {
        int rank = -1;
        char msg[128];
        assert_int_equal(tfx_transport_socket_abort_cause(&m[q].tr, &rank, msg, sizeof msg), 1);
        assert_int_equal(rank, 0);
        assert_string_equal(msg, "boom at F3");
        assert_int_equal(hook_calls(&m[q].hook), 1);
        assert_int_equal(m[q].hook.rank, 0);
    }
    assert_int_equal(m[0].hook.calls, 0); /* a local abort is not remote */
    /* Sends fail while aborted. */
    tf_error err = {0};
    int32_t v = 1;
    assert_int_equal(m[2].tr.ops->send(m[2].tr.ctx, 2, 1, 3, &v, sizeof v, &err), TF_ERUNTIME);
    assert_contains(err.msg, "rank 0 failed");
    destroy_all(m, 3);
    temp_dir_remove(dir);
}

static void test_receive_timeout(void **state)
{
    (void)state;
    char dir[64];
    temp_dir_make("tfx_socket_test.", dir, sizeof dir);
    maker m[2];
    assert_int_equal(make_all(m, 2, 2, dir, 1.0), 0);
    waiter w = {.tr = m[1].tr, .to = 1, .from = 0};
    recv_thread(&w);
    assert_int_equal(w.rc, TF_ERUNTIME);
    assert_contains(w.err.msg, "rank 1 received nothing from rank 0 (tag 1) within 1 s");
    assert_contains(w.err.msg, "TFX_TIMEOUT");
    assert_true(w.seconds >= 0.9 && w.seconds < 5.0);
    /* The waiting side told the other one. */
    double t0 = tf_now_seconds();
    int rank = -1;
    while (tfx_transport_socket_abort_cause(&m[0].tr, &rank, NULL, 0) != 1 &&
           tf_now_seconds() - t0 < 5.0) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(rank, 1);
    destroy_all(m, 2);
    temp_dir_remove(dir);
}

/* Process 1 is a forked child that sends one message, waits for an answer
 * and dies without a goodbye: process 0 gets the message, then an error
 * naming process 1. */
static void test_peer_that_dies(void **state)
{
    (void)state;
    char dir[64];
    temp_dir_make("tfx_socket_test.", dir, sizeof dir);
    tfx_socket_options o = {.ranks = 2, .processes = 2, .rendezvous_dir = dir,
                            .run_id = "death", .timeout_s = 30.0};
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        tfx_transport tr;
        o.process_rank = 1;
        int32_t v = 42;
        if (tfx_transport_socket_create(&o, &tr, NULL) != 0 ||
            tr.ops->send(tr.ctx, 1, 0, 1, &v, sizeof v, NULL) != 0 ||
            tr.ops->recv(tr.ctx, 1, 0, 2, &v, sizeof v, NULL) != 0 || v != 43)
            _exit(1);
        _exit(0); /* no goodbye: the kernel closes the socket */
    }
    tfx_transport tr;
    tf_error err = {0};
    hook_log h = {.calls = 0, .rank = -1};
    pthread_mutex_init(&h.lock, NULL);
    o.process_rank = 0;
    o.on_remote_abort = hook;
    o.on_remote_abort_arg = &h;
    assert_int_equal(tfx_transport_socket_create(&o, &tr, &err), 0);
    int32_t v = 0;
    assert_int_equal(tr.ops->recv(tr.ctx, 0, 1, 1, &v, sizeof v, &err), 0);
    assert_int_equal(v, 42);
    v = 43;
    assert_int_equal(tr.ops->send(tr.ctx, 0, 1, 2, &v, sizeof v, &err), 0);
    double t0 = tf_now_seconds();
    assert_int_equal(tr.ops->recv(tr.ctx, 0, 1, 3, &v, sizeof v, &err), TF_ERUNTIME);
    assert_true(tf_now_seconds() - t0 < 5.0);
    assert_contains(err.msg, "process 1 (rank 1) closed its connection without a goodbye");
    assert_int_equal(hook_calls(&h), 1);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    tr.ops->destroy(tr.ctx);
    pthread_mutex_destroy(&h.lock);
    temp_dir_remove(dir);
}

static void test_setup_errors(void **state)
{
    (void)state;
    tfx_transport tr;
    tf_error err = {0};
    tfx_socket_options o = {.ranks = 3, .processes = 2, .rendezvous_dir = "/tmp",
                            .timeout_s = 1.0};
    assert_int_equal(tfx_transport_socket_create(&o, &tr, &err), TF_EINVAL);
    assert_contains(err.msg, "3 ranks cannot be split evenly over 2 processes");
    o.ranks = 2;
    o.process_rank = 2;
    assert_int_equal(tfx_transport_socket_create(&o, &tr, &err), TF_EINVAL);
    o.process_rank = 0;
    o.rendezvous_dir = "/nonexistent/tfx";
    assert_int_equal(tfx_transport_socket_create(&o, &tr, &err), TF_EIO);
    assert_contains(err.msg, "rendezvous folder /nonexistent/tfx (the option)");

    /* Alone: nobody connects within the timeout. */
    char dir[64];
    temp_dir_make("tfx_socket_test.", dir, sizeof dir);
    o.rendezvous_dir = dir;
    o.run_id = "alone";
    double t0 = tf_now_seconds();
    assert_int_equal(tfx_transport_socket_create(&o, &tr, &err), TF_ERUNTIME);
    assert_true(tf_now_seconds() - t0 < 5.0);
    assert_contains(err.msg, "process(es) 1 did not connect to process 0 within 1 s");

    /* Two processes that disagree about the run's shape. */
    maker m[2];
    memset(m, 0, sizeof m);
    for (int q = 0; q < 2; q++)
        m[q].o = (tfx_socket_options){.ranks = q ? 4 : 2, .processes = 2, .process_rank = q,
                                      .rendezvous_dir = dir, .run_id = "shape",
                                      .timeout_s = 5.0};
    pthread_t th[2];
    for (int q = 0; q < 2; q++)
        assert_int_equal(pthread_create(&th[q], NULL, make_thread, &m[q]), 0);
    for (int q = 0; q < 2; q++)
        pthread_join(th[q], NULL);
    for (int q = 0; q < 2; q++) {
        assert_int_equal(m[q].rc, TF_EINVAL);
        assert_contains(m[q].err.msg, "pipeline ranks");
    }
    temp_dir_remove(dir);
}

int main(void)
{
    /* SIGPIPE is not ignored: writing to a vanished peer must be an error
     * (MSG_NOSIGNAL), not a signal that ends the process. */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_between_processes),
        cmocka_unit_test(test_abort_reaches_every_process),
        cmocka_unit_test(test_receive_timeout),
        cmocka_unit_test(test_peer_that_dies),
        cmocka_unit_test(test_setup_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
