/* checkpoint.c - atomic checkpoints (see checkpoint.h for the format). */
#include "tfx/checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "check.h"
#include "tf/schedule.h"
#include "tf/util.h"

#define FILE_NAME "tf-exec.ckpt"

/* A growable byte buffer for writing, a cursor for reading. */
typedef struct bytes {
    unsigned char *data;
    size_t len, cap;
    int oom;
} bytes;

static void put(bytes *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d) {
            b->oom = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
}

static void put_i64(bytes *b, int64_t v) { put(b, &v, sizeof v); }

typedef struct cursor {
    const unsigned char *data;
    size_t len, pos;
    int short_read;
} cursor;

static void get(cursor *c, void *dst, size_t n)
{
    if (c->short_read || c->len - c->pos < n) {
        c->short_read = 1;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, c->data + c->pos, n);
    c->pos += n;
}

static int64_t get_i64(cursor *c)
{
    int64_t v;
    get(c, &v, sizeof v);
    return v;
}

uint64_t tfx_checkpoint_checksum(const void *data, size_t n)
{
    const unsigned char *d = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= d[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

char *tfx_checkpoint_path(const char *dir, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", dir, FILE_NAME);
    return buf;
}

/* The shape fields in file order, so save, load and the comparison agree. */
enum { SHAPE_FIELDS = 10, MODEL_FIELDS_END = 4, SELECT_FIELD = 8, HEADS_FIELD = 9 };

static void shape_fields(const tfx_checkpoint_meta *m, int64_t v[SHAPE_FIELDS])
{
    v[0] = m->model.layers;
    v[1] = m->model.hidden;
    v[2] = m->model.ffn;
    v[3] = m->model.context;
    v[4] = m->model.microbatch_size;
    v[5] = m->stages;
    v[6] = m->microbatches;
    v[7] = (int64_t)m->seed;
    v[8] = m->select_method;
    v[9] = m->model.heads;
}

static const char *const shape_names[SHAPE_FIELDS] = {
    "layers", "hidden", "ffn", "context", "microbatch_size",
    "stages", "microbatches", "seed", "freeze_select", "heads"};

/* Whether shape field i describes the model's weights (what --init needs
 * to match) rather than the run (microbatch size, pipeline, seed). */
static int is_weight_field(int i)
{
    return i < MODEL_FIELDS_END || i == HEADS_FIELD;
}

/* What the file holds of every tensor, in file order. */
static const tfx_buffer_kind stored_kinds[3] = {TFX_BUF_PARAM, TFX_BUF_ADAM_M, TFX_BUF_ADAM_V};

/* The largest tensor's element count: one host buffer serves them all. */
static size_t largest_tensor(const tfx_model_layout *l)
{
    size_t max_count = 0;
    for (int t = 0; t < l->n_tensors; t++)
        if (l->tensors[t].count > max_count)
            max_count = l->tensors[t].count;
    return max_count;
}

/* --freeze-select stable: every tensor's statistics, after the tensor
 * records: steps without a gradient, P, the element count (0: not
 * tracked) and both running averages. */
static void put_statistics(bytes *b, const tfx_freeze_selector *sel)
{
    for (int t = 0; t < sel->n_tensors; t++) {
        put_i64(b, sel->stale[t]);
        put(b, &sel->perturbation[t], sizeof(double));
        put_i64(b, (int64_t)sel->size[t]);
        if (sel->size[t]) {
            put(b, sel->avg_grad[t], sel->size[t] * sizeof(float));
            put(b, sel->avg_abs[t], sel->size[t] * sizeof(float));
        }
    }
}

int tfx_checkpoint_save(const char *dir, tfx_pipeline *p, const tfx_freeze_selector *sel,
                        const tfx_checkpoint_meta *meta, tf_error *err)
{
    int rc = 0;
    bytes b = {0};
    float *host = NULL;
    char path[4096];
    tfx_checkpoint_path(dir, path, sizeof path);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return tf_fail(err, TF_EIO, "--checkpoint %s: cannot create the directory: %s", dir,
                       strerror(errno));

    const tfx_model_layout *l = tfx_pipeline_layout(p);
    put(&b, TFX_CHECKPOINT_MAGIC, 8);
    int64_t shape[SHAPE_FIELDS];
    shape_fields(meta, shape);
    for (int i = 0; i < SHAPE_FIELDS; i++)
        put_i64(&b, shape[i]);
    char name[64] = {0};
    snprintf(name, sizeof name, "%s", meta->schedule);
    put(&b, name, sizeof name);
    put_i64(&b, meta->step);
    put_i64(&b, sel->stages);
    for (int s = 0; s < sel->stages; s++)
        put_i64(&b, sel->rotate_offset[s]);
    put_i64(&b, l->n_tensors);
    TFX_CALLOC(host, largest_tensor(l));
    for (int t = 0; t < l->n_tensors; t++) {
        size_t n = l->tensors[t].count;
        put_i64(&b, tfx_pipeline_tensor_steps(p, t));
        put_i64(&b, (int64_t)n);
        for (int k = 0; k < 3; k++) {
            tfx_pipeline_read_tensor(p, t, stored_kinds[k], host);
            put(&b, host, n * sizeof(float));
        }
    }
    if (meta->select_method == TFX_SELECT_STABLE)
        put_statistics(&b, sel);
    uint64_t sum = b.oom ? 0 : tfx_checkpoint_checksum(b.data, b.len);
    put(&b, &sum, sizeof sum);
    if (b.oom) {
        rc = tf_fail(err, TF_ENOMEM, "%s:%d: out of memory building the checkpoint", __FILE__,
                     __LINE__);
        goto fail;
    }
    TFX_TRY(tf_write_file_atomic(path, b.data, b.len, err));
fail:
    free(host);
    free(b.data);
    return rc;
}

/* ---- reading ---------------------------------------------------------------- */

/* A checkpoint file read whole, its checksum checked and its header parsed
 * and range-checked; `tensors` is the cursor at the first tensor record.  A
 * right checksum proves the file intact, not valid: every field that
 * becomes a count, an index or a value is checked before it is used. */
typedef struct ckpt {
    char path[4096];
    char *data;
    int64_t shape[SHAPE_FIELDS];
    char schedule[64];
    long step;
    int stages;               /* the freeze selector's */
    long *offsets;            /* its rotate offsets, stages */
    int64_t n_tensors;
    cursor tensors;
    cursor statistics;        /* stable's, after the tensors (set by check_tensors) */
} ckpt;

/* Largest step count or tensor update count a checkpoint may hold. */
#define MAX_STEPS ((int64_t)1 << 40)

/* The most bytes a checkpoint of a model with layout l can take: the
 * header, a selector of up to TF_MAX_STAGES stages, and each tensor's
 * record (two counts, the parameters and both moments).  A larger file is
 * refused unread, so /dev/zero or a runaway file costs no memory. */
static size_t largest_checkpoint(const tfx_model_layout *l)
{
    size_t bytes = 8 + 8 * SHAPE_FIELDS + 64 + 8 + 8 + 8 * (size_t)TF_MAX_STAGES + 8 + 8;
    for (int t = 0; t < l->n_tensors; t++) /* the record, and stable's statistics */
        bytes += 16 + 3 * l->tensors[t].count * sizeof(float) +
                 24 + 2 * l->tensors[t].count * sizeof(float);
    return bytes;
}

/* The formats before TFX_CHECKPOINT_MAGIC, and why they cannot be read. */
static const struct {
    char magic[9];
    const char *why;
} OLD_FORMATS[] = {
    {"TFXCKPT1", "whose model had no attention"},
    {"TFXCKPT2", "whose random streams (initial weights, data windows, freeze choices) "
                 "differ from this one's, so going on from it would mix the numbers of two "
                 "generators"},
};

/* TF_EINVAL naming the old format of `data` (len bytes) and the current
 * one, or 0 when it is not an old format. */
static int refuse_old_format(const char *path, const char *data, size_t len, tf_error *err)
{
    for (size_t i = 0; i < sizeof OLD_FORMATS / sizeof OLD_FORMATS[0]; i++)
        if (len >= 8 && memcmp(data, OLD_FORMATS[i].magic, 8) == 0)
            return tf_fail(err, TF_EINVAL, "checkpoint %s: format %s, written by an older "
                           "tf-exec %s; this tf-exec reads %s only (train again from scratch)",
                           path, OLD_FORMATS[i].magic, OLD_FORMATS[i].why,
                           TFX_CHECKPOINT_MAGIC);
    return 0;
}

/* Reads the file whole (at most limit bytes) and checks its magic and
 * checksum; *c gets the part between them. */
static int read_checked(const char *path, size_t limit, char **data, cursor *c, tf_error *err)
{
    size_t len = 0;
    int rc = tf_read_file_limit(path, limit, data, &len, err);
    if (rc < 0)
        return rc;
    rc = refuse_old_format(path, *data, len, err);
    if (rc < 0)
        return rc;
    if (len < 8 + sizeof(uint64_t) || memcmp(*data, TFX_CHECKPOINT_MAGIC, 8) != 0)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: not a tf-exec checkpoint (bad magic)",
                       path);
    uint64_t stored;
    memcpy(&stored, *data + len - sizeof stored, sizeof stored);
    if (tfx_checkpoint_checksum(*data, len - sizeof stored) != stored)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: checksum mismatch (damaged file)", path);
    *c = (cursor){(const unsigned char *)*data + 8, len - 8 - sizeof stored, 0, 0};
    return 0;
}

/* An int64 field that must lie in [lo, hi]. */
static int get_ranged(ckpt *k, cursor *c, const char *field, int64_t lo, int64_t hi,
                      int64_t *out, tf_error *err)
{
    *out = get_i64(c);
    if (c->short_read)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: truncated before %s", k->path, field);
    if (*out < lo || *out > hi)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: %s = %lld, expected %lld to %lld",
                       k->path, field, (long long)*out, (long long)lo, (long long)hi);
    return 0;
}

static int read_header(ckpt *k, cursor *c, tf_error *err)
{
    int rc = 0;
    int64_t v;
    for (int i = 0; i < SHAPE_FIELDS; i++)
        k->shape[i] = get_i64(c);
    get(c, k->schedule, sizeof k->schedule);
    k->schedule[sizeof k->schedule - 1] = '\0';
    TFX_TRY(get_ranged(k, c, "step", 0, MAX_STEPS, &v, err));
    k->step = (long)v;
    TFX_TRY(get_ranged(k, c, "selector stages", 1, 1 << 16, &v, err));
    k->stages = (int)v;
    TFX_CALLOC(k->offsets, k->stages);
    for (int s = 0; s < k->stages; s++) {
        TFX_TRY(get_ranged(k, c, "rotate offset", 0, 1 << 20, &v, err));
        k->offsets[s] = (long)v;
    }
    TFX_TRY(get_ranged(k, c, "tensor count", 1, 1 << 24, &k->n_tensors, err));
    k->tensors = *c;
fail:
    return rc;
}

static void ckpt_free(ckpt *k)
{
    free(k->data);
    free(k->offsets);
}

/* Opens DIR's checkpoint of a model with layout l into k; release with
 * ckpt_free either way. */
static int ckpt_open(const char *dir, const tfx_model_layout *l, ckpt *k, tf_error *err)
{
    cursor c = {0};
    memset(k, 0, sizeof *k);
    tfx_checkpoint_path(dir, k->path, sizeof k->path);
    int rc = read_checked(k->path, largest_checkpoint(l), &k->data, &c, err);
    return rc < 0 ? rc : read_header(k, &c, err);
}

/* The stored shape must equal want in the fields `which` selects. */
static int check_shape(const ckpt *k, const tfx_checkpoint_meta *expect, int (*which)(int),
                       const char *advice, tf_error *err)
{
    int64_t want[SHAPE_FIELDS];
    shape_fields(expect, want);
    for (int i = 0; i < SHAPE_FIELDS; i++)
        if ((!which || which(i)) && k->shape[i] != want[i])
            return tf_fail(err, TF_EINVAL, "checkpoint %s: %s = %lld, but this run has %s = "
                           "%lld (%s)",
                           k->path, shape_names[i], (long long)k->shape[i], shape_names[i],
                           (long long)want[i], advice);
    return 0;
}

/* Every value finite; with moments, the second moment not negative. */
static int check_values(const ckpt *k, const tfx_tensor_info *t, const unsigned char *at,
                        tf_error *err)
{
    static const char *const what[3] = {"parameter", "first moment", "second moment"};
    for (int part = 0; part < 3; part++)
        for (size_t i = 0; i < t->count; i++) {
            float v;
            memcpy(&v, at + ((size_t)part * t->count + i) * sizeof v, sizeof v);
            if (!isfinite(v) || (part == 2 && v < 0.0f))
                return tf_fail(err, TF_EINVAL, "checkpoint %s: tensor %s, %s %zu is %g",
                               k->path, t->name, what[part], i, (double)v);
        }
    return 0;
}

/* Stable's statistics of one tensor t at the cursor: steps without a
 * gradient in [0, steps done], P in [0, 1], the element count 0 or the
 * tensor's, both averages finite and EMA(|g|) not negative. */
static int check_tensor_statistics(const ckpt *k, cursor *c, const tfx_tensor_info *t,
                                   tf_error *err)
{
    int64_t stale = get_i64(c), n;
    double p;
    get(c, &p, sizeof p);
    n = get_i64(c);
    if (c->short_read)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: truncated in the gradient statistics",
                       k->path);
    if (stale < 0 || stale > k->step || !(p >= 0.0 && p <= 1.0) ||
        (n != 0 && n != (int64_t)t->count))
        return tf_fail(err, TF_EINVAL, "checkpoint %s: tensor %s: gradient statistics out of "
                       "range (%lld steps without a gradient of %ld, P = %g, %lld values of "
                       "%zu)", k->path, t->name, (long long)stale, k->step, p, (long long)n,
                       t->count);
    for (int64_t i = 0; i < 2 * n; i++) {
        float v;
        get(c, &v, sizeof v);
        if (c->short_read || !isfinite(v) || (i >= n && v < 0.0f))
            return tf_fail(err, TF_EINVAL, "checkpoint %s: tensor %s, gradient average %lld "
                           "is %g", k->path, t->name, (long long)i, (double)v);
    }
    return 0;
}

/* --freeze-select stable: the statistics section, to the file's end. */
static int check_statistics(const ckpt *k, const tfx_model_layout *l, tf_error *err)
{
    cursor c = k->statistics;
    for (int t = 0; t < l->n_tensors; t++) {
        int rc = check_tensor_statistics(k, &c, &l->tensors[t], err);
        if (rc < 0)
            return rc;
    }
    if (c.pos != c.len)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: has trailing data", k->path);
    return 0;
}

/* Checks the tensor records against the model without loading them, so
 * that a bad file changes nothing. */
static int check_tensors(ckpt *k, const tfx_model_layout *l, tf_error *err)
{
    cursor c = k->tensors;
    if (k->n_tensors != l->n_tensors)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: %lld tensors, the model has %d", k->path,
                       (long long)k->n_tensors, l->n_tensors);
    for (int t = 0; t < l->n_tensors; t++) {
        int64_t steps = get_i64(&c), n = get_i64(&c);
        if (!c.short_read && (steps < 0 || steps > k->step))
            return tf_fail(err, TF_EINVAL, "checkpoint %s: tensor %s has %lld optimizer steps, "
                           "expected 0 to %ld", k->path, l->tensors[t].name, (long long)steps,
                           k->step);
        if (!c.short_read && n != (int64_t)l->tensors[t].count)
            return tf_fail(err, TF_EINVAL, "checkpoint %s: tensor %s has %lld values, expected "
                           "%zu", k->path, l->tensors[t].name, (long long)n,
                           l->tensors[t].count);
        if (c.short_read || c.len - c.pos < 3 * l->tensors[t].count * sizeof(float))
            break;
        int rc = check_values(k, &l->tensors[t], c.data + c.pos, err);
        if (rc < 0)
            return rc;
        c.pos += 3 * l->tensors[t].count * sizeof(float);
    }
    k->statistics = c;
    if (c.short_read || (k->shape[SELECT_FIELD] != TFX_SELECT_STABLE && c.pos != c.len))
        return tf_fail(err, TF_EINVAL, "checkpoint %s: truncated or has trailing data", k->path);
    return k->shape[SELECT_FIELD] == TFX_SELECT_STABLE ? check_statistics(k, l, err) : 0;
}

/* Writes the (checked) tensor records into the pipeline: every stored kind,
 * or with params_only the parameters alone (a fresh optimizer). */
static int load_tensors(const ckpt *k, tfx_pipeline *p, int params_only, tf_error *err)
{
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    cursor c = k->tensors;
    int rc = 0;
    float *host = NULL;
    TFX_CALLOC(host, largest_tensor(l));
    for (int t = 0; t < l->n_tensors; t++) {
        long steps = (long)get_i64(&c);
        size_t n = (size_t)get_i64(&c);
        tfx_pipeline_set_tensor_steps(p, t, params_only ? 0 : steps);
        for (int part = 0; part < 3; part++) {
            get(&c, host, n * sizeof(float));
            if (!params_only || part == 0)
                tfx_pipeline_write_tensor(p, t, stored_kinds[part], host);
        }
    }
fail:
    free(host);
    return rc;
}

/* The (checked) statistics into sel, which tracks every stage (a run that
 * checkpoints is one process); a tensor stored untracked keeps sel's. */
static void load_statistics(const ckpt *k, tfx_freeze_selector *sel)
{
    cursor c = k->statistics;
    for (int t = 0; t < sel->n_tensors; t++) {
        sel->stale[t] = (long)get_i64(&c);
        get(&c, &sel->perturbation[t], sizeof(double));
        size_t n = (size_t)get_i64(&c);
        if (n && n == sel->size[t]) {
            get(&c, sel->avg_grad[t], n * sizeof(float));
            get(&c, sel->avg_abs[t], n * sizeof(float));
        } else {
            c.pos += 2 * n * sizeof(float);
        }
    }
}

/* The selector's stages must be the run's, each offset below its stage's
 * tensor count. */
static int check_offsets(const ckpt *k, const tfx_freeze_selector *sel, tf_error *err)
{
    if (k->stages != sel->stages)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: %d selector stages, expected %d",
                       k->path, k->stages, sel->stages);
    for (int s = 0; s < sel->stages; s++)
        if (k->offsets[s] >= sel->stage_tensors[s])
            return tf_fail(err, TF_EINVAL, "checkpoint %s: rotate offset %ld of stage %d, "
                           "which has %d tensors", k->path, k->offsets[s], s,
                           sel->stage_tensors[s]);
    return 0;
}

int tfx_checkpoint_load(const char *dir, tfx_pipeline *p, tfx_freeze_selector *sel,
                        tfx_checkpoint_meta *meta, int *found, tf_error *err)
{
    const tfx_checkpoint_meta *expect = meta;
    int rc = 0;
    ckpt k;
    char path[4096];
    struct stat st;
    *found = 0;
    if (stat(tfx_checkpoint_path(dir, path, sizeof path), &st) != 0)
        return 0; /* no checkpoint yet: start from scratch */
    *found = 1;
    TFX_TRY(ckpt_open(dir, tfx_pipeline_layout(p), &k, err));
    TFX_TRY(check_shape(&k, expect, NULL, "use another --checkpoint directory or the same "
                        "options", err));
    if (strcmp(k.schedule, expect->schedule) != 0) {
        rc = tf_fail(err, TF_EINVAL, "checkpoint %s: schedule = \"%s\", but this run has "
                     "schedule = \"%s\"", k.path, k.schedule, expect->schedule);
        goto fail;
    }
    TFX_TRY(check_offsets(&k, sel, err));
    TFX_TRY(check_tensors(&k, tfx_pipeline_layout(p), err));
    TFX_TRY(load_tensors(&k, p, 0, err));
    for (int s = 0; s < sel->stages; s++)
        sel->rotate_offset[s] = k.offsets[s];
    if (sel->method == TFX_SELECT_STABLE)
        load_statistics(&k, sel);
    meta->step = k.step;
fail:
    ckpt_free(&k);
    return rc;
}

int tfx_checkpoint_load_weights(const char *dir, tfx_pipeline *p, tf_error *err)
{
    int rc = 0;
    ckpt k;
    char path[4096];
    struct stat st;
    if (stat(tfx_checkpoint_path(dir, path, sizeof path), &st) != 0)
        return tf_fail(err, TF_EIO, "--init %s: no checkpoint there (%s: %s)", dir, path,
                       strerror(errno));
    tfx_checkpoint_meta want = {.model = tfx_pipeline_layout(p)->config};
    TFX_TRY(ckpt_open(dir, tfx_pipeline_layout(p), &k, err));
    TFX_TRY(check_shape(&k, &want, is_weight_field, "--init needs the same model sizes; the "
                        "pipeline and the microbatch size may differ", err));
    TFX_TRY(check_tensors(&k, tfx_pipeline_layout(p), err));
    TFX_TRY(load_tensors(&k, p, 1, err));
fail:
    ckpt_free(&k);
    return rc;
}
