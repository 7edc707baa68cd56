/* test_exec_mailbox.c - the message queue all four transports share
 * (executor/src/transport/mailbox.h): matching by (sender, receiver, tag)
 * in order, size checks, the first abort wins and wakes a blocked receive,
 * reset, deadlines, the wait's own check, and items handed back through the
 * drop hook. */
#include <pthread.h>
#include <time.h>

#include "mailbox.h"
#include "test_util.h"
#include "tf/util.h"

static tfx_mail *host_int(int from, int to, long tag, int value)
{
    tfx_mail *m = tfx_mail_host(from, to, tag, sizeof value, &value);
    assert_non_null(m);
    return m;
}

/* Takes (from -> to, tag) without waiting long, and returns its int. */
static int take_int(tfx_mailbox *mb, int to, int from, long tag)
{
    tfx_mailbox_wait w = {tf_now_seconds() + 5.0, NULL, NULL};
    tfx_mail *m = NULL;
    int value = -1;
    tf_error err = {0};
    assert_int_equal(tfx_mailbox_take(mb, to, from, tag, &w, &m, &err), 0);
    assert_int_equal(tfx_mail_read(m, &value, sizeof value, &err), 0);
    tfx_mail_free(m);
    return value;
}

static void test_matching_and_order(void **state)
{
    (void)state;
    tfx_mailbox mb;
    tfx_mailbox_init(&mb, NULL, NULL);
    assert_int_equal(tfx_mailbox_post(&mb, host_int(0, 1, 7, 10), NULL), 0);
    assert_int_equal(tfx_mailbox_post(&mb, host_int(0, 1, 8, 20), NULL), 0);
    assert_int_equal(tfx_mailbox_post(&mb, host_int(0, 1, 7, 11), NULL), 0);
    assert_int_equal(tfx_mailbox_post(&mb, host_int(2, 1, 7, 30), NULL), 0);
    /* Other keys in any order, equal keys in the order they were posted. */
    assert_int_equal(take_int(&mb, 1, 2, 7), 30);
    assert_int_equal(take_int(&mb, 1, 0, 8), 20);
    assert_int_equal(take_int(&mb, 1, 0, 7), 10);
    assert_int_equal(take_int(&mb, 1, 0, 7), 11);
    /* The queue is empty again and still appends correctly. */
    assert_int_equal(tfx_mailbox_post(&mb, host_int(0, 1, 9, 40), NULL), 0);
    assert_int_equal(take_int(&mb, 1, 0, 9), 40);
    assert_int_equal(tfx_mailbox_reset(&mb), 0);
    tfx_mailbox_destroy(&mb);
}

static void test_size_check(void **state)
{
    (void)state;
    tf_error err = {0};
    char buf[8];
    tfx_mail *m = tfx_mail_host(3, 4, 5, 6, "hello");
    assert_non_null(m);
    assert_int_equal(tfx_mail_check_size(m, 6, &err), 0);
    assert_int_equal(tfx_mail_read(m, buf, 8, &err), TF_ERUNTIME);
    assert_contains(err.msg, "rank 4 expected 8 bytes from rank 3 (tag 5) but got 6");
    assert_int_equal(tfx_mail_read(m, buf, 6, &err), 0);
    assert_string_equal(buf, "hello");
    tfx_mail_free(m);
}

/* The host-memory transports' send and receive: the copy is eager (the
 * sender's buffer may change at once) and a receive of the wrong size
 * fails naming both sizes. */
static void test_copies(void **state)
{
    (void)state;
    tfx_mailbox mb;
    tf_error err = {0};
    int sent[3] = {1, 2, 3}, got[3] = {0};
    tfx_mailbox_init(&mb, NULL, NULL);
    assert_int_equal(tfx_mailbox_post_copy(&mb, 0, 1, 4, sent, sizeof sent, &err), 0);
    sent[0] = 99;
    assert_int_equal(tfx_mailbox_take_copy(&mb, 1, 0, 4, NULL, got, sizeof got, &err), 0);
    assert_int_equal(got[0], 1);
    assert_int_equal(got[2], 3);
    assert_int_equal(tfx_mailbox_post_copy(&mb, 0, 1, 4, sent, sizeof sent, &err), 0);
    assert_int_equal(tfx_mailbox_take_copy(&mb, 1, 0, 4, NULL, got, 8, &err), TF_ERUNTIME);
    assert_contains(err.msg, "expected 8 bytes from rank 0 (tag 4) but got 12");
    assert_int_equal(tfx_mailbox_reset(&mb), 0); /* the mismatched message is gone */
    tfx_mailbox_abort(&mb, 1, "stop");
    assert_int_equal(tfx_mailbox_post_copy(&mb, 0, 1, 4, sent, sizeof sent, &err), TF_ERUNTIME);
    assert_int_equal(tfx_mailbox_reset(&mb), 0);
    tfx_mailbox_destroy(&mb);
}

typedef struct blocked {
    tfx_mailbox *mb;
    int rc;
    tf_error err;
} blocked;

static void *receive_forever(void *arg)
{
    blocked *b = arg;
    tfx_mail *m = NULL;
    b->rc = tfx_mailbox_take(b->mb, 1, 0, 3, NULL, &m, &b->err);
    tfx_mail_free(m);
    return NULL;
}

static void test_first_abort_wins(void **state)
{
    (void)state;
    tfx_mailbox mb;
    tfx_mailbox_init(&mb, NULL, NULL);
    blocked b = {.mb = &mb, .rc = 1};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, receive_forever, &b), 0);
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL); /* let it block (it must return either way) */
    assert_int_equal(tfx_mailbox_abort(&mb, 2, "out of luck"), 1);
    assert_int_equal(tfx_mailbox_abort(&mb, 0, "second"), 0);
    pthread_join(thread, NULL);
    assert_int_equal(b.rc, TF_ERUNTIME);
    assert_contains(b.err.msg, "rank 1 stopped because rank 2 failed: out of luck");

    /* After the abort: sends are refused (the message stays the caller's),
     * receives fail even for a message that is there, the cause is kept. */
    tf_error err = {0};
    tfx_mail *m = host_int(0, 1, 3, 1);
    assert_int_equal(tfx_mailbox_post(&mb, m, &err), TF_ERUNTIME);
    assert_contains(err.msg, "rank 0 stopped because rank 2 failed");
    tfx_mail_free(m);
    assert_int_equal(tfx_mailbox_check(&mb, 5, &err), TF_ERUNTIME);
    assert_contains(err.msg, "rank 5 stopped because rank 2 failed: out of luck");
    int rank = -1;
    char msg[64];
    assert_int_equal(tfx_mailbox_cause(&mb, &rank, msg, sizeof msg), 1);
    assert_int_equal(rank, 2);
    assert_string_equal(msg, "out of luck");

    /* Reset clears the abort. */
    assert_int_equal(tfx_mailbox_reset(&mb), 0);
    assert_int_equal(tfx_mailbox_cause(&mb, NULL, NULL, 0), 0);
    assert_int_equal(tfx_mailbox_check(&mb, 5, &err), 0);
    assert_int_equal(tfx_mailbox_abort(&mb, 3, NULL), 1);
    assert_int_equal(tfx_mailbox_cause(&mb, &rank, msg, sizeof msg), 1);
    assert_string_equal(msg, "(no message)");
    tfx_mailbox_destroy(&mb);
}

static void test_abort_beats_a_waiting_message(void **state)
{
    (void)state;
    tfx_mailbox mb;
    tf_error err = {0};
    tfx_mail *m = NULL;
    tfx_mailbox_init(&mb, NULL, NULL);
    assert_int_equal(tfx_mailbox_post(&mb, host_int(0, 1, 3, 1), NULL), 0);
    tfx_mailbox_abort(&mb, 0, "gone");
    assert_int_equal(tfx_mailbox_take(&mb, 1, 0, 3, NULL, &m, &err), TF_ERUNTIME);
    assert_null(m);
    assert_int_equal(tfx_mailbox_reset(&mb), 1);
    tfx_mailbox_destroy(&mb);
}

static int dropped_items;

static void count_drop(void *arg, tfx_mail *m)
{
    assert_ptr_equal(arg, &dropped_items);
    assert_ptr_equal(m->item, &dropped_items);
    dropped_items++;
}

static void test_reset_hands_items_back(void **state)
{
    (void)state;
    tfx_mailbox mb;
    dropped_items = 0;
    tfx_mailbox_init(&mb, count_drop, &dropped_items);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            tfx_mailbox_post(&mb, tfx_mail_item(0, 1, i, 64, &dropped_items), NULL), 0);
    tfx_mail *m = tfx_mail_item(0, 1, 9, 64, &dropped_items);
    tfx_mailbox_discard(&mb, m);
    assert_int_equal(dropped_items, 1);
    tfx_mailbox_abort(&mb, 1, "x");
    assert_int_equal(tfx_mailbox_reset(&mb), 3);
    assert_int_equal(dropped_items, 4);
    assert_int_equal(tfx_mailbox_reset(&mb), 0);
    /* destroy drops what is left too */
    assert_int_equal(tfx_mailbox_post(&mb, tfx_mail_item(0, 1, 0, 0, &dropped_items), NULL), 0);
    tfx_mailbox_destroy(&mb);
    assert_int_equal(dropped_items, 5);
}

static void test_deadline(void **state)
{
    (void)state;
    tfx_mailbox mb;
    tfx_mail *m = NULL;
    tf_error err = {0};
    tfx_mailbox_init(&mb, NULL, NULL);
    double t0 = tf_now_seconds();
    tfx_mailbox_wait w = {t0 + 0.2, NULL, NULL};
    assert_int_equal(tfx_mailbox_take(&mb, 1, 0, 3, &w, &m, &err), TFX_MAILBOX_TIMEOUT);
    double waited = tf_now_seconds() - t0;
    assert_true(waited >= 0.19 && waited < 3.0);
    assert_null(m);
    assert_string_equal(err.msg, ""); /* the transport words it */
    tfx_mailbox_destroy(&mb);
}

static int peer_gone(void *arg, tf_error *err)
{
    int *calls = arg;
    ++*calls;
    return tf_fail(err, TF_ERUNTIME, "the peer is gone");
}

static void test_wait_check(void **state)
{
    (void)state;
    tfx_mailbox mb;
    tfx_mail *m = NULL;
    tf_error err = {0};
    int calls = 0;
    tfx_mailbox_init(&mb, NULL, NULL);
    tfx_mailbox_wait w = {0.0, peer_gone, &calls};
    /* A message that is there is taken before the check is asked. */
    assert_int_equal(tfx_mailbox_post(&mb, host_int(0, 1, 3, 5), NULL), 0);
    assert_int_equal(tfx_mailbox_take(&mb, 1, 0, 3, &w, &m, &err), 0);
    tfx_mail_free(m);
    assert_int_equal(calls, 0);
    assert_int_equal(tfx_mailbox_take(&mb, 1, 0, 3, &w, &m, &err), TF_ERUNTIME);
    assert_int_equal(calls, 1);
    assert_contains(err.msg, "the peer is gone");
    tfx_mailbox_destroy(&mb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matching_and_order),
        cmocka_unit_test(test_size_check),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_first_abort_wins),
        cmocka_unit_test(test_abort_beats_a_waiting_message),
        cmocka_unit_test(test_reset_hands_items_back),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_wait_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
