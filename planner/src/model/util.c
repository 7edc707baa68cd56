/* util.c - whole-file reads, atomic writes, clocks, numbers for people. */
#include "tf/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int tf_read_file(const char *path, char **data, size_t *len, tf_error *err)
{
    *data = NULL;
    if (len)
        *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tf_fail(err, TF_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    /* Pipes and /dev/stdin are fine; a directory opens but cannot be read. */
    if (fstat(fileno(f), &st) != 0 || S_ISDIR(st.st_mode)) {
        fclose(f);
        return tf_fail(err, TF_EIO, "%s: is a directory, not a file", path);
    }
    /* Pipes report size 0: start small and grow until end of file. */
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, used = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return tf_fail(err, TF_ENOMEM, "%s: out of memory reading %zu bytes", path, cap);
    }
    for (;;) {
        if (used + 1 == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                fclose(f);
                return tf_fail(err, TF_ENOMEM, "%s: out of memory", path);
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + used, 1, cap - used - 1, f);
        if (got == 0)
            break;
        used += got;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return tf_fail(err, TF_EIO, "%s: read error", path);
    }
    buf[used] = '\0';
    *data = buf;
    if (len)
        *len = used;
    return 0;
}

/* Writes data to a new temporary file beside path; on success *tmp_out is
 * its malloc'd name, to be renamed over path or unlinked. */
static int write_temporary(const char *path, const void *data, size_t len, char **tmp_out,
                           tf_error *err)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    *tmp_out = NULL;
    if (!tmp)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", path);
    snprintf(tmp, n + 16, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return tf_fail(err, TF_EIO, "%s: cannot create a temporary file beside it: %s", path,
                       strerror(e));
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    int e = errno;
    /* Temporary files from mkstemp are 0600; give the result the usual mode. */
    int ok = left == 0 && fchmod(fd, 0644) == 0 && fsync(fd) == 0;
    if (!ok)
        e = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return tf_fail(err, TF_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    *tmp_out = tmp;
    return 0;
}

int tf_write_file_atomic(const char *path, const void *data, size_t len, tf_error *err)
{
    return tf_write_files_atomic(1, &path, &data, &len, err);
}

int tf_write_files_atomic(int count, const char *const *paths, const void *const *data,
                          const size_t *lens, tf_error *err)
{
    char **tmp = calloc((size_t)count + 1, sizeof *tmp);
    if (!tmp)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    int rc = 0, written = 0;
    for (; written < count && rc == 0; written++)
        rc = write_temporary(paths[written], data[written], lens[written], &tmp[written], err);
    /* Only when every file is safely on disk does any of them replace its
     * target, so a failure leaves all targets as they were. */
    for (int k = 0; k < count && rc == 0; k++) {
        if (rename(tmp[k], paths[k]) != 0) {
            rc = tf_fail(err, TF_EIO, "%s: cannot write: %s", paths[k], strerror(errno));
            break;
        }
        free(tmp[k]);
        tmp[k] = NULL;
    }
    for (int k = 0; k < count; k++) {
        if (tmp[k])
            unlink(tmp[k]);
        free(tmp[k]);
    }
    free(tmp);
    return rc;
}

double tf_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *tf_format_significant(double v, int digits, char *out, size_t size)
{
    if (!isfinite(v) || v == 0) {
        snprintf(out, size, "%g", v);
        return out;
    }
    int magnitude = (int)floor(log10(fabs(v)));
    if (magnitude < -9)
        snprintf(out, size, "%.*g", digits, v);
    else
        snprintf(out, size, "%.*f", magnitude < digits - 1 ? digits - 1 - magnitude : 0, v);
    return out;
}

const char *tf_plural(long count, const char *one, const char *many)
{
    return count == 1 ? one : many;
}
