/* rng.h - deterministic random numbers: Threefry-4x64-20 in counter mode.
 *
 * Everything random in the executor (initial weights, training windows,
 * random freeze choices, the built-in sources) is a pure function of a
 * seed, a domain (what the numbers are for) and three integer coordinates
 * such as (step, stage, microbatch): results do not depend on thread
 * timing, and a run resumed from a checkpoint draws exactly what the
 * uninterrupted run drew.
 *
 * Word i of the stream (seed, domain, a, b, c) is word i mod 4 of the
 * Threefry-4x64 block cipher with 20 rounds (Salmon et al., "Parallel random
 * numbers: as easy as 1, 2, 3", SC 2011; the generator of the Random123
 * library, JAX and others), keyed with (seed, 0, 0, 0), applied to the
 * counter (domain << 48 | i / 4, a, b, c).  A counter-based generator rather
 * than a hashed seed for a sequential one, because for one key the cipher
 * is a bijection of its counter: two streams that differ in domain or in any
 * coordinate never produce the same 256-bit block, whatever the
 * coordinates, so neighbouring coordinates and other domains cannot
 * collide by construction, not merely with high probability; and word i of
 * a stream needs no state beyond i.  Threefry-4x64-20 passed TestU01's
 * BigCrush in its authors' tests with many counter and key patterns.  It
 * costs about 25 ns a word on a 2-core test machine (splitmix64: 1.5 ns),
 * which makes the default model's initial weights take 0.16 s instead of
 * 0.06 s, once per run.
 */
#ifndef TFX_RNG_H
#define TFX_RNG_H

#include <stdint.h>

/* What a stream is for: one domain per purpose, so the purposes never
 * share numbers.  The comment of each names its coordinates (a, b, c).
 * The values are part of every run's results (and of the Python module
 * tools/python/timelyfreeze_plan, which draws the freeze choices again):
 * changing one changes what every seed draws. */
typedef enum tfx_rng_domain {
    TFX_RNG_WEIGHTS = 1, /* initial weights: (tensor index, 0, 0) */
    TFX_RNG_DATA = 2,    /* training windows: (step, microbatch, sequence) */
    TFX_RNG_FREEZE = 3,  /* random freeze choices: (step, stage, microbatch) */
    TFX_RNG_SOURCE = 4,  /* the built-in sources: (part, source, 0), corpus.c */
    TFX_RNG_TEST = 5,    /* tests' own inputs, apart from every run's numbers */
} tfx_rng_domain;

/* A stream: the coordinates and where it stands.  Copying one forks it
 * (both copies go on with the same words). */
typedef struct tfx_rng {
    uint64_t key[4];     /* (seed, 0, 0, 0) */
    uint64_t counter[4]; /* (domain << 48 | next block, a, b, c) */
    uint64_t block[4];   /* the block being used */
    int used;            /* words of `block` already returned; 4: none left */
} tfx_rng;

/* The stream of (seed, domain, a, b, c), at its first word.  Any values;
 * a stream is 2^50 words long (it would repeat after that). */
tfx_rng tfx_rng_for(uint64_t seed, tfx_rng_domain domain, uint64_t a, uint64_t b, uint64_t c);

/* The next 64 random bits. */
uint64_t tfx_rng_next(tfx_rng *r);

/* A uniform integer in [0, n), without the bias of next() % n: words in the
 * last, incomplete run of n values below 2^64 are drawn again (for n below
 * 2^32, one word in 2^32 or fewer).  n must be at least 1. */
uint64_t tfx_rng_below(tfx_rng *r, uint64_t n);

/* A uniform double in [0, 1): the top 53 bits of one word. */
double tfx_rng_uniform(tfx_rng *r);

/* A standard normal (Box-Muller, two words per value). */
double tfx_rng_normal(tfx_rng *r);

#endif
