/* schedule.c - built-in pipeline schedules (PyTorch's per-rank orders),
 * explicit orders from cells or CSV, and their validation. */
#include "tf/schedule.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/util.h"

/* Far beyond what the LP can solve, small enough that every count and every
 * index below fits in an int with room to spare. */
enum { max_schedule_actions = 1 << 24 };

/* Longest part of an offending cell quoted in a message. */
enum { max_quoted_cell = 48 };

typedef enum {
    BUILTIN_NONE = -1,
    BUILTIN_GPIPE,
    BUILTIN_1F1B,
    BUILTIN_INTERLEAVED_1F1B,
    BUILTIN_INTERLEAVED_ZERO_BUBBLE,
    BUILTIN_ZBV_ZERO_BUBBLE,
    BUILTIN_COUNT
} builtin_kind;

static const char *builtin_name(builtin_kind kind)
{
    static const char *const names[BUILTIN_COUNT] = {
        "GPipe", "1F1B", "Interleaved1F1B", "InterleavedZeroBubble", "ZBVZeroBubble"};
    return names[kind];
}

static int ascii_lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

static int equals_ignoring_case(const char *a, const char *b)
{
    while (*a && *b) {
        if (ascii_lower((unsigned char)*a) != ascii_lower((unsigned char)*b))
            return 0;
        a++;
        b++;
    }
    return *a == *b;
}

/* PyTorch's get_schedule_class matches names case-insensitively; so do we. */
static builtin_kind find_builtin(const char *name)
{
    if (!name)
        return BUILTIN_NONE;
    for (int k = 0; k < BUILTIN_COUNT; k++)
        if (equals_ignoring_case(name, builtin_name((builtin_kind)k)))
            return (builtin_kind)k;
    return BUILTIN_NONE;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Writes `text` (len bytes) as a double-quoted, printable string for a
 * message: other bytes as \xNN, long text cut with "...". */
static void quote_text(char *buf, size_t size, const char *text, size_t len)
{
    size_t used = 0;
    int truncated = len > max_quoted_cell;
    if (truncated)
        len = max_quoted_cell;
    if (size < 8) {
        if (size)
            buf[0] = '\0';
        return;
    }
    buf[used++] = '"';
    for (size_t i = 0; i < len && used + 8 < size; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '\\') {
            buf[used++] = '\\';
            buf[used++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            buf[used++] = (char)c;
        } else {
            used += (size_t)snprintf(buf + used, size - used, "\\x%02x", c);
        }
    }
    if (truncated && used + 5 < size) {
        memcpy(buf + used, "...", 3);
        used += 3;
    }
    buf[used++] = '"';
    buf[used] = '\0';
}

char tf_action_letter(tf_action_type type)
{
    switch (type) {
    case TF_ACT_F: return 'F';
    case TF_ACT_B: return 'B';
    case TF_ACT_I: return 'I';
    case TF_ACT_W: return 'W';
    }
    return '?';
}

int tf_action_type_parse(char letter, tf_action_type *type)
{
    tf_action_type parsed;
    switch (letter) {
    case 'F': parsed = TF_ACT_F; break;
    case 'B': parsed = TF_ACT_B; break;
    case 'I': parsed = TF_ACT_I; break;
    case 'W': parsed = TF_ACT_W; break;
    default: return TF_EINVAL;
    }
    if (type)
        *type = parsed;
    return 0;
}

char *tf_action_format(const tf_action *a, char *buf)
{
    snprintf(buf, 32, "%d%c%d", a->stage, tf_action_letter(a->type), a->microbatch);
    return buf;
}

/* Reads the decimal digits at *pos (no sign) into *value and advances *pos.
 * Returns 0, 1 when there is no digit, 2 when the number exceeds INT_MAX. */
static int read_decimal(const char **pos, const char *end, int *value)
{
    const char *p = *pos;
    long long v = 0;
    int too_large = 0;
    if (p == end || *p < '0' || *p > '9')
        return 1;
    while (p < end && *p >= '0' && *p <= '9') {
        if (!too_large) {
            v = v * 10 + (*p - '0');
            if (v > INT_MAX)
                too_large = 1;
        }
        p++;
    }
    *pos = p;
    if (too_large)
        return 2;
    *value = (int)v;
    return 0;
}

int tf_action_parse(const char *cell, tf_action *a, tf_error *err)
{
    static const char expected[] = "expected stage, F/B/I/W, microbatch like \"0F3\"";
    char quoted[4 * max_quoted_cell + 16];
    tf_action parsed = {TF_ACT_F, -1, -1, -1};
    if (a)
        *a = parsed;
    if (!cell)
        return tf_fail(err, TF_EINVAL, "missing cell (NULL) is not an action (%s)", expected);

    const char *start = cell;
    const char *end = cell + strlen(cell);
    while (start < end && is_blank(*start))
        start++;
    while (end > start && is_blank(end[-1]))
        end--;
    quote_text(quoted, sizeof quoted, start, (size_t)(end - start));
    if (start == end)
        return tf_fail(err, TF_EINVAL, "%s: an empty cell is not an action (%s)", quoted,
                       expected);

    const char *p = start;
    int status = read_decimal(&p, end, &parsed.stage);
    if (status == 2)
        return tf_fail(err, TF_EINVAL, "%s: stage number is too large (at most %d)", quoted,
                       INT_MAX);
    if (status != 0 || p == end || tf_action_type_parse(*p, &parsed.type) != 0)
        return tf_fail(err, TF_EINVAL, "%s is not an action (%s)", quoted, expected);
    p++;
    status = read_decimal(&p, end, &parsed.microbatch);
    if (status == 2)
        return tf_fail(err, TF_EINVAL, "%s: microbatch number is too large (at most %d)",
                       quoted, INT_MAX);
    if (status != 0 || p != end)
        return tf_fail(err, TF_EINVAL, "%s is not an action (%s)", quoted, expected);
    if (a)
        *a = parsed;
    return 0;
}

int tf_schedule_is_builtin(const char *name)
{
    return find_builtin(name) != BUILTIN_NONE;
}

const char *tf_schedule_canonical_name(const char *name)
{
    builtin_kind kind = find_builtin(name);
    return kind == BUILTIN_NONE ? NULL : builtin_name(kind);
}

int tf_schedule_default_stages_per_rank(const char *name)
{
    builtin_kind kind = find_builtin(name);
    return kind == BUILTIN_NONE || kind == BUILTIN_GPIPE || kind == BUILTIN_1F1B ? 1 : 2;
}

const char *tf_schedule_builtin_names(void)
{
    return "GPipe 1F1B Interleaved1F1B InterleavedZeroBubble ZBVZeroBubble";
}

int tf_schedule_splits_backward(const char *name)
{
    builtin_kind kind = find_builtin(name);
    return kind == BUILTIN_INTERLEAVED_ZERO_BUBBLE || kind == BUILTIN_ZBV_ZERO_BUBBLE;
}

int tf_schedule_stage_rank(const char *name, int ranks, int stages_per_rank, int stage)
{
    if (ranks < 1 || stages_per_rank < 1 || stage < 0 || stage / stages_per_rank >= ranks)
        return -1;
    if (find_builtin(name) == BUILTIN_ZBV_ZERO_BUBBLE)
        return stage < ranks ? stage : 2 * ranks - 1 - stage;
    return stage % ranks;
}

void tf_schedule_free(tf_schedule *s)
{
    if (!s)
        return;
    free(s->actions);
    free(s->rank_offset);
    free(s->stage_rank);
    memset(s, 0, sizeof *s);
}

int tf_schedule_find(const tf_schedule *s, tf_action_type type, int stage, int microbatch)
{
    if (!s || !s->actions)
        return -1;
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        if (a->type == type && a->stage == stage && a->microbatch == microbatch)
            return i;
    }
    return -1;
}

int *tf_schedule_index(const tf_schedule *s)
{
    size_t keys = (size_t)4 * (size_t)s->stages * (size_t)s->microbatches;
    int *index = malloc((keys > 0 ? keys : 1) * sizeof *index);
    if (!index)
        return NULL;
    for (size_t k = 0; k < keys; k++)
        index[k] = -1;
    for (int i = 0; i < s->n_actions; i++) {
        const tf_action *a = &s->actions[i];
        index[((size_t)a->type * s->stages + a->stage) * s->microbatches + a->microbatch] = i;
    }
    return index;
}

int tf_schedule_lookup(const tf_schedule *s, const int *index, tf_action_type type, int stage,
                       int microbatch)
{
    if (!index)
        return tf_schedule_find(s, type, stage, microbatch);
    if ((int)type < 0 || type > TF_ACT_W || stage < 0 || stage >= s->stages || microbatch < 0 ||
        microbatch >= s->microbatches)
        return -1;
    return index[((size_t)type * s->stages + stage) * s->microbatches + microbatch];
}

int tf_schedule_copy(const tf_schedule *src, tf_schedule *dst)
{
    if (!dst)
        return TF_EINVAL;
    memset(dst, 0, sizeof *dst);
    if (!src || src->n_actions < 0 || src->ranks < 0 || src->stages < 0)
        return TF_EINVAL;
    tf_schedule copy = *src;
    size_t actions_size = sizeof *copy.actions * (size_t)src->n_actions;
    size_t offsets_size = sizeof *copy.rank_offset * (size_t)(src->ranks + 1);
    size_t stages_size = sizeof *copy.stage_rank * (size_t)src->stages;
    copy.name[sizeof copy.name - 1] = '\0';
    copy.actions = calloc(1, actions_size ? actions_size : 1);
    copy.rank_offset = calloc(1, offsets_size);
    copy.stage_rank = calloc(1, stages_size ? stages_size : 1);
    if (!copy.actions || !copy.rank_offset || !copy.stage_rank) {
        tf_schedule_free(&copy);
        return TF_ENOMEM;
    }
    if (src->actions && actions_size)
        memcpy(copy.actions, src->actions, actions_size);
    if (src->rank_offset)
        memcpy(copy.rank_offset, src->rank_offset, offsets_size);
    if (src->stage_rank && stages_size)
        memcpy(copy.stage_rank, src->stage_rank, stages_size);
    *dst = copy;
    return 0;
}

/* ---- built-in schedules ------------------------------------------------ */

/* Appends actions into a buffer sized for the whole schedule.  Actions of
 * microbatches >= microbatches are dropped: ZBVZeroBubble plans for at least
 * 2 * ranks - 1 microbatches and then removes the ones that do not exist. */
typedef struct order_writer {
    tf_action *actions;
    int count;
    int capacity;
    int microbatches;
    int overflowed;
} order_writer;

static void emit(order_writer *w, tf_action_type type, int stage, int microbatch, int rank)
{
    if (microbatch >= w->microbatches)
        return;
    if (w->count >= w->capacity) {
        w->overflowed = 1;
        return;
    }
    tf_action *a = &w->actions[w->count++];
    a->type = type;
    a->stage = stage;
    a->microbatch = microbatch;
    a->rank = rank;
}

static void emit_gpipe_rank(order_writer *w, int rank, int microbatches)
{
    for (int m = 0; m < microbatches; m++)
        emit(w, TF_ACT_F, rank, m, rank);
    for (int m = 0; m < microbatches; m++)
        emit(w, TF_ACT_B, rank, m, rank);
}

/* Schedule1F1B._step_microbatches: min(ranks - rank, microbatches) warm-up
 * forwards, then B and F alternate until the forwards run out, then the
 * remaining B.  (PyTorch's _get_pipeline_order for 1F1B starts the last rank
 * at microbatch 1, an off-by-one that its runtime does not share.) */
static void emit_1f1b_rank(order_writer *w, int rank, int ranks, int microbatches)
{
    int warmup = ranks - rank < microbatches ? ranks - rank : microbatches;
    int forwards = 0, backwards = 0;
    while (forwards < warmup)
        emit(w, TF_ACT_F, rank, forwards++, rank);
    for (;;) {
        emit(w, TF_ACT_B, rank, backwards++, rank);
        if (forwards == microbatches)
            break;
        emit(w, TF_ACT_F, rank, forwards++, rank);
    }
    while (backwards < microbatches)
        emit(w, TF_ACT_B, rank, backwards++, rank);
}

/* PyTorch's _get_1f1b_rank_ops for ScheduleInterleaved1F1B (full backward)
 * and ScheduleInterleavedZeroBubble (split backward).  Local stage j of the
 * rank is stage j * ranks + rank.  Forwards walk the local stages upwards in
 * blocks of per_round microbatches; backwards walk them downwards.  With
 * zero bubble, the k-th backward-input is followed by the backward-weight of
 * the oldest pending one once k >= rank, and the leftover weights close the
 * order.  counters holds 3 * stages_per_rank ints of scratch. */
static void emit_interleaved_rank(order_writer *w, int rank, int ranks, int stages_per_rank,
                                  int microbatches, int per_round, int zero_bubble,
                                  int *counters)
{
    int *forward_next = counters;
    int *backward_next = counters + stages_per_rank;
    int *weight_next = counters + 2 * stages_per_rank;
    int forward_ops = stages_per_rank * microbatches;
    int hop_factor = zero_bubble ? 1 : 2;
    long long warmup_wide =
        (long long)(stages_per_rank - 1) * per_round + (long long)hop_factor * (ranks - 1 - rank);
    int warmup = warmup_wide < forward_ops ? (int)warmup_wide : forward_ops;
    tf_action_type backward_type = zero_bubble ? TF_ACT_I : TF_ACT_B;
    int weights_done = 0;

    memset(counters, 0, sizeof *counters * 3 * (size_t)stages_per_rank);
    for (int step = 0; step < forward_ops + warmup; step++) {
        if (step < forward_ops) {
            int local = (step / per_round) % stages_per_rank;
            emit(w, TF_ACT_F, local * ranks + rank, forward_next[local]++, rank);
        }
        if (step >= warmup) {
            int k = step - warmup;
            int local = stages_per_rank - 1 - (k / per_round) % stages_per_rank;
            emit(w, backward_type, local * ranks + rank, backward_next[local]++, rank);
            if (zero_bubble && k >= rank) {
                int weight_local =
                    stages_per_rank - 1 - (weights_done / per_round) % stages_per_rank;
                emit(w, TF_ACT_W, weight_local * ranks + rank, weight_next[weight_local]++, rank);
                weights_done++;
            }
        }
    }
    while (zero_bubble && weights_done < forward_ops) {
        int weight_local = stages_per_rank - 1 - (weights_done / per_round) % stages_per_rank;
        emit(w, TF_ACT_W, weight_local * ranks + rank, weight_next[weight_local]++, rank);
        weights_done++;
    }
}

/* ScheduleZBVZeroBubble._calculate_single_rank_operations: the rank hosts
 * stage `rank` (chunk 0) and stage 2 * ranks - 1 - rank (chunk 1). */
static void emit_zbv_rank(order_writer *w, int rank, int ranks, int microbatches)
{
    int planned = 2 * ranks - 1 > microbatches ? 2 * ranks - 1 : microbatches;
    int c0 = rank, c1 = 2 * ranks - 1 - rank;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;

    for (int i = 0; i < 2 * (ranks - rank) - 1; i++)
        emit(w, TF_ACT_F, c0, f0++, rank);
    for (int i = 0; i < rank; i++) {
        emit(w, TF_ACT_F, c1, f1++, rank);
        emit(w, TF_ACT_F, c0, f0++, rank);
    }
    for (int i = 0; i < ranks - rank; i++) {
        emit(w, TF_ACT_F, c1, f1++, rank);
        emit(w, TF_ACT_I, c1, b1, rank);
        emit(w, TF_ACT_W, c1, b1++, rank);
    }
    while (f1 < f0 || f0 < planned) {
        if (f0 < planned)
            emit(w, TF_ACT_F, c0, f0++, rank);
        emit(w, TF_ACT_I, c0, b0, rank);
        emit(w, TF_ACT_W, c0, b0++, rank);
        emit(w, TF_ACT_F, c1, f1++, rank);
        emit(w, TF_ACT_I, c1, b1, rank);
        emit(w, TF_ACT_W, c1, b1++, rank);
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < rank; i++) {
        emit(w, TF_ACT_I, c0, b0++, rank);
        emit(w, TF_ACT_I, c1, b1++, rank);
    }
    for (int i = 0; i < ranks - rank; i++) {
        emit(w, TF_ACT_I, c0, b0++, rank);
        emit(w, TF_ACT_W, c0, w0++, rank);
    }
    while (w1 < b1)
        emit(w, TF_ACT_W, c1, w1++, rank);
    while (w0 < b0)
        emit(w, TF_ACT_W, c0, w0++, rank);
}

/* Checks a built-in's shape; returns 0 or TF_EINVAL with the reason. */
static int check_builtin_shape(builtin_kind kind, int ranks, int stages_per_rank,
                               int microbatches, tf_error *err)
{
    const char *name = builtin_name(kind);
    if (ranks < 1)
        return tf_fail(err, TF_EINVAL, "%s: ranks = %d, must be at least 1", name, ranks);
    switch (kind) {
    case BUILTIN_GPIPE:
    case BUILTIN_1F1B:
        if (stages_per_rank != 1)
            return tf_fail(err, TF_EINVAL,
                           "%s: stages_per_rank = %d, this schedule has exactly 1 stage per rank",
                           name, stages_per_rank);
        break;
    case BUILTIN_INTERLEAVED_1F1B:
    case BUILTIN_INTERLEAVED_ZERO_BUBBLE:
        if (stages_per_rank < 2)
            return tf_fail(err, TF_EINVAL,
                           "%s: stages_per_rank = %d, this schedule needs at least 2 stages per "
                           "rank (use 1F1B for 1)",
                           name, stages_per_rank);
        break;
    case BUILTIN_ZBV_ZERO_BUBBLE:
        if (stages_per_rank != 2)
            return tf_fail(err, TF_EINVAL,
                           "%s: stages_per_rank = %d, this schedule has exactly 2 stages per rank",
                           name, stages_per_rank);
        break;
    default:
        break;
    }
    if (microbatches < 1)
        return tf_fail(err, TF_EINVAL, "%s: microbatches = %d, must be at least 1", name,
                       microbatches);
    long long actions_per_pair = tf_schedule_splits_backward(name) ? 3 : 2;
    long long total = (long long)ranks * stages_per_rank;
    if (total <= max_schedule_actions)
        total *= microbatches;
    if (total <= max_schedule_actions)
        total *= actions_per_pair;
    if (total > max_schedule_actions)
        return tf_fail(err, TF_EINVAL,
                       "%s: ranks = %d, stages_per_rank = %d, microbatches = %d give more than "
                       "%d actions",
                       name, ranks, stages_per_rank, microbatches, max_schedule_actions);

    /* PyTorch's GPipe and 1F1B refuse fewer microbatches than stages; the
     * orders are still well defined (1F1B warms up with min(P - r, M)
     * forwards), and planning such a shallow pipeline is a fair question, so
     * they are accepted here. */
    if (kind == BUILTIN_INTERLEAVED_1F1B || kind == BUILTIN_INTERLEAVED_ZERO_BUBBLE) {
        int rounds = microbatches / ranks > 1 ? microbatches / ranks : 1;
        if (microbatches % rounds != 0)
            return tf_fail(err, TF_EINVAL,
                           "%s: microbatches = %d is not a multiple of the number of rounds %d "
                           "(PyTorch's rounds = max(1, microbatches / ranks) with ranks = %d)",
                           name, microbatches, rounds, ranks);
    }
    return 0;
}

int tf_schedule_build(const char *name, int ranks, int stages_per_rank, int microbatches,
                      tf_schedule *out, tf_error *err)
{
    tf_schedule s;
    memset(&s, 0, sizeof s);
    if (out)
        memset(out, 0, sizeof *out);
    if (!out)
        return tf_fail(err, TF_EINVAL, "tf_schedule_build: no output schedule");
    builtin_kind kind = find_builtin(name);
    if (kind == BUILTIN_NONE) {
        char quoted[4 * max_quoted_cell + 16];
        if (name)
            quote_text(quoted, sizeof quoted, name, strlen(name));
        else
            snprintf(quoted, sizeof quoted, "(none)");
        return tf_fail(err, TF_EINVAL, "schedule %s is not a built-in schedule (built-in: %s)",
                       quoted, tf_schedule_builtin_names());
    }
    int rc = check_builtin_shape(kind, ranks, stages_per_rank, microbatches, err);
    if (rc)
        return rc;

    int split = tf_schedule_splits_backward(name);
    snprintf(s.name, sizeof s.name, "%s", builtin_name(kind));
    s.ranks = ranks;
    s.stages_per_rank = stages_per_rank;
    s.stages = ranks * stages_per_rank;
    s.microbatches = microbatches;
    s.n_actions = s.stages * microbatches * (split ? 3 : 2);
    s.actions = malloc(sizeof *s.actions * (size_t)s.n_actions);
    s.rank_offset = malloc(sizeof *s.rank_offset * (size_t)(ranks + 1));
    s.stage_rank = malloc(sizeof *s.stage_rank * (size_t)s.stages);
    int *counters = malloc(sizeof *counters * 3 * (size_t)stages_per_rank);
    if (!s.actions || !s.rank_offset || !s.stage_rank || !counters) {
        free(counters);
        tf_schedule_free(&s);
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for %d actions", s.name, s.n_actions);
    }
    for (int stage = 0; stage < s.stages; stage++)
        s.stage_rank[stage] = tf_schedule_stage_rank(s.name, ranks, stages_per_rank, stage);

    order_writer w = {s.actions, 0, s.n_actions, microbatches, 0};
    int per_round = 0;
    if (kind == BUILTIN_INTERLEAVED_1F1B || kind == BUILTIN_INTERLEAVED_ZERO_BUBBLE) {
        int rounds = microbatches / ranks > 1 ? microbatches / ranks : 1;
        per_round = microbatches / rounds;
    }
    int per_rank = s.n_actions / ranks;
    for (int rank = 0; rank < ranks; rank++) {
        s.rank_offset[rank] = w.count;
        switch (kind) {
        case BUILTIN_GPIPE:
            emit_gpipe_rank(&w, rank, microbatches);
            break;
        case BUILTIN_1F1B:
            emit_1f1b_rank(&w, rank, ranks, microbatches);
            break;
        case BUILTIN_INTERLEAVED_1F1B:
        case BUILTIN_INTERLEAVED_ZERO_BUBBLE:
            emit_interleaved_rank(&w, rank, ranks, stages_per_rank, microbatches, per_round,
                                  kind == BUILTIN_INTERLEAVED_ZERO_BUBBLE, counters);
            break;
        case BUILTIN_ZBV_ZERO_BUBBLE:
            emit_zbv_rank(&w, rank, ranks, microbatches);
            break;
        default:
            break;
        }
        if (w.overflowed || w.count - s.rank_offset[rank] != per_rank) {
            free(counters);
            tf_schedule_free(&s);
            return tf_fail(err, TF_EINVAL,
                           "%s: internal error: rank %d got a wrong number of actions "
                           "(ranks = %d, stages_per_rank = %d, microbatches = %d)",
                           builtin_name(kind), rank, ranks, stages_per_rank, microbatches);
        }
    }
    s.rank_offset[ranks] = w.count;
    free(counters);
    *out = s;
    return 0;
}

/* ---- explicit orders --------------------------------------------------- */

/* How messages name a cell: "order[1][3]" or, for a CSV file, "f.csv: line 2, cell 4". */
typedef struct cell_naming {
    const char *where;
    int csv_lines;
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

/* The checks shared by explicit orders, on parsed actions in rank order
 * (columns[i] is the cell of action i within its row).  Fills the stage
 * mapping and counts of s on success. */
static int check_explicit_order(tf_schedule *s, const int *columns, const cell_naming *naming,
                                tf_error *err)
{
    char here[1200], there[1200], text[32], other[32];
    int n = s->n_actions;
    int rc = 0;
    int *first_of_stage = NULL;
    int *stages_on_rank = NULL;
    cell_key *keys = NULL;

    if (n == 0)
        return tf_fail(err, TF_EINVAL, "%s: the order has no actions", naming->where);
    int max_stage = 0;
    for (int i = 0; i < n; i++)
        if (s->actions[i].stage > max_stage)
            max_stage = s->actions[i].stage;
    s->stages = max_stage + 1;
    if (s->stages % s->ranks != 0)
        return tf_fail(err, TF_EINVAL,
                       "%s: %d stages (0 to %d) do not divide evenly over %d ranks",
                       naming->where, s->stages, max_stage, s->ranks);
    s->stages_per_rank = s->stages / s->ranks;

    s->stage_rank = malloc(sizeof *s->stage_rank * (size_t)s->stages);
    first_of_stage = malloc(sizeof *first_of_stage * (size_t)s->stages);
    stages_on_rank = calloc((size_t)s->ranks, sizeof *stages_on_rank);
    keys = malloc(sizeof *keys * (size_t)n);
    if (!s->stage_rank || !first_of_stage || !stages_on_rank || !keys) {
        rc = tf_fail(err, TF_ENOMEM, "%s: out of memory checking %d actions", naming->where, n);
        goto done;
    }
    for (int stage = 0; stage < s->stages; stage++) {
        s->stage_rank[stage] = -1;
        first_of_stage[stage] = -1;
    }

    for (int i = 0; i < n; i++) {
        const tf_action *a = &s->actions[i];
        if (s->stage_rank[a->stage] < 0) {
            s->stage_rank[a->stage] = a->rank;
            first_of_stage[a->stage] = i;
            stages_on_rank[a->rank]++;
        } else if (s->stage_rank[a->stage] != a->rank) {
            const tf_action *f = &s->actions[first_of_stage[a->stage]];
            name_cell(here, sizeof here, naming, a->rank, columns[i]);
            name_cell(there, sizeof there, naming, f->rank, columns[first_of_stage[a->stage]]);
            rc = tf_fail(err, TF_EINVAL,
                         "%s: %s puts stage %d on rank %d, but %s at %s already put it on rank %d",
                         here, tf_action_format(a, text), a->stage, a->rank,
                         tf_action_format(f, other), there, f->rank);
            goto done;
        }
    }

    for (int i = 0; i < n; i++) {
        keys[i].stage = s->actions[i].stage;
        keys[i].microbatch = s->actions[i].microbatch;
        keys[i].type = (int)s->actions[i].type;
        keys[i].index = i;
    }
    qsort(keys, (size_t)n, sizeof *keys, compare_cell_keys);

    /* The duplicate named is the one that comes first in the order. */
    int repeat = -1, repeated = -1;
    for (int k = 1; k < n; k++) {
        if (keys[k].stage == keys[k - 1].stage && keys[k].microbatch == keys[k - 1].microbatch &&
            keys[k].type == keys[k - 1].type && (repeat < 0 || keys[k].index < repeat)) {
            repeat = keys[k].index;
            repeated = keys[k - 1].index;
        }
    }
    if (repeat >= 0) {
        const tf_action *a = &s->actions[repeat];
        name_cell(here, sizeof here, naming, a->rank, columns[repeat]);
        name_cell(there, sizeof there, naming, s->actions[repeated].rank, columns[repeated]);
        rc = tf_fail(err, TF_EINVAL, "%s: %s repeats the action at %s", here,
                     tf_action_format(a, text), there);
        goto done;
    }

    /* Walk (stage, microbatch) groups in order; a gap is a missing pair. */
    int expect_stage = 0, expect_mb = 0;
    for (int k = 0; k <= n;) {
        int stage = k < n ? keys[k].stage : s->stages;
        int mb = k < n ? keys[k].microbatch : 0;
        if (stage != expect_stage || mb != expect_mb) {
            rc = tf_fail(err, TF_EINVAL,
                         "%s: %dF%d is missing: stage %d, microbatch %d has no actions "
                         "(every stage needs microbatches 0 to %d)",
                         naming->where, expect_stage, expect_mb, expect_stage, expect_mb,
                         s->microbatches - 1);
            goto done;
        }
        if (k == n)
            break;
        int at[4] = {-1, -1, -1, -1};
        while (k < n && keys[k].stage == stage && keys[k].microbatch == mb) {
            at[keys[k].type] = keys[k].index;
            k++;
        }
        int any = at[TF_ACT_F] >= 0 ? at[TF_ACT_F]
                : at[TF_ACT_B] >= 0 ? at[TF_ACT_B]
                : at[TF_ACT_I] >= 0 ? at[TF_ACT_I] : at[TF_ACT_W];
        const tf_action *a = &s->actions[any];
        if (at[TF_ACT_F] < 0) {
            name_cell(there, sizeof there, naming, a->rank, columns[any]);
            rc = tf_fail(err, TF_EINVAL, "%s: %dF%d is missing, but %s at %s needs it",
                         naming->where, stage, mb, tf_action_format(a, text), there);
            goto done;
        }
        int split_at = at[TF_ACT_I] >= 0 ? at[TF_ACT_I] : at[TF_ACT_W];
        if (at[TF_ACT_B] >= 0 && split_at >= 0) {
            int later = at[TF_ACT_B] > split_at ? at[TF_ACT_B] : split_at;
            int earlier = at[TF_ACT_B] > split_at ? split_at : at[TF_ACT_B];
            name_cell(here, sizeof here, naming, s->actions[later].rank, columns[later]);
            name_cell(there, sizeof there, naming, s->actions[earlier].rank, columns[earlier]);
            rc = tf_fail(err, TF_EINVAL,
                         "%s: %s and %s at %s mix a full backward (B) with a split one (I/W) "
                         "for stage %d, microbatch %d",
                         here, tf_action_format(&s->actions[later], text),
                         tf_action_format(&s->actions[earlier], other), there, stage, mb);
            goto done;
        }
        if (at[TF_ACT_W] >= 0 && at[TF_ACT_I] < 0) {
            name_cell(here, sizeof here, naming, s->actions[at[TF_ACT_W]].rank,
                      columns[at[TF_ACT_W]]);
            rc = tf_fail(err, TF_EINVAL, "%s: %s has no matching %dI%d (W needs its I)", here,
                         tf_action_format(&s->actions[at[TF_ACT_W]], text), stage, mb);
            goto done;
        }
        if (at[TF_ACT_I] >= 0 && at[TF_ACT_W] < 0) {
            name_cell(here, sizeof here, naming, s->actions[at[TF_ACT_I]].rank,
                      columns[at[TF_ACT_I]]);
            rc = tf_fail(err, TF_EINVAL, "%s: %s has no matching %dW%d (I needs its W)", here,
                         tf_action_format(&s->actions[at[TF_ACT_I]], text), stage, mb);
            goto done;
        }
        if (at[TF_ACT_B] < 0 && at[TF_ACT_I] < 0) {
            name_cell(here, sizeof here, naming, a->rank, columns[any]);
            rc = tf_fail(err, TF_EINVAL,
                         "%s: %s has no backward: %dB%d (or %dI%d and %dW%d) is missing", here,
                         tf_action_format(a, text), stage, mb, stage, mb, stage, mb);
            goto done;
        }
        if (++expect_mb == s->microbatches) {
            expect_mb = 0;
            expect_stage++;
        }
    }

    for (int rank = 0; rank < s->ranks; rank++) {
        if (stages_on_rank[rank] != s->stages_per_rank) {
            rc = tf_fail(err, TF_EINVAL,
                         "%s: rank %d runs %d stages, expected %d (%d stages over %d ranks)",
                         naming->where, rank, stages_on_rank[rank], s->stages_per_rank,
                         s->stages, s->ranks);
            goto done;
        }
    }

done:
    free(first_of_stage);
    free(stages_on_rank);
    free(keys);
    return rc;
}

/* Builds a schedule from rows of cells.  microbatches < 1 means "1 + the
 * largest microbatch seen"; skip_blank treats blank cells as idle slots. */
static int schedule_from_rows(const char *const *const *rows, const int *row_len, int ranks,
                              int microbatches, const cell_naming *naming, int skip_blank,
                              tf_schedule *out, tf_error *err)
{
    char here[1200];
    tf_schedule s;
    int *columns = NULL;
    int rc = 0;
    memset(&s, 0, sizeof s);

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
        for (int c = 0; c < row_len[r]; c++) {
            const char *cell = rows[r][c];
            if (skip_blank && cell) {
                while (is_blank(*cell))
                    cell++;
                if (*cell == '\0')
                    continue;
            }
            cells++;
        }
        if (cells > max_schedule_actions)
            return tf_fail(err, TF_EINVAL, "%s: more than %d actions", naming->where,
                           max_schedule_actions);
    }
    int n = (int)cells;

    snprintf(s.name, sizeof s.name, "custom");
    s.ranks = ranks;
    s.n_actions = n;
    s.actions = malloc(sizeof *s.actions * (size_t)(n > 0 ? n : 1));
    s.rank_offset = malloc(sizeof *s.rank_offset * (size_t)(ranks + 1));
    columns = malloc(sizeof *columns * (size_t)(n > 0 ? n : 1));
    if (!s.actions || !s.rank_offset || !columns) {
        rc = tf_fail(err, TF_ENOMEM, "%s: out of memory for %d actions", naming->where, n);
        goto fail;
    }

    int count = 0, max_mb = 0;
    for (int r = 0; r < ranks; r++) {
        s.rank_offset[r] = count;
        for (int c = 0; c < row_len[r]; c++) {
            const char *cell = rows[r][c];
            if (skip_blank && cell) {
                const char *p = cell;
                while (is_blank(*p))
                    p++;
                if (*p == '\0')
                    continue;
            }
            tf_action a;
            tf_error cell_err;
            tf_error_clear(&cell_err);
            name_cell(here, sizeof here, naming, r, c);
            if (tf_action_parse(cell, &a, &cell_err) != 0) {
                rc = tf_fail(err, TF_EINVAL, "%s: %s", here, cell_err.msg);
                goto fail;
            }
            char text[32];
            if (microbatches >= 1 && a.microbatch >= microbatches) {
                rc = tf_fail(err, TF_EINVAL,
                             "%s: %s: microbatch %d is out of range (%d microbatches: 0 to %d)",
                             here, tf_action_format(&a, text), a.microbatch, microbatches,
                             microbatches - 1);
                goto fail;
            }
            /* Every (stage, microbatch) needs at least two actions, so indices
             * at or beyond the action count cannot belong to a valid order. */
            if (a.stage >= n || (microbatches < 1 && a.microbatch >= n)) {
                rc = tf_fail(err, TF_EINVAL,
                             "%s: %s: %s %d is out of range for an order of %d actions", here,
                             tf_action_format(&a, text), a.stage >= n ? "stage" : "microbatch",
                             a.stage >= n ? a.stage : a.microbatch, n);
                goto fail;
            }
            if (a.microbatch > max_mb)
                max_mb = a.microbatch;
            a.rank = r;
            columns[count] = c;
            s.actions[count++] = a;
        }
    }
    s.rank_offset[ranks] = count;
    s.microbatches = microbatches >= 1 ? microbatches : max_mb + 1;

    rc = check_explicit_order(&s, columns, naming, err);
    if (rc)
        goto fail;
    free(columns);
    *out = s;
    return 0;

fail:
    free(columns);
    tf_schedule_free(&s);
    return rc;
}

int tf_schedule_from_cells(const char *const *const *rows, const int *row_len, int ranks,
                           int microbatches, const char *where, tf_schedule *out,
                           tf_error *err)
{
    cell_naming naming = {where ? where : "order", 0};
    if (out)
        memset(out, 0, sizeof *out);
    if (!out)
        return tf_fail(err, TF_EINVAL, "%s: no output schedule", naming.where);
    if (microbatches < 1)
        return tf_fail(err, TF_EINVAL, "%s: microbatches = %d, must be at least 1",
                       naming.where, microbatches);
    return schedule_from_rows(rows, row_len, ranks, microbatches, &naming, 0, out, err);
}

/* Splits `data` in place into rows of cells: lines end in \n (a \r before it
 * is dropped), cells are separated by commas, a cell wrapped in double quotes
 * loses them.  Trailing blank lines are ignored. */
static int split_csv(char *data, size_t len, const char *path, char ****rows_out,
                     int **row_len_out, int *ranks_out, tf_error *err)
{
    /* Drop trailing blank lines (whitespace and nothing else). */
    size_t content_end = len;
    while (content_end > 0 && is_blank(data[content_end - 1]))
        content_end--;
    if (content_end == 0)
        return tf_fail(err, TF_EINVAL, "%s: the file has no rows (expected one row per rank)",
                       path);
    size_t lines = 1;
    for (size_t i = 0; i < content_end; i++)
        if (data[i] == '\n')
            lines++;
    if (lines > (size_t)max_schedule_actions)
        return tf_fail(err, TF_EINVAL, "%s: more than %d rows", path, max_schedule_actions);
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
        size_t line_len = strlen(line);
        if (line_len > 0 && line[line_len - 1] == '\r')
            line[--line_len] = '\0';
        size_t cells = 1;
        for (size_t i = 0; i < line_len; i++)
            if (line[i] == ',')
                cells++;
        if (line_len == 0)
            cells = 0;
        if (cells > (size_t)max_schedule_actions) {
            for (size_t k = 0; k < r; k++)
                free(rows[k]);
            free(rows);
            free(row_len);
            return tf_fail(err, TF_EINVAL, "%s: line %zu has more than %d cells", path, r + 1,
                           max_schedule_actions);
        }
        rows[r] = malloc(sizeof **rows * (cells > 0 ? cells : 1));
        if (!rows[r]) {
            for (size_t k = 0; k < r; k++)
                free(rows[k]);
            free(rows);
            free(row_len);
            return tf_fail(err, TF_ENOMEM, "%s: out of memory for line %zu", path, r + 1);
        }
        char *cell = line;
        for (size_t c = 0; c < cells; c++) {
            char *comma = strchr(cell, ',');
            if (comma)
                *comma = '\0';
            char *start = cell, *end = cell + strlen(cell);
            while (start < end && is_blank(*start))
                start++;
            while (end > start && is_blank(end[-1]))
                end--;
            if (end - start >= 2 && *start == '"' && end[-1] == '"') {
                start++;
                end--;
            }
            *end = '\0';
            rows[r][c] = start;
            cell = comma ? comma + 1 : cell + strlen(cell);
        }
        row_len[r] = (int)cells;
        line = newline ? newline + 1 : line + line_len;
    }
    *rows_out = rows;
    *row_len_out = row_len;
    *ranks_out = (int)lines;
    return 0;
}

int tf_schedule_read_csv(const char *path, tf_schedule *out, tf_error *err)
{
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
    int rc = tf_read_file(path, &data, &len, err);
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
        cell_naming naming = {path, 1};
        rc = schedule_from_rows((const char *const *const *)rows, row_len, ranks, 0, &naming, 1,
                                out, err);
        for (int r = 0; r < ranks; r++)
            free(rows[r]);
    }
    free(rows);
    free(row_len);
    free(data);
    return rc;
}

int tf_schedule_write_csv(const tf_schedule *s, const char *path, tf_error *err)
{
    if (!s || !path)
        return tf_fail(err, TF_EINVAL, "tf_schedule_write_csv: %s is missing",
                       s ? "the path" : "the schedule");
    int malformed = s->ranks < 1 || s->n_actions < 0 || s->n_actions > max_schedule_actions ||
                    !s->rank_offset || (s->n_actions > 0 && !s->actions);
    for (int r = 0; !malformed && r < s->ranks; r++)
        malformed = s->rank_offset[r] < 0 || s->rank_offset[r] > s->rank_offset[r + 1];
    if (!malformed)
        malformed = s->rank_offset[0] != 0 || s->rank_offset[s->ranks] != s->n_actions;
    if (malformed)
        return tf_fail(err, TF_EINVAL, "%s: the schedule to write is empty or malformed", path);
    /* Every cell is at most 2 * 11 digits + a letter, plus its comma or newline. */
    size_t capacity = (size_t)s->n_actions * 24 + (size_t)s->ranks + 1;
    char *text = malloc(capacity);
    if (!text)
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for %d actions", path, s->n_actions);
    size_t used = 0;
    for (int r = 0; r < s->ranks; r++) {
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++) {
            char cell[32];
            tf_action_format(&s->actions[i], cell);
            size_t cell_len = strlen(cell);
            if (i > s->rank_offset[r])
                text[used++] = ',';
            memcpy(text + used, cell, cell_len);
            used += cell_len;
        }
        text[used++] = '\n';
    }
    int rc = tf_write_file_atomic(path, text, used, err);
    free(text);
    return rc;
}
