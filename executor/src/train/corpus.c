/* corpus.c - the built-in order-2 sources, file corpora, batches. */
#include "tfx/corpus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tf/util.h"
#include "tfx/rng.h"

#define SYMBOLS 16          /* see corpus.h for why not 32 */
#define LIKELY_SUCCESSORS 2
#define NOISE (1.0 / 64)         /* probability that any symbol follows */
#define SHIFTED_SHARE 0.25       /* pairs the shifted source gives new successors */
#define SOURCE_SEED 0xC0FFEE2026ull

/* The parts of a built-in source, each its own stream (the first
 * coordinate of TFX_RNG_SOURCE; the second is the source). */
enum { PART_TABLE = 1, PART_TEXT = 2, PART_SHIFT = 3 };

static const char ALPHABET[SYMBOLS + 1] = "etaoinshrdlcu .,";

/* One row of the transition table: LIKELY_SUCCESSORS distinct successors
 * with weights exp(N(0,1)) sharing 1 - NOISE, and NOISE spread evenly. */
static void draw_row(tfx_rng *r, double *row)
{
    double w[LIKELY_SUCCESSORS], sum = 0.0;
    int to[LIKELY_SUCCESSORS];
    for (int j = 0; j < LIKELY_SUCCESSORS; j++) {
        int fresh;
        do {
            to[j] = (int)tfx_rng_below(r, SYMBOLS);
            fresh = 1;
            for (int i = 0; i < j; i++)
                fresh &= to[i] != to[j];
        } while (!fresh);
        w[j] = exp(tfx_rng_normal(r));
        sum += w[j];
    }
    for (int j = 0; j < SYMBOLS; j++)
        row[j] = NOISE / SYMBOLS;
    for (int j = 0; j < LIKELY_SUCCESSORS; j++)
        row[to[j]] += (1.0 - NOISE) * w[j] / sum;
}

/* The table of source `shifted` (0 base, 1 shifted): SYMBOLS^2 rows. */
static void source_table(int shifted, double *P)
{
    tfx_rng base = tfx_rng_for(SOURCE_SEED, TFX_RNG_SOURCE, PART_TABLE, 0, 0);
    tfx_rng shift = tfx_rng_for(SOURCE_SEED, TFX_RNG_SOURCE, PART_SHIFT, 0, 0);
    for (int pair = 0; pair < SYMBOLS * SYMBOLS; pair++) {
        double *row = P + (size_t)pair * SYMBOLS;
        draw_row(&base, row);
        /* The shift stream advances the same way for both sources, so the
         * shifted pairs are the same set whichever source is built. */
        double u = tfx_rng_uniform(&shift);
        double fresh[SYMBOLS];
        draw_row(&shift, fresh);
        if (shifted && u < SHIFTED_SHARE)
            memcpy(row, fresh, sizeof fresh);
    }
}

int tfx_markov2_rates(const double *P, int n, double *floor, double *bigram, tf_error *err)
{
    int rc = 0;
    const size_t states = (size_t)n * n;
    double *pi = NULL, *next = NULL, *joint = NULL;
    TFX_CALLOC(pi, states);
    TFX_CALLOC(next, states);
    TFX_CALLOC(joint, states);
    for (size_t s = 0; s < states; s++)
        pi[s] = 1.0 / (double)states;
    /* State "ab" moves to "bc" with probability P[ab][c].  The lazy chain
     * (P + I) / 2 has the same stationary distribution and converges even
     * where P is periodic. */
    for (int it = 0; it < 200000; it++) {
        for (size_t s = 0; s < states; s++)
            next[s] = 0.5 * pi[s];
        for (size_t s = 0; s < states; s++) {
            const double *row = P + s * (size_t)n;
            double *to = next + (s % (size_t)n) * (size_t)n;
            for (int c = 0; c < n; c++)
                to[c] += 0.5 * pi[s] * row[c];
        }
        double change = 0.0;
        for (size_t s = 0; s < states; s++)
            change += fabs(next[s] - pi[s]);
        memcpy(pi, next, states * sizeof *pi);
        if (change < 1e-15)
            break;
    }
    /* floor = sum_ab pi(ab) H(P[ab]); the bigram uses the joint of (b, c). */
    double h2 = 0.0;
    for (size_t s = 0; s < states; s++) {
        const double *row = P + s * (size_t)n;
        for (int c = 0; c < n; c++) {
            if (row[c] > 0.0)
                h2 -= pi[s] * row[c] * log(row[c]);
            joint[(s % (size_t)n) * (size_t)n + (size_t)c] += pi[s] * row[c];
        }
    }
    double h1 = 0.0;
    for (int b = 0; b < n; b++) {
        double marginal = 0.0;
        for (int c = 0; c < n; c++)
            marginal += joint[(size_t)b * n + c];
        for (int c = 0; c < n; c++) {
            double q = joint[(size_t)b * n + c];
            if (q > 0.0)
                h1 -= q * log(q / marginal);
        }
    }
    *floor = h2;
    *bigram = h1;
fail:
    free(pi);
    free(next);
    free(joint);
    return rc;
}

double tfx_bigram_entropy(const unsigned char *bytes, size_t len)
{
    if (len < 2)
        return 0.0;
    static const size_t V = 256;
    double *count = calloc(V * V, sizeof *count), *row = calloc(V, sizeof *row);
    if (!count || !row) {
        free(count);
        free(row);
        return -1.0;
    }
    for (size_t i = 0; i + 1 < len; i++) {
        count[(size_t)bytes[i] * V + bytes[i + 1]] += 1.0;
        row[bytes[i]] += 1.0;
    }
    double h = 0.0;
    for (size_t a = 0; a < V; a++)
        for (size_t b = 0; b < V; b++) {
            double k = count[a * V + b];
            if (k > 0.0)
                h -= k * log(k / row[a]);
        }
    free(count);
    free(row);
    return h / (double)(len - 1);
}

/* Draws the next symbol from a row by inversion; the last symbol with
 * weight absorbs rounding. */
static int draw_symbol(const double *row, double u)
{
    double acc = 0.0;
    int last = 0;
    for (int c = 0; c < SYMBOLS; c++) {
        if (row[c] <= 0.0)
            continue;
        last = c;
        acc += row[c];
        if (u < acc)
            break;
    }
    return last;
}

/* The validation part of `len` bytes: 5%, but at least one sequence. */
static size_t validation_bytes(size_t len, int context)
{
    size_t v = len / 20, min = (size_t)context + 1;
    return v < min ? min : v;
}

/* The built-in sources; a source's index is whether it is shifted. */
static const char *const source_names[] = {"base", "shifted"};

static int source_index(const char *name)
{
    for (int i = 0; name && i < (int)(sizeof source_names / sizeof *source_names); i++)
        if (strcmp(name, source_names[i]) == 0)
            return i;
    return -1;
}

int tfx_corpus_is_source(const char *name)
{
    return source_index(name) >= 0;
}

int tfx_corpus_builtin(const char *name, size_t len, int context, tfx_corpus *out,
                       tf_error *err)
{
    int rc = 0;
    double *P = NULL;
    memset(out, 0, sizeof *out);
    int shifted = source_index(name);
    if (shifted < 0)
        return tf_fail(err, TF_EINVAL, "--source \"%s\": unknown built-in source (known: base, "
                       "shifted)", name ? name : "(null)");
    if (len < 4 * ((size_t)context + 1))
        return tf_fail(err, TF_EINVAL, "--source %s: %zu bytes are too few for sequences of "
                       "%d tokens", name, len, context);
    TFX_CALLOC(P, (size_t)SYMBOLS * SYMBOLS * SYMBOLS);
    TFX_CALLOC(out->bytes, len);
    source_table(shifted, P);
    tfx_rng r = tfx_rng_for(SOURCE_SEED, TFX_RNG_SOURCE, PART_TEXT, (uint64_t)shifted, 0);
    int a = 0, b = 0;
    for (size_t i = 0; i < len; i++) {
        int c = draw_symbol(P + ((size_t)a * SYMBOLS + b) * SYMBOLS, tfx_rng_uniform(&r));
        out->bytes[i] = (unsigned char)ALPHABET[c];
        a = b;
        b = c;
    }
    out->len = len;
    out->train_len = len - validation_bytes(len, context);
    TFX_TRY(tfx_markov2_rates(P, SYMBOLS, &out->entropy_floor, &out->best_bigram, err));
    snprintf(out->source, sizeof out->source,
             "built-in source %s (order-2 Markov, %d symbols, %zu bytes, %zu held out)", name,
             SYMBOLS, len, len - out->train_len);
    free(P);
    return 0;
fail:
    free(P);
    tfx_corpus_free(out);
    return rc;
}

int tfx_corpus_load(const char *path, int context, tfx_corpus *out, tf_error *err)
{
    char *data = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    int rc = tf_read_file_limit(path, TFX_MAX_DATA_BYTES, &data, &len, err);
    if (rc < 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return tf_fail(err, rc, "--data %s: cannot read the data file (%s)", path, msg);
    }
    size_t seq = (size_t)context + 1;
    if (len < 2 * seq || len - validation_bytes(len, context) < seq) {
        free(data);
        return tf_fail(err, TF_EINVAL,
                       "--data %s: the file has %zu bytes, fewer than the %zu that one "
                       "training and one validation sequence need (2 x (--context + 1))",
                       path, len, 2 * seq);
    }
    out->bytes = (unsigned char *)data;
    out->len = len;
    out->train_len = len - validation_bytes(len, context);
    out->entropy_floor = -1.0;
    out->best_bigram = tfx_bigram_entropy(out->bytes, out->train_len);
    snprintf(out->source, sizeof out->source, "%s (%zu bytes, %zu held out)", path, len,
             len - out->train_len);
    return 0;
}

void tfx_corpus_free(tfx_corpus *c)
{
    free(c->bytes);
    memset(c, 0, sizeof *c);
}

/* Copies the window at `start` into row `row` of b. */
static void put_window(const tfx_corpus *c, size_t start, size_t row, const tfx_batch *b)
{
    size_t base = row * (size_t)b->context;
    for (int t = 0; t < b->context; t++) {
        b->inputs[base + t] = c->bytes[start + t];
        b->targets[base + t] = c->bytes[start + t + 1];
    }
}

void tfx_corpus_batch(const tfx_corpus *c, uint64_t seed, long step, const tfx_batch *b)
{
    /* Windows of context + 1 bytes that lie inside the training part. */
    const size_t positions = c->train_len - (size_t)b->context;
    for (int m = 0; m < b->microbatches; m++)
        for (int q = 0; q < b->seqs; q++) {
            tfx_rng r = tfx_rng_for(seed, TFX_RNG_DATA, (uint64_t)step, (uint64_t)m,
                                    (uint64_t)q);
            put_window(c, (size_t)tfx_rng_below(&r, positions), (size_t)m * b->seqs + q, b);
        }
}

void tfx_corpus_validation_batch(const tfx_corpus *c, int index, int batches,
                                 const tfx_batch *b)
{
    const size_t per_batch = (size_t)b->microbatches * b->seqs;
    const size_t windows = per_batch * (size_t)batches;
    const size_t span = c->len - c->train_len - (size_t)b->context - 1; /* last start offset */
    for (size_t k = 0; k < per_batch; k++) {
        size_t w = (size_t)index * per_batch + k;
        size_t offset = windows > 1 ? (size_t)((double)span * w / (double)(windows - 1)) : 0;
        put_window(c, c->train_len + offset, k, b);
    }
}
