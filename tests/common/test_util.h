/* test_util.h - helpers shared by the unit tests (cmocka). */
#ifndef TF_TEST_UTIL_H
#define TF_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Path of a file in the source tree (TF_SOURCE_DIR, set by ctest). */
static inline const char *source_path(const char *relative, char *buf, size_t size)
{
    const char *root = getenv("TF_SOURCE_DIR");
    snprintf(buf, size, "%s/%s", root ? root : ".", relative);
    return buf;
}

/* Asserts that haystack contains needle, printing both if not. */
#define assert_contains(haystack, needle)                                                     \
    do {                                                                                      \
        if (!strstr((haystack), (needle)))                                                    \
            fail_msg("expected \"%s\" in \"%s\"", (needle), (haystack));                     \
    } while (0)

/* Asserts |a - b| <= rel * max(1, |a|, |b|). */
#define assert_close(a, b, rel)                                                               \
    do {                                                                                      \
        double a_ = (a), b_ = (b);                                                            \
        double scale_ = fabs(a_) > fabs(b_) ? fabs(a_) : fabs(b_);                            \
        if (scale_ < 1.0)                                                                     \
            scale_ = 1.0;                                                                     \
        if (!(fabs(a_ - b_) <= (rel) * scale_))                                               \
            fail_msg("%s = %.12g, %s = %.12g differ by more than %g relative", #a, a_, #b,    \
                     b_, (double)(rel));                                                      \
    } while (0)

/* Deterministic random numbers for seeded instances (xorshift64*). */
static inline double test_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (double)((x * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

#endif
