/* study_shape.h - reading a study's model shape and memory fields (private
 * to the study library: its types are cJSON's). */
#ifndef TF_STUDY_SHAPE_H
#define TF_STUDY_SHAPE_H

#include "json_util.h"
#include "study.h"

/* The model's memory fields (NULL-ended lists): those of its shape, those
 * of measured bytes (study_measured.c), and those either source takes
 * (recompute, bytes per parameter). */
extern const char *const study_shape_fields[];
extern const char *const study_measured_fields[];
extern const char *const study_bytes_fields[];

/* Reads where the model's bytes come from and the fields of that source
 * into s: the shape (`hidden` turns it on, and then `heads`,
 * `sequence_length` and `microbatch_size` are required) or measured bytes
 * (`activation_bytes_per_layer` turns them on: study_parse_measured); not
 * both, and no field of a source not given.  layer_parameters_given: the
 * model gave layer_parameters, which then win over the shape's count and
 * let measured bytes use bytes_per_parameter.  Fills s->recompute and
 * s->sequence_parallel (one value each without bytes: "none", false) and,
 * with a shape, the per-layer parameters (and the embedding's and head's
 * from vocab) unless given.  Returns 0, TF_EINVAL (err names the field and
 * value) or TF_ENOMEM. */
int study_parse_shape(const tfj_ctx *model_at, const cJSON *model, int layer_parameters_given,
                      tf_study *s, tf_error *err);

/* Reads measured bytes per layer into s->measured (activation_frozen and
 * weight_grad default to the activation, the checkpoint to 0),
 * s->measured_static (static_bytes_per_layer; -1 when absent, and then
 * the model must give layer_parameters and bytes_per_parameter applies)
 * and the first and last stage's extra bytes.  s->recompute must be read:
 * "selective" is refused, "full" and "auto" need
 * checkpoint_bytes_per_layer.  Returns 0 or TF_EINVAL (err names the field
 * and value: negative, not a number, frozen bytes or a checkpoint above
 * the activation, static bytes given both ways). */
int study_parse_measured(const tfj_ctx *model_at, const cJSON *model,
                         int layer_parameters_given, tf_study *s, tf_error *err);

/* Reads the top level's gpu_memory_bytes and memory_headroom_bytes; a
 * memory limit without bytes (shape or measured) is refused. */
int study_parse_gpu_memory(const tfj_ctx *root_at, const cJSON *root, tf_study *s,
                           tf_error *err);

#endif
