/* fuzz_util.h - what the libFuzzer targets share: the input as a C string,
 * a scratch directory for readers that take a path, and a check that
 * aborts (a finding) with a message. */
#ifndef TF_FUZZ_UTIL_H
#define TF_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The input as a NUL-terminated copy (the readers take C strings; an
 * embedded NUL ends the text early, as it would in a file read whole).
 * Aborts when out of memory. */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

/* A finding that is not a crash by itself: a broken promise of the
 * reader (a file it wrote that it cannot read back, say). */
#define FUZZ_CHECK(cond, ...)                                                                 \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz check failed: %s: ", #cond);                               \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

/* A scratch directory made once per process (under $TMPDIR) and removed at
 * exit, for readers that take a path; path_out[size] gets DIR/name. */
const char *fuzz_scratch_path(const char *name, char *path_out, size_t size);

/* Writes size bytes of data to path (replacing it); aborts on failure. */
void fuzz_write_file(const char *path, const void *data, size_t size);

#endif
