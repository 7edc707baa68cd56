/* run.h - the traces of one run, one per rank, and the steps read from them
 * (internal to tf-import). */
#ifndef TFI_RUN_H
#define TFI_RUN_H

#include "import.h"
#include "steps.h"
#include "trace.h"

/* The most compute actions all the traces of one run may hold, over all
 * their steps (56 bytes each: under 1 GiB). */
enum { TFI_MAX_RUN_ACTIONS = 1 << 24 };

/* Where the ranks of the traces came from. */
typedef enum {
    TFI_RANKS_FROM_INFO,      /* every trace's distributedInfo.rank */
    TFI_RANKS_FROM_STAGES,    /* rank r runs stage r (every layout of PyTorch's schedules) */
    TFI_RANKS_FROM_FILE_ORDER /* neither: the order of the files */
} tfi_rank_source;

typedef struct tfi_run {
    const char *label;     /* "" or "--frozen ", prefixes messages */
    int ranks;
    tfi_trace *traces;     /* ranks entries, in rank order; their spans dropped */
    tfi_rank_run *by_rank; /* ranks entries, in rank order */
    long *steps;           /* the ProfilerStep numbers used, in time order */
    int n_steps;
    const tfi_step **used; /* step k of rank r: used[r * n_steps + k] */
    tfi_rank_source rank_source;
    int reordered;         /* the ranks are not in the order the files were given */
} tfi_run;

/* Loads one run: o->traces, or o->frozen when `frozen` is set (label
 * "--frozen "), one trace per rank, and chooses their steps.  Each trace is
 * read and cut into steps (steps.h) before the next is read, keeping only
 * its actions.  A trace's rank is its distributedInfo.rank when every
 * trace has one; else the lowest stage its actions run, when those are 0
 * to n-1 (PyTorch puts stage r on rank r in every layout); else its place
 * in the list.  Every rank from 0 to n-1 (and to world_size-1) needs
 * exactly one trace, and two traces that hold the same events are one
 * rank's trace given twice.  The steps are ProfilerStep#first..#last
 * (first < 0: every step of rank 0's trace that holds actions); every trace
 * must have each of them, and each step at most TF_MAX_ACTIONS actions over
 * all ranks.  Returns 0 with *out owning everything (tfi_run_free), or a
 * TF_E* code with a message naming the file and the value (more than
 * TFI_MAX_RUN_ACTIONS actions in all is TF_EINVAL); *out is then freed. */
int tfi_run_load(const tfi_options *o, int frozen, tfi_run *out, tf_error *err);

/* Frees r's steps and actions, keeping its traces' paths, metadata and
 * fingerprints (to compare another run's traces with). */
void tfi_run_drop_steps(tfi_run *r);

/* Frees what r owns and zeroes it.  r may be zeroed already. */
void tfi_run_free(tfi_run *r);

/* Step k (0 <= k < n_steps) of rank r.  O(1). */
const tfi_step *tfi_run_step(const tfi_run *run, int r, int k);

#endif
