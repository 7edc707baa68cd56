/* cli.c - tf_cli_parse: getopt_long over a program's table of options, the
 * operands, and what the whole command line must hold (cli.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"

/* getopt_long's values: row i of the table is OPT_ROW + i; --help is 'h'. */
enum { OPT_HELP = 'h', OPT_ROW = 256, OPT_VERSION = OPT_ROW + TF_CLI_MAX_OPTIONS };

typedef struct parser {
    const tf_cli_program *p;
    char *values;                           /* the program's struct */
    int argc;
    unsigned char given[TF_CLI_MAX_OPTIONS]; /* which rows the command line gave */
    tf_cli_list *bare_list;                 /* where operands go after a bare LIST option */
} parser;

static void *field_of(const parser *ps, const tf_cli_option *o)
{
    return ps->values + o->offset;
}

/* getopt_long's tables for p: long options (row options, --help,
 * --version, the end) and short ones ("-:" first: operands come back in
 * place, so a bare LIST option can claim those after it, and getopt stays
 * quiet, so that bad_option words the complaint). */
static void getopt_tables(const tf_cli_program *p, struct option *longs, char *shorts)
{
    int n = 0;
    char *s = shorts;
    s += sprintf(s, "-:h");
    for (int i = 0; i < p->n_options; i++) {
        const tf_cli_option *o = &p->options[i];
        if (!cli_is_option(o))
            continue;
        int has_arg = o->kind == TF_CLI_LIST ? optional_argument
                      : cli_takes_value(o) ? required_argument
                                           : no_argument;
        longs[n++] = (struct option){o->name, has_arg, NULL, OPT_ROW + i};
        if (o->short_name)
            s += sprintf(s, "%c%s", o->short_name, has_arg == required_argument ? ":" : "");
    }
    longs[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
    if (p->version)
        longs[n++] = (struct option){"version", no_argument, NULL, OPT_VERSION};
    longs[n] = (struct option){NULL, 0, NULL, 0};
}

/* The row a short option names, or -1. */
static int short_row(const tf_cli_program *p, int c)
{
    for (int i = 0; i < p->n_options; i++)
        if (cli_is_option(&p->options[i]) && p->options[i].short_name == c)
            return i;
    return -1;
}

/* Whether "--PREFIX[=...]" abbreviates several long options and spells
 * none of them out whole (getopt_long takes an exact name over longer
 * ones). */
static int is_ambiguous(const struct option *longs, const char *arg)
{
    size_t len = strcspn(arg + 2, "=");
    int n = 0;
    for (const struct option *o = longs; o->name; o++) {
        if (strncmp(o->name, arg + 2, len) != 0)
            continue;
        if (strlen(o->name) == len)
            return 0;
        n++;
    }
    return n > 1;
}

/* "--sol" is ambiguous: names the candidates. */
static void say_ambiguous(const char *prog, const struct option *longs, const char *arg)
{
    size_t len = strcspn(arg + 2, "=");
    fprintf(stderr, "%s: %.*s: ambiguous, could be", prog, (int)(len + 2), arg);
    const char *sep = " ";
    for (const struct option *o = longs; o->name; o++)
        if (strncmp(o->name, arg + 2, len) == 0) {
            fprintf(stderr, "%s--%s", sep, o->name);
            sep = ", ";
        }
    fputs(" (see --help)\n", stderr);
}

/* After getopt_long returned '?' or ':': says which option and what was
 * wrong with it, as the user spelled it ("-x", "--frobnicate"). */
static int bad_option(const char *prog, int c, char *const *argv, const struct option *longs)
{
    /* getopt leaves the offending element at argv[optind - 1], except for
     * a short option inside a cluster ("-xq"), which only optopt names
     * (argv[optind - 1] is then the argument before the cluster). */
    const char *arg = argv[optind - 1];
    int is_long = strncmp(arg, "--", 2) == 0 &&
                  (optopt == 0 || optopt >= OPT_ROW || optopt == OPT_HELP);
    if (!is_long)
        fprintf(stderr, "%s: -%c: %s (see --help)\n", prog, optopt,
                c == ':' ? "missing value" : "unknown option");
    else if (c != ':' && !optopt && is_ambiguous(longs, arg))
        say_ambiguous(prog, longs, arg);
    else
        fprintf(stderr, "%s: %.*s: %s (see --help)\n", prog, (int)strcspn(arg, "="), arg,
                c == ':' ? "missing value" : optopt ? "takes no value" : "unknown option");
    return TF_EXIT_USAGE;
}

/* Appends text to list, whose room is the command line's length.
 * Returns 0, or TF_EXIT_INPUT when that room cannot be had. */
static int list_push(const char *prog, tf_cli_list *list, int argc, const char *text)
{
    if (!list->items)
        list->items = calloc((size_t)argc, sizeof *list->items);
    if (!list->items) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return TF_EXIT_INPUT;
    }
    list->items[list->n++] = text;
    return 0;
}

/* The program's operand row, or NULL when it takes none. */
static const tf_cli_option *operand_row(const tf_cli_program *p)
{
    for (int i = 0; i < p->n_options; i++)
        if (p->options[i].kind == TF_CLI_OPERAND || p->options[i].kind == TF_CLI_OPERANDS)
            return &p->options[i];
    return NULL;
}

/* A plain argument: to the list a bare LIST option opened, else to the
 * operands. */
static int take_operand(parser *ps, const char *text)
{
    const tf_cli_option *o = operand_row(ps->p);
    if (ps->bare_list)
        return list_push(ps->p->name, ps->bare_list, ps->argc, text);
    if (o && o->kind == TF_CLI_OPERANDS)
        return list_push(ps->p->name, field_of(ps, o), ps->argc, text);
    if (o && !*(const char **)field_of(ps, o)) {
        *(const char **)field_of(ps, o) = text;
        return 0;
    }
    fprintf(stderr, "%s: unexpected argument \"%s\" (%s%s%s)\n", ps->p->name, text,
            o ? "one " : "see --help", o ? o->name : "", o ? " at a time" : "");
    return TF_EXIT_USAGE;
}

/* Option row i with its value (NULL for a flag or a bare LIST option). */
static int take_option(parser *ps, int i, const char *value)
{
    const tf_cli_option *o = &ps->p->options[i];
    void *field = field_of(ps, o);
    ps->given[i] = 1;
    ps->bare_list = o->kind == TF_CLI_LIST && !value ? field : NULL;
    if (o->kind == TF_CLI_FLAG) {
        *(int *)field = 1;
    } else if (o->kind == TF_CLI_LIST) {
        if (value)
            return list_push(ps->p->name, field, ps->argc, value);
    } else {
        char expected[512], option[128];
        if (cli_read_value(o, value, field, expected, sizeof expected) < 0) {
            snprintf(option, sizeof option, "--%s", o->name);
            return tf_cli_bad_value(ps->p->name, option, expected, value);
        }
    }
    return 0;
}

/* The options and operands, up to the end of argv.  Returns
 * TF_CLI_CONTINUE, or the exit status. */
static int read_arguments(parser *ps, char **argv)
{
    const tf_cli_program *p = ps->p;
    struct option longs[TF_CLI_MAX_OPTIONS + 3];
    char shorts[3 + 2 * TF_CLI_MAX_OPTIONS + 1];
    getopt_tables(p, longs, shorts);
    optind = 0;
    opterr = 0;
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(ps->argc, argv, shorts, longs, NULL)) != -1) {
        int row = c >= OPT_ROW && c < OPT_VERSION ? c - OPT_ROW : short_row(p, c);
        if (c == 1) {
            rc = take_operand(ps, optarg);
        } else if (c == OPT_HELP) {
            tf_cli_usage(p, stdout);
            return 0;
        } else if (c == OPT_VERSION) {
            printf("%s %s\n", p->name, p->version);
            return 0;
        } else if (c == '?' || c == ':' || row < 0) {
            return bad_option(p->name, c, argv, longs);
        } else {
            rc = take_option(ps, row, optarg);
        }
    }
    /* After "--" every argument is an operand. */
    ps->bare_list = NULL;
    for (int i = optind; rc == 0 && i < ps->argc; i++)
        rc = take_operand(ps, argv[i]);
    return rc ? rc : TF_CLI_CONTINUE;
}

/* What the table asks of the whole command line: the operands, the
 * required options, the options another one needs, the values of bare
 * LIST options. */
static int check_whole(const parser *ps)
{
    const tf_cli_program *p = ps->p;
    const tf_cli_option *operand = operand_row(p);
    char what[160];
    if (operand && operand->kind == TF_CLI_OPERAND && !*(const char **)field_of(ps, operand)) {
        snprintf(what, sizeof what, "no %s given", operand->name);
        return tf_cli_missing(p, ps->argc, what);
    }
    if (operand && operand->kind == TF_CLI_OPERANDS &&
        ((const tf_cli_list *)field_of(ps, operand))->n < (int)operand->min) {
        snprintf(what, sizeof what, "no %s given", operand->name);
        return tf_cli_missing(p, ps->argc, what);
    }
    for (int i = 0; i < p->n_options; i++) {
        const tf_cli_option *o = &p->options[i];
        if ((o->flags & TF_CLI_REQUIRED) && !ps->given[i]) {
            snprintf(what, sizeof what, "--%s: required", o->name);
            return tf_cli_missing(p, ps->argc, what);
        }
        const tf_cli_list *list = field_of(ps, o);
        if (o->kind == TF_CLI_LIST && ps->given[i] && list->n == 0) {
            fprintf(stderr, "%s: --%s: missing value (see --help)\n", p->name, o->name);
            return TF_EXIT_USAGE;
        }
    }
    for (int i = 0; i < p->n_options; i++)
        for (int j = 0; ps->given[i] && p->options[i].needs && j < p->n_options; j++)
            if (cli_is_option(&p->options[j]) && !ps->given[j] &&
                strcmp(p->options[j].name, p->options[i].needs) == 0) {
                fprintf(stderr, "%s: --%s: only with --%s\n", p->name, p->options[i].name,
                        p->options[i].needs);
                return TF_EXIT_USAGE;
            }
    return TF_CLI_CONTINUE;
}

int tf_cli_parse(const tf_cli_program *p, int argc, char **argv, void *values)
{
    parser ps = {p, values, argc, {0}, NULL};
    if (p->n_options > TF_CLI_MAX_OPTIONS) {
        fprintf(stderr, "%s: %d options, more than tfcli's %d\n", p->name, p->n_options,
                TF_CLI_MAX_OPTIONS);
        return TF_EXIT_USAGE;
    }
    int rc = read_arguments(&ps, argv);
    if (rc == TF_CLI_CONTINUE)
        rc = check_whole(&ps);
    if (rc != TF_CLI_CONTINUE)
        tf_cli_free(p, values);
    return rc;
}

void tf_cli_free(const tf_cli_program *p, void *values)
{
    for (int i = 0; i < p->n_options; i++) {
        const tf_cli_option *o = &p->options[i];
        if (o->kind != TF_CLI_LIST && o->kind != TF_CLI_OPERANDS)
            continue;
        tf_cli_list *list = (tf_cli_list *)((char *)values + o->offset);
        free(list->items);
        *list = (tf_cli_list){NULL, 0};
    }
}

int tf_cli_missing(const tf_cli_program *p, int argc, const char *what)
{
    if (argc <= 1)
        tf_cli_usage(p, stderr);
    else
        fprintf(stderr, "%s: %s (see --help)\n", p->name, what);
    return TF_EXIT_USAGE;
}
