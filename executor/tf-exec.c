/* tf-exec - trains a small byte-level GPT on a pipeline with a
 * TimelyFreeze plan, or measures the profile tf-plan reads.  This file only
 * parses the command line; the work is in the tfexec library (tfx/exec.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
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
            "       tf-exec --auto-plan --steps N [pipeline] [model] [options]  (measure,\n"
            "               plan and train in one run)\n"
            "       tf-exec --schedule S --ranks P --microbatches M --steps N  (no freezing)\n"
            "\n"
            "pipeline:  --backend cpu|cuda  --schedule NAME (%s)\n"
            "           --ranks P  --stages-per-rank V  --microbatches M\n"
            "           --schedule-csv FILE (a per-rank order: PyTorch compute-only CSV)\n",
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
    fputs("model:     --layers L (4)  --hidden C (192)  --heads A (C/32)  --ffn F (4C)\n"
          "           --context T (64)  --microbatch-size B (8 sequences)  --lr X (0.003)\n"
          "training:  --steps N (60)  --warmup N (10)  --ramp N (10)  --no-freeze\n"
          "           --freeze-select random|rotate (random)  --seed S (1)\n"
          "           --freeze-ratio R (without a plan: freeze R on every backward)\n"
          "           --freeze-rescale (scale a tensor frozen in k of M microbatches by\n"
          "           M/(M-k): the mean gradient of the others, not a shrunk sum)\n"
          "data:      --data FILE (any bytes) or --source base|shifted (built-in order-2\n"
          "           sources; shifted is base with a quarter of its pairs redrawn)\n"
          "           5% held out: --eval-every N (0: after the last step)\n"
          "           --eval-batches K (4)\n"
          "weights:   --init DIR (start from that checkpoint's weights: fine-tuning)\n"
          "           --checkpoint DIR  --checkpoint-every N (10)\n"
          "output:    --log FILE (JSON lines)  --progress auto|bar|lines\n"
          "profiling: --profile-out FILE  --profile-warmup N (3)  --profile-steps N (5)\n"
          "           --max-freeze-ratio R (0.9, written into the profile)\n"
          "auto-plan: --auto-plan: --warmup steps unfrozen, --profile-steps unfrozen and as\n"
          "           many fully frozen (alternating), the LP solved in the run, the plan's\n"
          "           ratios ramped in over --ramp steps, then training with the plan\n"
          "           --plan-out FILE (the plan in use)  --profile-out FILE (its profile)\n"
          "           --objective least-freeze|spread  --solver auto|lp_solve|fast\n"
          "           --max-action-ratio R (tf-plan's)\n"
          "           re-plan when a stage's actions drift from the plan by more than\n"
          "           --replan-threshold X (0.1; 0: never) for --replan-patience N (3)\n"
          "           steps, at least --replan-interval N (20) steps after the last plan,\n"
          "           measuring --replan-steps N (2) steps of each kind\n"
          "testing:   --inject-failure RANK:ACTION (that rank fails before that action)\n"
          "           --test-slow-rank RANK:FACTOR[:STEP] (from STEP on, 1 by default, the\n"
          "           rank's actions take FACTOR times their compute time)\n"
          "cpu:       --transport local|socket (local: in-process, the default; socket: TCP,\n"
          "           the default when launched)\n"
          "launched:  one process per rank (or per block of ranks) when RANK/WORLD_SIZE,\n"
          "           OMPI_COMM_WORLD_*, PMI_* or SLURM_PROCID/SLURM_NTASKS say so (mpirun,\n"
          "           srun, by hand); processes meet in $TFX_RENDEZVOUS_DIR (/tmp) under\n"
          "           $TFX_RUN_ID; a silent peer fails the run after $TFX_TIMEOUT s (600);\n"
          "           $TFX_SOCKET_BIND / $TFX_SOCKET_HOST for several nodes; process 0\n"
          "           prints and writes --log / --profile-out; no --checkpoint\n"
          "other:     -h, --help (this text)  --version\n",
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

static int parse_seed(tfx_exec_options *o, const char *flag, const char *value, tf_error *err)
{
    double d = 0.0;
    int rc = parse_double(flag, value, 0, 9007199254740992.0, &d, err);
    if (rc == 0)
        o->seed = (uint64_t)d;
    return rc;
}

static int parse_lr(tfx_exec_options *o, const char *flag, const char *value, tf_error *err)
{
    double d = 0.0;
    int rc = parse_double(flag, value, 0, 10, &d, err);
    if (rc == 0)
        o->adamw.lr = (float)d;
    return rc;
}

static int parse_select(tfx_exec_options *o, const char *flag, const char *value,
                        tf_error *err)
{
    (void)flag;
    return tfx_select_method_parse(value, &o->select, err);
}

static int parse_progress(tfx_exec_options *o, const char *flag, const char *value,
                          tf_error *err)
{
    (void)flag;
    if (!strcmp(value, "auto"))
        o->progress = -1;
    else if (!strcmp(value, "bar"))
        o->progress = 1;
    else if (!strcmp(value, "lines"))
        o->progress = 0;
    else
        return tf_fail(err, TF_EINVAL, "--progress \"%s\": expected auto, bar or lines", value);
    return 0;
}

static int parse_objective(tfx_exec_options *o, const char *flag, const char *value,
                           tf_error *err)
{
    if (tf_objective_parse(value, &o->objective) == 0)
        return 0;
    return tf_fail(err, TF_EINVAL, "%s \"%s\": expected least-freeze or spread", flag, value);
}

/* parse_double's range, but 0 excluded: a cap of 0 on each action would
 * leave nothing to plan. */
static int parse_action_cap(tfx_exec_options *o, const char *flag, const char *value,
                            tf_error *err)
{
    double v = 0.0;
    if (parse_double(flag, value, 0.0, 1.0, &v, err) < 0 || v == 0.0)
        return tf_fail(err, TF_EINVAL, "%s \"%s\": expected a number in (0, 1]", flag, value);
    o->max_action_ratio = v;
    return 0;
}

static int parse_solver(tfx_exec_options *o, const char *flag, const char *value,
                        tf_error *err)
{
    if (tf_solver_parse(value, &o->solver) == 0)
        return 0;
    return tf_fail(err, TF_EINVAL, "%s: unknown solver \"%s\" (auto, lp_solve, fast)", flag,
                   value);
}

/* Testing: RANK:FACTOR[:STEP] stretches that rank's compute by FACTOR from
 * step STEP (1-based, default 1) on. */
static int parse_slow(tfx_exec_options *o, const char *flag, const char *value, tf_error *err)
{
    int rank = -1, from = 1, used = 0;
    double factor = 0.0;
    int n = sscanf(value, "%d:%lf%n:%d%n", &rank, &factor, &used, &from, &used);
    if (n < 2 || value[used] != '\0' || rank < 0 || !(factor >= 1.0 && factor <= 1000.0) ||
        from < 1)
        return tf_fail(err, TF_EINVAL,
                       "%s \"%s\": expected RANK:FACTOR[:STEP] (FACTOR from 1 to 1000, STEP >= "
                       "1)",
                       flag, value);
    o->slow_rank = rank;
    o->slow_factor = factor;
    o->slow_from = from;
    return 0;
}

/* Testing: RANK:ACTION makes that rank fail before its ACTION-th action. */
static int parse_failure(tfx_exec_options *o, const char *flag, const char *value,
                         tf_error *err)
{
    (void)flag;
    if (sscanf(value, "%d:%d", &o->fail_rank, &o->fail_action) != 2)
        return tf_fail(err, TF_EINVAL, "--inject-failure \"%s\": expected RANK:ACTION", value);
    return 0;
}

typedef enum { ARG_TEXT, ARG_INT, ARG_REAL, ARG_OWN } arg_kind;

/* An option with a value, and the field of tfx_exec_options it sets. */
typedef struct value_option {
    const char *name;
    arg_kind kind;
    size_t field;  /* TEXT: a const char *, INT: an int, REAL: a double */
    double lo, hi; /* INT and REAL: the range accepted */
    int (*parse)(tfx_exec_options *o, const char *flag, const char *value, tf_error *err);
    int auto_only; /* means something only with --auto-plan */
} value_option;

#define TEXT(name, f) {name, ARG_TEXT, offsetof(tfx_exec_options, f), 0, 0, NULL, 0}
#define INT(name, f, lo, hi) {name, ARG_INT, offsetof(tfx_exec_options, f), lo, hi, NULL, 0}
#define REAL(name, f, lo, hi) {name, ARG_REAL, offsetof(tfx_exec_options, f), lo, hi, NULL, 0}
#define OWN(name, fn) {name, ARG_OWN, 0, 0, 0, fn, 0}
/* Options of --auto-plan. */
#define AUTO_TEXT(name, f) {name, ARG_TEXT, offsetof(tfx_exec_options, f), 0, 0, NULL, 1}
#define AUTO_INT(name, f, lo, hi) {name, ARG_INT, offsetof(tfx_exec_options, f), lo, hi, NULL, 1}
#define AUTO_REAL(name, f, lo, hi) {name, ARG_REAL, offsetof(tfx_exec_options, f), lo, hi, NULL, 1}
#define AUTO_OWN(name, fn) {name, ARG_OWN, 0, 0, 0, fn, 1}

static const value_option value_options[] = {
    TEXT("backend", backend),
    TEXT("devices", devices),
    TEXT("transport", transport),
    TEXT("schedule", schedule),
    TEXT("schedule-csv", schedule_csv),
    TEXT("plan", plan_path),
    TEXT("profile-out", profile_out),
    TEXT("log", log_path),
    TEXT("data", data_path),
    TEXT("source", source),
    TEXT("init", init_dir),
    TEXT("checkpoint", checkpoint_dir),
    INT("ranks", ranks, 1, 1024),
    INT("stages-per-rank", stages_per_rank, 1, 64),
    INT("microbatches", microbatches, 1, 4096),
    INT("steps", steps, 0, INT_MAX - 1),
    INT("warmup", warmup, 0, INT_MAX - 1),
    INT("ramp", ramp, 0, INT_MAX - 1),
    INT("checkpoint-every", checkpoint_every, 0, INT_MAX),
    INT("layers", model.layers, 1, 65536),
    INT("hidden", model.hidden, 1, 65536),
    INT("heads", model.heads, 1, 65536),
    INT("ffn", model.ffn, 1, 65536),
    INT("context", model.context, 1, 65536),
    INT("microbatch-size", model.microbatch_size, 1, 65536),
    INT("eval-every", eval_every, 0, INT_MAX),
    INT("eval-batches", eval_batches, 1, 1000),
    INT("profile-warmup", profile_warmup, 0, 1000),
    INT("profile-steps", profile_steps, 1, 1000),
    OWN("seed", parse_seed),
    OWN("lr", parse_lr),
    REAL("freeze-ratio", freeze_ratio, 0, 1),
    REAL("max-freeze-ratio", max_freeze_ratio, 0, 1),
    OWN("freeze-select", parse_select),
    OWN("progress", parse_progress),
    OWN("inject-failure", parse_failure),
    OWN("test-slow-rank", parse_slow),
    AUTO_TEXT("plan-out", plan_out),
    AUTO_OWN("objective", parse_objective),
    AUTO_OWN("solver", parse_solver),
    AUTO_OWN("max-action-ratio", parse_action_cap),
    AUTO_REAL("replan-threshold", replan_threshold, 0, 100),
    AUTO_INT("replan-patience", replan_patience, 1, INT_MAX),
    AUTO_INT("replan-interval", replan_interval, 1, INT_MAX),
    AUTO_INT("replan-steps", replan_steps, 1, 1000),
};

enum {
    N_VALUE_OPTIONS = sizeof value_options / sizeof value_options[0],
    OPT_NO_FREEZE = 256,
    OPT_TF32,
    OPT_FREEZE_RESCALE,
    OPT_AUTO_PLAN,
    OPT_VERSION,
    OPT_VALUE /* + index into value_options */
};

/* getopt_long's table: the N_FLAGS flags, then every option with a value. */
enum { N_FLAGS = 6 };

static void long_options(struct option *out)
{
    out[0] = (struct option){"help", no_argument, NULL, 'h'};
    out[1] = (struct option){"no-freeze", no_argument, NULL, OPT_NO_FREEZE};
    out[2] = (struct option){"tf32", no_argument, NULL, OPT_TF32};
    out[3] = (struct option){"freeze-rescale", no_argument, NULL, OPT_FREEZE_RESCALE};
    out[4] = (struct option){"auto-plan", no_argument, NULL, OPT_AUTO_PLAN};
    out[5] = (struct option){"version", no_argument, NULL, OPT_VERSION};
    for (int i = 0; i < N_VALUE_OPTIONS; i++)
        out[N_FLAGS + i] = (struct option){value_options[i].name, required_argument, NULL,
                                           OPT_VALUE + i};
    out[N_FLAGS + N_VALUE_OPTIONS] = (struct option){NULL, 0, NULL, 0};
}

static int set_value(tfx_exec_options *o, const value_option *v, const char *value,
                     tf_error *err)
{
    char flag[64];
    char *field = (char *)o + v->field;
    snprintf(flag, sizeof flag, "--%s", v->name);
    switch (v->kind) {
    case ARG_TEXT: *(const char **)field = value; return 0;
    case ARG_INT: return parse_int(flag, value, (int)v->lo, (int)v->hi, (int *)field, err);
    case ARG_REAL: return parse_double(flag, value, v->lo, v->hi, (double *)field, err);
    default: return v->parse(o, flag, value, err);
    }
}

/* getopt_long refused argv[optind - 1]: c is ':' for a missing value, '?'
 * for an unknown option or a flag given a value. */
static int refuse(int c, const char *arg, tf_error *err)
{
    if (c == ':')
        return tf_fail(err, TF_EINVAL, "%s: missing value", arg);
    if (optopt >= OPT_NO_FREEZE)
        return tf_fail(err, TF_EINVAL, "%.*s: takes no value (see --help)",
                       (int)strcspn(arg, "="), arg);
    if (optopt)
        return tf_fail(err, TF_EINVAL, "unexpected argument \"-%c\" (see --help)", optopt);
    return tf_fail(err, TF_EINVAL, "unknown option %.*s (see --help)", (int)strcspn(arg, "="),
                   arg);
}

/* --auto-plan and the options it cannot go with, or that need it
 * (auto_only: the first such option given, or NULL). */
static int check_auto_plan(const tfx_exec_options *o, const char *auto_only, tf_error *err)
{
    if (!o->auto_plan) {
        if (auto_only)
            return tf_fail(err, TF_EINVAL, "--%s: only with --auto-plan", auto_only);
        return 0;
    }
    if (o->plan_path)
        return tf_fail(err, TF_EINVAL, "--auto-plan and --plan: give one of them");
    if (o->freeze_ratio > 0)
        return tf_fail(err, TF_EINVAL, "--auto-plan and --freeze-ratio: give one of them");
    if (o->no_freeze)
        return tf_fail(err, TF_EINVAL, "--auto-plan and --no-freeze: give one of them");
    if (o->checkpoint_dir)
        return tf_fail(err, TF_EINVAL,
                       "--auto-plan and --checkpoint: a resumed run would need the plan; write "
                       "it with --plan-out and resume with --plan");
    return 0;
}

/* Options that cannot go together, and the defaults that depend on others. */
static int finish_options(tfx_exec_options *o, const char *auto_only, tf_error *err)
{
    if (!o->model.ffn)
        o->model.ffn = tfx_model_default_ffn(o->model.hidden);
    if (!o->model.heads)
        o->model.heads = tfx_model_default_heads(o->model.hidden);
    if (o->plan_path && o->freeze_ratio > 0)
        return tf_fail(err, TF_EINVAL, "--plan and --freeze-ratio: give one of them");
    if (o->plan_path && o->profile_out)
        return tf_fail(err, TF_EINVAL, "--plan and --profile-out: give one of them");
    if (o->data_path && o->source)
        return tf_fail(err, TF_EINVAL, "--data and --source: give one of them");
    if (o->schedule_csv && (o->schedule || o->plan_path))
        return tf_fail(err, TF_EINVAL, "--schedule-csv and --%s: give one of them",
                       o->schedule ? "schedule" : "plan");
    return check_auto_plan(o, auto_only, err);
}

/* Parses argv into o (--name VALUE or --name=VALUE).  Returns 0, 1 for
 * --help, 2 for --version, or TF_EINVAL naming the option. */
static int parse_args(int argc, char **argv, tfx_exec_options *o, tf_error *err)
{
    struct option longopts[N_FLAGS + N_VALUE_OPTIONS + 1];
    long_options(longopts);
    o->model.ffn = 0;   /* 4C unless --ffn says otherwise */
    o->model.heads = 0; /* heads of 32 unless --heads says otherwise */
    opterr = 0;
    const char *auto_only = NULL;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = 0;
        if (c == 'h')
            return 1;
        if (c == OPT_VERSION)
            return 2;
        if (c == OPT_NO_FREEZE)
            o->no_freeze = 1;
        else if (c == OPT_TF32)
            o->tf32 = 1;
        else if (c == OPT_FREEZE_RESCALE)
            o->freeze_rescale = 1;
        else if (c == OPT_AUTO_PLAN)
            o->auto_plan = 1;
        else if (c >= OPT_VALUE) {
            const value_option *v = &value_options[c - OPT_VALUE];
            if (v->auto_only && !auto_only)
                auto_only = v->name;
            rc = set_value(o, v, optarg, err);
        } else
            rc = refuse(c, argv[optind - 1], err);
        if (rc < 0)
            return rc;
    }
    if (optind < argc)
        return tf_fail(err, TF_EINVAL, "unexpected argument \"%s\" (see --help)", argv[optind]);
    return finish_options(o, auto_only, err);
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
    if (rc == 2) {
        printf("tf-exec %s\n", TF_VERSION);
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
    rc = o.profile_out && !o.auto_plan ? tfx_exec_profile(&o, &err)
                                       : tfx_exec_train(&o, NULL, &err);
    if (rc < 0) {
        fflush(stdout);
        fprintf(stderr, "%s: error: %s\n", who, err.msg[0] ? err.msg : tf_strerror(rc));
        return rc == TF_ERUNTIME || rc == TF_ESOLVER ? 3 : 1;
    }
    return 0;
}
