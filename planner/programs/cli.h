/* cli.h - what the toolkit's programs (tf-plan, tf-dot, tf-study,
 * bench-solvers) share on their command lines: the getopt_long loop with
 * --help and --version, exit statuses, and the wording of every usage
 * error, so that each program says "PROG: OPTION: what was wrong" the
 * same way and takes options as getopt does ("-j1" and "-j 1",
 * "--jobs=1" and "--jobs 1", unique abbreviations of long options).
 *
 * Every function that complains prints one line on stderr and returns
 * TF_EXIT_USAGE, so that a program's option handler can `return
 * tf_cli_...(...)`.
 */
#ifndef TF_CLI_H
#define TF_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "tf/error.h"
#include "tf/objective.h"

enum {
    TF_CLI_CONTINUE = -1, /* parsing went well: go on and do the work */
    TF_EXIT_INPUT = 1,    /* invalid input, or an output that cannot be written */
    TF_EXIT_USAGE = 2,    /* a bad command line */
    TF_EXIT_SOLVER = 3    /* the LP solver failed */
};

/* The values getopt_long returns for the options tf_cli_parse handles
 * itself: put {"help", no_argument, NULL, TF_CLI_HELP} (and "h" in the
 * short options) and {"version", no_argument, NULL, TF_CLI_VERSION} in a
 * program's table.  A program's own long-only options take values from
 * 256 up, above any character. */
enum { TF_CLI_HELP = 'h', TF_CLI_VERSION = 0x7000 };

/* A program's command line. */
typedef struct tf_cli_program {
    const char *name;                  /* "tf-plan": the prefix of every message */
    const char *version;               /* printed by --version as "NAME VERSION" */
    const char *short_options;         /* getopt's, e.g. "o:qh" */
    const struct option *long_options; /* getopt_long's table, ending in a zero entry */
    void (*usage)(FILE *f);            /* prints the usage (--help, or no operand) */
    const char *operand;               /* "profile": the one operand a program takes, named
                                        * in messages; NULL: it takes any number */
} tf_cli_program;

/* A program's handler for one of its options: c as getopt_long returned
 * it, value its argument (NULL for options without one), ctx the
 * program's own.  Returns 0, or TF_EXIT_USAGE after a complaint. */
typedef int (*tf_cli_take)(int c, const char *value, void *ctx);

/* Runs getopt_long over argv: --help prints the usage on stdout,
 * --version the version; an unknown option or a missing value gets "PROG:
 * OPTION: unknown option or missing value (see --help)"; every other
 * option goes to take.  Then the operands (getopt moves them after the
 * options): with p->operand set, exactly one, stored in *operand (no
 * operand prints the usage on stderr, a second one gets "PROG: unexpected
 * argument "ARG" (one OPERAND at a time)"); without, they are left in
 * argv[optind .. argc - 1] and operand may be NULL.  Returns
 * TF_CLI_CONTINUE to go on, or the exit status: 0 after --help or
 * --version, TF_EXIT_USAGE. */
int tf_cli_parse(const tf_cli_program *p, int argc, char **argv, tf_cli_take take, void *ctx,
                 const char **operand);

/* Prints "PROG: OPTION: WHAT, got "VALUE"".  Returns TF_EXIT_USAGE. */
int tf_cli_bad_value(const char *prog, const char *option, const char *what, const char *value);

/* Prints "PROG: OPTION: unknown KIND "VALUE" (CHOICES)".  Returns
 * TF_EXIT_USAGE. */
int tf_cli_unknown(const char *prog, const char *option, const char *kind, const char *value,
                   const char *choices);

/* --objective and --solver, for every program that plans: parse value
 * into *out, or complain naming the choices.  Return 0 or TF_EXIT_USAGE. */
int tf_cli_objective(const char *prog, const char *value, tf_objective *out);
int tf_cli_solver(const char *prog, const char *value, tf_solver *out);

/* The whole of text as a number (strtod) / a base-10 integer in [min, max].
 * Return 0, or -1 (nothing printed: the caller words the range). */
int tf_cli_parse_number(const char *text, double *out);
int tf_cli_parse_int(const char *text, long min, long max, int *out);

/* Refuses two paths of one command line that name the same file
 * (tf_same_file: also through ".", "..", links or another spelling), so
 * that neither is written over the other: prints "PROG: WHAT_A and WHAT_B
 * are the same file, A" and returns TF_EXIT_USAGE; 0 when they differ or
 * either is NULL. */
int tf_cli_distinct(const char *prog, const char *what_a, const char *a, const char *what_b,
                    const char *b);

/* Flushes stdout and checks that everything printed there was written (a
 * full disk): 0, or TF_EXIT_INPUT after "PROG: cannot write the summary to
 * stdout: REASON".  (A closed pipe ends the program by SIGPIPE first, as it
 * does any filter.) */
int tf_cli_finish_stdout(const char *prog);

/* Prints "PROG: MESSAGE" for a failed library call: err's message, else
 * the name of code rc.  err may be NULL. */
void tf_cli_report(const char *prog, int rc, const tf_error *err);

#endif
