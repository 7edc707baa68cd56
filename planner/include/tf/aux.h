/* aux.h - auxiliary work placed in a plan's bubbles (docs/bubbles.md).
 *
 * A profile may declare work that is not part of the pipeline's compute
 * but could run while a rank waits: K-FAC's curvature factors after each
 * forward and backward, their inversion once per step, and the like.
 * Each item belongs to a stage and becomes ready at the end of an action
 * of that stage (after F, B or W of each microbatch) or once per step
 * after the rank's last backward.  Placing it never moves any compute:
 * it goes only into the planned step's idle windows (tf_plan_rank's
 * bubbles), shortened by a margin at their ends, as PipeFisher does.
 *
 * Placement is first fit: items in the order they become ready, each in
 * the earliest window with room after it is ready; a divisible item fills
 * what room there is and goes on in the next windows.  What does not fit
 * spills into the next steps' windows (where it is ready from the start),
 * so the work of one step completes every `refresh_steps` steps: the
 * curvature is refreshed that often.  With every item divisible, first fit
 * is work-conserving (the rank never idles while ready work waits), which
 * places the largest amount any placement can: `exact_ms` is that amount,
 * the bound the first-fit placement of indivisible items is measured
 * against.  A plan places its profile's aux work when it is made or read
 * (tf_plan.aux, tf/plan.h).
 */
#ifndef TF_AUX_H
#define TF_AUX_H

#include "tf/error.h"

/* When an item becomes ready. */
typedef enum {
    TF_AUX_AFTER_F = 0,  /* at the end of each F of its stage */
    TF_AUX_AFTER_B = 1,  /* at the end of each backward (B, or I on a split stage) */
    TF_AUX_AFTER_W = 2,  /* at the end of each W (B on a stage that does not split) */
    TF_AUX_AFTER_STEP = 3 /* once per step, at the end of the rank's last backward */
} tf_aux_after;

/* One item of auxiliary work, as a profile declares it. */
typedef struct tf_aux_work {
    char name[48];
    int stage;
    tf_aux_after after;
    double ms;      /* > 0: its duration on the stage's rank */
    int divisible;  /* 1: may be split across windows */
} tf_aux_work;

/* The most aux items a profile may declare; the share of each window
 * kept free by default (PipeFisher's) and at most. */
#define TF_AUX_MAX_WORK 256
#define TF_AUX_DEFAULT_MARGIN 0.05
#define TF_AUX_MAX_MARGIN 0.5
/* Steps tried for spilled work before its refresh interval is given up
 * as unbounded (reported as 0). */
#define TF_AUX_MAX_STEPS 1000

/* A piece of aux work placed in a window. */
typedef struct tf_aux_slice {
    int rank;
    int work;        /* index into the work list */
    int microbatch;  /* of the action it follows; -1 for once-per-step work */
    int step;        /* 0: the planned step itself; k: spilled k steps on */
    double start_ms; /* within its step */
    double ms;
} tf_aux_slice;

/* What one rank's aux work comes to. */
typedef struct tf_aux_rank {
    double demand_ms;   /* one step's aux work on the rank */
    double placed_ms;   /* placed in the step itself */
    double spilled_ms;  /* demand - placed: runs in later steps' windows */
    double exact_ms;    /* the most any placement fits in the step (every item split) */
    int refresh_steps;  /* steps one step's work takes to complete (1: none spills);
                         * 0 when an indivisible item is longer than every window */
} tf_aux_rank;

typedef struct tf_aux_placement {
    int ranks;
    tf_aux_rank *per_rank;   /* ranks */
    tf_aux_slice *slices;    /* in rank, step and time order */
    int n_slices;
} tf_aux_placement;

/* The steps the slowest rank's work takes to complete (the largest
 * refresh_steps of a rank with aux work), 0 when some rank's never does,
 * 1 when no rank has any. */
int tf_aux_refresh_steps(const tf_aux_placement *p);

/* Frees what a placement owns and zeroes it. */
void tf_aux_placement_free(tf_aux_placement *p);

/* "F", "B", "W" or "step". */
const char *tf_aux_after_name(tf_aux_after after);

#endif
