/* tf-plan: profiled stage timings in, freeze plan out.  Parses arguments
 * and calls the planner library. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tf/canvas.h"
#include "tf/pareto_plot.h"
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
#define TF_PLAN_TIME_LIMIT_S 600

typedef struct plan_args {
    const char *profile, *output, *csv, *timeline, *write_csv;
    const char *plot;       /* --plot: the trade-off curve's chart */
    int quiet;
    uint64_t memory_limit;  /* --memory-limit; 0: the profile's */
    int no_freeze_memory;
    int pareto, pareto_memory; /* print a trade-off curve instead of one plan */
    int compare_aux;        /* print the aux work's three arms instead of one plan */
    tf_plan_options options;
} plan_args;

#define TF_PLAN_STR(x) #x
#define TF_PLAN_STRING(x) TF_PLAN_STR(x)

static const char synopsis[] =
    "usage: tf-plan PROFILE.json [-o PLAN.json] [options]\n"
    "\n"
    "Builds the schedule DAG of a profiled pipeline, solves the freeze LP for the\n"
    "least batch time under the freeze caps, writes the plan and prints a summary.\n";

/* --timeline FILE: a name whose extension tells the format. */
static int parse_timeline(const char *text, void *field, const char **expected)
{
    *expected = "a file name ending in .svg, .png, .pdf, .dot or .json";
    if (!tf_timeline_format_for_path(text))
        return -1;
    *(const char **)field = text;
    return 0;
}

/* --plot FILE: a picture whose extension tells the format. */
static int parse_plot(const char *text, void *field, const char **expected)
{
    const char *format = tf_canvas_format_for_path(text);
    *expected = "a file name ending in .svg, .png or .pdf";
    if (!format || !strcmp(format, "dot"))
        return -1;
    *(const char **)field = text;
    return 0;
}

#define AT(field) offsetof(plan_args, field)

static const tf_cli_option options[] = {
    {.name = "profile", .kind = TF_CLI_OPERAND, .offset = AT(profile)},
    {"output", 'o', TF_CLI_PATH, AT(output), .arg = "FILE",
     .help = "write plan.json here (atomically)"},
    {"objective", 0, TF_CLI_CUSTOM, AT(options.objective), .parse = tf_cli_objective,
     .arg = "NAME",
     .help = "least-freeze (default): among the fastest plans, the one that freezes least; "
             "spread: the one whose largest freeze ratio is smallest"},
    {"max-freeze-ratio", 0, TF_CLI_RATIO, AT(options.max_freeze_ratio), .arg = "R",
     .help = "cap on every stage's mean freeze ratio, in [0, 1] (default: the profile's, "
             "else 0.9)"},
    {"max-action-ratio", 0, TF_CLI_RATIO, AT(options.max_action_ratio),
     .flags = TF_CLI_ABOVE_MIN, .arg = "R",
     .help = "no action's ratio above R, in (0, 1] (default 1: none); keeps the LP from "
             "freezing whole microbatches, which costs accuracy"},
    {"solver", 0, TF_CLI_CUSTOM, AT(options.solver), .parse = tf_cli_solver, .arg = "NAME",
     .help = "auto (default: chosen by the schedule's size), lp_solve, clp (COIN-OR CLP: "
             "the general solver for memory limits and many stages) or fast (the structured "
             "exact solver); the plan records the solver that ran (another one takes over if "
             "it fails, and the plan says why)"},
    {"time-limit", 0, TF_CLI_NUMBER, AT(options.control.time_limit_s), 0, 1e9, .arg = "S",
     .help = "stop solving after S seconds (default " TF_PLAN_STRING(TF_PLAN_TIME_LIMIT_S)
             "; 0: none)"},
    {"memory-limit", 0, TF_CLI_SIZE, AT(memory_limit), 1, 1.152921504606846976e18,
     .arg = "SIZE",
     .help = "every rank's memory limit (80GiB = 80 x 2^30 bytes, 80GB = 80e9, or bytes), over "
             "the profile's memory_limit_bytes; needs the profile's memory fields. A plan keeps "
             "each rank's peak within it by freezing and, where stages give checkpoint_bytes, "
             "recomputing"},
    {"no-freeze-memory", 0, TF_CLI_FLAG, AT(no_freeze_memory),
     .help = "plan as if freezing saved no memory (a frozen backward's forward keeps all its "
             "activations), to see what freezing buys in memory"},
    {"pareto", 0, TF_CLI_FLAG, AT(pareto),
     .help = "instead of one plan, print the least batch time against the largest freeze "
             "ratio any action may take (--max-action-ratio from 0 to 1): every breakpoint of "
             "the exact curve"},
    {"pareto-memory", 0, TF_CLI_FLAG, AT(pareto_memory),
     .help = "instead of one plan, print the least batch time against the memory limit of "
             "every rank, from the smallest any plan meets to the largest unfrozen peak: every "
             "breakpoint of the exact curve (needs the profile's memory fields)"},
    {"aux-margin", 0, TF_CLI_NUMBER, AT(options.aux_margin), 0, TF_AUX_MAX_MARGIN, .arg = "F",
     .help = "the share of each bubble kept free when the profile's aux work is placed in "
             "the bubbles (default " TF_PLAN_STRING(TF_AUX_DEFAULT_MARGIN) ")"},
    {"compare-aux", 0, TF_CLI_FLAG, AT(compare_aux),
     .help = "instead of one plan, print the aux work placed per step and how often it "
             "completes with no freezing, with the plan, and with the most freezing that "
             "completes it as often as no freezing does (needs a stage's \"aux\" list)"},
    {"plot", 0, TF_CLI_CUSTOM, AT(plot), .parse = parse_plot, .arg = "FILE",
     .help = "with --pareto or --pareto-memory, also draw the curve (format from the "
             "extension: .svg .png .pdf): batch time against the swept limit, every "
             "breakpoint marked"},
    {"schedule-csv", 0, TF_CLI_PATH, AT(csv), .arg = "FILE",
     .help = "run the per-rank order in FILE (PyTorch compute-only CSV: one row per rank, "
             "cells like 0F3 1B2 2I0 2W0 and pairs (0F7;7B3)OVERLAP_F_B); the CSV gives the "
             "ranks, stages and microbatches, the profile the timings per stage (its schedule "
             "name is not used)"},
    {"write-csv", 0, TF_CLI_PATH, AT(write_csv), .arg = "FILE",
     .help = "also write the schedule's per-rank order as PyTorch's compute-only CSV (what "
             "--schedule-csv reads)"},
    {"timeline", 0, TF_CLI_CUSTOM, AT(timeline), .parse = parse_timeline, .arg = "FILE",
     .help = "also draw the plan (format from the extension: .svg .png .pdf .dot, or .json "
             "for a Chrome/Perfetto trace)"},
    {"quiet", 'q', TF_CLI_FLAG, AT(quiet), .help = "print no summary and no progress lines"},
};

static const tf_cli_program program = {prog, TF_VERSION, synopsis, options,
                                       sizeof options / sizeof options[0],
                                       tf_cli_print_schedules, 1};

/* No output may be written over another output or over an input: the
 * picture would replace the plan, or the plan the profile it came from.
 * Checked before anything is read or written. */
static int check_paths(const plan_args *a)
{
    const char *name[] = {"-o", "--timeline", "--write-csv", "--plot", "the profile",
                          "--schedule-csv"};
    const char *path[] = {a->output, a->timeline, a->write_csv, a->plot, a->profile, a->csv};
    const int outputs = 4, files = 6;
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
    int rc = tf_cli_parse(&program, argc, argv, a);
    if (rc == TF_CLI_CONTINUE && check_paths(a))
        rc = TF_EXIT_USAGE;
    if (rc == TF_CLI_CONTINUE && a->compare_aux && a->pareto + a->pareto_memory > 0)
        rc = tf_cli_bad_value(prog, "--compare-aux", "one table at a time, not with a trade-off "
                              "curve", a->pareto ? "--pareto" : "--pareto-memory");
    if (rc == TF_CLI_CONTINUE && a->pareto + a->pareto_memory > 1)
        rc = tf_cli_bad_value(prog, "--pareto-memory", "one trade-off at a time, not with "
                              "--pareto", "--pareto");
    if (rc == TF_CLI_CONTINUE && (a->pareto || a->pareto_memory) &&
        (a->output || a->timeline || a->write_csv))
        rc = tf_cli_bad_value(prog, a->pareto ? "--pareto" : "--pareto-memory",
                              "a trade-off prints a table; -o, --timeline and --write-csv "
                              "belong to one plan", a->output ? a->output
                                                               : a->timeline ? a->timeline
                                                                             : a->write_csv);
    if (rc == TF_CLI_CONTINUE && a->plot && !a->pareto && !a->pareto_memory)
        rc = tf_cli_bad_value(prog, "--plot", "--pareto or --pareto-memory with it (it draws "
                              "their trade-off curve; tf-dot draws a plan)", a->plot);
    a->options.memory_limit = (double)a->memory_limit;
    a->options.freeze_saves_memory = !a->no_freeze_memory;
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

/* The trade-off table on stdout. */
static int print_pareto(const tf_pareto *pa, const char *plot)
{
    const int memory = pa->axis == TF_PARETO_MEMORY;
    printf("%s\n", memory ? "least batch time against every rank's memory limit"
                          : "least batch time against the largest freeze ratio of any action");
    printf("%-18s %12s %9s %12s%s\n", memory ? "limit GiB" : "max action ratio", "batch ms",
           "speedup", "mean ratio", memory ? "  recompute" : "");
    for (int k = 0; k < pa->n; k++) {
        const tf_pareto_point *pt = &pa->points[k];
        char x[32];
        snprintf(x, sizeof x, memory ? "%.3f" : "%.4f", memory ? pt->x / 1073741824.0 : pt->x);
        printf("%-18s %12.3f %8.3fx %12.4f", x, pt->batch_ms,
               pt->batch_ms > 0 ? pa->batch_ms_unfrozen / pt->batch_ms : 1.0,
               pt->freeze_ratio_mean);
        if (memory)
            printf("  %9.3f", pt->recompute_sum);
        putchar('\n');
    }
    printf("%d %s (the ends and every breakpoint; linear between), %d %s solved; speedup "
           "against the unfrozen %.3f ms\n", pa->n, tf_plural(pa->n, "point", "points"),
           pa->solves, tf_plural(pa->solves, "plan", "plans"), pa->batch_ms_unfrozen);
    if (plot)
        printf("plot          %s\n", plot);
    return tf_cli_finish_stdout(prog);
}

/* --pareto or --pareto-memory: the curve instead of one plan, and with
 * --plot its chart. */
static int run_pareto(const plan_args *a, const tf_profile *profile, tf_error *err,
                      int *status)
{
    tf_pareto pa;
    int rc = tf_plan_pareto(profile, &a->options,
                            a->pareto ? TF_PARETO_ACTION_RATIO : TF_PARETO_MEMORY, &pa, err);
    if (rc)
        return rc;
    if (a->plot)
        rc = tf_pareto_plot(&pa, a->plot, err);
    if (!rc)
        *status = print_pareto(&pa, a->plot);
    tf_pareto_free(&pa);
    return rc;
}

/* The arms of --compare-aux on stdout. */
static int print_aux_arms(const tf_aux_comparison *c)
{
    static const char *const labels[] = {"no freezing", "the plan", "as fresh as unfrozen"};
    printf("aux work against freezing (placed: in the step's own bubbles, all ranks)\n");
    printf("%-20s %16s %12s %16s %10s\n", "arm", "max action ratio", "batch ms",
           "placed/demand ms", "refresh");
    for (int k = 0; k < 3; k++) {
        const tf_aux_arm *a = &c->arm[k];
        char refresh[32];
        snprintf(refresh, sizeof refresh, a->refresh_steps ? "%d" : "never", a->refresh_steps);
        printf("%-20s %16.4f %12.3f %8.2f/%-7.2f %10s\n", labels[k], a->max_action_ratio,
               a->batch_ms, a->placed_ms, a->demand_ms, refresh);
    }
    if (c->never_completes)
        printf("an aux item is longer than every bubble: its work never completes\n");
    return tf_cli_finish_stdout(prog);
}

static int run_compare_aux(const plan_args *a, const tf_profile *profile, tf_error *err,
                           int *status)
{
    tf_aux_comparison c;
    int rc = tf_plan_compare_aux(profile, &a->options, &c, err);
    if (!rc)
        *status = print_aux_arms(&c);
    return rc;
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
    if (!rc && (a.pareto || a.pareto_memory || a.compare_aux)) {
        rc = a.compare_aux ? run_compare_aux(&a, &profile, &err, &status)
                           : run_pareto(&a, &profile, &err, &status);
        if (rc)
            tf_cli_report(prog, rc, &err);
        tf_profile_free(&profile);
        return rc ? tf_cli_status(rc) : status;
    }
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
        return tf_cli_status(rc);
    return a.quiet ? 0 : status;
}
