/* model_flops.h - the model's floating-point work per microbatch, counted
 * from its shape (model.c).  Internal to the executor: the runtime counts
 * the work it actually runs (tfx_stage.flops), and the tests check that
 * count against this one. */
#ifndef TFX_MODEL_FLOPS_H
#define TFX_MODEL_FLOPS_H

#include "tfx/model.h"

/* Work of one microbatch in GEMM-equivalent FLOPs (2 m n k per GEMM,
 * attention's included) for stage `stage` (< 0: the whole model): forward,
 * dX, and dW with nothing frozen. */
typedef struct tfx_model_flops {
    double forward, backward_input, backward_weight;
} tfx_model_flops;
tfx_model_flops tfx_model_microbatch_flops(const tfx_model_layout *l, int stage);

#endif
