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
    for (int method = 0; method < 2; method++) {
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
        cmocka_unit_test(test_bad_plans_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
