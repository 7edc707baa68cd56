/* study.h - capacity-planning sweeps (tf-study).
 *
 * A study describes a model by per-layer costs (per microbatch) and a sweep
 * over schedules, pipeline depth (ranks), stages per rank, microbatch counts,
 * freeze caps and p2p lags.  Every configuration of the sweep becomes an
 * in-memory tf_profile (layers split into contiguous, balanced stages), is
 * planned with tf_plan_from_profile, and yields one result row.  A model
 * given by its transformer shape (study_memory.h) or by measured bytes per
 * layer also gets each stage's bytes, each row the largest rank's peak, and
 * with a GPU memory
 * each configuration is planned within it and marked as fitting or not.
 *
 * Memory: every struct that owns memory has a *_free function that frees it
 * and zeroes the struct; freeing a zeroed struct is a no-op.  Functions that
 * fail return a negative TF_E* code and fill err (may be NULL) with a message
 * that names the file, the JSON path and the bad value.
 */
#ifndef TF_STUDY_H
#define TF_STUDY_H

#include <stddef.h>
#include <stdio.h>

#include "tf/error.h"
#include "tf/objective.h"
#include "tf/profile.h"
#include "study_memory.h"

/* Limits that keep every count far inside an int and the partition DP fast;
 * far beyond real models and real sweeps. */
#define TF_STUDY_MAX_LAYERS 1024
#define TF_STUDY_MAX_CONFIGS 100000
/* The largest study file read: a sweep list of TF_STUDY_MAX_CONFIGS values
 * and per-layer lists for TF_STUDY_MAX_LAYERS layers take about 2 MB. */
#define TF_STUDY_MAX_BYTES ((size_t)16 << 20)
/* Each configuration's solve stops after this long (tf_freeze_control):
 * several times the slowest solve within the planner's size limits. */
#define TF_STUDY_TIME_LIMIT_S 600.0

typedef struct tf_study {
    char source[512];             /* file name used in messages */
    char name[128];               /* "name" field, else the file's base name */
    int layers;
    tf_stage_times *layer;        /* layers entries: cost of each layer per microbatch */
    tf_stage_times embedding;     /* extra cost on the first stage (zeros if none) */
    tf_stage_times head;          /* extra cost on the last stage (zeros if none) */
    int has_split_backward;       /* every layer has I/W times (split schedules can run) */
    int balanced_partition;       /* "partition": 0 "even" (default), 1 "balanced" */
    double microbatch_tokens;     /* > 0 */
    char profile_path[512];       /* resolved "profile" path, "" if none */

    /* Memory from the model's shape (study_memory.h); has_shape 0: none.
     * Without bytes the recompute and sequence_parallel lists hold one
     * value each ("none", false). */
    int has_shape;
    tf_transformer_shape shape;
    double bytes_per_parameter;   /* static bytes per parameter (weights, grads, optimizer) */
    double gpu_memory_bytes;      /* each GPU's memory; 0: no limit, nothing marked */
    double memory_headroom_bytes; /* kept free of the plan: the limit is gpu - headroom */
    int *recompute;               /* tf_recompute modes, swept */
    int n_recompute;
    int *sequence_parallel;       /* 0/1, swept */
    int n_sequence_parallel;

    /* Bytes given directly, measured per layer (study_shape.h); never
     * together with a shape.  has_bytes: the shape or these, so stages
     * get bytes. */
    int has_measured;
    int has_bytes;
    tf_activation_bytes measured;   /* one layer, per microbatch */
    double measured_static;         /* static bytes per layer; < 0: parameters x bytes each */
    double first_static, first_activation; /* first_stage_extra_bytes */
    double last_static, last_activation;   /* last_stage_extra_bytes */

    /* The sweep: every combination of these values is one configuration. */
    char (*schedule)[64];         /* canonical built-in names */
    int n_schedule;
    int *ranks;
    int n_ranks;
    int *stages_per_rank;         /* NULL: each schedule's default */
    int n_stages_per_rank;
    int *microbatches;
    int n_microbatches;
    double *max_freeze_ratio;
    int n_max_freeze_ratio;
    double *p2p_ms;
    int n_p2p_ms;
} tf_study;

/* Parses and validates study JSON.  `where` names the source in messages and
 * is the base for a relative "profile" path (resolved against its
 * directory).  On success *out owns its memory (tf_study_free); on error *out
 * is zeroed and err names the JSON path and value.  Returns 0, TF_EINVAL,
 * TF_EIO (the profile cannot be read) or TF_ENOMEM. */
int tf_study_parse(const char *json, const char *where, tf_study *out, tf_error *err);

/* Reads path (at most TF_STUDY_MAX_BYTES) and parses it as tf_study_parse
 * does. */
int tf_study_load(const char *path, tf_study *out, tf_error *err);

void tf_study_free(tf_study *s);

/* Sets each GPU's memory (tf-study --gpu-memory), over the study's
 * gpu_memory_bytes.  Returns 0, or TF_EINVAL (err says why) when the study
 * has no bytes (no shape, no measured bytes) or its memory_headroom_bytes is not
 * below bytes; s is then unchanged. */
int tf_study_set_gpu_memory(tf_study *s, double bytes, tf_error *err);

/* One point of the sweep. */
typedef struct tf_study_config {
    char schedule[64];
    int ranks;
    int stages_per_rank;
    int microbatches;
    double max_freeze_ratio;
    double p2p_ms;
    int recompute;                /* tf_recompute; -1: the study has no bytes */
    int sequence_parallel;        /* 0/1 (0 without a shape) */
} tf_study_config;

/* Default stages per rank of a built-in schedule: 1 for GPipe and 1F1B,
 * 2 for the interleaved, looped and V schedules. */
int tf_study_default_stages_per_rank(const char *schedule);

/* Expands the sweep into *configs (malloc'd, caller frees) in the order
 * schedule, ranks, stages_per_rank, microbatches, max_freeze_ratio, p2p_ms,
 * then, with bytes, sequence_parallel and recompute (the last varies
 * fastest).  stages_per_rank values apply to schedules that
 * accept several (Interleaved1F1B, LoopedBFS, InterleavedZeroBubble); GPipe
 * and 1F1B always use 1, ZBVZeroBubble and DualPipeV 2.  Returns 0 or
 * TF_ENOMEM. */
int tf_study_configs(const tf_study *s, tf_study_config **configs, int *n, tf_error *err);

/* Splits the layers into `stages` contiguous stages: first_layer[k] is the
 * first layer of stage k, first_layer[stages] = layers.  Stage cost =
 * forward + full backward of its layers, plus the embedding on the first
 * stage and the head on the last.  "even" partitions give every stage
 * floor(L/S) or ceil(L/S) layers; "balanced" ones any count >= 1.  Among
 * the allowed splits, the one with the smallest largest stage cost, then the
 * smallest sum of squared stage costs; on exact ties later stages get the
 * extra layers.  Returns 0, or TF_EINVAL when there are fewer layers than
 * stages. */
int tf_study_partition(const tf_study *s, int stages, int *first_layer, tf_error *err);

/* Builds the profile of one configuration: the built-in schedule, the summed
 * stage times, caps, p2p lag and microbatch tokens.  On success *out owns its
 * memory (tf_profile_free).  TF_EINVAL (with the reason) means the schedule
 * cannot run this configuration; TF_ENOMEM is out of memory. */
int tf_study_make_profile(const tf_study *s, const tf_study_config *c, tf_profile *out,
                          tf_error *err);

typedef enum {
    TF_STUDY_SOLVED = 0,
    TF_STUDY_SKIPPED = 1, /* the schedule cannot run the configuration */
    TF_STUDY_FAILED = 2   /* the planner failed (solver status, cycle, memory) */
} tf_study_status;

typedef struct tf_study_row {
    tf_study_config config;
    tf_study_status status;
    char reason[1024];            /* why it was skipped or failed, else "" */
    int stages;
    int layers_per_stage_min, layers_per_stage_max;
    double batch_ms_unfrozen, batch_ms_all_frozen, batch_ms_planned;
    double speedup;               /* unfrozen / planned */
    /* idle time / (ranks x batch time): idle = ranks x batch time minus the
     * summed durations of all actions (unfrozen durations for the unfrozen
     * schedule, planned durations for the planned one). */
    double bubble_ratio_unfrozen, bubble_ratio_planned;
    double mean_freeze_ratio;     /* mean over freezable actions */
    double tokens_per_s_unfrozen, tokens_per_s_planned;
    int lp_variables, lp_constraints;
    double solve_seconds;         /* the planner's LP build and solve time */
    char solver[32];              /* the solver that ran: "lp_solve" or "fast" */
    /* Memory (a study with bytes; else all 0 and fits -1).  Peaks are
     * the largest rank's, from the planner's liveness over the order under
     * the plan's freeze and recompute ratios. */
    double peak_memory_bytes;     /* static + every activation */
    double peak_activation_bytes; /* the transformer layers' activations alone */
    int fits;                     /* 1 within gpu - headroom, 0 not, -1 no gpu memory given */
    int fit_freezes, fit_recomputes; /* the plan fits only by freezing / recomputing */
} tf_study_row;

/* Plans one configuration and fills *row (never fails: a configuration that
 * cannot run is TF_STUDY_SKIPPED, a planner failure TF_STUDY_FAILED, both
 * with row->reason).  Thread-safe: s is only read.  Solver auto. */
void tf_study_solve(const tf_study *s, const tf_study_config *c, tf_objective objective,
                    tf_study_row *row);

/* tf_study_solve with the freeze-LP solver chosen (tf_plan_options.solver):
 * row->solver names the one that ran. */
void tf_study_solve_with(const tf_study *s, const tf_study_config *c, tf_objective objective,
                         tf_solver solver, tf_study_row *row);

typedef struct tf_study_run_options {
    int threads;                  /* <= 0: one per online CPU */
    tf_objective objective;
    tf_solver solver;             /* freeze-LP solver per configuration (default auto) */
    /* Called after each configuration, and about once a second while
     * configurations run (so a long solve still shows progress), never
     * from two threads at once (the run holds a lock), with done of
     * total. */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} tf_study_run_options;

/* Defaults: all CPUs, least-freeze, solver auto, no progress callback. */
void tf_study_run_options_init(tf_study_run_options *o);

typedef struct tf_study_result {
    char name[128];
    tf_study_row *rows;           /* one per configuration, in sweep order */
    int n_rows;
    int solved, skipped, failed;
    int threads;                  /* threads used */
    double wall_seconds;          /* the whole run */
    int vary_ranks, vary_stages_per_rank, vary_microbatches, vary_cap, vary_p2p; /* > 1 value */
    int vary_recompute, vary_sequence_parallel;
    int has_memory;               /* the study has bytes: rows carry memory figures */
    double memory_limit_bytes;    /* gpu memory less headroom; 0: none */
} tf_study_result;

/* Solves every configuration of the sweep on o->threads threads (pthreads;
 * each configuration is planned independently with its own lp_solve model).
 * Returns 0 with *out filled (tf_study_result_free), or TF_ENOMEM /
 * TF_ERUNTIME (threads could not start).  Skipped and failed configurations
 * are rows with their status, not errors. */
int tf_study_run(const tf_study *s, const tf_study_run_options *o, tf_study_result *out,
                 tf_error *err);

void tf_study_result_free(tf_study_result *r);

/* The results as CSV, one row per solved configuration, with a header line
 * (malloc'd, caller frees).  Returns 0 or TF_ENOMEM. */
int tf_study_to_csv(const tf_study_result *r, char **text, tf_error *err);

/* The chart format a path asks for: "svg", "png" or "pdf" by its suffix
 * (any case), "svg" for a name without one (/dev/null, a pipe); NULL for
 * any other suffix. */
const char *tf_study_plot_format(const char *path);

/* The chart: throughput per GPU (unfrozen and planned) and speedup of
 * every solved configuration, grouped by schedule, drawn through the
 * render library (tf/canvas.h) in format ("svg", "png", "pdf"; PNG at 96
 * dpi) into *data (malloc'd, caller frees, *len bytes).  Returns 0,
 * TF_EINVAL (nothing solved, or a format Graphviz cannot write here) or
 * TF_ENOMEM. */
int tf_study_plot(const tf_study_result *r, const char *format, char **data, size_t *len,
                  tf_error *err);

/* The file name tf_study_write_outputs gives a configuration's profile,
 * e.g. "1F1B-p4-v1-m8-cap0.8-p2p0.profile.json", written into buf[size]. */
void tf_study_profile_name(const tf_study_config *c, char *buf, size_t size);

/* Writes the study's outputs as one unit (tf_write_files_atomic): the CSV
 * text and the chart's plot_len bytes to their paths (either path may be
 * NULL to skip it) and, when
 * profile_dir is not NULL, the profile of every solved configuration into
 * that directory (created if missing), so the best ones can go straight
 * into tf-plan and tf-dot.  On any failure no target is replaced.  Returns
 * 0, TF_EINVAL (two configurations would share a profile name), TF_EIO or
 * TF_ENOMEM. */
int tf_study_write_outputs(const tf_study *s, const tf_study_result *r, const char *csv_path,
                           const char *csv, const char *plot_path, const char *plot,
                           size_t plot_len, const char *profile_dir, tf_error *err);

/* Prints a markdown summary of the best configurations. */
void tf_study_print_summary(const tf_study_result *r, FILE *f);

#endif
