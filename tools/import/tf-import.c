/* tf-import: a profile for tf-plan from torch.profiler traces of a PyTorch
 * pipeline run.  Parses arguments and calls the import library. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "import.h"
#include "tf/profile.h"

static const char *const prog = "tf-import";

typedef struct import_args {
    tf_cli_list traces, frozen;
    const char *output;
    int quiet;
    tfi_options options;
} import_args;

static const char synopsis[] =
    "usage: tf-import TRACE.json... [--frozen TRACE.json...] [--steps FIRST:LAST]\n"
    "                 [--p2p-ms MS] -o PROFILE.json\n"
    "\n"
    "Reads torch.profiler traces (Chrome JSON, or .json.gz) of a PyTorch pipeline\n"
    "run, one per rank, and writes the profile tf-plan reads: the per-rank order\n"
    "and each action's median time from the PP:<stage><type><microbatch>\n"
    "annotations of torch.distributed.pipelining.\n";

static void notes(FILE *f)
{
    fputs("A trace's rank is its distributedInfo.rank when every trace has one, else the\n"
          "lowest stage it runs (rank r runs stage r in PyTorch's schedules), else its\n"
          "place among the arguments.  The traces must make one run that tf-plan can\n"
          "plan: an order that deadlocks, clocks that disagree with the data the ranks\n"
          "exchange, a lag over a tenth of the step, overlapping actions of one rank, a\n"
          "trace given twice, or frozen traces that are the run's own are refused\n"
          "(docs/tf-import.md).\n",
          f);
}

/* --steps FIRST:LAST into the import options (TF_CLI_CUSTOM). */
static int parse_steps(const char *text, void *field, const char **expected)
{
    tfi_options *o = field;
    *expected = "FIRST:LAST, step numbers with 0 <= FIRST <= LAST";
    return tfi_parse_steps(text, &o->first_step, &o->last_step, NULL) == 0 ? 0 : -1;
}

#define AT(field) offsetof(import_args, field)

static const tf_cli_option options[] = {
    {.name = "trace", .kind = TF_CLI_OPERANDS, .offset = AT(traces), .min = 1},
    {"output", 'o', TF_CLI_PATH, AT(output), .flags = TF_CLI_REQUIRED, .arg = "FILE",
     .help = "write the profile here (atomically)"},
    {"frozen", 0, TF_CLI_LIST, AT(frozen), .arg = "TRACE...",
     .help = "traces of a run with every parameter frozen, one per rank: the frozen times of "
             "B and W (default: the reference's B x 0.5 and W x 0.01); the plain arguments "
             "after --frozen up to the next option are frozen traces"},
    {"steps", 0, TF_CLI_CUSTOM, AT(options), .parse = parse_steps, .arg = "FIRST:LAST",
     .help = "use ProfilerStep#FIRST..#LAST only (default: every step that holds actions)"},
    {"p2p-ms", 0, TF_CLI_NUMBER, AT(options.p2p_ms), .min = 0, .max = TF_MAX_DURATION_MS,
     .arg = "MS", .help = "the lag between ranks to write, in ms, instead of measuring it; the "
                          "traces' clocks are then not read (for traces of unsynchronised "
                          "clocks)"},
    {"quiet", 'q', TF_CLI_FLAG, AT(quiet), .help = "print warnings only"},
};

static const tf_cli_program program = {prog, TF_VERSION, synopsis, options,
                                       sizeof options / sizeof options[0], notes, 0};

static void print_note(void *ctx, int warning, const char *message)
{
    const import_args *a = ctx;
    if (warning || !a->quiet)
        fprintf(stderr, "%s: %s: %s\n", prog, warning ? "warning" : "note", message);
}

/* -o may name no trace (under any spelling): the profile would replace it.
 * Says so and returns 1 when it does. */
static int output_is_a_trace(const import_args *a)
{
    for (int i = 0; i < a->traces.n + a->frozen.n; i++) {
        const char *trace = i < a->traces.n ? a->traces.items[i] : a->frozen.items[i - a->traces.n];
        if (tf_cli_distinct(prog, "--output", a->output, "a trace", trace))
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    import_args a;
    memset(&a, 0, sizeof a);
    tfi_options_init(&a.options);
    int status = tf_cli_parse(&program, argc, argv, &a);
    if (status != TF_CLI_CONTINUE)
        return status;
    if (output_is_a_trace(&a)) {
        tf_cli_free(&program, &a);
        return TF_EXIT_USAGE;
    }
    tf_error err = {0};
    tf_progress progress;
    tf_progress_start(&progress, prog);
    a.options.progress = a.quiet ? NULL : &progress;
    a.options.traces = a.traces.items;
    a.options.n_traces = a.traces.n;
    a.options.frozen = a.frozen.items;
    a.options.n_frozen = a.frozen.n;
    a.options.note = print_note;
    a.options.note_ctx = &a;
    int rc = tfi_import_to_file(&a.options, a.output, &err);
    if (rc)
        tf_cli_report(prog, rc, &err);
    else if (!a.quiet)
        printf("wrote %s\n", a.output);
    tf_cli_free(&program, &a);
    return tf_cli_status(rc);
}
