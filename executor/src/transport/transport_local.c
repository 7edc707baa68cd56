/* transport_local.c - in-process transport for rank threads.
 *
 * Every rank is a thread of this process, so a message is a host copy of
 * the tensor in the mailbox (mailbox.h): copying makes the send eager (see
 * transport.h), and the mailbox does the matching, the waiting and the
 * abort.
 */
#include "tfx/transport.h"

#include <stdlib.h>

#include "mailbox.h"

typedef struct local_ctx {
    int ranks;
    tfx_mailbox mb;
} local_ctx;

static int local_send(void *ctx, int from, int to, long tag, const void *buf, size_t bytes,
                      tf_error *err)
{
    local_ctx *c = ctx;
    if (to < 0 || to >= c->ranks)
        return tf_fail(err, TF_ERUNTIME, "transport: send from rank %d to rank %d of %d", from,
                       to, c->ranks);
    return tfx_mailbox_post_copy(&c->mb, from, to, tag, buf, bytes, err);
}

static int local_recv(void *ctx, int to, int from, long tag, void *buf, size_t bytes,
                      tf_error *err)
{
    return tfx_mailbox_take_copy(&((local_ctx *)ctx)->mb, to, from, tag, NULL, buf, bytes, err);
}

static int local_ready(void *ctx, int to, int from, long tag)
{
    return tfx_mailbox_ready(&((local_ctx *)ctx)->mb, to, from, tag);
}

static void local_abort(void *ctx, int rank, const char *msg)
{
    tfx_mailbox_abort(&((local_ctx *)ctx)->mb, rank, msg);
}

static int local_reset(void *ctx)
{
    return tfx_mailbox_reset(&((local_ctx *)ctx)->mb);
}

static void local_destroy(void *ctx)
{
    local_ctx *c = ctx;
    if (!c)
        return;
    tfx_mailbox_destroy(&c->mb);
    free(c);
}

static const tfx_transport_ops local_ops = {
    .name = "local",
    .send = local_send,
    .recv = local_recv,
    .ready = local_ready,
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
    tfx_mailbox_init(&c->mb, NULL, NULL);
    out->ops = &local_ops;
    out->ctx = c;
    return 0;
}
