/* bytes.h - each stage's bytes from the "[memory]" events of a run's
 * traces (torch.profiler's profile_memory=True; internal to tf-import).
 *
 * Every figure is a median over the steps used (all but the first when
 * there are several: the first also allocates what later steps reuse) and,
 * per stage, over its microbatches.  The events used are those of the
 * device the pipeline computes on: a trace's first accelerator (Device
 * Type other than 0) when it has one, else the CPU.  The live bytes at a
 * time are the "Total Allocated" of the last event before it; the growth
 * across an action is the sum of the Bytes of the events from its start to
 * the start of the rank's next action (or the step's end): what the action
 * allocated and still holds when the rank moves on.  On the CPU, torch
 * counts in Total Allocated only what was allocated while the profiler
 * recorded, so a CPU run's static bytes leave out what was allocated
 * before (its weights, among others); an accelerator's count covers the
 * whole process.
 */
#ifndef TFI_BYTES_H
#define TFI_BYTES_H

#include "import.h"
#include "run.h"
#include "tf/profile.h"
#include "tf/schedule.h"

/* What one run's memory events say, per stage of the schedule; NAN where
 * not measured.  A figure whose median growth is negative or above the
 * largest live bytes the rank's trace records is not a size: it stays NAN
 * and `implausible` names the first such stage and figure (an activation_bytes
 * before any weight_grad_bytes). */
typedef struct tfi_bytes {
    int traces_with_events;   /* traces holding "[memory]" events */
    double *static_bytes;     /* the live bytes before the rank's first action of a step,
                                 split evenly over the rank's stages */
    double *activation;       /* growth across a forward (F) */
    double *weight_grad;      /* activation plus the growth across a backward-input (I):
                                 what a microbatch holds from its I's end to its W */
    int stages;
    int cpu_ranks;            /* ranks measured on the CPU (no accelerator events) */
    int implausible_stage;    /* -1: none */
    const char *implausible_what; /* "activation_bytes" or "weight_grad_bytes" */
    double implausible_value; /* that median, bytes */
} tfi_bytes;

/* Measures run (schedule s) into *out when every trace holds memory
 * events on its device; with none or some missing, out->static_bytes
 * stays NULL (traces_with_events says how many had them).  Returns 0 with
 * *out owning its arrays (tfi_bytes_free), or TF_ENOMEM. */
int tfi_bytes_measure(const tfi_run *run, const tf_schedule *s, tfi_bytes *out, tf_error *err);

/* Writes the stages' memory fields into p (schedule p->schedule) from
 * the run's figures and, when frozen is not NULL, the --frozen run's
 * forwards (activation_frozen_bytes), noting each choice on o's note:
 * nothing is written, with a note, when only some traces hold memory
 * events or a stage's activation_bytes is implausible (the profile's
 * memory would be wrong otherwise); an implausible or missing
 * weight_grad_bytes, or an activation_frozen_bytes above activation_bytes,
 * is left at its default (activation_bytes), with a note.  Traces without
 * memory events add nothing and say nothing.  Returns 0 or TF_ENOMEM. */
int tfi_bytes_to_profile(const tfi_options *o, const tfi_bytes *run, const tfi_bytes *frozen,
                         tf_profile *p, tf_error *err);

/* Frees what b owns and zeroes it (implausible_stage -1).  b may be zeroed
 * already. */
void tfi_bytes_free(tfi_bytes *b);

#endif
