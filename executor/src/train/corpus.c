/* corpus.c - the built-in Markov corpus, file corpora, batches. */
#include "tfx/corpus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tf/util.h"
#include "tfx/rng.h"

#define ALPHABET 64          /* bytes 32 .. 95 */
#define SUCCESSORS 8
#define CORPUS_SEED 0xC0FFEE2026ull

/* The source's transition matrix (ALPHABET x ALPHABET): each state gets
 * SUCCESSORS distinct successors with weights exp(N(0,1)). */
static void builtin_transitions(double *P)
{
    tfx_rng r = tfx_rng_for(CORPUS_SEED, 1, 0, 0);
    memset(P, 0, sizeof(double) * ALPHABET * ALPHABET);
    for (int i = 0; i < ALPHABET; i++) {
        double *row = P + (size_t)i * ALPHABET, sum = 0.0;
        for (int j = 0; j < SUCCESSORS; j++) {
            int to;
            do
                to = (int)(tfx_rng_next(&r) % ALPHABET);
            while (row[to] > 0.0);
            row[to] = exp(tfx_rng_normal(&r));
            sum += row[to];
        }
        for (int j = 0; j < ALPHABET; j++)
            row[j] /= sum;
    }
}

double tfx_markov_entropy_rate(const double *P, int n)
{
    double *pi = malloc(sizeof(double) * (size_t)n), *next = malloc(sizeof(double) * (size_t)n);
    if (!pi || !next) {
        free(pi);
        free(next);
        return -1.0;
    }
    for (int i = 0; i < n; i++)
        pi[i] = 1.0 / n;
    /* Power iteration on the lazy chain (P + I) / 2: same stationary
     * distribution, but aperiodic, so it converges even where P cycles. */
    for (int it = 0; it < 100000; it++) {
        for (int j = 0; j < n; j++)
            next[j] = 0.5 * pi[j];
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                next[j] += 0.5 * pi[i] * P[(size_t)i * n + j];
        double change = 0.0;
        for (int j = 0; j < n; j++)
            change += fabs(next[j] - pi[j]);
        memcpy(pi, next, sizeof(double) * (size_t)n);
        if (change < 1e-15)
            break;
    }
    double h = 0.0;
    for (int i = 0; i < n; i++) {
        double hi = 0.0;
        for (int j = 0; j < n; j++) {
            double q = P[(size_t)i * n + j];
            if (q > 0.0)
                hi -= q * log(q);
        }
        h += pi[i] * hi;
    }
    free(pi);
    free(next);
    return h;
}

int tfx_corpus_builtin(size_t len, tfx_corpus *out, tf_error *err)
{
    int rc = 0;
    double *P = NULL;
    memset(out, 0, sizeof *out);
    if (len < 2)
        len = 2;
    TFX_CALLOC(P, ALPHABET * ALPHABET);
    TFX_CALLOC(out->bytes, len);
    builtin_transitions(P);
    tfx_rng r = tfx_rng_for(CORPUS_SEED, 2, 0, 0);
    int state = 0;
    for (size_t i = 0; i < len; i++) {
        out->bytes[i] = (unsigned char)(32 + state);
        double u = tfx_rng_uniform(&r), acc = 0.0;
        const double *row = P + (size_t)state * ALPHABET;
        int to = -1;
        for (int j = 0; j < ALPHABET; j++) {
            if (row[j] <= 0.0)
                continue;
            to = j; /* the last successor absorbs rounding */
            acc += row[j];
            if (u < acc)
                break;
        }
        state = to;
    }
    out->len = len;
    out->entropy_floor = tfx_markov_entropy_rate(P, ALPHABET);
    snprintf(out->source, sizeof out->source,
             "built-in order-1 Markov source (%d symbols, %d successors each, %zu bytes, "
             "entropy %.4f nats/byte)",
             ALPHABET, SUCCESSORS, len, out->entropy_floor);
    free(P);
    return 0;
fail:
    free(P);
    tfx_corpus_free(out);
    return rc;
}

int tfx_corpus_load(const char *path, size_t min_len, tfx_corpus *out, tf_error *err)
{
    char *data = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    int rc = tf_read_file(path, &data, &len, err);
    if (rc < 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return tf_fail(err, rc, "--data %s: cannot read the data file (%s)", path, msg);
    }
    if (len < min_len) {
        free(data);
        return tf_fail(err, TF_EINVAL,
                       "--data %s: the file has %zu bytes, fewer than the %zu one training "
                       "sequence needs (--context + 1)",
                       path, len, min_len);
    }
    out->bytes = (unsigned char *)data;
    out->len = len;
    out->entropy_floor = -1.0;
    snprintf(out->source, sizeof out->source, "%s (%zu bytes)", path, len);
    return 0;
}

void tfx_corpus_free(tfx_corpus *c)
{
    free(c->bytes);
    memset(c, 0, sizeof *c);
}

void tfx_corpus_batch(const tfx_corpus *c, uint64_t seed, long step, int microbatches,
                      int seqs, int context, int32_t *inputs, int32_t *targets)
{
    const size_t positions = c->len - (size_t)context; /* windows of context + 1 */
    for (int m = 0; m < microbatches; m++) {
        for (int q = 0; q < seqs; q++) {
            tfx_rng r = tfx_rng_for(seed, 0xDA7A, (uint64_t)step, ((uint64_t)m << 32) | (uint32_t)q);
            size_t start = (size_t)(tfx_rng_next(&r) % positions);
            size_t base = ((size_t)m * seqs + q) * (size_t)context;
            for (int t = 0; t < context; t++) {
                inputs[base + t] = c->bytes[start + t];
                targets[base + t] = c->bytes[start + t + 1];
            }
        }
    }
}
