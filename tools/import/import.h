/* import.h - tf-import: a profile for tf-plan from torch.profiler traces of a
 * PyTorch pipeline run (one trace per rank).
 *
 * What each figure of the profile is:
 *  - the order: each rank's compute actions (`PP:` annotations of PyTorch's
 *    pipelining runtime) in the order they started in the first step used;
 *    every other step must run the same actions;
 *  - an action's time: the median over the steps of its annotation's
 *    duration, less (CPU side) the wait for its input at its start (for F
 *    and I, over the steps of the --frozen run too);
 *  - frozen times of B and W: the same medians in the --frozen traces (a run
 *    with every parameter frozen), else the reference's defaults B x 0.5
 *    and W x 0.01;
 *  - these and the stage times are built from the samples by
 *    tf_profile_from_samples (tf/profile_samples.h), as tf-exec builds its;
 *  - the stages' memory fields, when the traces hold profile_memory's
 *    "[memory]" events: medians of the live bytes at a step's start and
 *    of the growth across forwards and I actions (bytes.h);
 *  - p2p_ms: the median gap between a sender's end and the start of the
 *    action on another rank that waited for it, once the traces' clocks
 *    are on one time line (clock.c: baseTimeNanoseconds, else the messages
 *    between ranks); or the lag the caller gives.
 * Nothing is accepted that tf-plan could not plan truthfully: the order
 * must not deadlock (tf_dag_build), the clocks must agree with the data
 * the ranks exchange, a lag must be a small share of the step, and a rank's
 * actions must not overlap (docs/tf-import.md lists every check).
 * Every finding worth a user's attention (defaults used, values clamped, a
 * lag that could not be measured) goes to the note callback.
 */
#ifndef TFI_IMPORT_H
#define TFI_IMPORT_H

#include "tf/error.h"
#include "tf/profile.h"
#include "tf/util.h"

/* Receives one line of news (no trailing newline); `warning` is 1 for
 * something the user should act on, 0 for information. */
typedef void (*tfi_note_fn)(void *ctx, int warning, const char *message);

typedef struct tfi_options {
    const char *const *traces;  /* one trace per rank (JSON or gzip JSON) */
    int n_traces;
    const char *const *frozen;  /* the same for a fully frozen run; may be NULL */
    int n_frozen;
    long first_step, last_step; /* ProfilerStep#first..#last; first < 0: every step */
    double p2p_ms;              /* >= 0: the lag to write, the clocks unread; < 0: measure */
    tf_progress *progress;      /* progress lines while a long import runs; may be NULL */
    tfi_note_fn note;           /* may be NULL */
    void *note_ctx;
} tfi_options;

/* Passes one line (printf's fmt, at most 511 bytes) to o->note, if any;
 * `warning` as tfi_note_fn's. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void tfi_note(const tfi_options *o, int warning, const char *fmt, ...);

/* Sets every field to its default: no traces, every step, the lag
 * measured, no progress lines, no notes. */
void tfi_options_init(tfi_options *o);

/* Parses "FIRST:LAST" (integers, 0 <= FIRST <= LAST) for --steps.  Returns 0
 * or TF_EINVAL with a message quoting text. */
int tfi_parse_steps(const char *text, long *first, long *last, tf_error *err);

/* Reads the traces and builds the profile.  Returns 0 with *out owning its
 * memory (tf_profile_free), or a TF_E* code with a message naming the file
 * and the value (TF_EIO: a file could not be read; TF_EINVAL: it is not a
 * usable trace, or the traces do not make one run; TF_ECYCLE: the order
 * they ran deadlocks; TF_ENOMEM: out of memory, said as such).  On error
 * *out is zeroed. */
int tfi_import(const tfi_options *o, tf_profile *out, tf_error *err);

/* tfi_import, then checks that the planner reads the result back and
 * writes it to path atomically: on any error path is left as it was. */
int tfi_import_to_file(const tfi_options *o, const char *path, tf_error *err);

#endif
