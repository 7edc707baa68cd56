/* freeze_select.c - choosing the tensors a backward action freezes. */
#include "tfx/freeze_select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfx/rng.h"

const char *tfx_select_method_name(tfx_select_method m)
{
    return m == TFX_SELECT_ROTATE ? "rotate" : "random";
}

int tfx_select_method_parse(const char *name, tfx_select_method *m, tf_error *err)
{
    if (name && strcmp(name, "random") == 0)
        *m = TFX_SELECT_RANDOM;
    else if (name && strcmp(name, "rotate") == 0)
        *m = TFX_SELECT_ROTATE;
    else
        return tf_fail(err, TF_EINVAL, "--freeze-select \"%s\": expected random or rotate",
                       name ? name : "");
    return 0;
}

int tfx_freeze_selector_init(tfx_freeze_selector *sel, tfx_select_method method,
                             uint64_t seed, int stages, const int *stage_tensors,
                             tf_error *err)
{
    int rc = 0;
    memset(sel, 0, sizeof *sel);
    sel->method = method;
    sel->seed = seed;
    sel->stages = stages;
    TFX_CALLOC(sel->stage_tensors, stages);
    TFX_CALLOC(sel->rotate_offset, stages);
    int max_k = 1;
    for (int s = 0; s < stages; s++)
        if (stage_tensors[s] > max_k)
            max_k = stage_tensors[s];
    TFX_CALLOC(sel->weight, max_k);
    memcpy(sel->stage_tensors, stage_tensors, sizeof(int) * (size_t)stages);
    return 0;
fail:
    tfx_freeze_selector_free(sel);
    return rc;
}

void tfx_freeze_selector_free(tfx_freeze_selector *sel)
{
    free(sel->stage_tensors);
    free(sel->rotate_offset);
    free(sel->weight);
    memset(sel, 0, sizeof *sel);
}

int tfx_freeze_count(double ratio, int k_tensors)
{
    if (!(ratio > 0.0)) /* also NaN */
        return 0;
    if (ratio > 1.0)
        ratio = 1.0;
    int k = (int)floor(ratio * k_tensors + 0.5);
    return k > k_tensors ? k_tensors : k;
}

int tfx_freeze_select(tfx_freeze_selector *sel, long step, int stage, int microbatch,
                      double ratio, unsigned char *frozen)
{
    const int K = sel->stage_tensors[stage];
    const int k = tfx_freeze_count(ratio, K);
    memset(frozen, 0, (size_t)K);
    if (k == 0)
        return 0;
    if (sel->method == TFX_SELECT_ROTATE) {
        long off = sel->rotate_offset[stage];
        for (int j = 0; j < k; j++)
            frozen[(off + j) % K] = 1;
        sel->rotate_offset[stage] = (off + k) % K;
        return k;
    }
    /* Weighted sampling without replacement: draw one tensor at a time with
     * probability proportional to the weights of those not yet drawn. */
    double *w = sel->weight;
    double total = 0.0;
    for (int i = 0; i < K; i++) {
        w[i] = (stage == 0 && K > 1) ? 1.0 - 0.9 * (double)i / (K - 1) : 1.0;
        total += w[i];
    }
    tfx_rng r = tfx_rng_for(sel->seed, TFX_RNG_FREEZE, (uint64_t)step, (uint64_t)stage,
                            (uint64_t)microbatch);
    for (int j = 0; j < k; j++) {
        double x = tfx_rng_uniform(&r) * total;
        int pick = -1;
        for (int i = 0; i < K; i++) {
            if (frozen[i])
                continue;
            pick = i; /* the last eligible one absorbs rounding */
            if (x < w[i])
                break;
            x -= w[i];
        }
        frozen[pick] = 1;
        total -= w[pick];
    }
    return k;
}
