/* trace.h - one torch.profiler Chrome trace, reduced to what tf-import reads
 * (internal to tf-import).
 *
 * A trace is JSON, plain or gzip-compressed: either Kineto's object
 * {"traceEvents": [...], "distributedInfo": {...}, "baseTimeNanoseconds": N}
 * or the legacy profiler's bare array of events (what torch.profiler writes
 * when PyTorch was built without Kineto, e.g. Debian's python3-torch 1.13).
 * The text is walked as it streams (jscan.h) and only complete events
 * ("ph": "X") of three kinds are kept, as 32-byte spans:
 *  - `PP:` annotations, the actions of PyTorch's pipelining runtime, their
 *    names read at once (steps.h lists them);
 *  - `ProfilerStep#N` spans, one per profiled training step;
 *  - CPU-side receive events (c10d names them "<backend>:recv...",
 *    e.g. "gloo:recv"), which end when the received data has arrived.
 * and, when the profiler recorded memory (profile_memory=True), Kineto's
 * "[memory]" instant events ("ph": "i"): each allocation or free, its time,
 * the signed "Bytes" and the "Total Allocated" after it, and the device
 * ("Device Type", "Device Id"), 32 bytes each (tfi_mem_event).
 * So memory follows the events kept, about 32 bytes each, not the text.
 */
#ifndef TFI_TRACE_H
#define TFI_TRACE_H

#include <stdint.h>

#include "tf/error.h"
#include "tf/schedule.h"
#include "tf/util.h"

/* The most events one trace may keep (512 MiB of spans): far above a real
 * trace (a step of 131,072 actions is about 400,000 events), so that a
 * hostile file is refused before it exhausts memory. */
enum { TFI_MAX_SPANS = 1 << 24 };

/* The largest trace read, decompressed: reading it takes about half a
 * minute. */
#define TFI_MAX_TRACE_BYTES ((uint64_t)4 << 30)

typedef enum { TFI_SPAN_PP = 0, TFI_SPAN_STEP = 1, TFI_SPAN_RECV = 2 } tfi_span_kind;

/* What a `PP:` name says (PyTorch's _Action.__repr__). */
typedef enum {
    TFI_PP_COMPUTE,    /* F, B, I, W */
    TFI_PP_SEND_F,
    TFI_PP_RECV_F,
    TFI_PP_SEND_B,
    TFI_PP_RECV_B,
    TFI_PP_STAGE_ONLY, /* UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD: no microbatch */
    TFI_PP_WAIT,       /* WAIT_SEND_F, WAIT_SEND_B: the runtime waiting on a send; not read */
    TFI_PP_OVERLAP     /* (aFm;bBn)OVERLAP_F_B: two actions */
} tfi_pp_kind;

typedef struct tfi_span {
    double start, end;       /* microseconds on the trace's own clock */
    int index;               /* position in the file's event list, for messages */
    unsigned char kind;      /* tfi_span_kind */
    unsigned char gpu;       /* 1: a GPU-side annotation (cat "gpu_user_annotation") */
    unsigned char pp;        /* TFI_SPAN_PP: tfi_pp_kind */
    unsigned char types;     /* TFI_SPAN_PP: the actions' tf_action_type, 2 bits each */
    union {
        struct {
            uint16_t stage[2], microbatch[2]; /* the action, and a pair's second */
        } pp;
        long step;           /* TFI_SPAN_STEP: N of ProfilerStep#N */
    } u;
} tfi_span;

/* One allocation (bytes > 0) or free (bytes < 0) on one device. */
typedef struct tfi_mem_event {
    double ts;               /* microseconds on the trace's own clock */
    double bytes;            /* "Bytes": signed */
    double total;            /* "Total Allocated" on its device after it */
    int index;               /* position in the file's event list (sort ties) */
    int16_t device_type;     /* "Device Type": 0 the CPU, else an accelerator */
    int16_t device_id;       /* "Device Id" */
} tfi_mem_event;

/* The first `PP:` name of one side that is none of the runtime's. */
typedef struct tfi_bad_name {
    int index;               /* event position; -1: none */
    char name[128];          /* its name, cut short */
} tfi_bad_name;

typedef struct tfi_trace {
    char *path;              /* as given (owned) */
    int rank;                /* distributedInfo.rank, -1 when absent */
    int world_size;          /* distributedInfo.world_size, -1 when absent */
    int has_clock;           /* baseTimeNanoseconds present: times comparable across traces */
    int64_t base_ns;         /* baseTimeNanoseconds: the time that ts 0 stands for */
    uint64_t fingerprint;    /* a hash of the kept events and the fields above: two
                                traces with equal ones hold the same events */
    long pp_events[2];       /* PP: events on the CPU [0] and GPU [1] side, readable or not */
    tfi_bad_name bad[2];     /* per side, as pp_events */
    tfi_span *spans;         /* sorted by start (ties: file order) */
    int n_spans;
    tfi_mem_event *mem;      /* "[memory]" events, sorted by time (ties: file order) */
    int n_mem;
} tfi_trace;

/* Reads the trace at path (gzip is recognised by its magic bytes, whatever
 * the name), printing a progress line on progress (may be NULL) while a
 * long one reads.  Returns 0 with *out owning its memory (tfi_trace_free),
 * or TF_EIO (unreadable file, broken gzip), TF_ENOMEM ("out of memory"
 * with the events read so far), or TF_EINVAL for a file that is not a
 * trace, an event with a bad field, a bad baseTimeNanoseconds or
 * distributedInfo, a "[memory]" event whose ts, Bytes, Total Allocated,
 * Device Type or Device Id is not a finite number in range, more than
 * TFI_MAX_SPANS events kept (spans and memory events each), or more than
 * TFI_MAX_TRACE_BYTES of text; the message names the file and, where there
 * is one, the event and value.  On error *out is zeroed. */
int tfi_trace_load(const char *path, tf_progress *progress, tfi_trace *out, tf_error *err);

/* Frees the spans of t, keeping its path, metadata, fingerprint and
 * memory events (what messages, checks and the memory fields need once its
 * steps are cut). */
void tfi_trace_drop_spans(tfi_trace *t);

/* Frees what t owns and zeroes it.  t may be zeroed already. */
void tfi_trace_free(tfi_trace *t);

/* Action `which` (0, or 1 for a pair's backward) of PP span s: type,
 * stage, microbatch, the pair role of an overlapped pair's half; rank -1. */
void tfi_span_action(const tfi_span *s, int which, tf_action *out);

/* "PP:0F3" or "PP:(0F7;7B3)OVERLAP_F_B": the name of the compute span s
 * into buf[TF_CELL_MAX + 3]; returns buf. */
const char *tfi_span_name(const tfi_span *s, char *buf);

#endif
