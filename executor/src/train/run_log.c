/* run_log.c - tf-exec's --log, written so that a failed run or a full disk
 * loses nothing silently (see run_log.h). */
#include "run_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tf/util.h"

void tfx_run_log_init(tfx_run_log *l, const char *path, long kept_steps)
{
    l->path = path;
    l->kept_steps = kept_steps;
    l->f = NULL;
}

/* The lines of an old log whose "step" is at most kept, those a resumed
 * run does not repeat, into a malloc'd buffer with room for extra bytes
 * more (*len: the bytes kept).  A missing log keeps none; one that cannot
 * be read is an error, not a log to overwrite.  Returns the buffer or NULL
 * with err set. */
static char *kept_lines(const char *path, long kept, size_t extra, size_t *len, tf_error *err)
{
    char *text = NULL;
    size_t old = 0;
    struct stat st;
    int missing = stat(path, &st) != 0 && errno == ENOENT;
    if (kept > 0 && !missing &&
        tf_read_file_limit(path, TFX_RUN_LOG_MAX_BYTES, &text, &old, err) != 0)
        return NULL;
    char *buf = malloc(old + extra);
    *len = 0;
    for (const char *line = text; buf && line && line < text + old;) {
        const char *end = memchr(line, '\n', (size_t)(text + old - line));
        size_t n = end ? (size_t)(end - line) + 1 : (size_t)(text + old - line);
        const char *field = strstr(line, "\"step\":");
        long step = field && field < line + n ? strtol(field + 7, NULL, 10) : 0;
        if (step <= kept && end) {
            memcpy(buf + *len, line, n);
            *len += n;
        }
        line += n;
    }
    free(text);
    if (!buf)
        tf_fail(err, TF_ENOMEM, "--log %s: out of memory", path);
    return buf;
}

/* The first line: the old log's kept lines and this one replace the file
 * in one rename, then the file stays open for appending. */
static int start(tfx_run_log *l, const char *line, size_t len, tf_error *err)
{
    size_t used;
    tf_error why = {0};
    char *text = kept_lines(l->path, l->kept_steps, len, &used, &why);
    if (!text)
        return tf_fail(err, TF_EIO, "--log %s: cannot keep the lines of the resumed steps: %s",
                       l->path, why.msg);
    memcpy(text + used, line, len);
    int rc = tf_write_file_atomic(l->path, text, used + len, &why);
    free(text);
    if (rc)
        return tf_fail(err, TF_EIO, "--log %s: cannot write the log: %s", l->path, why.msg);
    l->f = fopen(l->path, "a");
    if (!l->f)
        return tf_fail(err, TF_EIO, "--log %s: cannot open for appending: %s", l->path,
                       strerror(errno));
    return 0;
}

int tfx_run_log_write(tfx_run_log *l, const char *line, size_t len, tf_error *err)
{
    if (!l->path)
        return 0;
    if (!l->f)
        return start(l, line, len, err);
    errno = 0;
    if (fwrite(line, 1, len, l->f) != len || fflush(l->f) != 0)
        return tf_fail(err, TF_EIO, "--log %s: cannot write: %s", l->path,
                       errno ? strerror(errno) : "write error");
    return 0;
}

int tfx_run_log_close(tfx_run_log *l, tf_error *err)
{
    if (!l->f)
        return 0;
    int failed = ferror(l->f);
    failed |= fclose(l->f) != 0;
    l->f = NULL;
    return failed ? tf_fail(err, TF_EIO, "--log %s: write failed", l->path) : 0;
}
