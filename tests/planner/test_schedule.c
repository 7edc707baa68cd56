/* test_schedule.c - built-in schedules against PyTorch's orders (golden CSVs
 * in tests/planner/golden/schedules), hand-checked small orders, action parsing,
 * explicit-order validation and CSV round trips. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tf/dag.h"
#include "tf/error.h"
#include "tf/schedule.h"

static const char *const builtin_names[] = {"GPipe",         "1F1B",
                                            "Interleaved1F1B", "LoopedBFS",
                                            "InterleavedZeroBubble", "ZBVZeroBubble",
                                            "DualPipeV"};
enum { builtin_count = sizeof builtin_names / sizeof builtin_names[0] };

/* The stages_per_rank values each built-in accepts, within what the sweeps try. */
static int accepts_stages_per_rank(const char *name, int stages_per_rank)
{
    if (strcmp(name, "GPipe") == 0 || strcmp(name, "1F1B") == 0)
        return stages_per_rank == 1;
    if (strcmp(name, "ZBVZeroBubble") == 0 || strcmp(name, "DualPipeV") == 0)
        return stages_per_rank == 2;
    if (strcmp(name, "LoopedBFS") == 0)
        return stages_per_rank >= 1;
    return stages_per_rank >= 2;
}

/* Asserts that rank `rank` of s runs exactly the space-separated cells of `expected`. */
static void assert_rank_order(const tf_schedule *s, int rank, const char *expected)
{
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", expected);
    int i = s->rank_offset[rank];
    char *save = NULL;
    for (char *cell = strtok_r(copy, " ", &save); cell; cell = strtok_r(NULL, " ", &save)) {
        char text[32];
        if (i >= s->rank_offset[rank + 1])
            fail_msg("rank %d ends before %s (expected %s)", rank, cell, expected);
        tf_action_format(&s->actions[i], text);
        if (strcmp(text, cell) != 0)
            fail_msg("rank %d, position %d: got %s, expected %s (expected order %s)", rank,
                     i - s->rank_offset[rank], text, cell, expected);
        assert_int_equal(s->actions[i].rank, rank);
        i++;
    }
    assert_int_equal(i, s->rank_offset[rank + 1]);
}

static void assert_same_schedule(const tf_schedule *want, const tf_schedule *got,
                                 const char *what)
{
    if (want->ranks != got->ranks || want->stages != got->stages ||
        want->stages_per_rank != got->stages_per_rank ||
        want->microbatches != got->microbatches || want->n_actions != got->n_actions)
        fail_msg("%s: shape differs: ranks %d/%d, stages %d/%d, microbatches %d/%d, actions %d/%d",
                 what, want->ranks, got->ranks, want->stages, got->stages, want->microbatches,
                 got->microbatches, want->n_actions, got->n_actions);
    for (int r = 0; r <= want->ranks; r++)
        if (want->rank_offset[r] != got->rank_offset[r])
            fail_msg("%s: rank %d starts at action %d, expected %d", what, r,
                     got->rank_offset[r], want->rank_offset[r]);
    for (int stage = 0; stage < want->stages; stage++)
        if (want->stage_rank[stage] != got->stage_rank[stage])
            fail_msg("%s: stage %d on rank %d, expected rank %d", what, stage,
                     got->stage_rank[stage], want->stage_rank[stage]);
    for (int i = 0; i < want->n_actions; i++) {
        const tf_action *a = &want->actions[i], *b = &got->actions[i];
        if (a->type != b->type || a->stage != b->stage || a->microbatch != b->microbatch ||
            a->rank != b->rank || a->pair != b->pair) {
            char ta[32], tb[32];
            fail_msg("%s: action %d (rank %d): got %s, expected %s", what, i, a->rank,
                     tf_action_format(b, tb), tf_action_format(a, ta));
        }
    }
}

static const char *source_dir(void)
{
    const char *dir = getenv("TF_SOURCE_DIR");
    return dir && *dir ? dir : ".";
}

static void temp_path(char *buf, size_t size, const char *tag)
{
    const char *dir = getenv("TF_BUILD_DIR");
    snprintf(buf, size, "%s/test_schedule_%ld_%s.csv", dir && *dir ? dir : "/tmp",
             (long)getpid(), tag);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

/* ---- PyTorch goldens ---------------------------------------------------- */

static void test_goldens_equal_build(void **state)
{
    (void)state;
    char dir_path[4096];
    snprintf(dir_path, sizeof dir_path, "%s/tests/planner/golden/schedules", source_dir());
    DIR *dir = opendir(dir_path);
    if (!dir)
        fail_msg("cannot open %s (is TF_SOURCE_DIR set?)", dir_path);
    int checked = 0;
    int per_builtin[builtin_count] = {0};
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        const char *file = entry->d_name;
        size_t len = strlen(file);
        if (len < 4 || strcmp(file + len - 4, ".csv") != 0)
            continue;
        char name[64];
        int ranks = 0, stages_per_rank = 0, microbatches = 0, consumed = 0;
        const char *underscore = strchr(file, '_');
        if (!underscore || (size_t)(underscore - file) >= sizeof name)
            fail_msg("golden %s: name is not <Name>_p<P>_v<V>_m<M>.csv", file);
        memcpy(name, file, (size_t)(underscore - file));
        name[underscore - file] = '\0';
        if (sscanf(underscore, "_p%d_v%d_m%d.csv%n", &ranks, &stages_per_rank, &microbatches,
                   &consumed) != 3 ||
            underscore[consumed] != '\0')
            fail_msg("golden %s: name is not <Name>_p<P>_v<V>_m<M>.csv", file);

        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir_path, file);
        tf_schedule golden, built;
        tf_error err = {0};
        if (tf_schedule_read_csv(path, &golden, &err) != 0)
            fail_msg("%s: %s", file, err.msg);
        if (tf_schedule_build(name, ranks, stages_per_rank, microbatches, &built, &err) != 0)
            fail_msg("%s: %s", file, err.msg);
        assert_string_equal(built.name, name);
        assert_string_equal(golden.name, "custom");
        assert_same_schedule(&golden, &built, file);
        for (int k = 0; k < builtin_count; k++)
            if (strcmp(name, builtin_names[k]) == 0)
                per_builtin[k]++;
        tf_schedule_free(&golden);
        tf_schedule_free(&built);
        checked++;
    }
    closedir(dir);
    assert_true(checked >= 60);
    for (int k = 0; k < builtin_count; k++)
        if (per_builtin[k] < 8)
            fail_msg("only %d goldens for %s", per_builtin[k], builtin_names[k]);
}

/* PyTorch's own test artifacts (tests/planner/golden/pytorch-artifacts),
 * read as PyTorch writes them: DualPipeV's is the built-in order; the
 * older ZB1P file reads as its newer rewrite. */
static void test_pytorch_artifacts(void **state)
{
    (void)state;
    char path[4096];
    tf_schedule csv, built, newer;
    tf_error err = {0};
    tf_csv_notes notes;
    snprintf(path, sizeof path, "%s/tests/planner/golden/pytorch-artifacts/%s", source_dir(),
             "dualpipev_4rank_10mb.csv");
    if (tf_schedule_read_csv_noted(path, &csv, &notes, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(notes.old_backwards, 0);
    assert_int_equal(tf_schedule_build("DualPipeV", 4, 2, 10, &built, &err), 0);
    assert_same_schedule(&built, &csv, "dualpipev_4rank_10mb.csv");
    tf_schedule_free(&csv);
    tf_schedule_free(&built);

    snprintf(path, sizeof path, "%s/tests/planner/golden/pytorch-artifacts/%s", source_dir(),
             "zb1p_2rank_2stagep_compute.csv");
    if (tf_schedule_read_csv_noted(path, &csv, &notes, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(notes.old_backwards, 32);
    assert_string_equal(notes.first_old, "2B0");
    snprintf(path, sizeof path, "%s/tests/planner/golden/pytorch-artifacts/%s", source_dir(),
             "zb1p_2rank_2stagep_compute.a8e954a.csv");
    if (tf_schedule_read_csv_noted(path, &newer, &notes, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(notes.old_backwards, 0);
    assert_same_schedule(&newer, &csv, "zb1p_2rank_2stagep_compute.csv");
    assert_int_equal(csv.ranks, 2);
    assert_int_equal(csv.stages_per_rank, 2);
    assert_int_equal(csv.microbatches, 8);
    tf_schedule_free(&csv);
    tf_schedule_free(&newer);
}

/* ---- hand-checked orders ------------------------------------------------ */

static void test_1f1b_p2_m3(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 3, &s, &err), 0);
    assert_string_equal(s.name, "1F1B");
    assert_int_equal(s.n_actions, 12);
    assert_rank_order(&s, 0, "0F0 0F1 0B0 0F2 0B1 0B2");
    assert_rank_order(&s, 1, "1F0 1B0 1F1 1B1 1F2 1B2");
    tf_schedule_free(&s);
}

/* PyTorch's 1F1B: rank r runs min(P - r, M) forwards, then B and F alternate. */
static void test_1f1b_p3_m4(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("1F1B", 3, 1, 4, &s, &err), 0);
    assert_rank_order(&s, 0, "0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3");
    assert_rank_order(&s, 1, "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3");
    assert_rank_order(&s, 2, "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3");
    tf_schedule_free(&s);
}

/* Fewer microbatches than ranks (PyTorch refuses this shape; the same
 * rule covers it): rank r warms up with min(P - r, M) forwards. */
static void test_1f1b_fewer_microbatches_than_ranks(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("1F1B", 4, 1, 2, &s, &err), 0);
    assert_rank_order(&s, 0, "0F0 0F1 0B0 0B1");
    assert_rank_order(&s, 2, "2F0 2F1 2B0 2B1");
    assert_rank_order(&s, 3, "3F0 3B0 3F1 3B1");
    tf_schedule_free(&s);
    assert_int_equal(tf_schedule_build("GPipe", 4, 1, 2, &s, &err), 0);
    assert_rank_order(&s, 3, "3F0 3F1 3B0 3B1");
    tf_schedule_free(&s);
}

static void test_gpipe_p2_m2(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("GPipe", 2, 1, 2, &s, &err), 0);
    assert_rank_order(&s, 0, "0F0 0F1 0B0 0B1");
    assert_rank_order(&s, 1, "1F0 1F1 1B0 1B1");
    assert_int_equal(s.stage_rank[0], 0);
    assert_int_equal(s.stage_rank[1], 1);
    tf_schedule_free(&s);
}

/* P=2, V=2, M=2: one round of 2 microbatches.  Rank 0 warms up with
 * min((V-1)*2 + 2*(P-1), V*M) = 4 forwards (all of them); rank 1 with 2. */
static void test_interleaved_1f1b_p2_v2_m2(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("Interleaved1F1B", 2, 2, 2, &s, &err), 0);
    assert_rank_order(&s, 0, "0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1");
    assert_rank_order(&s, 1, "1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1");
    assert_int_equal(s.stage_rank[2], 0);
    assert_int_equal(s.stage_rank[3], 1);
    tf_schedule_free(&s);
}

/* One rank hosts both stages of the V: forward 0 then 1, backward 1 then 0. */
static void test_zbv_p1_m1(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("ZBVZeroBubble", 1, 2, 1, &s, &err), 0);
    assert_rank_order(&s, 0, "0F0 1F0 1I0 1W0 0I0 0W0");
    tf_schedule_free(&s);
}

/* LoopedBFS: each local stage runs all its forwards in turn, then the
 * stages in reverse run their backwards from the last microbatch down. */
static void test_looped_bfs_p2_v2_m2(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("LoopedBFS", 2, 2, 2, &s, &err), 0);
    assert_string_equal(s.name, "LoopedBFS");
    assert_rank_order(&s, 0, "0F0 0F1 2F0 2F1 2B1 2B0 0B1 0B0");
    assert_rank_order(&s, 1, "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0");
    assert_int_equal(s.stage_rank[2], 0);
    tf_schedule_free(&s);
}

/* DualPipeV on one rank, 2 microbatches, phase by phase: F of both chunks;
 * the last rank's first steady round unpaired (0F1, 1B0), then the pair
 * (1F1;0B0); the drain: 1B1 full, the switch to I on an even rank comes
 * before chunk 0's backward (0I1), and its W closes the order. */
static void test_dual_pipe_v_p1_m2(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("DualPipeV", 1, 2, 2, &s, &err), 0);
    assert_string_equal(s.name, "DualPipeV");
    assert_rank_order(&s, 0, "0F0 1F0 0F1 1B0 1F1 0B0 1B1 0I1 0W1");
    for (int i = 0; i < s.n_actions; i++)
        assert_int_equal(s.actions[i].pair,
                         i == 4 ? TF_PAIR_FIRST : i == 5 ? TF_PAIR_SECOND : TF_PAIR_NONE);
    char cell[TF_CELL_MAX];
    assert_int_equal(tf_schedule_format_cell(&s, 4, cell), 2);
    assert_string_equal(cell, "(1F1;0B0)OVERLAP_F_B");
    assert_int_equal(tf_schedule_format_cell(&s, 3, cell), 1);
    assert_string_equal(cell, "1B0");
    assert_true(tf_schedule_has_pairs(&s));
    tf_schedule_free(&s);
    assert_int_equal(tf_schedule_build("ZBVZeroBubble", 2, 2, 4, &s, &err), 0);
    assert_false(tf_schedule_has_pairs(&s));
    tf_schedule_free(&s);
}

/* Counts by type, and fill-drain: GPipe and LoopedBFS run every forward of
 * a rank before its first backward, the others do not (1F1B's last rank
 * alternates from its first microbatch); a recomputation is not a forward,
 * and one forward after a backward on one rank breaks the shape. */
static void test_fills_then_drains(void **state)
{
    (void)state;
    const char *names[] = {"GPipe", "LoopedBFS", "1F1B", "Interleaved1F1B",
                           "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"};
    for (int i = 0; i < 7; i++) {
        tf_schedule s;
        tf_error err = {0};
        int v = tf_schedule_default_stages_per_rank(names[i]);
        assert_int_equal(tf_schedule_build(names[i], 4, v, 8, &s, &err), 0);
        assert_int_equal(tf_schedule_fills_then_drains(&s), i < 2);
        /* Every stage has 8 forwards; the zero-bubble schedules split
         * every backward (DualPipeV some) into an I and a W. */
        int stages = 4 * v, w = tf_schedule_count(&s, TF_ACT_W);
        assert_int_equal(tf_schedule_count(&s, TF_ACT_F), 8 * stages);
        assert_int_equal(tf_schedule_count(&s, TF_ACT_I), w);
        assert_int_equal(tf_schedule_count(&s, TF_ACT_B) + w, 8 * stages);
        assert_int_equal(w > 0, tf_schedule_splits_backward(names[i]));
        assert_int_equal(w == 8 * stages, i == 4 || i == 5);
        if (i < 2) {
            unsigned char recompute[8] = {1, 1, 1, 1, 1, 1, 1, 1};
            tf_schedule r;
            assert_int_equal(tf_schedule_insert_recompute(&s, recompute, &r), 0);
            assert_true(r.n_actions > s.n_actions);
            assert_true(tf_schedule_fills_then_drains(&r));
            tf_schedule_free(&r);
            /* Rank 2's last forward and first backward swapped. */
            int k = s.rank_offset[2];
            while (s.actions[k + 1].type == TF_ACT_F)
                k++;
            tf_action t = s.actions[k];
            s.actions[k] = s.actions[k + 1];
            s.actions[k + 1] = t;
            assert_false(tf_schedule_fills_then_drains(&s));
        }
        tf_schedule_free(&s);
    }
}

/* ---- overlapped pairs as cells ------------------------------------------ */

static void test_pair_cells(void **state)
{
    (void)state;
    const char *good[] = {"(0F7;7B3)OVERLAP_F_B", " ( 0F7 ; 7B3 ) OVERLAP_F_B\t",
                          "(12F0;3I2)OVERLAP_F_B"};
    const tf_action want[3][2] = {{{TF_ACT_F, 0, 7, -1, TF_PAIR_FIRST},
                                   {TF_ACT_B, 7, 3, -1, TF_PAIR_SECOND}},
                                  {{TF_ACT_F, 0, 7, -1, TF_PAIR_FIRST},
                                   {TF_ACT_B, 7, 3, -1, TF_PAIR_SECOND}},
                                  {{TF_ACT_F, 12, 0, -1, TF_PAIR_FIRST},
                                   {TF_ACT_I, 3, 2, -1, TF_PAIR_SECOND}}};
    for (int k = 0; k < 3; k++) {
        tf_action a[2];
        int count = 0;
        tf_error err = {0};
        if (tf_cell_parse(good[k], a, &count, &err) != 0)
            fail_msg("%s: %s", good[k], err.msg);
        assert_int_equal(count, 2);
        for (int j = 0; j < 2; j++) {
            assert_int_equal(a[j].type, want[k][j].type);
            assert_int_equal(a[j].stage, want[k][j].stage);
            assert_int_equal(a[j].microbatch, want[k][j].microbatch);
            assert_int_equal(a[j].rank, -1);
            assert_int_equal(a[j].pair, want[k][j].pair);
        }
        char back[TF_CELL_MAX];
        if (k != 1)
            assert_string_equal(tf_pair_format(&a[0], &a[1], back), good[k]);
    }
    tf_action a[2];
    int count = 5;
    assert_int_equal(tf_cell_parse(" 3W1 ", a, &count, NULL), 0);
    assert_int_equal(count, 1);
    assert_int_equal(a[0].pair, TF_PAIR_NONE);
    assert_int_equal(a[0].type, TF_ACT_W);

    const struct {
        const char *cell, *says;
    } bad[] = {{"(0F7;7B3)", "expected an overlapped pair"},
               {"(0F7;7B3)OVERLAP", "expected an overlapped pair"},
               {"(0F7;7B3)OVERLAP_F_Bx", "expected an overlapped pair"},
               {"(0F7)OVERLAP_F_B", "expected an overlapped pair"},
               {"(0F7;7B3;1F0)OVERLAP_F_B", "exactly two actions"},
               {"(7B3;0F7)OVERLAP_F_B", "a forward then a backward"},
               {"(0F7;7W3)OVERLAP_F_B", "a forward then a backward"},
               {"(0F7;0F8)OVERLAP_F_B", "a forward then a backward"},
               {"(0F7;7X3)OVERLAP_F_B", "\"7X3\" is not an action"},
               {"(;)OVERLAP_F_B", "empty cell"},
               {"(", "expected an overlapped pair"},
               {NULL, "missing cell"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tf_error err = {0};
        count = 7;
        if (tf_cell_parse(bad[k].cell, a, &count, &err) != TF_EINVAL)
            fail_msg("\"%s\" parsed as a cell", bad[k].cell ? bad[k].cell : "(null)");
        assert_int_equal(count, 0);
        if (!strstr(err.msg, bad[k].says))
            fail_msg("\"%s\": message \"%s\" does not say \"%s\"",
                     bad[k].cell ? bad[k].cell : "(null)", err.msg, bad[k].says);
    }
}

/* ---- finding actions ---------------------------------------------------- */

/* The index finds every action where the search does, and nothing outside
 * the schedule: absent types (no I or W in 1F1B), stages and microbatches
 * out of range. */
static void test_lookup_matches_find(void **state)
{
    (void)state;
    const char *names[] = {"1F1B", "ZBVZeroBubble"};
    for (int k = 0; k < 2; k++) {
        tf_schedule s;
        tf_error err = {0};
        assert_int_equal(tf_schedule_build(names[k], 3, k == 0 ? 1 : 2, 5, &s, &err), 0);
        int *index = tf_schedule_index(&s);
        assert_non_null(index);
        int found = 0;
        for (int type = TF_ACT_F; type <= TF_ACT_W; type++)
            for (int stage = -1; stage <= s.stages; stage++)
                for (int mb = -1; mb <= s.microbatches; mb++) {
                    int want = tf_schedule_find(&s, (tf_action_type)type, stage, mb);
                    assert_int_equal(tf_schedule_lookup(&s, index, (tf_action_type)type, stage, mb),
                                     want);
                    assert_int_equal(tf_schedule_lookup(&s, NULL, (tf_action_type)type, stage, mb),
                                     want);
                    if (want >= 0) {
                        const tf_action *a = &s.actions[want];
                        assert_true(a->type == (tf_action_type)type && a->stage == stage &&
                                    a->microbatch == mb);
                        found++;
                    }
                }
        assert_int_equal(found, s.n_actions);
        free(index);
        tf_schedule_free(&s);
    }
}

/* ---- names and stage mapping ------------------------------------------- */

static void test_names_and_stage_mapping(void **state)
{
    (void)state;
    for (int k = 0; k < builtin_count; k++)
        assert_true(tf_schedule_is_builtin(builtin_names[k]));
    assert_true(tf_schedule_is_builtin("1f1b"));
    assert_false(tf_schedule_is_builtin("custom"));
    assert_false(tf_schedule_is_builtin(""));
    assert_false(tf_schedule_is_builtin(NULL));
    assert_non_null(strstr(tf_schedule_builtin_names(), "InterleavedZeroBubble"));

    assert_false(tf_schedule_splits_backward("GPipe"));
    assert_false(tf_schedule_splits_backward("1F1B"));
    assert_false(tf_schedule_splits_backward("Interleaved1F1B"));
    assert_true(tf_schedule_splits_backward("InterleavedZeroBubble"));
    assert_true(tf_schedule_splits_backward("ZBVZeroBubble"));
    assert_false(tf_schedule_splits_backward("LoopedBFS"));
    assert_true(tf_schedule_splits_backward("DualPipeV"));
    assert_int_equal(tf_schedule_default_stages_per_rank("LoopedBFS"), 2);
    assert_int_equal(tf_schedule_default_stages_per_rank("DualPipeV"), 2);
    assert_non_null(strstr(tf_schedule_builtin_names(), "LoopedBFS"));
    assert_non_null(strstr(tf_schedule_builtin_names(), "DualPipeV"));

    /* V shape for P=4: stages 0..3 on ranks 0..3, stages 4..7 on ranks 3..0. */
    const int v_shape[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int stage = 0; stage < 8; stage++) {
        assert_int_equal(tf_schedule_stage_rank("ZBVZeroBubble", 4, 2, stage), v_shape[stage]);
        assert_int_equal(tf_schedule_stage_rank("DualPipeV", 4, 2, stage), v_shape[stage]);
        assert_int_equal(tf_schedule_stage_rank("Interleaved1F1B", 4, 2, stage), stage % 4);
        assert_int_equal(tf_schedule_stage_rank("LoopedBFS", 4, 2, stage), stage % 4);
    }
    assert_int_equal(tf_schedule_stage_rank("1F1B", 4, 1, 4), -1);

    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(tf_schedule_build("zbvzerobubble", 2, 2, 4, &s, &err), 0);
    assert_string_equal(s.name, "ZBVZeroBubble");
    tf_schedule_free(&s);
}

/* ---- action cells ------------------------------------------------------- */

static void test_action_parse_format_round_trip(void **state)
{
    (void)state;
    const tf_action cases[] = {{TF_ACT_F, 0, 0, -1, TF_PAIR_NONE},
                               {TF_ACT_B, 1, 2, -1, TF_PAIR_NONE},
                               {TF_ACT_I, 12, 7, -1, TF_PAIR_NONE},
                               {TF_ACT_W, 3, 1000, -1, TF_PAIR_NONE},
                               {TF_ACT_F, 2147483647, 2147483647, -1, TF_PAIR_NONE}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[32];
        tf_action back;
        tf_error err = {0};
        tf_action_format(&cases[k], text);
        assert_int_equal(tf_action_parse(text, &back, &err), 0);
        assert_int_equal(back.type, cases[k].type);
        assert_int_equal(back.stage, cases[k].stage);
        assert_int_equal(back.microbatch, cases[k].microbatch);
        assert_int_equal(back.rank, -1);
    }
    tf_action a = {TF_ACT_W, 12, 7, 0, TF_PAIR_NONE};
    char text[32];
    assert_string_equal(tf_action_format(&a, text), "12W7");

    tf_action parsed;
    tf_error err = {0};
    assert_int_equal(tf_action_parse("  2I0\t", &parsed, &err), 0);
    assert_int_equal(parsed.type, TF_ACT_I);
    assert_int_equal(parsed.stage, 2);
    assert_int_equal(parsed.microbatch, 0);

    for (int t = 0; t < 4; t++) {
        tf_action_type type;
        char letter = tf_action_letter((tf_action_type)t);
        assert_int_equal(tf_action_type_parse(letter, &type), 0);
        assert_int_equal(type, t);
    }
    tf_action_type type;
    assert_int_equal(tf_action_type_parse('X', &type), TF_EINVAL);
    assert_int_equal(tf_action_type_parse('f', &type), TF_EINVAL);
}

static void test_action_parse_rejects(void **state)
{
    (void)state;
    const char *bad[] = {"",         "   ",     "F3",          "0X3",  "-1F2",
                         "0F",       "0F3x",    "0F-3",        "+0F3", "0 F3",
                         "0F3 1B2",  "0f3",     "2147483648F0", "0F2147483648",
                         "99999999999999999999999B1"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tf_action a;
        tf_error err = {0};
        if (tf_action_parse(bad[k], &a, &err) != TF_EINVAL)
            fail_msg("\"%s\" parsed as an action", bad[k]);
        assert_int_equal(err.code, TF_EINVAL);
        assert_true(strlen(err.msg) > 0);
    }
    tf_action a;
    tf_error err = {0};
    assert_int_equal(tf_action_parse("0X2", &a, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "\"0X2\" is not an action"));
    assert_int_equal(tf_action_parse("2147483648F0", &a, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "too large"));
    assert_int_equal(tf_action_parse(NULL, &a, &err), TF_EINVAL);
    assert_int_equal(tf_action_parse("0F1", &a, NULL), 0);
    assert_int_equal(tf_action_parse("zz", &a, NULL), TF_EINVAL);
}

/* ---- explicit orders ---------------------------------------------------- */

/* Builds from two rows given as space-separated cells. */
static int from_two_rows(const char *row0, const char *row1, int microbatches, tf_schedule *out,
                         tf_error *err)
{
    char text[2][512];
    const char *cells[2][64];
    int lens[2] = {0, 0};
    snprintf(text[0], sizeof text[0], "%s", row0);
    snprintf(text[1], sizeof text[1], "%s", row1);
    for (int r = 0; r < 2; r++) {
        char *save = NULL;
        for (char *cell = strtok_r(text[r], " ", &save); cell && lens[r] < 64;
             cell = strtok_r(NULL, " ", &save))
            cells[r][lens[r]++] = cell;
    }
    const char *const *rows[2] = {cells[0], cells[1]};
    return tf_schedule_from_cells(&(tf_cell_rows){rows, lens, 2}, microbatches, "order", out, err);
}

static void expect_order_error(const char *row0, const char *row1, int microbatches,
                               const char *must_contain_a, const char *must_contain_b)
{
    tf_schedule s;
    tf_error err = {0};
    memset(&s, 0x5a, sizeof s);
    int rc = from_two_rows(row0, row1, microbatches, &s, &err);
    if (rc != TF_EINVAL)
        fail_msg("order [%s] [%s] accepted (rc %d), expected an error naming %s", row0, row1, rc,
                 must_contain_a);
    if (!strstr(err.msg, must_contain_a) || (must_contain_b && !strstr(err.msg, must_contain_b)))
        fail_msg("message \"%s\" does not name %s%s%s", err.msg, must_contain_a,
                 must_contain_b ? " and " : "", must_contain_b ? must_contain_b : "");
    assert_null(s.actions);
    assert_null(s.rank_offset);
    assert_null(s.stage_rank);
    assert_int_equal(s.n_actions, 0);
}

static void test_from_cells_accepts_valid_order(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    /* A hand-made split-backward order: 1F1B with I/W on stage 1. */
    int rc = from_two_rows("0F0 0F1 0B0 0F2 0B1 0B2", "1F0 1I0 1F1 1W0 1I1 1F2 1W1 1I2 1W2", 3,
                           &s, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_string_equal(s.name, "custom");
    assert_int_equal(s.ranks, 2);
    assert_int_equal(s.stages, 2);
    assert_int_equal(s.stages_per_rank, 1);
    assert_int_equal(s.microbatches, 3);
    assert_int_equal(s.n_actions, 15);
    assert_int_equal(s.stage_rank[1], 1);
    assert_rank_order(&s, 1, "1F0 1I0 1F1 1W0 1I1 1F2 1W1 1I2 1W2");
    assert_int_equal(tf_schedule_find(&s, TF_ACT_W, 1, 0), 6 + 3);
    assert_int_equal(tf_schedule_find(&s, TF_ACT_B, 1, 0), -1);
    tf_schedule_free(&s);
    tf_schedule_free(&s);
}

/* A pair in an explicit order: two actions, back to back, marked. */
static void test_from_cells_with_pair(void **state)
{
    (void)state;
    tf_schedule s;
    tf_error err = {0};
    if (from_two_rows("0F0 (0F1;0B0)OVERLAP_F_B 0B1", "1F0 1B0 1F1 1B1", 2, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.n_actions, 8);
    assert_rank_order(&s, 0, "0F0 0F1 0B0 0B1");
    assert_int_equal(s.actions[1].pair, TF_PAIR_FIRST);
    assert_int_equal(s.actions[2].pair, TF_PAIR_SECOND);
    assert_int_equal(s.actions[0].pair + s.actions[3].pair + s.actions[4].pair, 0);
    tf_schedule_free(&s);
    /* A pair's halves are checked like any action, and named by the cell. */
    expect_order_error("0F0 (0F1;0B0)OVERLAP_F_B 0B1 0B0", "1F0 1B0 1F1 1B1", 2, "order[0][3]",
                       "order[0][1]");
    expect_order_error("0F0 (0F1;0B0)OVERLAP_F_B", "1F0 1B0 1F1 1B1", 2, "0F1", "no backward");
    expect_order_error("0F0 (0F1;0W0)OVERLAP_F_B 0B1", "1F0 1B0 1F1 1B1", 2, "order[0][1]",
                       "a forward then a backward");
    expect_order_error("0F0 (0F5;0B0)OVERLAP_F_B 0B1", "1F0 1B0 1F1 1B1", 2, "order[0][1]",
                       "microbatch 5");
}

static void test_from_cells_rejects(void **state)
{
    (void)state;
    /* Not an action. */
    expect_order_error("0F0 0B0", "1F0 0X2 1B0", 1, "order[1][1]", "\"0X2\" is not an action");
    /* Duplicate action: the repeat is named with the original. */
    expect_order_error("0F0 0F1 0B0 0F1 0B1", "1F0 1B0 1F1 1B1", 2, "order[0][3]", "order[0][1]");
    /* Missing forward. */
    expect_order_error("0F0 0B0 0B1", "1F0 1B0 1F1 1B1", 2, "0F1 is missing", "0B1");
    /* A whole (stage, microbatch) missing. */
    expect_order_error("0F0 0B0", "1F0 1B0", 2, "0F1 is missing", NULL);
    /* B together with I/W. */
    expect_order_error("0F0 0B0 0I0 0W0", "1F0 1B0", 1, "order[0][2]", "0B0");
    /* W without I. */
    expect_order_error("0F0 0B0", "1F0 1W0", 1, "order[1][1]", "1W0");
    /* I without W. */
    expect_order_error("0F0 0B0", "1F0 1I0", 1, "order[1][1]", "1I0");
    /* No backward at all. */
    expect_order_error("0F0 0B0", "1F0", 1, "1F0", "has no backward");
    /* Stage on two ranks. */
    expect_order_error("0F0 1F0 0B0", "1B0", 1, "order[1][0]", "stage 1");
    /* Microbatch out of range. */
    expect_order_error("0F0 0B0 0F5", "1F0 1B0", 2, "order[0][2]", "microbatch 5");
    /* Stages that do not divide over the ranks. */
    expect_order_error("0F0 0B0 2F0 2B0", "1F0 1B0", 1, "3 stages", "2 ranks");
    /* Uneven stage placement. */
    expect_order_error("0F0 1F0 2F0 2B0 1B0 0B0", "3F0 3B0", 1, "rank 0 runs 3 stages", NULL);
    /* An empty order. */
    expect_order_error("", "", 1, "no actions", NULL);
    /* A huge stage number cannot fit any order of this size. */
    expect_order_error("0F0 0B0 2000000000F0", "1F0 1B0", 1, "order[0][2]", "out of range");

    tf_schedule s;
    tf_error err = {0};
    assert_int_equal(from_two_rows("0F0 0B0", "1F0 1B0", 0, &s, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "microbatches = 0"));
    const int lens[1] = {1};
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){NULL, lens, 1}, 1, "order", &s, &err),
                     TF_EINVAL);
    assert_int_equal(tf_schedule_from_cells(&(tf_cell_rows){NULL, NULL, 0}, 1, "order", &s, &err),
                     TF_EINVAL);
    const char *null_cell[1] = {NULL};
    const char *const *rows[1] = {null_cell};
    assert_int_equal(
        tf_schedule_from_cells(&(tf_cell_rows){rows, lens, 1}, 1, "profile.order", &s, &err),
        TF_EINVAL);
    assert_non_null(strstr(err.msg, "profile.order[0][0]"));
}

/* ---- tf_schedule_build rejects ----------------------------------------- */

static void expect_build_error(const char *name, int ranks, int stages_per_rank,
                               int microbatches, const char *must_contain)
{
    tf_schedule s;
    tf_error err = {0};
    memset(&s, 0x5a, sizeof s);
    int rc = tf_schedule_build(name, ranks, stages_per_rank, microbatches, &s, &err);
    if (rc != TF_EINVAL)
        fail_msg("build(%s, %d, %d, %d) gave %d, expected TF_EINVAL", name ? name : "NULL",
                 ranks, stages_per_rank, microbatches, rc);
    if (!strstr(err.msg, must_contain))
        fail_msg("message \"%s\" does not mention \"%s\"", err.msg, must_contain);
    assert_null(s.actions);
    assert_int_equal(s.n_actions, 0);
}

static void test_build_rejects(void **state)
{
    (void)state;
    expect_build_error("Zigzag", 2, 1, 4, "\"Zigzag\"");
    expect_build_error("", 2, 1, 4, "not a built-in");
    expect_build_error(NULL, 2, 1, 4, "not a built-in");
    expect_build_error("1F1B", 0, 1, 4, "ranks = 0");
    expect_build_error("GPipe", -3, 1, 4, "ranks = -3");
    expect_build_error("1F1B", 2, 1, 0, "microbatches = 0");
    expect_build_error("ZBVZeroBubble", 2, 2, -1, "microbatches = -1");
    expect_build_error("GPipe", 2, 2, 4, "stages_per_rank = 2");
    expect_build_error("1F1B", 2, 0, 4, "stages_per_rank = 0");
    expect_build_error("Interleaved1F1B", 2, 1, 4, "stages_per_rank = 1");
    expect_build_error("InterleavedZeroBubble", 2, 1, 4, "stages_per_rank = 1");
    expect_build_error("ZBVZeroBubble", 2, 3, 4, "stages_per_rank = 3");
    expect_build_error("ZBVZeroBubble", 2, 1, 4, "stages_per_rank = 1");
    expect_build_error("DualPipeV", 2, 1, 4, "stages_per_rank = 1");
    expect_build_error("DualPipeV", 2, 3, 6, "stages_per_rank = 3");
    expect_build_error("LoopedBFS", 2, 0, 4, "stages_per_rank = 0");
    /* PyTorch's DualPipeV refuses fewer microbatches than stages. */
    expect_build_error("DualPipeV", 4, 2, 7, "microbatches = 7 is fewer than the 8 stages");
    expect_build_error("DualPipeV", 1, 2, 1, "microbatches = 1");
    /* PyTorch's requirements on microbatch counts (its GPipe and 1F1B
     * minimum of one microbatch per stage is deliberately not enforced:
     * see test_1f1b_fewer_microbatches_than_ranks). */
    expect_build_error("Interleaved1F1B", 4, 2, 9, "rounds 2");
    expect_build_error("InterleavedZeroBubble", 3, 2, 7, "microbatches = 7");
    /* Far too large to plan. */
    expect_build_error("1F1B", 1 << 20, 1, 1 << 20, "at most 512, 64 and 65536");
    expect_build_error("Interleaved1F1B", 2, 1 << 30, 4, "at most 512, 64 and 65536");
    /* Counts within their limits whose products are not. */
    expect_build_error("1F1B", 512, 1, 65536, "= 67108864 actions, more than the 131072");
    expect_build_error("ZBVZeroBubble", 128, 2, 512, "x 3 = 393216 actions");
    expect_build_error("Interleaved1F1B", 512, 2, 4, "= 1024 stages, more than the 512");

    tf_schedule s;
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 2, &s, NULL), 0);
    tf_schedule_free(&s);
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 1, &s, NULL), 0);
    tf_schedule_free(&s);
    assert_int_equal(tf_schedule_build("1F1B", 2, 1, 2, NULL, NULL), TF_EINVAL);
}

/* ---- sweeps over every built-in shape ----------------------------------- */

/* Every (type, stage, microbatch) the schedule needs appears exactly once,
 * on the rank hosting its stage; nothing else appears.  A schedule that
 * splits some backwards (DualPipeV) has B or both I and W for each
 * (stage, microbatch); its pairs are a forward then a B, back to back. */
static void assert_complete(const tf_schedule *s, const char *name)
{
    int split = tf_schedule_splits_backward(name);
    int mixed = strcmp(name, "DualPipeV") == 0;
    size_t cells = (size_t)s->stages * (size_t)s->microbatches * 4;
    int *seen = calloc(cells, sizeof *seen);
    assert_non_null(seen);
    assert_int_equal(s->stages, s->ranks * s->stages_per_rank);
    assert_int_equal(s->rank_offset[0], 0);
    assert_int_equal(s->rank_offset[s->ranks], s->n_actions);
    for (int stage = 0; stage < s->stages; stage++)
        assert_int_equal(s->stage_rank[stage],
                         tf_schedule_stage_rank(name, s->ranks, s->stages_per_rank, stage));
    for (int r = 0; r < s->ranks; r++) {
        assert_true(s->rank_offset[r] <= s->rank_offset[r + 1]);
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++) {
            const tf_action *a = &s->actions[i];
            assert_int_equal(a->rank, r);
            assert_true(a->stage >= 0 && a->stage < s->stages);
            assert_true(a->microbatch >= 0 && a->microbatch < s->microbatches);
            assert_int_equal(s->stage_rank[a->stage], r);
            if (a->pair == TF_PAIR_FIRST) {
                assert_true(mixed && a->type == TF_ACT_F && i + 1 < s->rank_offset[r + 1]);
                assert_int_equal(s->actions[i + 1].pair, TF_PAIR_SECOND);
                assert_int_equal(s->actions[i + 1].type, TF_ACT_B);
            } else if (a->pair == TF_PAIR_SECOND) {
                assert_int_equal(s->actions[i - 1].pair, TF_PAIR_FIRST);
            }
            seen[((size_t)a->stage * (size_t)s->microbatches + (size_t)a->microbatch) * 4 +
                 (size_t)a->type]++;
        }
    }
    int expected_actions = 0;
    for (int stage = 0; stage < s->stages; stage++)
        for (int m = 0; m < s->microbatches; m++) {
            const int *count = &seen[((size_t)stage * (size_t)s->microbatches + (size_t)m) * 4];
            int want_b = split ? 0 : 1, want_iw = split ? 1 : 0;
            if (mixed) {
                want_b = count[TF_ACT_B] == 1 ? 1 : 0;
                want_iw = 1 - want_b;
            }
            if (count[TF_ACT_F] != 1 || count[TF_ACT_B] != want_b || count[TF_ACT_I] != want_iw ||
                count[TF_ACT_W] != want_iw)
                fail_msg("%s P=%d V=%d M=%d: stage %d microbatch %d has F=%d B=%d I=%d W=%d", name,
                         s->ranks, s->stages_per_rank, s->microbatches, stage, m, count[0],
                         count[1], count[2], count[3]);
            expected_actions += 2 + want_iw;
        }
    assert_int_equal(s->n_actions, expected_actions);
    if (!mixed)
        assert_int_equal(s->n_actions, s->stages * s->microbatches * (split ? 3 : 2));
    free(seen);
}

static void test_every_action_exactly_once(void **state)
{
    (void)state;
    int built = 0;
    for (int k = 0; k < builtin_count; k++)
        for (int v = 1; v <= 4; v++) {
            if (!accepts_stages_per_rank(builtin_names[k], v))
                continue;
            for (int p = 1; p <= 8; p++)
                for (int m = 1; m <= 16; m++) {
                    tf_schedule s;
                    tf_error err = {0};
                    if (tf_schedule_build(builtin_names[k], p, v, m, &s, &err) != 0) {
                        assert_int_equal(err.code, TF_EINVAL);
                        continue;
                    }
                    assert_complete(&s, builtin_names[k]);
                    tf_schedule_free(&s);
                    built++;
                }
        }
    assert_true(built > 500);
}

static void test_builtin_dags_are_acyclic(void **state)
{
    (void)state;
    int built = 0;
    for (int k = 0; k < builtin_count; k++)
        for (int v = 1; v <= 4; v++) {
            if (!accepts_stages_per_rank(builtin_names[k], v))
                continue;
            for (int p = 1; p <= 8; p++)
                for (int m = 1; m <= 16; m++) {
                    tf_schedule s;
                    tf_dag g;
                    tf_error err = {0};
                    if (tf_schedule_build(builtin_names[k], p, v, m, &s, &err) != 0)
                        continue;
                    if (tf_dag_build(&s, 0.0, &g, &err) != 0)
                        fail_msg("%s P=%d V=%d M=%d: %s", builtin_names[k], p, v, m, err.msg);
                    assert_int_equal(g.n, s.n_actions);
                    tf_dag_free(&g);
                    tf_schedule_free(&s);
                    built++;
                }
        }
    assert_true(built > 500);
}

/* ---- CSV ---------------------------------------------------------------- */

static void test_write_then_read_gives_same_schedule(void **state)
{
    (void)state;
    const struct {
        const char *name;
        int ranks, stages_per_rank, microbatches;
    } shapes[] = {{"GPipe", 3, 1, 5},           {"1F1B", 4, 1, 6},
                  {"Interleaved1F1B", 4, 2, 10}, {"InterleavedZeroBubble", 3, 3, 6},
                  {"ZBVZeroBubble", 4, 2, 5},    {"1F1B", 1, 1, 1},
                  {"LoopedBFS", 3, 2, 4},        {"DualPipeV", 4, 2, 10},
                  {"DualPipeV", 1, 2, 3}};
    char path[4096];
    temp_path(path, sizeof path, "roundtrip");
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        tf_schedule built, back;
        tf_error err = {0};
        assert_int_equal(tf_schedule_build(shapes[k].name, shapes[k].ranks,
                                           shapes[k].stages_per_rank, shapes[k].microbatches,
                                           &built, &err),
                         0);
        if (tf_schedule_write_csv(&built, path, &err) != 0)
            fail_msg("%s", err.msg);
        if (tf_schedule_read_csv(path, &back, &err) != 0)
            fail_msg("%s", err.msg);
        assert_same_schedule(&built, &back, shapes[k].name);

        tf_schedule copy;
        assert_int_equal(tf_schedule_copy(&built, &copy), 0);
        assert_same_schedule(&built, &copy, "copy");
        assert_string_equal(copy.name, built.name);
        tf_schedule_free(&copy);
        tf_schedule_free(&back);
        tf_schedule_free(&built);
    }
    unlink(path);
}

/* needle must be in msg; prints the message when it is not. */
static void expect_in_message(const char *msg, const char *needle)
{
    if (!strstr(msg, needle))
        fail_msg("expected \"%s\" in \"%s\"", needle, msg);
}

static void test_read_csv_formats_and_errors(void **state)
{
    (void)state;
    char path[4096];
    tf_schedule s;
    tf_error err = {0};
    temp_path(path, sizeof path, "formats");

    /* Idle cells, CRLF line ends, blanks and quotes, trailing blank lines. */
    write_text(path, "0F0,0F1,,0B0,0F2,0B1,0B2\r\n,1F0, 1B0 ,\"1F1\",1B1,1F2,1B2\r\n\r\n\n");
    if (tf_schedule_read_csv(path, &s, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(s.ranks, 2);
    assert_int_equal(s.microbatches, 3);
    assert_rank_order(&s, 0, "0F0 0F1 0B0 0F2 0B1 0B2");
    assert_rank_order(&s, 1, "1F0 1B0 1F1 1B1 1F2 1B2");
    tf_schedule_free(&s);

    /* A bad cell is named by line and cell (counting idle cells). */
    write_text(path, "0F0,0B0\n,1F0,1Q0\n");
    assert_int_equal(tf_schedule_read_csv(path, &s, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "line 2, cell 3"));
    assert_non_null(strstr(err.msg, "\"1Q0\""));
    assert_null(s.actions);

    /* B mixed with I/W is named by its first offending cells in the file:
     * microbatch 1 at cells 3 and 4, before microbatch 0 at cells 6 and 7. */
    write_text(path, "0F0,0F1,0B1,0I1,0W1,0B0,0I0,0W0\n1F0,1F1,1B0,1B1\n");
    assert_int_equal(tf_schedule_read_csv(path, &s, &err), TF_EINVAL);
    expect_in_message(err.msg, ": line 1, cell 3: 0B1 and 0I1 at ");
    expect_in_message(err.msg, ": line 1, cell 4 mix a full backward (B) with a split one (I/W) "
                               "for stage 0, microbatch 1");
    /* The earlier cell leads, whichever of B and I/W it is. */
    write_text(path, "0F0,0B0\n1F0,1I0,1W0,1B0\n");
    assert_int_equal(tf_schedule_read_csv(path, &s, &err), TF_EINVAL);
    expect_in_message(err.msg, ": line 2, cell 2: 1I0 and 1B0 at ");
    expect_in_message(err.msg, ": line 2, cell 4 mix");

    /* PyTorch's older notation: a B with a later W of the same stage and
     * microbatch (and no I) is I + W; the notes count and name them. */
    write_text(path, "0F0,0F1,0B0,0W0,0B1,0W1\n1F0,1B0,1F1,1B1\n");
    tf_csv_notes notes;
    if (tf_schedule_read_csv_noted(path, &s, &notes, &err) != 0)
        fail_msg("%s", err.msg);
    assert_rank_order(&s, 0, "0F0 0F1 0I0 0W0 0I1 0W1");
    assert_rank_order(&s, 1, "1F0 1B0 1F1 1B1");
    assert_int_equal(notes.old_backwards, 2);
    assert_string_equal(notes.first_old, "0B0");
    tf_schedule_free(&s);
    assert_int_equal(tf_schedule_read_csv(path, &s, &err), 0);
    assert_rank_order(&s, 0, "0F0 0F1 0I0 0W0 0I1 0W1");
    tf_schedule_free(&s);
    /* A W before its B is not that notation, and stays an error. */
    write_text(path, "0F0,0W0,0B0\n1F0,1B0\n");
    assert_int_equal(tf_schedule_read_csv_noted(path, &s, &notes, &err), TF_EINVAL);
    assert_int_equal(notes.old_backwards, 0);
    expect_in_message(err.msg, "mix a full backward");
    /* Without the older notation, nothing to note. */
    write_text(path, "0F0,(0F1;0B0)OVERLAP_F_B,0B1\n1F0,1B0,1F1,1B1\n");
    if (tf_schedule_read_csv_noted(path, &s, &notes, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(notes.old_backwards, 0);
    assert_string_equal(notes.first_old, "");
    assert_int_equal(s.actions[1].pair, TF_PAIR_FIRST);
    tf_schedule_free(&s);
    /* A bad pair is named by line and cell. */
    write_text(path, "0F0,(0F1;0W0)OVERLAP_F_B,0B1\n1F0,1B0,1F1,1B1\n");
    assert_int_equal(tf_schedule_read_csv(path, &s, &err), TF_EINVAL);
    expect_in_message(err.msg, "line 1, cell 2");

    write_text(path, "\n\n");
    assert_int_equal(tf_schedule_read_csv(path, &s, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "no rows"));

    write_text(path, "0F0,0B0\n1F0,1B0,1B0\n");
    assert_int_equal(tf_schedule_read_csv(path, &s, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "line 2, cell 3"));

    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite("0F0,0B0\0", 1, 8, f);
    fclose(f);
    assert_int_equal(tf_schedule_read_csv(path, &s, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "NUL"));

    unlink(path);
    assert_int_equal(tf_schedule_read_csv(path, &s, &err), TF_EIO);
    assert_null(s.actions);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_goldens_equal_build),
        cmocka_unit_test(test_pytorch_artifacts),
        cmocka_unit_test(test_1f1b_p2_m3),
        cmocka_unit_test(test_1f1b_p3_m4),
        cmocka_unit_test(test_gpipe_p2_m2),
        cmocka_unit_test(test_1f1b_fewer_microbatches_than_ranks),
        cmocka_unit_test(test_interleaved_1f1b_p2_v2_m2),
        cmocka_unit_test(test_zbv_p1_m1),
        cmocka_unit_test(test_looped_bfs_p2_v2_m2),
        cmocka_unit_test(test_dual_pipe_v_p1_m2),
        cmocka_unit_test(test_pair_cells),
        cmocka_unit_test(test_lookup_matches_find),
        cmocka_unit_test(test_names_and_stage_mapping),
        cmocka_unit_test(test_action_parse_format_round_trip),
        cmocka_unit_test(test_action_parse_rejects),
        cmocka_unit_test(test_from_cells_accepts_valid_order),
        cmocka_unit_test(test_from_cells_with_pair),
        cmocka_unit_test(test_from_cells_rejects),
        cmocka_unit_test(test_fills_then_drains),
        cmocka_unit_test(test_build_rejects),
        cmocka_unit_test(test_every_action_exactly_once),
        cmocka_unit_test(test_builtin_dags_are_acyclic),
        cmocka_unit_test(test_write_then_read_gives_same_schedule),
        cmocka_unit_test(test_read_csv_formats_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
