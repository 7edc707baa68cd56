/* steps.h - one rank's trace cut into training steps of pipeline actions
 * (internal to tf-import).
 *
 * PyTorch's pipelining runtime wraps every action of a rank's schedule in
 * record_function("PP:" + str(action)); str(_Action) is the stage, the type
 * and the microbatch (torch/distributed/pipelining/schedules.py:
 * _get_profiler_function_name and _Action.__repr__).  Compute actions read
 * `PP:0F3` (forward), `PP:1B2` (full backward), `PP:1I2` (backward-input),
 * `PP:2W0` (backward-weight); the runtime also annotates `PP:1SEND_F0`,
 * `PP:1RECV_F0`, `PP:0SEND_B0`, `PP:0RECV_B0`, `PP:0UNSHARD`, `PP:0RESHARD`,
 * `PP:0REDUCE_GRAD` and DualPipeV's overlapped pairs
 * `PP:(0F7;7B3)OVERLAP_F_B` (_PipelineScheduleRuntime._step_microbatches).
 *
 * The runtime posts a receive in its RECV action and waits for the data at
 * the start of the compute action that needs it, so on the CPU side a
 * compute action's span includes that wait.  Its compute is taken to start
 * when the receive posted in the matching RECV span (`PP:sRECV_Fm` for
 * sFm, `PP:sRECV_Bm` for sBm and sIm) ended, if that is inside the span.
 * GPU-side spans hold only kernels and are taken whole.
 *
 * An overlapped pair `PP:(0F7;7B3)OVERLAP_F_B` is one span for two
 * actions: each step holds both, with the pair's span and a.pair set
 * (TF_PAIR_FIRST, TF_PAIR_SECOND), one after the other.  The pair starts
 * computing once the inputs of both have arrived, as the planner models it.
 *
 * A rank runs one action at a time: two compute spans of one step that
 * overlap by more than TFI_OVERLAP_SLACK_US are refused, since their times
 * would add up to a step longer than the trace.
 *
 * Cutting is linear in the events (steps and actions are found by binary
 * search, receives by a range-maximum tree), and the per-step action limit
 * is checked while the actions are counted, before any is stored.
 */
#ifndef TFI_STEPS_H
#define TFI_STEPS_H

#include "tf/schedule.h"
#include "trace.h"

/* Stage and microbatch numbers above this are refused as implausible. */
#define TFI_MAX_INDEX 65535

/* How far two action spans of one rank may overlap, in microseconds: the
 * rounding of a profiler's timestamps, not a second action running. */
#define TFI_OVERLAP_SLACK_US 1.0

typedef struct tfi_act {
    tf_action a;           /* type, stage, microbatch, pair role; rank -1 */
    int event;             /* the annotation's position in the file, for messages */
    double start, end;     /* the annotation's span, microseconds */
    double compute_start;  /* start once its input had arrived (= start if none) */
    int input_timed;       /* 1: compute_start is known to follow the arrival of its
                              input: a GPU-side span, or a CPU-side one whose receive
                              was seen */
} tfi_act;

typedef struct tfi_step {
    long id;               /* N of ProfilerStep#N; -1 when the trace has none */
    double start, end;
    tfi_act *acts;         /* compute actions in the order they started */
    int n_acts;
    int *by_key;           /* positions in acts, by (stage, microbatch, type) */
} tfi_step;

typedef struct tfi_rank_run {
    const tfi_trace *trace;
    int gpu;               /* the actions are GPU-side annotations */
    tfi_step *steps;       /* in time order */
    int n_steps;
    int *by_id;            /* positions in steps, by id */
    tfi_act *acts;         /* every step's actions, step after step */
    int *keys;             /* every step's by_key, likewise */
    long n_acts;
    int max_stage_named;   /* highest stage any PP: event names or sends to */
    int min_stage;         /* lowest stage of its compute actions */
    int outside;           /* PP: events outside every ProfilerStep span (ignored) */
    int wait_trimmed;      /* compute actions whose input wait was taken off */
} tfi_rank_run;

/* Cuts trace t into steps.  Uses the GPU-side annotations when the trace
 * has any `PP:` one, else the CPU-side ones; steps are the ProfilerStep#N
 * spans of the same side (else of the CPU side); a trace without any is one
 * step of id -1.  Fails with TF_EINVAL, naming the file and the event, for
 * a trace without `PP:` events, an unrecognised `PP:` name (a malformed
 * pair among them), a ProfilerStep#N twice, a step of more than
 * TF_MAX_ACTIONS actions (found while counting), an action that appears
 * twice in one step or two that overlap in time; TF_ENOMEM.  On success
 * *out points into t, whose spans it no longer needs
 * (tfi_trace_drop_spans), and owns its arrays (tfi_rank_run_free). */
int tfi_rank_run_build(const tfi_trace *t, tfi_rank_run *out, tf_error *err);

/* Frees what r owns and zeroes it.  r may be zeroed already. */
void tfi_rank_run_free(tfi_rank_run *r);

/* "ProfilerStep#N" for id N >= 0, "the whole trace" for -1, in buf[32];
 * returns buf. */
const char *tfi_step_label(long id, char *buf);

/* Index in r->steps of the step whose span holds time x (the latest to
 * start at or before x), or -1.  O(log steps). */
int tfi_step_at(const tfi_rank_run *r, double x);

/* The step of id `id` in r, or NULL.  O(log steps). */
const tfi_step *tfi_rank_run_step(const tfi_rank_run *r, long id);

/* The action (type, stage, microbatch) in step s, or NULL.  O(log acts). */
const tfi_act *tfi_step_find(const tfi_step *s, tf_action_type type, int stage, int microbatch);

#endif
