/* rng.c - Threefry-4x64-20 and the streams built on it (see tfx/rng.h). */
#include "tfx/rng.h"

#include <math.h>

#include "random/threefry.h"

/* The Skein key-schedule parity constant. */
#define KEY_PARITY 0x1BD11BDAA9FC1A22ull
/* The block counter's share of counter word 0; the domain has the rest. */
#define BLOCK_BITS 48
#define BLOCK_MASK ((1ull << BLOCK_BITS) - 1)

static uint64_t rotl(uint64_t x, unsigned n)
{
    return (x << n) | (x >> (64 - n));
}

/* Threefish's MIX of two words: a += b; b = rotl(b, n) ^ a. */
#define MIX(a, b, n) ((a) += (b), (b) = rotl((b), (n)) ^ (a))

/* Four rounds with Threefish-256's rotation amounts r[0..7] (rounds 0-3 of
 * every 8, or 4-7): even rounds mix words (0,1) and (2,3), odd rounds (0,3)
 * and (2,1), which is Threefish's word permutation without moving words. */
static inline void four_rounds(uint64_t x[4], const unsigned r[8])
{
    MIX(x[0], x[1], r[0]);
    MIX(x[2], x[3], r[1]);
    MIX(x[0], x[3], r[2]);
    MIX(x[2], x[1], r[3]);
    MIX(x[0], x[1], r[4]);
    MIX(x[2], x[3], r[5]);
    MIX(x[0], x[3], r[6]);
    MIX(x[2], x[1], r[7]);
}

/* Key injection s (after every four rounds). */
static inline void inject(uint64_t x[4], const uint64_t ks[5], unsigned s)
{
    for (unsigned i = 0; i < 4; i++)
        x[i] += ks[(s + i) % 5];
    x[3] += s;
}

void tfx_threefry4x64_20(const uint64_t key[4], const uint64_t counter[4], uint64_t out[4])
{
    static const unsigned first[8] = {14, 16, 52, 57, 23, 40, 5, 37};
    static const unsigned second[8] = {25, 33, 46, 12, 58, 22, 32, 32};
    const uint64_t ks[5] = {key[0], key[1], key[2], key[3],
                            KEY_PARITY ^ key[0] ^ key[1] ^ key[2] ^ key[3]};
    uint64_t x[4];
    for (int i = 0; i < 4; i++)
        x[i] = counter[i] + ks[i];
    /* Unrolled, so that the rotation amounts are constants and the words
     * stay in registers (three times faster than a loop over rounds). */
    four_rounds(x, first);
    inject(x, ks, 1);
    four_rounds(x, second);
    inject(x, ks, 2);
    four_rounds(x, first);
    inject(x, ks, 3);
    four_rounds(x, second);
    inject(x, ks, 4);
    four_rounds(x, first);
    inject(x, ks, 5);
    for (int i = 0; i < 4; i++)
        out[i] = x[i];
}

tfx_rng tfx_rng_for(uint64_t seed, tfx_rng_domain domain, uint64_t a, uint64_t b, uint64_t c)
{
    tfx_rng r = {.key = {seed, 0, 0, 0},
                 .counter = {(uint64_t)domain << BLOCK_BITS, a, b, c},
                 .used = 4};
    return r;
}

uint64_t tfx_rng_next(tfx_rng *r)
{
    if (r->used == 4) {
        tfx_threefry4x64_20(r->key, r->counter, r->block);
        uint64_t w = r->counter[0];
        r->counter[0] = (w & ~BLOCK_MASK) | ((w + 1) & BLOCK_MASK);
        r->used = 0;
    }
    return r->block[r->used++];
}

uint64_t tfx_rng_below(tfx_rng *r, uint64_t n)
{
    /* 2^64 mod n: the words below it make the incomplete run. */
    const uint64_t incomplete = (0 - n) % n;
    uint64_t x;
    do
        x = tfx_rng_next(r);
    while (x < incomplete);
    return x % n;
}

double tfx_rng_uniform(tfx_rng *r)
{
    return (double)(tfx_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

double tfx_rng_normal(tfx_rng *r)
{
    double u1 = tfx_rng_uniform(r), u2 = tfx_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
