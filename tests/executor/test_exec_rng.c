/* test_exec_rng.c - the random streams (tfx/rng.h): Threefry-4x64-20
 * against its published known answers, how a stream lays out its words,
 * the unbiased bounded draw, and the first words of neighbouring
 * coordinates, domains and seeds: all distinct, and uniform. */
#include <math.h>

#include "random/threefry.h"
#include "test_stats.h"
#include "test_util.h"
#include "tfx/rng.h"

/* Random123's known answers for threefry4x64 with 20 rounds (its
 * examples/kat_vectors): counter and key all 0, all 1 bits, and digits of
 * pi. */
static void test_threefry_known_answers(void **state)
{
    (void)state;
    static const struct {
        uint64_t counter[4], key[4], out[4];
    } kat[] = {
        {{0, 0, 0, 0},
         {0, 0, 0, 0},
         {0x09218ebde6c85537ull, 0x55941f5266d86105ull, 0x4bd25e16282434dcull,
          0xee29ec846bd2e40bull}},
        {{~0ull, ~0ull, ~0ull, ~0ull},
         {~0ull, ~0ull, ~0ull, ~0ull},
         {0x29c24097942bba1bull, 0x0371bbfb0f6f4e11ull, 0x3c231ffa33f83a1cull,
          0xcd29113fde32d168ull}},
        {{0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
          0x082efa98ec4e6c89ull},
         {0x452821e638d01377ull, 0xbe5466cf34e90c6cull, 0xbe5466cf34e90c6cull,
          0xc0ac29b7c97c50ddull},
         {0xa7e8fde591651bd9ull, 0xbaafd0c30138319bull, 0x84a5c1a729e685b9ull,
          0x901d406ccebc1ba4ull}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint64_t out[4];
        tfx_threefry4x64_20(kat[i].key, kat[i].counter, out);
        assert_memory_equal(out, kat[i].out, sizeof out);
    }
}

/* Word i of (seed, domain, a, b, c) is word i % 4 of the block of counter
 * (domain << 48 | i / 4, a, b, c) under key (seed, 0, 0, 0); a copy of a
 * stream goes on with the same words. */
static void test_stream_layout(void **state)
{
    (void)state;
    const uint64_t key[4] = {5, 0, 0, 0};
    uint64_t block[2][4];
    for (uint64_t i = 0; i < 2; i++) {
        const uint64_t counter[4] = {(uint64_t)TFX_RNG_FREEZE << 48 | i, 7, 8, 9};
        tfx_threefry4x64_20(key, counter, block[i]);
    }
    tfx_rng r = tfx_rng_for(5, TFX_RNG_FREEZE, 7, 8, 9);
    for (int w = 0; w < 3; w++)
        assert_true(tfx_rng_next(&r) == block[0][w]);
    tfx_rng fork = r;
    for (int w = 3; w < 8; w++) {
        uint64_t x = tfx_rng_next(&r);
        assert_true(x == block[w / 4][w % 4]);
        assert_true(tfx_rng_next(&fork) == x);
    }
    /* Uniform doubles are the top 53 bits of a word. */
    r = tfx_rng_for(5, TFX_RNG_FREEZE, 7, 8, 9);
    assert_true(tfx_rng_uniform(&r) == (double)(block[0][0] >> 11) / 9007199254740992.0);
}

/* tfx_rng_below: in range, and unbiased where next() % n is not.  For
 * n = 3 * 2^62, 2^64 = n + 2^62, so x % n lands below 2^62 for half the
 * words; a uniform draw does so a third of the time (30,000 draws: sd
 * 0.0027, bound 5 sd). */
static void test_below_is_unbiased(void **state)
{
    (void)state;
    enum { DRAWS = 30000 };
    tfx_rng r = tfx_rng_for(1, TFX_RNG_TEST, 0, 0, 0);
    const uint64_t n = 3ull << 62;
    int low = 0;
    for (int i = 0; i < DRAWS; i++) {
        uint64_t x = tfx_rng_below(&r, n);
        assert_true(x < n);
        low += x < (1ull << 62);
    }
    double share = (double)low / DRAWS, sd = sqrt(2.0 / 9 / DRAWS);
    if (fabs(share - 1.0 / 3) > 5 * sd)
        fail_msg("%.4f of the draws below n / 3, expected 0.3333 +- %.4f", share, 5 * sd);
    /* A small n: every value equally often (chi-square, 6 degrees of
     * freedom, significance 1e-4); n = 1 is always 0. */
    double seen[7] = {0}, expect[7];
    for (int i = 0; i < 70000; i++)
        seen[tfx_rng_below(&r, 7)]++;
    for (int v = 0; v < 7; v++)
        expect[v] = 10000;
    assert_true(chi_square(seen, expect, 7) < chi_square_critical(6, Z_1E4));
    assert_true(tfx_rng_below(&r, 1) == 0);
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Chi-square of the top 8 bits of words[0, n) over 256 buckets, against a
 * uniform spread. */
static double top_byte_chi_square(const uint64_t *words, size_t n)
{
    double seen[256] = {0}, expect[256];
    for (size_t i = 0; i < n; i++)
        seen[words[i] >> 56]++;
    for (int b = 0; b < 256; b++)
        expect[b] = (double)n / 256;
    return chi_square(seen, expect, 256);
}

/* The first words of the streams of every coordinate triple in 64 x 64 x
 * 64, in each run domain, for seeds 1 to 3 (3.1 M streams): no two equal
 * (3.1 M uniform words repeat one with probability 3e-7), and each (seed,
 * domain)'s 262,144 uniform in their top 8 bits (chi-square, 255 degrees
 * of freedom, significance 1e-4 each). */
static void test_neighbouring_streams_distinct_and_uniform(void **state)
{
    (void)state;
    enum { SIDE = 64, GRID = SIDE * SIDE * SIDE, SEEDS = 3, DOMAINS = 4 };
    static const tfx_rng_domain domains[DOMAINS] = {TFX_RNG_WEIGHTS, TFX_RNG_DATA,
                                                    TFX_RNG_FREEZE, TFX_RNG_SOURCE};
    const size_t n = (size_t)SEEDS * DOMAINS * GRID;
    uint64_t *first = malloc(n * sizeof *first);
    const double critical = chi_square_critical(255, Z_1E4);
    for (int s = 0; s < SEEDS; s++)
        for (int d = 0; d < DOMAINS; d++) {
            uint64_t *w = first + ((size_t)s * DOMAINS + d) * GRID;
            for (size_t i = 0; i < GRID; i++) {
                tfx_rng r = tfx_rng_for((uint64_t)s + 1, domains[d], i / (SIDE * SIDE),
                                        i / SIDE % SIDE, i % SIDE);
                w[i] = tfx_rng_next(&r);
            }
            double x2 = top_byte_chi_square(w, GRID);
            if (x2 > critical)
                fail_msg("seed %d, domain %d: chi-square %.1f of the first words' top "
                         "bytes, above %.1f", s + 1, domains[d], x2, critical);
        }
    qsort(first, n, sizeof *first, compare_u64);
    for (size_t i = 1; i < n; i++)
        if (first[i] == first[i - 1])
            fail_msg("two streams start with the same word %016llx",
                     (unsigned long long)first[i]);
    free(first);
}

/* The words of one long stream (2^20, across 2^18 blocks) are uniform in
 * their top 8 bits too (chi-square, 255 degrees of freedom, 1e-4). */
static void test_long_stream_uniform(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    uint64_t *w = malloc(N * sizeof *w);
    tfx_rng r = tfx_rng_for(2, TFX_RNG_TEST, 0, 0, 0);
    for (size_t i = 0; i < N; i++)
        w[i] = tfx_rng_next(&r);
    assert_true(top_byte_chi_square(w, N) < chi_square_critical(255, Z_1E4));
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threefry_known_answers),
        cmocka_unit_test(test_stream_layout),
        cmocka_unit_test(test_below_is_unbiased),
        cmocka_unit_test(test_neighbouring_streams_distinct_and_uniform),
        cmocka_unit_test(test_long_stream_uniform),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
