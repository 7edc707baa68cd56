/* schedule_edit.c - schedules changed after they are built: recomputation
 * (R actions) placed before the backwards it serves, and actions dropped. */
#include <stdlib.h>
#include <string.h>

#include "tf/schedule.h"

/* An empty copy of s's shape for at most n actions. */
static int alloc_like(const tf_schedule *s, int n, tf_schedule *out)
{
    memset(out, 0, sizeof *out);
    *out = *s;
    out->n_actions = 0;
    out->actions = calloc((size_t)n + 1, sizeof *out->actions);
    out->rank_offset = calloc((size_t)s->ranks + 1, sizeof *out->rank_offset);
    out->stage_rank = calloc((size_t)s->stages + 1, sizeof *out->stage_rank);
    if (!out->actions || !out->rank_offset || !out->stage_rank) {
        tf_schedule_free(out);
        return TF_ENOMEM;
    }
    memcpy(out->stage_rank, s->stage_rank, (size_t)s->stages * sizeof *s->stage_rank);
    return 0;
}

/* Where an R for action i goes: before i itself when i is a backward
 * that waits for the next stage's gradient (B, or the I of a split
 * stage), before the pair when i is the second half of one.  -1: none. */
static int recompute_slot(const tf_schedule *s, int i, const unsigned char *recomputes)
{
    const tf_action *a = &s->actions[i];
    if ((a->type != TF_ACT_B && a->type != TF_ACT_I) || !recomputes[a->stage])
        return -1;
    return a->pair == TF_PAIR_SECOND ? i - 1 : i;
}

int tf_schedule_insert_recompute(const tf_schedule *s, const unsigned char *recomputes,
                                 tf_schedule *out)
{
    int extra = 0;
    for (int i = 0; i < s->n_actions; i++)
        extra += recompute_slot(s, i, recomputes) >= 0;
    if (s->n_actions + extra > TF_MAX_ACTIONS || alloc_like(s, s->n_actions + extra, out))
        return TF_ENOMEM;
    /* before[i]: the action whose R goes right before action i. */
    int *before = malloc(((size_t)s->n_actions + 1) * sizeof *before);
    if (!before) {
        tf_schedule_free(out);
        return TF_ENOMEM;
    }
    for (int i = 0; i < s->n_actions; i++)
        before[i] = -1;
    for (int i = 0; i < s->n_actions; i++) {
        int slot = recompute_slot(s, i, recomputes);
        if (slot >= 0)
            before[slot] = i;
    }
    int n = 0;
    for (int r = 0; r < s->ranks; r++) {
        out->rank_offset[r] = n;
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++) {
            if (before[i] >= 0) {
                out->actions[n] = s->actions[before[i]];
                out->actions[n].type = TF_ACT_R;
                out->actions[n++].pair = TF_PAIR_NONE;
            }
            out->actions[n++] = s->actions[i];
        }
    }
    out->rank_offset[s->ranks] = n;
    out->n_actions = n;
    free(before);
    return 0;
}

int tf_schedule_keep(const tf_schedule *s, const unsigned char *keep, tf_schedule *out)
{
    if (alloc_like(s, s->n_actions, out))
        return TF_ENOMEM;
    int n = 0;
    for (int r = 0; r < s->ranks; r++) {
        out->rank_offset[r] = n;
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
            if (keep[i])
                out->actions[n++] = s->actions[i];
    }
    out->rank_offset[s->ranks] = n;
    out->n_actions = n;
    return 0;
}
