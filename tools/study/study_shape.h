/* study_shape.h - reading a study's model shape and memory fields (private
 * to the study library: its types are cJSON's). */
#ifndef TF_STUDY_SHAPE_H
#define TF_STUDY_SHAPE_H

#include "json_util.h"
#include "study.h"

/* The model's shape fields, named in study_shape_fields (NULL-ended). */
extern const char *const study_shape_fields[];

/* Reads the shape fields of `model` (all optional; `hidden` turns the
 * shape on, and then `heads`, `sequence_length` and `microbatch_size` are
 * required) into s.  layer_parameters_given: the model gave
 * layer_parameters, which then win over the shape's count.  Fills
 * s->recompute and s->sequence_parallel (one value each without a shape:
 * "none", false) and, with a shape, the per-layer parameters (and the
 * embedding's and head's from vocab) unless given.  Returns 0, TF_EINVAL
 * (err names the field and value) or TF_ENOMEM. */
int study_parse_shape(const tfj_ctx *model_at, const cJSON *model, int layer_parameters_given,
                      tf_study *s, tf_error *err);

/* Reads the top level's gpu_memory_bytes and memory_headroom_bytes; a
 * memory limit without a shape is refused (nothing to count). */
int study_parse_gpu_memory(const tfj_ctx *root_at, const cJSON *root, tf_study *s,
                           tf_error *err);

#endif
