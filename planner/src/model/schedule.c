/* schedule.c - actions and their names, built-in pipeline schedules
 * (PyTorch's per-rank orders), and lookups.  Explicit orders, from cells
 * or CSV: schedule_order.c. */
#include "schedule_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest part of an offending cell quoted in a message. */
enum { max_quoted_cell = 48 };

typedef enum {
    BUILTIN_NONE = -1,
    BUILTIN_GPIPE,
    BUILTIN_1F1B,
    BUILTIN_INTERLEAVED_1F1B,
    BUILTIN_LOOPED_BFS,
    BUILTIN_INTERLEAVED_ZERO_BUBBLE,
    BUILTIN_ZBV_ZERO_BUBBLE,
    BUILTIN_DUAL_PIPE_V,
    BUILTIN_COUNT
} builtin_kind;

static const char *builtin_name(builtin_kind kind)
{
    static const char *const names[BUILTIN_COUNT] = {
        "GPipe",         "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble",
        "ZBVZeroBubble", "DualPipeV"};
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
    case TF_ACT_R: return 'R';
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
    case 'R': parsed = TF_ACT_R; break;
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
    tf_action parsed = {TF_ACT_F, -1, -1, -1, TF_PAIR_NONE};
    if (a)
        *a = parsed;
    if (!cell)
        return tf_fail(err, TF_EINVAL, "missing cell (NULL) is not an action (%s)", expected);

    const char *start = cell;
    const char *end = cell + strlen(cell);
    while (start < end && tf_schedule_is_blank(*start))
        start++;
    while (end > start && tf_schedule_is_blank(end[-1]))
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

/* The span [*start, *end) of text without the blanks around it. */
static void trim_blanks(const char **start, const char **end)
{
    while (*start < *end && tf_schedule_is_blank(**start))
        (*start)++;
    while (*end > *start && tf_schedule_is_blank((*end)[-1]))
        (*end)--;
}

/* Parses one half of a pair, text[0..len-1], into *a. */
static int parse_pair_part(const char *quoted, const char *text, size_t len, tf_action *a,
                           tf_error *err)
{
    char part[64];
    if (len >= sizeof part)
        return tf_fail(err, TF_EINVAL, "%s: a part of the pair is too long to be an action",
                       quoted);
    memcpy(part, text, len);
    part[len] = '\0';
    tf_error inner;
    tf_error_clear(&inner);
    if (tf_action_parse(part, a, &inner) != 0)
        return tf_fail(err, TF_EINVAL, "%s: %s", quoted, inner.msg);
    return 0;
}

/* The pair in [start, end), which starts with '(': two actions between the
 * brackets separated by ';', then "OVERLAP_F_B". */
static int parse_pair(const char *start, const char *end, tf_action out[2], tf_error *err)
{
    static const char form[] = "expected an overlapped pair like \"(0F7;7B3)OVERLAP_F_B\"";
    char quoted[4 * max_quoted_cell + 16];
    quote_text(quoted, sizeof quoted, start, (size_t)(end - start));
    const char *close = memchr(start, ')', (size_t)(end - start));
    const char *semi = close ? memchr(start, ';', (size_t)(close - start)) : NULL;
    const char *suffix = close ? close + 1 : end, *suffix_end = end;
    trim_blanks(&suffix, &suffix_end);
    if (!close || !semi || (size_t)(suffix_end - suffix) != strlen("OVERLAP_F_B") ||
        memcmp(suffix, "OVERLAP_F_B", strlen("OVERLAP_F_B")) != 0)
        return tf_fail(err, TF_EINVAL, "%s: %s", quoted, form);
    if (memchr(semi + 1, ';', (size_t)(close - semi - 1)))
        return tf_fail(err, TF_EINVAL, "%s: a pair holds exactly two actions (%s)", quoted,
                       form);
    int rc = parse_pair_part(quoted, start + 1, (size_t)(semi - start - 1), &out[0], err);
    if (!rc)
        rc = parse_pair_part(quoted, semi + 1, (size_t)(close - semi - 1), &out[1], err);
    if (rc)
        return rc;
    /* PyTorch's OVERLAP_F_B issues a forward with a backward, in that order. */
    if (out[0].type != TF_ACT_F || (out[1].type != TF_ACT_B && out[1].type != TF_ACT_I))
        return tf_fail(err, TF_EINVAL,
                       "%s: a pair is a forward then a backward (B or I), like "
                       "\"(0F7;7B3)OVERLAP_F_B\"",
                       quoted);
    out[0].pair = TF_PAIR_FIRST;
    out[1].pair = TF_PAIR_SECOND;
    return 0;
}

int tf_cell_parse(const char *cell, tf_action out[2], int *count, tf_error *err)
{
    const tf_action none = {TF_ACT_F, -1, -1, -1, TF_PAIR_NONE};
    out[0] = out[1] = none;
    *count = 0;
    const char *start = cell, *end = cell ? cell + strlen(cell) : NULL;
    if (cell)
        trim_blanks(&start, &end);
    int rc = cell && start < end && *start == '(' ? parse_pair(start, end, out, err)
                                                  : tf_action_parse(cell, &out[0], err);
    if (rc) {
        out[0] = out[1] = none;
        return rc;
    }
    *count = out[0].pair == TF_PAIR_FIRST ? 2 : 1;
    return 0;
}

char *tf_pair_format(const tf_action *forward, const tf_action *backward, char *buf)
{
    snprintf(buf, TF_CELL_MAX, "(%d%c%d;%d%c%d)OVERLAP_F_B", forward->stage,
             tf_action_letter(forward->type), forward->microbatch, backward->stage,
             tf_action_letter(backward->type), backward->microbatch);
    return buf;
}

int tf_schedule_format_cell(const tf_schedule *s, int i, char *buf)
{
    const tf_action *a = &s->actions[i];
    if (a->pair == TF_PAIR_FIRST && i + 1 < s->n_actions &&
        s->actions[i + 1].pair == TF_PAIR_SECOND) {
        tf_pair_format(a, &s->actions[i + 1], buf);
        return 2;
    }
    tf_action_format(a, buf);
    return 1;
}

int tf_schedule_has_pairs(const tf_schedule *s)
{
    for (int i = 0; s && s->actions && i < s->n_actions; i++)
        if (s->actions[i].pair != TF_PAIR_NONE)
            return 1;
    return 0;
}

int tf_schedule_count(const tf_schedule *s, tf_action_type type)
{
    int n = 0;
    for (int i = 0; i < s->n_actions; i++)
        n += s->actions[i].type == type;
    return n;
}

int tf_schedule_fills_then_drains(const tf_schedule *s)
{
    for (int r = 0; r < s->ranks; r++) {
        int draining = 0;
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++) {
            tf_action_type t = s->actions[i].type;
            if (t == TF_ACT_F && draining)
                return 0;
            draining |= t == TF_ACT_B || t == TF_ACT_I || t == TF_ACT_W;
        }
    }
    return 1;
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
    return "GPipe 1F1B Interleaved1F1B LoopedBFS InterleavedZeroBubble ZBVZeroBubble DualPipeV";
}

int tf_schedule_splits_backward(const char *name)
{
    builtin_kind kind = find_builtin(name);
    return kind == BUILTIN_INTERLEAVED_ZERO_BUBBLE || kind == BUILTIN_ZBV_ZERO_BUBBLE ||
           kind == BUILTIN_DUAL_PIPE_V;
}

/* The V-shaped schedules: stage s on rank s going down, back up after. */
static int is_v_shape(builtin_kind kind)
{
    return kind == BUILTIN_ZBV_ZERO_BUBBLE || kind == BUILTIN_DUAL_PIPE_V;
}

int tf_schedule_stage_rank(const char *name, int ranks, int stages_per_rank, int stage)
{
    if (ranks < 1 || stages_per_rank < 1 || stage < 0 || stage / stages_per_rank >= ranks)
        return -1;
    if (is_v_shape(find_builtin(name)))
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
    size_t keys = (size_t)TF_ACTION_TYPES * (size_t)s->stages * (size_t)s->microbatches;
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
    if ((int)type < 0 || (int)type >= TF_ACTION_TYPES || stage < 0 || stage >= s->stages || microbatch < 0 ||
        microbatch >= s->microbatches)
        return -1;
    return index[((size_t)type * s->stages + stage) * s->microbatches + microbatch];
}

int tf_schedule_backward_of(const tf_schedule *s, const int *index, int stage, int microbatch)
{
    int b = tf_schedule_lookup(s, index, TF_ACT_B, stage, microbatch);
    return b >= 0 ? b : tf_schedule_lookup(s, index, TF_ACT_I, stage, microbatch);
}

int tf_schedule_sender(const tf_schedule *s, const int *index, int i)
{
    const tf_action *a = &s->actions[i];
    int u = -1;
    if (a->type == TF_ACT_F)
        u = tf_schedule_lookup(s, index, TF_ACT_F, a->stage - 1, a->microbatch);
    else if (a->type == TF_ACT_B || a->type == TF_ACT_I)
        u = tf_schedule_backward_of(s, index, a->stage + 1, a->microbatch);
    return u >= 0 && s->actions[u].rank != a->rank ? u : -1;
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
    a->pair = TF_PAIR_NONE;
}

/* An overlapped pair: forward (f_stage, f_mb), then backward (b_type,
 * b_stage, b_mb), issued together. */
static void emit_pair(order_writer *w, int f_stage, int f_mb, tf_action_type b_type,
                      int b_stage, int b_mb, int rank)
{
    int at = w->count;
    emit(w, TF_ACT_F, f_stage, f_mb, rank);
    emit(w, b_type, b_stage, b_mb, rank);
    if (w->count == at + 2) {
        w->actions[at].pair = TF_PAIR_FIRST;
        w->actions[at + 1].pair = TF_PAIR_SECOND;
    }
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

/* ScheduleLoopedBFS._calculate_single_rank_operations: the rank's local
 * stages (rank, rank + ranks, ...) each run all their forwards in turn, in
 * microbatch order; then the same stages in reverse run all their full
 * backwards, from the last microbatch down. */
static void emit_looped_bfs_rank(order_writer *w, int rank, int ranks, int stages_per_rank,
                                 int microbatches)
{
    for (int local = 0; local < stages_per_rank; local++)
        for (int m = 0; m < microbatches; m++)
            emit(w, TF_ACT_F, local * ranks + rank, m, rank);
    for (int local = stages_per_rank - 1; local >= 0; local--)
        for (int m = microbatches - 1; m >= 0; m--)
            emit(w, TF_ACT_B, local * ranks + rank, m, rank);
}

/* One rank's DualPipeV order in the making.  Chunk 0 is the rank's stage on
 * the way down the V, chunk 1 the one on the way up.  Backward microbatches
 * count B and I together per chunk; every I queues its W, which later
 * phases run oldest first. */
typedef struct dual_pipe {
    order_writer *w;
    int rank;
    int stage[2];
    int forward[2], backward[2]; /* next microbatch of each chunk */
    int *queued_stage, *queued_mb; /* pending W, a FIFO of 2 x microbatches */
    int head, tail;
    int split;                   /* backwards of chunk 0 and 1 are I from now on */
} dual_pipe;

static void dual_forward(dual_pipe *d, int chunk)
{
    emit(d->w, TF_ACT_F, d->stage[chunk], d->forward[chunk]++, d->rank);
}

/* A backward of chunk: I (queueing its W) or a full B. */
static void dual_backward(dual_pipe *d, int chunk, int split)
{
    int mb = d->backward[chunk]++;
    emit(d->w, split ? TF_ACT_I : TF_ACT_B, d->stage[chunk], mb, d->rank);
    if (split) {
        d->queued_stage[d->tail] = d->stage[chunk];
        d->queued_mb[d->tail++] = mb;
    }
}

static void dual_weight(dual_pipe *d)
{
    if (d->head < d->tail) {
        emit(d->w, TF_ACT_W, d->queued_stage[d->head], d->queued_mb[d->head], d->rank);
        d->head++;
    }
}

/* The pair (forward of chunk f, full backward of the other chunk). */
static void dual_pair(dual_pipe *d, int f)
{
    int b = 1 - f;
    emit_pair(d->w, d->stage[f], d->forward[f]++, TF_ACT_B, d->stage[b], d->backward[b]++,
              d->rank);
}

/* The last phases: r + 1 rounds of a backward of each chunk, the switch to
 * I coming in the middle round (before chunk 1's backward on odd ranks,
 * after it on even ones); then P - 1 - r rounds of (pending W, backward of
 * chunk 0), then the W still pending. */
static void dual_drain(dual_pipe *d, int ranks)
{
    const int r = d->rank, rounds = r + 1;
    for (int i = 0; i < rounds; i++) {
        if (i == rounds / 2 && r % 2 == 1)
            d->split = 1;
        dual_backward(d, 1, d->split);
        if (i == rounds / 2 && r % 2 == 0)
            d->split = 1;
        dual_backward(d, 0, d->split);
    }
    for (int i = 0; i < ranks - 1 - r; i++) {
        dual_weight(d);
        dual_backward(d, 0, d->split);
    }
    for (int i = 0; i < r + 1; i++)
        dual_weight(d);
}

/* ScheduleDualPipeV._calculate_single_rank_operations (PyTorch's steps 1
 * to 8): warm-up forwards of chunk 0, then of both chunks, then chunk 1's
 * zero-bubble I, W, F; the steady state of overlapped pairs (F of chunk 0
 * with B of chunk 1, F of chunk 1 with B of chunk 0; the last rank runs its
 * first two alone to shorten the bubble); chunk 1's tail; dual_drain.
 * scratch holds 4 x microbatches ints. */
static void emit_dual_pipe_v_rank(order_writer *w, int rank, int ranks, int microbatches,
                                  int *scratch)
{
    dual_pipe d = {w, rank, {rank, 2 * ranks - 1 - rank}, {0, 0}, {0, 0},
                   scratch, scratch + 2 * microbatches, 0, 0, 0};
    for (int i = 0; i < 2 * (ranks - 1 - rank); i++)
        dual_forward(&d, 0);
    for (int i = 0; i < rank + 1; i++) {
        dual_forward(&d, 0);
        dual_forward(&d, 1);
    }
    for (int i = 0; i < ranks - 1 - rank; i++) {
        dual_backward(&d, 1, 1);
        dual_weight(&d);
        dual_forward(&d, 1);
    }
    for (int i = 0; i < microbatches - 2 * ranks + rank + 1; i++) {
        if (i == 0 && rank == ranks - 1) {
            dual_forward(&d, 0);
            dual_backward(&d, 1, 0);
        } else {
            dual_pair(&d, 0);
        }
        dual_pair(&d, 1);
    }
    for (int i = 0; i < ranks - 1 - rank; i++) {
        dual_backward(&d, 1, 0);
        dual_pair(&d, 1);
    }
    dual_drain(&d, ranks);
}

int tf_schedule_check_size(int ranks, int stages_per_rank, int microbatches,
                           int actions_per_pair, tf_error *err)
{
    if (ranks < 1 || ranks > TF_MAX_RANKS || stages_per_rank < 1 ||
        stages_per_rank > TF_MAX_STAGES_PER_RANK || microbatches < 1 ||
        microbatches > TF_MAX_MICROBATCHES)
        return tf_fail(err, TF_EINVAL,
                       "ranks = %d, stages_per_rank = %d, microbatches = %d: each must be at "
                       "least 1 and at most %d, %d and %d",
                       ranks, stages_per_rank, microbatches, TF_MAX_RANKS,
                       TF_MAX_STAGES_PER_RANK, TF_MAX_MICROBATCHES);
    /* Within those, the products fit in a long long. */
    long long stages = (long long)ranks * stages_per_rank;
    long long actions = stages * microbatches * actions_per_pair;
    if (stages > TF_MAX_STAGES)
        return tf_fail(err, TF_EINVAL,
                       "ranks x stages_per_rank = %d x %d = %lld stages, more than the %d the "
                       "planner accepts",
                       ranks, stages_per_rank, stages, TF_MAX_STAGES);
    if (actions > TF_MAX_ACTIONS)
        return tf_fail(err, TF_EINVAL,
                       "ranks x stages_per_rank x microbatches x %d = %d x %d x %d x %d = %lld "
                       "actions, more than the %d the planner accepts",
                       actions_per_pair, ranks, stages_per_rank, microbatches, actions_per_pair,
                       actions, TF_MAX_ACTIONS);
    return 0;
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
    case BUILTIN_DUAL_PIPE_V:
        if (stages_per_rank != 2)
            return tf_fail(err, TF_EINVAL,
                           "%s: stages_per_rank = %d, this schedule has exactly 2 stages per rank",
                           name, stages_per_rank);
        break;
    case BUILTIN_LOOPED_BFS:
        if (stages_per_rank < 1)
            return tf_fail(err, TF_EINVAL, "%s: stages_per_rank = %d, must be at least 1", name,
                           stages_per_rank);
        break;
    default:
        break;
    }
    if (microbatches < 1)
        return tf_fail(err, TF_EINVAL, "%s: microbatches = %d, must be at least 1", name,
                       microbatches);
    if (tf_schedule_check_size(ranks, stages_per_rank, microbatches,
                               tf_schedule_splits_backward(name) ? 3 : 2, err)) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return tf_fail(err, TF_EINVAL, "%s: %s", name, why);
    }

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
    if (kind == BUILTIN_DUAL_PIPE_V && microbatches < 2 * ranks)
        return tf_fail(err, TF_EINVAL,
                       "%s: microbatches = %d is fewer than the %d stages (2 x ranks = 2 x %d); "
                       "PyTorch's DualPipeV needs at least one microbatch per stage",
                       name, microbatches, 2 * ranks, ranks);
    return 0;
}

/* What one rank's order of a built-in must hold: per_rank actions, or,
 * for DualPipeV (whose I/W split depends on the rank), 2 x microbatches
 * forwards and as many B and I, and one W per I. */
static int rank_count_ok(builtin_kind kind, const tf_action *a, int count, int per_rank,
                         int microbatches)
{
    if (kind != BUILTIN_DUAL_PIPE_V)
        return count == per_rank;
    int n[4] = {0, 0, 0, 0};
    for (int i = 0; i < count; i++)
        n[a[i].type]++;
    return n[TF_ACT_F] == 2 * microbatches && n[TF_ACT_B] + n[TF_ACT_I] == 2 * microbatches &&
           n[TF_ACT_W] == n[TF_ACT_I];
}

/* Appends rank `rank`'s order of built-in kind to w.  scratch holds
 * 3 x stages_per_rank + 4 x microbatches ints. */
static void emit_rank(builtin_kind kind, order_writer *w, int rank, int ranks,
                      int stages_per_rank, int microbatches, int *scratch)
{
    int rounds = microbatches / ranks > 1 ? microbatches / ranks : 1;
    switch (kind) {
    case BUILTIN_GPIPE: emit_gpipe_rank(w, rank, microbatches); break;
    case BUILTIN_1F1B: emit_1f1b_rank(w, rank, ranks, microbatches); break;
    case BUILTIN_INTERLEAVED_1F1B:
    case BUILTIN_INTERLEAVED_ZERO_BUBBLE:
        emit_interleaved_rank(w, rank, ranks, stages_per_rank, microbatches,
                              microbatches / rounds, kind == BUILTIN_INTERLEAVED_ZERO_BUBBLE,
                              scratch);
        break;
    case BUILTIN_LOOPED_BFS:
        emit_looped_bfs_rank(w, rank, ranks, stages_per_rank, microbatches);
        break;
    case BUILTIN_ZBV_ZERO_BUBBLE: emit_zbv_rank(w, rank, ranks, microbatches); break;
    case BUILTIN_DUAL_PIPE_V: emit_dual_pipe_v_rank(w, rank, ranks, microbatches, scratch); break;
    default: break;
    }
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
    /* DualPipeV's count depends on its I/W split: this is its upper bound. */
    s.n_actions = s.stages * microbatches * (split ? 3 : 2);
    s.actions = malloc(sizeof *s.actions * (size_t)s.n_actions);
    s.rank_offset = malloc(sizeof *s.rank_offset * (size_t)(ranks + 1));
    s.stage_rank = malloc(sizeof *s.stage_rank * (size_t)s.stages);
    int *scratch =
        malloc(sizeof *scratch * (3 * (size_t)stages_per_rank + 4 * (size_t)microbatches));
    if (!s.actions || !s.rank_offset || !s.stage_rank || !scratch) {
        free(scratch);
        tf_schedule_free(&s);
        return tf_fail(err, TF_ENOMEM, "%s: out of memory for %d actions", s.name, s.n_actions);
    }
    for (int stage = 0; stage < s.stages; stage++)
        s.stage_rank[stage] = tf_schedule_stage_rank(s.name, ranks, stages_per_rank, stage);

    order_writer w = {s.actions, 0, s.n_actions, microbatches, 0};
    int per_rank = s.n_actions / ranks;
    for (int rank = 0; rank < ranks; rank++) {
        s.rank_offset[rank] = w.count;
        emit_rank(kind, &w, rank, ranks, stages_per_rank, microbatches, scratch);
        if (w.overflowed || !rank_count_ok(kind, w.actions + s.rank_offset[rank],
                                           w.count - s.rank_offset[rank], per_rank,
                                           microbatches)) {
            free(scratch);
            tf_schedule_free(&s);
            return tf_fail(err, TF_EINVAL,
                           "%s: internal error: rank %d got a wrong number of actions "
                           "(ranks = %d, stages_per_rank = %d, microbatches = %d)",
                           builtin_name(kind), rank, ranks, stages_per_rank, microbatches);
        }
    }
    s.rank_offset[ranks] = w.count;
    s.n_actions = w.count;
    free(scratch);
    *out = s;
    return 0;
}
