/* tf-study: capacity-planning sweeps.  Parses arguments and calls the study
 * library (tools/study). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "study/study.h"
#include "tf/schedule.h"
#include "tf/util.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_SOLVER = 3 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tf-study STUDY.json [-o RESULTS.csv] [--plot RESULTS.svg] [options]\n"
            "\n"
            "Plans every configuration of a sweep (schedule x ranks x stages per rank x\n"
            "microbatches x freeze cap x p2p lag) with the freeze LP and reports which\n"
            "configurations give the most throughput and what freezing buys at each.\n"
            "A markdown summary of the best configurations goes to stdout; configurations\n"
            "a schedule cannot run are skipped with the reason on stderr.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE      write one CSV row per planned configuration (atomically)\n"
            "  --plot FILE            write an SVG chart of throughput and speedup per\n"
            "                         configuration, grouped by schedule (atomically)\n"
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
    fprintf(stderr, "] %d/%d configurations", done, total);
    if (done == total)
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

int main(int argc, char **argv)
{
    const char *study_path = NULL, *csv_path = NULL, *svg_path = NULL, *profile_dir = NULL;
    int quiet = 0;
    tf_study_run_options options;
    tf_study_run_options_init(&options);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(arg, "--version")) {
            printf("tf-study %s\n", TF_VERSION);
            return 0;
        } else if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) {
            quiet = 1;
        } else if ((!strcmp(arg, "-o") || !strcmp(arg, "--output")) && has_value) {
            csv_path = argv[++i];
        } else if (!strcmp(arg, "--profiles") && has_value) {
            profile_dir = argv[++i];
        } else if (!strcmp(arg, "--plot") && has_value) {
            svg_path = argv[++i];
        } else if ((!strcmp(arg, "-j") || !strcmp(arg, "--jobs")) && has_value) {
            char *end;
            long jobs = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end || jobs < 1 || jobs > 1024) {
                fprintf(stderr, "tf-study: --jobs: expected an integer in [1, 1024], got \"%s\"\n",
                        argv[i]);
                return EXIT_USAGE;
            }
            options.threads = (int)jobs;
        } else if (!strcmp(arg, "--objective") && has_value) {
            if (tf_objective_parse(argv[++i], &options.objective)) {
                fprintf(stderr,
                        "tf-study: --objective: unknown objective \"%s\" (least-freeze, spread)\n",
                        argv[i]);
                return EXIT_USAGE;
            }
        } else if (!strcmp(arg, "--solver") && has_value) {
            if (tf_solver_parse(argv[++i], &options.solver)) {
                fprintf(stderr,
                        "tf-study: --solver: unknown solver \"%s\" (auto, lp_solve, fast)\n",
                        argv[i]);
                return EXIT_USAGE;
            }
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "tf-study: %s: unknown option or missing value (see --help)\n", arg);
            return EXIT_USAGE;
        } else if (!study_path) {
            study_path = arg;
        } else {
            fprintf(stderr, "tf-study: unexpected argument \"%s\" (one study at a time)\n", arg);
            return EXIT_USAGE;
        }
    }
    if (!study_path) {
        usage(stderr);
        return EXIT_USAGE;
    }

    tf_error err = {0};
    tf_study study;
    int rc = tf_study_load(study_path, &study, &err);
    if (rc) {
        fprintf(stderr, "tf-study: %s\n", err.msg[0] ? err.msg : tf_strerror(rc));
        return EXIT_INPUT;
    }
    if (!quiet && isatty(STDERR_FILENO))
        options.progress = draw_progress;
    tf_study_result result;
    rc = tf_study_run(&study, &options, &result, &err);
    if (rc) {
        fprintf(stderr, "tf-study: %s\n", err.msg[0] ? err.msg : tf_strerror(rc));
        tf_study_free(&study);
        return EXIT_INPUT;
    }
    /* Skips and failures in sweep order, after the progress bar is gone. */
    for (int i = 0; i < result.n_rows; i++) {
        const tf_study_row *w = &result.rows[i];
        if (w->status == TF_STUDY_SOLVED)
            continue;
        const tf_study_config *c = &w->config;
        fprintf(stderr, "tf-study: %s %s ranks=%d stages_per_rank=%d microbatches=%d: %s\n",
                w->status == TF_STUDY_SKIPPED ? "skipped" : "FAILED", c->schedule, c->ranks,
                c->stages_per_rank, c->microbatches, w->reason);
    }
    int status = 0;
    if (result.failed) {
        fprintf(stderr, "tf-study: %d configuration%s failed to solve; no output written\n",
                result.failed, result.failed == 1 ? "" : "s");
        status = EXIT_SOLVER;
    } else if (!result.solved) {
        fprintf(stderr, "tf-study: %s: no configuration of the sweep can run; no output written\n",
                study_path);
        status = EXIT_INPUT;
    }
    /* Everything is rendered first, then written as one unit. */
    char *csv = NULL, *svg = NULL;
    if (!status && csv_path)
        rc = tf_study_to_csv(&result, &csv, &err);
    if (!status && !rc && svg_path)
        rc = tf_study_to_svg(&result, &svg, &err);
    if (!status && !rc && (csv_path || svg_path || profile_dir))
        rc = tf_study_write_outputs(&study, &result, csv_path, csv, svg_path, svg, profile_dir,
                                    &err);
    if (!status && rc) {
        fprintf(stderr, "tf-study: %s\n", err.msg[0] ? err.msg : tf_strerror(rc));
        status = EXIT_INPUT;
    }
    if (!status && !quiet) {
        tf_study_print_summary(&result, stdout);
        if (csv_path)
            printf("\nresults: %s\n", csv_path);
        if (svg_path)
            printf("plot:    %s\n", svg_path);
        if (profile_dir)
            printf("profiles: %s/\n", profile_dir);
    }
    free(csv);
    free(svg);
    tf_study_result_free(&result);
    tf_study_free(&study);
    return status;
}
