/* error.h - error codes and messages shared by every module.
 *
 * Library functions return 0 on success or a negative TF_E* code.  Functions
 * that can fail for a reason worth telling the user also take a `tf_error *`
 * (may be NULL) and fill its message: the JSON path or file and the bad value.
 */
#ifndef TF_ERROR_H
#define TF_ERROR_H

#include <stddef.h>

enum {
    TF_OK = 0,
    TF_EINVAL = -1,   /* invalid input: a field, value or option is wrong */
    TF_ENOMEM = -2,   /* out of memory */
    TF_EIO = -3,      /* a file could not be read or written */
    TF_ECYCLE = -4,   /* the schedule's dependency graph has a cycle (deadlock) */
    TF_ESOLVER = -5,  /* the LP solver did not report an optimal solution */
    TF_ERUNTIME = -6  /* a failure while executing (executor, transport) */
};

typedef struct tf_error {
    int code;         /* the TF_E* code of the last failure, 0 if none */
    char msg[1024];   /* human-readable message, "" if none */
} tf_error;

/* Returns a short static name for a TF_E* code ("invalid input", ...). */
const char *tf_strerror(int code);

/* Records code and a printf-style message in err (if err is not NULL) and
 * returns code, so callers can write `return tf_fail(err, TF_EINVAL, ...)`. */
int tf_fail(tf_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Clears err (code 0, empty message).  err may be NULL. */
void tf_error_clear(tf_error *err);

#endif
