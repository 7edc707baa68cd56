/* checkpoint.c - atomic checkpoints (see checkpoint.h for the format). */
#include "tfx/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "check.h"
#include "tf/util.h"

#define MAGIC "TFXCKPT1"
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

static uint64_t fnv1a(const unsigned char *d, size_t n)
{
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
static void shape_fields(const tfx_checkpoint_meta *m, int64_t v[10])
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
    v[9] = 0;
}

static const char *const shape_names[10] = {
    "layers", "hidden", "ffn", "context", "microbatch_size",
    "stages", "microbatches", "seed", "freeze_select", "reserved"};

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
    put(&b, MAGIC, 8);
    int64_t shape[10];
    shape_fields(meta, shape);
    for (int i = 0; i < 10; i++)
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
    uint64_t sum = b.oom ? 0 : fnv1a(b.data, b.len);
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

/* Reads the file whole and checks its magic and checksum; *c gets the
 * part between them. */
static int read_checked(const char *path, char **data, cursor *c, tf_error *err)
{
    size_t len = 0;
    int rc = tf_read_file(path, data, &len, err);
    if (rc < 0)
        return rc;
    if (len < 8 + sizeof(uint64_t) || memcmp(*data, MAGIC, 8) != 0)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: not a tf-exec checkpoint (bad magic)",
                       path);
    uint64_t stored;
    memcpy(&stored, *data + len - sizeof stored, sizeof stored);
    if (fnv1a((const unsigned char *)*data, len - sizeof stored) != stored)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: checksum mismatch (damaged file)", path);
    *c = (cursor){(const unsigned char *)*data + 8, len - 8 - sizeof stored, 0, 0};
    return 0;
}

/* The run's shape and schedule must be the ones stored. */
static int check_shape(const char *path, cursor *c, const tfx_checkpoint_meta *expect,
                       tf_error *err)
{
    int64_t want[10], have[10];
    shape_fields(expect, want);
    for (int i = 0; i < 10; i++)
        have[i] = get_i64(c);
    for (int i = 0; i < 10; i++)
        if (have[i] != want[i])
            return tf_fail(err, TF_EINVAL,
                           "checkpoint %s: %s = %lld, but this run has %s = %lld "
                           "(use another --checkpoint directory or the same options)",
                           path, shape_names[i], (long long)have[i], shape_names[i],
                           (long long)want[i]);
    char name[64];
    get(c, name, sizeof name);
    name[63] = '\0';
    if (strcmp(name, expect->schedule) != 0)
        return tf_fail(err, TF_EINVAL,
                       "checkpoint %s: schedule = \"%s\", but this run has schedule = \"%s\"",
                       path, name, expect->schedule);
    return 0;
}

/* The selector's rotate offsets, into offsets (sel->stages). */
static int read_offsets(const char *path, cursor *c, const tfx_freeze_selector *sel,
                        long *offsets, tf_error *err)
{
    int64_t stages = get_i64(c);
    if (stages != sel->stages)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: %lld selector stages, expected %d", path,
                       (long long)stages, sel->stages);
    for (int s = 0; s < sel->stages; s++)
        offsets[s] = (long)get_i64(c);
    return 0;
}

/* Checks the tensor records against the model without reading them, so
 * that a bad file changes nothing. */
static int check_tensors(const char *path, cursor c, const tfx_model_layout *l, tf_error *err)
{
    for (int t = 0; t < l->n_tensors && !c.short_read; t++) {
        (void)get_i64(&c);
        int64_t n = get_i64(&c);
        if (n != (int64_t)l->tensors[t].count)
            return tf_fail(err, TF_EINVAL, "checkpoint %s: tensor %s has %lld values, expected %zu",
                           path, l->tensors[t].name, (long long)n, l->tensors[t].count);
        if (c.len - c.pos < 3 * (size_t)n * sizeof(float))
            c.short_read = 1;
        else
            c.pos += 3 * (size_t)n * sizeof(float);
    }
    if (c.short_read || c.pos != c.len)
        return tf_fail(err, TF_EINVAL, "checkpoint %s: truncated or has trailing data", path);
    return 0;
}

/* Writes the (checked) tensor records into the pipeline. */
static int load_tensors(cursor *c, tfx_pipeline *p, tf_error *err)
{
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    int rc = 0;
    float *host = NULL;
    TFX_CALLOC(host, largest_tensor(l));
    for (int t = 0; t < l->n_tensors; t++) {
        long steps = (long)get_i64(c);
        size_t n = (size_t)get_i64(c);
        tfx_pipeline_set_tensor_steps(p, t, steps);
        for (int k = 0; k < 3; k++) {
            get(c, host, n * sizeof(float));
            tfx_pipeline_write_tensor(p, t, stored_kinds[k], host);
        }
    }
fail:
    free(host);
    return rc;
}

int tfx_checkpoint_load(const char *dir, tfx_pipeline *p, tfx_freeze_selector *sel,
                        const tfx_checkpoint_meta *expect, long *step, int *found,
                        tf_error *err)
{
    int rc = 0;
    char path[4096];
    char *data = NULL;
    long *offsets = NULL;
    cursor c;
    const tfx_model_layout *l = tfx_pipeline_layout(p);
    *found = 0;
    tfx_checkpoint_path(dir, path, sizeof path);
    struct stat st;
    if (stat(path, &st) != 0)
        return 0; /* no checkpoint yet: start from scratch */
    *found = 1;
    TFX_TRY(read_checked(path, &data, &c, err));
    TFX_TRY(check_shape(path, &c, expect, err));
    long done = (long)get_i64(&c);
    TFX_CALLOC(offsets, sel->stages);
    TFX_TRY(read_offsets(path, &c, sel, offsets, err));
    if (get_i64(&c) != l->n_tensors) {
        rc = tf_fail(err, TF_EINVAL, "checkpoint %s: tensor count differs from the model",
                     path);
        goto fail;
    }
    TFX_TRY(check_tensors(path, c, l, err));
    TFX_TRY(load_tensors(&c, p, err));
    for (int s = 0; s < sel->stages; s++)
        sel->rotate_offset[s] = offsets[s];
    *step = done;
fail:
    free(offsets);
    free(data);
    return rc;
}
