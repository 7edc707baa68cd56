/* test_exec_freeze.c - freeze selection (random front-biased, rotate); the
 * corpus has its own tests (test_exec_corpus.c). */
#include <math.h>

#include <unistd.h>

#include "test_stats.h"
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

/* The selection weights of tensor i of K on `stage`: 1.0 down to 0.1 over
 * stage 0 (the front bias), uniform elsewhere; as probabilities. */
static void selection_probabilities(int stage, int K, double *p)
{
    double sum = 0.0;
    for (int i = 0; i < K; i++) {
        p[i] = stage == 0 ? 1.0 - 0.9 * i / (K - 1) : 1.0;
        sum += p[i];
    }
    for (int i = 0; i < K; i++)
        p[i] /= sum;
}

/* Random, one tensor per backward: tensor i is chosen with probability
 * w_i / sum w.  Over 20,000 (step, microbatch) coordinates on the default
 * model's two stages (26 tensors front-biased, 27 uniform), the counts fit
 * those probabilities: chi-square below its 1e-4 significance point (25 and
 * 26 degrees of freedom). */
static void test_random_single_choice_follows_weights(void **state)
{
    (void)state;
    enum { DRAWS = 20000, K0 = 26, K1 = 27 };
    int Ks[2] = {K0, K1};
    tfx_freeze_selector sel;
    assert_int_equal(tfx_freeze_selector_init(&sel, TFX_SELECT_RANDOM, 42, 2, Ks, NULL), 0);
    unsigned char mask[K1];
    for (int st = 0; st < 2; st++) {
        const int K = Ks[st];
        double seen[K1] = {0}, expect[K1];
        selection_probabilities(st, K, expect);
        for (int i = 0; i < K; i++)
            expect[i] *= DRAWS;
        for (int d = 0; d < DRAWS; d++) {
            assert_int_equal(tfx_freeze_select(&sel, d / 4, st, d % 4, 0.04, mask), 1);
            for (int i = 0; i < K; i++)
                seen[i] += mask[i];
        }
        double x2 = chi_square(seen, expect, K), critical = chi_square_critical(K - 1, Z_1E4);
        if (x2 > critical)
            fail_msg("stage %d: chi-square %.1f of the choices, above %.1f", st, x2, critical);
    }
    tfx_freeze_selector_free(&sel);
}

/* Random, two tensors per backward, drawn without replacement: the pair
 * {i, j} has probability p_i p_j (1 / (1 - p_i) + 1 / (1 - p_j)) (either
 * one first).  Stage 0 of 10 tensors, 20,000 draws over 45 pairs:
 * chi-square below its 1e-4 significance point (44 degrees of freedom). */
static void test_random_pairs_follow_weights(void **state)
{
    (void)state;
    enum { DRAWS = 20000, K = 10, PAIRS = K * (K - 1) / 2 };
    int Ks[1] = {K};
    tfx_freeze_selector sel;
    assert_int_equal(tfx_freeze_selector_init(&sel, TFX_SELECT_RANDOM, 7, 1, Ks, NULL), 0);
    double p[K], seen[PAIRS] = {0}, expect[PAIRS];
    selection_probabilities(0, K, p);
    int cell = 0;
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < K; j++)
            expect[cell++] = DRAWS * p[i] * p[j] * (1 / (1 - p[i]) + 1 / (1 - p[j]));
    unsigned char mask[K];
    for (int d = 0; d < DRAWS; d++) {
        assert_int_equal(tfx_freeze_select(&sel, d / 3, 0, d % 3, 0.2, mask), 2);
        int first = -1, pair = 0;
        for (int i = 0; i < K; i++)
            for (int j = i + 1; j < K; j++, pair++)
                if (mask[i] && mask[j])
                    first = pair;
        assert_true(first >= 0);
        seen[first]++;
    }
    double x2 = chi_square(seen, expect, PAIRS);
    double critical = chi_square_critical(PAIRS - 1, Z_1E4);
    if (x2 > critical)
        fail_msg("chi-square %.1f of the pairs, above %.1f", x2, critical);
    tfx_freeze_selector_free(&sel);
}

/* Random: deterministic in (seed, step, stage, microbatch); several tensors
 * at once stay distinct; a ratio of 1 freezes every tensor. */
static void test_random_is_seeded(void **state)
{
    (void)state;
    enum { K = 10 };
    int Ks[2] = {K, K};
    tfx_freeze_selector sel, again;
    assert_int_equal(tfx_freeze_selector_init(&sel, TFX_SELECT_RANDOM, 42, 2, Ks, NULL), 0);
    assert_int_equal(tfx_freeze_selector_init(&again, TFX_SELECT_RANDOM, 42, 2, Ks, NULL), 0);
    unsigned char mask[K], mask2[K];
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
        cmocka_unit_test(test_random_single_choice_follows_weights),
        cmocka_unit_test(test_random_pairs_follow_weights),
        cmocka_unit_test(test_random_is_seeded),
        cmocka_unit_test(test_method_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
