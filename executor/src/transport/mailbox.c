/* mailbox.c - the message queue every transport keeps (see mailbox.h).
 *
 * A singly linked list searched from the head: the pipelines here have a
 * handful of ranks and a few messages in flight, so a linear search is
 * cheaper than anything cleverer, and it keeps equal keys in order.
 */
#include "mailbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tf/util.h"

static tfx_mail *mail_new(int from, int to, long tag, size_t bytes, size_t room)
{
    tfx_mail *m = malloc(sizeof *m + room);
    if (!m)
        return NULL;
    *m = (tfx_mail){.from = from, .to = to, .tag = tag, .bytes = bytes};
    return m;
}

tfx_mail *tfx_mail_host(int from, int to, long tag, size_t bytes, const void *src)
{
    tfx_mail *m = mail_new(from, to, tag, bytes, bytes);
    if (!m)
        return NULL;
    /* The payload lives right behind the header, in the same allocation. */
    m->payload = (unsigned char *)(m + 1);
    if (src && bytes)
        memcpy(m->payload, src, bytes);
    return m;
}

tfx_mail *tfx_mail_item(int from, int to, long tag, size_t bytes, void *item)
{
    tfx_mail *m = mail_new(from, to, tag, bytes, 0);
    if (m)
        m->item = item;
    return m;
}

void tfx_mail_free(tfx_mail *m)
{
    free(m);
}

int tfx_mail_check_size(const tfx_mail *m, size_t bytes, tf_error *err)
{
    if (m->bytes == bytes)
        return 0;
    return tf_fail(err, TF_ERUNTIME,
                   "transport: rank %d expected %zu bytes from rank %d (tag %ld) but got %zu",
                   m->to, bytes, m->from, m->tag, m->bytes);
}

int tfx_mail_read(const tfx_mail *m, void *buf, size_t bytes, tf_error *err)
{
    int rc = tfx_mail_check_size(m, bytes, err);
    if (rc == 0 && bytes)
        memcpy(buf, m->payload, bytes);
    return rc;
}

void tfx_mailbox_init(tfx_mailbox *mb, void (*drop)(void *arg, tfx_mail *m), void *drop_arg)
{
    memset(mb, 0, sizeof *mb);
    pthread_mutex_init(&mb->lock, NULL);
    pthread_cond_init(&mb->changed, NULL);
    mb->abort_rank = -1;
    mb->drop = drop;
    mb->drop_arg = drop_arg;
}

void tfx_mailbox_destroy(tfx_mailbox *mb)
{
    tfx_mailbox_reset(mb);
    pthread_cond_destroy(&mb->changed);
    pthread_mutex_destroy(&mb->lock);
}

static int aborted_error(const tfx_mailbox *mb, int self, tf_error *err)
{
    return tf_fail(err, TF_ERUNTIME, "rank %d stopped because rank %d failed: %s", self,
                   mb->abort_rank, mb->abort_msg);
}

int tfx_mailbox_check_locked(const tfx_mailbox *mb, int self, tf_error *err)
{
    return mb->aborted ? aborted_error(mb, self, err) : 0;
}

int tfx_mailbox_check(tfx_mailbox *mb, int self, tf_error *err)
{
    pthread_mutex_lock(&mb->lock);
    int rc = tfx_mailbox_check_locked(mb, self, err);
    pthread_mutex_unlock(&mb->lock);
    return rc;
}

int tfx_mailbox_post(tfx_mailbox *mb, tfx_mail *m, tf_error *err)
{
    pthread_mutex_lock(&mb->lock);
    int rc = tfx_mailbox_check_locked(mb, m->from, err);
    if (rc == 0) {
        m->next = NULL;
        if (mb->tail)
            mb->tail->next = m;
        else
            mb->head = m;
        mb->tail = m;
        pthread_cond_broadcast(&mb->changed);
    }
    pthread_mutex_unlock(&mb->lock);
    return rc;
}

int tfx_mailbox_post_copy(tfx_mailbox *mb, int from, int to, long tag, const void *buf,
                          size_t bytes, tf_error *err)
{
    tfx_mail *m = tfx_mail_host(from, to, tag, bytes, buf);
    if (!m)
        return tf_fail(err, TF_ENOMEM, "transport: out of memory for a %zu-byte message",
                       bytes);
    int rc = tfx_mailbox_post(mb, m, err);
    if (rc < 0)
        tfx_mail_free(m);
    return rc;
}

static void discard_locked(tfx_mailbox *mb, tfx_mail *m)
{
    if (mb->drop)
        mb->drop(mb->drop_arg, m);
    tfx_mail_free(m);
}

void tfx_mailbox_discard(tfx_mailbox *mb, tfx_mail *m)
{
    pthread_mutex_lock(&mb->lock);
    discard_locked(mb, m);
    pthread_mutex_unlock(&mb->lock);
}

static int matches(const tfx_mail *m, int to, int from, long tag)
{
    return m->to == to && m->from == from && m->tag == tag;
}

/* Unlinks and returns the oldest message (from -> to, tag), or NULL. */
static tfx_mail *unlink_match(tfx_mailbox *mb, int to, int from, long tag)
{
    tfx_mail *prev = NULL;
    for (tfx_mail *m = mb->head; m; prev = m, m = m->next) {
        if (!matches(m, to, from, tag))
            continue;
        if (prev)
            prev->next = m->next;
        else
            mb->head = m->next;
        if (mb->tail == m)
            mb->tail = prev;
        m->next = NULL;
        return m;
    }
    return NULL;
}

int tfx_mailbox_ready(tfx_mailbox *mb, int to, int from, long tag)
{
    pthread_mutex_lock(&mb->lock);
    int ready = mb->aborted;
    for (const tfx_mail *m = mb->head; m && !ready; m = m->next)
        ready = matches(m, to, from, tag);
    pthread_mutex_unlock(&mb->lock);
    return ready;
}

int tfx_mailbox_take(tfx_mailbox *mb, int to, int from, long tag, const tfx_mailbox_wait *w,
                     tfx_mail **out, tf_error *err)
{
    const double deadline = w ? w->deadline : 0.0;
    int rc = 0;
    *out = NULL;
    pthread_mutex_lock(&mb->lock);
    for (;;) {
        if ((rc = tfx_mailbox_check_locked(mb, to, err)) < 0)
            break;
        if ((*out = unlink_match(mb, to, from, tag)) != NULL)
            break;
        if (w && w->check && (rc = w->check(w->arg, err)) < 0)
            break;
        double left = deadline - tf_now_seconds();
        if (deadline > 0 && left <= 0) {
            rc = TFX_MAILBOX_TIMEOUT;
            break;
        }
        /* Wake up at least every second: the deadline is checked here, on
         * the monotonic clock, not on the wall clock the wait uses. */
        tfx_mailbox_sleep_locked(mb, deadline > 0 ? (left < 1.0 ? left : 1.0) : 0.0);
    }
    pthread_mutex_unlock(&mb->lock);
    return rc;
}

int tfx_mailbox_take_copy(tfx_mailbox *mb, int to, int from, long tag,
                          const tfx_mailbox_wait *w, void *buf, size_t bytes, tf_error *err)
{
    tfx_mail *m;
    int rc = tfx_mailbox_take(mb, to, from, tag, w, &m, err);
    if (rc != 0)
        return rc;
    rc = tfx_mail_read(m, buf, bytes, err);
    tfx_mail_free(m);
    return rc;
}

int tfx_mailbox_abort_locked(tfx_mailbox *mb, int rank, const char *msg)
{
    if (mb->aborted)
        return 0;
    mb->aborted = 1;
    mb->abort_rank = rank;
    snprintf(mb->abort_msg, sizeof mb->abort_msg, "%s", msg ? msg : "(no message)");
    pthread_cond_broadcast(&mb->changed);
    return 1;
}

int tfx_mailbox_abort(tfx_mailbox *mb, int rank, const char *msg)
{
    pthread_mutex_lock(&mb->lock);
    int first = tfx_mailbox_abort_locked(mb, rank, msg);
    pthread_mutex_unlock(&mb->lock);
    return first;
}

int tfx_mailbox_cause(tfx_mailbox *mb, int *rank, char *msg, size_t size)
{
    pthread_mutex_lock(&mb->lock);
    int aborted = mb->aborted;
    if (aborted && rank)
        *rank = mb->abort_rank;
    if (aborted && msg && size)
        snprintf(msg, size, "%s", mb->abort_msg);
    pthread_mutex_unlock(&mb->lock);
    return aborted;
}

static int reset_locked(tfx_mailbox *mb)
{
    int dropped = 0;
    while (mb->head) {
        tfx_mail *m = mb->head;
        mb->head = m->next;
        discard_locked(mb, m);
        dropped++;
    }
    mb->tail = NULL;
    mb->aborted = 0;
    mb->abort_rank = -1;
    mb->abort_msg[0] = '\0';
    return dropped;
}

int tfx_mailbox_reset(tfx_mailbox *mb)
{
    pthread_mutex_lock(&mb->lock);
    int dropped = reset_locked(mb);
    pthread_mutex_unlock(&mb->lock);
    return dropped;
}

void tfx_mailbox_wake(tfx_mailbox *mb)
{
    pthread_cond_broadcast(&mb->changed);
}

void tfx_mailbox_sleep_locked(tfx_mailbox *mb, double seconds)
{
    if (seconds <= 0) {
        pthread_cond_wait(&mb->changed, &mb->lock);
        return;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)seconds;
    until.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&mb->changed, &mb->lock, &until);
}
