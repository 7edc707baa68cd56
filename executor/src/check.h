/* check.h - error-check helpers for the executor's sources (internal).
 *
 * A function using these declares `int rc = 0;` and a `fail:` label that
 * releases what it holds and returns rc.  Internal failures (allocation,
 * backend) carry the source file and line so a report points at the code.
 */
#ifndef TFX_CHECK_H
#define TFX_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include "tf/error.h"

/* Evaluates expr (an int-returning call); on a negative result stores it in
 * rc and jumps to fail. */
#define TFX_TRY(expr)                                                                   \
    do {                                                                                \
        int tfx_try_rc_ = (expr);                                                       \
        if (tfx_try_rc_ < 0) {                                                          \
            rc = tfx_try_rc_;                                                           \
            goto fail;                                                                  \
        }                                                                               \
    } while (0)

/* Allocates n zeroed elements of *ptr with calloc; on failure records
 * TF_ENOMEM naming file and line and jumps to fail. */
#define TFX_CALLOC(ptr, n)                                                              \
    do {                                                                                \
        size_t tfx_n_ = (size_t)(n);                                                    \
        (ptr) = calloc(tfx_n_ ? tfx_n_ : 1, sizeof *(ptr));                             \
        if (!(ptr)) {                                                                   \
            rc = tf_fail(err, TF_ENOMEM, "%s:%d: out of memory (%zu elements)", __FILE__, \
                         __LINE__, tfx_n_);                                             \
            goto fail;                                                                  \
        }                                                                               \
    } while (0)

/* Allocates `bytes` of backend memory into ptr (any pointer type). */
#define TFX_DEV_ALLOC(be, ptr, bytes)                                                   \
    do {                                                                                \
        void *tfx_p_ = NULL;                                                            \
        int tfx_a_rc_ = (be).ops->alloc((be).ctx, (bytes), &tfx_p_, err);               \
        if (tfx_a_rc_ < 0) {                                                            \
            char tfx_m_[sizeof err->msg];                                               \
            snprintf(tfx_m_, sizeof tfx_m_, "%s", err ? err->msg : "allocation failed");  \
            rc = tf_fail(err, tfx_a_rc_, "%s:%d: %s", __FILE__, __LINE__, tfx_m_);       \
            goto fail;                                                                  \
        }                                                                               \
        (ptr) = tfx_p_;                                                                 \
    } while (0)

#endif
