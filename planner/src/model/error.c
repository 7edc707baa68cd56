/* error.c - error codes and messages. */
#include "tf/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *tf_strerror(int code)
{
    switch (code) {
    case TF_OK: return "ok";
    case TF_EINVAL: return "invalid input";
    case TF_ENOMEM: return "out of memory";
    case TF_EIO: return "i/o error";
    case TF_ECYCLE: return "schedule deadlocks";
    case TF_ESOLVER: return "solver failed";
    case TF_ERUNTIME: return "runtime failure";
    default: return "unknown error";
    }
}

int tf_fail(tf_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void tf_error_clear(tf_error *err)
{
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}
