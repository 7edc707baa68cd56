/* test_exec_checkpoint.c - training runs resumed from a checkpoint continue
 * bit-identically; bad checkpoints and plans are refused with clear errors. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"
#include "small_plan.h"
#include "temp_dir.h"
#include "tf/util.h"
#include "tfx/checkpoint.h"
#include "tfx/exec.h"
#include "tfx/runtime.h"

typedef struct fixture {
    char dir[64];     /* scratch directory */
    char plan[128];   /* a 1F1B plan for 2 ranks, 4 microbatches */
    FILE *devnull;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    temp_dir_make("tfx_ckpt_", f->dir, sizeof f->dir);
    snprintf(f->plan, sizeof f->plan, "%s/plan.json", f->dir);
    tf_plan plan;
    tf_error err = {0};
    small_1f1b_plan(&plan);
    if (tf_plan_save(&plan, f->plan, &err))
        fail_msg("saving the plan: %s", err.msg);
    tf_plan_free(&plan);
    f->devnull = fopen("/dev/null", "w");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    fclose(f->devnull);
    temp_dir_remove(f->dir);
    free(f);
    return 0;
}

static void small_options(fixture *f, tfx_exec_options *o)
{
    tfx_exec_options_default(o);
    o->model = (tfx_model_config){.layers = 2, .hidden = 16, .heads = 2, .ffn = 32, .context = 8,
                                  .microbatch_size = 2};
    o->plan_path = f->plan;
    o->warmup = 1;
    o->ramp = 2;
    o->checkpoint_every = 0;
    o->progress = 0;
    o->out = f->devnull;
}

/* Losses of a JSON-lines log, in order; returns how many. */
static int read_losses(const char *path, double *loss, int max)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[1024];
    int n = 0;
    while (n < max && fgets(line, sizeof line, fp)) {
        const char *at = strstr(line, "\"loss\": ");
        assert_non_null(at);
        loss[n++] = strtod(at + 8, NULL);
    }
    fclose(fp);
    return n;
}

static void test_resume_is_bit_identical(void **state)
{
    fixture *f = *state;
    for (int method = 0; method < 3; method++) { /* random, rotate, stable */
        char a[128], b[128], log_a[128], log_b[128], ck_a[256], ck_b[256];
        snprintf(a, sizeof a, "%s/a%d", f->dir, method);
        snprintf(b, sizeof b, "%s/b%d", f->dir, method);
        snprintf(log_a, sizeof log_a, "%s/a%d.jsonl", f->dir, method);
        snprintf(log_b, sizeof log_b, "%s/b%d.jsonl", f->dir, method);
        tfx_exec_options o;
        tfx_train_summary sum;
        tf_error err = {0};

        small_options(f, &o);
        o.select = method;
        o.steps = 6;
        o.checkpoint_dir = a;
        o.log_path = log_a;
        if (tfx_exec_train(&o, &sum, &err))
            fail_msg("run a: %s", err.msg);
        assert_int_equal(sum.steps_run, 6);

        o.checkpoint_dir = b;
        o.log_path = log_b;
        o.steps = 3;
        if (tfx_exec_train(&o, &sum, &err))
            fail_msg("run b, first half: %s", err.msg);
        assert_int_equal(sum.steps_run, 3);
        o.steps = 6;
        if (tfx_exec_train(&o, &sum, &err))
            fail_msg("run b, resumed: %s", err.msg);
        assert_int_equal(sum.steps_run, 3);
        assert_int_equal(sum.last_step, 6);

        /* Same losses step by step, and byte-identical final state. */
        double la[8], lb[8];
        assert_int_equal(read_losses(log_a, la, 8), 6);
        assert_int_equal(read_losses(log_b, lb, 8), 6);
        for (int i = 0; i < 6; i++)
            assert_true(la[i] == lb[i]);
        char *da, *db;
        size_t na, nb;
        assert_int_equal(tf_read_file(tfx_checkpoint_path(a, ck_a, sizeof ck_a), &da, &na, NULL), 0);
        assert_int_equal(tf_read_file(tfx_checkpoint_path(b, ck_b, sizeof ck_b), &db, &nb, NULL), 0);
        assert_int_equal(na, nb);
        assert_memory_equal(da, db, na);
        free(da);
        free(db);

        /* Nothing left to do at the last step. */
        if (tfx_exec_train(&o, &sum, &err))
            fail_msg("run b, done: %s", err.msg);
        assert_int_equal(sum.steps_run, 0);
    }
}

static void test_bad_checkpoints_are_refused(void **state)
{
    fixture *f = *state;
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s/bad", f->dir);
    tfx_exec_options o;
    tf_error err = {0};
    small_options(f, &o);
    o.steps = 2;
    o.checkpoint_dir = dir;
    assert_int_equal(tfx_exec_train(&o, NULL, &err), 0);

    /* Another model size: the field and both values are named. */
    o.steps = 4;
    o.model.hidden = 32;
    o.model.ffn = 64;
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "hidden = 16, but this run has hidden = 32");
    small_options(f, &o);
    o.steps = 4;
    o.checkpoint_dir = dir;

    /* A damaged file: one flipped byte. */
    tfx_checkpoint_path(dir, path, sizeof path);
    char *data;
    size_t len;
    assert_int_equal(tf_read_file(path, &data, &len, NULL), 0);
    data[len / 2] ^= 0x40;
    assert_int_equal(tf_write_file_atomic(path, data, len, NULL), 0);
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "checksum");
    /* A truncated one. */
    assert_int_equal(tf_write_file_atomic(path, data, 20, NULL), 0);
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "checkpoint");
    free(data);
}

/* Writes `len` bytes of data with `value` (8 bytes) at offset `at` and a
 * fresh checksum: a file whose checksum is right but whose fields are not. */
static void patch(const char *path, const char *data, size_t len, size_t at, const void *value)
{
    char *copy = malloc(len);
    memcpy(copy, data, len);
    memcpy(copy + at, value, 8);
    uint64_t sum = tfx_checkpoint_checksum(copy, len - 8);
    memcpy(copy + len - 8, &sum, 8);
    assert_int_equal(tf_write_file_atomic(path, copy, len, NULL), 0);
    free(copy);
}

/* A checkpoint written by a 2-step run, and its bytes. */
typedef struct saved {
    char dir[128], path[256];
    char *data;      /* the file, freed by the caller */
    size_t len;
} saved;

/* Trains 2 steps with `select`, checkpointing into f->dir/name; *o stays
 * set up for that run (its checkpoint_dir points into *k). */
static void save_two_steps(fixture *f, const char *name, tfx_select_method select,
                           tfx_exec_options *o, saved *k)
{
    tf_error err = {0};
    snprintf(k->dir, sizeof k->dir, "%s/%s", f->dir, name);
    small_options(f, o);
    o->steps = 2;
    o->checkpoint_dir = k->dir;
    o->select = select;
    assert_int_equal(tfx_exec_train(o, NULL, &err), 0);
    tfx_checkpoint_path(k->dir, k->path, sizeof k->path);
    assert_int_equal(tf_read_file(k->path, &k->data, &k->len, NULL), 0);
}

/* A checksum proves a file intact, not valid: every field that becomes a
 * count, an index or a value is checked, the run refused with the field
 * named, and the weights left as they were. */
static void test_valid_checksum_bad_fields(void **state)
{
    fixture *f = *state;
    tfx_exec_options o;
    tf_error err = {0};
    saved k;
    save_two_steps(f, "fields", TFX_SELECT_ROTATE, &o, &k);
    /* Layout (checkpoint.c): magic 8, shape 10 x 8, schedule 64, step 8,
     * selector stages 8, one rotate offset per stage (2 here), tensor count
     * 8, then per tensor its step count 8, value count 8 and 3 x values. */
    const size_t step_at = 8 + 80 + 64, stages_at = step_at + 8, offset_at = stages_at + 8;
    const size_t count_at = offset_at + 2 * 8, tensors_at = count_at + 8;
    const size_t first_value = tensors_at + 16;
    const size_t count0 = 256 * 16; /* embed.token: 256 x hidden */
    const struct {
        size_t at;
        int64_t value;
        const char *needle;
    } bad[] = {
        {step_at, -5, "step = -5"},
        {stages_at, -1, "selector stages = -1"},
        {offset_at, -3, "rotate offset = -3"},
        {offset_at, 999, "rotate offset 999 of stage 0"},
        {count_at, -1, "tensor count = -1"},
        {count_at, 1000, "1000 tensors"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        patch(k.path, k.data, k.len, bad[i].at, &bad[i].value);
        o.steps = 4;
        assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
        assert_contains(err.msg, bad[i].needle);
    }
    /* A tensor's optimizer steps beyond the run's, or negative. */
    int64_t steps = 3;
    patch(k.path, k.data, k.len, tensors_at, &steps);
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "embed.token has 3 optimizer steps, expected 0 to 2");
    steps = -1;
    patch(k.path, k.data, k.len, tensors_at, &steps);
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "has -1 optimizer steps");
    /* A NaN parameter, an infinite first moment, a negative second one. */
    const float nan = NAN, inf = INFINITY, neg = -1.0f;
    const struct {
        size_t at;
        float value;
        const char *needle;
    } values[] = {
        {first_value + 5 * 4, nan, "embed.token, parameter 5 is nan"},
        {first_value + (count0 + 7) * 4, inf, "first moment 7 is inf"},
        {first_value + (2 * count0 + 9) * 4, neg, "second moment 9 is -1"},
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        int64_t word;
        memcpy(&word, k.data + values[i].at, 8);
        memcpy(&word, &values[i].value, 4);
        patch(k.path, k.data, k.len, values[i].at, &word);
        assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
        assert_contains(err.msg, values[i].needle);
    }
    /* The file as it was still resumes. */
    assert_int_equal(tf_write_file_atomic(k.path, k.data, k.len, NULL), 0);
    assert_int_equal(tfx_exec_train(&o, NULL, &err), 0);
    /* Older formats are refused, naming theirs and this one, by a resume
     * and by --init, and the file is left as it was: TFXCKPT1 (a model
     * without attention) and TFXCKPT2 (other random streams). */
    static const char *const old[2][2] = {{"TFXCKPT1", "no attention"},
                                          {"TFXCKPT2", "random streams"}};
    for (int i = 0; i < 2; i++) {
        memcpy(k.data, old[i][0], 8);
        assert_int_equal(tf_write_file_atomic(k.path, k.data, k.len, NULL), 0);
        o.checkpoint_dir = k.dir;
        o.init_dir = NULL;
        assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
        char want[64];
        snprintf(want, sizeof want, "format %s, written by an older tf-exec", old[i][0]);
        assert_contains(err.msg, want);
        assert_contains(err.msg, old[i][1]);
        assert_contains(err.msg, "this tf-exec reads TFXCKPT3 only");
        o.checkpoint_dir = NULL;
        o.init_dir = k.dir;
        assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
        assert_contains(err.msg, want);
        char *now;
        size_t now_len;
        assert_int_equal(tf_read_file(k.path, &now, &now_len, NULL), 0);
        assert_int_equal(now_len, k.len);
        assert_memory_equal(now, k.data, k.len);
        free(now);
    }
    free(k.data);
}

/* --freeze-select stable: the gradient statistics close the file, each
 * checked like the other fields; --init reads such a file's weights. */
static void test_stable_statistics_checked(void **state)
{
    fixture *f = *state;
    tfx_exec_options o;
    tf_error err = {0};
    saved k;
    save_two_steps(f, "stable", TFX_SELECT_STABLE, &o, &k);
    /* The section (checkpoint.c): per tensor, steps without a gradient 8,
     * P 8, value count 8, then both averages; the checksum 8 ends the file. */
    tfx_model_layout l;
    assert_int_equal(tfx_model_layout_build(&o.model, 2, &l, NULL), 0);
    size_t section = 0;
    for (int t = 0; t < l.n_tensors; t++)
        section += 24 + 2 * l.tensors[t].count * sizeof(float);
    const size_t at = k.len - 8 - section, first_average = at + 24;
    const double big_p = 2.0;
    const float negative = -0.5f;
    const struct {
        size_t at;
        const void *value;
        const char *needle;
    } bad[] = {
        {at, &(int64_t){5}, "5 steps without a gradient of 2"},
        {at + 8, &big_p, "P = 2"},
        {at + 16, &(int64_t){3}, "3 values of 4096"},
        {first_average + 256 * 16 * 4, &negative, "embed.token, gradient average 4096 is -0.5"},
    };
    o.steps = 4;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t word;
        memcpy(&word, k.data + bad[i].at, 8);
        memcpy(&word, bad[i].value, bad[i].value == &negative ? 4 : 8);
        patch(k.path, k.data, k.len, bad[i].at, &word);
        assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
        assert_contains(err.msg, bad[i].needle);
    }
    /* Another method's run cannot resume it; --init takes its weights. */
    assert_int_equal(tf_write_file_atomic(k.path, k.data, k.len, NULL), 0);
    o.select = TFX_SELECT_RANDOM;
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "freeze_select = 2, but this run has freeze_select = 0");
    o.checkpoint_dir = NULL;
    o.init_dir = k.dir;
    o.steps = 1;
    assert_int_equal(tfx_exec_train(&o, NULL, &err), 0);
    tfx_model_layout_free(&l);
    free(k.data);
}

/* --init: the weights of a checkpoint saved by another pipeline shape, and
 * nothing else (a fresh optimizer), whatever the stages. */
static void test_init_from_another_shape(void **state)
{
    fixture *f = *state;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/pre", f->dir);
    tfx_exec_options o;
    tf_error err = {0};
    small_options(f, &o); /* 1F1B, 2 ranks, 4 microbatches of 2 sequences */
    o.steps = 3;
    o.checkpoint_dir = dir;
    assert_int_equal(tfx_exec_train(&o, NULL, &err), 0);

    /* The saved weights, read back through a pipeline of the saved shape. */
    tf_schedule s1, s2;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 4, &s1, &err), 0);
    tfx_pipeline_options po;
    tfx_pipeline_options_default(&po);
    tfx_pipeline *saved, *other;
    assert_int_equal(tfx_pipeline_create(&s1, &o.model, &po, &saved, &err), 0);
    tfx_freeze_selector sel;
    int K[2] = {tfx_pipeline_layout(saved)->stage_first_tensor[1],
                tfx_pipeline_layout(saved)->n_tensors -
                    tfx_pipeline_layout(saved)->stage_first_tensor[1]};
    assert_int_equal(tfx_freeze_selector_init(&sel, TFX_SELECT_RANDOM, 1, 2, K, &err), 0);
    tfx_checkpoint_meta meta = {o.model, 2, 4, o.seed, TFX_SELECT_RANDOM, "1F1B", 0};
    int found = 0;
    assert_int_equal(tfx_checkpoint_load(dir, saved, &sel, &meta, &found, &err), 0);
    assert_true(found && meta.step == 3);

    /* Another shape: GPipe on one rank, another microbatch size. */
    tfx_model_config cfg = o.model;
    cfg.microbatch_size = 3;
    assert_int_equal(tf_schedule_build("GPipe", 1, 1, 2, &s2, &err), 0);
    po.seed = 77; /* other initial weights, all replaced */
    assert_int_equal(tfx_pipeline_create(&s2, &cfg, &po, &other, &err), 0);
    assert_int_equal(tfx_checkpoint_load_weights(dir, other, &err), 0);
    const tfx_model_layout *l = tfx_pipeline_layout(other);
    for (int t = 0; t < l->n_tensors; t++) {
        size_t n = l->tensors[t].count;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        tfx_pipeline_read_tensor(saved, t, TFX_BUF_PARAM, a);
        tfx_pipeline_read_tensor(other, t, TFX_BUF_PARAM, b);
        assert_memory_equal(a, b, n * sizeof *a);
        tfx_pipeline_read_tensor(other, t, TFX_BUF_ADAM_V, b); /* fresh optimizer */
        for (size_t i = 0; i < n; i++)
            assert_true(b[i] == 0.0f);
        assert_int_equal(tfx_pipeline_tensor_steps(other, t), 0);
        free(a);
        free(b);
    }
    tfx_pipeline_destroy(other);
    /* Other model sizes: refused, naming the field. */
    cfg.heads = 4;
    assert_int_equal(tfx_pipeline_create(&s2, &cfg, &po, &other, &err), 0);
    assert_int_equal(tfx_checkpoint_load_weights(dir, other, &err), TF_EINVAL);
    assert_contains(err.msg, "heads = 2, but this run has heads = 4");
    tfx_pipeline_destroy(other);
    tfx_pipeline_destroy(saved);
    tfx_freeze_selector_free(&sel);
    tf_schedule_free(&s1);
    tf_schedule_free(&s2);
}

static void test_bad_plans_are_refused(void **state)
{
    fixture *f = *state;
    tfx_exec_options o;
    tf_error err = {0};
    small_options(f, &o);
    o.steps = 1;
    o.ranks = 3;
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "ranks = 2, but --ranks 3");
    small_options(f, &o);
    o.schedule = "GPipe";
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "schedule = \"1F1B\", but --schedule GPipe");
    small_options(f, &o);
    o.microbatches = 8;
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "microbatches = 4, but --microbatches 8");
    small_options(f, &o);
    o.model.layers = 1;
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_EINVAL);
    assert_contains(err.msg, "--layers 1");
    small_options(f, &o);
    o.data_path = "/nonexistent/corpus.bin";
    assert_true(tfx_exec_train(&o, NULL, &err) < 0);
    assert_contains(err.msg, "--data /nonexistent/corpus.bin");
    small_options(f, &o);
    o.plan_path = "/nonexistent/plan.json";
    assert_true(tfx_exec_train(&o, NULL, &err) < 0);
    assert_contains(err.msg, "/nonexistent/plan.json");
    /* A rank failing mid-run stops the run with that rank's error. */
    small_options(f, &o);
    o.steps = 3;
    o.fail_rank = 1;
    o.fail_action = 2;
    assert_int_equal(tfx_exec_train(&o, NULL, &err), TF_ERUNTIME);
    assert_contains(err.msg, "rank 1 failed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_is_bit_identical),
        cmocka_unit_test(test_bad_checkpoints_are_refused),
        cmocka_unit_test(test_valid_checksum_bad_fields),
        cmocka_unit_test(test_stable_statistics_checked),
        cmocka_unit_test(test_init_from_another_shape),
        cmocka_unit_test(test_bad_plans_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
