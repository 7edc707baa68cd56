/* jscan.c - walking a JSON document as it streams from a file. */
#include "jscan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { BLOCK = 1 << 16 };

static int is_blank(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

int tfi_js_open(tfi_jscan *j, const char *path, uint64_t limit, tf_error *err)
{
    memset(j, 0, sizeof *j);
    j->path = path;
    j->limit = limit;
    j->err = err;
    j->file = fopen(path, "rb");
    if (!j->file)
        return tf_fail(err, TF_EIO, "%s: cannot open: %s", path, strerror(errno));
    /* A trace is opened again to tell where an error is, and its first
     * bytes are read twice: a pipe or a device cannot do either. */
    struct stat st;
    if (fstat(fileno(j->file), &st) != 0 || !S_ISREG(st.st_mode)) {
        tfi_js_close(j);
        return tf_fail(err, TF_EINVAL, "%s: not a regular file (a pipe or a device): give the "
                       "trace's file", path);
    }
    unsigned char magic[2] = {0, 0};
    j->gzip = fread(magic, 1, 2, j->file) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    rewind(j->file);
    if (j->gzip) {
        fclose(j->file);
        j->file = NULL;
        if (!(j->gz = gzopen(path, "rb"))) {
            int why = errno;
            return tf_fail(err, TF_EIO, "%s: cannot open: %s", path,
                           why ? strerror(why) : "out of memory");
        }
        gzbuffer(j->gz, BLOCK);
    }
    if (!(j->buf = malloc(BLOCK))) {
        tfi_js_close(j);
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", path);
    }
    return 0;
}

void tfi_js_close(tfi_jscan *j)
{
    if (j->file)
        fclose(j->file);
    if (j->gz)
        gzclose_r(j->gz);
    free(j->buf);
    j->file = NULL;
    j->gz = NULL;
    j->buf = NULL;
}

uint64_t tfi_js_consumed(const tfi_jscan *j)
{
    return j->offset + j->pos;
}

/* Records the first failure, "PATH: WHAT". */
static int fail(tfi_jscan *j, int code, const char *what)
{
    j->failed = tf_fail(j->err, code, "%s: %s", j->path, what);
    return j->failed;
}

/* A gzip stream that ends early reads as a short one: zlib reports it as
 * Z_BUF_ERROR once the data runs out. */
static int read_gzip_block(tfi_jscan *j, int *got)
{
    *got = gzread(j->gz, j->buf, BLOCK);
    int zerr = Z_OK;
    const char *why = gzerror(j->gz, &zerr);
    if (*got >= 0 && (zerr == Z_OK || zerr == Z_STREAM_END))
        return 0;
    char what[160];
    snprintf(what, sizeof what, "broken gzip data: %s",
             zerr == Z_BUF_ERROR ? "the file ends in the middle of the stream"
                                 : (why && *why ? why : "read error"));
    return fail(j, TF_EIO, what);
}

/* Reads the next block; at the end sets eof.  Returns 0 or the failure. */
static int refill(tfi_jscan *j)
{
    if (j->failed)
        return j->failed;
    j->offset += j->len;
    j->len = j->pos = 0;
    int got = 0;
    if (j->gz) {
        if (read_gzip_block(j, &got))
            return j->failed;
    } else {
        got = (int)fread(j->buf, 1, BLOCK, j->file);
        if (got == 0 && ferror(j->file)) {
            char what[160];
            snprintf(what, sizeof what, "cannot read: %s", strerror(errno));
            return fail(j, TF_EIO, what);
        }
    }
    if (got == 0) {
        j->eof = 1;
        return 0;
    }
    j->len = (size_t)got;
    if (j->offset + j->len > j->limit) {
        char what[160];
        snprintf(what, sizeof what, "larger than the %llu MiB limit for one trace "
                 "(docs/robustness.md)", (unsigned long long)(j->limit >> 20));
        return fail(j, TF_EINVAL, what);
    }
    return 0;
}

/* The next byte, consumed; -1 at the end; below -1 on failure. */
static int next_byte(tfi_jscan *j)
{
    if (j->pos == j->len && (refill(j) || j->eof))
        return j->failed ? j->failed : -1;
    return j->buf[j->pos++];
}

/* Line and column (1-based) of byte `at` of the text, by reading the file
 * again from its start. */
static void locate(const tfi_jscan *j, uint64_t at, long *line, long *column)
{
    *line = *column = 1;
    tfi_jscan again;
    if (tfi_js_open(&again, j->path, j->limit, NULL))
        return;
    for (uint64_t k = 0; k < at; k++) {
        int c = next_byte(&again);
        if (c < 0)
            break;
        *line += c == '\n';
        *column = c == '\n' ? 1 : *column + 1;
    }
    tfi_js_close(&again);
}

/* Fails at the byte just read (back = 1) or the next one (back = 0). */
static int syntax_error(tfi_jscan *j, int back)
{
    if (j->failed)
        return j->failed;
    uint64_t at = tfi_js_consumed(j) - (uint64_t)back;
    int nul = j->pos - (size_t)back < j->len && j->buf[j->pos - (size_t)back] == 0;
    if (nul)
        return fail(j, TF_EINVAL, "not a trace: the file holds NUL bytes (binary data, not "
                    "JSON)");
    long line, column;
    locate(j, at, &line, &column);
    j->failed = tf_fail(j->err, TF_EINVAL, "%s: not a trace: invalid JSON at line %ld, "
                        "column %ld", j->path, line, column);
    return j->failed;
}

int tfi_js_peek(tfi_jscan *j)
{
    for (;;) {
        if (j->pos == j->len && (refill(j) || j->eof))
            return j->failed ? j->failed : -1;
        int c = j->buf[j->pos];
        if (!is_blank(c))
            return c;
        j->pos++;
    }
}

/* Consumes the next non-blank byte, which must be c. */
static int expect(tfi_jscan *j, char c)
{
    int got = tfi_js_peek(j);
    if (got < -1)
        return got;
    if (got != (unsigned char)c)
        return syntax_error(j, 0);
    j->pos++;
    return 0;
}

int tfi_js_enter(tfi_jscan *j, char open)
{
    return expect(j, open);
}

int tfi_js_more(tfi_jscan *j, char close, long *count)
{
    int c = tfi_js_peek(j);
    if (c < -1)
        return c;
    if (c == (unsigned char)close) {
        j->pos++;
        return 0;
    }
    if (*count > 0) {
        if (c != ',')
            return syntax_error(j, 0);
        j->pos++;
    }
    (*count)++;
    return 1;
}

static int hex_value(int c)
{
    if (is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads the four hex digits of a \u escape into *unit. */
static int read_unit(tfi_jscan *j, unsigned *unit)
{
    *unit = 0;
    for (int k = 0; k < 4; k++) {
        int c = next_byte(j);
        if (c < -1)
            return c;
        int v = c < 0 ? -1 : hex_value(c);
        if (v < 0)
            return syntax_error(j, c >= 0);
        *unit = *unit << 4 | (unsigned)v;
    }
    return 0;
}

/* Appends byte c to out, keeping what fits. */
static void put(tfi_js_text *out, int c)
{
    if (!out)
        return;
    if (out->len + 1 < out->cap)
        out->s[out->len++] = (char)c;
    else
        out->truncated = 1;
}

/* Appends code point u as UTF-8. */
static void put_utf8(tfi_js_text *out, unsigned u)
{
    if (u < 0x80) {
        put(out, (int)u);
    } else if (u < 0x800) {
        put(out, (int)(0xc0 | u >> 6));
        put(out, (int)(0x80 | (u & 0x3f)));
    } else if (u < 0x10000) {
        put(out, (int)(0xe0 | u >> 12));
        put(out, (int)(0x80 | (u >> 6 & 0x3f)));
        put(out, (int)(0x80 | (u & 0x3f)));
    } else {
        put(out, (int)(0xf0 | u >> 18));
        put(out, (int)(0x80 | (u >> 12 & 0x3f)));
        put(out, (int)(0x80 | (u >> 6 & 0x3f)));
        put(out, (int)(0x80 | (u & 0x3f)));
    }
}

/* A \u escape (the "\u" read): one UTF-16 unit, or a surrogate pair. */
static int unicode_escape(tfi_jscan *j, tfi_js_text *out)
{
    unsigned hi, lo;
    int rc = read_unit(j, &hi);
    if (rc || hi < 0xd800 || hi > 0xdfff) {
        if (rc == 0)
            put_utf8(out, hi);
        return rc;
    }
    if (hi > 0xdbff || next_byte(j) != '\\' || next_byte(j) != 'u')
        return syntax_error(j, 1);
    if ((rc = read_unit(j, &lo)))
        return rc;
    if (lo < 0xdc00 || lo > 0xdfff)
        return syntax_error(j, 1);
    put_utf8(out, 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00));
    return 0;
}

/* The byte after a backslash. */
static int escape(tfi_jscan *j, tfi_js_text *out)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    int c = next_byte(j);
    if (c < -1)
        return c;
    if (c == 'u')
        return unicode_escape(j, out);
    const char *hit = c > 0 ? strchr(from, c) : NULL;
    if (!hit)
        return syntax_error(j, c >= 0);
    put(out, to[hit - from]);
    return 0;
}

/* The body of a string after its opening quote; out may be NULL (skip).
 * Runs of plain bytes are copied a block at a time. */
static int string_body(tfi_jscan *j, tfi_js_text *out)
{
    for (;;) {
        if (j->pos == j->len && (refill(j) || j->eof))
            return j->failed ? j->failed : syntax_error(j, 0);
        const unsigned char *p = j->buf + j->pos, *end = j->buf + j->len;
        while (p < end && *p != '"' && *p != '\\' && *p != 0)
            put(out, *p++);
        j->pos = (size_t)(p - j->buf);
        if (p == end)
            continue;
        j->pos++;
        if (*p == '"')
            break;
        if (*p == 0)
            return syntax_error(j, 1);
        int rc = escape(j, out);
        if (rc)
            return rc;
    }
    if (out)
        out->s[out->len] = '\0';
    return 0;
}

int tfi_js_string(tfi_jscan *j, tfi_js_text *out)
{
    out->len = 0;
    out->truncated = 0;
    out->s[0] = '\0';
    int rc = expect(j, '"');
    return rc ? rc : string_body(j, out);
}

int tfi_js_key(tfi_jscan *j, tfi_js_text *key)
{
    int rc = tfi_js_string(j, key);
    return rc ? rc : expect(j, ':');
}

/* Appends the digits at the cursor to token; returns how many. */
static int digits(tfi_jscan *j, char *token, size_t *n)
{
    int count = 0;
    for (;;) {
        if (j->pos == j->len && (refill(j) || j->eof))
            return j->failed ? j->failed : count;
        int c = j->buf[j->pos];
        if (!is_digit(c))
            return count;
        if (*n + 1 >= TFI_JS_MAX_NUMBER)
            return fail(j, TF_EINVAL, "not a trace: a number of more than 512 characters");
        token[(*n)++] = (char)c;
        j->pos++;
        count++;
    }
}

/* Consumes c when it is the next byte; returns 1 if so. */
static int accept(tfi_jscan *j, const char *set, char *token, size_t *n)
{
    if (j->pos == j->len && (refill(j) || j->eof))
        return 0;
    int c = j->buf[j->pos];
    if (c == 0 || !strchr(set, c))
        return 0;
    token[(*n)++] = (char)c;
    j->pos++;
    return 1;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? into token. */
static int number_token(tfi_jscan *j, char *token)
{
    size_t n = 0;
    int rc;
    if (tfi_js_peek(j) < -1)
        return j->failed;
    accept(j, "-", token, &n);
    if ((rc = digits(j, token, &n)) <= 0 || (token[n - (size_t)rc] == '0' && rc > 1))
        return rc < 0 ? rc : syntax_error(j, 0);
    if (accept(j, ".", token, &n) && (rc = digits(j, token, &n)) <= 0)
        return rc < 0 ? rc : syntax_error(j, 0);
    if (accept(j, "eE", token, &n)) {
        accept(j, "+-", token, &n);
        if ((rc = digits(j, token, &n)) <= 0)
            return rc < 0 ? rc : syntax_error(j, 0);
    }
    token[n] = '\0';
    return j->failed;
}

/* The value of a token of at most 15 significant digits without an
 * exponent, exactly as strtod gives it (Clinger's fast path: the digits
 * and the power of ten are exact doubles, so one division rounds once);
 * -1 when the token needs strtod.  Most timestamps take this path. */
static int fast_value(const char *token, double *value)
{
    static const double tens[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8,
                                  1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    const char *c = token + (token[0] == '-');
    int64_t digits = 0;
    int count = 0, decimals = -1;
    for (; *c; c++) {
        if (*c == '.') {
            decimals = 0;
            continue;
        }
        if (*c < '0' || *c > '9' || ++count > 15)
            return -1;
        digits = digits * 10 + (*c - '0');
        decimals += decimals >= 0;
    }
    *value = (double)digits / tens[decimals > 0 ? decimals : 0];
    if (token[0] == '-')
        *value = -*value;
    return 0;
}

int tfi_js_number(tfi_jscan *j, double *value, char *token, size_t size)
{
    char text[TFI_JS_MAX_NUMBER];
    int rc = number_token(j, text);
    if (rc)
        return rc;
    if (fast_value(text, value))
        *value = strtod(text, NULL);
    if (token && size) {
        size_t len = strlen(text);
        len = len < size ? len : size - 1;
        memcpy(token, text, len);
        token[len] = '\0';
    }
    return 0;
}

/* Consumes the literal word (true, false, null). */
static int literal(tfi_jscan *j, const char *word)
{
    for (const char *w = word; *w; w++) {
        int c = next_byte(j);
        if (c < -1)
            return c;
        if (c != *w)
            return syntax_error(j, c >= 0);
    }
    return 0;
}

static int skip_at(tfi_jscan *j, int depth);

/* The elements of an array or the members of an object. */
static int skip_container(tfi_jscan *j, char open, int depth)
{
    if (depth >= TFI_JS_MAX_DEPTH)
        return fail(j, TF_EINVAL, "not a trace: JSON nested deeper than 1000 levels");
    char close = open == '[' ? ']' : '}';
    long count = 0;
    int rc = tfi_js_enter(j, open), more = 0;
    while (rc == 0 && (more = tfi_js_more(j, close, &count)) == 1) {
        if (open == '{' && ((rc = expect(j, '"')) || (rc = string_body(j, NULL)) ||
                            (rc = expect(j, ':'))))
            break;
        rc = skip_at(j, depth + 1);
    }
    return rc ? rc : (more < 0 ? more : 0);
}

static int skip_at(tfi_jscan *j, int depth)
{
    int c = tfi_js_peek(j);
    if (c < -1)
        return c;
    switch (c) {
    case '{':
    case '[':
        return skip_container(j, (char)c, depth);
    case '"':
        j->pos++;
        return string_body(j, NULL);
    case 't':
        return literal(j, "true");
    case 'f':
        return literal(j, "false");
    case 'n':
        return literal(j, "null");
    default:
        if (c == '-' || is_digit(c)) {
            char token[TFI_JS_MAX_NUMBER];
            return number_token(j, token);
        }
        return syntax_error(j, 0);
    }
}

int tfi_js_skip(tfi_jscan *j)
{
    return skip_at(j, 1);
}

int tfi_js_finish(tfi_jscan *j)
{
    int c = tfi_js_peek(j);
    if (c < -1)
        return c;
    return c == -1 ? 0 : syntax_error(j, 0);
}
