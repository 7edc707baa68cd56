/* util.h - small helpers shared by the modules: files, clocks, progress
 * lines, numbers printed for people, and the median. */
#ifndef TF_UTIL_H
#define TF_UTIL_H

#include <stddef.h>
#include "tf/error.h"

/* Reads the whole file at path into a NUL-terminated malloc'd buffer that the
 * caller frees.  *len (may be NULL) receives the byte count.  Returns 0 or
 * TF_EIO/TF_ENOMEM with a message naming the path.  No size limit: inputs
 * from users go through tf_read_file_limit. */
int tf_read_file(const char *path, char **data, size_t *len, tf_error *err);

/* As tf_read_file, but a file of more than limit bytes is refused without
 * reading further than limit + 1 bytes, so /dev/zero or a runaway pipe
 * costs at most limit bytes of memory: TF_EINVAL, "PATH: larger than the
 * LIMIT limit for this input (docs/robustness.md)".  A regular file is
 * judged by its size before anything is read. */
int tf_read_file_limit(const char *path, size_t limit, char **data, size_t *len,
                       tf_error *err);

/* Do paths a and b name the same file: the same device and inode when both
 * exist, else the same canonical name (realpath of the directory plus the
 * last component), so "x.json", "./x.json" and "dir/../x.json" match
 * before x.json exists.  0 when either cannot be resolved. */
int tf_same_file(const char *a, const char *b);

/* Writes len bytes to path atomically: a temporary file in the same directory
 * is written, flushed and renamed over path.  On failure path is untouched and
 * the temporary file is removed.  An existing path that is a device or a
 * FIFO (/dev/null, /dev/stdout) is written in place instead, never
 * replaced.  Returns 0 or TF_EIO. */
int tf_write_file_atomic(const char *path, const void *data, size_t len, tf_error *err);

/* Writes count files as one unit: every file goes to a temporary file
 * beside its target first, and only when all are written are they renamed
 * over their targets (devices and FIFOs are written in place, after the
 * temporary files and before the renames).  On a failure while writing, every target is left
 * untouched and no temporary file remains.  (A rename failing after others
 * succeeded cannot be undone; renames within a directory do not fail in
 * practice once the temporary file exists.)  Returns 0, TF_EIO or TF_ENOMEM
 * naming the path. */
int tf_write_files_atomic(int count, const char *const *paths, const void *const *data,
                          const size_t *lens, tf_error *err);

/* Monotonic wall clock in seconds. */
double tf_now_seconds(void);

/* Progress of a long task as lines on stderr ("tf-plan: solving: round
 * 120 (4 s)"), printed only once the task has run TF_PROGRESS_QUIET_S
 * seconds and then at most every TF_PROGRESS_EVERY_S seconds, so quick
 * runs print nothing.  Library code takes a tf_progress * that may be
 * NULL (silent); the programs make one. */
enum { TF_PROGRESS_QUIET_S = 2, TF_PROGRESS_EVERY_S = 5 };

typedef struct tf_progress {
    const char *prog;   /* prefix of each line: the program's name */
    double started;     /* tf_now_seconds() at tf_progress_start */
    double next;        /* when the next line may be printed */
    int lines;          /* lines printed so far */
} tf_progress;

/* Starts the clock of p for program prog. */
void tf_progress_start(tf_progress *p, const char *prog);

/* Is a line due (cheap: one clock read)?  False when p is NULL. */
int tf_progress_due(const tf_progress *p);

/* Prints "PROG: WHAT (N s)" when a line is due; nothing otherwise or when
 * p is NULL.  For a step about to run long in one go (a big drawing),
 * tf_progress_say prints it at once, due or not. */
void tf_progress_note(tf_progress *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void tf_progress_say(tf_progress *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Writes v into out[size] with at least `digits` significant figures and no
 * exponent ("207", "1.75", "0.00123" for digits 3), so that a ratio far
 * below 1 does not print as "0.00"; magnitudes below 1e-9 use the %g form.
 * Returns out. */
const char *tf_format_significant(double v, int digits, char *out, size_t size);

/* The noun for count things: one when count is 1, else many ("1 stage",
 * "2 stages"; "1 microbatch", "3 microbatches"), so that no output reads
 * "1 ranks".  Returns one or many. */
const char *tf_plural(long count, const char *one, const char *many);

/* The median of x[0..n-1]: the middle value, or the mean of the two middle
 * values; 0 when n < 1.  Sorts x ascending in place, so a caller that
 * needs the order passes a copy, and one that needs quantiles or the
 * extremes reads them from x afterwards. */
double tf_median(double *x, int n);

#endif
