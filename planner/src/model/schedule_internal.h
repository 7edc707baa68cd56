/* schedule_internal.h - what schedule.c (built-in schedules) and
 * schedule_order.c (explicit orders) share.  Internal to the planner
 * library. */
#ifndef TF_SCHEDULE_INTERNAL_H
#define TF_SCHEDULE_INTERNAL_H

#include "tf/schedule.h"

/* Far beyond what the LP can solve, small enough that every count and every
 * index of a schedule fits in an int with room to spare. */
enum { TF_SCHEDULE_MAX_ACTIONS = 1 << 24 };

/* The blanks a cell may carry around it (CSV files, hand-written orders). */
static inline int tf_schedule_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

#endif
