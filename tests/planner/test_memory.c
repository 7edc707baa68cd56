/* test_memory.c - peak bytes per rank: the published closed forms of
 * GPipe, 1F1B and Interleaved1F1B, and every built-in schedule against a
 * count written here from the definition (a table of what each microbatch
 * holds, not memory.c's linear events). */
#include <math.h>

#include "test_util.h"
#include "tf/memory.h"
#include "tf/schedule.h"

/* Peaks of s with every stage keeping `a` bytes per microbatch and
 * nothing else. */
static void unit_peaks(const tf_schedule *s, double a, tf_memory_peak *peaks)
{
    tf_stage_memory *st = calloc((size_t)s->stages, sizeof *st);
    for (int k = 0; k < s->stages; k++)
        st[k].activation_bytes = st[k].activation_frozen_bytes = st[k].weight_grad_bytes = a;
    tf_memory_model m;
    assert_int_equal(tf_memory_model_build(s, st, NULL, &m, NULL), 0);
    tf_memory_peaks(&m, NULL, NULL, peaks);
    tf_memory_model_free(&m);
    free(st);
}

/* GPipe keeps every microbatch's activations on every rank; 1F1B at most
 * P - r on rank r (Narayanan et al., PipeDream-Flush). */
static void gpipe_and_1f1b_closed_forms(void **state)
{
    (void)state;
    const int shapes[][2] = {{4, 8}, {4, 2}, {2, 5}, {8, 8}, {3, 1}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        int p = shapes[k][0], mb = shapes[k][1];
        tf_schedule s;
        tf_memory_peak peaks[8];
        assert_int_equal(tf_schedule_build("GPipe", p, 1, mb, &s, NULL), 0);
        unit_peaks(&s, 1.0, peaks);
        for (int r = 0; r < p; r++)
            assert_true(peaks[r].bytes == mb);
        tf_schedule_free(&s);
        assert_int_equal(tf_schedule_build("1F1B", p, 1, mb, &s, NULL), 0);
        unit_peaks(&s, 1.0, peaks);
        for (int r = 0; r < p; r++)
            assert_true(peaks[r].bytes == (p - r < mb ? p - r : mb));
        tf_schedule_free(&s);
    }
}

/* Interleaved 1F1B (Narayanan et al. 2021; Megatron's schedule, which
 * PyTorch's follows): with P dividing M, rank r holds at most
 * (v - 1) P + 2 (P - 1 - r) + 1 model chunks' activations, and never
 * more than all v M. */
static void interleaved_closed_form(void **state)
{
    (void)state;
    const int shapes[][3] = {{4, 2, 8}, {4, 2, 4}, {2, 2, 4}, {2, 3, 4}, {4, 3, 8}, {2, 4, 8}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        int p = shapes[k][0], v = shapes[k][1], mb = shapes[k][2];
        tf_schedule s;
        tf_memory_peak peaks[8];
        assert_int_equal(tf_schedule_build("Interleaved1F1B", p, v, mb, &s, NULL), 0);
        unit_peaks(&s, 1.0, peaks);
        for (int r = 0; r < p; r++) {
            int expected = (v - 1) * p + 2 * (p - 1 - r) + 1;
            if (expected > v * mb)
                expected = v * mb;
            if (peaks[r].bytes != expected)
                fail_msg("Interleaved1F1B P=%d v=%d M=%d rank %d: peak %g chunks, closed form %d",
                         p, v, mb, r, peaks[r].bytes, expected);
        }
        tf_schedule_free(&s);
    }
}

/* --- An independent count ------------------------------------------- */

typedef struct held {
    double activations; /* what (stage, microbatch)'s forward still keeps */
    double weight_grad; /* what its W still needs */
} held;

static int find_in(const tf_schedule *s, tf_action_type t, int st, int mb)
{
    return tf_schedule_find(s, t, st, mb);
}

/* The freeze ratio and recompute ratio that govern (stage, microbatch). */
static double freeze_of(const tf_schedule *s, const double *f, int st, int mb)
{
    int b = find_in(s, TF_ACT_B, st, mb);
    return f[b >= 0 ? b : find_in(s, TF_ACT_W, st, mb)];
}

static double recompute_of(const tf_schedule *s, const double *q, int st, int mb)
{
    int b = find_in(s, TF_ACT_B, st, mb);
    return q[b >= 0 ? b : find_in(s, TF_ACT_I, st, mb)];
}

/* Walks each rank's order keeping a table of what every microbatch holds,
 * from the definitions: a forward keeps A(f) - q max(A_f - C, 0); the
 * backward first brings that back to A(f); B frees it; I holds X (1 - f)
 * more while it runs, then keeps G (1 - f) of it; W frees that. */
static double count_peak(const tf_schedule *s, const tf_stage_memory *mem, const double *f,
                         const double *q, int rank)
{
    held *h = calloc((size_t)s->stages * s->microbatches, sizeof *h);
    double live = 0.0;
    for (int st = 0; st < s->stages; st++)
        if (s->stage_rank[st] == rank)
            live += mem[st].static_bytes;
    double peak = live;
    for (int i = s->rank_offset[rank]; i < s->rank_offset[rank + 1]; i++) {
        const tf_action *a = &s->actions[i];
        const tf_stage_memory *m = &mem[a->stage];
        held *x = &h[a->stage * s->microbatches + a->microbatch];
        double fr = freeze_of(s, f, a->stage, a->microbatch);
        double kept = m->activation_bytes - fr * (m->activation_bytes - m->activation_frozen_bytes);
        double dropped = m->recomputes
                             ? recompute_of(s, q, a->stage, a->microbatch) *
                                   fmax(m->activation_frozen_bytes - m->checkpoint_bytes, 0.0)
                             : 0.0;
        double before = x->activations + x->weight_grad;
        if (a->type == TF_ACT_F) {
            x->activations = kept - dropped;
        } else if (a->type == TF_ACT_B || a->type == TF_ACT_I) {
            x->activations = kept; /* re-materialised before anything is freed */
            live += x->activations - (before);
            if (live > peak)
                peak = live;
            /* An I's transient: held on top until the I ends. */
            const double transient =
                a->type == TF_ACT_I ? m->backward_input_transient_bytes * (1.0 - fr) : 0.0;
            if (live + transient > peak)
                peak = live + transient;
            before = x->activations;
            x->activations = 0.0;
            if (a->type == TF_ACT_I)
                x->weight_grad = m->weight_grad_bytes * (1.0 - fr);
        } else if (a->type == TF_ACT_W) {
            x->weight_grad = 0.0;
        }
        live += x->activations + x->weight_grad - before;
        if (live > peak)
            peak = live;
    }
    free(h);
    return peak;
}

static double uniform01(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (double)((*seed >> 8) & 0xFFFF) / 65535.0;
}

/* Every built-in schedule, random bytes and ratios: memory.c's peaks equal
 * the table count. */
static void every_schedule_against_a_count(void **state)
{
    (void)state;
    const char *names[] = {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS",
                           "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"};
    unsigned seed = 7;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        for (int trial = 0; trial < 6; trial++) {
            int p = 2 + trial % 3, v = tf_schedule_default_stages_per_rank(names[k]);
            /* Multiples of P suit every schedule's own rules on M. */
            int mb = p * (strcmp(names[k], "DualPipeV") == 0 ? 2 + trial % 2 : 1 + trial % 3);
            tf_schedule s;
            tf_error err = {0};
            if (tf_schedule_build(names[k], p, v, mb, &s, &err))
                fail_msg("%s", err.msg);
            tf_stage_memory *mem = calloc((size_t)s.stages, sizeof *mem);
            for (int st = 0; st < s.stages; st++) {
                mem[st].static_bytes = 100.0 * uniform01(&seed);
                mem[st].activation_bytes = 10.0 + 10.0 * uniform01(&seed);
                mem[st].activation_frozen_bytes = mem[st].activation_bytes * uniform01(&seed);
                mem[st].weight_grad_bytes = mem[st].activation_bytes * 1.5 * uniform01(&seed);
                if (trial % 3)
                    mem[st].backward_input_transient_bytes = 20.0 * uniform01(&seed);
                mem[st].checkpoint_bytes = mem[st].activation_frozen_bytes * uniform01(&seed);
                mem[st].recompute_ms = 1.0;
                mem[st].recomputes = trial % 2;
            }
            double *f = calloc((size_t)s.n_actions, sizeof *f);
            double *q = calloc((size_t)s.n_actions, sizeof *q);
            for (int i = 0; i < s.n_actions; i++) {
                f[i] = uniform01(&seed);
                q[i] = uniform01(&seed);
            }
            tf_memory_model m;
            assert_int_equal(tf_memory_model_build(&s, mem, NULL, &m, NULL), 0);
            tf_memory_peak peaks[8];
            tf_memory_peaks(&m, f, q, peaks);
            for (int r = 0; r < p; r++) {
                double expected = count_peak(&s, mem, f, q, r);
                if (fabs(peaks[r].bytes - expected) > 1e-9 * expected)
                    fail_msg("%s P=%d M=%d rank %d: peak %.12g, count %.12g", names[k], p, mb, r,
                             peaks[r].bytes, expected);
            }
            tf_memory_model_free(&m);
            free(f);
            free(q);
            free(mem);
            tf_schedule_free(&s);
        }
    }
}

/* Freezing switched off for memory: a frozen backward's forward keeps A. */
static void freezing_that_saves_nothing(void **state)
{
    (void)state;
    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 4, &s, NULL), 0);
    tf_stage_memory mem[2] = {{.static_bytes = 5, .activation_bytes = 10,
                               .activation_frozen_bytes = 4, .weight_grad_bytes = 10},
                              {.static_bytes = 5, .activation_bytes = 10,
                               .activation_frozen_bytes = 4, .weight_grad_bytes = 10}};
    double f[16];
    for (int i = 0; i < s.n_actions; i++)
        f[i] = 1.0;
    tf_memory_options off = {.freeze_saves_memory = 0}, on = {.freeze_saves_memory = 1};
    tf_memory_model m;
    tf_memory_peak peaks[2];
    assert_int_equal(tf_memory_model_build(&s, mem, &off, &m, NULL), 0);
    tf_memory_peaks(&m, f, NULL, peaks);
    /* Rank 0 holds two microbatches at its peak, rank 1 one. */
    assert_true(peaks[0].bytes == 25.0 && peaks[1].bytes == 15.0);
    tf_memory_model_free(&m);
    assert_int_equal(tf_memory_model_build(&s, mem, &on, &m, NULL), 0);
    tf_memory_peaks(&m, f, NULL, peaks);
    assert_true(peaks[0].bytes == 13.0 && peaks[1].bytes == 9.0);
    /* The peak is reached at the second forward of rank 0. */
    char cell[32];
    assert_string_equal(tf_action_format(&s.actions[peaks[0].action], cell), "0F1");
    tf_memory_model_free(&m);
    tf_schedule_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpipe_and_1f1b_closed_forms),
        cmocka_unit_test(interleaved_closed_form),
        cmocka_unit_test(every_schedule_against_a_count),
        cmocka_unit_test(freezing_that_saves_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
