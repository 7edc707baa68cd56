/* tf-exec - trains a small byte-level GPT on a pipeline with a
 * TimelyFreeze plan, or measures the profile tf-plan reads.  This file only
 * parses the command line; the work is in the tfexec library (tfx/exec.h). */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tf/error.h"
#include "tfx/corpus.h"
#include "tfx/exec.h"
#include "tfx/launch.h"
#include "tfx/registry.h"

static const char *const prog = "tf-exec";

static const char synopsis[] =
    "usage: tf-exec --steps N [options]                   train without a plan\n"
    "       tf-exec --plan PLAN.json [options]            train with a plan\n"
    "       tf-exec --auto-plan [options]                 measure, plan and train\n"
    "       tf-exec --profile-out PROFILE.json [options]  measure a profile\n"
    "       tf-exec --write-source FILE [--source S]      write a built-in source\n"
    "\n"
    "Trains a small byte-level GPT on a pipeline of ranks with a TimelyFreeze plan's\n"
    "freezing, or measures every action of the pipeline for a profile.  One of\n"
    "--steps, --plan, --auto-plan, --profile-out and --write-source says what to do;\n"
    "training runs 60 steps unless --steps says otherwise.\n";

/* --seed S: a whole number a double holds exactly, as the seed is also
 * written into logs and checkpoints as a JSON number. */
static int parse_seed(const char *text, void *field, const char **expected)
{
    double v;
    *expected = "an integer in [0, 9007199254740992]";
    if (tf_cli_parse_number(text, &v) || !(v >= 0 && v <= 9007199254740992.0) ||
        v != (double)(uint64_t)v)
        return -1;
    *(uint64_t *)field = (uint64_t)v;
    return 0;
}

/* --lr X: AdamW's learning rate, a float. */
static int parse_lr(const char *text, void *field, const char **expected)
{
    double v;
    *expected = "a number in [0, 10]";
    if (tf_cli_parse_number(text, &v) || !(v >= 0 && v <= 10))
        return -1;
    *(float *)field = (float)v;
    return 0;
}

static int parse_select(const char *text, void *field, const char **expected)
{
    *expected = "random, rotate or stable";
    return tfx_select_method_parse(text, field, NULL) == 0 ? 0 : -1;
}

static int parse_source(const char *text, void *field, const char **expected)
{
    *expected = "base or shifted";
    if (!tfx_corpus_is_source(text))
        return -1;
    *(const char **)field = text;
    return 0;
}

/* Testing: RANK:ACTION makes that rank fail before its ACTION-th action.
 * field is the whole tfx_exec_options (offset 0). */
static int parse_failure(const char *text, void *field, const char **expected)
{
    tfx_exec_options *o = field;
    int rank, action, used = 0;
    *expected = "RANK:ACTION";
    if (sscanf(text, "%d:%d%n", &rank, &action, &used) != 2 || text[used] || rank < 0 ||
        action < 0)
        return -1;
    o->fail_rank = rank;
    o->fail_action = action;
    return 0;
}

/* Testing: RANK:FACTOR[:STEP] stretches that rank's compute by FACTOR from
 * step STEP (1-based, default 1) on.  field is the whole options. */
static int parse_slow(const char *text, void *field, const char **expected)
{
    tfx_exec_options *o = field;
    int rank = -1, from = 1, used = 0;
    double factor = 0.0;
    *expected = "RANK:FACTOR[:STEP] (FACTOR from 1 to 1000, STEP >= 1)";
    int n = sscanf(text, "%d:%lf%n:%d%n", &rank, &factor, &used, &from, &used);
    if (n < 2 || text[used] != '\0' || rank < 0 || !(factor >= 1.0 && factor <= 1000.0) ||
        from < 1)
        return -1;
    o->slow_rank = rank;
    o->slow_factor = factor;
    o->slow_from = from;
    return 0;
}

static const tf_cli_choice progress_choices[] = {
    {"auto", -1}, {"bar", 1}, {"lines", 0}, {NULL, 0}};

static const tf_cli_choice recompute_choices[] = {{"none", TFX_RECOMPUTE_NONE},
                                                   {"full", TFX_RECOMPUTE_FULL},
                                                   {"selective", TFX_RECOMPUTE_SELECTIVE},
                                                   {NULL, 0}};

#define AT(field) offsetof(tfx_exec_options, field)
#define SECTION(name_, help_) {.name = name_, .kind = TF_CLI_SECTION, .help = help_}
#define STEPS_MAX (INT_MAX - 1) /* a step count plus one must still be an int */

static const tf_cli_option options[] = {
    SECTION("pipeline", NULL),
    {"backend", 0, TF_CLI_TEXT, AT(backend), .arg = "cpu|cuda",
     .help = "where the ranks compute (default cpu)"},
    {"schedule", 0, TF_CLI_CUSTOM, AT(schedule), .parse = tf_cli_schedule, .arg = "NAME",
     .help = "a built-in schedule (below; default: the plan's, else 1F1B)"},
    {"ranks", 0, TF_CLI_INT, AT(ranks), 1, 1024, .arg = "P",
     .help = "pipeline ranks (default: the plan's, else 2)"},
    {"stages-per-rank", 0, TF_CLI_INT, AT(stages_per_rank), 1, 64, .arg = "V",
     .help = "stages per rank (default: the plan's, else the schedule's)"},
    {"microbatches", 0, TF_CLI_INT, AT(microbatches), 1, 4096, .arg = "M",
     .help = "microbatches per step (default: the plan's, else 4)"},
    {"schedule-csv", 0, TF_CLI_PATH, AT(schedule_csv), .arg = "FILE",
     .help = "a per-rank order instead of --schedule: PyTorch's compute-only CSV"},
    {"transport", 0, TF_CLI_TEXT, AT(transport), .arg = "NAME",
     .help = "how ranks exchange activations: cpu backend: local (in-process, the default) "
             "or socket (TCP, the default when launched); cuda backend: cuda (in-process "
             "device copies, the default) or nccl (one GPU per rank, the default when "
             "launched)"},
    SECTION("cuda", NULL),
    {"devices", 0, TF_CLI_TEXT, AT(devices), .arg = "LIST",
     .help = "GPU of each rank, e.g. 0,1,2,3; \"0\" puts every rank on GPU 0, one stream "
             "each (default: rank mod GPUs)"},
    {"tf32", 0, TF_CLI_FLAG, AT(tf32), .help = "TF32 tensor-core GEMMs, FP32 accumulation"},
    SECTION("model", NULL),
    {"layers", 0, TF_CLI_INT, AT(model.layers), 1, 65536, .arg = "L", .help = "(default 4)"},
    {"hidden", 0, TF_CLI_INT, AT(model.hidden), 1, 65536, .arg = "C", .help = "(default 192)"},
    {"heads", 0, TF_CLI_INT, AT(model.heads), 1, 65536, .arg = "A", .help = "(default C/32)"},
    {"ffn", 0, TF_CLI_INT, AT(model.ffn), 1, 65536, .arg = "F", .help = "(default 4C)"},
    {"context", 0, TF_CLI_INT, AT(model.context), 1, 65536, .arg = "T",
     .help = "tokens per sequence (default 64)"},
    {"microbatch-size", 0, TF_CLI_INT, AT(model.microbatch_size), 1, 65536, .arg = "B",
     .help = "sequences per microbatch (default 8)"},
    {"lr", 0, TF_CLI_CUSTOM, AT(adamw.lr), .parse = parse_lr, .arg = "X",
     .help = "AdamW's learning rate (default 0.003)"},
    SECTION("training", NULL),
    {"steps", 0, TF_CLI_INT, AT(steps), 1, STEPS_MAX, .arg = "N",
     .help = "training steps (default 60)"},
    {"plan", 0, TF_CLI_PATH, AT(plan_path), .arg = "FILE",
     .help = "train with this plan's freezing (tf-plan's plan.json)"},
    {"warmup", 0, TF_CLI_INT, AT(warmup), 0, STEPS_MAX, .arg = "N",
     .help = "steps without freezing first (default 10)"},
    {"ramp", 0, TF_CLI_INT, AT(ramp), 0, STEPS_MAX, .arg = "N",
     .help = "steps over which the freeze ratios ramp up to the plan's (default 10)"},
    {"no-freeze", 0, TF_CLI_FLAG, AT(no_freeze), .help = "freeze nothing: the baseline"},
    {"freeze-ratio", 0, TF_CLI_RATIO, AT(freeze_ratio), .arg = "R",
     .help = "without a plan: freeze R of every backward"},
    {"freeze-select", 0, TF_CLI_CUSTOM, AT(select), .parse = parse_select,
     .arg = "random|rotate|stable",
     .help = "which tensors a microbatch freezes: random (default), each stage's in turn, or "
             "those whose gradients have settled (running gradient statistics)"},
    {"freeze-rescale", 0, TF_CLI_FLAG, AT(freeze_rescale),
     .help = "scale a tensor frozen in k of M microbatches by M/(M-k): the mean gradient of "
             "the others, not a shrunk sum"},
    {"no-freeze-memory", 0, TF_CLI_FLAG, AT(no_freeze_memory),
     .help = "a frozen backward's forward keeps every activation anyway (the results are the "
             "same bit for bit; only the memory differs)"},
    {"recompute", 0, TF_CLI_CHOICE, AT(recompute), .choices = recompute_choices,
     .help = "without a plan: forwards keep only each block's input and the backward re-runs "
             "the blocks (full), or keep all but attention's weights and re-run attention "
             "(selective); default none (a plan says its own recomputation)"},
    {"seed", 0, TF_CLI_CUSTOM, AT(seed), .parse = parse_seed, .arg = "S",
     .help = "(default 1)"},
    SECTION("data", "5% of the data is held out for the validation loss."),
    {"data", 0, TF_CLI_PATH, AT(data_path), .arg = "FILE", .help = "train on any bytes"},
    {"source", 0, TF_CLI_CUSTOM, AT(source), .parse = parse_source, .arg = "base|shifted",
     .help = "a built-in order-2 source instead (default base; shifted is base with a "
             "quarter of its pairs redrawn)"},
    {"write-source", 0, TF_CLI_PATH, AT(source_out), .arg = "FILE",
     .help = "write the built-in source's bytes to FILE and stop: --data FILE then trains "
             "on the same bytes, windows and held-out part (for other tools)"},
    {"eval-every", 0, TF_CLI_INT, AT(eval_every), 0, INT_MAX, .arg = "N",
     .help = "validation loss every N steps (default 0: after the last step)"},
    {"eval-batches", 0, TF_CLI_INT, AT(eval_batches), 1, 1000, .arg = "K",
     .help = "held-out batches per evaluation (default 4)"},
    SECTION("weights", NULL),
    {"init", 0, TF_CLI_PATH, AT(init_dir), .arg = "DIR",
     .help = "start from that checkpoint's weights: fine-tuning"},
    {"checkpoint", 0, TF_CLI_PATH, AT(checkpoint_dir), .arg = "DIR",
     .help = "save here, and resume from here"},
    {"checkpoint-every", 0, TF_CLI_INT, AT(checkpoint_every), 0, INT_MAX, .arg = "N",
     .help = "steps between saves (default 10; the last step always)"},
    SECTION("k-fac statistics",
            "With --kfac-stats each rank computes the K-FAC factors of its stages' Linear "
            "layers (A = x^T x, G = dY^T dY, running averages) in the time it waits for "
            "messages; what its waits cannot absorb waits for later steps."),
    {"kfac-stats", 0, TF_CLI_FLAG, AT(kfac.enabled),
     .help = "compute the statistics in the ranks' waits (off by default)"},
    {"kfac-decay", 0, TF_CLI_NUMBER, AT(kfac.decay), 0, 0.9999, .needs = "kfac-stats",
     .arg = "D", .help = "weight of the old value in the running averages (default 0.95)"},
    {"kfac-sample", 0, TF_CLI_RATIO, AT(kfac.sample), .flags = TF_CLI_ABOVE_MIN,
     .needs = "kfac-stats", .arg = "R",
     .help = "the factors use the first R of each microbatch's tokens (default 1)"},
    {"kfac-queue", 0, TF_CLI_INT, AT(kfac.queue), 1, 10000000, .needs = "kfac-stats",
     .arg = "N",
     .help = "items a rank keeps pending at most, the oldest dropped beyond (default: "
             "four steps' items)"},
    {"kfac-log", 0, TF_CLI_PATH, AT(kfac.log_path), .needs = "kfac-stats", .arg = "FILE",
     .help = "JSON lines, one per rank and step: items run, their ms, pending, dropped, "
             "refresh interval, spans"},
    SECTION("output", NULL),
    {"log", 0, TF_CLI_PATH, AT(log_path), .arg = "FILE", .help = "JSON lines, one per step"},
    {"progress", 0, TF_CLI_CHOICE, AT(progress), .choices = progress_choices,
     .help = "a bar redrawn in place, or lines (default auto: a bar on a terminal)"},
    SECTION("profiling", NULL),
    {"profile-out", 0, TF_CLI_PATH, AT(profile_out), .arg = "FILE",
     .help = "measure every action unfrozen and fully frozen, write the profile here"},
    {"profile-warmup", 0, TF_CLI_INT, AT(profile_warmup), 0, 1000, .arg = "N",
     .help = "unmeasured steps first (default 3)"},
    {"profile-steps", 0, TF_CLI_INT, AT(profile_steps), 1, 1000, .arg = "N",
     .help = "measured steps of each kind (default 5)"},
    {"max-freeze-ratio", 0, TF_CLI_RATIO, AT(max_freeze_ratio), .arg = "R",
     .help = "the cap written into the profile (default 0.9)"},
    SECTION("auto-plan",
            "--auto-plan runs --warmup steps unfrozen, --profile-steps unfrozen and as many "
            "fully frozen (alternating), solves the LP in the run, ramps the plan's ratios "
            "in over --ramp steps, then trains with the plan; --profile-out writes the "
            "profile it measured.  It re-plans when a stage's actions drift from the plan."),
    {"auto-plan", 0, TF_CLI_FLAG, AT(auto_plan), .help = "measure, plan and train in one run"},
    {"plan-out", 0, TF_CLI_PATH, AT(plan_out), .needs = "auto-plan", .arg = "FILE",
     .help = "write the plan in use here"},
    {"objective", 0, TF_CLI_CUSTOM, AT(objective), .parse = tf_cli_objective,
     .needs = "auto-plan", .arg = "NAME", .help = "least-freeze (default) or spread, as tf-plan's"},
    {"solver", 0, TF_CLI_CUSTOM, AT(solver), .parse = tf_cli_solver, .needs = "auto-plan",
     .arg = "NAME", .help = "auto (default), lp_solve, clp or fast, as tf-plan's"},
    {"memory-limit", 0, TF_CLI_SIZE, AT(memory_limit), 1, 1.152921504606846976e18,
     .needs = "auto-plan", .arg = "SIZE",
     .help = "every rank's memory limit (80GiB, 80GB or bytes), as tf-plan's: the plan keeps "
             "each rank's measured static bytes plus its peak of activations within it"},
    {"max-action-ratio", 0, TF_CLI_RATIO, AT(max_action_ratio), .flags = TF_CLI_ABOVE_MIN,
     .needs = "auto-plan", .arg = "R", .help = "no action's ratio above R, as tf-plan's"},
    {"replan-threshold", 0, TF_CLI_NUMBER, AT(replan_threshold), 0, 100, .needs = "auto-plan",
     .arg = "X",
     .help = "re-plan when a stage's actions drift from the plan by more than X of its "
             "planned time (default 0.1; 0: never)"},
    {"replan-patience", 0, TF_CLI_INT, AT(replan_patience), 1, INT_MAX, .needs = "auto-plan",
     .arg = "N", .help = "for N steps in a row (default 3)"},
    {"replan-interval", 0, TF_CLI_INT, AT(replan_interval), 1, INT_MAX, .needs = "auto-plan",
     .arg = "N", .help = "and at least N steps after the last plan (default 20)"},
    {"replan-steps", 0, TF_CLI_INT, AT(replan_steps), 1, 1000, .needs = "auto-plan", .arg = "N",
     .help = "steps of each kind a re-plan measures (default 2)"},
    SECTION("testing", NULL),
    {"inject-failure", 0, TF_CLI_CUSTOM, 0, .parse = parse_failure, .arg = "RANK:ACTION",
     .help = "that rank fails before that action"},
    {"test-slow-rank", 0, TF_CLI_CUSTOM, 0, .parse = parse_slow, .arg = "RANK:FACTOR[:STEP]",
     .help = "from STEP on (1 by default) the rank's actions take FACTOR times their compute "
             "time"},
};

static void notes(FILE *f)
{
    tf_cli_print_schedules(f);
    if (tfx_registry_has_backend("cuda"))
        fputs("cuda backend: in this build\n", f);
    else
        fputs("cuda backend: not built; reconfigure with -DTF_CUDA=ON where the CUDA Toolkit,\n"
              "  cuBLAS and NCCL are installed\n",
              f);
    fputs("\nlaunched: one process per rank (or per block of ranks) when RANK/WORLD_SIZE,\n"
          "  OMPI_COMM_WORLD_*, PMI_* or SLURM_PROCID/SLURM_NTASKS say so (mpirun, srun,\n"
          "  by hand); processes meet in $TFX_RENDEZVOUS_DIR (/tmp) under $TFX_RUN_ID; a\n"
          "  silent peer fails the run after $TFX_TIMEOUT s (600); $TFX_SOCKET_BIND /\n"
          "  $TFX_SOCKET_HOST for several nodes; process 0 prints and writes --log and\n"
          "  --profile-out; no --checkpoint\n",
          f);
}

static const tf_cli_program program = {prog, TF_VERSION, synopsis, options,
                                       sizeof options / sizeof options[0], notes, 1};

/* "PROG: A and B: give one of them", and the usage status. */
static int one_of(const char *a, const char *b)
{
    fprintf(stderr, "%s: %s and %s: give one of them\n", prog, a, b);
    return TF_EXIT_USAGE;
}

/* --auto-plan and the options it cannot go with. */
static int check_auto_plan(const tfx_exec_options *o)
{
    if (!o->auto_plan)
        return 0;
    if (o->plan_path)
        return one_of("--auto-plan", "--plan");
    if (o->freeze_ratio > 0)
        return one_of("--auto-plan", "--freeze-ratio");
    if (o->no_freeze)
        return one_of("--auto-plan", "--no-freeze");
    if (o->checkpoint_dir) {
        fprintf(stderr, "%s: --auto-plan and --checkpoint: a resumed run would need the plan; "
                        "write it with --plan-out and resume with --plan\n",
                prog);
        return TF_EXIT_USAGE;
    }
    return 0;
}

/* Options that cannot go together.  Returns 0 or TF_EXIT_USAGE. */
static int check_together(const tfx_exec_options *o)
{
    if (o->plan_path && o->freeze_ratio > 0)
        return one_of("--plan", "--freeze-ratio");
    if (o->plan_path && o->profile_out)
        return one_of("--plan", "--profile-out");
    if (o->data_path && o->source)
        return one_of("--data", "--source");
    if (o->source_out && (o->data_path || o->profile_out || o->plan_path || o->auto_plan))
        return one_of("--write-source", o->data_path      ? "--data"
                                        : o->profile_out ? "--profile-out"
                                        : o->plan_path   ? "--plan"
                                                         : "--auto-plan");
    if (o->schedule_csv && (o->schedule || o->plan_path))
        return one_of("--schedule-csv", o->schedule ? "--schedule" : "--plan");
    return check_auto_plan(o);
}

/* Parses argv into o.  Returns TF_CLI_CONTINUE, or the exit status (0
 * after --help or --version). */
static int parse_args(int argc, char **argv, tfx_exec_options *o)
{
    tfx_exec_options_default(o);
    const int default_steps = o->steps;
    /* 0 until given: --steps is one way to say what to do, and --ffn and
     * --heads default to multiples of --hidden. */
    o->steps = 0;
    o->model.ffn = 0;
    o->model.heads = 0;
    int rc = tf_cli_parse(&program, argc, argv, o);
    if (rc != TF_CLI_CONTINUE)
        return rc;
    if (check_together(o))
        return TF_EXIT_USAGE;
    if (!o->steps && !o->plan_path && !o->auto_plan && !o->profile_out && !o->source_out)
        return tf_cli_missing(&program, argc,
                              "nothing to do: give --steps N to train, --plan FILE, "
                              "--auto-plan, --profile-out FILE or --write-source FILE");
    if (!o->steps)
        o->steps = default_steps;
    if (!o->model.ffn)
        o->model.ffn = tfx_model_default_ffn(o->model.hidden);
    if (!o->model.heads)
        o->model.heads = tfx_model_default_heads(o->model.hidden);
    return TF_CLI_CONTINUE;
}

int main(int argc, char **argv)
{
    tfx_exec_options o;
    tf_error err = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc != TF_CLI_CONTINUE)
        return rc;
    /* Started by a launcher (mpirun, srun, RANK/WORLD_SIZE by hand)?  One
     * process of several runs only its own ranks. */
    if ((rc = tfx_launch_env_read(&o.launch, &err)) < 0) {
        tf_cli_report(prog, rc, &err);
        return TF_EXIT_INPUT;
    }
    /* --backend and --transport are checked here, where the number of
     * processes is known, so that a bad one is a usage error like any
     * other bad option value. */
    if ((rc = tfx_registry_check_transport(o.backend, o.transport, o.launch.world_size, &err))) {
        tf_cli_report(prog, rc, &err);
        return TF_EXIT_USAGE;
    }
    char who[64] = "tf-exec";
    if (o.launch.world_size > 1)
        snprintf(who, sizeof who, "tf-exec (process %d of %d)", o.launch.rank,
                 o.launch.world_size);
    rc = o.source_out                  ? tfx_exec_write_source(&o, &err)
         : o.profile_out && !o.auto_plan ? tfx_exec_profile(&o, &err)
                                         : tfx_exec_train(&o, NULL, &err);
    if (rc < 0) {
        fflush(stdout);
        tf_cli_report(who, rc, &err);
    }
    return tf_cli_status(rc);
}
