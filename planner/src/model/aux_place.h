/* aux_place.h - placing one rank's aux work in its windows (aux_place.c;
 * tf/aux.h says how).  Internal to the planner library. */
#ifndef TF_AUX_PLACE_H
#define TF_AUX_PLACE_H

#include "tf/aux.h"

/* One item on one rank: an aux work item, for one microbatch or the step. */
typedef struct tf_aux_item {
    int work;        /* index into the work list */
    int microbatch;  /* -1: once per step */
    double ready_ms; /* the end of the action it follows */
    double ms;
    int divisible;
} tf_aux_item;

typedef struct tf_aux_rank_input {
    int rank;
    tf_aux_item *items;     /* sorted here by ready time, stably */
    int n_items;
    const double *windows;  /* 2 x n_windows [start, end], in time order, in one step */
    int n_windows;
    double margin;          /* each window shortened by margin x its length, at its end */
    int max_steps;          /* steps tried before refresh_steps is given up as 0 */
} tf_aux_rank_input;

/* Places in's items into its windows: slices appended to out->slices
 * (*capacity entries allocated; grown here), the totals into
 * out->per_rank[in->rank].  Returns 0 or TF_ENOMEM. */
int tf_aux_place_rank(const tf_aux_rank_input *in, tf_aux_placement *out, int *capacity,
                      tf_error *err);

#endif
