/* study_memory.c - a transformer's bytes from its shape, tensor by tensor
 * (Korthikanti et al. 2023, section 4; docs/tf-study.md). */
#include "study_memory.h"

#include <string.h>

static const char *const recompute_names[TF_RECOMPUTE_MODES] = {"none", "selective", "full",
                                                                "auto"};

const char *tf_recompute_name(tf_recompute r)
{
    return r >= 0 && r < TF_RECOMPUTE_MODES ? recompute_names[r] : "?";
}

int tf_recompute_parse(const char *name)
{
    for (int r = 0; r < TF_RECOMPUTE_MODES; r++)
        if (strcmp(name, recompute_names[r]) == 0)
            return r;
    return -1;
}

/* One saved tensor of a layer, on one GPU. */
typedef struct tensor {
    double bytes;
    int weight_only; /* a GEMM input only that GEMM's weight gradient reads */
    int scores;      /* s x s: what selective recomputation drops */
} tensor;

/* The share of a tensor one GPU holds: tensor-parallel tensors always
 * split t ways; the rest (norms, dropout masks, the inputs of the first
 * GEMM of each block) only under sequence parallelism. */
static double sharded(const tf_transformer_shape *m)
{
    return 1.0 / m->tensor_parallel;
}

static double replicated(const tf_transformer_shape *m, int sequence_parallel)
{
    return sequence_parallel ? 1.0 / m->tensor_parallel : 1.0;
}

static double sbh(const tf_transformer_shape *m)
{
    return m->sequence_length * m->microbatch_size * m->hidden;
}

/* The attention block's saved tensors (the paper's 11sbh + 5as^2b) into
 * out; returns how many. */
static int attention_tensors(const tf_transformer_shape *m, int sp, tensor *out)
{
    const double v = m->bytes_per_value, x = sbh(m), kv = m->kv_heads / m->heads;
    const double rep = replicated(m, sp), shard = sharded(m);
    const double scores = m->heads * m->sequence_length * m->sequence_length * m->microbatch_size;
    int n = 0;
    out[n++] = (tensor){v * x * rep, 0, 0};             /* norm input */
    out[n++] = (tensor){v * x * rep, 1, 0};             /* QKV GEMM input */
    out[n++] = (tensor){v * x * (1.0 + kv) * shard, 0, 0}; /* Q and K for QK^T */
    out[n++] = (tensor){v * x * kv * shard, 0, 0};      /* V for the scores times V */
    if (m->flash_attention) {
        /* The backward recomputes the scores from Q, K, V, the output and
         * the row-wise fp32 logsumexp. */
        out[n++] = (tensor){4.0 * scores / m->sequence_length * shard, 0, 0};
    } else {
        out[n++] = (tensor){v * scores * shard, 0, 1}; /* softmax output */
        if (m->dropout) {
            out[n++] = (tensor){scores * shard, 0, 1};     /* its dropout mask */
            out[n++] = (tensor){v * scores * shard, 0, 1}; /* its dropout output */
        }
    }
    /* The output projection's input is the attention's output, which a
     * flash backward reads too. */
    out[n++] = (tensor){v * x * shard, !m->flash_attention, 0};
    if (m->dropout)
        out[n++] = (tensor){x * rep, 0, 0}; /* dropout mask after the projection */
    return n;
}

/* The MLP block's saved tensors (the paper's 19sbh, plus 4sbh of norms
 * split between the blocks) into out; returns how many. */
static int mlp_tensors(const tf_transformer_shape *m, int sp, tensor *out)
{
    const double v = m->bytes_per_value, x = sbh(m);
    const double rep = replicated(m, sp), shard = sharded(m);
    const double xf = m->sequence_length * m->microbatch_size * m->ffn_hidden;
    int n = 0;
    out[n++] = (tensor){v * x * rep, 0, 0};                               /* norm input */
    out[n++] = (tensor){v * x * rep, 1, 0};                               /* FC1 input */
    out[n++] = (tensor){v * xf * (m->gated_ffn ? 2.0 : 1.0) * shard, 0, 0}; /* activation input */
    out[n++] = (tensor){v * xf * shard, 1, 0};                            /* FC2 input */
    if (m->dropout)
        out[n++] = (tensor){x * rep, 0, 0};
    return n;
}

/* The GEMM output gradients a split backward keeps from I to W: QKV's,
 * the attention projection's, FC1's (two when gated) and FC2's. */
static double gemm_output_grads(const tf_transformer_shape *m, int sp)
{
    const double v = m->bytes_per_value, x = sbh(m), kv = m->kv_heads / m->heads;
    const double rep = replicated(m, sp), shard = sharded(m);
    const double xf = m->sequence_length * m->microbatch_size * m->ffn_hidden;
    return v * x * (1.0 + 2.0 * kv) * shard + v * x * rep +
           v * xf * (m->gated_ffn ? 2.0 : 1.0) * shard + v * x * rep;
}

void tf_transformer_layer_bytes(const tf_transformer_shape *m, int sequence_parallel,
                                tf_recompute r, tf_activation_bytes *out)
{
    tensor t[16];
    int n = attention_tensors(m, sequence_parallel, t);
    n += mlp_tensors(m, sequence_parallel, t + n);
    double all = 0.0, weight_only = 0.0, scores = 0.0, gemm_inputs = 0.0;
    for (int i = 0; i < n; i++) {
        all += t[i].bytes;
        weight_only += t[i].weight_only ? t[i].bytes : 0.0;
        scores += t[i].scores ? t[i].bytes : 0.0;
    }
    /* W reads every GEMM's input, the flash output included. */
    gemm_inputs = weight_only + (m->flash_attention ? m->bytes_per_value * sbh(m) * sharded(m)
                                                    : 0.0);
    memset(out, 0, sizeof *out);
    out->checkpoint = m->bytes_per_value * sbh(m) * replicated(m, sequence_parallel);
    out->weight_grad = gemm_inputs + gemm_output_grads(m, sequence_parallel);
    if (r == TF_RECOMPUTE_FULL) {
        tf_activation_keep_checkpoint(out);
        return;
    }
    out->activation = all - (r == TF_RECOMPUTE_SELECTIVE ? scores : 0.0);
    out->activation_frozen = out->activation - weight_only;
}

void tf_activation_keep_checkpoint(tf_activation_bytes *b)
{
    b->activation = b->activation_frozen = b->checkpoint;
}

double tf_transformer_embedding_bytes(const tf_transformer_shape *m, int sequence_parallel)
{
    return m->dropout ? sbh(m) * replicated(m, sequence_parallel) : 0.0;
}

void tf_transformer_head_bytes(const tf_transformer_shape *m, int sequence_parallel,
                               tf_activation_bytes *out)
{
    const double v = m->bytes_per_value, x = sbh(m), rep = replicated(m, sequence_parallel);
    const double logits = m->sequence_length * m->microbatch_size * m->vocab * sharded(m);
    memset(out, 0, sizeof *out);
    out->activation = 2.0 * v * x * rep + 4.0 * logits;
    out->activation_frozen = out->activation - v * x * rep;
    /* W reads the projection's input and the logits' gradient. */
    out->weight_grad = v * x * rep + v * logits;
    out->checkpoint = out->activation;
}

double tf_transformer_p2p_bytes(const tf_transformer_shape *m, int sequence_parallel)
{
    return 2.0 * m->bytes_per_value * sbh(m) * replicated(m, sequence_parallel);
}

double tf_transformer_layer_parameters(const tf_transformer_shape *m)
{
    const double h = m->hidden, kv = m->kv_heads / m->heads;
    const double attention = h * h * (2.0 + 2.0 * kv);
    const double ffn = (m->gated_ffn ? 3.0 : 2.0) * h * m->ffn_hidden;
    return (attention + ffn) / m->tensor_parallel + 2.0 * h;
}

double tf_bytes_per_parameter(int distributed_optimizer, int data_parallel)
{
    return distributed_optimizer ? 6.0 + 12.0 / data_parallel : 18.0;
}
