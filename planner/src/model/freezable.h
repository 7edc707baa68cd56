/* freezable.h - which actions a plan may freeze (freezable.c).  Internal to
 * the planner library: the plan's statistics and both solvers ask it, so
 * that they count the same actions. */
#ifndef TF_FREEZABLE_H
#define TF_FREEZABLE_H

#include "tf/memory.h"
#include "tf/schedule.h"

/* 1 if action a, unfrozen max_ms and fully frozen min_ms long, has a freeze
 * ratio to choose: a B or W whose frozen time is below its full time; 0
 * for F and I (their work is not a weight gradient) and for fixed times. */
int tf_action_freezable(const tf_action *a, double max_ms, double min_ms);

/* out[i] for every action of s: tf_action_freezable, or, with a memory
 * model whose limit binds (NULL: none), an action whose freeze ratio
 * lowers its rank's bytes (a stage whose frozen backward keeps less), even
 * when it takes as long frozen: such a ratio buys memory, not time. */
void tf_freezable_mark(const tf_schedule *s, const double *max_ms, const double *min_ms,
                       const tf_memory_model *memory, unsigned char *out);

#endif
