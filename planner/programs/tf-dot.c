/* tf-dot: draws a plan (or a profile's unfrozen schedule) as a timeline, a
 * comparison with the unfrozen timeline, or the dependency graph.  Parses
 * arguments and calls the render library (tf/timeline.h). */
#include <math.h>
#include <stddef.h>
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

static const char synopsis[] =
    "usage: tf-dot INPUT.json [-o FILE] [-T FORMAT] [options]\n"
    "\n"
    "Draws a freeze plan (plan.json from tf-plan) or a profile's unfrozen schedule\n"
    "(profile.json) as a timeline: one row per rank, one box per action at its\n"
    "start time and as wide as its duration, backward boxes paler the more they\n"
    "freeze, critical-path actions outlined.  Boxes are labelled F3, or as PyTorch\n"
    "names actions (2F3) where a rank runs several stages; an overlapped pair's\n"
    "two boxes are framed together.\n";

/* -T/--format FORMAT (also -TFORMAT, as dot takes it). */
static int parse_format(const char *text, void *field, const char **expected)
{
    *expected = "dot, svg, png, pdf or chrome";
    if (!tf_timeline_format_valid(text))
        return -1;
    *(const char **)field = text;
    return 0;
}

static const tf_cli_choice compare_choices[] = {{"unfrozen", 1}, {NULL, 0}};

#define AT(field) offsetof(dot_args, field)

static const tf_cli_option options[] = {
    {.name = "input", .kind = TF_CLI_OPERAND, .offset = AT(input)},
    {"output", 'o', TF_CLI_PATH, AT(output), .arg = "FILE",
     .help = "write here (atomically); the format follows the extension: .dot/.gv .svg .png "
             ".pdf .json (Chrome trace) (default: DOT on stdout)"},
    {"format", 'T', TF_CLI_CUSTOM, AT(format), .parse = parse_format, .arg = "FORMAT",
     .help = "dot, svg, png, pdf or chrome (Chrome/Perfetto trace)"},
    {"compare", 0, TF_CLI_CHOICE, AT(options.compare_unfrozen), .choices = compare_choices,
     .help = "draw the unfrozen timeline above the planned one on a shared time axis (a "
             "plan: not for a profile)"},
    {"dag", 0, TF_CLI_FLAG, AT(options.dag),
     .help = "draw the dependency graph instead (small schedules)"},
    {"flows", 0, TF_CLI_FLAG, AT(options.flows),
     .help = "with -T chrome: a flow event per dependency between ranks, which Perfetto "
             "draws as an arrow"},
    {"width", 0, TF_CLI_NUMBER, AT(options.width), 0, INFINITY, .flags = TF_CLI_ABOVE_MIN,
     .arg = "POINTS",
     .help = "picture width in points (1/72 in; default: wide enough for typical actions to "
             "hold their labels)"},
    {"dpi", 0, TF_CLI_NUMBER, AT(options.dpi), 0, INFINITY, .flags = TF_CLI_ABOVE_MIN,
     .arg = "N", .help = "PNG resolution (default 96: pixels = points x 4/3)"},
    {"title", 0, TF_CLI_TEXT, AT(options.title), .arg = "TEXT",
     .help = "replace the first title line"},
};

static const tf_cli_program program = {prog, TF_VERSION, synopsis, options,
                                       sizeof options / sizeof options[0], NULL, 0};

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
    int rc = tf_cli_parse(&program, argc, argv, a);
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
    return tf_cli_status(rc);
}
