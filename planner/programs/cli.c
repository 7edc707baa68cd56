/* cli.c - the programs' shared command-line complaints (cli.h). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tf/util.h"

/* Does argv's "--name[=value]" name a long option whose value is val
 * (getopt_long takes unique abbreviations, so a prefix counts)? */
static int names_long_option(const char *arg, int val, const struct option *longopts)
{
    size_t len = strcspn(arg + 2, "=");
    for (const struct option *o = longopts; o && o->name; o++)
        if (o->val == val && strncmp(o->name, arg + 2, len) == 0)
            return 1;
    return 0;
}

/* After getopt_long returned '?' or ':': says which option, as the user
 * spelled it ("-x", "--frobnicate", "--output"). */
static int bad_option(const char *prog, char *const *argv, const struct option *longopts)
{
    /* getopt leaves the offending element at argv[optind - 1], except for
     * a short option inside a cluster ("-xq"), which only optopt names. */
    const char *arg = argv[optind - 1];
    int is_long = strncmp(arg, "--", 2) == 0 &&
                  (optopt == 0 || names_long_option(arg, optopt, longopts));
    if (is_long)
        fprintf(stderr, "%s: %.*s: unknown option or missing value (see --help)\n", prog,
                (int)strcspn(arg, "="), arg);
    else
        fprintf(stderr, "%s: -%c: unknown option or missing value (see --help)\n", prog,
                optopt);
    return TF_EXIT_USAGE;
}

int tf_cli_bad_value(const char *prog, const char *option, const char *what, const char *value)
{
    fprintf(stderr, "%s: %s: %s, got \"%s\"\n", prog, option, what, value);
    return TF_EXIT_USAGE;
}

int tf_cli_unknown(const char *prog, const char *option, const char *kind, const char *value,
                   const char *choices)
{
    fprintf(stderr, "%s: %s: unknown %s \"%s\" (%s)\n", prog, option, kind, value, choices);
    return TF_EXIT_USAGE;
}

/* The options, up to the operands. */
static int parse_options(const tf_cli_program *p, int argc, char **argv, tf_cli_take take,
                         void *ctx)
{
    /* A leading ':' keeps getopt quiet, so that bad_option words it. */
    char short_options[64];
    snprintf(short_options, sizeof short_options, ":%s", p->short_options);
    int c;
    while ((c = getopt_long(argc, argv, short_options, p->long_options, NULL)) != -1) {
        int rc;
        if (c == '?' || c == ':') {
            return bad_option(p->name, argv, p->long_options);
        } else if (c == TF_CLI_HELP) {
            p->usage(stdout);
            return 0;
        } else if (c == TF_CLI_VERSION) {
            printf("%s %s\n", p->name, p->version);
            return 0;
        } else if ((rc = take(c, optarg, ctx))) {
            return rc;
        }
    }
    return TF_CLI_CONTINUE;
}

/* Exactly one operand, named p->operand in messages. */
static int one_operand(const tf_cli_program *p, int argc, char **argv, const char **operand)
{
    if (optind >= argc) {
        p->usage(stderr);
        return TF_EXIT_USAGE;
    }
    if (optind + 1 < argc) {
        fprintf(stderr, "%s: unexpected argument \"%s\" (one %s at a time)\n", p->name,
                argv[optind + 1], p->operand);
        return TF_EXIT_USAGE;
    }
    *operand = argv[optind];
    return TF_CLI_CONTINUE;
}

int tf_cli_parse(const tf_cli_program *p, int argc, char **argv, tf_cli_take take, void *ctx,
                 const char **operand)
{
    int rc = parse_options(p, argc, argv, take, ctx);
    if (rc == TF_CLI_CONTINUE && p->operand)
        rc = one_operand(p, argc, argv, operand);
    return rc;
}

int tf_cli_objective(const char *prog, const char *value, tf_objective *out)
{
    if (tf_objective_parse(value, out) == 0)
        return 0;
    return tf_cli_bad_value(prog, "--objective", "expected least-freeze or spread", value);
}

int tf_cli_solver(const char *prog, const char *value, tf_solver *out)
{
    if (tf_solver_parse(value, out) == 0)
        return 0;
    return tf_cli_unknown(prog, "--solver", "solver", value, "auto, lp_solve, fast");
}

int tf_cli_parse_number(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end)
        return -1;
    *out = v;
    return 0;
}

int tf_cli_parse_int(const char *text, long min, long max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

int tf_cli_distinct(const char *prog, const char *what_a, const char *a, const char *what_b,
                    const char *b)
{
    if (!a || !b || !tf_same_file(a, b))
        return 0;
    /* Devices are written into, never replaced: two outputs on /dev/null
     * lose nothing. */
    struct stat st;
    if (stat(a, &st) == 0 && S_ISCHR(st.st_mode))
        return 0;
    fprintf(stderr, "%s: %s and %s are the same file, %s\n", prog, what_a, what_b, a);
    return TF_EXIT_USAGE;
}

int tf_cli_finish_stdout(const char *prog)
{
    /* fflush reports a failure even when the data went out in an earlier,
     * implicit flush (then only as "write error": that write's errno is
     * gone). */
    errno = 0;
    int failed = fflush(stdout) != 0 || ferror(stdout);
    if (!failed)
        return 0;
    fprintf(stderr, "%s: cannot write the summary to stdout: %s\n", prog,
            errno ? strerror(errno) : "write error");
    return TF_EXIT_INPUT;
}

void tf_cli_report(const char *prog, int rc, const tf_error *err)
{
    fprintf(stderr, "%s: %s\n", prog, err && err->msg[0] ? err->msg : tf_strerror(rc));
}
