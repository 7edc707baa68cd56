/* test_exec_freeze.c - freeze selection (random front-biased, rotate); the
 * corpus has its own tests (test_exec_corpus.c). */
#include <math.h>

#include <unistd.h>

#include "test_util.h"
#include "tfx/freeze_select.h"

static void test_freeze_count_rounds(void **state)
{
    (void)state;
    assert_int_equal(tfx_freeze_count(0.0, 11), 0);
    assert_int_equal(tfx_freeze_count(0.5, 11), 6);   /* 5.5 rounds up */
    assert_int_equal(tfx_freeze_count(0.47, 11), 5);  /* 5.17 */
    assert_int_equal(tfx_freeze_count(1.0, 11), 11);
    assert_int_equal(tfx_freeze_count(1.7, 11), 11);  /* clamped */
    assert_int_equal(tfx_freeze_count(-0.2, 11), 0);
    assert_int_equal(tfx_freeze_count(NAN, 11), 0);
}

/* Rotate: k at a time, round-robin, so every tensor is frozen equally often. */
static void test_rotate_is_fair(void **state)
{
    (void)state;
    int K[2] = {7, 5};
    tfx_freeze_selector sel;
    assert_int_equal(tfx_freeze_selector_init(&sel, TFX_SELECT_ROTATE, 1, 2, K, NULL), 0);
    unsigned char mask[7];
    int hits[7] = {0};
    /* 0.43 of 7 = 3.01 -> 3 per call; 7 calls freeze 21 = 3 x 7 tensors */
    for (int call = 0; call < 7; call++) {
        assert_int_equal(tfx_freeze_select(&sel, call / 4, 0, call % 4, 0.43, mask), 3);
        for (int i = 0; i < 7; i++)
            hits[i] += mask[i];
    }
    for (int i = 0; i < 7; i++)
        assert_int_equal(hits[i], 3);
    /* The first call froze tensors 0,1,2; the offset is now back at 0. */
    assert_int_equal(sel.rotate_offset[0], 0);
    assert_int_equal(sel.rotate_offset[1], 0); /* stage 1 untouched */
    assert_int_equal(tfx_freeze_select(&sel, 9, 1, 0, 0.4, mask), 2);
    assert_true(mask[0] && mask[1] && !mask[2] && !mask[3] && !mask[4]);
    tfx_freeze_selector_free(&sel);
}

/* Random: k distinct tensors; deterministic in (seed, step, stage, mb);
 * stage 0 front-biased (weights 1.0 -> 0.1), other stages uniform. */
static void test_random_is_front_biased_and_seeded(void **state)
{
    (void)state;
    enum { K = 10, DRAWS = 20000 };
    int Ks[2] = {K, K};
    tfx_freeze_selector sel, again;
    assert_int_equal(tfx_freeze_selector_init(&sel, TFX_SELECT_RANDOM, 42, 2, Ks, NULL), 0);
    assert_int_equal(tfx_freeze_selector_init(&again, TFX_SELECT_RANDOM, 42, 2, Ks, NULL), 0);
    unsigned char mask[K], mask2[K];
    int hits[2][K] = {{0}};
    for (int d = 0; d < DRAWS; d++) {
        for (int st = 0; st < 2; st++) {
            int k = tfx_freeze_select(&sel, d, st, d % 3, 0.1, mask); /* k = 1 */
            assert_int_equal(k, 1);
            int sum = 0;
            for (int i = 0; i < K; i++) {
                sum += mask[i];
                hits[st][i] += mask[i];
            }
            assert_int_equal(sum, 1);
        }
    }
    /* One draw on stage 0: P(i) = w_i / sum w, w_i = 1 - 0.9 i / 9, sum = 5.5. */
    for (int i = 0; i < K; i++) {
        double p = (1.0 - 0.9 * i / 9.0) / 5.5;
        double sd = sqrt(p * (1 - p) / DRAWS);
        assert_true(fabs((double)hits[0][i] / DRAWS - p) < 5 * sd);
        assert_true(fabs((double)hits[1][i] / DRAWS - 0.1) < 5 * sqrt(0.09 / DRAWS));
    }
    /* Same coordinates, same choice; several tensors at once stay distinct. */
    int k1 = tfx_freeze_select(&sel, 5, 0, 2, 0.65, mask);
    int k2 = tfx_freeze_select(&again, 5, 0, 2, 0.65, mask2);
    assert_int_equal(k1, 7);
    assert_int_equal(k2, 7);
    assert_memory_equal(mask, mask2, K);
    int sum = 0;
    for (int i = 0; i < K; i++)
        sum += mask[i];
    assert_int_equal(sum, 7);
    assert_int_equal(tfx_freeze_select(&sel, 5, 0, 2, 1.0, mask), K);
    for (int i = 0; i < K; i++)
        assert_int_equal(mask[i], 1);
    tfx_freeze_selector_free(&sel);
    tfx_freeze_selector_free(&again);
}

static void test_method_names(void **state)
{
    (void)state;
    tfx_select_method m;
    tf_error err = {0};
    assert_int_equal(tfx_select_method_parse("rotate", &m, &err), 0);
    assert_int_equal(m, TFX_SELECT_ROTATE);
    assert_string_equal(tfx_select_method_name(m), "rotate");
    assert_int_equal(tfx_select_method_parse("sometimes", &m, &err), TF_EINVAL);
    assert_contains(err.msg, "--freeze-select \"sometimes\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freeze_count_rounds),
        cmocka_unit_test(test_rotate_is_fair),
        cmocka_unit_test(test_random_is_front_biased_and_seeded),
        cmocka_unit_test(test_method_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
