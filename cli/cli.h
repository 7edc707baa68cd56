/* cli.h - the one option layer of the toolkit's programs (tf-plan, tf-dot,
 * tf-study, tf-import, tf-exec, bench-solvers).
 *
 * A program declares its options as a table: one row per option, naming
 * the option, the kind of value it takes, where the value goes in the
 * program's own options struct (offsetof), the range or choices it
 * accepts and its help text.  tf_cli_parse runs getopt_long over the table
 * (so "-j1" and "-j 1", "--jobs=1" and "--jobs 1" and unique abbreviations
 * of long options all work), checks every value, stores it, and answers
 * --help (generated from the table) and --version.  Every complaint is one
 * line on stderr in one shape:
 *
 *     PROG: --OPTION: expected WHAT, got "VALUE"
 *     PROG: --OPTION: unknown option (see --help)
 *
 * and every program exits with the same statuses (TF_EXIT_*), listed in
 * each --help by tf_cli_usage.
 */
#ifndef TF_CLI_H
#define TF_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tf/error.h"

/* The exit statuses of every program. */
enum {
    TF_CLI_CONTINUE = -1, /* parsing went well: go on and do the work */
    TF_EXIT_INPUT = 1,    /* bad input (a file missing, unreadable or invalid) or a failure */
    TF_EXIT_USAGE = 2,    /* a bad command line, a bad option value included */
    TF_EXIT_SOLVER = 3    /* the LP solver failed */
};

typedef enum tf_cli_kind {
    TF_CLI_SECTION,  /* not an option: a heading in --help (name) */
    TF_CLI_FLAG,     /* no value: sets an int to 1 */
    TF_CLI_TEXT,     /* any text: a const char * into argv */
    TF_CLI_PATH,     /* a file name, not empty: a const char * into argv */
    TF_CLI_INT,      /* a base-10 integer in [min, max]: an int */
    TF_CLI_NUMBER,   /* a finite number in [min, max] (max may be INFINITY): a double */
    TF_CLI_RATIO,    /* a number in [0, 1]: a double */
    TF_CLI_SIZE,     /* a byte count (tf_cli_parse_size) in [min, max]: a uint64_t */
    TF_CLI_CHOICE,   /* one of the row's choices: an int, that choice's value */
    TF_CLI_CUSTOM,   /* the row's own parser, into whatever field it names */
    TF_CLI_LIST,     /* a tf_cli_list: --NAME=VALUE, or every operand after a bare --NAME
                        up to the next option */
    TF_CLI_OPERAND,  /* the one operand (required): a const char * into argv */
    TF_CLI_OPERANDS  /* the operands, at least min of them: a tf_cli_list */
} tf_cli_kind;

/* Row flags. */
enum {
    TF_CLI_ABOVE_MIN = 1, /* NUMBER, RATIO: min itself is refused: (min, max] */
    TF_CLI_REQUIRED = 2   /* the option must be given */
};

/* A value of TF_CLI_CHOICE: the word on the command line, the int stored. */
typedef struct tf_cli_choice {
    const char *name;
    int value;
} tf_cli_choice;

/* Values of TF_CLI_LIST and TF_CLI_OPERANDS: pointers into argv, in the
 * order given.  items is allocated by tf_cli_parse; tf_cli_free frees it. */
typedef struct tf_cli_list {
    const char **items;
    int n;
} tf_cli_list;

/* A TF_CLI_CUSTOM row's parser: text into field (the program's struct at
 * the row's offset).  Returns 0, or -1 after pointing *expected at a
 * static wording of what it takes ("least-freeze or spread"), printed as
 * "expected WORDING, got "TEXT"". */
typedef int (*tf_cli_parser)(const char *text, void *field, const char **expected);

/* One row of a program's table.  Rows are written with designated
 * initializers; unnamed members are zero. */
typedef struct tf_cli_option {
    const char *name;              /* the long option, without "--"; SECTION: the heading;
                                      OPERAND(S): the operand's name in messages */
    char short_name;               /* 'o' for -o; 0: none */
    tf_cli_kind kind;
    size_t offset;                 /* offsetof(the program's struct, the field) */
    double min, max;               /* INT, NUMBER, SIZE: the range; OPERANDS: min count */
    unsigned flags;                /* TF_CLI_ABOVE_MIN, TF_CLI_REQUIRED */
    const tf_cli_choice *choices;  /* CHOICE: ending in {NULL, 0} */
    tf_cli_parser parse;           /* CUSTOM */
    const char *needs;             /* the long name of an option that must come with this
                                      one ("PROG: --plan-out: only with --auto-plan") */
    const char *arg;               /* the value's name in --help ("FILE"); CHOICE: default
                                      the choices joined by "|" */
    const char *help;              /* --help's text, wrapped to the terminal's 80 columns;
                                      "\n" breaks a line */
} tf_cli_option;

/* A program's command line. */
typedef struct tf_cli_program {
    const char *name;             /* "tf-plan": the prefix of every message */
    const char *version;          /* --version prints "NAME VERSION"; NULL: no --version */
    const char *synopsis;         /* the start of --help: the usage lines and what the
                                     program does, ending in a newline */
    const tf_cli_option *options; /* the table */
    int n_options;                /* its rows (at most TF_CLI_MAX_OPTIONS) */
    void (*notes)(FILE *f);       /* prints --help's text after the options; may be NULL */
    int solves;                   /* 1: the program can exit TF_EXIT_SOLVER */
} tf_cli_program;

enum { TF_CLI_MAX_OPTIONS = 96 };

/* Parses argv into values (the program's struct, holding its defaults) by
 * p's table.  --help prints tf_cli_usage on stdout, --version the version.
 * Refused, with one line on stderr naming the option as its long name:
 * an unknown option, an ambiguous abbreviation, a missing value, a value
 * to a flag, a value outside its kind or range, a missing required option
 * or operand, an option given without the one it needs, an operand too
 * many.  With no argument at all and a required operand, the usage goes
 * to stderr instead.  Resets getopt (optind = 0) first.
 *
 * Returns TF_CLI_CONTINUE to go on (then the lists in values are the
 * caller's: release them with tf_cli_free), or the exit status: 0 after
 * --help or --version, TF_EXIT_USAGE after a complaint (the lists are
 * freed and zeroed then). */
int tf_cli_parse(const tf_cli_program *p, int argc, char **argv, void *values);

/* Frees the lists of p's TF_CLI_LIST and TF_CLI_OPERANDS rows in values
 * and zeroes them. */
void tf_cli_free(const tf_cli_program *p, void *values);

/* Prints --help: the synopsis, the options (with -h, --help and
 * --version), the notes, and the exit statuses the program uses. */
void tf_cli_usage(const tf_cli_program *p, FILE *f);

/* Prints "built-in schedules: GPipe 1F1B ...", wrapped, for a program's
 * notes. */
void tf_cli_print_schedules(FILE *f);

/* Something the command line lacks (what: "no profile given"): with no
 * argument at all (argc <= 1) prints the usage on stderr, else "PROG: WHAT
 * (see --help)".  Returns TF_EXIT_USAGE. */
int tf_cli_missing(const tf_cli_program *p, int argc, const char *what);

/* Prints "PROG: OPTION: expected WHAT, got "VALUE"".  Returns
 * TF_EXIT_USAGE. */
int tf_cli_bad_value(const char *prog, const char *option, const char *what, const char *value);

/* The whole of text as a finite number (strtod) / a base-10 integer in
 * [min, max].  Return 0, or -1 (nothing printed: the caller words it). */
int tf_cli_parse_number(const char *text, double *out);
int tf_cli_parse_int(const char *text, long min, long max, int *out);

/* A byte count: digits (a fraction allowed when a unit follows) and an
 * optional unit, no space: B (or none) bytes; kB or KB, MB, GB, TB, PB
 * powers of 1000; KiB, MiB, GiB, TiB, PiB powers of 1024.  "80GiB" is
 * 80 x 2^30, "80GB" 80 x 10^9, "1.5KiB" 1536.  Returns 0, or -1 for
 * anything else: no digits, another unit, a negative value, a fraction
 * of a byte, more than UINT64_MAX. */
int tf_cli_parse_size(const char *text, uint64_t *out);

/* TF_CLI_CUSTOM parsers for options several programs share:
 * --objective into a tf_objective, --solver into a tf_solver, --schedule
 * into a const char * (a built-in schedule's official spelling, any letter
 * case accepted). */
int tf_cli_objective(const char *text, void *field, const char **expected);
int tf_cli_solver(const char *text, void *field, const char **expected);
int tf_cli_schedule(const char *text, void *field, const char **expected);

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

/* The exit status of a library call's result: 0 for 0, TF_EXIT_SOLVER for
 * TF_ESOLVER, TF_EXIT_INPUT for any other TF_E* code. */
int tf_cli_status(int rc);

#endif
