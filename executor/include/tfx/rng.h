/* rng.h - small deterministic random numbers (splitmix64).
 *
 * Everything random in the executor (initial weights, data sampling, random
 * freeze selection) is a pure function of a seed and integer coordinates such
 * as (step, stage, microbatch): results do not depend on thread timing, and a
 * run resumed from a checkpoint draws exactly what the uninterrupted run drew.
 */
#ifndef TFX_RNG_H
#define TFX_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct tfx_rng {
    uint64_t state;
} tfx_rng;

/* Next 64 random bits. */
static inline uint64_t tfx_rng_next(tfx_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform double in [0, 1). */
static inline double tfx_rng_uniform(tfx_rng *r)
{
    return (double)(tfx_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller, one value per call). */
static inline double tfx_rng_normal(tfx_rng *r)
{
    double u1 = tfx_rng_uniform(r), u2 = tfx_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* A generator for the coordinates (seed, a, b, c): mixes them so that
 * neighbouring coordinates give unrelated streams. */
static inline tfx_rng tfx_rng_for(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    tfx_rng r = {seed ^ 0x5DEECE66Dull};
    uint64_t k[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        r.state ^= k[i] + 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        (void)tfx_rng_next(&r);
    }
    return r;
}

#endif
