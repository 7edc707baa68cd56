/* memory.h - the bytes each rank holds over one step (docs/planner.md,
 * "Memory").
 *
 * Every stage has static bytes (weights, gradients, optimizer state) held
 * all step, and each forward keeps activations for its backward.  Walking
 * a rank's order one action at a time (an overlapped pair: its forward,
 * then its backward), the live bytes start at the rank's static bytes and
 * change at each action:
 *   F(s,m)  adds what the forward keeps: A(f) - q D
 *   R(s,m)  brings back what recomputation dropped: + q D
 *   B(s,m)  frees A(f) at its end
 *   I(s,m)  at its start allocates for its W while A(f) is still held: + X (1 - f),
 *           at its end keeps only the weight-gradient bytes: - X (1 - f) - A(f) + G (1 - f)
 *   W(s,m)  frees those at its end: - G (1 - f)
 * with f the freeze ratio of (s,m)'s backward (the B, or the W on a split
 * stage: the I never freezes), A(f) = A - f (A - A_f), D = max(A_f - C, 0)
 * X the I's transient (0 unless the profile measured one) and q the recompute ratio of
 * (s,m)'s backward (its B, or its I).  A
 * recomputing backward without an R action in the order re-materialises
 * at its own start.  A stage without recomputation keeps q = 0.  Every change is linear in f and q, which keeps a
 * memory limit a set of linear rows of the freeze LP; the recomputation
 * term is exact when f = 1 or A_f = A and otherwise a little above the
 * truth, so a plan within its limit is within it in reality.
 *
 * When freezing does not save memory (tf_memory_options.freeze_saves_memory
 * 0), A(f) = A and the weight-gradient terms are G and X.
 */
#ifndef TF_MEMORY_H
#define TF_MEMORY_H

#include "tf/error.h"
#include "tf/schedule.h"

/* A stage's bytes (profile.json's memory fields); all >= 0. */
typedef struct tf_stage_memory {
    double static_bytes;            /* resident for the whole step */
    double activation_bytes;        /* A: kept by one forward for its backward */
    double activation_frozen_bytes; /* A_f <= A: the same when that backward is fully frozen */
    double weight_grad_bytes;       /* G: split backward, live from the end of I to the end of W */
    double backward_input_transient_bytes; /* X: what an I holds above its start's bytes
                                            * before it frees any activation (default 0) */
    double checkpoint_bytes;        /* C <= A: what a fully recomputed forward keeps */
    double recompute_ms;            /* re-running the forward (R at recompute ratio 1) */
    int recomputes;                 /* 1: checkpoint_bytes and recompute_ms apply */
} tf_stage_memory;

/* The largest byte count accepted anywhere (an exbibyte): far above any
 * device, small enough that sums over every stage stay exact in a double
 * to a byte's fraction of a percent. */
#define TF_MAX_BYTES 1.152921504606846976e18

/* One change of a rank's live bytes:
 *   constant + freeze_coef * f[freeze_action] + recompute_coef * q[recompute_action]
 * where f and q are per-action arrays (freeze ratios, recompute ratios);
 * an index of -1 means the term is absent. */
typedef struct tf_memory_event {
    int action;            /* the action at which it happens */
    int at_start;          /* 1: when the action starts (a re-materialisation without an R,
                            * an I's transient); 0: when it ends */
    double constant;
    int freeze_action;     /* the B or W whose freeze ratio scales freeze_coef */
    double freeze_coef;
    int recompute_action;  /* the B or I whose recompute ratio scales recompute_coef */
    double recompute_coef;
} tf_memory_event;

/* The events of every rank, in its order. */
typedef struct tf_memory_model {
    int ranks;
    double *static_bytes;  /* ranks: the rank's stages' static bytes, its live bytes at the start */
    int *event_offset;     /* ranks + 1: rank r's events are events[event_offset[r] ..] */
    tf_memory_event *events;
    int n_events;
} tf_memory_model;

typedef struct tf_memory_options {
    int freeze_saves_memory; /* 1: a frozen backward's forward keeps A_f and G (1 - f) */
    const double *cap;       /* per stage, or NULL: a stage capped at 0 never freezes,
                              * so its recomputation drops A - C, exactly */
} tf_memory_options;

/* Builds the events of schedule s for the stages' bytes stages[s->stages]
 * (o NULL: freezing saves memory).  Returns 0 with *out owning its arrays
 * (tf_memory_model_free), TF_EINVAL when a forward has no backward in s, or
 * TF_ENOMEM; *out is zeroed on error. */
int tf_memory_model_build(const tf_schedule *s, const tf_stage_memory *stages,
                          const tf_memory_options *o, tf_memory_model *out, tf_error *err);

/* The change of event e under ratios f and q (per action; either NULL:
 * all 0). */
double tf_memory_event_delta(const tf_memory_event *e, const double *f, const double *q);

/* A rank's largest live bytes and where it occurs. */
typedef struct tf_memory_peak {
    double bytes;
    int action;  /* the first action after which it is reached; -1: at the start */
} tf_memory_peak;

/* The peak of every rank (peaks[m->ranks]) under freeze ratios f and
 * recompute ratios q (per action; NULL: all 0). */
void tf_memory_peaks(const tf_memory_model *m, const double *f, const double *q,
                     tf_memory_peak *peaks);

/* Can event e raise the live bytes for some ratios in [0, 1]?  Only such
 * events can set a new peak, so only they need a limit row. */
int tf_memory_event_can_rise(const tf_memory_event *e);

/* The first rank whose peak with nothing frozen or recomputed exceeds
 * limit[rank] (limit per rank), or -1 when every rank fits.  Freezing and
 * recomputation only lower the live bytes, so only then can a limit change
 * a plan. */
int tf_memory_first_over(const tf_memory_model *m, const double *limit);

void tf_memory_model_free(tf_memory_model *m);

#endif
