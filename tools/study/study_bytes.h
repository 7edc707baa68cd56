/* study_bytes.h - a configuration's bytes per stage and the row's memory
 * figures (private to the study library). */
#ifndef TF_STUDY_BYTES_H
#define TF_STUDY_BYTES_H

#include "study.h"
#include "tf/plan.h"

/* The bytes of every stage of configuration c (stages, layers
 * first_layer[k] .. first_layer[k + 1] - 1 on stage k) into out[stages]:
 * with layers_only 0 everything the stage holds (static bytes: measured
 * per layer, or of its parameters, with a shape plus p2p buffers; its
 * layers' activations; the embedding's, or the first stage's measured
 * extra, on the first stage and the output layer's, or the last stage's
 * extra, on the last); with layers_only 1 the transformer layers'
 * activations alone (what peak_activation counts).  Under "auto"
 * recomputation a stage may recompute its layers (checkpoint and the
 * layers' forward time).  The study must have bytes (a shape or measured
 * ones). */
void study_stage_bytes(const tf_study *s, const tf_study_config *c, const int *first_layer,
                       int stages, int layers_only, tf_stage_memory *out);

/* Under "full" recomputation every backward re-runs its layers' forward:
 * adds the stage's layer forward time to its B (frozen too) and I. */
void study_full_recompute_times(const tf_study *s, const int *first_layer, int stages,
                                tf_stage_times *st);

/* The row's memory figures from a plan made with the study's bytes:
 * peak_memory_bytes (the plan's largest per-rank peak),
 * peak_activation_bytes (layers[] the layers-only bytes, through the same
 * liveness), and, where the plan had a limit, whether fitting needed
 * freezing or recomputation.  Returns 0 or TF_ENOMEM. */
int study_memory_figures(const tf_plan *plan, const tf_stage_memory *layers, tf_study_row *row,
                         tf_error *err);

#endif
