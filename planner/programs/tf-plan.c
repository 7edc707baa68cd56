/* tf-plan: profiled stage timings in, freeze plan out.  Parses arguments
 * and calls the planner library. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/profile.h"
#include "tf/schedule.h"
#include "tf/timeline.h"
#include "tf/util.h"

static const char *const prog = "tf-plan";

/* The default --time-limit: several times the slowest solve within the
 * size limits measured on a 2-core machine (75-90 s, 131,072 actions), so
 * only a solve gone wrong reaches it. */
enum { TF_PLAN_TIME_LIMIT_S = 600 };

typedef struct plan_args {
    const char *profile, *output, *csv, *timeline, *write_csv;
    int quiet;
    tf_plan_options options;
} plan_args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tf-plan PROFILE.json [-o PLAN.json] [options]\n"
            "\n"
            "Builds the schedule DAG of a profiled pipeline, solves the freeze LP for the\n"
            "least batch time under the freeze caps, writes the plan and prints a summary.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE          write plan.json here (atomically)\n"
            "  --objective NAME           least-freeze (default): among the fastest plans,\n"
            "                             the one that freezes least; spread: the one whose\n"
            "                             largest freeze ratio is smallest\n"
            "  --max-freeze-ratio R       cap on every stage's mean freeze ratio, in [0, 1]\n"
            "                             (default: the profile's, else 0.9)\n"
            "  --max-action-ratio R       no action's ratio above R, in (0, 1] (default 1:\n"
            "                             none); keeps the LP from freezing whole\n"
            "                             microbatches, which costs accuracy\n"
            "  --solver NAME              auto (default: chosen by the schedule's size),\n"
            "                             lp_solve, or fast (the structured exact solver);\n"
            "                             the plan records the solver that ran (the other one\n"
            "                             takes over if it fails, and the plan says why)\n"
            "  --time-limit S             stop solving after S seconds (default %d; 0: none)\n"
            "  --schedule-csv FILE        run the per-rank order in FILE (PyTorch compute-only\n"
            "                             CSV: one row per rank, cells like 0F3 1B2 2I0 2W0\n"
            "                             and pairs (0F7;7B3)OVERLAP_F_B); the CSV gives the\n"
            "                             ranks, stages and microbatches, the profile the\n"
            "                             timings per stage (its schedule name is not used)\n"
            "  --write-csv FILE           also write the schedule's per-rank order as PyTorch's\n"
            "                             compute-only CSV (what --schedule-csv reads)\n"
            "  --timeline FILE            also draw the plan (format from the extension: .svg\n"
            "                             .png .pdf .dot, or .json for a Chrome/Perfetto trace)\n"
            "  -q, --quiet                print no summary and no progress lines\n"
            "  -h, --help                 show this help\n"
            "  --version                  show the version\n"
            "\n"
            "built-in schedules: %s\n"
            "exit status: 0 ok, 1 invalid input or unwritable output, 2 usage error,\n"
            "3 solver failure\n",
            TF_PLAN_TIME_LIMIT_S, tf_schedule_builtin_names());
}

enum {
    OPT_OBJECTIVE = 256,
    OPT_MAX_FREEZE_RATIO,
    OPT_MAX_ACTION_RATIO,
    OPT_SOLVER,
    OPT_SCHEDULE_CSV,
    OPT_TIMELINE,
    OPT_TIME_LIMIT,
    OPT_WRITE_CSV
};

static const struct option long_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"objective", required_argument, NULL, OPT_OBJECTIVE},
    {"max-freeze-ratio", required_argument, NULL, OPT_MAX_FREEZE_RATIO},
    {"max-action-ratio", required_argument, NULL, OPT_MAX_ACTION_RATIO},
    {"solver", required_argument, NULL, OPT_SOLVER},
    {"schedule-csv", required_argument, NULL, OPT_SCHEDULE_CSV},
    {"timeline", required_argument, NULL, OPT_TIMELINE},
    {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
    {"write-csv", required_argument, NULL, OPT_WRITE_CSV},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, TF_CLI_HELP},
    {"version", no_argument, NULL, TF_CLI_VERSION},
    {NULL, 0, NULL, 0},
};

static const tf_cli_program program = {prog, TF_VERSION, "o:qh", long_options, usage,
                                       "profile"};

static int take_timeline(const char *value, plan_args *a)
{
    a->timeline = value;
    if (tf_timeline_format_for_path(value))
        return 0;
    fprintf(stderr, "tf-plan: --timeline: cannot tell the format of \"%s\" (use .svg, .png, "
                    ".pdf, .dot or .json)\n",
            value);
    return TF_EXIT_USAGE;
}

/* A ratio option: a number in [0, 1], or (0, 1] when zero is not one. */
static int take_ratio(const char *flag, const char *value, int zero_ok, double *out)
{
    double ratio;
    if (tf_cli_parse_number(value, &ratio) || !((zero_ok ? ratio >= 0.0 : ratio > 0.0) &&
                                                ratio <= 1.0))
        return tf_cli_bad_value(prog, flag,
                                zero_ok ? "expected a number in [0, 1]"
                                        : "expected a number in (0, 1]",
                                value);
    *out = ratio;
    return 0;
}

static int take_time_limit(const char *value, plan_args *a)
{
    double seconds;
    if (tf_cli_parse_number(value, &seconds) || !(seconds >= 0.0 && seconds <= 1e9))
        return tf_cli_bad_value(prog, "--time-limit", "expected seconds >= 0 (0: no limit)",
                                value);
    a->options.control.time_limit_s = seconds;
    return 0;
}

/* One option (tf_cli_take). */
static int take_option(int c, const char *value, void *ctx)
{
    plan_args *a = ctx;
    switch (c) {
    case 'q':
        a->quiet = 1;
        return 0;
    case 'o':
        a->output = value;
        return 0;
    case OPT_SCHEDULE_CSV:
        a->csv = value;
        return 0;
    case OPT_WRITE_CSV:
        a->write_csv = value;
        return 0;
    case OPT_OBJECTIVE: return tf_cli_objective(prog, value, &a->options.objective);
    case OPT_SOLVER: return tf_cli_solver(prog, value, &a->options.solver);
    case OPT_TIMELINE: return take_timeline(value, a);
    case OPT_MAX_FREEZE_RATIO:
        return take_ratio("--max-freeze-ratio", value, 1, &a->options.max_freeze_ratio);
    case OPT_MAX_ACTION_RATIO:
        return take_ratio("--max-action-ratio", value, 0, &a->options.max_action_ratio);
    case OPT_TIME_LIMIT: return take_time_limit(value, a);
    default: return TF_EXIT_USAGE;
    }
}

/* No output may be written over another output or over an input: the
 * picture would replace the plan, or the plan the profile it came from.
 * Checked before anything is read or written. */
static int check_paths(const plan_args *a)
{
    const char *name[] = {"-o", "--timeline", "--write-csv", "the profile", "--schedule-csv"};
    const char *path[] = {a->output, a->timeline, a->write_csv, a->profile, a->csv};
    const int outputs = 3, files = 5;
    for (int i = 0; i < outputs; i++)
        for (int j = i + 1; j < files; j++)
            if (tf_cli_distinct(prog, name[i], path[i], name[j], path[j]))
                return TF_EXIT_USAGE;
    return 0;
}

/* Fills *a from the command line.  Returns TF_CLI_CONTINUE, or the exit
 * status (0 after --help or --version). */
static int parse_args(int argc, char **argv, plan_args *a)
{
    memset(a, 0, sizeof *a);
    tf_plan_options_init(&a->options);
    a->options.control.time_limit_s = TF_PLAN_TIME_LIMIT_S;
    int rc = tf_cli_parse(&program, argc, argv, take_option, a, &a->profile);
    if (rc == TF_CLI_CONTINUE && check_paths(a))
        rc = TF_EXIT_USAGE;
    return rc;
}

/* The profile; with --schedule-csv, the timings of the profile for the
 * order in the CSV, which decides the shape.  The older notation that the
 * CSV reader converts is said on stderr: the user should know their B
 * cells were read as I. */
static int load_profile(const plan_args *a, tf_profile *profile, tf_error *err)
{
    if (!a->csv)
        return tf_profile_load(a->profile, profile, err);
    memset(profile, 0, sizeof *profile);
    tf_schedule order;
    tf_csv_notes notes;
    int rc = tf_schedule_read_csv_noted(a->csv, &order, &notes, err);
    if (rc)
        return rc;
    if (notes.old_backwards > 0)
        fprintf(stderr,
                "%s: note: %s: %d %s in PyTorch's older notation (B followed by a W of the same "
                "stage and microbatch, first %s) read as backward-input I\n",
                prog, a->csv, notes.old_backwards, notes.old_backwards == 1 ? "cell" : "cells",
                notes.first_old);
    rc = tf_profile_load_for(a->profile, &order, profile, err);
    tf_schedule_free(&order);
    return rc;
}

/* A picture of TF_TIMELINE_SLOW_BOXES or more takes seconds: say so first. */
static void say_when_slow(const plan_args *a, const tf_plan *plan, const char *format)
{
    if (a->quiet || strcmp(format, "chrome") == 0 ||
        plan->schedule.n_actions < TF_TIMELINE_SLOW_BOXES)
        return;
    tf_progress p;
    tf_progress_start(&p, prog);
    tf_progress_say(&p, "drawing %d boxes", plan->schedule.n_actions);
}

/* The plan, its picture and its order's CSV are written as one unit:
 * either all replace their targets or none does. */
static int write_outputs(const plan_args *a, const tf_plan *plan, tf_error *err)
{
    char *plan_json = NULL, *picture = NULL, *csv = NULL;
    size_t picture_len = 0, csv_len = 0;
    const char *paths[3];
    const void *data[3];
    size_t lens[3];
    int files = 0, rc = 0;
    if (a->output && !(rc = tf_plan_to_json(plan, &plan_json, err))) {
        paths[files] = a->output;
        data[files] = plan_json;
        lens[files++] = strlen(plan_json);
    }
    const char *format = a->timeline ? tf_timeline_format_for_path(a->timeline) : NULL;
    if (!rc && format)
        say_when_slow(a, plan, format);
    if (!rc && format &&
        !(rc = tf_timeline_render_data(plan, NULL, format, &picture, &picture_len, err))) {
        paths[files] = a->timeline;
        data[files] = picture;
        lens[files++] = picture_len;
    }
    if (!rc && a->write_csv && !(rc = tf_schedule_csv_text(&plan->schedule, &csv, &csv_len, err))) {
        paths[files] = a->write_csv;
        data[files] = csv;
        lens[files++] = csv_len;
    }
    if (!rc && files > 0)
        rc = tf_write_files_atomic(files, paths, data, lens, err);
    free(plan_json);
    free(picture);
    free(csv);
    return rc;
}

/* The summary on stdout; 0, or TF_EXIT_INPUT when it could not be
 * written (a full disk must not pass for success). */
static int print_summary(const plan_args *a, const tf_plan *plan)
{
    tf_plan_print_summary(plan, stdout);
    if (a->output)
        printf("plan          %s\n", a->output);
    if (a->timeline)
        printf("timeline      %s\n", a->timeline);
    if (a->write_csv)
        printf("order csv     %s\n", a->write_csv);
    return tf_cli_finish_stdout(prog);
}

int main(int argc, char **argv)
{
    plan_args a;
    int status = parse_args(argc, argv, &a);
    if (status != TF_CLI_CONTINUE)
        return status;
    tf_error err = {0};
    tf_profile profile;
    tf_plan plan = {0};
    tf_progress progress;
    tf_progress_start(&progress, prog);
    if (!a.quiet)
        a.options.control.progress = &progress;
    int rc = load_profile(&a, &profile, &err);
    if (!rc)
        rc = tf_plan_from_profile(&profile, &a.options, &plan, &err);
    if (!rc)
        rc = write_outputs(&a, &plan, &err);
    if (rc)
        tf_cli_report(prog, rc, &err);
    else if (!a.quiet)
        status = print_summary(&a, &plan);
    tf_plan_free(&plan);
    tf_profile_free(&profile);
    if (rc)
        return rc == TF_ESOLVER ? TF_EXIT_SOLVER : TF_EXIT_INPUT;
    return a.quiet ? 0 : status;
}
