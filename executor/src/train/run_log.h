/* run_log.h - tf-exec's --log: one JSON line per step (internal).
 *
 * Nothing is lost to a run that fails: the file is not touched until the
 * run has a first line to write, and that line replaces the old file
 * atomically (temporary file, then rename; a device such as /dev/full is
 * written in place).  A resumed run keeps the old lines of the steps up to
 * its checkpoint.  Later lines are appended and flushed one by one, and a
 * line that cannot be written (a full disk) is an error at once, never a
 * log cut short in silence. */
#ifndef TFX_RUN_LOG_H
#define TFX_RUN_LOG_H

#include <stddef.h>
#include <stdio.h>

#include "tf/error.h"

/* The largest old log a resumed run reads to keep its lines: the lines of
 * about a million steps. */
#define TFX_RUN_LOG_MAX_BYTES ((size_t)256 << 20)

typedef struct tfx_run_log {
    const char *path;  /* borrowed; NULL: no log */
    long kept_steps;   /* a resumed run keeps the old lines of steps 1..kept_steps */
    FILE *f;           /* open for appending once the first line is in */
} tfx_run_log;

/* Prepares l for path (NULL: every call is a no-op) without touching the
 * file. */
void tfx_run_log_init(tfx_run_log *l, const char *path, long kept_steps);

/* Writes line[len] (one JSON line with its newline).  Returns 0, or TF_EIO
 * naming --log, the path and the reason. */
int tfx_run_log_write(tfx_run_log *l, const char *line, size_t len, tf_error *err);

/* Closes the file.  Returns 0, or TF_EIO when something written did not
 * reach it. */
int tfx_run_log_close(tfx_run_log *l, tf_error *err);

#endif
