/* schedule_internal.h - what schedule.c (built-in schedules) and
 * schedule_order.c (explicit orders) share.  Internal to the planner
 * library. */
#ifndef TF_SCHEDULE_INTERNAL_H
#define TF_SCHEDULE_INTERNAL_H

#include "tf/schedule.h"

/* Cells one CSV line may have, blank ones (idle slots) included: PyTorch's
 * CSV has a column per time step, so a rank's row may be mostly blanks, but
 * never more than a few times the actions there can be. */
enum { TF_SCHEDULE_MAX_CELLS = 4 * TF_MAX_ACTIONS };

/* The blanks a cell may carry around it (CSV files, hand-written orders). */
static inline int tf_schedule_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* tf_schedule_from_cells for the order of a plan, which may also hold R
 * actions (recomputation placed by tf-plan), each before the backward of
 * its stage and microbatch.  plan_json.c reads plans with it. */
int tf_schedule_from_plan_cells(const tf_cell_rows *cells, int microbatches, const char *where,
                                tf_schedule *out, tf_error *err);

#endif
