/* trace.h - one torch.profiler Chrome trace, reduced to what tf-import reads
 * (internal to tf-import).
 *
 * A trace is JSON, plain or gzip-compressed: either Kineto's object
 * {"traceEvents": [...], "distributedInfo": {...}, "baseTimeNanoseconds": N}
 * or the legacy profiler's bare array of events (what torch.profiler writes
 * when PyTorch was built without Kineto, e.g. Debian's python3-torch 1.13).
 * Only complete events ("ph": "X") are read, and of those only three kinds:
 *  - `PP:` annotations, the actions of PyTorch's pipelining runtime;
 *  - `ProfilerStep#N` spans, one per profiled training step;
 *  - CPU-side receive events (c10d names them "<backend>:recv...",
 *    e.g. "gloo:recv"), which end when the received data has arrived.
 */
#ifndef TFI_TRACE_H
#define TFI_TRACE_H

#include "tf/error.h"

typedef enum { TFI_SPAN_PP = 0, TFI_SPAN_STEP = 1, TFI_SPAN_RECV = 2 } tfi_span_kind;

typedef struct tfi_span {
    char *name;          /* the event's name (owned) */
    double start, end;   /* microseconds on the trace's own clock */
    tfi_span_kind kind;
    int gpu;             /* 1: a GPU-side annotation (cat "gpu_user_annotation") */
    long step;           /* TFI_SPAN_STEP: N of ProfilerStep#N */
    int index;           /* position in the file's event list, for messages */
} tfi_span;

typedef struct tfi_trace {
    char *path;          /* as given (owned) */
    int rank;            /* distributedInfo.rank, -1 when absent */
    int world_size;      /* distributedInfo.world_size, -1 when absent */
    int has_clock;       /* baseTimeNanoseconds present: times comparable across traces */
    double base_ns;      /* baseTimeNanoseconds: the time that ts 0 stands for */
    tfi_span *spans;     /* sorted by start (ties: file order) */
    int n_spans;
} tfi_trace;

/* Reads and parses the trace at path (gzip is recognised by its magic
 * bytes, whatever the name).  Returns 0 with *out owning its memory
 * (tfi_trace_free), or TF_EIO (unreadable file, broken gzip), TF_ENOMEM, or
 * TF_EINVAL for a file that is not a trace or an event with a bad field;
 * the message names the file and, where there is one, the event and value.
 * On error *out is zeroed. */
int tfi_trace_load(const char *path, tfi_trace *out, tf_error *err);

/* Frees what t owns and zeroes it.  t may be zeroed already. */
void tfi_trace_free(tfi_trace *t);

#endif
