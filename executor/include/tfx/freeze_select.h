/* freeze_select.h - which tensors a backward action freezes.
 *
 * Given an action's freeze ratio r and its stage's K parameter tensors, the
 * action freezes k = round(r K) of them (halves round up).  Two choices:
 *  - random (the reference): k tensors drawn without replacement, with
 *    weights falling linearly from 1.0 (first tensor) to 0.1 (last) on stage
 *    0 and uniform on the other stages; the draw for (step, stage,
 *    microbatch) depends only on the seed and those numbers;
 *  - rotate: the stage's tensors are taken round-robin, k at a time in
 *    microbatch order, so over a run every tensor is frozen equally often and
 *    none starves of updates.  Its only state is one offset per stage, which
 *    checkpoints save;
 *  - stable (gradient statistics, after the effective perturbation of APF,
 *    Chen et al., "Communication-efficient federated learning with adaptive
 *    parameter freezing"): every tracked tensor keeps two running averages
 *    of its gradient, element by element, EMA(g) and EMA(|g|) (decay
 *    TFX_STABLE_DECAY, updated after each step in which the tensor got a
 *    gradient), and its perturbation P = sum |EMA(g)| / sum EMA(|g|), in
 *    [0, 1]: near 1 the gradient keeps its direction (the tensor is still
 *    moving), near 0 it oscillates about zero (the tensor has settled).  A
 *    backward freezes the k tensors of its stage with the lowest P (ties:
 *    the lower index), except that a tensor without a gradient for
 *    TFX_STABLE_STALE_STEPS steps in a row goes last, so that a tensor
 *    frozen in every microbatch is soon trained, and measured, again.  No
 *    draw: the choice is a function of the gradients seen so far.
 */
#ifndef TFX_FREEZE_SELECT_H
#define TFX_FREEZE_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include "tf/error.h"

typedef enum {
    TFX_SELECT_RANDOM = 0, TFX_SELECT_ROTATE = 1, TFX_SELECT_STABLE = 2
} tfx_select_method;

/* stable: the averages' decay (about the last 10 steps count), and the
 * steps without a gradient after which a tensor's P is too old to trust:
 * the same horizon. */
#define TFX_STABLE_DECAY 0.9
#define TFX_STABLE_STALE_STEPS 10

/* "random" / "rotate" / "stable" <-> enum.  parse returns 0 or TF_EINVAL
 * naming it. */
const char *tfx_select_method_name(tfx_select_method m);
int tfx_select_method_parse(const char *name, tfx_select_method *m, tf_error *err);

typedef struct tfx_freeze_selector {
    tfx_select_method method;
    uint64_t seed;
    int stages;
    int *stage_tensors;    /* stages: K per stage */
    long *rotate_offset;   /* stages: next tensor to freeze under rotate */
    double *weight;        /* scratch: sampling weights of the largest stage */
    int *order;            /* scratch: a stage's tensors in the order stable freezes them */
    /* stable, per tensor of the model (stage by stage, n_tensors in all): */
    int n_tensors;
    int *stage_first;      /* stages + 1: a stage's first tensor */
    size_t *size;          /* elements; 0 while the tensor is not tracked */
    float **avg_grad;      /* EMA(g), element by element (NULL: not tracked) */
    float **avg_abs;       /* EMA(|g|) */
    double *perturbation;  /* P; 1 until the tensor's first gradient */
    long *stale;           /* steps in a row without a gradient */
} tfx_freeze_selector;

/* stage_tensors[stages] gives K per stage.  Returns 0 or TF_ENOMEM. */
int tfx_freeze_selector_init(tfx_freeze_selector *sel, tfx_select_method method,
                             uint64_t seed, int stages, const int *stage_tensors,
                             tf_error *err);
void tfx_freeze_selector_free(tfx_freeze_selector *sel);

/* round(r K) for r clamped to [0, 1]. */
int tfx_freeze_count(double ratio, int k_tensors);

/* Chooses the frozen tensors of (step, stage, microbatch) for ratio r into
 * frozen[0..K-1] (1 = frozen) and returns how many were frozen.  Under
 * rotate, calls for one stage must come in execution order (step, then
 * microbatch); it advances that stage's offset.  Under stable, the choice
 * follows the statistics observed so far (an untracked stage's tensors in
 * index order). */
int tfx_freeze_select(tfx_freeze_selector *sel, long step, int stage, int microbatch,
                      double ratio, unsigned char *frozen);

/* stable: allocates the statistics of `stage`'s tensors, sizes[i] elements
 * for its tensor i (a launched process tracks only the stages it runs).
 * Returns 0, TF_EINVAL for another method or a stage out of range, or
 * TF_ENOMEM. */
int tfx_freeze_selector_track(tfx_freeze_selector *sel, int stage, const size_t *sizes,
                              tf_error *err);

/* stable: takes in the gradient of tensor i of `stage` after a step (its
 * sizes[i] elements), or grad NULL when the tensor got none (frozen in every
 * microbatch), which only counts the step as stale.  Call it once per step
 * for every tracked tensor; untracked ones are ignored. */
void tfx_freeze_selector_observe(tfx_freeze_selector *sel, int stage, int i,
                                 const float *grad);

#endif
