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
 *    checkpoints save.
 */
#ifndef TFX_FREEZE_SELECT_H
#define TFX_FREEZE_SELECT_H

#include <stdint.h>
#include "tf/error.h"

typedef enum { TFX_SELECT_RANDOM = 0, TFX_SELECT_ROTATE = 1 } tfx_select_method;

/* "random" / "rotate" <-> enum.  parse returns 0 or TF_EINVAL naming it. */
const char *tfx_select_method_name(tfx_select_method m);
int tfx_select_method_parse(const char *name, tfx_select_method *m, tf_error *err);

typedef struct tfx_freeze_selector {
    tfx_select_method method;
    uint64_t seed;
    int stages;
    int *stage_tensors;    /* stages: K per stage */
    long *rotate_offset;   /* stages: next tensor to freeze under rotate */
    double *weight;        /* scratch: sampling weights of the largest stage */
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
 * microbatch); it advances that stage's offset. */
int tfx_freeze_select(tfx_freeze_selector *sel, long step, int stage, int microbatch,
                      double ratio, unsigned char *frozen);

#endif
