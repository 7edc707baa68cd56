/* tf-exec - trains a small byte-level language model on a pipeline with a
 * TimelyFreeze plan, or measures the profile tf-plan reads.  This file only
 * parses the command line; the work is in the tfexec library (tfx/exec.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/error.h"
#include "tf/schedule.h"
#include "tfx/exec.h"
#include "tfx/launch.h"
#include "tfx/registry.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tf-exec --profile-out profile.json [pipeline] [model] [options]\n"
            "       tf-exec --plan plan.json --steps N [model] [options]\n"
            "       tf-exec --schedule S --ranks P --microbatches M --steps N  (no freezing)\n"
            "\n"
            "pipeline:  --backend cpu|cuda  --schedule NAME (%s)\n"
            "           --ranks P  --stages-per-rank V  --microbatches M\n",
            tf_schedule_builtin_names());
    if (tfx_registry_has_backend("cuda"))
        fputs("cuda:      --devices LIST (GPU of each rank, e.g. 0,1,2,3; \"0\" puts every rank on\n"
              "           GPU 0, one stream each; default rank mod GPUs)\n"
              "           --transport cuda|nccl (cuda: in-process device copies, the default;\n"
              "           nccl: one GPU per rank, the default when launched)\n"
              "           --tf32 (TF32 tensor-core GEMMs, FP32 accumulation)\n",
              f);
    else
        fputs("cuda:      not built; reconfigure with -DTF_CUDA=ON where the CUDA Toolkit,\n"
              "           cuBLAS and NCCL are installed\n",
              f);
    fputs("model:     --layers L (4)  --hidden H (128)  --ffn F (4H)  --context T (64)\n"
          "           --microbatch-size B (8 sequences)  --lr X (0.003)\n"
          "training:  --steps N (60)  --warmup N (10)  --ramp N (10)  --no-freeze\n"
          "           --freeze-select random|rotate (random)  --seed S (1)\n"
          "           --freeze-ratio R (without a plan: freeze R on every backward)\n"
          "           --data FILE (default: built-in Markov corpus)  --log FILE (JSON lines)\n"
          "           --checkpoint DIR  --checkpoint-every N (10)  --progress auto|bar|lines\n"
          "profiling: --profile-out FILE  --profile-warmup N (3)  --profile-steps N (5)\n"
          "           --max-freeze-ratio R (0.9, written into the profile)\n"
          "cpu:       --transport local|socket (local: in-process, the default; socket: TCP,\n"
          "           the default when launched)\n"
          "launched:  one process per rank (or per block of ranks) when RANK/WORLD_SIZE,\n"
          "           OMPI_COMM_WORLD_*, PMI_* or SLURM_PROCID/SLURM_NTASKS say so (mpirun,\n"
          "           srun, by hand); processes meet in $TFX_RENDEZVOUS_DIR (/tmp) under\n"
          "           $TFX_RUN_ID; a silent peer fails the run after $TFX_TIMEOUT s (600);\n"
          "           $TFX_SOCKET_BIND / $TFX_SOCKET_HOST for several nodes; process 0\n"
          "           prints and writes --log / --profile-out; no --checkpoint\n",
          f);
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out, tf_error *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return tf_fail(err, TF_EINVAL, "%s \"%s\": expected an integer from %d to %d", flag, s,
                       lo, hi);
    *out = (int)v;
    return 0;
}

static int parse_double(const char *flag, const char *s, double lo, double hi, double *out,
                        tf_error *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return tf_fail(err, TF_EINVAL, "%s \"%s\": expected a number from %g to %g", flag, s,
                       lo, hi);
    *out = v;
    return 0;
}

/* Parses argv into o.  Returns 0, 1 for --help, or TF_EINVAL. */
static int parse_args(int argc, char **argv, tfx_exec_options *o, tf_error *err)
{
    int ffn_given = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help"))
            return 1;
        if (!strcmp(arg, "--no-freeze")) {
            o->no_freeze = 1;
            continue;
        }
        if (!strcmp(arg, "--tf32")) {
            o->tf32 = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0)
            return tf_fail(err, TF_EINVAL, "unexpected argument \"%s\" (see --help)", arg);
        /* Every other option takes a value: --name VALUE or --name=VALUE. */
        char name[64];
        const char *value;
        const char *eq = strchr(arg, '=');
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
            if (i + 1 >= argc)
                return tf_fail(err, TF_EINVAL, "%s: missing value", arg);
            value = argv[++i];
        }
        double d;
        if (!strcmp(name, "--backend")) o->backend = value;
        else if (!strcmp(name, "--devices")) o->devices = value;
        else if (!strcmp(name, "--transport")) o->transport = value;
        else if (!strcmp(name, "--schedule")) o->schedule = value;
        else if (!strcmp(name, "--plan")) o->plan_path = value;
        else if (!strcmp(name, "--profile-out")) o->profile_out = value;
        else if (!strcmp(name, "--log")) o->log_path = value;
        else if (!strcmp(name, "--data")) o->data_path = value;
        else if (!strcmp(name, "--checkpoint")) o->checkpoint_dir = value;
        else if (!strcmp(name, "--ranks")) rc = parse_int(name, value, 1, 1024, &o->ranks, err);
        else if (!strcmp(name, "--stages-per-rank"))
            rc = parse_int(name, value, 1, 64, &o->stages_per_rank, err);
        else if (!strcmp(name, "--microbatches"))
            rc = parse_int(name, value, 1, 4096, &o->microbatches, err);
        else if (!strcmp(name, "--steps")) rc = parse_int(name, value, 0, INT_MAX - 1, &o->steps, err);
        else if (!strcmp(name, "--warmup")) rc = parse_int(name, value, 0, INT_MAX - 1, &o->warmup, err);
        else if (!strcmp(name, "--ramp")) rc = parse_int(name, value, 0, INT_MAX - 1, &o->ramp, err);
        else if (!strcmp(name, "--checkpoint-every"))
            rc = parse_int(name, value, 0, INT_MAX, &o->checkpoint_every, err);
        else if (!strcmp(name, "--layers")) rc = parse_int(name, value, 1, 65536, &o->model.layers, err);
        else if (!strcmp(name, "--hidden")) rc = parse_int(name, value, 1, 65536, &o->model.hidden, err);
        else if (!strcmp(name, "--ffn")) {
            rc = parse_int(name, value, 1, 65536, &o->model.ffn, err);
            ffn_given = 1;
        } else if (!strcmp(name, "--context"))
            rc = parse_int(name, value, 1, 65536, &o->model.context, err);
        else if (!strcmp(name, "--microbatch-size"))
            rc = parse_int(name, value, 1, 65536, &o->model.microbatch_size, err);
        else if (!strcmp(name, "--profile-warmup"))
            rc = parse_int(name, value, 0, 1000, &o->profile_warmup, err);
        else if (!strcmp(name, "--profile-steps"))
            rc = parse_int(name, value, 1, 1000, &o->profile_steps, err);
        else if (!strcmp(name, "--seed")) {
            rc = parse_double(name, value, 0, 9007199254740992.0, &d, err);
            o->seed = (uint64_t)d;
        } else if (!strcmp(name, "--lr")) {
            rc = parse_double(name, value, 0, 10, &d, err);
            o->adamw.lr = (float)d;
        } else if (!strcmp(name, "--freeze-ratio"))
            rc = parse_double(name, value, 0, 1, &o->freeze_ratio, err);
        else if (!strcmp(name, "--max-freeze-ratio"))
            rc = parse_double(name, value, 0, 1, &o->max_freeze_ratio, err);
        else if (!strcmp(name, "--freeze-select"))
            rc = tfx_select_method_parse(value, &o->select, err);
        else if (!strcmp(name, "--progress")) {
            if (!strcmp(value, "auto")) o->progress = -1;
            else if (!strcmp(value, "bar")) o->progress = 1;
            else if (!strcmp(value, "lines")) o->progress = 0;
            else rc = tf_fail(err, TF_EINVAL, "--progress \"%s\": expected auto, bar or lines", value);
        } else if (!strcmp(name, "--inject-failure")) {
            /* testing: RANK:ACTION makes that rank fail before its ACTION-th action */
            if (sscanf(value, "%d:%d", &o->fail_rank, &o->fail_action) != 2)
                rc = tf_fail(err, TF_EINVAL, "--inject-failure \"%s\": expected RANK:ACTION", value);
        } else
            return tf_fail(err, TF_EINVAL, "unknown option %s (see --help)", name);
        if (rc < 0)
            return rc;
    }
    if (!ffn_given)
        o->model.ffn = 4 * o->model.hidden > 65536 ? 65536 : 4 * o->model.hidden;
    if (o->plan_path && o->freeze_ratio > 0)
        return tf_fail(err, TF_EINVAL, "--plan and --freeze-ratio: give one of them");
    if (o->plan_path && o->profile_out)
        return tf_fail(err, TF_EINVAL, "--plan and --profile-out: give one of them");
    return 0;
}

int main(int argc, char **argv)
{
    tfx_exec_options o;
    tf_error err = {0};
    tfx_exec_options_default(&o);
    /* Exit status as tf-plan's: 1 invalid input, 2 usage, 3 a failed run. */
    int rc = parse_args(argc, argv, &o, &err);
    if (rc == 1) {
        usage(stdout);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "tf-exec: error: %s\n", err.msg[0] ? err.msg : tf_strerror(rc));
        return 2;
    }
    /* Started by a launcher (mpirun, srun, RANK/WORLD_SIZE by hand)?  One
     * process of several runs only its own ranks. */
    if (tfx_launch_env_read(&o.launch, &err) < 0) {
        fprintf(stderr, "tf-exec: error: %s\n", err.msg);
        return 2;
    }
    char who[64] = "tf-exec";
    if (o.launch.world_size > 1)
        snprintf(who, sizeof who, "tf-exec (process %d of %d)", o.launch.rank,
                 o.launch.world_size);
    rc = o.profile_out ? tfx_exec_profile(&o, &err) : tfx_exec_train(&o, NULL, &err);
    if (rc < 0) {
        fflush(stdout);
        fprintf(stderr, "%s: error: %s\n", who, err.msg[0] ? err.msg : tf_strerror(rc));
        return rc == TF_ERUNTIME ? 3 : 1;
    }
    return 0;
}
