/* tf-study: capacity-planning sweeps.  Parses arguments and calls the study
 * library (tools/study). */
#include <getopt.h>
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
    tf_study_run_options options;
} study_args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tf-study STUDY.json [-o RESULTS.csv] [--plot CHART.svg] [options]\n"
            "\n"
            "Plans every configuration of a sweep (schedule x ranks x stages per rank x\n"
            "microbatches x freeze cap x p2p lag) with the freeze LP and reports which\n"
            "configurations give the most throughput and what freezing buys at each.\n"
            "A markdown summary of the best configurations goes to stdout; configurations\n"
            "a schedule cannot run are skipped with the reason on stderr.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE      write one CSV row per planned configuration (atomically)\n"
            "  --plot FILE            write a chart of throughput and speedup per\n"
            "                         configuration, grouped by schedule (atomically):\n"
            "                         SVG, PNG or PDF by the suffix (.svg .png .pdf)\n"
            "  --profiles DIR         write each planned configuration's profile.json into\n"
            "                         DIR, ready for tf-plan and tf-dot\n"
            "  -j, --jobs N           solve N configurations at once (default: all CPUs)\n"
            "  --objective NAME       least-freeze (default) or spread, as in tf-plan\n"
            "  --solver NAME          auto (default), lp_solve or fast, as in tf-plan\n"
            "  -q, --quiet            no summary and no progress bar\n"
            "  -h, --help             show this help\n"
            "  --version              show the version\n"
            "\n"
            "built-in schedules: %s\n"
            "exit status: 0 ok, 1 invalid study, 2 usage error, 3 a configuration failed to\n"
            "solve (no output is written then)\n",
            tf_schedule_builtin_names());
}

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

enum { OPT_PLOT = 256, OPT_PROFILES, OPT_OBJECTIVE, OPT_SOLVER };

static const struct option long_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"profiles", required_argument, NULL, OPT_PROFILES},
    {"jobs", required_argument, NULL, 'j'},
    {"objective", required_argument, NULL, OPT_OBJECTIVE},
    {"solver", required_argument, NULL, OPT_SOLVER},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, TF_CLI_HELP},
    {"version", no_argument, NULL, TF_CLI_VERSION},
    {NULL, 0, NULL, 0},
};

static const tf_cli_program program = {prog, TF_VERSION, "o:j:qh", long_options, usage,
                                       "study"};

/* One option (tf_cli_take). */
static int take_option(int c, const char *value, void *ctx)
{
    study_args *a = ctx;
    switch (c) {
    case 'q':
        a->quiet = 1;
        return 0;
    case 'o':
        a->csv = value;
        return 0;
    case OPT_PLOT:
        a->svg = value;
        return 0;
    case OPT_PROFILES:
        a->profiles = value;
        return 0;
    case 'j':
        if (tf_cli_parse_int(value, 1, 1024, &a->options.threads))
            return tf_cli_bad_value(prog, "--jobs", "expected an integer in [1, 1024]", value);
        return 0;
    case OPT_OBJECTIVE: return tf_cli_objective(prog, value, &a->options.objective);
    case OPT_SOLVER: return tf_cli_solver(prog, value, &a->options.solver);
    default: return TF_EXIT_USAGE;
    }
}

/* Fills *a from the command line.  Returns TF_CLI_CONTINUE, or the exit
 * status (0 after --help or --version). */
static int parse_args(int argc, char **argv, study_args *a)
{
    memset(a, 0, sizeof *a);
    tf_study_run_options_init(&a->options);
    int rc = tf_cli_parse(&program, argc, argv, take_option, a, &a->study);
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
