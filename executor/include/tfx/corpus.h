/* corpus.h - training data: the built-in sources or any file, split into
 * training and validation bytes.
 *
 * The built-in sources are seeded order-2 Markov chains over 16 printable
 * bytes ("etaoinshrdlcu .,"): the next byte depends on the two before it.
 * Each pair of bytes has two likely successors (weights exp(N(0,1))), and
 * with probability 1/64 any of the 16 bytes follows, which keeps the chain
 * irreducible and aperiodic.  (With 32 bytes, 1,024 pairs, the default
 * model needed several times more steps to find the pairs, too many for
 * the tests and the accuracy study on 2 cores.)  Two figures are known exactly
 * from the chain's stationary distribution:
 *   entropy floor  H(X_t+1 | X_t, X_t-1), the lowest expected loss of any
 *                  next-byte model;
 *   best bigram    H(X_t+1 | X_t), the lowest expected loss of any model that
 *                  sees only the current byte (order 1).
 * A loss between them shows that the model uses more than the current byte,
 * which an attention-free model cannot.  Nothing is downloaded.
 *
 * "base" is the source to pretrain on; "shifted" is the same chain with a
 * quarter of its pairs given new successors (a domain shift): fine-tuning a
 * model trained on "base" to "shifted" keeps most of what it learnt.
 *
 * Files: the last 5% of the bytes (at least one sequence) are held out for
 * validation and never trained on; the best bigram is the empirical order-1
 * conditional entropy of the training bytes, and the floor is unknown.
 */
#ifndef TFX_CORPUS_H
#define TFX_CORPUS_H

#include <stddef.h>
#include <stdint.h>
#include "tf/error.h"

typedef struct tfx_corpus {
    unsigned char *bytes;
    size_t len;
    size_t train_len;      /* bytes [0, train_len) train, [train_len, len) validate */
    double entropy_floor;  /* nats per byte; -1 when unknown (files) */
    double best_bigram;    /* nats per byte: exact (built-in) or empirical (files) */
    char source[512];      /* "built-in source base ..." or the path */
} tfx_corpus;

/* Whether name is a built-in source, "base" or "shifted": 1 or 0. */
int tfx_corpus_is_source(const char *name);

/* Generates `len` bytes of the built-in source `name` ("base" or "shifted")
 * for sequences of `context` tokens.  Returns 0, TF_EINVAL naming --source
 * and the value when the name is unknown or len is too small for a training
 * and a validation sequence, or TF_ENOMEM; free with tfx_corpus_free. */
int tfx_corpus_builtin(const char *name, size_t len, int context, tfx_corpus *out,
                       tf_error *err);

/* The largest --data file: the corpus is held in memory whole, and a CPU
 * run trains on far less (1 GiB admits enwik9-sized text). */
#define TFX_MAX_DATA_BYTES ((size_t)1 << 30)

/* Reads a file as the corpus.  Returns 0, or TF_EIO naming the path when it
 * cannot be read, or TF_EINVAL when it is larger than TFX_MAX_DATA_BYTES
 * (a regular file is refused unread; /dev/zero is read to one byte past
 * the limit) or its training or validation
 * part would be shorter than one sequence of `context` + 1 bytes (the
 * message names the path, its size and the minimum). */
int tfx_corpus_load(const char *path, int context, tfx_corpus *out, tf_error *err);

void tfx_corpus_free(tfx_corpus *c);

/* Entropy floor and best bigram, in nats, of the order-2 Markov chain over n
 * symbols with transition table P (n*n rows of n: row a*n+b is the
 * distribution of the byte after "ab").  Stationary distribution by power
 * iteration on the lazy chain from the uniform start.  Returns 0, or
 * TF_ENOMEM. */
int tfx_markov2_rates(const double *P, int n, double *floor, double *bigram, tf_error *err);

/* Order-1 conditional entropy H(X_t+1 | X_t) in nats of bytes[0, len), from
 * the pair counts (the plug-in estimate).  0 for len < 2. */
double tfx_bigram_entropy(const unsigned char *bytes, size_t len);

/* Where a batch goes: microbatches x seqs windows of context tokens,
 * microbatch-major.  inputs and targets are the caller's, microbatches *
 * seqs * context int32 values each. */
typedef struct tfx_batch {
    int microbatches, seqs, context;
    int32_t *inputs, *targets;
} tfx_batch;

/* Fills one training batch b: for microbatch m and sequence q, a window of
 * context + 1 training bytes starting at a position drawn from (seed, step,
 * m, q); inputs get the first context bytes, targets the next ones. */
void tfx_corpus_batch(const tfx_corpus *c, uint64_t seed, long step, const tfx_batch *b);

/* Fills validation batch `index` (0, 1, ... batches - 1) the same way from
 * windows spread evenly over the validation bytes: the same index always
 * gives the same windows, so every evaluation of a run sees the same data. */
void tfx_corpus_validation_batch(const tfx_corpus *c, int index, int batches,
                                 const tfx_batch *b);

#endif
