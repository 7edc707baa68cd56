/* trace.c - reading a torch.profiler Chrome trace (plain or gzip JSON). */
#include "trace.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tf/util.h"

/* A decompressed trace larger than this is refused rather than risking the
 * machine's memory on a corrupt or hostile file; real traces of one rank
 * are far smaller. */
#define TFI_MAX_TRACE_BYTES ((size_t)4 << 30)

static int is_gzip(const char *path, int *yes, tf_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tf_fail(err, TF_EIO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char magic[2] = {0, 0};
    size_t got = fread(magic, 1, 2, f);
    fclose(f);
    *yes = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    return 0;
}

/* Inflates the whole gzip file (all members) into a NUL-terminated buffer. */
static int read_gzip(const char *path, char **data, size_t *len, tf_error *err)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return tf_fail(err, TF_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, used = 0;
    char *buf = malloc(cap);
    int rc = buf ? 0 : tf_fail(err, TF_ENOMEM, "%s: out of memory", path);
    while (rc == 0) {
        if (cap - used < 2) {
            char *bigger = cap < TFI_MAX_TRACE_BYTES ? realloc(buf, cap * 2) : NULL;
            if (!bigger) {
                rc = tf_fail(err, TF_ENOMEM, "%s: the decompressed trace exceeds %zu bytes",
                             path, cap);
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        unsigned want = cap - used - 1 > (1u << 30) ? (1u << 30) : (unsigned)(cap - used - 1);
        int got = gzread(gz, buf + used, want);
        if (got < 0) {
            int zerr;
            const char *why = gzerror(gz, &zerr);
            rc = tf_fail(err, TF_EIO, "%s: broken gzip data: %s", path, why ? why : "?");
        } else if (got == 0) {
            break;
        } else {
            used += (size_t)got;
        }
    }
    /* A truncated file reads as a short stream; gzclose_r reports it. */
    int close_rc = gzclose_r(gz);
    if (rc == 0 && close_rc != Z_OK)
        rc = tf_fail(err, TF_EIO, "%s: broken gzip data: %s", path,
                     close_rc == Z_BUF_ERROR ? "the file ends in the middle of the stream"
                                             : "read error");
    if (rc) {
        free(buf);
        return rc;
    }
    buf[used] = '\0';
    *data = buf;
    *len = used;
    return 0;
}

static int read_bytes(const char *path, char **data, size_t *len, tf_error *err)
{
    int gz = 0, rc = is_gzip(path, &gz, err);
    if (rc)
        return rc;
    return gz ? read_gzip(path, data, len, err) : tf_read_file(path, data, len, err);
}

/* Parses text; a syntax error names the line and column. */
static int parse_json(const char *path, const char *text, size_t len, cJSON **root,
                      tf_error *err)
{
    if (strlen(text) != len)
        return tf_fail(err, TF_EINVAL, "%s: not a trace: the file holds NUL bytes (binary data, "
                       "not JSON)", path);
    const char *end = NULL;
    *root = cJSON_ParseWithOpts(text, &end, 1);
    if (*root)
        return 0;
    if (!end)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory parsing the JSON", path);
    int line = 1, column = 1;
    for (const char *c = text; c < end; c++) {
        line += *c == '\n';
        column = *c == '\n' ? 1 : column + 1;
    }
    return tf_fail(err, TF_EINVAL, "%s: not a trace: invalid JSON at line %d, column %d", path,
                   line, column);
}

/* The event list: Kineto's traceEvents, or the legacy bare array. */
static int event_list(const char *path, const cJSON *root, const cJSON **events, tf_error *err)
{
    if (cJSON_IsArray(root)) {
        *events = root;
        return 0;
    }
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    if (cJSON_IsObject(root) && cJSON_IsArray(list)) {
        *events = list;
        return 0;
    }
    return tf_fail(err, TF_EINVAL,
                   "%s: not a trace: expected a Chrome trace (an object with a \"traceEvents\" "
                   "array, or an array of events), got %s",
                   path,
                   cJSON_IsObject(root) ? (list ? "an object whose traceEvents is not an array"
                                                : "an object without \"traceEvents\"")
                                        : "a JSON value that is neither");
}

/* Reads an optional integer field of distributedInfo into *out (-1 absent). */
static int info_int(const char *path, const cJSON *info, const char *key, int *out,
                    tf_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(info, key);
    *out = -1;
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6 ||
        v->valuedouble != floor(v->valuedouble)) {
        char *text = cJSON_PrintUnformatted(v);
        int rc = tf_fail(err, TF_EINVAL,
                         "%s: distributedInfo.%s: expected an integer >= 0, got %s", path, key,
                         text ? text : "?");
        cJSON_free(text);
        return rc;
    }
    *out = (int)v->valuedouble;
    return 0;
}

/* distributedInfo (rank, world_size) and baseTimeNanoseconds, when present. */
static int read_metadata(const char *path, const cJSON *root, tfi_trace *t, tf_error *err)
{
    t->rank = t->world_size = -1;
    if (!cJSON_IsObject(root))
        return 0;
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(root, "distributedInfo");
    int rc;
    if (cJSON_IsObject(info) && ((rc = info_int(path, info, "rank", &t->rank, err)) ||
                                 (rc = info_int(path, info, "world_size", &t->world_size, err))))
        return rc;
    if (t->rank >= 0 && t->world_size >= 0 && t->rank >= t->world_size)
        return tf_fail(err, TF_EINVAL, "%s: distributedInfo.rank %d is not below world_size %d",
                       path, t->rank, t->world_size);
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(root, "baseTimeNanoseconds");
    if (cJSON_IsNumber(base) && isfinite(base->valuedouble)) {
        t->has_clock = 1;
        t->base_ns = base->valuedouble;
    }
    return 0;
}

/* Is name a c10d receive ("gloo:recv", "nccl:recv 1<-0", ...)? */
static int is_receive(const char *name)
{
    const char *colon = strchr(name, ':');
    if (!colon || colon == name)
        return 0;
    for (const char *c = name; c < colon; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return 0;
    return strncmp(colon + 1, "recv", 4) == 0;
}

/* Which kind of span an event is, or -1 to skip it. */
static int classify(const char *name, const char *cat, int *gpu, long *step)
{
    *gpu = cat && strcmp(cat, "gpu_user_annotation") == 0;
    /* Annotations: Kineto's two categories, or none at all (legacy). */
    int annotation = !cat || *gpu || strcmp(cat, "user_annotation") == 0;
    if (annotation && strncmp(name, "PP:", 3) == 0)
        return TFI_SPAN_PP;
    if (annotation && strncmp(name, "ProfilerStep#", 13) == 0) {
        char *end;
        errno = 0;
        long n = strtol(name + 13, &end, 10);
        if (end == name + 13 || *end || errno || n < 0)
            return -1;
        *step = n;
        return TFI_SPAN_STEP;
    }
    int device_side = cat && (strncmp(cat, "gpu_", 4) == 0 || strcmp(cat, "kernel") == 0);
    if (!device_side && is_receive(name))
        return TFI_SPAN_RECV;
    return -1;
}

/* Reads ts or dur of event i; a bad value is an error naming it. */
static int event_time(const char *path, int i, const char *name, const cJSON *e,
                      const char *key, double *out, tf_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
        (v->valuedouble >= 0 || strcmp(key, "ts") == 0) && fabs(v->valuedouble) < 1e18) {
        *out = v->valuedouble;
        return 0;
    }
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;
    int rc = tf_fail(err, TF_EINVAL, "%s: event %d (\"%s\"): %s: expected a %s, got %s", path,
                     i, name, key, strcmp(key, "ts") == 0 ? "finite number" : "number >= 0",
                     v ? (text ? text : "?") : "nothing");
    cJSON_free(text);
    return rc;
}

/* Appends the spans of interest among the events to t. */
static int collect_spans(const char *path, const cJSON *events, tfi_trace *t, tf_error *err)
{
    int n = cJSON_GetArraySize(events), i = -1;
    t->spans = calloc((size_t)(n > 0 ? n : 1), sizeof *t->spans);
    if (!t->spans)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for %d events", path, n);
    const cJSON *e;
    cJSON_ArrayForEach(e, events)
    {
        i++;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        if (!cJSON_IsObject(e) || !cJSON_IsString(name) || !cJSON_IsString(ph) ||
            strcmp(ph->valuestring, "X") != 0)
            continue;
        tfi_span s = {.index = i};
        int kind = classify(name->valuestring, cJSON_IsString(cat) ? cat->valuestring : NULL,
                            &s.gpu, &s.step);
        if (kind < 0)
            continue;
        double ts, dur;
        int rc;
        if ((rc = event_time(path, i, name->valuestring, e, "ts", &ts, err)) ||
            (rc = event_time(path, i, name->valuestring, e, "dur", &dur, err)))
            return rc;
        s.kind = (tfi_span_kind)kind;
        s.start = ts;
        s.end = ts + dur;
        if (!(s.name = strdup(name->valuestring)))
            return tf_fail(err, TF_ENOMEM, "%s: out of memory", path);
        t->spans[t->n_spans++] = s;
    }
    return 0;
}

static int by_start(const void *pa, const void *pb)
{
    const tfi_span *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

int tfi_trace_load(const char *path, tfi_trace *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    const cJSON *events = NULL;
    int rc = read_bytes(path, &text, &len, err);
    if (rc == 0)
        rc = parse_json(path, text, len, &root, err);
    free(text);
    if (rc == 0)
        rc = event_list(path, root, &events, err);
    if (rc == 0 && !(out->path = strdup(path)))
        rc = tf_fail(err, TF_ENOMEM, "%s: out of memory", path);
    if (rc == 0)
        rc = read_metadata(path, root, out, err);
    if (rc == 0)
        rc = collect_spans(path, events, out, err);
    cJSON_Delete(root);
    if (rc) {
        tfi_trace_free(out);
        return rc;
    }
    qsort(out->spans, (size_t)out->n_spans, sizeof *out->spans, by_start);
    return 0;
}

void tfi_trace_free(tfi_trace *t)
{
    for (int i = 0; i < t->n_spans; i++)
        free(t->spans[i].name);
    free(t->spans);
    free(t->path);
    memset(t, 0, sizeof *t);
}
