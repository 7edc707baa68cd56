/* profile.c - tf-exec --profile-out: measures every action of the schedule
 * unfrozen and fully frozen and writes a profile tf-plan reads (see
 * exec.h). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "measure.h"
#include "tf/util.h"

/* After the timed steps, as many with every block of every forward
 * recomputed: the checkpoint bytes and the recomputation time (their
 * action times stay out of the profile's). */
static int measure_recompute(tfx_exec_run *r, tfx_measure *m, long step, tf_error *err)
{
    int rc = 0;
    const tfx_model_layout *l = tfx_pipeline_layout(r->p);
    const int M = r->microbatches, S = l->stages;
    int *blocks = NULL;
    TFX_CALLOC(blocks, (size_t)S * M);
    for (int st = 0; st < S; st++)
        for (int mb = 0; mb < M; mb++)
            blocks[st * M + mb] = tfx_model_stage_blocks(l, st);
    r->recompute_blocks = blocks;
    tfx_step_result res;
    for (int k = 0; k < m->steps; k++, step++) {
        TFX_TRY(tfx_exec_run_step(r, step, NULL, &res, err));
        tfx_measure_add_recompute(m, r->p);
    }
fail:
    r->recompute_blocks = NULL;
    free(blocks);
    return rc;
}

/* Warms up, then alternates unfrozen and fully frozen steps so that slow
 * drifts (frequency, other load) affect both measurements alike. */
static int measure(tfx_exec_run *r, tfx_measure *m, tf_error *err)
{
    int rc = 0;
    const tfx_model_layout *l = tfx_pipeline_layout(r->p);
    const size_t mask_bytes = (size_t)r->microbatches * l->n_tensors;
    unsigned char *all_frozen = NULL;
    TFX_CALLOC(all_frozen, mask_bytes);
    memset(all_frozen, 1, mask_bytes);
    long step = 0;
    tfx_step_result res;
    for (int w = 0; w < r->o->profile_warmup; w++, step++)
        TFX_TRY(tfx_exec_run_step(r, step, NULL, &res, err));
    for (int k = 0; k < m->steps; k++) {
        for (int f = 0; f < 2; f++, step++) {
            TFX_TRY(tfx_exec_run_step(r, step, f ? all_frozen : NULL, &res, err));
            tfx_measure_add(m, r->p, f, &res);
        }
    }
    TFX_TRY(measure_recompute(r, m, step, err));
fail:
    free(all_frozen);
    return rc;
}

static int check_options(const tfx_exec_options *o, tf_error *err)
{
    if (o->profile_steps < 1 || o->profile_warmup < 0)
        return tf_fail(err, TF_EINVAL, "--profile-steps %d / --profile-warmup %d: need >= 1 / >= 0",
                       o->profile_steps, o->profile_warmup);
    if (!(o->max_freeze_ratio >= 0.0 && o->max_freeze_ratio <= 1.0))
        return tf_fail(err, TF_EINVAL, "--max-freeze-ratio %g: must be in [0, 1]",
                       o->max_freeze_ratio);
    return 0;
}

int tfx_exec_profile(const tfx_exec_options *o, tf_error *err)
{
    int rc = 0;
    tfx_exec_run r = {0};
    tf_profile prof = {0};
    tfx_measure m = {0};
    TFX_TRY(check_options(o, err));
    TFX_TRY(tfx_exec_check_writable(o, "--profile-out", o->profile_out, err));
    TFX_TRY(tfx_exec_options_schedule(o, &r.sched, err));
    TFX_TRY(tfx_exec_run_open(&r, o, err));
    TFX_TRY(tfx_measure_init(&m, &r.sched, o->profile_steps, err));

    tfx_exec_run_describe(&r, "profiling");
    fprintf(r.out, " (%s backend)\n", o->backend);
    TFX_TRY(measure(&r, &m, err));
    TFX_TRY(tfx_measure_profile(&m, &r, &prof, err));
    /* Launched: every process has every action's times; process 0 writes. */
    if (!tfx_exec_launched(o) || o->launch.rank == 0) {
        TFX_TRY(tf_profile_save(&prof, o->profile_out, err));
        fprintf(r.out, "wrote %s (%d actions, median of %d %s each, unfrozen and frozen)\n",
                o->profile_out, r.sched.n_actions, m.steps, tf_plural(m.steps, "step", "steps"));
    }
fail:
    tfx_exec_run_close(&r, rc, err);
    tfx_measure_free(&m);
    tf_profile_free(&prof);
    return rc;
}
