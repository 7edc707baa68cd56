/* util.h - small helpers shared by the modules: files and clocks. */
#ifndef TF_UTIL_H
#define TF_UTIL_H

#include <stddef.h>
#include "tf/error.h"

/* Reads the whole file at path into a NUL-terminated malloc'd buffer that the
 * caller frees.  *len (may be NULL) receives the byte count.  Returns 0 or
 * TF_EIO/TF_ENOMEM with a message naming the path. */
int tf_read_file(const char *path, char **data, size_t *len, tf_error *err);

/* Writes len bytes to path atomically: a temporary file in the same directory
 * is written, flushed and renamed over path.  On failure path is untouched and
 * the temporary file is removed.  Returns 0 or TF_EIO. */
int tf_write_file_atomic(const char *path, const void *data, size_t len, tf_error *err);

/* Monotonic wall clock in seconds. */
double tf_now_seconds(void);

#endif
