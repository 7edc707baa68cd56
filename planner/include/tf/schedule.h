/* schedule.h - pipeline schedules: which actions each rank runs, in order.
 *
 * An action is (type, stage, microbatch) and runs on the rank that hosts its
 * stage.  Types follow torch.distributed.pipelining: F forward, B full
 * backward, I backward-input (dX only), W backward-weight (dW only).
 * A schedule stores its actions rank by rank, each rank's in execution order:
 * the actions of rank r are actions[rank_offset[r] .. rank_offset[r+1]-1].
 *
 * Overlapped pairs (PyTorch's OVERLAP_F_B, DualPipeV): a forward and a
 * backward that one rank issues together, written "(0F7;7B3)OVERLAP_F_B" in
 * PyTorch's CSVs.  They stay two actions, consecutive in the rank's order
 * with the forward first, marked TF_PAIR_FIRST and TF_PAIR_SECOND; the DAG
 * joins them into one node (dag.h).
 */
#ifndef TF_SCHEDULE_H
#define TF_SCHEDULE_H

#include <stddef.h>

#include "tf/error.h"

/* The largest pipeline the toolkit accepts (docs/robustness.md).  Real
 * pipelines have up to about 64 ranks, 256 stages and tens of thousands of
 * actions per step; these limits leave room above that while every program
 * stays within about a minute and a few hundred MB on a 2-core machine
 * (the fast solver takes 75-90 s for 131,072 actions of 1F1B, tf-dot 3-4
 * s; docs/robustness.md).  A count within its own limit can still multiply into too
 * many actions: tf_schedule_check_size checks the products. */
enum {
    TF_MAX_RANKS = 512,
    TF_MAX_STAGES_PER_RANK = 64,
    TF_MAX_STAGES = 512,         /* ranks x stages_per_rank: one cap row each */
    TF_MAX_MICROBATCHES = 65536,
    TF_MAX_ACTIONS = 131072      /* every action of one step (order cells too) */
};

/* The largest schedule CSV read: TF_MAX_ACTIONS cells of a few bytes and
 * their idle slots take about 4 MB. */
#define TF_MAX_CSV_BYTES ((size_t)16 << 20)

/* R, recomputation of a forward's dropped activations, appears only in
 * plans: tf-plan places it before the backward it serves (tf/memory.h). */
typedef enum {
    TF_ACT_F = 0,
    TF_ACT_B = 1,
    TF_ACT_I = 2,
    TF_ACT_W = 3,
    TF_ACT_R = 4
} tf_action_type;
enum { TF_ACTION_TYPES = 5 };

/* An action's part in an overlapped pair. */
typedef enum { TF_PAIR_NONE = 0, TF_PAIR_FIRST = 1, TF_PAIR_SECOND = 2 } tf_pair_role;

typedef struct tf_action {
    tf_action_type type;
    int stage;
    int microbatch;
    int rank;
    int pair; /* tf_pair_role: TF_PAIR_NONE unless the action is half of a pair */
} tf_action;

/* Bytes a cell needs, a pair's included ("(2147483647F...;...)OVERLAP_F_B"). */
enum { TF_CELL_MAX = 96 };

typedef struct tf_schedule {
    char name[64];        /* built-in name, or "custom" */
    int ranks;
    int stages_per_rank;
    int stages;           /* ranks * stages_per_rank */
    int microbatches;
    int n_actions;
    tf_action *actions;   /* n_actions, rank by rank in execution order */
    int *rank_offset;     /* ranks + 1 entries */
    int *stage_rank;      /* stages entries: the rank hosting each stage */
} tf_schedule;

/* The letter of a type: 'F', 'B', 'I' or 'W'. */
char tf_action_letter(tf_action_type type);

/* Parses 'F','B','I','W','R' into *type.  Returns 0 or TF_EINVAL. */
int tf_action_type_parse(char letter, tf_action_type *type);

/* Formats an action as PyTorch does in schedule CSVs: stage, letter,
 * microbatch, e.g. "0F3".  buf must hold at least 32 bytes; returns buf. */
char *tf_action_format(const tf_action *a, char *buf);

/* Parses a cell like "0F3" or "12W7" (surrounding blanks allowed) into
 * a->type, a->stage and a->microbatch (a->rank is left as -1).
 * Returns 0 or TF_EINVAL naming the cell. */
int tf_action_parse(const char *cell, tf_action *a, tf_error *err);

/* Parses one cell of an order: an action ("0F3", as tf_action_parse) into
 * out[0], or an overlapped pair "(0F7;7B3)OVERLAP_F_B" (a forward, then a B
 * or an I; blanks allowed around the parts) into out[0] and out[1] with
 * their pair roles set.  *count gets 1 or 2; ranks are left -1.  Returns 0
 * or TF_EINVAL naming the cell. */
int tf_cell_parse(const char *cell, tf_action out[2], int *count, tf_error *err);

/* Formats the cell that starts at action i of s, as PyTorch writes it: the
 * action ("0F3"), or the pair it begins ("(0F7;7B3)OVERLAP_F_B").  buf holds
 * TF_CELL_MAX bytes.  Returns the actions the cell covers: 1, or 2 for a
 * pair. */
int tf_schedule_format_cell(const tf_schedule *s, int i, char *buf);

/* Formats the pair (forward, backward) as PyTorch does,
 * "(0F7;7B3)OVERLAP_F_B", into buf[TF_CELL_MAX]; returns buf. */
char *tf_pair_format(const tf_action *forward, const tf_action *backward, char *buf);

/* Does s hold an overlapped pair? */
int tf_schedule_has_pairs(const tf_schedule *s);

/* How many actions of s are of `type`. */
int tf_schedule_count(const tf_schedule *s, tf_action_type type);

/* Does every rank of s run all its forwards before its first backward (B,
 * I or W), as GPipe and LoopedBFS do?  Recomputations do not count as
 * forwards. */
int tf_schedule_fills_then_drains(const tf_schedule *s);

/* Is `name` one of the built-in schedules?  Names: "GPipe", "1F1B",
 * "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble",
 * "DualPipeV". */
int tf_schedule_is_builtin(const char *name);

/* The official spelling of a built-in name given in any letter case
 * ("1f1b" -> "1F1B"), a static string; NULL when name is not built in. */
const char *tf_schedule_canonical_name(const char *name);

/* Stages per rank a schedule runs with unless told otherwise: 2 for
 * Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble and
 * DualPipeV, else 1 (GPipe, 1F1B, and names that are not built in). */
int tf_schedule_default_stages_per_rank(const char *name);

/* Space-separated list of the built-in names, for messages and --help. */
const char *tf_schedule_builtin_names(void);

/* Does the built-in schedule split backwards into I and W actions?
 * InterleavedZeroBubble and ZBVZeroBubble split every one; DualPipeV splits
 * some (the others are full B, some of them in overlapped pairs). */
int tf_schedule_splits_backward(const char *name);

/* The stage-to-rank mapping of a built-in schedule: looped (stage s on rank
 * s mod ranks) or, for ZBVZeroBubble and DualPipeV, the V shape (stage s on
 * rank s for s < ranks, else 2 ranks - 1 - s).  Returns the rank. */
int tf_schedule_stage_rank(const char *name, int ranks, int stages_per_rank, int stage);

/* Checks a pipeline's shape against the limits above: each count, the
 * stages (ranks x stages_per_rank) and the actions they make (stages x
 * microbatches x actions_per_pair: 2 for F and B, 3 for F, I and W), each
 * product formed without overflow.  Returns 0 or TF_EINVAL with a message
 * that names the counts and the limit passed, for the caller to prefix with
 * the file and field. */
int tf_schedule_check_size(int ranks, int stages_per_rank, int microbatches,
                           int actions_per_pair, tf_error *err);

/* Builds a built-in schedule with PyTorch's per-rank orders.  Checks the
 * counts the schedule needs (e.g. Interleaved1F1B needs stages_per_rank >= 2,
 * ZBVZeroBubble and DualPipeV exactly 2, microbatches >= 1; PyTorch's own
 * requirements on microbatches, such as DualPipeV's microbatches >= 2 x
 * ranks, are reported as TF_EINVAL with the reason), and the size
 * (tf_schedule_check_size).  On success *out owns its arrays (free with
 * tf_schedule_free).  On error *out is zeroed. */
int tf_schedule_build(const char *name, int ranks, int stages_per_rank, int microbatches,
                      tf_schedule *out, tf_error *err);

/* Explicit per-rank orders of cells ("0F3", ..., and pairs
 * "(0F7;7B3)OVERLAP_F_B", tf_cell_parse): rows[r][0..row_len[r]-1] is rank
 * r's order, for r < ranks.  The arrays are the caller's. */
typedef struct tf_cell_rows {
    const char *const *const *rows;
    const int *row_len;
    int ranks;
} tf_cell_rows;

/* Builds a schedule of `microbatches` microbatches from the orders in
 * cells.  Checks that every cell parses, stages and microbatches are in
 * range, no action repeats, each stage runs on exactly one rank, every
 * (stage, microbatch) has an F and either a B or both I and W (and not both
 * kinds).  stages_per_rank is derived as stages/ranks where stages = 1 + the
 * largest stage seen; `where` (e.g. "order" or a CSV path) prefixes
 * messages.  Does not check for deadlock: tf_dag_build does.  Returns 0 with
 * *out owning its arrays (tf_schedule_free), or TF_EINVAL naming the cell
 * and what is wrong (NULL cells or rows too), or TF_ENOMEM; *out is zeroed
 * on error. */
int tf_schedule_from_cells(const tf_cell_rows *cells, int microbatches, const char *where,
                           tf_schedule *out, tf_error *err);

/* What reading a CSV changed on the way in (tf_schedule_read_csv_noted). */
typedef struct tf_csv_notes {
    int old_backwards;        /* B cells in PyTorch's older notation read as I */
    char first_old[TF_CELL_MAX]; /* the first of them in the file, e.g. "2B0" */
} tf_csv_notes;

/* Reads PyTorch's compute-only schedule CSV (one row per rank, cells like
 * 0F3 or pairs (0F7;7B3)OVERLAP_F_B; empty cells are idle slots and
 * skipped) and builds the schedule as tf_schedule_from_cells does.
 * microbatches = 1 + the largest seen.  PyTorch's older notation, where B
 * meant backward-input and a later W of the same stage and microbatch its
 * weight part, is read as I + W (a B with a W and no I).  A file over
 * TF_MAX_CSV_BYTES is refused unread (tf_read_file_limit). */
int tf_schedule_read_csv(const char *path, tf_schedule *out, tf_error *err);

/* As tf_schedule_read_csv; notes (may be NULL) says what the older
 * notation changed, so that a program can tell its user. */
int tf_schedule_read_csv_noted(const char *path, tf_schedule *out, tf_csv_notes *notes,
                               tf_error *err);

/* The schedule as compute-only CSV text, the way PyTorch writes it (one row
 * per rank, pairs as "(0F7;7B3)OVERLAP_F_B"): *text malloc'd, *len bytes. */
int tf_schedule_csv_text(const tf_schedule *s, char **text, size_t *len, tf_error *err);

/* Writes tf_schedule_csv_text to path atomically. */
int tf_schedule_write_csv(const tf_schedule *s, const char *path, tf_error *err);

/* Index of action (type, stage, microbatch) in s->actions, or -1. O(n). */
int tf_schedule_find(const tf_schedule *s, tf_action_type type, int stage, int microbatch);

/* A table of s's actions by (type, stage, microbatch) for
 * tf_schedule_lookup: 4 x stages x microbatches ints, which the caller
 * frees.  NULL when out of memory. */
int *tf_schedule_index(const tf_schedule *s);

/* As tf_schedule_find, in O(1) through index from tf_schedule_index; with
 * index NULL, tf_schedule_find itself. */
int tf_schedule_lookup(const tf_schedule *s, const int *index, tf_action_type type, int stage,
                       int microbatch);

/* The backward of (stage, microbatch) that the previous stage waits for:
 * its B, or its I on a split stage; -1 if there is none.  index as for
 * tf_schedule_lookup. */
int tf_schedule_backward_of(const tf_schedule *s, const int *index, int stage, int microbatch);

/* The action on another rank whose output action i takes in (a message
 * between ranks): the previous stage's F for an F, the next stage's
 * backward (its B, else its I) for a B or an I.  -1 for a W, at the
 * pipeline's ends, and when the sender runs on i's own rank.  index as
 * for tf_schedule_lookup (NULL: searched). */
int tf_schedule_sender(const tf_schedule *s, const int *index, int i);

/* A copy of s with an R (recomputation, tf/memory.h) before every
 * backward of each stage st with recomputes[st] set: before its B, before
 * its I on a split stage, before the pair when the backward is half of
 * one.  Returns 0 with *out owning its arrays, or TF_ENOMEM (also when the
 * result would exceed TF_MAX_ACTIONS) with *out zeroed. */
int tf_schedule_insert_recompute(const tf_schedule *s, const unsigned char *recomputes,
                                 tf_schedule *out);

/* A copy of s holding only the actions i with keep[i] set, in s's order.
 * The caller keeps whole pairs and every F with its backward.  Returns 0
 * or TF_ENOMEM with *out zeroed. */
int tf_schedule_keep(const tf_schedule *s, const unsigned char *keep, tf_schedule *out);

/* Deep copy.  Returns 0 or TF_ENOMEM. */
int tf_schedule_copy(const tf_schedule *src, tf_schedule *dst);

/* Frees the arrays of s and zeroes it.  s may be zeroed already. */
void tf_schedule_free(tf_schedule *s);

#endif
