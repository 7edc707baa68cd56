/* trace.c - reading a torch.profiler Chrome trace (plain or gzip JSON) as
 * it streams, keeping the events tf-import uses. */
#include "trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jscan.h"
#include "tf/memory.h"

/* Event names longer than this are kept cut short: no name tf-import
 * reads comes near it. */
enum { NAME_CAP = 4096, SMALL_CAP = 64 };

/* A value read where a time is wanted: the number, or what was there. */
typedef struct time_field {
    int seen;                /* the key appeared (the first occurrence counts) */
    int number;              /* it was a number */
    double value;
    char text[SMALL_CAP + 8];/* the value as written, for messages */
} time_field;

/* The args of a "[memory]" event that tf-import reads, in this order. */
static const char *const MEM_ARGS[] = {"Bytes", "Total Allocated", "Device Type", "Device Id"};
enum { N_MEM_ARGS = 4 };

/* The fields of one event that tf-import reads. */
typedef struct event {
    tfi_js_text name, cat, ph, key;
    int seen_name, seen_cat, seen_ph;  /* the first occurrence counts */
    int has_name, has_cat, has_ph;     /* ... and it was a string */
    time_field ts, dur;
    time_field args[N_MEM_ARGS];       /* MEM_ARGS, when args is an object */
} event;

/* Reads 1-6 digits at *p into *value (<= TFI_MAX_INDEX); advances *p. */
static int read_index(const char **p, int *value)
{
    const char *c = *p;
    long v = 0;
    while (*c >= '0' && *c <= '9' && c - *p < 6)
        v = v * 10 + (*c++ - '0');
    if (c == *p || (*c >= '0' && *c <= '9') || v > 65535)
        return -1;
    *value = (int)v;
    *p = c;
    return 0;
}

static void set_action(tfi_span *s, int which, const tf_action *a)
{
    s->u.pp.stage[which] = (uint16_t)a->stage;
    s->u.pp.microbatch[which] = (uint16_t)a->microbatch;
    s->types = (unsigned char)(s->types | (unsigned)a->type << (2 * which));
}

/* An overlapped pair "(0F7;7B3)OVERLAP_F_B" (after "PP:"). */
static int parse_pair(const char *p, tfi_span *s)
{
    tf_action pair[2];
    int count;
    if (tf_cell_parse(p, pair, &count, NULL) || count != 2)
        return -1;
    for (int k = 0; k < 2; k++) {
        if (pair[k].stage > 65535 || pair[k].microbatch > 65535)
            return -1;
        set_action(s, k, &pair[k]);
    }
    s->pp = TFI_PP_OVERLAP;
    return 0;
}

/* Parses what follows "PP:" as _Action.__repr__ writes it into s.
 * Returns 0, or -1 when the name is not one of the runtime's. */
static int parse_pp(const char *name, tfi_span *s)
{
    static const struct { const char *word; tfi_pp_kind kind; } words[] = {
        /* The waits first: "W" would take their first letter. */
        {"WAIT_SEND_F", TFI_PP_WAIT}, {"WAIT_SEND_B", TFI_PP_WAIT},
        {"WAIT_REDUCE_GRAD", TFI_PP_STAGE_ONLY},
        {"SEND_F", TFI_PP_SEND_F}, {"RECV_F", TFI_PP_RECV_F}, {"SEND_B", TFI_PP_SEND_B},
        {"RECV_B", TFI_PP_RECV_B}, {"UNSHARD", TFI_PP_STAGE_ONLY},
        {"RESHARD", TFI_PP_STAGE_ONLY}, {"REDUCE_GRAD", TFI_PP_STAGE_ONLY},
        {"F", TFI_PP_COMPUTE}, {"B", TFI_PP_COMPUTE}, {"I", TFI_PP_COMPUTE},
        {"W", TFI_PP_COMPUTE}};
    const char *p = name + 3;
    if (p[0] == '(')
        return parse_pair(p, s);
    tf_action a = {.type = TF_ACT_F, .rank = -1};
    if (read_index(&p, &a.stage))
        return -1;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t len = strlen(words[w].word);
        if (strncmp(p, words[w].word, len) != 0)
            continue;
        p += len;
        s->pp = (unsigned char)words[w].kind;
        if (words[w].kind == TFI_PP_COMPUTE)
            tf_action_type_parse(words[w].word[0], &a.type);
        if (words[w].kind != TFI_PP_STAGE_ONLY && (read_index(&p, &a.microbatch)))
            return -1;
        set_action(s, 0, &a);
        return *p ? -1 : 0;
    }
    return -1;
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

/* N of "ProfilerStep#N", or -1 when name is not one. */
static long step_number(const char *name)
{
    if (strncmp(name, "ProfilerStep#", 13) != 0)
        return -1;
    char *end;
    errno = 0;
    long n = strtol(name + 13, &end, 10);
    return end == name + 13 || *end || errno || n < 0 || name[13] == '-' ? -1 : n;
}

/* Which kind of span an event is, or -1 to skip it. */
static int classify(const char *name, const char *cat, tfi_span *s)
{
    s->gpu = cat && strcmp(cat, "gpu_user_annotation") == 0;
    /* Annotations: Kineto's two categories, or none at all (legacy). */
    int annotation = !cat || s->gpu || strcmp(cat, "user_annotation") == 0;
    if (annotation && strncmp(name, "PP:", 3) == 0)
        return TFI_SPAN_PP;
    if (annotation && (s->u.step = step_number(name)) >= 0)
        return TFI_SPAN_STEP;
    int device_side = cat && (strncmp(cat, "gpu_", 4) == 0 || strcmp(cat, "kernel") == 0);
    if (!device_side && is_receive(name))
        return TFI_SPAN_RECV;
    return -1;
}

/* Reads a time field's value: a number, or what stood there. */
static int read_time(tfi_jscan *j, event *e, time_field *t)
{
    int c = tfi_js_peek(j);
    t->seen = 1;
    if (c == '-' || (c >= '0' && c <= '9')) {
        t->number = 1;
        return tfi_js_number(j, &t->value, t->text, sizeof t->text);
    }
    if (c == '"') {
        int rc = tfi_js_string(j, &e->key);
        snprintf(t->text, sizeof t->text, "\"%.*s%s\"", SMALL_CAP, e->key.s,
                 e->key.truncated || e->key.len > SMALL_CAP ? "..." : "");
        return rc;
    }
    snprintf(t->text, sizeof t->text, "%s", c == '{' ? "an object" : c == '[' ? "an array" :
             c == 't' ? "true" : c == 'f' ? "false" : "null");
    return tfi_js_skip(j);
}

/* Reads a string field the first time its key appears (cJSON's lookup
 * took the first of two); a value of another kind counts as absent. */
static int read_text(tfi_jscan *j, tfi_js_text *into, int *seen, int *has)
{
    int first = !*seen;
    *seen = 1;
    if (!first || tfi_js_peek(j) != '"')
        return tfi_js_skip(j);
    *has = 1;
    return tfi_js_string(j, into);
}

/* Reads the members of args that a "[memory]" event carries (MEM_ARGS),
 * skipping every other; args of any other kind is skipped. */
static int read_args(tfi_jscan *j, event *e)
{
    if (tfi_js_peek(j) != '{')
        return tfi_js_skip(j);
    long members = 0;
    int rc = tfi_js_enter(j, '{'), more = 0;
    while (rc == 0 && (more = tfi_js_more(j, '}', &members)) == 1) {
        if ((rc = tfi_js_key(j, &e->key)))
            break;
        int k = 0;
        while (k < N_MEM_ARGS && (e->key.truncated || strcmp(e->key.s, MEM_ARGS[k]) != 0))
            k++;
        rc = k < N_MEM_ARGS && !e->args[k].seen ? read_time(j, e, &e->args[k]) : tfi_js_skip(j);
    }
    return rc ? rc : (more < 0 ? more : 0);
}

/* Reads the members of one event object into e. */
static int read_event(tfi_jscan *j, event *e)
{
    e->seen_name = e->seen_cat = e->seen_ph = e->has_name = e->has_cat = e->has_ph = 0;
    e->ts.seen = e->ts.number = e->dur.seen = e->dur.number = 0;
    for (int k = 0; k < N_MEM_ARGS; k++)
        e->args[k].seen = e->args[k].number = 0;
    long members = 0;
    int rc = tfi_js_enter(j, '{'), more = 0;
    while (rc == 0 && (more = tfi_js_more(j, '}', &members)) == 1) {
        if ((rc = tfi_js_key(j, &e->key)))
            break;
        const char *k = e->key.truncated ? "" : e->key.s;
        if (strcmp(k, "name") == 0)
            rc = read_text(j, &e->name, &e->seen_name, &e->has_name);
        else if (strcmp(k, "ph") == 0)
            rc = read_text(j, &e->ph, &e->seen_ph, &e->has_ph);
        else if (strcmp(k, "cat") == 0)
            rc = read_text(j, &e->cat, &e->seen_cat, &e->has_cat);
        else if ((strcmp(k, "ts") == 0 && !e->ts.seen) || (strcmp(k, "dur") == 0 && !e->dur.seen))
            rc = read_time(j, e, k[0] == 't' ? &e->ts : &e->dur);
        else if (strcmp(k, "args") == 0)
            rc = read_args(j, e);
        else
            rc = tfi_js_skip(j);
    }
    return rc ? rc : (more < 0 ? more : 0);
}

/* Checks ts or dur of event i; a bad value is an error naming it. */
static int check_time(const char *path, long i, const event *e, const char *key,
                      const time_field *t, tf_error *err)
{
    int is_ts = key[0] == 't';
    if (t->number && isfinite(t->value) && (t->value >= 0 || is_ts) && fabs(t->value) < 1e18)
        return 0;
    return tf_fail(err, TF_EINVAL, "%s: event %ld (\"%.200s\"): %s: expected a %s, got %s",
                   path, i, e->name.s, key, is_ts ? "finite number" : "number >= 0",
                   t->seen ? t->text : "nothing");
}

/* FNV-1a over len bytes, continuing from h. */
static uint64_t hash_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t k = 0; k < len; k++)
        h = (h ^ p[k]) * 0x100000001b3ull;
    return h;
}

/* Makes room for one more of the n items of `size` bytes at items (room
 * of them now), doubling it, within TFI_MAX_SPANS; `what` names them.
 * *out is the array to use from now on (items, or its larger copy). */
static int grow(const tfi_trace *t, void *items, int n, int *room, size_t size,
                const char *what, void **out, tf_error *err)
{
    *out = items;
    if (n < *room)
        return 0;
    if (*room >= TFI_MAX_SPANS)
        return tf_fail(err, TF_EINVAL, "%s: more than %d %s: too many to be one profiled run; "
                       "profile fewer steps", t->path, TFI_MAX_SPANS, what);
    int grown = *room ? 2 * *room : 1024;
    void *bigger = realloc(items, (size_t)grown * size);
    if (!bigger)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory after keeping %d %s (%zu MiB of "
                       "them)", t->path, n, what, ((size_t)n * size) >> 20);
    *out = bigger;
    *room = grown;
    return 0;
}

/* Appends span s to t. */
static int keep(tfi_trace *t, const tfi_span *s, int *room, tf_error *err)
{
    void *spans;
    int rc = grow(t, t->spans, t->n_spans, room, sizeof *s,
                  "events tf-import reads (PP: annotations, ProfilerStep#N spans and receives)",
                  &spans, err);
    t->spans = spans;
    if (rc == 0)
        t->spans[t->n_spans++] = *s;
    return rc;
}

/* Appends memory event m to t. */
static int keep_memory(tfi_trace *t, const tfi_mem_event *m, int *room, tf_error *err)
{
    void *mem;
    int rc = grow(t, t->mem, t->n_mem, room, sizeof *m, "[memory] events", &mem, err);
    t->mem = mem;
    if (rc == 0)
        t->mem[t->n_mem++] = *m;
    return rc;
}

/* Records the first unreadable PP: name of a side. */
static void note_bad_name(tfi_trace *t, const tfi_span *s, const char *name)
{
    tfi_bad_name *bad = &t->bad[s->gpu];
    if (bad->index >= 0)
        return;
    bad->index = s->index;
    snprintf(bad->name, sizeof bad->name, "%s", name);
}

/* Checks arg k of "[memory]" event i: a finite number within [lo, hi]. */
static int check_mem_arg(const char *path, long i, const event *e, int k, double lo, double hi,
                         tf_error *err)
{
    const time_field *a = &e->args[k];
    if (a->number && isfinite(a->value) && a->value >= lo && a->value <= hi)
        return 0;
    return tf_fail(err, TF_EINVAL, "%s: event %ld (\"[memory]\"): args.%s: expected a number "
                   "from %g to %g, got %s", path, i, MEM_ARGS[k], lo, hi,
                   a->seen ? a->text : "nothing");
}

/* Appends "[memory]" event i to t's memory events, its fields checked. */
static int take_memory(tfi_trace *t, long i, const event *e, int *room, tf_error *err)
{
    static const double range[N_MEM_ARGS][2] = {
        {-TF_MAX_BYTES, TF_MAX_BYTES}, {0, TF_MAX_BYTES}, {0, 32767}, {-1, 32767}};
    int rc = check_time(t->path, i, e, "ts", &e->ts, err);
    for (int k = 0; rc == 0 && k < N_MEM_ARGS; k++)
        rc = check_mem_arg(t->path, i, e, k, range[k][0], range[k][1], err);
    if (rc)
        return rc;
    tfi_mem_event m = {.ts = e->ts.value, .bytes = e->args[0].value,
                       .total = e->args[1].value, .index = (int)i,
                       .device_type = (int16_t)e->args[2].value,
                       .device_id = (int16_t)e->args[3].value};
    return keep_memory(t, &m, room, err);
}

/* Turns event i into a span or a memory event of t when it is one
 * tf-import reads; room[0] and room[1] are the two arrays' room. */
static int take_event(tfi_trace *t, long i, const event *e, int *room, tf_error *err)
{
    if (e->has_name && e->has_ph && strcmp(e->name.s, "[memory]") == 0 &&
        (strcmp(e->ph.s, "i") == 0 || strcmp(e->ph.s, "I") == 0))
        return take_memory(t, i, e, room + 1, err);
    if (!e->has_name || !e->has_ph || strcmp(e->ph.s, "X") != 0)
        return 0;
    tfi_span s = {.index = (int)i};
    int kind = classify(e->name.s, e->has_cat ? e->cat.s : NULL, &s);
    if (kind < 0)
        return 0;
    int rc = check_time(t->path, i, e, "ts", &e->ts, err);
    if (rc == 0)
        rc = check_time(t->path, i, e, "dur", &e->dur, err);
    if (rc)
        return rc;
    s.kind = (unsigned char)kind;
    s.start = e->ts.value;
    s.end = e->ts.value + e->dur.value;
    if (kind == TFI_SPAN_PP) {
        t->pp_events[s.gpu]++;
        if (e->name.truncated || parse_pp(e->name.s, &s)) {
            note_bad_name(t, &s, e->name.s);
            return 0;
        }
    }
    t->fingerprint = hash_bytes(hash_bytes(t->fingerprint, e->name.s, e->name.len), &s,
                                sizeof s);
    return keep(t, &s, room, err);
}

/* The elements of the event list, each an event or skipped. */
static int read_events(tfi_jscan *j, tfi_trace *t, tf_progress *progress, tf_error *err)
{
    char name[NAME_CAP], cat[SMALL_CAP], ph[8], key[SMALL_CAP];
    event e = {.name = {name, sizeof name, 0, 0}, .cat = {cat, sizeof cat, 0, 0},
               .ph = {ph, sizeof ph, 0, 0}, .key = {key, sizeof key, 0, 0}};
    long count = 0;
    int room[2] = {0, 0}, more = 0, rc = tfi_js_enter(j, '[');
    while (rc == 0 && (more = tfi_js_more(j, ']', &count)) == 1) {
        if (count > 2000000000L)
            return tf_fail(err, TF_EINVAL, "%s: more than 2e9 events", t->path);
        if (tfi_js_peek(j) != '{')
            rc = tfi_js_skip(j);
        else if ((rc = read_event(j, &e)) == 0)
            rc = take_event(t, count - 1, &e, room, err);
        if ((count & 0xffff) == 0 && tf_progress_due(progress))
            tf_progress_note(progress, "reading %s: %llu MB, %ld events", t->path,
                             (unsigned long long)(tfi_js_consumed(j) / 1000000), count);
    }
    return rc ? rc : (more < 0 ? more : 0);
}

/* Reads a number into *v and its token, or passes over a value of any
 * other kind (the token then empty, *v NAN). */
static int number_or_skip(tfi_jscan *j, double *v, char *token, size_t size)
{
    int c = tfi_js_peek(j);
    token[0] = '\0';
    *v = NAN;
    if (c == '-' || (c >= '0' && c <= '9'))
        return tfi_js_number(j, v, token, size);
    return tfi_js_skip(j);
}

/* Reads distributedInfo's integer field (rank, world_size) into *out. */
static int info_int(tfi_jscan *j, const char *path, const char *key, int *out, tf_error *err)
{
    char token[SMALL_CAP];
    double v;
    int rc = number_or_skip(j, &v, token, sizeof token);
    if (rc)
        return rc;
    if (v >= 0 && v <= 1e6 && v == floor(v)) {
        *out = (int)v;
        return 0;
    }
    return tf_fail(err, TF_EINVAL, "%s: distributedInfo.%s: expected an integer >= 0, got %s",
                   path, key, token[0] ? token : "something else");
}

/* distributedInfo: rank and world_size, when present (a non-object is
 * ignored, as are its other fields). */
static int read_info(tfi_jscan *j, tfi_trace *t, tfi_js_text *key, tf_error *err)
{
    if (tfi_js_peek(j) != '{')
        return tfi_js_skip(j);
    long members = 0;
    int rc = tfi_js_enter(j, '{'), more = 0;
    while (rc == 0 && (more = tfi_js_more(j, '}', &members)) == 1) {
        if ((rc = tfi_js_key(j, key)))
            break;
        if (strcmp(key->s, "rank") == 0 && !key->truncated)
            rc = info_int(j, t->path, "rank", &t->rank, err);
        else if (strcmp(key->s, "world_size") == 0 && !key->truncated)
            rc = info_int(j, t->path, "world_size", &t->world_size, err);
        else
            rc = tfi_js_skip(j);
    }
    if (rc || more < 0)
        return rc ? rc : more;
    if (t->rank >= 0 && t->world_size >= 0 && t->rank >= t->world_size)
        return tf_fail(err, TF_EINVAL, "%s: distributedInfo.rank %d is not below world_size %d",
                       t->path, t->rank, t->world_size);
    return 0;
}

/* baseTimeNanoseconds: an integer number of nanoseconds in [0, 2^63),
 * read exactly (a double would keep only 256 ns of a time since 1970). */
static int read_base(tfi_jscan *j, tfi_trace *t, tf_error *err)
{
    char token[SMALL_CAP];
    double v;
    int rc = number_or_skip(j, &v, token, sizeof token);
    if (rc)
        return rc;
    char *end;
    errno = 0;
    long long exact = strtoll(token, &end, 10);
    if (token[0] && *end == '\0' && errno == 0 && exact >= 0) {
        t->base_ns = exact;
    } else if (v >= 0 && v < 9.2e18 && v == floor(v)) {
        t->base_ns = (int64_t)v;
    } else {
        return tf_fail(err, TF_EINVAL, "%s: baseTimeNanoseconds: expected a time in "
                       "nanoseconds, an integer from 0 to 2^63 - 1, got %s", t->path,
                       token[0] ? token : "something else");
    }
    t->has_clock = 1;
    return 0;
}

/* Kineto's object: traceEvents, distributedInfo, baseTimeNanoseconds; any
 * other member is skipped. */
static int read_object(tfi_jscan *j, tfi_trace *t, tf_progress *progress, tf_error *err)
{
    char key_buf[SMALL_CAP];
    tfi_js_text key = {key_buf, sizeof key_buf, 0, 0};
    int events = 0, rc = tfi_js_enter(j, '{'), more = 0;
    long members = 0;
    const char *why = "an object without \"traceEvents\"";
    while (rc == 0 && (more = tfi_js_more(j, '}', &members)) == 1) {
        if ((rc = tfi_js_key(j, &key)))
            break;
        const char *k = key.truncated ? "" : key.s;
        if (strcmp(k, "traceEvents") == 0 && !events) {
            events = tfi_js_peek(j) == '[';
            why = "an object whose traceEvents is not an array";
            rc = events ? read_events(j, t, progress, err) : tfi_js_skip(j);
        } else if (strcmp(k, "distributedInfo") == 0) {
            rc = read_info(j, t, &key, err);
        } else if (strcmp(k, "baseTimeNanoseconds") == 0) {
            rc = read_base(j, t, err);
        } else {
            rc = tfi_js_skip(j);
        }
    }
    if (rc || more < 0)
        return rc ? rc : more;
    if ((rc = tfi_js_finish(j)) || events)
        return rc;
    return tf_fail(err, TF_EINVAL, "%s: not a trace: expected a Chrome trace (an object with "
                   "a \"traceEvents\" array, or an array of events), got %s", t->path, why);
}

/* The whole document: Kineto's object or the legacy bare array. */
static int read_document(tfi_jscan *j, tfi_trace *t, tf_progress *progress, tf_error *err)
{
    int c = tfi_js_peek(j), rc;
    if (c == '{')
        return read_object(j, t, progress, err);
    if (c == '[')
        return (rc = read_events(j, t, progress, err)) ? rc : tfi_js_finish(j);
    if (c < -1)
        return c;
    if (c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
        if ((rc = tfi_js_skip(j)) || (rc = tfi_js_finish(j)))
            return rc;
        return tf_fail(err, TF_EINVAL, "%s: not a trace: expected a Chrome trace (an object "
                       "with a \"traceEvents\" array, or an array of events), got a JSON "
                       "value that is neither", t->path);
    }
    return tfi_js_skip(j); /* reports the syntax error, or the empty file */
}

static int by_start(const void *pa, const void *pb)
{
    const tfi_span *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Sorts n items of base by cmp unless they already are (as writers mostly
 * leave them). */
static void sort_unless_sorted(void *base, int n, size_t size,
                               int (*cmp)(const void *, const void *))
{
    const char *p = base;
    for (int i = 1; i < n; i++)
        if (cmp(p + (size_t)(i - 1) * size, p + (size_t)i * size) > 0) {
            qsort(base, (size_t)n, size, cmp);
            return;
        }
}

static int mem_by_time(const void *pa, const void *pb)
{
    const tfi_mem_event *a = pa, *b = pb;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

int tfi_trace_load(const char *path, tf_progress *progress, tfi_trace *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    out->rank = out->world_size = -1;
    out->bad[0].index = out->bad[1].index = -1;
    out->fingerprint = 0xcbf29ce484222325ull;
    if (!(out->path = strdup(path)))
        return tf_fail(err, TF_ENOMEM, "%s: out of memory", path);
    tfi_jscan j;
    int rc = tfi_js_open(&j, path, TFI_MAX_TRACE_BYTES, err);
    if (rc == 0) {
        rc = read_document(&j, out, progress, err);
        tfi_js_close(&j);
    }
    if (rc) {
        tfi_trace_free(out);
        return rc;
    }
    out->fingerprint = hash_bytes(out->fingerprint, &out->base_ns, sizeof out->base_ns);
    out->fingerprint = hash_bytes(out->fingerprint, &out->rank, sizeof out->rank);
    sort_unless_sorted(out->spans, out->n_spans, sizeof *out->spans, by_start);
    sort_unless_sorted(out->mem, out->n_mem, sizeof *out->mem, mem_by_time);
    return 0;
}

void tfi_trace_drop_spans(tfi_trace *t)
{
    free(t->spans);
    t->spans = NULL;
    t->n_spans = 0;
}

void tfi_trace_free(tfi_trace *t)
{
    free(t->spans);
    free(t->mem);
    free(t->path);
    memset(t, 0, sizeof *t);
}

void tfi_span_action(const tfi_span *s, int which, tf_action *out)
{
    out->type = (tf_action_type)(s->types >> (2 * which) & 3);
    out->stage = s->u.pp.stage[which];
    out->microbatch = s->u.pp.microbatch[which];
    out->rank = -1;
    out->pair = s->pp == TFI_PP_OVERLAP ? (which ? TF_PAIR_SECOND : TF_PAIR_FIRST)
                                        : TF_PAIR_NONE;
}

const char *tfi_span_name(const tfi_span *s, char *buf)
{
    tf_action a, b;
    char cell[TF_CELL_MAX];
    tfi_span_action(s, 0, &a);
    if (s->pp == TFI_PP_OVERLAP) {
        tfi_span_action(s, 1, &b);
        tf_pair_format(&a, &b, cell);
    } else {
        tf_action_format(&a, cell);
    }
    snprintf(buf, TF_CELL_MAX + 3, "PP:%s", cell);
    return buf;
}
