/* test_aux.c - idle time and aux work placed in the bubbles.
 *
 * Idle time against PipeFisher's one-step closed forms: with equal times
 * and M microbatches on D ranks, 1F1B and GPipe take (M + D - 1)(t_f + t_b)
 * and every rank idles (D - 1)(t_f + t_b).  Placement on hand-made windows
 * with known answers (first fit, spill and refresh interval, margin, an
 * item no window holds), and on random windows against an independent
 * maximum flow: the amount placed with every item split (exact_ms) is the
 * most any placement can fit.  Then the profile's "aux" lists and a
 * plan's placement through plan.json. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/aux_place.h"
#include "test_util.h"
#include "tf/planner.h"
#include "tf/profile.h"

/* --- Idle time: closed forms ---------------------------------------- */

/* D ranks, M microbatches, t_f = 1, t_b = 2 on every stage; `aux` (may
 * be "") is added to each stage's fields. */
static void equal_profile(const char *schedule, int d, int m, const char *aux, tf_profile *p)
{
    char json[8192];
    int used = snprintf(json, sizeof json,
                        "{\"schedule\": \"%s\", \"ranks\": %d, \"microbatches\": %d, "
                        "\"stages\": [", schedule, d, m);
    for (int s = 0; s < d; s++)
        used += snprintf(json + used, sizeof json - used,
                         "%s{\"forward_ms\": 1, \"backward_ms\": 2, \"backward_frozen_ms\": 1%s}",
                         s ? ", " : "", aux);
    snprintf(json + used, sizeof json - used, "]}");
    tf_error err = {0};
    if (tf_profile_parse(json, "equal.json", p, &err))
        fail_msg("%s", err.msg);
}

static void closed_forms(void **state)
{
    (void)state;
    const char *schedules[] = {"1F1B", "GPipe"};
    for (int k = 0; k < 2; k++)
        for (int d = 2; d <= 6; d++)
            for (int m = d; m <= d + 3; m++) {
                tf_profile p;
                tf_plan plan;
                tf_error err = {0};
                equal_profile(schedules[k], d, m, "", &p);
                assert_int_equal(tf_plan_unfrozen(&p, &plan, &err), 0);
                assert_true(fabs(plan.batch_ms_planned - (m + d - 1) * 3.0) < 1e-9);
                for (int r = 0; r < d; r++) {
                    const tf_plan_rank *pr = &plan.per_rank[r];
                    assert_true(fabs(pr->idle_ms_planned - (d - 1) * 3.0) < 1e-9);
                    double sum = 0.0;
                    for (int b = 0; b < pr->n_bubbles; b++)
                        sum += pr->bubbles[2 * b + 1] - pr->bubbles[2 * b];
                    assert_true(fabs(sum - pr->idle_ms_planned) < 1e-9);
                }
                tf_plan_free(&plan);
                tf_profile_free(&p);
            }
}

/* ZBVZeroBubble with F = I = W = 1 ms on every stage, M >= 2P: every rank
 * idles (P - 1) t_F in one step (the fill before its first forward and
 * the drain after its last W; the zero-bubble paper's "0" bubble is the
 * steady state between them) and the step takes 6M + P - 1 ms. */
static void zero_bubble_closed_form(void **state)
{
    (void)state;
    for (int d = 2; d <= 5; d++)
        for (int m = 2 * d; m <= 3 * d; m += d) {
            char json[8192];
            int used = snprintf(json, sizeof json,
                                "{\"schedule\": \"ZBVZeroBubble\", \"ranks\": %d, "
                                "\"stages_per_rank\": 2, \"microbatches\": %d, \"stages\": [",
                                d, m);
            for (int s = 0; s < 2 * d; s++)
                used += snprintf(json + used, sizeof json - used,
                                 "%s{\"forward_ms\": 1, \"backward_input_ms\": 1, "
                                 "\"backward_weight_ms\": 1}", s ? ", " : "");
            snprintf(json + used, sizeof json - used, "]}");
            tf_profile p;
            tf_plan plan;
            tf_error err = {0};
            assert_int_equal(tf_profile_parse(json, "zbv.json", &p, &err), 0);
            assert_int_equal(tf_plan_unfrozen(&p, &plan, &err), 0);
            assert_true(fabs(plan.batch_ms_planned - (6 * m + d - 1)) < 1e-9);
            for (int r = 0; r < d; r++)
                assert_true(fabs(plan.per_rank[r].idle_ms_planned - (d - 1)) < 1e-9);
            tf_plan_free(&plan);
            tf_profile_free(&p);
        }
}

/* --- Placement on hand-made windows --------------------------------- */

typedef struct placed {
    tf_aux_placement out;
    int capacity;
} placed;

static void place(tf_aux_item *items, int n, const double *windows, int n_windows,
                  double margin, placed *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->out.ranks = 1;
    pl->out.per_rank = calloc(1, sizeof *pl->out.per_rank);
    assert_non_null(pl->out.per_rank);
    tf_aux_rank_input in = {0, items, n, windows, n_windows, margin, TF_AUX_MAX_STEPS};
    tf_error err = {0};
    assert_int_equal(tf_aux_place_rank(&in, &pl->out, &pl->capacity, &err), 0);
}

static tf_aux_item item(int work, double ready, double ms, int divisible)
{
    return (tf_aux_item){work, 0, ready, ms, divisible};
}

static void first_fit(void **state)
{
    (void)state;
    /* A takes [0, 6]; B (6 ms) does not fit the 4 left of the first
     * window and goes to [20, 26]; C, ready at 25, waits for B: [26, 29]. */
    const double windows[] = {0, 10, 20, 30};
    tf_aux_item items[] = {item(0, 0, 6, 0), item(1, 0, 6, 0), item(2, 25, 3, 0)};
    placed pl;
    place(items, 3, windows, 2, 0.0, &pl);
    const tf_aux_rank *r = &pl.out.per_rank[0];
    assert_true(fabs(r->placed_ms - 15) < 1e-12 && r->spilled_ms == 0 && r->refresh_steps == 1);
    assert_int_equal(pl.out.n_slices, 3);
    const double starts[] = {0, 20, 26};
    for (int k = 0; k < 3; k++)
        assert_true(fabs(pl.out.slices[k].start_ms - starts[k]) < 1e-12);
    tf_aux_placement_free(&pl.out);
}

static void spill_and_refresh(void **state)
{
    (void)state;
    /* One 4 ms window, three 3 ms items: one per step, done in 3 steps. */
    const double windows[] = {0, 4};
    tf_aux_item items[] = {item(0, 0, 3, 0), item(1, 0, 3, 0), item(2, 0, 3, 0)};
    placed pl;
    place(items, 3, windows, 1, 0.0, &pl);
    const tf_aux_rank *r = &pl.out.per_rank[0];
    assert_true(r->placed_ms == 3 && r->spilled_ms == 6 && r->refresh_steps == 3);
    assert_true(fabs(r->exact_ms - 4) < 1e-12); /* split, 4 of the 9 fit */
    assert_int_equal(pl.out.slices[2].step, 2);
    tf_aux_placement_free(&pl.out);
    /* Split, the same work takes 9 / 4 -> 3 steps too, filling each. */
    tf_aux_item split[] = {item(0, 0, 3, 1), item(1, 0, 3, 1), item(2, 0, 3, 1)};
    place(split, 3, windows, 1, 0.0, &pl);
    assert_true(pl.out.per_rank[0].placed_ms == 4 && pl.out.per_rank[0].refresh_steps == 3);
    tf_aux_placement_free(&pl.out);
}

static void margin_and_unplaceable(void **state)
{
    (void)state;
    /* A 10 ms window keeps 1 ms free: 9.5 ms does not fit, ever. */
    const double windows[] = {0, 10};
    tf_aux_item items[] = {item(0, 0, 9.5, 0), item(1, 0, 2, 0)};
    placed pl;
    place(items, 2, windows, 1, 0.1, &pl);
    const tf_aux_rank *r = &pl.out.per_rank[0];
    assert_true(r->placed_ms == 2 && r->refresh_steps == 0 && r->spilled_ms == 9.5);
    for (int k = 0; k < pl.out.n_slices; k++)
        assert_true(pl.out.slices[k].start_ms + pl.out.slices[k].ms <= 9.0 + 1e-12);
    tf_aux_placement_free(&pl.out);
}

/* --- exact_ms against an independent maximum flow ------------------ */

/* Windows cut at every ready time into segments; item i may use segment
 * j when j starts at or after i's ready time.  Source -> item (ms),
 * item -> segment (inf), segment -> sink (its length): the most that fits.
 * Augmenting paths by depth-first search on a dense matrix. */
enum { MAX_NODES = 64 };

static double augment(double cap[MAX_NODES][MAX_NODES], int n, int u, int sink, double flow,
                      int *seen)
{
    if (u == sink)
        return flow;
    seen[u] = 1;
    for (int v = 0; v < n; v++)
        if (!seen[v] && cap[u][v] > 1e-12) {
            double got = augment(cap, n, v, sink, fmin(flow, cap[u][v]), seen);
            if (got > 0) {
                cap[u][v] -= got;
                cap[v][u] += got;
                return got;
            }
        }
    return 0;
}

static double max_flow_amount(const tf_aux_item *items, int n, const double *windows, int nw,
                              double margin)
{
    double seg[MAX_NODES][2];
    int ns = 0;
    for (int w = 0; w < nw; w++) {
        double start = windows[2 * w], end = windows[2 * w + 1] - margin * (windows[2 * w + 1] -
                                                                            windows[2 * w]);
        double cuts[16];
        int nc = 0;
        cuts[nc++] = start;
        for (int i = 0; i < n; i++)
            if (items[i].ready_ms > start && items[i].ready_ms < end)
                cuts[nc++] = items[i].ready_ms;
        cuts[nc++] = end;
        for (int a = 1; a < nc; a++) /* sort */
            for (int b = a; b > 0 && cuts[b] < cuts[b - 1]; b--) {
                double t = cuts[b];
                cuts[b] = cuts[b - 1];
                cuts[b - 1] = t;
            }
        for (int c = 0; c + 1 < nc; c++) {
            seg[ns][0] = cuts[c];
            seg[ns++][1] = cuts[c + 1];
        }
    }
    static double cap[MAX_NODES][MAX_NODES];
    memset(cap, 0, sizeof cap);
    const int source = 0, sink = 1 + n + ns, nodes = sink + 1;
    assert_true(nodes <= MAX_NODES);
    for (int i = 0; i < n; i++) {
        cap[source][1 + i] = items[i].ms;
        for (int j = 0; j < ns; j++)
            if (seg[j][0] >= items[i].ready_ms - 1e-12)
                cap[1 + i][1 + n + j] = INFINITY;
    }
    for (int j = 0; j < ns; j++)
        cap[1 + n + j][sink] = fmax(seg[j][1] - seg[j][0], 0.0);
    double total = 0.0, got;
    int seen[MAX_NODES];
    do {
        memset(seen, 0, sizeof seen);
        got = augment(cap, nodes, source, sink, INFINITY, seen);
        total += got;
    } while (got > 0);
    return total;
}

static double uniform(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (double)((*seed >> 8) & 0xFFFF) / 65535.0;
}

static void exact_is_max_flow(void **state)
{
    (void)state;
    unsigned seed = 7;
    for (int trial = 0; trial < 300; trial++) {
        double windows[8];
        int nw = 1 + (int)(4 * uniform(&seed)) % 4;
        double t = 0.0;
        for (int w = 0; w < nw; w++) {
            t += 5 * uniform(&seed);
            windows[2 * w] = t;
            t += 0.5 + 6 * uniform(&seed);
            windows[2 * w + 1] = t;
        }
        tf_aux_item items[6];
        int n = 1 + (int)(6 * uniform(&seed)) % 6;
        for (int i = 0; i < n; i++)
            items[i] = item(i, t * uniform(&seed), 0.2 + 5 * uniform(&seed),
                            uniform(&seed) < 0.5);
        double margin = 0.1 * uniform(&seed);
        double flow = max_flow_amount(items, n, windows, nw, margin);
        placed pl;
        place(items, n, windows, nw, margin, &pl);
        const tf_aux_rank *r = &pl.out.per_rank[0];
        assert_true(fabs(r->exact_ms - flow) < 1e-9 * fmax(1.0, flow));
        assert_true(r->placed_ms <= r->exact_ms + 1e-9);
        /* Every step-0 slice lies in a window's usable part, after its
         * item is ready, without overlapping another. */
        for (int k = 0; k < pl.out.n_slices; k++) {
            const tf_aux_slice *s = &pl.out.slices[k];
            if (s->step)
                continue;
            int inside = 0;
            for (int w = 0; w < nw; w++) {
                double end = windows[2 * w + 1] - margin * (windows[2 * w + 1] - windows[2 * w]);
                inside |= s->start_ms >= windows[2 * w] - 1e-12 && s->start_ms + s->ms <= end + 1e-9;
            }
            assert_true(inside);
            for (int i = 0; i < n; i++)
                if (items[i].work == s->work)
                    assert_true(s->start_ms >= items[i].ready_ms - 1e-12);
            for (int o = 0; o < k; o++) {
                const tf_aux_slice *x = &pl.out.slices[o];
                if (!x->step)
                    assert_true(x->start_ms + x->ms <= s->start_ms + 1e-9 ||
                                s->start_ms + s->ms <= x->start_ms + 1e-9);
            }
        }
        tf_aux_placement_free(&pl.out);
    }
}

/* --- The profile's lists and the plan's placement ------------------ */

static void profile_lists(void **state)
{
    (void)state;
    tf_profile p;
    equal_profile("1F1B", 3, 6,
                  ", \"aux\": [{\"name\": \"kfac_A\", \"after\": \"F\", \"ms\": 0.25}, "
                  "{\"name\": \"inverse\", \"after\": \"step\", \"ms\": 1.5, \"divisible\": true}]",
                  &p);
    assert_int_equal(p.n_aux, 6);
    assert_int_equal(p.aux[5].stage, 2);
    assert_true(p.aux[5].divisible && p.aux[5].after == TF_AUX_AFTER_STEP);
    char *json;
    tf_error err = {0};
    assert_int_equal(tf_profile_to_json(&p, &json, &err), 0);
    tf_profile again;
    assert_int_equal(tf_profile_parse(json, "again.json", &again, &err), 0);
    assert_int_equal(again.n_aux, 6);
    assert_memory_equal(again.aux, p.aux, 6 * sizeof *p.aux);
    free(json);
    tf_profile_free(&again);
    tf_profile_free(&p);
    const char *bad[][2] = {
        {"{\"name\": \"x\", \"after\": \"G\", \"ms\": 1}", "$.stages[0].aux[0].after: expected"},
        {"{\"name\": \"x\", \"after\": \"F\", \"ms\": 0}", "$.stages[0].aux[0].ms"},
        {"{\"name\": \"\", \"after\": \"F\", \"ms\": 1}", "$.stages[0].aux[0].name"},
        {"{\"name\": \"x\", \"after\": \"F\", \"ms\": 1, \"divisble\": true}",
         "did you mean divisible?"},
    };
    for (int k = 0; k < 4; k++) {
        char json_bad[512];
        snprintf(json_bad, sizeof json_bad,
                 "{\"schedule\": \"1F1B\", \"ranks\": 1, \"microbatches\": 1, \"stages\": "
                 "[{\"forward_ms\": 1, \"backward_ms\": 2, \"aux\": [%s]}]}", bad[k][0]);
        assert_int_equal(tf_profile_parse(json_bad, "bad.json", &p, &err), TF_EINVAL);
        assert_non_null(strstr(err.msg, bad[k][1]));
    }
}

static void plan_places_and_reads_back(void **state)
{
    (void)state;
    /* 1F1B, 4 ranks, 4 microbatches, unfrozen: each rank idles 3 x 3 =
     * 9 ms, of which 95% takes aux work: 4 x 3 ms after the forwards
     * cannot all fit, and spill. */
    tf_profile p;
    equal_profile("1F1B", 4, 4, ", \"aux\": [{\"name\": \"kfac\", \"after\": \"F\", \"ms\": 3}]",
                  &p);
    tf_plan plan, read;
    tf_error err = {0};
    assert_int_equal(tf_plan_unfrozen(&p, &plan, &err), 0);
    assert_int_equal(plan.aux.ranks, 4);
    for (int r = 0; r < 4; r++) {
        const tf_aux_rank *a = &plan.aux.per_rank[r];
        assert_true(fabs(a->demand_ms - 12.0) < 1e-12);
        assert_true(a->placed_ms <= a->exact_ms + 1e-9 && a->exact_ms <= 9 * 0.95 + 1e-9);
        assert_true(a->spilled_ms > 0 && a->refresh_steps >= 2);
    }
    char *json;
    assert_int_equal(tf_plan_to_json(&plan, &json, &err), 0);
    assert_non_null(strstr(json, "\"placed\""));
    assert_int_equal(tf_plan_parse(json, "plan.json", &read, &err), 0);
    assert_int_equal(read.n_aux_work, plan.n_aux_work);
    assert_int_equal(read.aux.n_slices, plan.aux.n_slices);
    for (int r = 0; r < 4; r++)
        assert_true(fabs(read.aux.per_rank[r].placed_ms - plan.aux.per_rank[r].placed_ms) <
                    1e-9);
    free(json);
    tf_plan_free(&read);
    tf_plan_free(&plan);
    tf_profile_free(&p);
}

/* 1F1B on 2 ranks, 2 microbatches (t_f 1, t_b 2, frozen 1): stage 1's
 * once-per-step 1.5 ms of work can only go in the trailing window of rank
 * 1, while rank 0 runs its last backward, 2 - c ms at per-action cap c,
 * 95% of it usable.  Unfrozen it fits (1.9 ms), the plan (c = 1, 1.0 ms)
 * spills it to the next step; the most freezing that keeps it in the step
 * is c = 2 - 1.5 / 0.95. */
static void compare_arms(void **state)
{
    (void)state;
    char json[1024];
    snprintf(json, sizeof json,
             "{\"schedule\": \"1F1B\", \"ranks\": 2, \"microbatches\": 2, \"stages\": ["
             "{\"forward_ms\": 1, \"backward_ms\": 2, \"backward_frozen_ms\": 1}, "
             "{\"forward_ms\": 1, \"backward_ms\": 2, \"backward_frozen_ms\": 1, \"aux\": "
             "[{\"name\": \"inverse\", \"after\": \"step\", \"ms\": 1.5, "
             "\"divisible\": true}]}], \"max_freeze_ratio\": 1}");
    tf_profile p;
    tf_error err = {0};
    assert_int_equal(tf_profile_parse(json, "arms.json", &p, &err), 0);
    tf_aux_comparison c;
    assert_int_equal(tf_plan_compare_aux(&p, NULL, &c, &err), 0);
    assert_int_equal(c.arm[0].refresh_steps, 1);
    assert_true(fabs(c.arm[0].batch_ms - 9.0) < 1e-9);
    assert_int_equal(c.arm[1].refresh_steps, 2);
    assert_int_equal(c.arm[2].refresh_steps, 1);
    assert_true(fabs(c.arm[2].max_action_ratio - (2.0 - 1.5 / 0.95)) < 1e-5);
    assert_true(c.arm[2].batch_ms > c.arm[1].batch_ms && c.arm[2].batch_ms < c.arm[0].batch_ms);
    tf_profile_free(&p);
    /* Without aux work there is nothing to compare. */
    equal_profile("1F1B", 2, 2, "", &p);
    assert_int_equal(tf_plan_compare_aux(&p, NULL, &c, &err), TF_EINVAL);
    tf_profile_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(closed_forms),
        cmocka_unit_test(zero_bubble_closed_form),
        cmocka_unit_test(first_fit),
        cmocka_unit_test(spill_and_refresh),
        cmocka_unit_test(margin_and_unplaceable),
        cmocka_unit_test(exact_is_max_flow),
        cmocka_unit_test(profile_lists),
        cmocka_unit_test(plan_places_and_reads_back),
        cmocka_unit_test(compare_arms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
