/* test_exec_freeze.c - freeze selection (random front-biased, rotate,
 * stable by gradient statistics); the corpus has its own tests
 * (test_exec_corpus.c). */
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

/* A stable selector of one stage with `K` tensors of `n` elements each,
 * tracked. */
static void stable_selector(tfx_freeze_selector *sel, int K, size_t n)
{
    int Ks[1] = {K};
    size_t sizes[8];
    assert_true(K <= 8);
    for (int i = 0; i < K; i++)
        sizes[i] = n;
    assert_int_equal(tfx_freeze_selector_init(sel, TFX_SELECT_STABLE, 1, 1, Ks, NULL), 0);
    assert_int_equal(tfx_freeze_selector_track(sel, 0, sizes, NULL), 0);
}

/* Stable: P = sum |EMA(g)| / sum EMA(|g|) with decay 0.9, by hand.  After
 * g = (1, -1): EMA(g) = (0.1, -0.1), EMA(|g|) = (0.1, 0.1), P = 1.  After
 * g = (1, 1): EMA(g) = (0.19, 0.01), EMA(|g|) = (0.19, 0.19), P = 0.2 / 0.38.
 * A tensor never given a gradient keeps P = 1. */
static void test_stable_perturbation_by_hand(void **state)
{
    (void)state;
    tfx_freeze_selector sel;
    stable_selector(&sel, 2, 2);
    const float g1[2] = {1.0f, -1.0f}, g2[2] = {1.0f, 1.0f};
    tfx_freeze_selector_observe(&sel, 0, 0, g1);
    tfx_freeze_selector_observe(&sel, 0, 1, NULL);
    assert_float_equal(sel.perturbation[0], 1.0, 1e-6);
    tfx_freeze_selector_observe(&sel, 0, 0, g2);
    tfx_freeze_selector_observe(&sel, 0, 1, NULL);
    assert_float_equal(sel.perturbation[0], 0.2 / 0.38, 1e-6);
    assert_float_equal(sel.perturbation[1], 1.0, 0.0);
    assert_int_equal(sel.stale[0], 0);
    assert_int_equal(sel.stale[1], 2);
    tfx_freeze_selector_free(&sel);
}

/* Stable: 4 tensors; 0 and 2 get a gradient of one sign every step (P = 1),
 * 1 flips between +1 and -1 and 3 between +1 and -0.5 (both settle, 1 more:
 * after 20 steps P(1) = 0.053 and P(3) = 0.286).  The most settled go
 * first, ties by index; a ratio of 0 freezes nothing. */
static void test_stable_freezes_the_settled(void **state)
{
    (void)state;
    tfx_freeze_selector sel;
    stable_selector(&sel, 4, 3);
    for (int step = 0; step < 20; step++) {
        float sign = step % 2 ? -1.0f : 1.0f;
        float same[3] = {0.5f, -2.0f, 1.0f}, flip[3] = {sign, sign, sign};
        float lopsided[3] = {step % 2 ? -0.5f : 1.0f, step % 2 ? -0.5f : 1.0f, 0.0f};
        tfx_freeze_selector_observe(&sel, 0, 0, same);
        tfx_freeze_selector_observe(&sel, 0, 1, flip);
        tfx_freeze_selector_observe(&sel, 0, 2, same);
        tfx_freeze_selector_observe(&sel, 0, 3, lopsided);
    }
    assert_true(sel.perturbation[1] < sel.perturbation[3]);
    assert_true(sel.perturbation[3] < sel.perturbation[0]);
    unsigned char mask[4];
    const unsigned char one[4] = {0, 1, 0, 0}, two[4] = {0, 1, 0, 1}, three[4] = {1, 1, 0, 1};
    assert_int_equal(tfx_freeze_select(&sel, 20, 0, 0, 0.25, mask), 1);
    assert_memory_equal(mask, one, 4);
    assert_int_equal(tfx_freeze_select(&sel, 20, 0, 1, 0.5, mask), 2);
    assert_memory_equal(mask, two, 4);
    assert_int_equal(tfx_freeze_select(&sel, 20, 0, 2, 0.75, mask), 3);
    assert_memory_equal(mask, three, 4); /* P(0) = P(2) = 1: the lower index */
    assert_int_equal(tfx_freeze_select(&sel, 20, 0, 3, 0.0, mask), 0);
    tfx_freeze_selector_free(&sel);
}

/* Stable: after TFX_STABLE_STALE_STEPS steps without a gradient a tensor
 * goes last, whatever its P; one gradient makes it fresh again. */
static void test_stable_refreshes_stale_tensors(void **state)
{
    (void)state;
    tfx_freeze_selector sel;
    stable_selector(&sel, 3, 1);
    const float up[1] = {1.0f}, down[1] = {-1.0f};
    for (int step = 0; step < 4; step++) {
        tfx_freeze_selector_observe(&sel, 0, 0, step % 2 ? down : up); /* settles */
        tfx_freeze_selector_observe(&sel, 0, 1, up);
        tfx_freeze_selector_observe(&sel, 0, 2, up);
    }
    unsigned char mask[3];
    const unsigned char first[3] = {1, 0, 0}, after[3] = {0, 1, 0};
    assert_int_equal(tfx_freeze_select(&sel, 4, 0, 0, 0.34, mask), 1);
    assert_memory_equal(mask, first, 3);
    for (int step = 0; step < TFX_STABLE_STALE_STEPS; step++) {
        assert_memory_equal(mask, first, 3); /* frozen until it is stale */
        tfx_freeze_selector_observe(&sel, 0, 0, NULL);
        tfx_freeze_selector_observe(&sel, 0, 1, up);
        tfx_freeze_selector_observe(&sel, 0, 2, up);
        tfx_freeze_select(&sel, 5 + step, 0, 0, 0.34, mask);
    }
    assert_memory_equal(mask, after, 3);
    tfx_freeze_selector_observe(&sel, 0, 0, up);
    tfx_freeze_selector_observe(&sel, 0, 1, up);
    tfx_freeze_selector_observe(&sel, 0, 2, up);
    tfx_freeze_select(&sel, 20, 0, 0, 0.34, mask);
    assert_memory_equal(mask, first, 3);
    tfx_freeze_selector_free(&sel);
}

/* Stable: an untracked stage (another process's) freezes in index order;
 * only a stable selector tracks, and only its own stages. */
static void test_stable_untracked_and_refusals(void **state)
{
    (void)state;
    int Ks[2] = {3, 2};
    size_t sizes[3] = {1, 1, 1};
    tfx_freeze_selector sel;
    tf_error err = {0};
    assert_int_equal(tfx_freeze_selector_init(&sel, TFX_SELECT_STABLE, 1, 2, Ks, NULL), 0);
    const float g[1] = {1.0f};
    tfx_freeze_selector_observe(&sel, 0, 2, g); /* ignored: not tracked */
    unsigned char mask[3];
    const unsigned char two[3] = {1, 1, 0};
    assert_int_equal(tfx_freeze_select(&sel, 0, 0, 0, 0.6, mask), 2);
    assert_memory_equal(mask, two, 3);
    assert_int_equal(tfx_freeze_selector_track(&sel, 2, sizes, &err), TF_EINVAL);
    assert_contains(err.msg, "stage 2");
    tfx_freeze_selector_free(&sel);
    assert_int_equal(tfx_freeze_selector_init(&sel, TFX_SELECT_ROTATE, 1, 2, Ks, NULL), 0);
    assert_int_equal(tfx_freeze_selector_track(&sel, 0, sizes, &err), TF_EINVAL);
    assert_contains(err.msg, "method rotate");
    tfx_freeze_selector_free(&sel);
}

static void test_method_names(void **state)
{
    (void)state;
    tfx_select_method m;
    tf_error err = {0};
    assert_int_equal(tfx_select_method_parse("rotate", &m, &err), 0);
    assert_int_equal(m, TFX_SELECT_ROTATE);
    assert_string_equal(tfx_select_method_name(m), "rotate");
    assert_int_equal(tfx_select_method_parse("stable", &m, &err), 0);
    assert_int_equal(m, TFX_SELECT_STABLE);
    assert_string_equal(tfx_select_method_name(m), "stable");
    assert_int_equal(tfx_select_method_parse("sometimes", &m, &err), TF_EINVAL);
    assert_contains(err.msg, "--freeze-select \"sometimes\": expected random, rotate or stable");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freeze_count_rounds),
        cmocka_unit_test(test_rotate_is_fair),
        cmocka_unit_test(test_random_single_choice_follows_weights),
        cmocka_unit_test(test_random_pairs_follow_weights),
        cmocka_unit_test(test_random_is_seeded),
        cmocka_unit_test(test_stable_perturbation_by_hand),
        cmocka_unit_test(test_stable_freezes_the_settled),
        cmocka_unit_test(test_stable_refreshes_stale_tensors),
        cmocka_unit_test(test_stable_untracked_and_refusals),
        cmocka_unit_test(test_method_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
