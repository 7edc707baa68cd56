/* freeze_select.c - choosing the tensors a backward action freezes. */
#include "tfx/freeze_select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfx/rng.h"

static const char *const method_names[] = {"random", "rotate", "stable"};
#define N_METHODS ((int)(sizeof method_names / sizeof *method_names))

const char *tfx_select_method_name(tfx_select_method m)
{
    return (int)m >= 0 && (int)m < N_METHODS ? method_names[m] : "random";
}

int tfx_select_method_parse(const char *name, tfx_select_method *m, tf_error *err)
{
    for (int i = 0; name && i < N_METHODS; i++)
        if (strcmp(name, method_names[i]) == 0) {
            *m = (tfx_select_method)i;
            return 0;
        }
    return tf_fail(err, TF_EINVAL, "--freeze-select \"%s\": expected random, rotate or stable",
                   name ? name : "");
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
    TFX_CALLOC(sel->order, max_k);
    memcpy(sel->stage_tensors, stage_tensors, sizeof(int) * (size_t)stages);
    TFX_CALLOC(sel->stage_first, stages + 1);
    for (int s = 0; s < stages; s++)
        sel->stage_first[s + 1] = sel->stage_first[s] + stage_tensors[s];
    sel->n_tensors = sel->stage_first[stages];
    TFX_CALLOC(sel->size, sel->n_tensors);
    TFX_CALLOC(sel->avg_grad, sel->n_tensors);
    TFX_CALLOC(sel->avg_abs, sel->n_tensors);
    TFX_CALLOC(sel->perturbation, sel->n_tensors);
    TFX_CALLOC(sel->stale, sel->n_tensors);
    for (int t = 0; t < sel->n_tensors; t++)
        sel->perturbation[t] = 1.0;
    return 0;
fail:
    tfx_freeze_selector_free(sel);
    return rc;
}

void tfx_freeze_selector_free(tfx_freeze_selector *sel)
{
    for (int t = 0; t < sel->n_tensors; t++) {
        free(sel->avg_grad[t]);
        free(sel->avg_abs[t]);
    }
    free(sel->stage_tensors);
    free(sel->rotate_offset);
    free(sel->weight);
    free(sel->order);
    free(sel->stage_first);
    free(sel->size);
    free(sel->avg_grad);
    free(sel->avg_abs);
    free(sel->perturbation);
    free(sel->stale);
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

/* Rotate: the next k of the stage's K tensors, wrapping round. */
static void select_rotate(tfx_freeze_selector *sel, int stage, int k, unsigned char *frozen)
{
    const int K = sel->stage_tensors[stage];
    long off = sel->rotate_offset[stage];
    for (int j = 0; j < k; j++)
        frozen[(off + j) % K] = 1;
    sel->rotate_offset[stage] = (off + k) % K;
}

/* Stable: whether tensor a (global) goes before tensor b, the first frozen
 * first: fresh statistics before stale ones, then the lower perturbation,
 * then the lower index. */
static int settled_before(const tfx_freeze_selector *sel, int a, int b)
{
    int stale_a = sel->stale[a] >= TFX_STABLE_STALE_STEPS;
    int stale_b = sel->stale[b] >= TFX_STABLE_STALE_STEPS;
    if (stale_a != stale_b)
        return stale_b;
    if (sel->perturbation[a] != sel->perturbation[b])
        return sel->perturbation[a] < sel->perturbation[b];
    return a < b;
}

/* Stable: the k tensors first in settled_before's order (insertion sort: a
 * stage has tens of tensors). */
static void select_stable(tfx_freeze_selector *sel, int stage, int k, unsigned char *frozen)
{
    const int K = sel->stage_tensors[stage], first = sel->stage_first[stage];
    int *order = sel->order;
    for (int i = 0; i < K; i++) {
        int j = i;
        while (j > 0 && settled_before(sel, first + i, first + order[j - 1])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (int j = 0; j < k; j++)
        frozen[order[j]] = 1;
}

/* Random: weighted sampling without replacement, one tensor at a time with
 * probability proportional to the weights of those not yet drawn. */
static void select_random(tfx_freeze_selector *sel, long step, int stage, int microbatch,
                          int k, unsigned char *frozen)
{
    const int K = sel->stage_tensors[stage];
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
}

int tfx_freeze_select(tfx_freeze_selector *sel, long step, int stage, int microbatch,
                      double ratio, unsigned char *frozen)
{
    const int K = sel->stage_tensors[stage];
    const int k = tfx_freeze_count(ratio, K);
    memset(frozen, 0, (size_t)K);
    if (k == 0)
        return 0;
    if (sel->method == TFX_SELECT_ROTATE)
        select_rotate(sel, stage, k, frozen);
    else if (sel->method == TFX_SELECT_STABLE)
        select_stable(sel, stage, k, frozen);
    else
        select_random(sel, step, stage, microbatch, k, frozen);
    return k;
}

int tfx_freeze_selector_track(tfx_freeze_selector *sel, int stage, const size_t *sizes,
                              tf_error *err)
{
    int rc = 0;
    if (sel->method != TFX_SELECT_STABLE || stage < 0 || stage >= sel->stages)
        return tf_fail(err, TF_EINVAL, "freeze selector: cannot track stage %d (method %s, "
                       "%d stages)", stage, tfx_select_method_name(sel->method), sel->stages);
    for (int i = 0; i < sel->stage_tensors[stage]; i++) {
        int t = sel->stage_first[stage] + i;
        free(sel->avg_grad[t]);
        free(sel->avg_abs[t]);
        sel->avg_abs[t] = NULL;
        sel->size[t] = 0;
        TFX_CALLOC(sel->avg_grad[t], sizes[i]);
        TFX_CALLOC(sel->avg_abs[t], sizes[i]);
        sel->size[t] = sizes[i];
        sel->perturbation[t] = 1.0;
        sel->stale[t] = 0;
    }
fail:
    return rc;
}

void tfx_freeze_selector_observe(tfx_freeze_selector *sel, int stage, int i,
                                 const float *grad)
{
    const int t = sel->stage_first[stage] + i;
    if (!sel->avg_grad[t])
        return;
    if (!grad) {
        sel->stale[t]++;
        return;
    }
    const float d = (float)TFX_STABLE_DECAY;
    float *g = sel->avg_grad[t], *a = sel->avg_abs[t];
    double drift = 0.0, scale = 0.0;
    for (size_t e = 0; e < sel->size[t]; e++) {
        g[e] = d * g[e] + (1.0f - d) * grad[e];
        a[e] = d * a[e] + (1.0f - d) * fabsf(grad[e]);
        drift += fabsf(g[e]);
        scale += a[e];
    }
    /* Both averages start at 0 and decay alike, so their ratio needs no
     * bias correction; an all-zero gradient so far says nothing. */
    sel->perturbation[t] = scale > 0.0 ? drift / scale : 1.0;
    sel->stale[t] = 0;
}
