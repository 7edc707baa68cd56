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
 */
#ifndef TFI_STEPS_H
#define TFI_STEPS_H

#include "tf/schedule.h"
#include "trace.h"

/* Stage and microbatch numbers above this are refused as implausible. */
#define TFI_MAX_INDEX 65535

typedef struct tfi_act {
    tf_action a;           /* type, stage, microbatch, pair role; rank -1 */
    double start, end;     /* the annotation's span, microseconds */
    double compute_start;  /* start once its input had arrived (= start if none) */
    const char *name;      /* the annotation's name (points into the trace) */
} tfi_act;

typedef struct tfi_step {
    long id;               /* N of ProfilerStep#N; -1 when the trace has none */
    double start, end;
    tfi_act *acts;         /* compute actions in the order they started */
    int n_acts;
} tfi_step;

typedef struct tfi_rank_run {
    const tfi_trace *trace;
    int gpu;               /* the actions are GPU-side annotations */
    tfi_step *steps;       /* in time order */
    int n_steps;
    int max_stage_named;   /* highest stage any PP: event names or sends to */
    int outside;           /* PP: events outside every ProfilerStep span (ignored) */
    int wait_trimmed;      /* compute actions whose input wait was taken off */
} tfi_rank_run;

/* Cuts trace t into steps.  Uses the GPU-side annotations when the trace
 * has any `PP:` one, else the CPU-side ones; steps are the ProfilerStep#N
 * spans of the same side (else of the CPU side); a trace without any is one
 * step of id -1.  Fails with TF_EINVAL, naming the file and the event, for
 * a trace without `PP:` events, an unrecognised `PP:` name (a malformed
 * pair among them), or an action that appears twice in one step.  On success *out
 * points into t (keep t alive) and owns its arrays (tfi_rank_run_free). */
int tfi_rank_run_build(const tfi_trace *t, tfi_rank_run *out, tf_error *err);

/* Frees what r owns and zeroes it.  r may be zeroed already. */
void tfi_rank_run_free(tfi_rank_run *r);

/* "ProfilerStep#N" for id N >= 0, "the whole trace" for -1, in buf[32];
 * returns buf. */
const char *tfi_step_label(long id, char *buf);

/* The step of id `id` in r, or NULL. */
const tfi_step *tfi_rank_run_step(const tfi_rank_run *r, long id);

/* The action (type, stage, microbatch) in step s, or NULL. */
const tfi_act *tfi_step_find(const tfi_step *s, tf_action_type type, int stage, int microbatch);

#endif
