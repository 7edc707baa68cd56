/* exec.h - the two jobs of tf-exec: measuring a profile and training.
 *
 * tfx_exec_profile: builds the named schedule, warms up, then alternates
 * unfrozen and fully frozen training steps, takes per action the median of
 * its compute time (the backend's timer: the monotonic clock on the CPU,
 * CUDA events on a GPU), and writes a profile tf-plan reads.
 *
 * tfx_exec_train: trains with a plan (or, without one, unfrozen on the named
 * schedule), from the initial weights, from a checkpoint's weights (--init,
 * a fresh optimizer: fine-tuning) or resuming a run (--checkpoint).  Phases
 * as in the reference: `warmup` steps without freezing, then the plan's
 * freeze ratios scaled by (step - warmup) / ramp up to 1.  Evaluates the
 * loss on held-out data every `eval_every` steps and after the last.
 * Prints progress, optionally JSON lines (--log), checkpoints (--checkpoint),
 * and ends with measured vs planned batch time, tokens/s with and without
 * freezing, achieved GFLOP/s, the training and validation loss beside the
 * source's entropy floor and best bigram, and per rank its static and peak
 * bytes (and, under a limit, whether every planned step kept within it).
 *
 * With auto_plan, tfx_exec_train makes its own plan: after the warm-up it
 * measures profile_steps unfrozen and as many fully frozen steps
 * (alternating, as tfx_exec_profile does), solves the freeze LP with the
 * planner library exactly as tf-plan does on the profile it would write
 * (objective, solver, max_freeze_ratio), writes profile_out and plan_out,
 * ramps the plan's ratios in over `ramp` steps and trains; when a stage's
 * measured times drift from the plan beyond replan_threshold it measures
 * again and re-plans (src/train/autoplan.h has the rule).  Launched, process
 * 0 solves and sends the plan to the others.
 *
 * Launched (launch.world_size > 1, one process per rank or per block of
 * ranks, see runtime.h): every process runs the same job on its own ranks;
 * process 0 alone prints, writes --log and --profile-out; the others write
 * nothing (errors are returned as everywhere).  --checkpoint is refused.
 */
#ifndef TFX_EXEC_H
#define TFX_EXEC_H

#include <stdint.h>
#include <stdio.h>
#include "tf/error.h"
#include "tf/objective.h"
#include "tfx/freeze_select.h"
#include "tfx/kfac.h"
#include "tfx/launch.h"
#include "tfx/model.h"

typedef struct tfx_exec_options {
    const char *backend;        /* "cpu" or "cuda" */
    const char *devices;        /* cuda: GPU of each rank ("0,1", or "0" for all); NULL: rank mod GPUs */
    const char *transport;      /* NULL: the backend's default (local / cuda); "nccl" */
    int tf32;                   /* cuda: TF32 tensor-core GEMMs */
    const char *schedule;       /* NULL: the plan's, else 1F1B */
    int ranks;                  /* 0: the plan's, else 2 */
    int stages_per_rank;        /* 0: the plan's, else 2 for two-stage schedules, 1 */
    int microbatches;           /* 0: the plan's, else 4 */
    const char *schedule_csv;   /* the per-rank order in this PyTorch CSV, not --schedule's */
    const char *plan_path;      /* train with this plan */
    const char *profile_out;    /* profile instead of training (with auto_plan: write the
                                   profile it measured) */
    /* --auto-plan: measure, solve and train in one run (see above). */
    int auto_plan;
    const char *plan_out;       /* auto_plan: write the plan in use here */
    tf_objective objective;     /* auto_plan: the LP's tie-break (tf-plan --objective) */
    tf_solver solver;           /* auto_plan: tf-plan --solver */
    double max_action_ratio;    /* auto_plan: tf-plan --max-action-ratio (default 1: none) */
    double replan_threshold;    /* re-plan when a stage drifts by more than this share of
                                   its planned time (default 0.1; 0: never) */
    int replan_patience;        /* ... for this many steps in a row (default 3) */
    int replan_interval;        /* at least this many steps after the last plan (20) */
    int replan_steps;           /* steps of each kind a re-plan measures (default 2) */
    int steps;                  /* training steps (default 60) */
    int warmup;                 /* steps without freezing (default 10) */
    int ramp;                   /* steps to ramp freezing up (default 10) */
    const char *log_path;       /* JSON lines, one per step */
    const char *data_path;      /* NULL: the built-in source `source` */
    const char *source;         /* built-in source: "base" (NULL: the default) or "shifted" */
    const char *source_out;     /* write the built-in source's bytes here instead of training */
    const char *init_dir;       /* start from this checkpoint's weights (fresh optimizer) */
    int eval_every;             /* validation loss every N steps; 0: after the last only */
    int eval_batches;           /* held-out batches per evaluation (default 4) */
    int freeze_rescale;         /* scale frozen tensors' gradients (tfx_step_input) */
    int no_freeze_memory;       /* a frozen backward's forward keeps every activation
                                   (tfx_step_input.frozen_saves_memory off) */
    uint64_t memory_limit;      /* auto_plan: every rank's limit in bytes (0: none) */
    int recompute;              /* without a plan: TFX_RECOMPUTE_NONE, _FULL (every block
                                   of every forward) or _SELECTIVE (attention's weights) */
    const char *checkpoint_dir; /* save / resume here */
    int checkpoint_every;       /* steps between saves (default 10; the end always) */
    uint64_t seed;
    int no_freeze;
    double freeze_ratio;        /* without a plan: this ratio on every B / W action */
    tfx_select_method select;
    tfx_model_config model;
    tfx_adamw_config adamw;
    tfx_kfac_config kfac;       /* K-FAC statistics in the ranks' waits (off by default) */
    double max_freeze_ratio;    /* written into the profile (default 0.9) */
    int profile_warmup;         /* default 3 */
    int profile_steps;          /* default 5 of each kind */
    int progress;               /* -1 auto (bar on a terminal), 0 lines, 1 bar */
    int fail_rank, fail_action; /* testing: inject a failure (-1 none) */
    int slow_rank;              /* testing: from step slow_from (1-based) on, this rank's */
    double slow_factor;         /* compute takes slow_factor times as long (-1: none) */
    int slow_from;
    FILE *out;                  /* where progress and summaries go (stdout if NULL) */
    tfx_launch_env launch;      /* this process in a launched run (world_size 1: not) */
} tfx_exec_options;

enum { TFX_RECOMPUTE_NONE = 0, TFX_RECOMPUTE_FULL = 1, TFX_RECOMPUTE_SELECTIVE = 2 };

void tfx_exec_options_default(tfx_exec_options *o);

typedef struct tfx_train_summary {
    int steps_run;              /* steps run by this call */
    long last_step;             /* steps completed in total (with resumed ones) */
    double first_loss, final_loss;
    double entropy_floor;       /* nats/byte of the built-in source, -1 for files */
    double best_bigram;         /* nats/byte: the source's, or the file's empirical one */
    double val_loss;            /* the last validation loss */
    double gflops;              /* achieved GEMM-equivalent GFLOP/s over the steps run */
    double unfrozen_batch_ms;   /* median pipeline time of unfrozen steps, 0 if none */
    double frozen_batch_ms;     /* median of steps at the full plan ratios, 0 if none */
    double unfrozen_tokens_per_s, frozen_tokens_per_s;
    double planned_unfrozen_ms, planned_ms; /* from the plan, 0 without one */
    double unfrozen_replay_ms;  /* median longest path of the plan's DAG under each unfrozen */
    double frozen_replay_ms;    /* (frozen) step's measured action times; 0 if none */
    int plans;                  /* --auto-plan: plans solved (the first and re-plans) */
    long dw_gemms, dw_gemms_unfrozen;       /* executed, and without any freezing */
    int memory_ranks;           /* ranks below with figures (this process's) */
    long long static_bytes[64]; /* per rank: static bytes */
    long long peak_bytes[64];   /* per rank: the most microbatch bytes held in a step */
    long over_limit_steps;      /* steps at a plan's full ratios in which some rank's
                                   static + peak exceeded its limit (--memory-limit, else
                                   the plan's; 0 without) */
} tfx_train_summary;

/* Profiles the schedule and writes o->profile_out atomically.  Returns 0 or
 * a negative TF_E* code with a message naming the option or file. */
int tfx_exec_profile(const tfx_exec_options *o, tf_error *err);

/* Writes the bytes of the built-in source o->source (NULL: base) to
 * o->source_out atomically: training on that file with --data draws the
 * same windows and holds out the same bytes as --source does.  Returns 0,
 * or TF_EINVAL / TF_EIO / TF_ENOMEM naming the option or the file. */
int tfx_exec_write_source(const tfx_exec_options *o, tf_error *err);

/* Trains as described above; *summary (may be NULL) receives the figures.
 * Bad plans (another schedule, rank count, microbatch size than the options
 * say) are TF_EINVAL naming the field and both values; so is a launch whose
 * process count does not divide the pipeline's ranks (naming the variable,
 * e.g. WORLD_SIZE, and --ranks or the plan) and --checkpoint when launched. */
int tfx_exec_train(const tfx_exec_options *o, tfx_train_summary *summary, tf_error *err);

#endif
