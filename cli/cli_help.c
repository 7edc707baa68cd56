/* cli_help.c - --help, written from a program's table (cli.h). */
#include <string.h>

#include "cli_internal.h"
#include "tf/schedule.h"

/* Where help texts start, and the last column they fill: an 80-column
 * terminal without wrapping its own. */
enum { HELP_COLUMN = 29, LAST_COLUMN = 79 };

/* Prints text from column `at` (the cursor is there), wrapped at word
 * boundaries to LAST_COLUMN and indented to `indent` on later lines; "\n"
 * in text breaks a line.  A word longer than a line gets a line of its
 * own. */
static void print_wrapped(FILE *f, const char *text, int at, int indent)
{
    int column = at, spaces = 0;
    while (*text) {
        if (*text == '\n') {
            fprintf(f, "\n%*s", indent, "");
            column = indent;
            spaces = 0;
            text++;
            continue;
        }
        if (*text == ' ') {
            spaces++;
            text++;
            continue;
        }
        /* One space between words, two after a sentence's end as written. */
        int len = (int)strcspn(text, " \n");
        int gap = column > indent ? (spaces >= 2 ? 2 : 1) : 0;
        if (gap && column + gap + len > LAST_COLUMN) {
            fprintf(f, "\n%*s", indent, "");
            column = indent;
            gap = 0;
        }
        fprintf(f, "%.*s%.*s", gap, "  ", len, text);
        column += gap + len;
        text += len;
        spaces = 0;
    }
    fputc('\n', f);
}

/* "  -o, --output FILE" (or "  --objective NAME"), padded to HELP_COLUMN,
 * or on a line of its own when longer; then the help. */
static void print_row(FILE *f, char short_name, const char *name, const char *arg,
                      const char *help)
{
    char left[256];
    if (short_name)
        snprintf(left, sizeof left, "  -%c, --%s%s%s", short_name, name, arg ? " " : "",
                 arg ? arg : "");
    else
        snprintf(left, sizeof left, "  --%s%s%s", name, arg ? " " : "", arg ? arg : "");
    if ((int)strlen(left) + 1 > HELP_COLUMN)
        fprintf(f, "%s\n%*s", left, HELP_COLUMN, "");
    else
        fprintf(f, "%-*s", HELP_COLUMN, left);
    print_wrapped(f, help ? help : "", HELP_COLUMN, HELP_COLUMN);
}

static void print_option(FILE *f, const tf_cli_option *o)
{
    char choices[256];
    const char *arg = o->arg;
    if (!arg && o->kind == TF_CLI_CHOICE) {
        cli_join_choices(o->choices, "|", "|", choices, sizeof choices);
        arg = choices;
    }
    print_row(f, o->short_name, o->name, cli_takes_value(o) ? arg : NULL, o->help);
}

/* A heading, and its text under it. */
static void print_section(FILE *f, const tf_cli_option *o)
{
    fprintf(f, "\n%s:\n", o->name);
    if (o->help) {
        fputs("  ", f);
        print_wrapped(f, o->help, 2, 2);
    }
}

static void print_exit_statuses(const tf_cli_program *p, FILE *f)
{
    fputs("\nexit status:\n"
          "  0  success\n"
          "  1  bad input (a file missing, unreadable or invalid), or a failure\n"
          "  2  a bad command line: an unknown option, a bad option value, options that\n"
          "     do not go together, an argument missing\n",
          f);
    if (p->solves)
        fputs("  3  the LP solver failed\n", f);
}

void tf_cli_usage(const tf_cli_program *p, FILE *f)
{
    fputs(p->synopsis, f);
    int sections = p->n_options > 0 && p->options[0].kind == TF_CLI_SECTION;
    if (!sections)
        fputs("\noptions:\n", f);
    for (int i = 0; i < p->n_options; i++) {
        const tf_cli_option *o = &p->options[i];
        if (o->kind == TF_CLI_SECTION)
            print_section(f, o);
        else if (cli_is_option(o))
            print_option(f, o);
    }
    if (sections)
        fputs("\nother:\n", f);
    print_row(f, 'h', "help", NULL, "show this help");
    if (p->version)
        print_row(f, 0, "version", NULL, "show the version");
    if (p->notes) {
        fputc('\n', f);
        p->notes(f);
    }
    print_exit_statuses(p, f);
}

void tf_cli_print_schedules(FILE *f)
{
    fputs("built-in schedules:", f);
    print_wrapped(f, tf_schedule_builtin_names(), 20, 2);
}
