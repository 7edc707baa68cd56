/* kfac.h - K-FAC factor statistics computed in a pipeline's idle time.
 *
 * With `enabled`, every rank keeps, for each Linear layer of its stages
 * (per block: attn.qkv, attn.proj, mlp.fc1, mlp.fc2; on the last stage the
 * head), the two Kronecker factors of K-FAC as running averages:
 *
 *   A = x^T x / N   over the layer's N input rows of a microbatch, x with a
 *                   column of ones appended when the layer has a bias
 *                   (so A is (in+1) x (in+1), its corner 1);
 *   G = dY^T dY / N over the rows of the gradient of the layer's output
 *                   (out x out).  dY is the gradient of the step's mean
 *                   loss, so it carries that mean's factor 1/(tokens of
 *                   a microbatch x microbatches).
 *
 * With `sample` below 1 both use only the first sample x N rows of the
 * microbatch (whole sequences when that is a multiple of the context),
 * and N above is that count: K-FAC for language models commonly estimates
 * the factors on part of the tokens, as the work is comparable to a step's.
 *
 * Each factor's first microbatch sets it; later ones fold in as
 * F = decay F + (1 - decay) F_mb.  The work comes in items (one factor of
 * one layer for one microbatch), queued after the forward (A) or the
 * input-gradient backward (G) that produced what they read, and run first
 * in, first out while the rank waits for a message.  What the waits of a
 * step cannot absorb stays queued for later steps; a full queue drops its
 * oldest items (counted: the refresh they belonged to then averages fewer
 * microbatches).
 */
#ifndef TFX_KFAC_H
#define TFX_KFAC_H

typedef struct tfx_kfac_config {
    int enabled;          /* 0: no statistics, no hook runs (the default) */
    double decay;         /* weight of the old value in the running average,
                             in [0, 1) (default 0.95) */
    double sample;        /* fraction of a microbatch's rows used, in (0, 1] (default 1) */
    int queue;            /* most items a rank keeps pending; 0: four steps' worth */
    const char *log_path; /* JSON lines, one per rank per training step; NULL: none */
} tfx_kfac_config;

/* Defaults: disabled, decay 0.95, every row, queue 0 (four steps' items),
 * no log. */
void tfx_kfac_config_default(tfx_kfac_config *c);

#endif
