/* util.c - whole-file reads, atomic writes, clocks, progress lines,
 * numbers for people. */
/* realpath is an XSI function, beyond the build's _POSIX_C_SOURCE. */
#define _XOPEN_SOURCE 700
#include "tf/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* "64 MiB" for a byte count that is a whole number of MiB or KiB, else
 * "N bytes", into buf[32]. */
static const char *byte_text(size_t n, char *buf)
{
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        snprintf(buf, 32, "%zu MiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(buf, 32, "%zu KiB", n >> 10);
    else
        snprintf(buf, 32, "%zu bytes", n);
    return buf;
}

static int too_large(const char *path, size_t limit, tf_error *err)
{
    char text[32];
    return tf_fail(err, TF_EINVAL,
                   "%s: larger than the %s limit for this input (docs/robustness.md)", path,
                   byte_text(limit, text));
}

/* Reads f to its end, or until it has given more than limit bytes. */
static int read_stream(FILE *f, const char *path, size_t limit, size_t size_hint, char **out,
                       size_t *used_out, tf_error *err)
{
    /* Pipes and devices report size 0: start small and grow, but never
     * past limit + 1 bytes (one more than allowed tells "too large"). */
    size_t cap = size_hint > 0 ? size_hint + 2 : 4096, used = 0;
    if (cap > limit + 2)
        cap = limit + 2;
    char *buf = malloc(cap);
    if (!buf)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory reading %zu bytes", path, cap);
    for (;;) {
        if (used + 1 == cap) {
            if (used > limit)
                break;
            size_t bigger_cap = cap > (limit + 2) / 2 ? limit + 2 : cap * 2;
            char *bigger = realloc(buf, bigger_cap);
            if (!bigger) {
                free(buf);
                return tf_fail(err, TF_ENOMEM, "%s: out of memory", path);
            }
            buf = bigger;
            cap = bigger_cap;
        }
        size_t got = fread(buf + used, 1, cap - used - 1, f);
        if (got == 0)
            break;
        used += got;
    }
    if (ferror(f)) {
        free(buf);
        return tf_fail(err, TF_EIO, "%s: read error", path);
    }
    if (used > limit) {
        free(buf);
        return too_large(path, limit, err);
    }
    buf[used] = '\0';
    *out = buf;
    *used_out = used;
    return 0;
}

int tf_read_file_limit(const char *path, size_t limit, char **data, size_t *len,
                       tf_error *err)
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
    if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > (uintmax_t)limit) {
        fclose(f);
        return too_large(path, limit, err);
    }
    size_t hint = S_ISREG(st.st_mode) ? (size_t)st.st_size : 0, used = 0;
    int rc = read_stream(f, path, limit, hint, data, &used, err);
    fclose(f);
    if (!rc && len)
        *len = used;
    return rc;
}

int tf_read_file(const char *path, char **data, size_t *len, tf_error *err)
{
    return tf_read_file_limit(path, SIZE_MAX - 2, data, len, err);
}

/* realpath of path's directory plus its last component (malloc'd), which
 * names a file that does not exist yet; NULL if the directory cannot be
 * resolved. */
static char *canonical_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dir_len = slash ? (size_t)(slash - path) : 0;
    char *dir = malloc(dir_len + 2);
    if (!dir)
        return NULL;
    if (!slash)
        snprintf(dir, dir_len + 2, ".");
    else if (dir_len == 0)
        snprintf(dir, dir_len + 2, "/");
    else
        snprintf(dir, dir_len + 2, "%.*s", (int)dir_len, path);
    char *real = realpath(dir, NULL);
    free(dir);
    if (!real)
        return NULL;
    size_t n = strlen(real) + strlen(base) + 2;
    char *name = malloc(n);
    if (name)
        snprintf(name, n, "%s/%s", real, base);
    free(real);
    return name;
}

int tf_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ca = canonical_name(a), *cb = canonical_name(b);
    int same = ca && cb && strcmp(ca, cb) == 0;
    free(ca);
    free(cb);
    return same;
}

/* Writes len bytes of data to fd; 0, or -1 with errno set. */
static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
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
    /* Temporary files from mkstemp are 0600; give the result the usual mode. */
    int ok = write_all(fd, data, len) == 0 && fchmod(fd, 0644) == 0 && fsync(fd) == 0;
    int e = errno;
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

/* Is path an existing file that is neither regular nor a directory: a
 * device (/dev/null, /dev/stdout) or a FIFO?  A temporary file renamed
 * over it would replace the device itself (as root, -o /dev/null turned
 * /dev/null into a regular file), so such a target is written in place. */
static int is_special_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

static int write_in_place(const char *path, const void *data, size_t len, tf_error *err)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return tf_fail(err, TF_EIO, "%s: cannot open: %s", path, strerror(errno));
    int ok = write_all(fd, data, len) == 0;
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    return ok ? 0 : tf_fail(err, TF_EIO, "%s: cannot write: %s", path, strerror(e));
}

int tf_write_file_atomic(const char *path, const void *data, size_t len, tf_error *err)
{
    return tf_write_files_atomic(1, &path, &data, &len, err);
}

int tf_write_files_atomic(int count, const char *const *paths, const void *const *data,
                          const size_t *lens, tf_error *err)
{
    char **tmp = calloc((size_t)count + 1, sizeof *tmp);
    unsigned char *special = calloc((size_t)count + 1, 1);
    int rc = tmp && special ? 0 : tf_fail(err, TF_ENOMEM, "out of memory");
    for (int k = 0; k < count && rc == 0; k++) {
        special[k] = (unsigned char)is_special_file(paths[k]);
        if (!special[k])
            rc = write_temporary(paths[k], data[k], lens[k], &tmp[k], err);
    }
    /* Devices cannot be replaced atomically; they are written once every
     * regular file is safely on disk, and before any of those replaces its
     * target, so that a failure still leaves all regular targets as they
     * were. */
    for (int k = 0; k < count && rc == 0; k++)
        if (special[k])
            rc = write_in_place(paths[k], data[k], lens[k], err);
    for (int k = 0; k < count && rc == 0; k++) {
        if (special[k])
            continue;
        if (rename(tmp[k], paths[k]) != 0) {
            rc = tf_fail(err, TF_EIO, "%s: cannot write: %s", paths[k], strerror(errno));
            break;
        }
        free(tmp[k]);
        tmp[k] = NULL;
    }
    for (int k = 0; tmp && k < count; k++) {
        if (tmp[k])
            unlink(tmp[k]);
        free(tmp[k]);
    }
    free(tmp);
    free(special);
    return rc;
}

double tf_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tf_progress_start(tf_progress *p, const char *prog)
{
    p->prog = prog;
    p->started = tf_now_seconds();
    p->next = p->started + TF_PROGRESS_QUIET_S;
    p->lines = 0;
}

int tf_progress_due(const tf_progress *p)
{
    return p && tf_now_seconds() >= p->next;
}

/* One line "PROG: WHAT (N s)" on stderr; the next one no sooner than
 * TF_PROGRESS_EVERY_S from now. */
static void progress_line(tf_progress *p, const char *fmt, va_list ap)
{
    double now = tf_now_seconds();
    char what[256];
    vsnprintf(what, sizeof what, fmt, ap);
    fprintf(stderr, "%s: %s (%.0f s)\n", p->prog, what, now - p->started);
    fflush(stderr);
    p->next = now + TF_PROGRESS_EVERY_S;
    p->lines++;
}

void tf_progress_note(tf_progress *p, const char *fmt, ...)
{
    if (!tf_progress_due(p))
        return;
    va_list ap;
    va_start(ap, fmt);
    progress_line(p, fmt, ap);
    va_end(ap);
}

void tf_progress_say(tf_progress *p, const char *fmt, ...)
{
    if (!p)
        return;
    va_list ap;
    va_start(ap, fmt);
    progress_line(p, fmt, ap);
    va_end(ap);
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

static int ascending(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

double tf_median(double *x, int n)
{
    if (n < 1)
        return 0.0;
    qsort(x, (size_t)n, sizeof *x, ascending);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}
