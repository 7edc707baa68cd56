/* test_util.c - the shared helpers: reads with a byte limit, the
 * same-file test that keeps two outputs apart, progress lines, the
 * median. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"
#include "tf/util.h"

/* A fresh directory for one test; removed by remove_dir. */
static void make_dir(char *dir, size_t size)
{
    snprintf(dir, size, "%s/tf_util.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* A file within the limit reads whole; one byte over is refused with a
 * message naming the file and the limit. */
static void test_limit_regular_file(void **state)
{
    (void)state;
    char dir[256], path[300];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/f.txt", dir);
    write_text(path, "0123456789");
    char *data;
    size_t len;
    tf_error err = {0};
    assert_int_equal(tf_read_file_limit(path, 10, &data, &len, &err), 0);
    assert_int_equal(len, 10);
    assert_string_equal(data, "0123456789");
    free(data);
    assert_int_equal(tf_read_file_limit(path, 9, &data, &len, &err), TF_EINVAL);
    assert_null(data);
    assert_contains(err.msg, path);
    assert_contains(err.msg, "9 bytes limit");
    remove_dir(dir);
}

/* /dev/zero never ends: the read stops one byte past the limit. */
static void test_limit_endless_device(void **state)
{
    (void)state;
    char *data;
    tf_error err = {0};
    double started = tf_now_seconds();
    assert_int_equal(tf_read_file_limit("/dev/zero", 1 << 20, &data, NULL, &err), TF_EINVAL);
    assert_true(tf_now_seconds() - started < 5.0);
    assert_contains(err.msg, "/dev/zero: larger than the 1 MiB limit");
    /* Within the limit a stream reads to its end (here an empty one). */
    assert_int_equal(tf_read_file_limit("/dev/null", 16, &data, NULL, &err), 0);
    assert_string_equal(data, "");
    free(data);
}

/* Different spellings of one path are the same file, before and after
 * it exists; a hard link is too; a sibling is not. */
static void test_same_file(void **state)
{
    (void)state;
    char dir[256], a[300], b[300], c[600], other[300];
    make_dir(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/x.json", dir);
    snprintf(b, sizeof b, "%s/./x.json", dir);
    snprintf(c, sizeof c, "%s/../%s/x.json", dir, strrchr(dir, '/') + 1);
    assert_true(tf_same_file(a, b));
    assert_true(tf_same_file(a, c));
    snprintf(other, sizeof other, "%s/y.json", dir);
    assert_false(tf_same_file(a, other));
    write_text(a, "{}");
    assert_true(tf_same_file(b, c));
    assert_int_equal(link(a, other), 0);
    assert_true(tf_same_file(a, other));
    snprintf(c, sizeof c, "%s/missing/x.json", dir);
    assert_false(tf_same_file(a, c));
    remove_dir(dir);
}

/* A FIFO (like /dev/null, a file that is not a regular one) is written
 * in place: renaming a temporary file over it replaced the device itself
 * (as root, tf-plan -o /dev/null made /dev/null a regular file). */
static void test_atomic_write_keeps_devices(void **state)
{
    (void)state;
    char dir[256], fifo[300], plain[300];
    make_dir(dir, sizeof dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(plain, sizeof plain, "%s/plain.txt", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* The read end is open first, so the write end opens at once. */
    int reader = open(fifo, O_RDONLY | O_NONBLOCK);
    assert_true(reader >= 0);
    const char *paths[2] = {plain, fifo};
    const void *data[2] = {"plain", "hello"};
    const size_t lens[2] = {5, 5};
    tf_error err = {0};
    assert_int_equal(tf_write_files_atomic(2, paths, data, lens, &err), 0);
    char got[16] = {0};
    assert_int_equal(read(reader, got, sizeof got - 1), 5);
    assert_string_equal(got, "hello");
    close(reader);
    struct stat st;
    assert_int_equal(stat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(stat(plain, &st), 0);
    assert_int_equal(st.st_size, 5);
    remove_dir(dir);
}

/* Progress lines wait for TF_PROGRESS_QUIET_S; a NULL progress is
 * silent. */
static void test_progress_quiet_at_first(void **state)
{
    (void)state;
    tf_progress p;
    tf_progress_start(&p, "test");
    assert_false(tf_progress_due(&p));
    tf_progress_note(&p, "nothing yet");
    assert_int_equal(p.lines, 0);
    p.next = p.started; /* as if the quiet time had passed */
    assert_true(tf_progress_due(&p));
    tf_progress_note(&p, "step %d", 1);
    assert_int_equal(p.lines, 1);
    assert_false(tf_progress_due(&p));
    assert_false(tf_progress_due(NULL));
    tf_progress_note(NULL, "silent");
    tf_progress_say(NULL, "silent");
}

/* The middle value of an odd count, the mean of the two middle ones of an
 * even count, 0 for none; the values are left sorted. */
static void test_median(void **state)
{
    (void)state;
    double odd[] = {3, 1, 2}, even[] = {4, 1, 3, 2}, one[] = {7}, outlier[] = {1, 1000, 2};
    assert_true(tf_median(odd, 3) == 2);
    assert_true(tf_median(even, 4) == 2.5);
    assert_true(even[0] == 1 && even[1] == 2 && even[2] == 3 && even[3] == 4);
    assert_true(tf_median(one, 1) == 7);
    assert_true(tf_median(outlier, 3) == 2);
    assert_true(tf_median(NULL, 0) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit_regular_file),
        cmocka_unit_test(test_limit_endless_device),
        cmocka_unit_test(test_same_file),
        cmocka_unit_test(test_atomic_write_keeps_devices),
        cmocka_unit_test(test_progress_quiet_at_first),
        cmocka_unit_test(test_median),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
