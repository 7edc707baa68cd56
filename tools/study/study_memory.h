/* study_memory.h - a transformer's bytes from its shape (docs/tf-study.md,
 * "Memory from the model's shape").
 *
 * Activation bytes follow the per-tensor count of Korthikanti et al.,
 * "Reducing Activation Recomputation in Large Transformer Models" (MLSys
 * 2023), section 4: per layer and microbatch sbh(34 + 5as/h) bytes at 2
 * bytes a value, sbh(10 + 24/t + 5as/(ht)) with tensor parallelism t and
 * sbh(34/t + 5as/(ht)) with sequence parallelism too.  The count is kept
 * tensor by tensor (study_memory.c), so that the same list also gives what
 * a frozen backward does not need (the inputs of GEMMs whose only use is
 * their weight gradient) and what a split backward keeps from I to W, and
 * so that a model without dropout, with grouped-query attention, a gated
 * FFN or flash attention changes only the tensors it changes.
 *
 * Every function is pure: it reads the shape and returns bytes.
 */
#ifndef TF_STUDY_MEMORY_H
#define TF_STUDY_MEMORY_H

/* What a forward keeps for its backward. */
typedef enum {
    TF_RECOMPUTE_NONE = 0,      /* everything */
    TF_RECOMPUTE_SELECTIVE = 1, /* not the attention scores (the s x s tensors) */
    TF_RECOMPUTE_FULL = 2,      /* only the layer's input; the backward re-runs the forward */
    TF_RECOMPUTE_AUTO = 3,      /* everything, and the planner may recompute (R actions) */
    TF_RECOMPUTE_MODES = 4
} tf_recompute;

/* The name of a mode ("none", "selective", "full", "auto"), and the mode
 * of a name: -1 when it is none of those. */
const char *tf_recompute_name(tf_recompute r);
int tf_recompute_parse(const char *name);

typedef struct tf_transformer_shape {
    double hidden;            /* h */
    double heads;             /* a: query heads */
    double kv_heads;          /* key/value heads (grouped-query attention); a for GPT */
    double sequence_length;   /* s */
    double microbatch_size;   /* b: sequences per microbatch */
    double ffn_hidden;        /* f: 4h for GPT */
    double vocab;             /* output-layer width; 0: no output layer bytes */
    double bytes_per_value;   /* 2 for bf16/fp16 */
    int tensor_parallel;      /* t >= 1 */
    int gated_ffn;            /* 1: SwiGLU, two FFN inputs (gate, up) of width f */
    int dropout;              /* 1: dropout after attention scores, attention, MLP, embedding */
    int flash_attention;      /* 1: no s x s tensors; keeps the output and the fp32 logsumexp */
} tf_transformer_shape;

/* One stage's bytes per microbatch, in the planner's terms (tf/memory.h). */
typedef struct tf_activation_bytes {
    double activation;        /* A: kept by the forward for the backward */
    double activation_frozen; /* A_f: the same when the backward is fully frozen */
    double weight_grad;       /* G: kept from the end of I to the end of W */
    double checkpoint;        /* C: what a recomputed forward keeps (its input) */
} tf_activation_bytes;

/* One transformer layer on one GPU of a tensor-parallel group, per
 * microbatch, with sequence parallelism (0 or 1) and recomputation r.
 * FULL keeps the checkpoint alone (A = A_f = C); AUTO counts as NONE (the
 * planner chooses what to recompute).  For a GPT-style shape
 * (kv_heads = heads, f = 4h, dropout, no gating, no flash attention, 2
 * bytes a value) A is exactly the paper's formula for that parallelism. */
void tf_transformer_layer_bytes(const tf_transformer_shape *m, int sequence_parallel,
                                tf_recompute r, tf_activation_bytes *out);

/* Full recomputation of a layer whose forward would keep b: only its
 * checkpoint stays, frozen or not (A = A_f = C; G unchanged, as the
 * recomputed forward rebuilds what W needs). */
void tf_activation_keep_checkpoint(tf_activation_bytes *b);

/* The first stage's extra activation: the embedding's dropout mask (0
 * without dropout). */
double tf_transformer_embedding_bytes(const tf_transformer_shape *m, int sequence_parallel);

/* The last stage's extra bytes: the final norm's input, the output
 * projection's input (needed only for its weight gradient) and the logits
 * the cross-entropy keeps in fp32, 4 s b vocab / t (vocab-parallel). */
void tf_transformer_head_bytes(const tf_transformer_shape *m, int sequence_parallel,
                               tf_activation_bytes *out);

/* The receive buffers a stage holds all step: one activation from the
 * previous stage and one gradient from the next, v s b h each (divided by
 * t under sequence parallelism). */
double tf_transformer_p2p_bytes(const tf_transformer_shape *m, int sequence_parallel);

/* Parameters of one layer on one GPU: attention (Q, K, V at kv_heads/heads
 * of Q's width, output) and FFN (2 or, gated, 3 matrices of h x f) divided
 * by t, plus the two norms' weights; biases are not counted. */
double tf_transformer_layer_parameters(const tf_transformer_shape *m);

/* Bytes per parameter of weights, gradients and optimizer state: Megatron's
 * 18 (bf16 weights, fp32 gradients, fp32 master weights and two fp32 Adam
 * moments), or with the distributed optimizer over data_parallel d ranks
 * 6 + 12/d (the fp32 copies sharded). */
double tf_bytes_per_parameter(int distributed_optimizer, int data_parallel);

#endif
