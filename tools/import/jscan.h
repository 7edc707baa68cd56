/* jscan.h - a JSON reader that walks a document as it streams from a file,
 * plain or gzip, without building it in memory (internal to tf-import).
 *
 * A torch.profiler trace is one large array of small events, of which
 * tf-import needs a few fields of a few kinds.  A document tree costs
 * about ten times the text (hundreds of bytes per event); walking the text
 * costs nothing per event the caller does not keep, so memory follows what
 * is kept, not the size of the file.
 *
 * The caller descends the document by hand: tfi_js_peek says what value
 * comes next, tfi_js_enter and tfi_js_more walk an array or object,
 * tfi_js_key, tfi_js_string and tfi_js_number read scalars, tfi_js_skip
 * passes over any value, checking its syntax.  The grammar is RFC 8259's;
 * strings may hold raw control bytes other than NUL (as cJSON's reader
 * allows).
 *
 * Every function returns 0 (or a count, where said) on success, or a
 * negative TF_E* code after filling the scanner's tf_error, and after the
 * first failure every later call returns the same code:
 *  - TF_EINVAL "PATH: not a trace: invalid JSON at line L, column C" (the
 *    line and column are found by reading the file again up to the byte,
 *    so the common path counts nothing), or "...: the file holds NUL
 *    bytes (binary data, not JSON)";
 *  - TF_EINVAL "PATH: larger than the LIMIT limit for one trace" when the
 *    decompressed text exceeds the scanner's byte limit;
 *  - TF_EIO for a file that cannot be read or gzip data that is broken or
 *    ends early.
 */
#ifndef TFI_JSCAN_H
#define TFI_JSCAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#include "tf/error.h"

/* Objects and arrays nested deeper than this are refused, as cJSON does. */
enum { TFI_JS_MAX_DEPTH = 1000 };

/* A number token longer than this is refused (no real trace writes one). */
enum { TFI_JS_MAX_NUMBER = 512 };

typedef struct tfi_jscan {
    const char *path;      /* for messages (the caller's) */
    int gzip;
    FILE *file;            /* plain file */
    gzFile gz;             /* gzip file */
    unsigned char *buf;    /* one block of text */
    size_t len, pos;       /* bytes in buf; the next to read */
    uint64_t offset;       /* bytes of the text before buf[0] */
    uint64_t limit;        /* the most bytes of text read */
    int eof;
    int failed;            /* the code of the first failure, else 0 */
    tf_error *err;
} tfi_jscan;

/* A string read by tfi_js_string: the first cap - 1 bytes of its decoded
 * text, NUL-terminated (an escaped \u0000 ends it early); `truncated` when
 * there were more. */
typedef struct tfi_js_text {
    char *s;
    size_t cap, len;
    int truncated;
} tfi_js_text;

/* Opens path, a regular file (gzip when it starts with gzip's magic
 * bytes, whatever its name), for reading at most limit bytes of text.  err
 * receives every later failure.  Returns 0, TF_EIO (cannot open),
 * TF_EINVAL (a pipe or a device) or TF_ENOMEM; on error nothing is left to
 * close. */
int tfi_js_open(tfi_jscan *j, const char *path, uint64_t limit, tf_error *err);

/* Closes the file and frees the block.  j may be closed already. */
void tfi_js_close(tfi_jscan *j);

/* Bytes of text consumed so far (for progress lines). */
uint64_t tfi_js_consumed(const tfi_jscan *j);

/* The first byte of the next value after blanks, not consumed: '{', '[',
 * '"', '-' or a digit, 't', 'f', 'n', another byte (a syntax error for the
 * caller's next call to report), -1 at the end of the text, or a negative
 * TF_E* code below -1 on failure. */
int tfi_js_peek(tfi_jscan *j);

/* Consumes the opening '[' or '{' (open) of a container. */
int tfi_js_enter(tfi_jscan *j, char open);

/* Inside a container entered with tfi_js_enter: 1 when another element
 * follows (the comma before it consumed), 0 after consuming the closing
 * bracket close.  *count is the caller's element counter, 0 before the
 * first call; it is incremented for each element. */
int tfi_js_more(tfi_jscan *j, char close, long *count);

/* Reads an object's key and the ':' after it into key (as tfi_js_string). */
int tfi_js_key(tfi_jscan *j, tfi_js_text *key);

/* Reads a string value into out (its buffer is the caller's). */
int tfi_js_string(tfi_jscan *j, tfi_js_text *out);

/* Reads a number: *value as strtod reads the token (a huge exponent gives
 * +-inf: the caller checks the range), and the token itself into
 * token[size] for messages. */
int tfi_js_number(tfi_jscan *j, double *value, char *token, size_t size);

/* Passes over the next value of any kind, checking its syntax. */
int tfi_js_skip(tfi_jscan *j);

/* Succeeds when only blanks remain. */
int tfi_js_finish(tfi_jscan *j);

#endif
