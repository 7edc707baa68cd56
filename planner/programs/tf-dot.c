/* tf-dot: draws a plan (or a profile's unfrozen schedule) as a timeline, a
 * comparison with the unfrozen timeline, or the dependency graph.  Parses
 * arguments and calls the planner library (tf/timeline.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/plan.h"
#include "tf/timeline.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tf-dot INPUT.json [-o FILE] [-T FORMAT] [options]\n"
            "\n"
            "Draws a freeze plan (plan.json from tf-plan) or a profile's unfrozen schedule\n"
            "(profile.json) as a timeline: one row per rank, one box per action at its\n"
            "start time and as wide as its duration, backward boxes paler the more they\n"
            "freeze, critical-path actions outlined.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE      write here (atomically); the format follows the\n"
            "                         extension: .dot/.gv .svg .png .pdf .json (Chrome trace)\n"
            "                         (default: DOT on stdout)\n"
            "  -T, --format FORMAT    dot, svg, png, pdf or chrome (Chrome/Perfetto trace)\n"
            "  --compare unfrozen     draw the unfrozen timeline above the planned one on a\n"
            "                         shared time axis\n"
            "  --dag                  draw the dependency graph instead (small schedules)\n"
            "  --width POINTS         picture width in points (1/72 in; default: wide enough\n"
            "                         for typical actions to hold their labels)\n"
            "  --dpi N                PNG resolution (default 96: pixels = points x 4/3)\n"
            "  --title TEXT           replace the first title line\n"
            "  -h, --help             show this help\n"
            "  --version              show the version\n"
            "\n"
            "exit status: 0 ok, 1 invalid input or output error, 2 usage error\n");
}

/* Parses a positive number option value; returns 0 or -1. */
static int parse_positive(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v > 0))
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *input = NULL, *output = NULL, *format = NULL;
    tf_timeline_options options;
    tf_timeline_options_init(&options);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(arg, "--version")) {
            printf("tf-dot %s\n", TF_VERSION);
            return 0;
        } else if ((!strcmp(arg, "-o") || !strcmp(arg, "--output")) && has_value) {
            output = argv[++i];
        } else if ((!strcmp(arg, "-T") || !strcmp(arg, "--format")) && has_value) {
            format = argv[++i];
            if (!tf_timeline_format_valid(format)) {
                fprintf(stderr, "tf-dot: %s: unknown format \"%s\" (dot, svg, png, pdf, chrome)\n",
                        arg, format);
                return EXIT_USAGE;
            }
        } else if (!strncmp(arg, "-T", 2) && arg[2]) { /* -Tsvg, as dot accepts */
            format = arg + 2;
            if (!tf_timeline_format_valid(format)) {
                fprintf(stderr, "tf-dot: -T: unknown format \"%s\" (dot, svg, png, pdf, chrome)\n",
                        format);
                return EXIT_USAGE;
            }
        } else if (!strcmp(arg, "--compare") && has_value) {
            if (strcmp(argv[++i], "unfrozen") != 0) {
                fprintf(stderr, "tf-dot: --compare: expected \"unfrozen\", got \"%s\"\n", argv[i]);
                return EXIT_USAGE;
            }
            options.compare_unfrozen = 1;
        } else if (!strcmp(arg, "--dag")) {
            options.dag = 1;
        } else if (!strcmp(arg, "--width") && has_value) {
            if (parse_positive(argv[++i], &options.width)) {
                fprintf(stderr,
                        "tf-dot: --width: expected a positive number of points, got \"%s\"\n",
                        argv[i]);
                return EXIT_USAGE;
            }
        } else if (!strcmp(arg, "--dpi") && has_value) {
            if (parse_positive(argv[++i], &options.dpi)) {
                fprintf(stderr, "tf-dot: --dpi: expected a positive number, got \"%s\"\n", argv[i]);
                return EXIT_USAGE;
            }
        } else if (!strcmp(arg, "--title") && has_value) {
            options.title = argv[++i];
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "tf-dot: %s: unknown option or missing value (see --help)\n", arg);
            return EXIT_USAGE;
        } else if (!input) {
            input = arg;
        } else {
            fprintf(stderr, "tf-dot: unexpected argument \"%s\" (one input at a time)\n", arg);
            return EXIT_USAGE;
        }
    }
    if (!input) {
        usage(stderr);
        return EXIT_USAGE;
    }
    /* Check the output name before any work, so a typo costs nothing. */
    if (output && strcmp(output, "-") != 0 && !format &&
        !tf_timeline_format_for_path(output)) {
        fprintf(stderr,
                "tf-dot: %s: cannot tell the format from the extension; use .dot .gv .svg "
                ".png .pdf .json or -T FORMAT\n",
                output);
        return EXIT_USAGE;
    }

    tf_error err = {0};
    tf_plan plan;
    int rc = tf_timeline_load(input, &plan, &err);
    if (!rc)
        rc = tf_timeline_render(&plan, &options, output, format, &err);
    if (rc)
        fprintf(stderr, "tf-dot: %s\n", err.msg[0] ? err.msg : tf_strerror(rc));
    tf_plan_free(&plan);
    return rc ? EXIT_INPUT : 0;
}
