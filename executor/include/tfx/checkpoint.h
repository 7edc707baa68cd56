/* checkpoint.h - saving and resuming a training run.
 *
 * A checkpoint is one binary file DIR/tf-exec.ckpt ("TFXCKPT3") holding the
 * run's shape (model sizes, pipeline, seed, freeze selection), the number
 * of steps done, the rotate offsets of the freeze selector, every tensor's
 * parameters, AdamW moments and step count, under --freeze-select stable
 * every tensor's gradient statistics (freeze_select.h), and a 64-bit FNV-1a
 * checksum.  It is written atomically (temporary file + rename), so
 * a crash while saving leaves the previous checkpoint intact.  Data batches and random freeze
 * choices are functions of (seed, step), so a resumed run continues
 * bit-identically.  The format changes whenever what a run draws from a
 * seed changes (TFXCKPT3: the Threefry streams of tfx/rng.h), and files of
 * an older format are refused, naming both formats.
 */
#ifndef TFX_CHECKPOINT_H
#define TFX_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "tf/error.h"
#include "tfx/freeze_select.h"
#include "tfx/model.h"
#include "tfx/runtime.h"

typedef struct tfx_checkpoint_meta {
    tfx_model_config model;
    int stages, microbatches;
    uint64_t seed;
    int select_method;      /* tfx_select_method */
    char schedule[64];
    long step;              /* steps completed */
} tfx_checkpoint_meta;

/* The first 8 bytes of a checkpoint file of this version. */
#define TFX_CHECKPOINT_MAGIC "TFXCKPT3"

/* The checksum that ends a checkpoint file: 64-bit FNV-1a of every byte
 * before it (tools that edit a checkpoint, such as the tests, recompute it
 * with this). */
uint64_t tfx_checkpoint_checksum(const void *data, size_t len);

/* Path of the checkpoint file in dir (static buffer-free: writes to buf of
 * size n).  Returns buf. */
char *tfx_checkpoint_path(const char *dir, char *buf, size_t n);

/* Creates dir if needed and writes the checkpoint atomically.  Returns 0 or
 * TF_EIO / TF_ENOMEM with a message naming the path. */
int tfx_checkpoint_save(const char *dir, tfx_pipeline *p, const tfx_freeze_selector *sel,
                        const tfx_checkpoint_meta *meta, tf_error *err);

/* Loads DIR/tf-exec.ckpt into p and sel if it exists.  *found is 0 when there
 * is no checkpoint (then nothing changes and 0 is returned).  The stored
 * shape must equal *meta (all fields but step, which is ignored on entry): a
 * mismatch is TF_EINVAL naming the field and both values; a file of an
 * older format is TF_EINVAL naming its format and this one; a damaged file
 * (short, bad magic, checksum) is TF_EINVAL, and so is an intact one holding
 * a value out of range (a negative step or optimizer step count, a rotate
 * offset beyond its stage, a parameter or moment that is not finite, a
 * negative second moment, gradient statistics out of their ranges), named
 * with its field.  Nothing is loaded unless the whole file passes.  On
 * success with *found, meta->step gets the steps completed. */
int tfx_checkpoint_load(const char *dir, tfx_pipeline *p, tfx_freeze_selector *sel,
                        tfx_checkpoint_meta *meta, int *found, tf_error *err);

/* --init: loads only the parameters of DIR/tf-exec.ckpt into p, for a run
 * that starts from them with a fresh optimizer (every tensor's AdamW state
 * and step count as p has them, normally zero).  The checkpoint may come
 * from another pipeline shape (schedule, ranks, stages, microbatches,
 * microbatch size, seed): the tensors are stored in model order, whatever
 * the stages.  The model's sizes (layers, hidden, heads, ffn, context)
 * must match: a mismatch is TF_EINVAL naming the field and both values;
 * no checkpoint in DIR is TF_EIO; a damaged or invalid file is TF_EINVAL
 * as for tfx_checkpoint_load, and nothing is loaded. */
int tfx_checkpoint_load_weights(const char *dir, tfx_pipeline *p, tf_error *err);

#endif
