/* run.h - the traces of one run, one per rank, and the steps read from them
 * (internal to tf-import). */
#ifndef TFI_RUN_H
#define TFI_RUN_H

#include "steps.h"
#include "trace.h"

typedef struct tfi_run {
    const char *label;     /* "" or "--frozen ", prefixes messages */
    int ranks;
    tfi_trace *traces;     /* ranks entries, in rank order */
    tfi_rank_run *by_rank; /* ranks entries, in rank order */
    long *steps;           /* the ProfilerStep numbers used, in time order */
    int n_steps;
    int ranks_from_info;   /* ranks came from distributedInfo, not file order */
} tfi_run;

/* Loads paths[0..n-1], one trace per rank, and chooses their steps.  A
 * trace's rank is its distributedInfo.rank when every trace has one, else
 * its place in the list; every rank from 0 to n-1 (and to world_size-1)
 * needs exactly one trace.  The steps are ProfilerStep#first..#last (first
 * < 0: every step of rank 0's trace that holds actions), and every trace
 * must have each of them.  Returns 0 with *out owning everything
 * (tfi_run_free), or a TF_E* code with a message naming the file and the
 * value; *out is then freed. */
int tfi_run_load(const char *const *paths, int n, const char *label, long first, long last,
                 tfi_run *out, tf_error *err);

/* Frees what r owns and zeroes it.  r may be zeroed already. */
void tfi_run_free(tfi_run *r);

/* Step k (0 <= k < n_steps) of rank r. */
const tfi_step *tfi_run_step(const tfi_run *run, int r, int k);

#endif
