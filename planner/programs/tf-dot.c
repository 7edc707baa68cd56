/* tf-dot: draws a plan (or a profile's unfrozen schedule) as a timeline, a
 * comparison with the unfrozen timeline, or the dependency graph.  Parses
 * arguments and calls the render library (tf/timeline.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tf/plan.h"
#include "tf/timeline.h"
#include "tf/util.h"

static const char *const prog = "tf-dot";

typedef struct dot_args {
    const char *input, *output, *format;
    tf_timeline_options options;
} dot_args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tf-dot INPUT.json [-o FILE] [-T FORMAT] [options]\n"
            "\n"
            "Draws a freeze plan (plan.json from tf-plan) or a profile's unfrozen schedule\n"
            "(profile.json) as a timeline: one row per rank, one box per action at its\n"
            "start time and as wide as its duration, backward boxes paler the more they\n"
            "freeze, critical-path actions outlined.  Boxes are labelled F3, or as PyTorch\n"
            "names actions (2F3) where a rank runs several stages; an overlapped pair's\n"
            "two boxes are framed together.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE      write here (atomically); the format follows the\n"
            "                         extension: .dot/.gv .svg .png .pdf .json (Chrome trace)\n"
            "                         (default: DOT on stdout)\n"
            "  -T, --format FORMAT    dot, svg, png, pdf or chrome (Chrome/Perfetto trace)\n"
            "  --compare unfrozen     draw the unfrozen timeline above the planned one on a\n"
            "                         shared time axis (a plan: not for a profile)\n"
            "  --dag                  draw the dependency graph instead (small schedules)\n"
            "  --flows                with -T chrome: a flow event per dependency between\n"
            "                         ranks, which Perfetto draws as an arrow\n"
            "  --width POINTS         picture width in points (1/72 in; default: wide enough\n"
            "                         for typical actions to hold their labels)\n"
            "  --dpi N                PNG resolution (default 96: pixels = points x 4/3)\n"
            "  --title TEXT           replace the first title line\n"
            "  -h, --help             show this help\n"
            "  --version              show the version\n"
            "\n"
            "exit status: 0 ok, 1 invalid input or output error, 2 usage error\n");
}

enum { OPT_FORMAT = 256, OPT_COMPARE, OPT_DAG, OPT_WIDTH, OPT_DPI, OPT_TITLE, OPT_FLOWS };

static const struct option long_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"compare", required_argument, NULL, OPT_COMPARE},
    {"dag", no_argument, NULL, OPT_DAG},
    {"flows", no_argument, NULL, OPT_FLOWS},
    {"width", required_argument, NULL, OPT_WIDTH},
    {"dpi", required_argument, NULL, OPT_DPI},
    {"title", required_argument, NULL, OPT_TITLE},
    {"help", no_argument, NULL, TF_CLI_HELP},
    {"version", no_argument, NULL, TF_CLI_VERSION},
    {NULL, 0, NULL, 0},
};

static const tf_cli_program program = {prog, TF_VERSION, "o:T:h", long_options, usage,
                                       "input"};

/* -T/--format FORMAT (also -TFORMAT, as dot takes it). */
static int take_format(const char *option, const char *value, dot_args *a)
{
    if (!tf_timeline_format_valid(value))
        return tf_cli_unknown(prog, option, "format", value, "dot, svg, png, pdf, chrome");
    a->format = value;
    return 0;
}

/* --width and --dpi: a positive number. */
static int take_positive(const char *option, const char *what, const char *value, double *out)
{
    double v;
    if (tf_cli_parse_number(value, &v) || !(v > 0))
        return tf_cli_bad_value(prog, option, what, value);
    *out = v;
    return 0;
}

/* One option (tf_cli_take). */
static int take_option(int c, const char *value, void *ctx)
{
    dot_args *a = ctx;
    switch (c) {
    case 'o':
        a->output = value;
        return 0;
    case 'T': return take_format("-T", value, a);
    case OPT_FORMAT: return take_format("--format", value, a);
    case OPT_COMPARE:
        if (strcmp(value, "unfrozen") != 0)
            return tf_cli_bad_value(prog, "--compare", "expected \"unfrozen\"", value);
        a->options.compare_unfrozen = 1;
        return 0;
    case OPT_DAG:
        a->options.dag = 1;
        return 0;
    case OPT_FLOWS:
        a->options.flows = 1;
        return 0;
    case OPT_WIDTH:
        return take_positive("--width", "expected a positive number of points", value,
                             &a->options.width);
    case OPT_DPI:
        return take_positive("--dpi", "expected a positive number", value, &a->options.dpi);
    case OPT_TITLE:
        a->options.title = value;
        return 0;
    default: return TF_EXIT_USAGE;
    }
}

/* The format a picture is written in: -T, else the output's extension,
 * else dot (standard output). */
static const char *output_format(const dot_args *a)
{
    if (a->format)
        return a->format;
    return !a->output || !strcmp(a->output, "-") ? "dot" : tf_timeline_format_for_path(a->output);
}

/* Fills *a from the command line.  Returns TF_CLI_CONTINUE, or the exit
 * status (0 after --help or --version). */
static int parse_args(int argc, char **argv, dot_args *a)
{
    memset(a, 0, sizeof *a);
    tf_timeline_options_init(&a->options);
    int rc = tf_cli_parse(&program, argc, argv, take_option, a, &a->input);
    /* Check the output name before any work, so a typo costs nothing. */
    if (rc == TF_CLI_CONTINUE && a->output && strcmp(a->output, "-") != 0 && !a->format &&
        !tf_timeline_format_for_path(a->output)) {
        fprintf(stderr,
                "tf-dot: %s: cannot tell the format from the extension; use .dot .gv .svg "
                ".png .pdf .json or -T FORMAT\n",
                a->output);
        return TF_EXIT_USAGE;
    }
    /* The picture must not replace the plan it is drawn from. */
    if (rc == TF_CLI_CONTINUE && a->output && strcmp(a->output, "-") != 0 &&
        tf_cli_distinct(prog, "the input", a->input, "-o", a->output))
        return TF_EXIT_USAGE;
    const char *format = output_format(a);
    if (rc == TF_CLI_CONTINUE && a->options.flows && strcmp(format, "chrome") != 0) {
        fprintf(stderr, "tf-dot: --flows: the arrows are flow events of a Chrome trace; add -T "
                        "chrome (or write a .json file), not %s\n",
                format);
        return TF_EXIT_USAGE;
    }
    return rc;
}

/* Says on stderr when the picture is too dense to label (its boxes too
 * narrow for their labels) and what to do about it. */
static void note_density(const dot_args *a, const tf_plan *plan)
{
    char note[512];
    if (tf_timeline_density_note(plan, &a->options, output_format(a), note, sizeof note))
        fprintf(stderr, "%s: note: %s\n", prog, note);
}

/* A picture of TF_TIMELINE_SLOW_BOXES or more takes seconds: say so first. */
static void say_when_slow(const dot_args *a, const tf_plan *plan)
{
    long boxes = (long)plan->schedule.n_actions * (a->options.compare_unfrozen ? 2 : 1);
    if (boxes < TF_TIMELINE_SLOW_BOXES || !strcmp(output_format(a), "chrome"))
        return;
    tf_progress p;
    tf_progress_start(&p, prog);
    tf_progress_say(&p, "drawing %ld boxes", boxes);
}

int main(int argc, char **argv)
{
    dot_args a;
    int status = parse_args(argc, argv, &a);
    if (status != TF_CLI_CONTINUE)
        return status;
    tf_error err = {0};
    tf_plan plan;
    int rc = tf_timeline_load(a.input, &plan, &err);
    if (!rc)
        say_when_slow(&a, &plan);
    if (!rc)
        rc = tf_timeline_render(&plan, &a.options, a.output, a.format, &err);
    if (rc)
        tf_cli_report(prog, rc, &err);
    else
        note_density(&a, &plan);
    tf_plan_free(&plan);
    return rc ? TF_EXIT_INPUT : 0;
}
