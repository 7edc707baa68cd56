/* schedule_order.c - schedules from explicit per-rank orders: cells (a
 * profile's "order", a plan's actions) and PyTorch's compute-only schedule
 * CSV, checked so that a bad order is named by the cell that makes it bad;
 * and the CSV written back. */
#include "schedule_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/util.h"

/* How messages name a cell: "order[1][3]" or, for a CSV file, "f.csv: line 2, cell 4". */
typedef struct cell_naming {
    const char *where;
    int csv_lines;
    int planned;   /* R actions allowed: a plan's order (tf_cell_rows.planned) */
} cell_naming;

static void name_cell(char *buf, size_t size, const cell_naming *naming, int rank, int column)
{
    if (naming->csv_lines)
        snprintf(buf, size, "%s: line %d, cell %d", naming->where, rank + 1, column + 1);
    else
        snprintf(buf, size, "%s[%d][%d]", naming->where, rank, column);
}

typedef struct cell_key {
    int stage;
    int microbatch;
    int type;
    int index; /* position in the rank-by-rank action array */
} cell_key;

static int compare_cell_keys(const void *pa, const void *pb)
{
    const cell_key *a = pa, *b = pb;
    if (a->stage != b->stage)
        return a->stage < b->stage ? -1 : 1;
    if (a->microbatch != b->microbatch)
        return a->microbatch < b->microbatch ? -1 : 1;
    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return 0;
}

/* The stage count, 1 + the largest stage named, which must divide evenly
 * over the ranks; sets s->stages and s->stages_per_rank. */
static int count_stages(tf_schedule *s, const cell_naming *naming, tf_error *err)
{
    int max_stage = 0;
    for (int i = 0; i < s->n_actions; i++)
        if (s->actions[i].stage > max_stage)
            max_stage = s->actions[i].stage;
    s->stages = max_stage + 1;
    /* Every stage is a cap row of the freeze LP: bounded like a built-in's. */
    if (s->stages > TF_MAX_STAGES)
        return tf_fail(err, TF_EINVAL,
                       "%s: stage %d: more than the %d stages the planner accepts",
                       naming->where, max_stage, TF_MAX_STAGES);
    if (s->stages % s->ranks != 0)
        return tf_fail(err, TF_EINVAL,
                       "%s: %d stages (0 to %d) do not divide evenly over %d ranks",
                       naming->where, s->stages, max_stage, s->ranks);
    s->stages_per_rank = s->stages / s->ranks;
    return 0;
}

/* Puts every stage on the rank of its first action (s->stage_rank) and
 * counts each rank's stages; a later action of a stage on another rank
 * is an error naming both cells.  first_of_stage is scratch (stages). */
static int map_stages(tf_schedule *s, const int *columns, const cell_naming *naming,
                      int *first_of_stage, int *stages_on_rank, tf_error *err)
{
    char here[1200], there[1200], text[32], other[32];
    for (int stage = 0; stage < s->stages; stage++)
        s->stage_rank[stage] = first_of_stage[stage] = -1;
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        if (s->stage_rank[a->stage] < 0) {
            s->stage_rank[a->stage] = a->rank;
            first_of_stage[a->stage] = i;
            stages_on_rank[a->rank]++;
        } else if (s->stage_rank[a->stage] != a->rank) {
            const tf_action *f = &s->actions[first_of_stage[a->stage]];
            name_cell(here, sizeof here, naming, a->rank, columns[i]);
            name_cell(there, sizeof there, naming, f->rank, columns[first_of_stage[a->stage]]);
            return tf_fail(err, TF_EINVAL,
                           "%s: %s puts stage %d on rank %d, but %s at %s already put it on "
                           "rank %d",
                           here, tf_action_format(a, text), a->stage, a->rank,
                           tf_action_format(f, other), there, f->rank);
        }
    }
    return 0;
}

/* Sorts keys (one per action) by stage, microbatch, type and position;
 * an action that appears twice is an error naming the repeat that comes
 * first in the order. */
static int check_repeats(const tf_schedule *s, const int *columns, const cell_naming *naming,
                         cell_key *keys, tf_error *err)
{
    const int n = s->n_actions;
    for (int i = 0; i < n; i++) {
        keys[i].stage = s->actions[i].stage;
        keys[i].microbatch = s->actions[i].microbatch;
        keys[i].type = (int)s->actions[i].type;
        keys[i].index = i;
    }
    qsort(keys, (size_t)n, sizeof *keys, compare_cell_keys);
    int repeat = -1, repeated = -1;
    for (int k = 1; k < n; k++) {
        if (keys[k].stage == keys[k - 1].stage && keys[k].microbatch == keys[k - 1].microbatch &&
            keys[k].type == keys[k - 1].type && (repeat < 0 || keys[k].index < repeat)) {
            repeat = keys[k].index;
            repeated = keys[k - 1].index;
        }
    }
    if (repeat < 0)
        return 0;
    char here[1200], there[1200], text[32];
    const tf_action *a = &s->actions[repeat];
    name_cell(here, sizeof here, naming, a->rank, columns[repeat]);
    name_cell(there, sizeof there, naming, s->actions[repeated].rank, columns[repeated]);
    return tf_fail(err, TF_EINVAL, "%s: %s repeats the action at %s", here,
                   tf_action_format(a, text), there);
}

/* The two cells of a (stage, microbatch) that mixes B with I/W, at[type]
 * the position of each action: its B and the first of its I and W, the one
 * earlier in the order first. */
static void mixed_cells(const int at[TF_ACTION_TYPES], int *first, int *second)
{
    int split = at[TF_ACT_I];
    if (split < 0 || (at[TF_ACT_W] >= 0 && at[TF_ACT_W] < split))
        split = at[TF_ACT_W];
    *first = at[TF_ACT_B] < split ? at[TF_ACT_B] : split;
    *second = at[TF_ACT_B] < split ? split : at[TF_ACT_B];
}

/* Of every (stage, microbatch) in the sorted keys that mixes B with I/W,
 * the one whose first mixed cell comes first in the order (rank by rank,
 * cell by cell), into at[type]: the cell a reader of the file meets first,
 * not the lowest stage and microbatch. */
static void first_mix(const tf_schedule *s, const cell_key *keys, int at[TF_ACTION_TYPES])
{
    int best = s->n_actions;
    for (int k = 0; k < s->n_actions;) {
        int pair[TF_ACTION_TYPES] = {-1, -1, -1, -1, -1}, first, second;
        int stage = keys[k].stage, mb = keys[k].microbatch;
        for (; k < s->n_actions && keys[k].stage == stage && keys[k].microbatch == mb; k++)
            pair[keys[k].type] = keys[k].index;
        if (pair[TF_ACT_B] < 0 || (pair[TF_ACT_I] < 0 && pair[TF_ACT_W] < 0))
            continue;
        mixed_cells(pair, &first, &second);
        if (first < best) {
            best = first;
            memcpy(at, pair, sizeof pair);
        }
    }
}

/* An R (recomputation) re-materialises its forward's activations for the
 * backward: it exists only in plans, and there before that backward. */
static int check_recompute(const tf_schedule *s, const int *columns, const cell_naming *naming,
                           const int at[TF_ACTION_TYPES], tf_error *err)
{
    int r = at[TF_ACT_R];
    if (r < 0)
        return 0;
    char here[1200], text[32];
    name_cell(here, sizeof here, naming, s->actions[r].rank, columns[r]);
    tf_action_format(&s->actions[r], text);
    if (!naming->planned)
        return tf_fail(err, TF_EINVAL, "%s: %s: R actions (recomputation) are placed by "
                       "tf-plan; an order has F, B, I and W", here, text);
    int backward = at[TF_ACT_B] >= 0 ? at[TF_ACT_B] : at[TF_ACT_I];
    if (r > backward)
        return tf_fail(err, TF_EINVAL, "%s: %s comes after the backward it recomputes for",
                       here, text);
    return 0;
}

/* The actions of one (stage, microbatch), at[type] the position of each
 * (or -1): an F, and a backward that is either B or both I and W.  keys,
 * sorted, find the first of several pairs that mix B with I/W. */
static int check_pair(const tf_schedule *s, const int *columns, const cell_naming *naming,
                      const cell_key *keys, int stage, int mb, const int at[TF_ACTION_TYPES],
                      tf_error *err)
{
    char here[1200], there[1200], text[32], other[32];
    int any = at[TF_ACT_F] >= 0 ? at[TF_ACT_F]
            : at[TF_ACT_B] >= 0 ? at[TF_ACT_B]
            : at[TF_ACT_I] >= 0 ? at[TF_ACT_I]
            : at[TF_ACT_W] >= 0 ? at[TF_ACT_W] : at[TF_ACT_R]; /* an R alone: still named */
    const tf_action *a = &s->actions[any];
    if (at[TF_ACT_F] < 0) {
        name_cell(there, sizeof there, naming, a->rank, columns[any]);
        return tf_fail(err, TF_EINVAL, "%s: %dF%d is missing, but %s at %s needs it",
                       naming->where, stage, mb, tf_action_format(a, text), there);
    }
    if (at[TF_ACT_B] >= 0 && (at[TF_ACT_I] >= 0 || at[TF_ACT_W] >= 0)) {
        int mix[TF_ACTION_TYPES], first, second;
        for (int t = 0; t < TF_ACTION_TYPES; t++)
            mix[t] = -1; /* first_mix sets them all; the optimiser cannot see it */
        first_mix(s, keys, mix);
        mixed_cells(mix, &first, &second);
        const tf_action *b = &s->actions[first], *c = &s->actions[second];
        name_cell(here, sizeof here, naming, b->rank, columns[first]);
        name_cell(there, sizeof there, naming, c->rank, columns[second]);
        return tf_fail(err, TF_EINVAL,
                       "%s: %s and %s at %s mix a full backward (B) with a split one (I/W) "
                       "for stage %d, microbatch %d",
                       here, tf_action_format(b, text), tf_action_format(c, other), there,
                       b->stage, b->microbatch);
    }
    if ((at[TF_ACT_W] >= 0) != (at[TF_ACT_I] >= 0)) {
        int lone = at[TF_ACT_W] >= 0 ? at[TF_ACT_W] : at[TF_ACT_I];
        int w = lone == at[TF_ACT_W];
        name_cell(here, sizeof here, naming, s->actions[lone].rank, columns[lone]);
        return tf_fail(err, TF_EINVAL, "%s: %s has no matching %d%c%d (%s)", here,
                       tf_action_format(&s->actions[lone], text), stage, w ? 'I' : 'W', mb,
                       w ? "W needs its I" : "I needs its W");
    }
    if (at[TF_ACT_B] < 0 && at[TF_ACT_I] < 0) {
        name_cell(here, sizeof here, naming, a->rank, columns[any]);
        return tf_fail(err, TF_EINVAL,
                       "%s: %s has no backward: %dB%d (or %dI%d and %dW%d) is missing", here,
                       tf_action_format(a, text), stage, mb, stage, mb, stage, mb);
    }
    return check_recompute(s, columns, naming, at, err);
}

/* Walks the sorted keys (stage, microbatch) by (stage, microbatch): every
 * stage needs every microbatch, and each pair passes check_pair. */
static int check_pairs(const tf_schedule *s, const int *columns, const cell_naming *naming,
                       const cell_key *keys, tf_error *err)
{
    const int n = s->n_actions;
    int expect_stage = 0, expect_mb = 0;
    for (int k = 0; k <= n;) {
        int stage = k < n ? keys[k].stage : s->stages;
        int mb = k < n ? keys[k].microbatch : 0;
        if (stage != expect_stage || mb != expect_mb)
            return tf_fail(err, TF_EINVAL,
                           "%s: %dF%d is missing: stage %d, microbatch %d has no actions "
                           "(every stage needs microbatches 0 to %d)",
                           naming->where, expect_stage, expect_mb, expect_stage, expect_mb,
                           s->microbatches - 1);
        if (k == n)
            return 0;
        int at[TF_ACTION_TYPES] = {-1, -1, -1, -1, -1};
        for (; k < n && keys[k].stage == stage && keys[k].microbatch == mb; k++)
            at[keys[k].type] = keys[k].index;
        int rc = check_pair(s, columns, naming, keys, stage, mb, at, err);
        if (rc)
            return rc;
        if (++expect_mb == s->microbatches) {
            expect_mb = 0;
            expect_stage++;
        }
    }
    return 0;
}

static int check_rank_stages(const tf_schedule *s, const int *stages_on_rank,
                             const cell_naming *naming, tf_error *err)
{
    for (int rank = 0; rank < s->ranks; rank++)
        if (stages_on_rank[rank] != s->stages_per_rank)
            return tf_fail(err, TF_EINVAL,
                           "%s: rank %d runs %d stages, expected %d (%d stages over %d ranks)",
                           naming->where, rank, stages_on_rank[rank], s->stages_per_rank,
                           s->stages, s->ranks);
    return 0;
}

/* The checks shared by explicit orders, on parsed actions in rank order
 * (columns[i] is the cell of action i within its row).  Fills the stage
 * mapping and counts of s on success. */
static int check_explicit_order(tf_schedule *s, const int *columns, const cell_naming *naming,
                                tf_error *err)
{
    const int n = s->n_actions;
    if (n == 0)
        return tf_fail(err, TF_EINVAL, "%s: the order has no actions", naming->where);
    int rc = count_stages(s, naming, err);
    if (rc)
        return rc;
    s->stage_rank = malloc(sizeof *s->stage_rank * (size_t)s->stages);
    int *first_of_stage = malloc(sizeof *first_of_stage * (size_t)s->stages);
    int *stages_on_rank = calloc((size_t)s->ranks, sizeof *stages_on_rank);
    cell_key *keys = malloc(sizeof *keys * (size_t)n);
    if (!s->stage_rank || !first_of_stage || !stages_on_rank || !keys)
        rc = tf_fail(err, TF_ENOMEM, "%s: out of memory checking %d actions", naming->where, n);
    if (!rc)
        rc = map_stages(s, columns, naming, first_of_stage, stages_on_rank, err);
    if (!rc)
        rc = check_repeats(s, columns, naming, keys, err);
    if (!rc)
        rc = check_pairs(s, columns, naming, keys, err);
    if (!rc)
        rc = check_rank_stages(s, stages_on_rank, naming, err);
    free(first_of_stage);
    free(stages_on_rank);
    free(keys);
    return rc;
}

/* A cell that holds nothing but blanks: an idle slot in a CSV row. */
static int is_blank_cell(const char *cell)
{
    while (tf_schedule_is_blank(*cell))
        cell++;
    return *cell == '\0';
}

/* The actions a cell holds: 2 for an overlapped pair "(0F7;7B3)...", else
 * 1 (a cell that is neither fails when parsed). */
static int cell_actions(const char *cell)
{
    while (cell && tf_schedule_is_blank(*cell))
        cell++;
    return cell && *cell == '(' ? 2 : 1;
}

/* Checks the rows' shape and counts their actions (blank cells skipped
 * when skip_blank) into *count. */
static int count_cells(const char *const *const *rows, const int *row_len, int ranks,
                       const cell_naming *naming, int skip_blank, int *count, tf_error *err)
{
    if (ranks < 1)
        return tf_fail(err, TF_EINVAL, "%s: ranks = %d, must be at least 1", naming->where,
                       ranks);
    if (!row_len || !rows)
        return tf_fail(err, TF_EINVAL, "%s: no rows given for %d ranks", naming->where, ranks);
    long long cells = 0;
    for (int r = 0; r < ranks; r++) {
        if (row_len[r] < 0 || (row_len[r] > 0 && !rows[r]))
            return tf_fail(err, TF_EINVAL, "%s: row %d has %d cells and %s", naming->where, r,
                           row_len[r], rows[r] ? "a negative length" : "no cell array");
        for (int c = 0; c < row_len[r]; c++)
            if (!(skip_blank && rows[r][c] && is_blank_cell(rows[r][c])))
                cells += cell_actions(rows[r][c]);
        if (cells > TF_MAX_ACTIONS)
            return tf_fail(err, TF_EINVAL,
                           "%s: more than %d actions (the most the planner accepts) by row %d",
                           naming->where, TF_MAX_ACTIONS, r);
    }
    *count = (int)cells;
    return 0;
}

/* Parses cell (rank r, column c) into a[0] (and a[1] for a pair, *count
 * 2): valid actions whose stages and microbatches are in range for an
 * order of n actions (and microbatches, when >= 1). */
static int parse_cell(const char *cell, int r, int c, int n, int microbatches,
                      const cell_naming *naming, tf_action *a, int *count, tf_error *err)
{
    char here[1200], text[32];
    tf_error cell_err;
    tf_error_clear(&cell_err);
    name_cell(here, sizeof here, naming, r, c);
    if (tf_cell_parse(cell, a, count, &cell_err) != 0)
        return tf_fail(err, TF_EINVAL, "%s: %s", here, cell_err.msg);
    for (int k = 0; k < *count; k++) {
        if (microbatches >= 1 && a[k].microbatch >= microbatches)
            return tf_fail(err, TF_EINVAL,
                           "%s: %s: microbatch %d is out of range (%d microbatches: 0 to %d)",
                           here, tf_action_format(&a[k], text), a[k].microbatch, microbatches,
                           microbatches - 1);
        /* Every (stage, microbatch) needs at least two actions, so indices
         * at or beyond the action count cannot belong to a valid order. */
        if (a[k].stage >= n || (microbatches < 1 && a[k].microbatch >= n))
            return tf_fail(err, TF_EINVAL,
                           "%s: %s: %s %d is out of range for an order of %d actions", here,
                           tf_action_format(&a[k], text), a[k].stage >= n ? "stage" : "microbatch",
                           a[k].stage >= n ? a[k].stage : a[k].microbatch, n);
        a[k].rank = r;
    }
    return 0;
}

/* Parses every cell into s->actions (s->n_actions of them), rank by rank,
 * with columns[i] the cell of action i; sets rank offsets and the
 * microbatch count (1 + the largest seen unless microbatches >= 1). */
static int parse_rows(const char *const *const *rows, const int *row_len, int microbatches,
                      const cell_naming *naming, int skip_blank, tf_schedule *s, int *columns,
                      tf_error *err)
{
    int count = 0, max_mb = 0;
    for (int r = 0; r < s->ranks; r++) {
        s->rank_offset[r] = count;
        for (int c = 0; c < row_len[r]; c++) {
            const char *cell = rows[r][c];
            if (skip_blank && cell && is_blank_cell(cell))
                continue;
            tf_action a[2];
            int k, rc = parse_cell(cell, r, c, s->n_actions, microbatches, naming, a, &k, err);
            if (rc)
                return rc;
            for (int j = 0; j < k; j++) {
                if (a[j].microbatch > max_mb)
                    max_mb = a[j].microbatch;
                s->actions[count] = a[j];
                columns[count++] = c;
            }
        }
    }
    s->rank_offset[s->ranks] = count;
    s->microbatches = microbatches >= 1 ? microbatches : max_mb + 1;
    return 0;
}

/* Counts the actions of one (stage, microbatch), keys[from..to), by type;
 * at[type] gets the position of the last of each. */
static void count_types(const cell_key *keys, int from, int to, int n[TF_ACTION_TYPES],
                        int at[TF_ACTION_TYPES])
{
    for (int t = 0; t < TF_ACTION_TYPES; t++)
        n[t] = 0, at[t] = -1;
    for (int k = from; k < to; k++) {
        n[keys[k].type]++;
        at[keys[k].type] = keys[k].index;
    }
}

/* PyTorch's older notation wrote a split backward as B, then W: a
 * (stage, microbatch) with one B, one later W of the same rank and no I
 * means I + W.  Rewrites those B as I, counting them into notes with the
 * first one in the file. */
static int convert_old_backwards(tf_schedule *s, const cell_naming *naming, tf_csv_notes *notes,
                                 tf_error *err)
{
    const int n = s->n_actions;
    cell_key *keys = malloc(sizeof *keys * (size_t)(n > 0 ? n : 1));
    if (!keys)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for %d actions", naming->where, n);
    for (int i = 0; i < n; i++)
        keys[i] = (cell_key){s->actions[i].stage, s->actions[i].microbatch,
                             (int)s->actions[i].type, i};
    qsort(keys, (size_t)n, sizeof *keys, compare_cell_keys);
    int first = n;
    for (int k = 0, end; k < n; k = end) {
        for (end = k; end < n && keys[end].stage == keys[k].stage &&
                      keys[end].microbatch == keys[k].microbatch;
             end++)
            ;
        int count[TF_ACTION_TYPES], at[TF_ACTION_TYPES];
        count_types(keys, k, end, count, at);
        if (count[TF_ACT_B] != 1 || count[TF_ACT_W] != 1 || count[TF_ACT_I] != 0 ||
            at[TF_ACT_W] < at[TF_ACT_B] ||
            s->actions[at[TF_ACT_W]].rank != s->actions[at[TF_ACT_B]].rank)
            continue;
        s->actions[at[TF_ACT_B]].type = TF_ACT_I;
        notes->old_backwards++;
        if (at[TF_ACT_B] < first)
            first = at[TF_ACT_B];
    }
    if (first < n) {
        tf_action original = s->actions[first];
        original.type = TF_ACT_B;
        tf_action_format(&original, notes->first_old);
    }
    free(keys);
    return 0;
}

/* Builds a schedule from rows of cells.  microbatches < 1 means "1 + the
 * largest microbatch seen"; skip_blank treats blank cells as idle slots;
 * with notes (a CSV), B cells in PyTorch's older notation become I. */
static int schedule_from_rows(const char *const *const *rows, const int *row_len, int ranks,
                              int microbatches, const cell_naming *naming, int skip_blank,
                              tf_csv_notes *notes, tf_schedule *out, tf_error *err)
{
    tf_schedule s;
    memset(&s, 0, sizeof s);
    int n = 0;
    int rc = count_cells(rows, row_len, ranks, naming, skip_blank, &n, err);
    if (rc)
        return rc;
    snprintf(s.name, sizeof s.name, "custom");
    s.ranks = ranks;
    s.n_actions = n;
    s.actions = malloc(sizeof *s.actions * (size_t)(n > 0 ? n : 1));
    s.rank_offset = malloc(sizeof *s.rank_offset * (size_t)(ranks + 1));
    int *columns = malloc(sizeof *columns * (size_t)(n > 0 ? n : 1));
    if (!s.actions || !s.rank_offset || !columns)
        rc = tf_fail(err, TF_ENOMEM, "%s: out of memory for %d actions", naming->where, n);
    if (!rc)
        rc = parse_rows(rows, row_len, microbatches, naming, skip_blank, &s, columns, err);
    if (!rc && notes)
        rc = convert_old_backwards(&s, naming, notes, err);
    if (!rc)
        rc = check_explicit_order(&s, columns, naming, err);
    free(columns);
    if (rc)
        tf_schedule_free(&s);
    else
        *out = s;
    return rc;
}

/* tf_schedule_from_cells, for an order of a plan (R actions allowed) or
 * not. */
static int from_cells(const tf_cell_rows *cells, int microbatches, const char *where,
                      int planned, tf_schedule *out, tf_error *err)
{
    cell_naming naming = {where ? where : "order", 0, planned};
    if (out)
        memset(out, 0, sizeof *out);
    if (!out)
        return tf_fail(err, TF_EINVAL, "%s: no output schedule", naming.where);
    if (!cells)
        return tf_fail(err, TF_EINVAL, "%s: no cells given", naming.where);
    if (microbatches < 1)
        return tf_fail(err, TF_EINVAL, "%s: microbatches = %d, must be at least 1",
                       naming.where, microbatches);
    return schedule_from_rows(cells->rows, cells->row_len, cells->ranks, microbatches, &naming,
                              0, NULL, out, err);
}

int tf_schedule_from_cells(const tf_cell_rows *cells, int microbatches, const char *where,
                           tf_schedule *out, tf_error *err)
{
    return from_cells(cells, microbatches, where, 0, out, err);
}

int tf_schedule_from_plan_cells(const tf_cell_rows *cells, int microbatches, const char *where,
                                tf_schedule *out, tf_error *err)
{
    return from_cells(cells, microbatches, where, 1, out, err);
}

static void free_rows(char ***rows, size_t count)
{
    for (size_t k = 0; k < count; k++)
        free(rows[k]);
    free(rows);
}

/* Splits one line (its \r dropped) in place at its commas into *cells_out
 * (malloc'd), blanks and one pair of double quotes around each cell
 * removed; an empty line has no cells.  line_no names it in messages. */
static int split_line(char *line, const char *path, size_t line_no, char ***cells_out,
                      int *count, tf_error *err)
{
    size_t line_len = strlen(line);
    if (line_len > 0 && line[line_len - 1] == '\r')
        line[--line_len] = '\0';
    size_t cells = line_len == 0 ? 0 : 1;
    for (size_t i = 0; i < line_len; i++)
        if (line[i] == ',')
            cells++;
    if (cells > (size_t)TF_SCHEDULE_MAX_CELLS)
        return tf_fail(err, TF_EINVAL, "%s: line %zu has more than %d cells", path, line_no,
                       TF_SCHEDULE_MAX_CELLS);
    char **row = malloc(sizeof *row * (cells > 0 ? cells : 1));
    if (!row)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for line %zu", path, line_no);
    char *cell = line;
    for (size_t c = 0; c < cells; c++) {
        char *comma = strchr(cell, ',');
        if (comma)
            *comma = '\0';
        char *start = cell, *end = cell + strlen(cell);
        while (start < end && tf_schedule_is_blank(*start))
            start++;
        while (end > start && tf_schedule_is_blank(end[-1]))
            end--;
        if (end - start >= 2 && *start == '"' && end[-1] == '"') {
            start++;
            end--;
        }
        *end = '\0';
        row[c] = start;
        cell = comma ? comma + 1 : cell + strlen(cell);
    }
    *cells_out = row;
    *count = (int)cells;
    return 0;
}

/* Splits `data` in place into rows of cells: lines end in \n (a \r before it
 * is dropped), cells are separated by commas, a cell wrapped in double quotes
 * loses them.  Trailing blank lines are ignored. */
static int split_csv(char *data, size_t len, const char *path, char ****rows_out,
                     int **row_len_out, int *ranks_out, tf_error *err)
{
    /* Drop trailing blank lines (whitespace and nothing else). */
    size_t content_end = len;
    while (content_end > 0 && tf_schedule_is_blank(data[content_end - 1]))
        content_end--;
    if (content_end == 0)
        return tf_fail(err, TF_EINVAL, "%s: the file has no rows (expected one row per rank)",
                       path);
    size_t lines = 1;
    for (size_t i = 0; i < content_end; i++)
        if (data[i] == '\n')
            lines++;
    if (lines > (size_t)TF_MAX_RANKS)
        return tf_fail(err, TF_EINVAL, "%s: more than %d rows (one per rank; at most %d ranks)",
                       path, TF_MAX_RANKS, TF_MAX_RANKS);
    data[content_end] = '\0';

    char ***rows = calloc(lines, sizeof *rows);
    int *row_len = calloc(lines, sizeof *row_len);
    if (!rows || !row_len) {
        free(rows);
        free(row_len);
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for %zu rows", path, lines);
    }
    char *line = data;
    for (size_t r = 0; r < lines; r++) {
        char *newline = strchr(line, '\n');
        if (newline)
            *newline = '\0';
        char *next = newline ? newline + 1 : line + strlen(line);
        int rc = split_line(line, path, r + 1, &rows[r], &row_len[r], err);
        if (rc) {
            free_rows(rows, r);
            free(row_len);
            return rc;
        }
        line = next;
    }
    *rows_out = rows;
    *row_len_out = row_len;
    *ranks_out = (int)lines;
    return 0;
}

int tf_schedule_read_csv(const char *path, tf_schedule *out, tf_error *err)
{
    return tf_schedule_read_csv_noted(path, out, NULL, err);
}

int tf_schedule_read_csv_noted(const char *path, tf_schedule *out, tf_csv_notes *notes,
                               tf_error *err)
{
    tf_csv_notes unused;
    if (!notes)
        notes = &unused;
    memset(notes, 0, sizeof *notes);
    char *data = NULL;
    size_t len = 0;
    char ***rows = NULL;
    int *row_len = NULL;
    int ranks = 0;
    if (out)
        memset(out, 0, sizeof *out);
    if (!path || !out)
        return tf_fail(err, TF_EINVAL, "tf_schedule_read_csv: %s is missing",
                       path ? "the output schedule" : "the path");
    int rc = tf_read_file_limit(path, TF_MAX_CSV_BYTES, &data, &len, err);
    if (rc)
        return rc;
    const char *nul = memchr(data, '\0', len);
    if (nul) {
        rc = tf_fail(err, TF_EINVAL, "%s: a NUL byte at offset %zu (not a text CSV file)", path,
                     (size_t)(nul - data));
        free(data);
        return rc;
    }
    rc = split_csv(data, len, path, &rows, &row_len, &ranks, err);
    if (rc == 0) {
        cell_naming naming = {path, 1, 0};
        rc = schedule_from_rows((const char *const *const *)rows, row_len, ranks, 0, &naming, 1,
                                notes, out, err);
        free_rows(rows, (size_t)ranks);
        free(row_len);
    }
    free(data);
    return rc;
}

int tf_schedule_csv_text(const tf_schedule *s, char **text_out, size_t *len, tf_error *err)
{
    *text_out = NULL;
    *len = 0;
    if (!s)
        return tf_fail(err, TF_EINVAL, "tf_schedule_csv_text: the schedule is missing");
    int malformed = s->ranks < 1 || s->n_actions < 0 || s->n_actions > TF_MAX_ACTIONS ||
                    !s->rank_offset || (s->n_actions > 0 && !s->actions);
    for (int r = 0; !malformed && r < s->ranks; r++)
        malformed = s->rank_offset[r] < 0 || s->rank_offset[r] > s->rank_offset[r + 1];
    if (!malformed)
        malformed = s->rank_offset[0] != 0 || s->rank_offset[s->ranks] != s->n_actions;
    if (malformed)
        return tf_fail(err, TF_EINVAL, "the schedule to write as CSV is empty or malformed");
    /* A cell takes at most TF_CELL_MAX - 1 bytes for its actions (a pair's
     * two), plus its comma or newline. */
    size_t capacity = (size_t)s->n_actions * TF_CELL_MAX + (size_t)s->ranks + 1;
    char *text = malloc(capacity);
    if (!text)
        return tf_fail(err, TF_ENOMEM, "out of memory for a CSV of %d actions", s->n_actions);
    size_t used = 0;
    for (int r = 0; r < s->ranks; r++) {
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1];) {
            char cell[TF_CELL_MAX];
            int covered = tf_schedule_format_cell(s, i, cell);
            if (covered == 2 && i + 1 >= s->rank_offset[r + 1])
                covered = 1, tf_action_format(&s->actions[i], cell); /* a pair cut by its row */
            size_t cell_len = strlen(cell);
            if (i > s->rank_offset[r])
                text[used++] = ',';
            memcpy(text + used, cell, cell_len);
            used += cell_len;
            i += covered;
        }
        text[used++] = '\n';
    }
    *text_out = text;
    *len = used;
    return 0;
}

int tf_schedule_write_csv(const tf_schedule *s, const char *path, tf_error *err)
{
    if (!s || !path)
        return tf_fail(err, TF_EINVAL, "tf_schedule_write_csv: %s is missing",
                       s ? "the path" : "the schedule");
    char *text;
    size_t used;
    tf_error inner;
    tf_error_clear(&inner);
    int rc = tf_schedule_csv_text(s, &text, &used, &inner);
    if (rc)
        return tf_fail(err, rc, "%s: %s", path, inner.msg);
    rc = tf_write_file_atomic(path, text, used, err);
    free(text);
    return rc;
}
