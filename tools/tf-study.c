/* tf-study: capacity-planning sweeps.  Parses arguments and calls the study
 * library (tools/study). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "study/study.h"
#include "tf/schedule.h"
#include "tf/util.h"

static const char *const prog = "tf-study";

typedef struct study_args {
    const char *study, *csv, *svg, *profiles;
    int quiet;
    uint64_t gpu_memory;  /* --gpu-memory; 0: the study's */
    tf_study_run_options options;
} study_args;

static const char synopsis[] =
    "usage: tf-study STUDY.json [-o RESULTS.csv] [--plot CHART.svg] [options]\n"
    "\n"
    "Plans every configuration of a sweep (schedule x ranks x stages per rank x\n"
    "microbatches x freeze cap x p2p lag) with the freeze LP and reports which\n"
    "configurations give the most throughput and what freezing buys at each.\n"
    "A markdown summary of the best configurations goes to stdout; configurations\n"
    "a schedule cannot run are skipped with the reason on stderr.  When a\n"
    "configuration fails to solve, no output is written.\n";

/* Progress bar on a terminal: redrawn in place on stderr. */
static void draw_progress(void *ctx, int done, int total)
{
    (void)ctx;
    const int width = 40;
    int filled = total ? done * width / total : width;
    fprintf(stderr, "\r[");
    for (int i = 0; i < width; i++)
        fputc(i < filled ? '#' : '.', stderr);
    fprintf(stderr, "] %d/%d %s", done, total,
            tf_plural(total, "configuration", "configurations"));
    if (done == total)
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

/* Progress without a terminal (a log, CI): a line now and then, only
 * once the sweep has run a few seconds. */
static void note_progress(void *ctx, int done, int total)
{
    tf_progress_note(ctx, "%d of %d configurations planned", done, total);
}

#define AT(field) offsetof(study_args, field)

static const tf_cli_option options[] = {
    {.name = "study", .kind = TF_CLI_OPERAND, .offset = AT(study)},
    {"output", 'o', TF_CLI_PATH, AT(csv), .arg = "FILE",
     .help = "write one CSV row per planned configuration (atomically)"},
    {"plot", 0, TF_CLI_PATH, AT(svg), .arg = "FILE",
     .help = "write a chart of throughput and speedup per configuration, grouped by "
             "schedule (atomically): SVG, PNG or PDF by the suffix (.svg .png .pdf)"},
    {"profiles", 0, TF_CLI_PATH, AT(profiles), .arg = "DIR",
     .help = "write each planned configuration's profile.json into DIR, ready for tf-plan "
             "and tf-dot"},
    {"jobs", 'j', TF_CLI_INT, AT(options.threads), 1, 1024, .arg = "N",
     .help = "solve N configurations at once (default: all CPUs)"},
    {"objective", 0, TF_CLI_CUSTOM, AT(options.objective), .parse = tf_cli_objective,
     .arg = "NAME", .help = "least-freeze (default) or spread, as in tf-plan"},
    {"solver", 0, TF_CLI_CUSTOM, AT(options.solver), .parse = tf_cli_solver, .arg = "NAME",
     .help = "auto (default), lp_solve, clp or fast, as in tf-plan"},
    {"gpu-memory", 0, TF_CLI_SIZE, AT(gpu_memory), 1, 1.152921504606846976e18, .arg = "SIZE",
     .help = "each GPU's memory (80GiB = 80 x 2^30 bytes, 80GB = 80e9, or bytes), over the "
             "study's gpu_memory_bytes; needs the model's bytes (its shape or measured bytes "
             "per layer). Every configuration is planned within it less "
             "memory_headroom_bytes and marked fits true or false"},
    {"quiet", 'q', TF_CLI_FLAG, AT(quiet), .help = "no summary and no progress bar"},
};

static const tf_cli_program program = {prog, TF_VERSION, synopsis, options,
                                       sizeof options / sizeof options[0],
                                       tf_cli_print_schedules, 1};

/* Fills *a from the command line.  Returns TF_CLI_CONTINUE, or the exit
 * status (0 after --help or --version). */
static int parse_args(int argc, char **argv, study_args *a)
{
    memset(a, 0, sizeof *a);
    tf_study_run_options_init(&a->options);
    int rc = tf_cli_parse(&program, argc, argv, a);
    /* An output must not replace the study or the other output. */
    if (rc == TF_CLI_CONTINUE &&
        (tf_cli_distinct(prog, "-o", a->csv, "--plot", a->svg) ||
         tf_cli_distinct(prog, "-o", a->csv, "the study", a->study) ||
         tf_cli_distinct(prog, "--plot", a->svg, "the study", a->study)))
        rc = TF_EXIT_USAGE;
    if (rc == TF_CLI_CONTINUE && a->svg && !tf_study_plot_format(a->svg))
        rc = tf_cli_bad_value(prog, "--plot", "the chart is written as SVG, PNG or PDF: name "
                              "the file .svg, .png or .pdf", a->svg);
    return rc;
}

/* Neither output may replace the profile the study reads its times from. */
static int check_profile_input(const study_args *a, const tf_study *study)
{
    const char *measured = study->profile_path[0] ? study->profile_path : NULL;
    return tf_cli_distinct(prog, "-o", a->csv, "the study's profile", measured) ||
                   tf_cli_distinct(prog, "--plot", a->svg, "the study's profile", measured)
               ? TF_EXIT_USAGE
               : 0;
}

/* Skips and failures in sweep order, after the progress bar is gone.
 * Returns the exit status the rows give: 0, or TF_EXIT_SOLVER when a
 * configuration failed, TF_EXIT_INPUT when none could run. */
static int report_rows(const study_args *a, const tf_study_result *result)
{
    for (int i = 0; i < result->n_rows; i++) {
        const tf_study_row *w = &result->rows[i];
        if (w->status == TF_STUDY_SOLVED)
            continue;
        const tf_study_config *c = &w->config;
        fprintf(stderr, "tf-study: %s %s ranks=%d stages_per_rank=%d microbatches=%d: %s\n",
                w->status == TF_STUDY_SKIPPED ? "skipped" : "FAILED", c->schedule, c->ranks,
                c->stages_per_rank, c->microbatches, w->reason);
    }
    if (result->failed) {
        fprintf(stderr, "tf-study: %d configuration%s failed to solve; no output written\n",
                result->failed, result->failed == 1 ? "" : "s");
        return TF_EXIT_SOLVER;
    }
    if (!result->solved) {
        fprintf(stderr, "tf-study: %s: no configuration of the sweep can run; no output written\n",
                a->study);
        return TF_EXIT_INPUT;
    }
    return 0;
}

/* Everything is rendered first, then written as one unit. */
static int write_results(const study_args *a, const tf_study *study,
                         const tf_study_result *result, tf_error *err)
{
    char *csv = NULL, *plot = NULL;
    size_t plot_len = 0;
    int rc = 0;
    if (a->csv)
        rc = tf_study_to_csv(result, &csv, err);
    if (!rc && a->svg)
        rc = tf_study_plot(result, tf_study_plot_format(a->svg), &plot, &plot_len, err);
    if (!rc && (a->csv || a->svg || a->profiles))
        rc = tf_study_write_outputs(study, result, a->csv, csv, a->svg, plot, plot_len,
                                    a->profiles, err);
    free(csv);
    free(plot);
    return rc;
}

/* The summary on stdout; 0, or TF_EXIT_INPUT when it could not be
 * written (a full disk must not pass for success). */
static int print_summary(const study_args *a, const tf_study_result *result)
{
    tf_study_print_summary(result, stdout);
    if (a->csv)
        printf("\nresults: %s\n", a->csv);
    if (a->svg)
        printf("plot:    %s\n", a->svg);
    if (a->profiles)
        printf("profiles: %s/\n", a->profiles);
    return tf_cli_finish_stdout(prog);
}

int main(int argc, char **argv)
{
    study_args a;
    int status = parse_args(argc, argv, &a);
    if (status != TF_CLI_CONTINUE)
        return status;
    tf_error err = {0};
    tf_study study;
    tf_study_result result = {0};
    int rc = tf_study_load(a.study, &study, &err);
    if (rc) {
        tf_cli_report(prog, rc, &err);
        return TF_EXIT_INPUT;
    }
    if (a.gpu_memory && (rc = tf_study_set_gpu_memory(&study, (double)a.gpu_memory, &err))) {
        tf_cli_report(prog, rc, &err);
        tf_study_free(&study);
        return TF_EXIT_INPUT;
    }
    if ((status = check_profile_input(&a, &study)) != 0) {
        tf_study_free(&study);
        return status;
    }
    tf_progress lines;
    tf_progress_start(&lines, prog);
    if (!a.quiet && isatty(STDERR_FILENO)) {
        a.options.progress = draw_progress;
    } else if (!a.quiet) {
        a.options.progress = note_progress;
        a.options.progress_ctx = &lines;
    }
    if ((rc = tf_study_run(&study, &a.options, &result, &err)) == 0 &&
        (status = report_rows(&a, &result)) == 0 &&
        (rc = write_results(&a, &study, &result, &err)) == 0 && !a.quiet)
        status = print_summary(&a, &result);
    if (rc) {
        tf_cli_report(prog, rc, &err);
        status = TF_EXIT_INPUT;
    }
    tf_study_result_free(&result);
    tf_study_free(&study);
    return status;
}
