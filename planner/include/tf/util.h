/* util.h - small helpers shared by the modules: files, clocks and numbers
 * printed for people. */
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

/* Writes count files as one unit: every file goes to a temporary file
 * beside its target first, and only when all are written are they renamed
 * over their targets.  On a failure while writing, every target is left
 * untouched and no temporary file remains.  (A rename failing after others
 * succeeded cannot be undone; renames within a directory do not fail in
 * practice once the temporary file exists.)  Returns 0, TF_EIO or TF_ENOMEM
 * naming the path. */
int tf_write_files_atomic(int count, const char *const *paths, const void *const *data,
                          const size_t *lens, tf_error *err);

/* Monotonic wall clock in seconds. */
double tf_now_seconds(void);

/* Writes v into out[size] with at least `digits` significant figures and no
 * exponent ("207", "1.75", "0.00123" for digits 3), so that a ratio far
 * below 1 does not print as "0.00"; magnitudes below 1e-9 use the %g form.
 * Returns out. */
const char *tf_format_significant(double v, int digits, char *out, size_t size);

/* The noun for count things: one when count is 1, else many ("1 stage",
 * "2 stages"; "1 microbatch", "3 microbatches"), so that no output reads
 * "1 ranks".  Returns one or many. */
const char *tf_plural(long count, const char *one, const char *many);

#endif
