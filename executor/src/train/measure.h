/* measure.h - measuring a pipeline's actions over training steps, and the
 * profile those measurements make (internal to the executor): what
 * --profile-out writes and what --auto-plan solves, measured the same way.
 *
 * After each measuring step the caller hands the pipeline's figures to
 * tfx_measure_add, saying whether the step froze every tensor.  Besides the
 * compute time of every action, each step gives:
 *   - the lag of the messages between ranks: for an action whose input comes
 *     from another rank and which was already waiting for it when the
 *     sender's compute ended, the time from that end to the receiver's
 *     compute start (the sender's copy, the receiver's wake-up and its copy):
 *     what the DAG's p2p_ms stands for;
 *   - what the DAG leaves out by design, reported beside it: how long after
 *     the step start the first rank begins (thread start, zeroing the
 *     gradients), how long after the last compute the step ends (the last
 *     sends, the threads' joins), and the optimizer phase after the batch.
 */
#ifndef TFX_MEASURE_H
#define TFX_MEASURE_H

#include "exec_internal.h"
#include "tf/profile.h"

typedef struct tfx_measure {
    const tf_schedule *s;  /* the run's schedule (borrowed) */
    int steps;             /* room: steps of each kind */
    int n_full, n_frozen;  /* steps added of each kind */
    double *full, *frozen; /* [action * steps + k]: compute ms */
    int *sender;           /* per action: the action on another rank whose message it
                              receives, or -1 */
    double *lag;           /* waits seen (ms), room for 2 x steps x actions */
    int n_lag;
    double *startup, *tail, *optimizer; /* per step added (ms) */
    int n_clock;
    /* Per stage, what the steps added counted (tf/memory.h's fields): A from
     * an unfrozen step's F, A_f from a fully frozen one's, G from an
     * unfrozen I, static bytes; has_memory once both kinds were added on a
     * pipeline holding every stage (a launched process does not). */
    tf_stage_memory *memory;
    int memory_seen[2];
    double *recompute;     /* stages x steps: recompute ms of the recomputing steps */
    int n_recompute;       /* recomputing steps added */
} tfx_measure;

/* The clock beyond the actions' compute times: medians over the steps
 * measured (ms); lag_ms is 0 and n_lag 0 when no rank ever waited. */
typedef struct tfx_clock_figures {
    double lag_ms;
    int n_lag;
    double startup_ms, tail_ms, optimizer_ms;
} tfx_clock_figures;

/* Prepares m for up to `steps` steps of each kind of schedule s (kept by
 * reference: it must outlive m).  Returns 0 or TF_ENOMEM; release with
 * tfx_measure_free either way. */
int tfx_measure_init(tfx_measure *m, const tf_schedule *s, int steps, tf_error *err);

/* Forgets the steps added, keeping the room (a new measurement). */
void tfx_measure_reset(tfx_measure *m);

/* One step's figures, as the pipeline gives them (runtime.h): per action
 * the compute time, start and enter offsets; per rank the clock offset; the
 * step's pipeline and whole time. */
typedef struct tfx_step_times {
    const double *ms, *start, *enter, *clock;
    double pipeline_ms, step_ms;
} tfx_step_times;

/* Adds a step's figures (every tensor frozen when `frozen`, else none); a
 * step beyond the room of its kind is ignored. */
void tfx_measure_add_times(tfx_measure *m, const tfx_step_times *t, int frozen);

/* Adds the last training step of p (run with every tensor frozen when
 * `frozen`, else unfrozen) and its result.  A step beyond the room of its
 * kind is ignored. */
void tfx_measure_add(tfx_measure *m, const tfx_pipeline *p, int frozen,
                     const tfx_step_result *res);

/* Adds the last training step of p, run unfrozen with every block of every
 * forward recomputed at its backward's start: per stage the bytes a forward
 * kept (checkpoint_bytes) and the median recomputation time
 * (recompute_ms), which the profile then carries.  A step beyond the room
 * is ignored. */
void tfx_measure_add_recompute(tfx_measure *m, const tfx_pipeline *p);

/* The clock figures of the steps added.  Returns 0, or TF_ENOMEM with *c
 * zeroed: the lag goes into the plan, so a missing figure is an error. */
int tfx_measure_clock(const tfx_measure *m, tfx_clock_figures *c, tf_error *err);

/* The profile of the steps added (at least one of each kind), built by
 * tf_profile_from_samples: per action the median compute time unfrozen and
 * frozen, per stage the medians of its actions and (when every stage ran
 * in this process) the bytes counted: static_bytes, activation_bytes,
 * activation_frozen_bytes, split weight_grad_bytes, and after recomputing
 * steps checkpoint_bytes and recompute_ms; p2p_ms the median lag, the
 * caps from --max-freeze-ratio; prints a line per stage and one for the
 * clock on r->out.  *out is the caller's (tf_profile_free) on
 * success and zeroed on error.  Returns 0, TF_EINVAL when a kind has no
 * step, or TF_ENOMEM. */
int tfx_measure_profile(const tfx_measure *m, const tfx_exec_run *r, tf_profile *out,
                        tf_error *err);

/* Prints the clock figures as the line tfx_measure_profile prints. */
void tfx_measure_print_clock(const tfx_clock_figures *c, FILE *out);

void tfx_measure_free(tfx_measure *m);

#endif
