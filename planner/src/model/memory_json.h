/* memory_json.h - a stage's memory fields (tf/memory.h) in JSON
 * (memory_json.c): the one reader and writer of profile.json's and
 * plan.json's byte fields.  Internal to the planner library. */
#ifndef TF_MEMORY_JSON_H
#define TF_MEMORY_JSON_H

#include "json_util.h"
#include "tf/memory.h"

/* Reads the memory fields of stage object o at ctx into *m (all optional:
 * absent bytes are 0, activation_frozen_bytes and weight_grad_bytes default
 * to activation_bytes).  *given is 1 when o names static_bytes or
 * activation_bytes, which make a file one with memory.  TF_EINVAL naming
 * the field for a negative or non-numeric value, an activation_frozen_bytes
 * or checkpoint_bytes above activation_bytes, a field that needs
 * activation_bytes without it, and checkpoint_bytes without recompute_ms or
 * the reverse. */
int tf_stage_memory_parse(const tfj_ctx *ctx, const cJSON *o, tf_stage_memory *m, int *given,
                          tf_error *err);

/* Reads a memory limit, value v at ctx: one number for every rank, or an
 * array of one per rank, each in [1, TF_MAX_BYTES], into *limit (malloc'd,
 * ranks entries; the caller frees it).  TF_EINVAL naming the field for an
 * array of another length or a bad number, TF_ENOMEM. */
int tf_memory_limit_parse(const tfj_ctx *ctx, const cJSON *v, int ranks, double **limit,
                          tf_error *err);

/* Adds a memory limit under key of o: one number when every rank has the
 * same limit, else one per rank (what tf_memory_limit_parse reads). */
void tf_memory_limit_to_json(cJSON *o, const char *key, const double *limit, int ranks);

/* Adds m's fields to object o (the recomputation pair only when the stage
 * recomputes, the I's transient only when it is above 0). */
void tf_stage_memory_to_json(const tf_stage_memory *m, cJSON *o);

#endif
