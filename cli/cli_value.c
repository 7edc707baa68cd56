/* cli_value.c - an option's value: the parsers of every kind, their range
 * checks and the wording of what each expects (cli.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "tf/objective.h"
#include "tf/schedule.h"

int tf_cli_parse_number(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    /* ERANGE on underflow still gives a usable value (0 or a denormal);
     * only overflow, which strtod answers with HUGE_VAL, is refused. */
    if (end == text || *end || !isfinite(v))
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

/* Size units: the suffix and how many bytes it stands for. */
static const struct {
    const char *suffix;
    uint64_t bytes;
} size_units[] = {
    {"", 1},
    {"B", 1},
    {"kB", 1000},
    {"KB", 1000},
    {"MB", 1000000},
    {"GB", 1000000000},
    {"TB", 1000000000000},
    {"PB", 1000000000000000},
    {"KiB", (uint64_t)1 << 10},
    {"MiB", (uint64_t)1 << 20},
    {"GiB", (uint64_t)1 << 30},
    {"TiB", (uint64_t)1 << 40},
    {"PiB", (uint64_t)1 << 50},
};

/* The bytes of a unit suffix, or 0 when it is none of size_units. */
static uint64_t unit_bytes(const char *suffix)
{
    for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++)
        if (strcmp(suffix, size_units[i].suffix) == 0)
            return size_units[i].bytes;
    return 0;
}

/* Digits, a point and digits: a fraction is read as a double, so a size
 * in plain bytes is read exactly by strtoull and only "1.5GiB" goes
 * through floating point (whose 53 bits hold any whole number of bytes up
 * to 8 PiB). */
int tf_cli_parse_size(const char *text, uint64_t *out)
{
    size_t digits = strspn(text, "0123456789");
    size_t number = digits + (text[digits] == '.' ? 1 + strspn(text + digits + 1, "0123456789")
                                                  : 0);
    uint64_t unit = unit_bytes(text + number);
    if (digits == 0 || unit == 0 || (number > digits && number == digits + 1))
        return -1;
    if (number == digits) {
        errno = 0;
        unsigned long long n = strtoull(text, NULL, 10);
        if (errno || n > UINT64_MAX / unit)
            return -1;
        *out = (uint64_t)n * unit;
        return 0;
    }
    double bytes = strtod(text, NULL) * (double)unit;
    /* 2^64 is the first double above UINT64_MAX. */
    if (bytes != floor(bytes) || !(bytes < 18446744073709551616.0))
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}

void cli_join_choices(const tf_cli_choice *choices, const char *sep, const char *last,
                      char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (const tf_cli_choice *c = choices; c->name && used < cap; c++) {
        const char *before = c == choices ? "" : (c[1].name ? sep : last);
        used += (size_t)snprintf(out + used, cap - used, "%s%s", before, c->name);
    }
}

/* Interval notation for a range whose lower end may be open: "[0, 1]",
 * "(0, 1]", or ">= 0" and "> 0" without an upper end. */
static void word_range(const char *what, double min, double max, int above_min,
                       char *out, size_t cap)
{
    if (isinf(max))
        snprintf(out, cap, "%s %s %.15g", what, above_min ? ">" : ">=", min);
    else
        snprintf(out, cap, "%s in %c%.15g, %.15g]", what, above_min ? '(' : '[', min, max);
}

static int read_int(const tf_cli_option *o, const char *text, int *field, char *expected,
                    size_t cap)
{
    if (tf_cli_parse_int(text, (long)o->min, (long)o->max, field) == 0)
        return 0;
    snprintf(expected, cap, "an integer in [%ld, %ld]", (long)o->min, (long)o->max);
    return -1;
}

/* NUMBER and RATIO: RATIO is NUMBER in [0, 1]. */
static int read_number(const tf_cli_option *o, const char *text, double *field, char *expected,
                       size_t cap)
{
    double min = o->kind == TF_CLI_RATIO ? 0.0 : o->min;
    double max = o->kind == TF_CLI_RATIO ? 1.0 : o->max;
    int above_min = (o->flags & TF_CLI_ABOVE_MIN) != 0;
    double v;
    if (tf_cli_parse_number(text, &v) == 0 && (above_min ? v > min : v >= min) && v <= max) {
        *field = v;
        return 0;
    }
    word_range("a number", min, max, above_min, expected, cap);
    return -1;
}

static int read_size(const tf_cli_option *o, const char *text, uint64_t *field, char *expected,
                     size_t cap)
{
    uint64_t v;
    if (tf_cli_parse_size(text, &v) == 0 && (double)v >= o->min && (double)v <= o->max) {
        *field = v;
        return 0;
    }
    size_t n = (size_t)snprintf(expected, cap, "a size such as 4096, 512MiB or 80GB");
    if (n >= cap)
        return -1;
    if (isinf(o->max) && o->min > 0)
        snprintf(expected + n, cap - n, ", at least %.15g bytes", o->min);
    else if (!isinf(o->max))
        snprintf(expected + n, cap - n, ", from %.15g to %.15g bytes", o->min, o->max);
    return -1;
}

static int read_choice(const tf_cli_option *o, const char *text, int *field, char *expected,
                       size_t cap)
{
    for (const tf_cli_choice *c = o->choices; c->name; c++)
        if (strcmp(text, c->name) == 0) {
            *field = c->value;
            return 0;
        }
    cli_join_choices(o->choices, ", ", " or ", expected, cap);
    return -1;
}

static int read_custom(const tf_cli_option *o, const char *text, void *field, char *expected,
                       size_t cap)
{
    const char *wording = "something else";
    if (o->parse(text, field, &wording) == 0)
        return 0;
    snprintf(expected, cap, "%s", wording);
    return -1;
}

int cli_read_value(const tf_cli_option *o, const char *text, void *field, char *expected,
                   size_t cap)
{
    switch (o->kind) {
    case TF_CLI_TEXT: *(const char **)field = text; return 0;
    case TF_CLI_PATH:
        snprintf(expected, cap, "a file name");
        return *text ? (*(const char **)field = text, 0) : -1;
    case TF_CLI_INT: return read_int(o, text, field, expected, cap);
    case TF_CLI_NUMBER:
    case TF_CLI_RATIO: return read_number(o, text, field, expected, cap);
    case TF_CLI_SIZE: return read_size(o, text, field, expected, cap);
    case TF_CLI_CHOICE: return read_choice(o, text, field, expected, cap);
    case TF_CLI_CUSTOM: return read_custom(o, text, field, expected, cap);
    default: snprintf(expected, cap, "no value"); return -1;
    }
}

int cli_takes_value(const tf_cli_option *o)
{
    return o->kind != TF_CLI_FLAG;
}

int cli_is_option(const tf_cli_option *o)
{
    return o->kind != TF_CLI_SECTION && o->kind != TF_CLI_OPERAND &&
           o->kind != TF_CLI_OPERANDS;
}

int tf_cli_objective(const char *text, void *field, const char **expected)
{
    *expected = "least-freeze or spread";
    return tf_objective_parse(text, field) == 0 ? 0 : -1;
}

int tf_cli_solver(const char *text, void *field, const char **expected)
{
    *expected = "auto, lp_solve, clp or fast";
    return tf_solver_parse(text, field) == 0 ? 0 : -1;
}

int tf_cli_schedule(const char *text, void *field, const char **expected)
{
    /* The names come from the planner, the one list of them; a program
     * parses its command line on one thread, so one buffer serves. */
    static char wording[256];
    const char *name = tf_schedule_canonical_name(text);
    if (!name) {
        snprintf(wording, sizeof wording, "a built-in schedule (%s)",
                 tf_schedule_builtin_names());
        *expected = wording;
        return -1;
    }
    *(const char **)field = name;
    return 0;
}
