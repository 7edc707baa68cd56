/* model.h - the byte-level GPT and its pipeline stages.
 *
 * Model (as nanoGPT and llm.c build GPT-2): token embedding (256 x C) plus a
 * learned position embedding (T x C), then L pre-norm blocks
 *     x = x + proj(attention(ln1(x)))      causal multi-head self-attention,
 *                                          one fused QKV Linear (C -> 3C)
 *     x = x + fc2(gelu(fc1(ln2(x))))       MLP, C -> F -> C
 * then a final LayerNorm, the head (C -> 256, no bias) and softmax
 * cross-entropy against the next byte.  Linear weights are stored as
 * PyTorch stores them, (out_features, in_features), so y = x W^T + b.
 *
 * Units: the embedding (token and position tables), each block, and the
 * final norm + head.  Stages hold contiguous units: the L blocks are split
 * as evenly as possible, the embedding joins stage 0 and the head the last
 * stage (so L >= stages).  Every parameter tensor is a freezing unit; a
 * stage's tensors are numbered in model order (first to last), which the
 * front-biased selection uses.
 *
 * Backward is split: `backward_input` computes the gradient of the stage
 * input (dX, including attention's backward, which has no weights) and keeps
 * what the weight gradients need; `backward_weight` computes the dW GEMMs
 * and the bias / norm-weight / embedding reductions of the tensors that are
 * not frozen.  A full backward (B) is the two in a row.
 */
#ifndef TFX_MODEL_H
#define TFX_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "tf/error.h"
#include "tfx/backend.h"

#define TFX_VOCAB 256

typedef struct tfx_model_config {
    int layers;          /* transformer blocks L */
    int hidden;          /* model width C */
    int heads;           /* attention heads; hidden must be a multiple */
    int ffn;             /* inner width F of each MLP (default 4C) */
    int context;         /* tokens per sequence T */
    int microbatch_size; /* sequences per microbatch */
} tfx_model_config;

/* Defaults sized for a 2-core machine: L=4, C=192, 6 heads, F=768, T=64,
 * 8 sequences per microbatch: GEMMs large enough for the CPU backend to
 * run at most of BLAS's speed, small enough for the closed loop profile ->
 * plan -> 60 training steps to take well under a minute on 2 cores. */
void tfx_model_config_default(tfx_model_config *c);

/* Heads of 32 for width `hidden` (GPT-2 small's are 64; this toolkit's
 * models are narrower): hidden / 32, or the largest divisor of hidden
 * below that when 32 does not divide it; at least 1. */
int tfx_model_default_heads(int hidden);

/* The MLP's inner width for width `hidden`: 4 x hidden, at most 65536 (the
 * largest size tfx_model_config_check accepts). */
int tfx_model_default_ffn(int hidden);

/* Checks ranges (each >= 1, sizes <= 65536, hidden a multiple of heads,
 * token count and attention buffers within int range).  Returns 0 or
 * TF_EINVAL naming the option and value. */
int tfx_model_config_check(const tfx_model_config *c, tf_error *err);

/* Tokens per microbatch: context * microbatch_size. */
int tfx_model_microbatch_tokens(const tfx_model_config *c);

typedef enum {
    TFX_TENSOR_EMBEDDING = 0, /* dW: scatter-add */
    TFX_TENSOR_GAIN = 1,      /* a LayerNorm's weight; dW: reduction */
    TFX_TENSOR_WEIGHT = 2,    /* a Linear's weight; dW: GEMM */
    TFX_TENSOR_BIAS = 3       /* a LayerNorm's or Linear's bias; dW: reduction */
} tfx_tensor_kind;

typedef struct tfx_tensor_info {
    char name[48];        /* "block2.attn.qkv.weight" */
    tfx_tensor_kind kind;
    int rows, cols;       /* (out, in) for weights; rows = 1 for gains and biases */
    size_t count;         /* rows * cols */
    int unit;             /* 0 embedding, 1..L blocks, L+1 final */
    int stage;            /* hosting stage */
    int index_in_stage;   /* 0 .. stage's tensor count - 1 */
} tfx_tensor_info;

/* Tensors per block, in model order. */
#define TFX_BLOCK_TENSORS 12

typedef struct tfx_model_layout {
    tfx_model_config config;
    int stages;
    int n_units;              /* L + 2 */
    int n_tensors;            /* 2 + 12 L + 3 */
    tfx_tensor_info *tensors; /* n_tensors, model order */
    int *stage_first_unit;    /* stages + 1 */
    int *stage_first_tensor;  /* stages + 1 */
} tfx_model_layout;

/* Builds the tensor table and the partition into `stages` stages.
 * Returns 0, TF_EINVAL when the configuration is bad or layers < stages
 * (naming both), or TF_ENOMEM.  Free with tfx_model_layout_free. */
int tfx_model_layout_build(const tfx_model_config *c, int stages, tfx_model_layout *out,
                           tf_error *err);
void tfx_model_layout_free(tfx_model_layout *l);

/* Blocks hosted by stage `stage` (< 0: all). */
int tfx_model_stage_blocks(const tfx_model_layout *l, int stage);

/* Parameters of one stage (stage >= 0) or of the whole model (stage < 0). */
double tfx_model_parameter_count(const tfx_model_layout *l, int stage);

/* Writes the initial values of global tensor `tensor` (count floats) to
 * host_out, as nanoGPT initialises GPT-2: Linear weights and embeddings
 * N(0, 0.02), the residual projections (attn.proj, mlp.fc2) N(0, 0.02 /
 * sqrt(2L)), LayerNorm weights 1 and biases 0; but Linear biases as
 * PyTorch's nn.Linear, U(-1/sqrt(in), 1/sqrt(in)) (model.c says why).  Depends only on (seed,
 * tensor), never on the partition, so every pipeline shape starts from the
 * same model. */
void tfx_model_init_tensor(const tfx_model_layout *l, int tensor, uint64_t seed,
                           float *host_out);

/* What one block's forward keeps for its backward (one microbatch; N
 * tokens, C wide, F the MLP width, B sequences of T tokens, h heads). */
typedef struct tfx_block_acts {
    float *ln1, *mean1, *rstd1; /* ln1 output (N x C) and its row statistics (N) */
    float *qkv;                 /* N x 3C */
    float *probs;               /* attention weights, B x h x T x T */
    float *att;                 /* attention output before proj (N x C) */
    float *mid;                 /* residual stream after attention (N x C) */
    float *ln2, *mean2, *rstd2;
    float *fc1, *gelu, *gelu_aux; /* N x F each; aux keeps gelu's tanh term */
} tfx_block_acts;

/* Buffers one microbatch's forward pass leaves for the backward pass. */
typedef struct tfx_activation_slot {
    int32_t *tokens;   /* N, stage 0 */
    int32_t *targets;  /* N, last stage */
    float **xs;        /* n_blocks + 1 residual streams (N x C): xs[0] input */
    tfx_block_acts *blk; /* n_blocks */
    float *lnf, *mean_f, *rstd_f; /* final norm, last stage */
    float *dlogits;    /* last stage: N x V, logits then their gradient */
    double loss_sum;   /* last stage: summed token losses of the microbatch */
    unsigned char *held; /* which of the microbatch's buffers the stage allocated
                            (model.c's table order) */
    int recompute_pending; /* its first blocks whose forward kept only their input,
                              not yet re-run */
    int recompute_attention; /* every block's attention weights not kept, not yet
                                re-run */
} tfx_activation_slot;

/* Gradients one block's backward_input leaves for backward_weight. */
typedef struct tfx_block_grads {
    float *dmid;       /* of the residual stream after attention = of proj's output */
    float *dln2;       /* of ln2's output (N x C) */
    float *dfc1;       /* of fc1's output (N x F) */
    float *dqkv;       /* of the QKV Linear's output (N x 3C) */
    float *dln1;       /* of ln1's output (N x C) */
} tfx_block_grads;

/* Gradients backward_input leaves for backward_weight. */
typedef struct tfx_gradient_slot {
    float **gs;        /* n_blocks + 1: gradient of xs[k] */
    tfx_block_grads *blk; /* n_blocks */
    float *dlnf;       /* last stage: gradient of the final norm's output */
} tfx_gradient_slot;

/* Counters of the weight-gradient work actually executed. */
typedef struct tfx_dw_counts {
    long gemms;        /* dW GEMMs (WEIGHT tensors) */
    long reductions;   /* bias / gain reductions and embedding scatter-adds */
    long skipped;      /* tensor dW computations skipped because frozen */
} tfx_dw_counts;

/* tfx_stage_hold's `recompute` for recomputing only attention's weights. */
#define TFX_RECOMPUTE_ATTENTION (-1)

/* Bytes a rank holds for its backwards (every stage of the rank adds its
 * microbatch buffers as it allocates them and takes them off as it frees
 * them): held now, and the most held since peak was last set.  One rank's
 * stages run on one thread, so a meter needs no lock. */
typedef struct tfx_mem_meter {
    long long held, peak;
} tfx_mem_meter;

/* The passes of a microbatch through a stage: forward, full backward,
 * backward for the input (dX) and for the weights (dW). */
typedef enum {
    TFX_PASS_F = 0, TFX_PASS_B = 1, TFX_PASS_I = 2, TFX_PASS_W = 3,
    TFX_PASS_R = 4 /* recomputation: the forward of the blocks a forward did not keep */
} tfx_pass;

typedef struct tfx_stage {
    const tfx_model_layout *layout;
    int stage;
    tfx_backend be;
    int has_embedding, has_head;
    int first_block, n_blocks;  /* global block index of the first block */
    int first_tensor, n_tensors;
    int tokens;                 /* N per microbatch */
    float **param, **grad, **adam_m, **adam_v; /* n_tensors device buffers */
    long *adam_t;               /* optimizer steps taken per tensor */
    int microbatches;
    tfx_activation_slot *act;   /* microbatches */
    int n_grad_slots;           /* microbatches if backward is split, else 0 */
    tfx_gradient_slot *gslot;   /* n_grad_slots: what each I leaves for its W */
    tfx_gradient_slot work;     /* the gradients a backward works in when no slot of
                                   its own keeps them */
    tfx_activation_slot spare;  /* one block's dW-only inputs, tokens, targets, final
                                   norm: written by forwards that do not keep them */
    float *spare_out;           /* N x C: the output of a stage that sends it */
    int lazy;                   /* microbatch buffers held from hold to release */
    int can_recompute;          /* recompute_acts exists */
    tfx_block_acts recompute_acts; /* one block's buffers: where a recomputed block's
                                      forward writes them */
    tfx_mem_meter *meter;       /* the rank's, or NULL */
    long long held_bytes;       /* microbatch buffers this stage holds now */
    long long static_bytes;     /* everything else it holds, all the time */
    struct tfx_mb_buf *buf_table; /* model.c's scratch: one microbatch's buffer table */
    int32_t *positions;         /* N: position of each token in its sequence */
    float *scratch;             /* N x C: position rows, attention's output gradient */
    float *att_scratch;         /* B x h x T x T: attention's backward */
    tfx_dw_counts counts;
    double flops;               /* GEMM-equivalent FLOPs run since the last reset
                                   (the runtime zeroes it with counts) */
} tfx_stage;

/* Which stage to create, where, and for how many microbatches. */
typedef struct tfx_stage_spec {
    const tfx_model_layout *layout; /* must outlive the stage */
    int stage;                      /* of layout */
    tfx_backend backend;            /* used, not owned */
    int microbatches;               /* in flight at once: one activation slot each */
    int split_backward;             /* 1: a gradient slot per microbatch, for deferred W */
    uint64_t seed;                  /* of the initial parameters */
    int lazy;                       /* 0: every microbatch buffer held from creation on;
                                       1: only from tfx_stage_hold to tfx_stage_release */
    tfx_mem_meter *meter;           /* counts the microbatch buffers (NULL: none) */
    int recompute;                  /* 1: forwards may keep only their blocks' inputs
                                       (one block's buffers more, static) */
} tfx_stage_spec;

/* Allocates the stage spec describes: its parameters (initialised from
 * the seed), optimizer state and buffers (of a lazy stage, not yet those
 * of its microbatches).  Returns 0 or TF_ENOMEM; on
 * error everything is released. */
int tfx_stage_create(const tfx_stage_spec *spec, tfx_stage *out, tf_error *err);
void tfx_stage_destroy(tfx_stage *s);

/* A lazy stage's microbatch buffers (no-ops for one that is not).
 *
 * tfx_stage_hold, before pass F of microbatch mb (and before its receive),
 * allocates what that forward keeps for the backward; before pass B or I,
 * with split backward, the gradients the W will read.  A buffer that only
 * the dW of a tensor frozen in `frozen` (the microbatch's mask over the
 * stage's tensors, NULL: none frozen) would read is not kept: the pass
 * writes it in a stage buffer instead.  The same mask must be given to the
 * microbatch's every hold and release, and may freeze only tensors whose
 * dW its backward_weight skips (NULL is always safe).  Returns 0 or TF_ENOMEM (what was held stays held
 * until released).
 *
 * Recomputation: with `recompute` = c > 0 at pass F (on a stage created
 * with spec.recompute; the count is capped at its blocks), the forward of
 * its first c blocks keeps only each block's input (the checkpoint); with
 * c = TFX_RECOMPUTE_ATTENTION ("selective") every block keeps all but its
 * attention weights (B h T^2, the largest), which attention's forward
 * re-makes from the QKV kept.  Pass R then holds those buffers as the
 * forward would have, and tfx_stage_recompute fills them.  `recompute` is ignored at other passes.
 *
 * tfx_stage_release, after the pass (and its send), frees what nothing
 * later reads: after B and W everything of mb, after I all but what the
 * dW of an unfrozen tensor reads; after F and R nothing. */
int tfx_stage_hold(tfx_stage *s, int mb, tfx_pass pass, const unsigned char *frozen,
                   int recompute, tf_error *err);
void tfx_stage_release(tfx_stage *s, int mb, tfx_pass pass, const unsigned char *frozen);

/* What one microbatch of lazy stage s holds under mask `frozen` (the
 * stage's tensors; NULL: none frozen), recomputation aside, counted from
 * the table tfx_stage_hold and tfx_stage_release follow: kept after its
 * forward, added at the start of its I, and kept after its I for its W
 * (the last two 0 when the backward is not split).  The profile's
 * activation_bytes, backward_input_transient_bytes and weight_grad_bytes
 * are these with nothing frozen; activation_frozen_bytes the first with
 * everything frozen. */
typedef struct tfx_mask_bytes {
    double forward, input_rise, input_kept;
} tfx_mask_bytes;
tfx_mask_bytes tfx_stage_mask_bytes(tfx_stage *s, const unsigned char *frozen);

/* Boundary buffers (device memory, N x C): where a received activation goes
 * (stages > 0), the activation to send (all but the last), where a received
 * gradient goes (all but the last), and the input gradient to send
 * (stages > 0).  On a lazy stage, valid from the hold of the pass that
 * receives (F, or B / I) or sends them until its release. */
float *tfx_stage_input(tfx_stage *s, int mb);
const float *tfx_stage_output(const tfx_stage *s, int mb);
float *tfx_stage_grad_in(tfx_stage *s, int mb);
const float *tfx_stage_grad_out(const tfx_stage *s, int mb);

/* The gradient buffers microbatch mb's backward works in: its own slot on a
 * split stage, else the stage's one work slot (shared by all). */
const tfx_gradient_slot *tfx_stage_gradient_slot(const tfx_stage *s, int mb);
size_t tfx_stage_boundary_bytes(const tfx_stage *s);

/* Forward of microbatch mb.  host_tokens (stage 0) and host_targets (last
 * stage) hold N int32 each (NULL otherwise).  The last stage computes the
 * loss and keeps dlogits scaled by loss_scale.  Returns 0 or an error from
 * the backend. */
int tfx_stage_forward(tfx_stage *s, int mb, const int32_t *host_tokens,
                      const int32_t *host_targets, float loss_scale, tf_error *err);

/* Re-runs the forward of the blocks microbatch mb's forward did not keep
 * (after tfx_stage_hold of pass R), with the same kernels on the same
 * inputs: the buffers get the values the forward computed, bit for bit.
 * Nothing to do (0) when none is pending.  Returns 0 or the backend's
 * error. */
int tfx_stage_recompute(tfx_stage *s, int mb, tf_error *err);

/* Whether microbatch mb still has blocks to recompute before its backward. */
static inline int tfx_stage_recompute_pending(const tfx_stage *s, int mb)
{
    return s->act[mb].recompute_pending > 0 || s->act[mb].recompute_attention;
}

/* dX of microbatch mb (after its gradient was received); fills the gradient
 * slot that backward_weight reads. */
int tfx_stage_backward_input(tfx_stage *s, int mb, tf_error *err);

/* dW of microbatch mb: accumulates the gradient of every tensor whose
 * frozen[i] (i < n_tensors, NULL = none frozen) is 0 and skips the rest. */
int tfx_stage_backward_weight(tfx_stage *s, int mb, const unsigned char *frozen,
                              tf_error *err);

/* Zeroes the accumulated gradients. */
void tfx_stage_zero_grads(tfx_stage *s);

typedef struct tfx_adamw_config {
    float lr, beta1, beta2, eps, weight_decay;
} tfx_adamw_config;

/* Defaults: lr 3e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.01 (applied
 * to weight matrices and the embedding, not to gains and biases). */
void tfx_adamw_config_default(tfx_adamw_config *c);

/* Applies AdamW to every tensor with update[i] != 0 (i < n_tensors); the
 * others keep their values and optimizer state. */
void tfx_stage_optimizer_step(tfx_stage *s, const unsigned char *update,
                              const tfx_adamw_config *c);

#endif
