/* tf-import: a profile for tf-plan from torch.profiler traces of a PyTorch
 * pipeline run.  Parses arguments and calls the import library. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };
enum { OPT_FROZEN = 256, OPT_STEPS, OPT_VERSION };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tf-import TRACE.json... [--frozen TRACE.json...] [--steps FIRST:LAST]\n"
            "                 -o PROFILE.json\n"
            "\n"
            "Reads torch.profiler traces (Chrome JSON, or .json.gz) of a PyTorch pipeline\n"
            "run, one per rank, and writes the profile tf-plan reads: the per-rank order\n"
            "and each action's median time from the PP:<stage><type><microbatch>\n"
            "annotations of torch.distributed.pipelining.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE     write the profile here (atomically)\n"
            "  --frozen TRACE...     traces of a run with every parameter frozen, one per\n"
            "                        rank: the frozen times of B and W (default: the\n"
            "                        reference's B x 0.5 and W x 0.01); the plain arguments\n"
            "                        after --frozen up to the next option are frozen traces\n"
            "  --steps FIRST:LAST    use ProfilerStep#FIRST..#LAST only (default: every\n"
            "                        step that holds actions)\n"
            "  -q, --quiet           print warnings only\n"
            "  -h, --help            show this help\n"
            "  --version             show the version\n"
            "\n"
            "A trace's rank is its distributedInfo.rank when every trace has one, else its\n"
            "place among the arguments.\n"
            "exit status: 0 ok, 1 invalid input, 2 usage error\n");
}

typedef struct args {
    const char **traces, **frozen;
    int n_traces, n_frozen, quiet, frozen_flag;
    const char *output, *steps;
} args;

static void print_note(void *ctx, int warning, const char *message)
{
    const args *a = ctx;
    if (warning || !a->quiet)
        fprintf(stderr, "tf-import: %s: %s\n", warning ? "warning" : "note", message);
}

/* Reads argv into a; plain arguments after --frozen (until the next
 * option) are frozen traces.  Returns 0, or an exit status to leave with. */
static int parse_args(int argc, char **argv, args *a)
{
    static const struct option longs[] = {
        {"output", required_argument, NULL, 'o'}, {"frozen", optional_argument, NULL, OPT_FROZEN},
        {"steps", required_argument, NULL, OPT_STEPS}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0}};
    int to_frozen = 0, c;
    opterr = 0;
    /* "-": plain arguments come back in place as code 1, so --frozen can
     * claim the ones that follow it. */
    while ((c = getopt_long(argc, argv, "-o:qh", longs, NULL)) != -1) {
        int plain = c == 1;
        if (c == 1 && to_frozen)
            a->frozen[a->n_frozen++] = optarg;
        else if (c == 1)
            a->traces[a->n_traces++] = optarg;
        else if (c == 'o')
            a->output = optarg;
        else if (c == OPT_FROZEN && optarg)
            a->frozen[a->n_frozen++] = optarg;
        else if (c == OPT_STEPS)
            a->steps = optarg;
        else if (c == 'q')
            a->quiet = 1;
        else if (c == 'h')
            return usage(stdout), -1;
        else if (c == OPT_VERSION)
            return printf("tf-import %s\n", TF_VERSION), -1;
        else if (c != OPT_FROZEN) {
            fprintf(stderr, "tf-import: %s: unknown option or missing value\n",
                    argv[optind - 1]);
            return EXIT_USAGE;
        }
        a->frozen_flag |= c == OPT_FROZEN;
        to_frozen = plain ? to_frozen : (c == OPT_FROZEN && !optarg);
    }
    return 0;
}

/* Checks what parse_args cannot: required arguments and --steps. */
static int check_args(const args *a, tfi_options *o)
{
    tf_error err = {0};
    if (a->n_traces == 0 || !a->output) {
        fprintf(stderr, "tf-import: %s\n", a->n_traces == 0 ? "no trace given"
                                                           : "no output: give -o PROFILE.json");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (a->frozen_flag && a->n_frozen == 0) {
        fprintf(stderr, "tf-import: --frozen: no trace follows it\n");
        return EXIT_USAGE;
    }
    if (a->steps && tfi_parse_steps(a->steps, &o->first_step, &o->last_step, &err)) {
        fprintf(stderr, "tf-import: %s\n", err.msg);
        return EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    args a = {0};
    a.traces = calloc((size_t)argc, sizeof *a.traces);
    a.frozen = calloc((size_t)argc, sizeof *a.frozen);
    if (!a.traces || !a.frozen) {
        fprintf(stderr, "tf-import: out of memory\n");
        return EXIT_INPUT;
    }
    tfi_options o;
    tfi_options_init(&o);
    int rc = parse_args(argc, argv, &a);
    if (rc == 0)
        rc = check_args(&a, &o);
    if (rc == 0) {
        tf_error err = {0};
        o.traces = a.traces;
        o.n_traces = a.n_traces;
        o.frozen = a.frozen;
        o.n_frozen = a.n_frozen;
        o.note = print_note;
        o.note_ctx = &a;
        if (tfi_import_to_file(&o, a.output, &err)) {
            fprintf(stderr, "tf-import: %s\n", err.msg);
            rc = EXIT_INPUT;
        } else if (!a.quiet) {
            printf("wrote %s\n", a.output);
        }
    }
    free(a.traces);
    free(a.frozen);
    return rc < 0 ? 0 : rc;
}
