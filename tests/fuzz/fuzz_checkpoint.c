/* fuzz_checkpoint.c - libFuzzer target for tf-exec's checkpoints
 * (tfx_checkpoint_load, which reads DIR/tf-exec.ckpt: the input is written
 * there first).  A checkpoint must carry a 64-bit FNV-1a checksum, which a
 * fuzzer cannot forge, so an input whose first byte is not 'R' is a body:
 * the target puts the magic before it and the right checksum after it, and
 * the fuzzer explores what an intact file may say.  'R' + bytes is written
 * as it is (magic and checksum checks).  A checkpoint that loads must be
 * one a run can go on from: steps done and every tensor's optimizer steps
 * at least 0, parameters and moments finite, second moments not negative,
 * freeze rotation offsets not negative, and with --freeze-select stable
 * the gradient statistics in range (a checksum proves the file intact, not
 * valid).  Each input is loaded as a run with the random choice and as one
 * with the stable choice, whose checkpoints hold those statistics.
 *
 * With TF_FUZZ_SEED_DIR set, the first call writes four seeds there (a real
 * checkpoint of the model below under each choice, as a body and raw), for
 * tests/fuzz/run.sh.
 */
#include <math.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "tf/schedule.h"
#include "tf/util.h"
#include "tfx/checkpoint.h"
#include "tfx/freeze_select.h"
#include "tfx/runtime.h"

typedef struct target {
    tfx_pipeline *pipeline;
    tfx_freeze_selector sel, stable;     /* a random and a stable selector */
    tfx_checkpoint_meta meta, stable_meta;
    char dir[300];
    float *host;          /* the largest tensor's values */
} target;

/* The smallest pipeline there is: 1F1B on 2 ranks, 2 microbatches, a
 * 2-block model of width 8 with 2 heads. */
static void make_target(target *t)
{
    tf_error err = {0};
    tf_schedule s;
    tfx_pipeline_options o;
    tfx_pipeline_options_default(&o);
    t->meta = (tfx_checkpoint_meta){.model = {.layers = 2, .hidden = 8, .heads = 2, .ffn = 16,
                                              .context = 4, .microbatch_size = 1},
                                    .stages = 2, .microbatches = 2, .seed = 1,
                                    .select_method = TFX_SELECT_RANDOM, .schedule = "1F1B"};
    if (tf_schedule_build("1F1B", 2, 1, 2, &s, &err) ||
        tfx_pipeline_create(&s, &t->meta.model, &o, &t->pipeline, &err)) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", err.msg);
        abort();
    }
    tf_schedule_free(&s);
    const tfx_model_layout *l = tfx_pipeline_layout(t->pipeline);
    int k[2];
    size_t largest = 0;
    for (int st = 0; st < 2; st++)
        k[st] = l->stage_first_tensor[st + 1] - l->stage_first_tensor[st];
    for (int i = 0; i < l->n_tensors; i++)
        largest = l->tensors[i].count > largest ? l->tensors[i].count : largest;
    t->host = malloc(largest * sizeof *t->host);
    if (!t->host || tfx_freeze_selector_init(&t->sel, TFX_SELECT_RANDOM, 1, 2, k, &err) ||
        tfx_freeze_selector_init(&t->stable, TFX_SELECT_STABLE, 1, 2, k, &err))
        abort();
    size_t sizes[64];
    for (int i = 0; i < l->n_tensors && i < 64; i++)
        sizes[i] = l->tensors[i].count;
    for (int st = 0; st < 2; st++)
        if (tfx_freeze_selector_track(&t->stable, st, sizes + l->stage_first_tensor[st], &err))
            abort();
    t->stable_meta = t->meta;
    t->stable_meta.select_method = TFX_SELECT_STABLE;
    char path[300];
    fuzz_scratch_path("ckpt", path, sizeof path);
    snprintf(t->dir, sizeof t->dir, "%s", path);
    if (mkdir(t->dir, 0700) != 0)
        abort();
}

/* Writes a real checkpoint's body and raw bytes into dir as seeds, their
 * names ending in `suffix`. */
static void write_seed(target *t, const tfx_freeze_selector *sel, tfx_checkpoint_meta *meta,
                       const char *dir, const char *suffix)
{
    tf_error err = {0};
    meta->step = 3;
    if (tfx_checkpoint_save(t->dir, t->pipeline, sel, meta, &err)) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", err.msg);
        abort();
    }
    meta->step = 0;
    char path[600];
    char *data;
    size_t len;
    if (tf_read_file(tfx_checkpoint_path(t->dir, path, sizeof path), &data, &len, &err))
        abort();
    unsigned char *seed = malloc(len + 1);
    if (!seed)
        abort();
    seed[0] = 'R';
    memcpy(seed + 1, data, len);
    snprintf(path, sizeof path, "%s/raw%s", dir, suffix);
    fuzz_write_file(path, seed, len + 1);
    seed[8] = 'C'; /* the body: the bytes between magic and checksum */
    snprintf(path, sizeof path, "%s/body%s", dir, suffix);
    fuzz_write_file(path, seed + 8, len - 8 - 8 + 1);
    free(seed);
    free(data);
}

/* The seeds of both choices; the stable one after a gradient, so that its
 * statistics are not all zero. */
static void write_seeds(target *t, const char *dir)
{
    write_seed(t, &t->sel, &t->meta, dir, "");
    const tfx_model_layout *l = tfx_pipeline_layout(t->pipeline);
    for (int i = 0; i < l->n_tensors; i++) {
        for (size_t j = 0; j < l->tensors[i].count; j++)
            t->host[j] = (float)(j % 3) - 1.0f;
        int st = i < l->stage_first_tensor[1] ? 0 : 1;
        tfx_freeze_selector_observe(&t->stable, st, i - l->stage_first_tensor[st], t->host);
    }
    write_seed(t, &t->stable, &t->stable_meta, dir, "-stable");
}

/* The stable selector's statistics after a checkpoint loaded. */
static void check_statistics(const tfx_freeze_selector *sel, long step)
{
    for (int i = 0; i < sel->n_tensors; i++) {
        FUZZ_CHECK(sel->stale[i] >= 0 && sel->stale[i] <= step,
                   "tensor %d: %ld steps without a gradient accepted", i, sel->stale[i]);
        FUZZ_CHECK(sel->perturbation[i] >= 0.0 && sel->perturbation[i] <= 1.0,
                   "tensor %d: P = %g accepted", i, sel->perturbation[i]);
        for (size_t j = 0; j < sel->size[i]; j++)
            FUZZ_CHECK(isfinite(sel->avg_grad[i][j]) && sel->avg_abs[i][j] >= 0.0f &&
                           isfinite(sel->avg_abs[i][j]),
                       "tensor %d: averages %g, %g accepted", i, (double)sel->avg_grad[i][j],
                       (double)sel->avg_abs[i][j]);
    }
}

/* What a run may rely on after a checkpoint loaded. */
static void check_loaded(target *t, long step)
{
    const tfx_model_layout *l = tfx_pipeline_layout(t->pipeline);
    FUZZ_CHECK(step >= 0, "a checkpoint with %ld steps done was accepted", step);
    for (int s = 0; s < t->sel.stages; s++)
        FUZZ_CHECK(t->sel.rotate_offset[s] >= 0, "rotate offset %ld of stage %d accepted",
                   t->sel.rotate_offset[s], s);
    for (int i = 0; i < l->n_tensors; i++) {
        long steps = tfx_pipeline_tensor_steps(t->pipeline, i);
        FUZZ_CHECK(steps >= 0, "tensor %s with %ld optimizer steps accepted",
                   l->tensors[i].name, steps);
        static const tfx_buffer_kind kinds[3] = {TFX_BUF_PARAM, TFX_BUF_ADAM_M, TFX_BUF_ADAM_V};
        for (int k = 0; k < 3; k++) {
            tfx_pipeline_read_tensor(t->pipeline, i, kinds[k], t->host);
            for (size_t j = 0; j < l->tensors[i].count; j++)
                FUZZ_CHECK(isfinite(t->host[j]) && (k < 2 || t->host[j] >= 0.0f),
                           "tensor %s (buffer %d) value %zu = %g accepted", l->tensors[i].name,
                           k, j, (double)t->host[j]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static target t;
    if (!t.pipeline) {
        make_target(&t);
        const char *seeds = getenv("TF_FUZZ_SEED_DIR");
        if (seeds)
            write_seeds(&t, seeds);
    }
    if (size == 0)
        return 0;
    size_t len = data[0] == 'R' ? size - 1 : 8 + (size - 1) + 8;
    unsigned char *file = malloc(len + 1);
    if (!file)
        abort();
    if (data[0] == 'R') {
        memcpy(file, data + 1, size - 1);
    } else {
        memcpy(file, TFX_CHECKPOINT_MAGIC, 8);
        memcpy(file + 8, data + 1, size - 1);
        uint64_t sum = tfx_checkpoint_checksum(file, len - 8);
        memcpy(file + len - 8, &sum, 8);
    }
    char path[600];
    fuzz_write_file(tfx_checkpoint_path(t.dir, path, sizeof path), file, len);
    free(file);
    tfx_checkpoint_meta meta = t.meta;
    int found = 0;
    tf_error err = {0};
    if (tfx_checkpoint_load(t.dir, t.pipeline, &t.sel, &meta, &found, &err) == 0) {
        FUZZ_CHECK(found, "a written checkpoint was not found");
        check_loaded(&t, meta.step);
    } else {
        FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");
    }
    tf_error stable_err = {0};
    tfx_checkpoint_meta stable_meta = t.stable_meta;
    if (tfx_checkpoint_load(t.dir, t.pipeline, &t.stable, &stable_meta, &found,
                            &stable_err) == 0) {
        check_loaded(&t, stable_meta.step);
        check_statistics(&t.stable, stable_meta.step);
    } else {
        FUZZ_CHECK(stable_err.msg[0] != '\0', "refused without a message (stable)");
    }
    /* --init reads the same file for its weights alone. */
    tf_error init_err = {0};
    if (tfx_checkpoint_load_weights(t.dir, t.pipeline, &init_err) == 0)
        check_loaded(&t, 0);
    else
        FUZZ_CHECK(init_err.msg[0] != '\0', "--init refused without a message");
    return 0;
}
