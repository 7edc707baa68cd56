/* mailbox.h - the message queue every transport keeps (internal to the
 * executor; used by src/transport and by cuda/).
 *
 * A transport delivers each message into the receiving side's mailbox; a
 * receive takes it out by (sender, receiver, tag).  Messages with the same
 * key come out in the order they went in.  The mailbox also holds the
 * transport's failure: the first abort wins, wakes every waiting receive,
 * and is what every later call reports until reset.  That is the contract
 * of tfx/transport.h, kept here once for the local, socket, cuda and nccl
 * transports, which differ only in how the bytes travel.
 *
 * Locking: `lock` guards the queue and the abort, and `changed` is signalled
 * when either changes.  A transport guards its own shared state (peers,
 * buffer pools) with the same mutex, and calls tfx_mailbox_wake when that
 * state changes what a receive waits for.  Functions ending in _locked
 * expect the mutex held; all others take it themselves.  The fields are
 * visible so that a transport can embed the mailbox and read `aborted`,
 * `abort_rank` and `abort_msg` while holding the lock.
 */
#ifndef TFX_MAILBOX_H
#define TFX_MAILBOX_H

#include <pthread.h>
#include <stddef.h>

/* The .cu transports are C++; the mailbox and the project's headers are C. */
#ifdef __cplusplus
extern "C" {
#endif

#include "tf/error.h"

/* One message.  Its payload is either host bytes owned by the message
 * (tfx_mail_host) or a handle of the transport's, such as a device buffer
 * (tfx_mail_item). */
typedef struct tfx_mail {
    struct tfx_mail *next;
    int from, to;           /* sender and receiver ranks */
    long tag;
    size_t bytes;           /* the payload's size */
    unsigned char *payload; /* tfx_mail_host: `bytes` of host memory; else NULL */
    void *item;             /* tfx_mail_item: the transport's handle; else NULL */
} tfx_mail;

typedef struct tfx_mailbox {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    tfx_mail *head, *tail;  /* undelivered messages, oldest first */
    int aborted, abort_rank;
    char abort_msg[512];
    void (*drop)(void *arg, tfx_mail *m); /* releases m->item; may be NULL */
    void *drop_arg;
} tfx_mailbox;

/* A message with room for `bytes` of host payload, copied from src when src
 * is not NULL (a receiver thread that reads the payload from a socket passes
 * NULL and fills m->payload).  Returns NULL when out of memory.  Release with
 * tfx_mail_free. */
tfx_mail *tfx_mail_host(int from, int to, long tag, size_t bytes, const void *src);

/* A message whose payload is the transport's `item` (e.g. a device buffer
 * holding `bytes`).  Returns NULL when out of memory.  tfx_mail_free does
 * not release the item. */
tfx_mail *tfx_mail_item(int from, int to, long tag, size_t bytes, void *item);

/* Frees m (accepts NULL). */
void tfx_mail_free(tfx_mail *m);

/* Checks that m carries exactly `bytes`, what the receive asked for.
 * Returns 0, or TF_ERUNTIME naming both ranks, the tag and both sizes. */
int tfx_mail_check_size(const tfx_mail *m, size_t bytes, tf_error *err);

/* Copies a host payload into buf after the size check (tfx_mail_check_size).
 * Returns 0 or TF_ERUNTIME. */
int tfx_mail_read(const tfx_mail *m, void *buf, size_t bytes, tf_error *err);

/* Prepares an empty mailbox.  drop (may be NULL) releases the item of a
 * message the mailbox discards (reset, destroy, tfx_mailbox_discard); it is
 * called with the lock held, before the mailbox frees the message. */
void tfx_mailbox_init(tfx_mailbox *mb, void (*drop)(void *arg, tfx_mail *m), void *drop_arg);

/* Discards what is left (as reset) and releases the lock and condition.
 * No thread may use the mailbox any more. */
void tfx_mailbox_destroy(tfx_mailbox *mb);

/* Appends m, waking the receives.  Returns 0 (m is the mailbox's now), or,
 * when the mailbox was aborted, TF_ERUNTIME "rank FROM stopped because rank
 * R failed: MSG" (err may be NULL) and m stays the caller's. */
int tfx_mailbox_post(tfx_mailbox *mb, tfx_mail *m, tf_error *err);

/* Posts a host copy of buf (`bytes`) as the message from -> to (tag): the
 * eager send of a transport whose ranks share host memory.  Returns 0,
 * TF_ENOMEM, or the aborted error of tfx_mailbox_post; buf may be reused at
 * once either way. */
int tfx_mailbox_post_copy(tfx_mailbox *mb, int from, int to, long tag, const void *buf,
                          size_t bytes, tf_error *err);

/* Drops m's item and frees m: for a message that could not be posted. */
void tfx_mailbox_discard(tfx_mailbox *mb, tfx_mail *m);

/* How long tfx_mailbox_take waits, and what else may end the wait. */
typedef struct tfx_mailbox_wait {
    double deadline; /* on the tf_now_seconds() clock; <= 0: no deadline */
    /* Called with the lock held whenever the wait finds no message: a
     * negative return ends the wait with that error (a peer that is gone).
     * May be NULL. */
    int (*check)(void *arg, tf_error *err);
    void *arg;
} tfx_mailbox_wait;

/* What tfx_mailbox_take returns when the deadline passed first. */
#define TFX_MAILBOX_TIMEOUT 1

/* Takes the message (from -> to, tag) out of the mailbox, waiting until it
 * is there.  An abort ends the wait even when the message is there.
 * Returns 0 with *out (the caller's: tfx_mail_free after releasing its
 * item); TF_ERUNTIME "rank TO stopped because rank R failed: MSG" when the
 * mailbox is or gets aborted; w->check's error; or TFX_MAILBOX_TIMEOUT
 * (nothing written to err) when w->deadline passed: the transport words
 * that itself, usually aborting.  w NULL: no deadline, no check. */
int tfx_mailbox_take(tfx_mailbox *mb, int to, int from, long tag, const tfx_mailbox_wait *w,
                     tfx_mail **out, tf_error *err);

/* tfx_mailbox_take, then copies the host payload into buf, which must be
 * exactly `bytes` long (tfx_mail_read), and frees the message.  Returns as
 * tfx_mailbox_take, or TF_ERUNTIME for a size mismatch. */
int tfx_mailbox_take_copy(tfx_mailbox *mb, int to, int from, long tag,
                          const tfx_mailbox_wait *w, void *buf, size_t bytes, tf_error *err);

/* Whether tfx_mailbox_take(to, from, tag) would return at once: 1 when the
 * message is there or the mailbox is aborted, 0 otherwise.  Takes nothing. */
int tfx_mailbox_ready(tfx_mailbox *mb, int to, int from, long tag);

/* Marks the transport failed because `rank` failed with msg (NULL: "(no
 * message)") and wakes every waiting receive.  The first abort wins: returns
 * 1 when this call aborted, 0 when the mailbox already was aborted. */
int tfx_mailbox_abort(tfx_mailbox *mb, int rank, const char *msg);
int tfx_mailbox_abort_locked(tfx_mailbox *mb, int rank, const char *msg);

/* Returns 0, or when aborted TF_ERUNTIME "rank SELF stopped because rank R
 * failed: MSG": what a send reports before it starts. */
int tfx_mailbox_check(tfx_mailbox *mb, int self, tf_error *err);
int tfx_mailbox_check_locked(const tfx_mailbox *mb, int self, tf_error *err);

/* Whether the mailbox is aborted (1) or not (0); when it is, *rank and msg
 * (up to size bytes) get the cause.  rank and msg may be NULL. */
int tfx_mailbox_cause(tfx_mailbox *mb, int *rank, char *msg, size_t size);

/* Between steps: discards every message and clears the abort.  Returns the
 * number of messages discarded (0 after a clean step). */
int tfx_mailbox_reset(tfx_mailbox *mb);

/* Wakes every thread waiting on `changed` (lock held or not): the
 * transport's own state changed. */
void tfx_mailbox_wake(tfx_mailbox *mb);

/* With the lock held: waits until woken or `seconds` passed (<= 0: until
 * woken).  Wakes may be spurious; callers re-check their condition. */
void tfx_mailbox_sleep_locked(tfx_mailbox *mb, double seconds);

#ifdef __cplusplus
}
#endif

#endif
