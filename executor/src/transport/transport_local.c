/* transport_local.c - in-process transport for rank threads.
 *
 * One mutex and one condition variable guard a list of pending messages; the
 * pipelines here have a handful of ranks and a few messages in flight, so a
 * linear search is cheaper than anything cleverer.  Sends copy the payload,
 * which makes them eager (see transport.h).
 */
#include "tfx/transport.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct message {
    struct message *next;
    int from, to;
    long tag;
    size_t bytes;
    unsigned char payload[]; /* bytes */
} message;

typedef struct local_ctx {
    int ranks;
    pthread_mutex_t lock;
    pthread_cond_t arrived;
    message *head;
    int aborted;
    int abort_rank;
    char abort_msg[512];
} local_ctx;

static int aborted_error(local_ctx *c, int self, tf_error *err)
{
    return tf_fail(err, TF_ERUNTIME, "rank %d stopped because rank %d failed: %s", self,
                   c->abort_rank, c->abort_msg);
}

static int local_send(void *ctx, int from, int to, long tag, const void *buf, size_t bytes,
                      tf_error *err)
{
    local_ctx *c = ctx;
    if (to < 0 || to >= c->ranks)
        return tf_fail(err, TF_ERUNTIME, "transport: send from rank %d to rank %d of %d", from,
                       to, c->ranks);
    message *msg = malloc(sizeof *msg + bytes);
    if (!msg)
        return tf_fail(err, TF_ENOMEM, "transport: out of memory for a %zu-byte message",
                       bytes);
    msg->next = NULL;
    msg->from = from;
    msg->to = to;
    msg->tag = tag;
    msg->bytes = bytes;
    if (bytes)
        memcpy(msg->payload, buf, bytes);
    pthread_mutex_lock(&c->lock);
    if (c->aborted) {
        int rc = aborted_error(c, from, err);
        pthread_mutex_unlock(&c->lock);
        free(msg);
        return rc;
    }
    /* Append, so messages with equal keys keep their order. */
    message **tail = &c->head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = msg;
    pthread_cond_broadcast(&c->arrived);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

static int local_recv(void *ctx, int to, int from, long tag, void *buf, size_t bytes,
                      tf_error *err)
{
    local_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        if (c->aborted) {
            int rc = aborted_error(c, to, err);
            pthread_mutex_unlock(&c->lock);
            return rc;
        }
        for (message **p = &c->head; *p; p = &(*p)->next) {
            message *msg = *p;
            if (msg->to != to || msg->from != from || msg->tag != tag)
                continue;
            *p = msg->next;
            pthread_mutex_unlock(&c->lock);
            int rc = 0;
            if (msg->bytes != bytes)
                rc = tf_fail(err, TF_ERUNTIME,
                             "transport: rank %d expected %zu bytes from rank %d (tag %ld) "
                             "but got %zu",
                             to, bytes, from, tag, msg->bytes);
            else if (bytes)
                memcpy(buf, msg->payload, bytes);
            free(msg);
            return rc;
        }
        pthread_cond_wait(&c->arrived, &c->lock);
    }
}

static void local_abort(void *ctx, int rank, const char *msg)
{
    local_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    if (!c->aborted) {
        c->aborted = 1;
        c->abort_rank = rank;
        snprintf(c->abort_msg, sizeof c->abort_msg, "%s", msg ? msg : "(no message)");
    }
    pthread_cond_broadcast(&c->arrived);
    pthread_mutex_unlock(&c->lock);
}

static int local_reset(void *ctx)
{
    local_ctx *c = ctx;
    int dropped = 0;
    pthread_mutex_lock(&c->lock);
    while (c->head) {
        message *msg = c->head;
        c->head = msg->next;
        free(msg);
        dropped++;
    }
    c->aborted = 0;
    c->abort_rank = -1;
    c->abort_msg[0] = '\0';
    pthread_mutex_unlock(&c->lock);
    return dropped;
}

static void local_destroy(void *ctx)
{
    local_ctx *c = ctx;
    if (!c)
        return;
    local_reset(c);
    pthread_cond_destroy(&c->arrived);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static const tfx_transport_ops local_ops = {
    .name = "local",
    .send = local_send,
    .recv = local_recv,
    .abort = local_abort,
    .reset = local_reset,
    .destroy = local_destroy,
};

int tfx_transport_local_create(int ranks, tfx_transport *out, tf_error *err)
{
    local_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return tf_fail(err, TF_ENOMEM, "transport: out of memory");
    c->ranks = ranks;
    c->abort_rank = -1;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->arrived, NULL);
    out->ops = &local_ops;
    out->ctx = c;
    return 0;
}
