/* test_cli.c - the option layer (cli/cli.h): every kind of value read into
 * its field, getopt's spellings, every complaint word for word with its
 * exit status, the operands and lists, --help, and the byte-size parser. */
#include "test_util.h"

#include <math.h>
#include <unistd.h>

#include "cli.h"
#include "tf/freeze.h"

/* --- running tf_cli_parse with stdout and stderr captured ------------- */

typedef struct captured {
    int rc;
    char out[16384], err[4096];
} captured;

/* Reads what fd `saved` replaced back from f, restores fd `fd`. */
static void restore(int fd, int saved, FILE *f, char *text, size_t cap)
{
    fflush(fd == 1 ? stdout : stderr);
    dup2(saved, fd);
    close(saved);
    rewind(f);
    size_t n = fread(text, 1, cap - 1, f);
    text[n] = '\0';
    fclose(f);
}

/* Parses the NULL-terminated words (argv[0] first) into values. */
static void parse_words(const tf_cli_program *p, const char *const *words, void *values,
                        captured *c)
{
    char *argv[64];
    int argc = 0;
    while (words[argc]) {
        argv[argc] = (char *)words[argc];
        argc++;
    }
    argv[argc] = NULL;
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    c->rc = tf_cli_parse(p, argc, argv, values);
    restore(1, saved_out, out, c->out, sizeof c->out);
    restore(2, saved_err, err, c->err, sizeof c->err);
}

/* --- a program with one of each kind ---------------------------------- */

typedef struct all_kinds {
    const char *input, *output, *title, *schedule;
    int quiet, count, progress, auto_plan;
    double number, ratio, cap;
    uint64_t memory;
    tf_objective objective;
    tf_solver solver;
    const char *plan_out;
} all_kinds;

static const tf_cli_choice progress_choices[] = {{"auto", -1}, {"bar", 1}, {"lines", 0},
                                                  {NULL, 0}};

#define AT(field) offsetof(all_kinds, field)

static const tf_cli_option all_options[] = {
    {.name = "input", .kind = TF_CLI_OPERAND, .offset = AT(input)},
    {"output", 'o', TF_CLI_PATH, AT(output), .arg = "FILE", .help = "write here"},
    {"title", 0, TF_CLI_TEXT, AT(title), .arg = "TEXT", .help = "a title"},
    {"quiet", 'q', TF_CLI_FLAG, AT(quiet), .help = "say nothing"},
    {"jobs", 'j', TF_CLI_INT, AT(count), 1, 1024, .arg = "N", .help = "how many"},
    {"width", 0, TF_CLI_NUMBER, AT(number), 0, INFINITY, .flags = TF_CLI_ABOVE_MIN,
     .arg = "W", .help = "a width"},
    {"max-freeze-ratio", 0, TF_CLI_RATIO, AT(ratio), .arg = "R", .help = "a ratio"},
    {"max-action-ratio", 0, TF_CLI_RATIO, AT(cap), .flags = TF_CLI_ABOVE_MIN, .arg = "R",
     .help = "a ratio above 0"},
    {"memory-limit", 0, TF_CLI_SIZE, AT(memory), 1024, INFINITY, .arg = "BYTES",
     .help = "a size"},
    {"progress", 0, TF_CLI_CHOICE, AT(progress), .choices = progress_choices,
     .help = "how to show progress"},
    {"schedule", 0, TF_CLI_CUSTOM, AT(schedule), .parse = tf_cli_schedule, .arg = "NAME",
     .help = "a schedule"},
    {"objective", 0, TF_CLI_CUSTOM, AT(objective), .parse = tf_cli_objective, .arg = "NAME",
     .help = "an objective"},
    {"solver", 0, TF_CLI_CUSTOM, AT(solver), .parse = tf_cli_solver, .arg = "NAME",
     .help = "a solver"},
    {"auto-plan", 0, TF_CLI_FLAG, AT(auto_plan), .help = "plan in the run"},
    {"plan-out", 0, TF_CLI_PATH, AT(plan_out), .needs = "auto-plan", .arg = "FILE",
     .help = "only with --auto-plan"},
};

static const tf_cli_program all_program = {
    "prog", "1.2.3", "usage: prog INPUT [options]\n", all_options,
    sizeof all_options / sizeof all_options[0], NULL, 1};

static void defaults(all_kinds *a)
{
    memset(a, 0, sizeof *a);
    a->count = 7;
    a->progress = -1;
    a->ratio = 0.9;
    a->cap = 1.0;
    a->solver = TF_SOLVER_AUTO;
}

/* Every kind read into its field, short and long, "--x=v" and "--x v". */
static void test_every_kind(void **state)
{
    (void)state;
    all_kinds a;
    captured c;
    defaults(&a);
    const char *words[] = {"prog", "in.json", "-oout.json", "--title=A B", "-q", "-j", "12",
                           "--width", "2.5e2", "--max-freeze-ratio=0", "--max-action-ratio",
                           "0.25", "--memory-limit", "80GiB", "--progress", "lines",
                           "--schedule", "zbvzerobubble", "--objective", "spread",
                           "--solver=fast", NULL};
    parse_words(&all_program, words, &a, &c);
    assert_int_equal(c.rc, TF_CLI_CONTINUE);
    assert_string_equal(c.err, "");
    assert_string_equal(a.input, "in.json");
    assert_string_equal(a.output, "out.json");
    assert_string_equal(a.title, "A B");
    assert_int_equal(a.quiet, 1);
    assert_int_equal(a.count, 12);
    assert_true(a.number == 250.0);
    assert_true(a.ratio == 0.0);
    assert_true(a.cap == 0.25);
    assert_true(a.memory == (uint64_t)80 << 30);
    assert_int_equal(a.progress, 0);
    assert_string_equal(a.schedule, "ZBVZeroBubble");
    assert_int_equal(a.objective, TF_OBJECTIVE_SPREAD);
    assert_int_equal(a.solver, TF_SOLVER_FAST);
}

/* What the command line does not give keeps the program's default. */
static void test_defaults_kept(void **state)
{
    (void)state;
    all_kinds a;
    captured c;
    defaults(&a);
    const char *words[] = {"prog", "--jobs=3", "in.json", NULL};
    parse_words(&all_program, words, &a, &c);
    assert_int_equal(c.rc, TF_CLI_CONTINUE);
    assert_int_equal(a.count, 3);
    assert_int_equal(a.progress, -1);
    assert_true(a.ratio == 0.9);
    assert_true(a.cap == 1.0);
    assert_null(a.output);
    assert_int_equal(a.quiet, 0);
}

/* Unique abbreviations, "-j1", and "--" before an operand that looks like
 * an option. */
static void test_getopt_spellings(void **state)
{
    (void)state;
    all_kinds a;
    captured c;
    defaults(&a);
    const char *words[] = {"prog", "--max-f", "0.5", "-j1", "--", "-in.json", NULL};
    parse_words(&all_program, words, &a, &c);
    assert_int_equal(c.rc, TF_CLI_CONTINUE);
    assert_true(a.ratio == 0.5);
    assert_int_equal(a.count, 1);
    assert_string_equal(a.input, "-in.json");
}

/* One bad command line: the status and stderr, word for word. */
static void expect_complaint(const char *const *words, const char *message)
{
    all_kinds a;
    captured c;
    defaults(&a);
    parse_words(&all_program, words, &a, &c);
    assert_int_equal(c.rc, TF_EXIT_USAGE);
    assert_string_equal(c.err, message);
    assert_string_equal(c.out, "");
}

static void test_bad_values(void **state)
{
    (void)state;
    const char *jobs0[] = {"prog", "x", "-j0", NULL};
    expect_complaint(jobs0, "prog: --jobs: expected an integer in [1, 1024], got \"0\"\n");
    const char *jobs_big[] = {"prog", "x", "--jobs", "99999999999999999999", NULL};
    expect_complaint(jobs_big,
                     "prog: --jobs: expected an integer in [1, 1024], got "
                     "\"99999999999999999999\"\n");
    const char *jobs_text[] = {"prog", "x", "--jobs", "4x", NULL};
    expect_complaint(jobs_text, "prog: --jobs: expected an integer in [1, 1024], got \"4x\"\n");
    const char *width0[] = {"prog", "x", "--width", "0", NULL};
    expect_complaint(width0, "prog: --width: expected a number > 0, got \"0\"\n");
    const char *width_inf[] = {"prog", "x", "--width", "inf", NULL};
    expect_complaint(width_inf, "prog: --width: expected a number > 0, got \"inf\"\n");
    const char *ratio2[] = {"prog", "x", "--max-freeze-ratio=2", NULL};
    expect_complaint(ratio2, "prog: --max-freeze-ratio: expected a number in [0, 1], got \"2\"\n");
    const char *cap0[] = {"prog", "x", "--max-action-ratio", "0", NULL};
    expect_complaint(cap0, "prog: --max-action-ratio: expected a number in (0, 1], got \"0\"\n");
    const char *size[] = {"prog", "x", "--memory-limit", "80G", NULL};
    expect_complaint(size, "prog: --memory-limit: expected a size such as 4096, 512MiB or 80GB, "
                           "at least 1024 bytes, got \"80G\"\n");
    const char *choice[] = {"prog", "x", "--progress", "dots", NULL};
    expect_complaint(choice, "prog: --progress: expected auto, bar or lines, got \"dots\"\n");
    const char *schedule[] = {"prog", "x", "--schedule", "Zigzag", NULL};
    expect_complaint(schedule,
                     "prog: --schedule: expected a built-in schedule (GPipe 1F1B Interleaved1F1B "
                     "LoopedBFS InterleavedZeroBubble ZBVZeroBubble DualPipeV), got \"Zigzag\"\n");
    const char *objective[] = {"prog", "x", "--objective", "most", NULL};
    expect_complaint(objective,
                     "prog: --objective: expected least-freeze or spread, got \"most\"\n");
    const char *solver[] = {"prog", "x", "--solver", "bogus", NULL};
    expect_complaint(solver, "prog: --solver: expected auto, lp_solve, clp or fast, got \"bogus\"\n");
    const char *path[] = {"prog", "x", "-o", "", NULL};
    expect_complaint(path, "prog: --output: expected a file name, got \"\"\n");
}

static void test_bad_options(void **state)
{
    (void)state;
    const char *unknown[] = {"prog", "x", "--frobnicate=3", NULL};
    expect_complaint(unknown, "prog: --frobnicate: unknown option (see --help)\n");
    const char *unknown_short[] = {"prog", "x", "-z", NULL};
    expect_complaint(unknown_short, "prog: -z: unknown option (see --help)\n");
    /* In a cluster after a long option: named by the letter, not by the
     * argument before it. */
    const char *in_cluster[] = {"prog", "x", "--quiet", "-qz", NULL};
    expect_complaint(in_cluster, "prog: -z: unknown option (see --help)\n");
    const char *missing[] = {"prog", "x", "--output", NULL};
    expect_complaint(missing, "prog: --output: missing value (see --help)\n");
    const char *missing_short[] = {"prog", "x", "-j", NULL};
    expect_complaint(missing_short, "prog: -j: missing value (see --help)\n");
    const char *flag_value[] = {"prog", "x", "--quiet=yes", NULL};
    expect_complaint(flag_value, "prog: --quiet: takes no value (see --help)\n");
    const char *ambiguous[] = {"prog", "x", "--max", "1", NULL};
    expect_complaint(ambiguous, "prog: --max: ambiguous, could be --max-freeze-ratio, "
                                "--max-action-ratio (see --help)\n");
    const char *needs[] = {"prog", "x", "--plan-out", "p.json", NULL};
    expect_complaint(needs, "prog: --plan-out: only with --auto-plan\n");
    const char *two[] = {"prog", "x", "y", NULL};
    expect_complaint(two, "prog: unexpected argument \"y\" (one input at a time)\n");
    const char *none[] = {"prog", "-q", NULL};
    expect_complaint(none, "prog: no input given (see --help)\n");
}

/* An option with the one it needs passes; no arguments at all print the
 * usage on stderr. */
static void test_needs_and_bare(void **state)
{
    (void)state;
    all_kinds a;
    captured c;
    defaults(&a);
    const char *with[] = {"prog", "x", "--plan-out", "p.json", "--auto-plan", NULL};
    parse_words(&all_program, with, &a, &c);
    assert_int_equal(c.rc, TF_CLI_CONTINUE);
    assert_string_equal(a.plan_out, "p.json");
    defaults(&a);
    const char *bare[] = {"prog", NULL};
    parse_words(&all_program, bare, &a, &c);
    assert_int_equal(c.rc, TF_EXIT_USAGE);
    assert_true(strncmp(c.err, "usage: prog INPUT", 17) == 0);
    assert_string_equal(c.out, "");
}

/* --help on stdout: every option, its metavar, choices joined by "|", the
 * exit statuses (3 because the program solves), no line past column 79. */
static void test_help(void **state)
{
    (void)state;
    all_kinds a;
    captured c;
    defaults(&a);
    const char *words[] = {"prog", "--help", NULL};
    parse_words(&all_program, words, &a, &c);
    assert_int_equal(c.rc, 0);
    assert_string_equal(c.err, "");
    assert_contains(c.out, "usage: prog INPUT [options]\n\noptions:\n");
    assert_contains(c.out, "\n  -o, --output FILE          write here\n");
    assert_contains(c.out, "\n  --progress auto|bar|lines  how to show progress\n");
    assert_contains(c.out, "\n  -q, --quiet                say nothing\n");
    assert_contains(c.out, "\n  -h, --help                 show this help\n");
    assert_contains(c.out, "\n  --version                  show the version\n");
    assert_contains(c.out, "\nexit status:\n  0  success\n");
    assert_contains(c.out, "\n  2  a bad command line");
    assert_contains(c.out, "\n  3  the LP solver failed\n");
    for (const char *line = c.out; *line; line += strcspn(line, "\n") + 1)
        assert_true(strcspn(line, "\n") <= 79);
    const char *version[] = {"prog", "--version", NULL};
    parse_words(&all_program, version, &a, &c);
    assert_int_equal(c.rc, 0);
    assert_string_equal(c.out, "prog 1.2.3\n");
}

/* --- operands, lists and required options (tf-import's shape) --------- */

typedef struct lists {
    tf_cli_list traces, frozen;
    const char *output;
    int quiet;
} lists;

#undef AT
#define AT(field) offsetof(lists, field)

static const tf_cli_option list_options[] = {
    {.name = "trace", .kind = TF_CLI_OPERANDS, .offset = AT(traces), .min = 1},
    {"output", 'o', TF_CLI_PATH, AT(output), .flags = TF_CLI_REQUIRED, .arg = "FILE",
     .help = "where"},
    {"frozen", 0, TF_CLI_LIST, AT(frozen), .arg = "TRACE...", .help = "frozen traces"},
    {"quiet", 'q', TF_CLI_FLAG, AT(quiet), .help = "quiet"},
};

static const tf_cli_program list_program = {
    "imp", NULL, "usage: imp TRACE... -o FILE\n", list_options,
    sizeof list_options / sizeof list_options[0], NULL, 0};

/* Parses words into l and checks the two lists, joined by spaces. */
static void expect_lists(const char *const *words, const char *traces, const char *frozen)
{
    lists l = {0};
    captured c;
    char got[256];
    parse_words(&list_program, words, &l, &c);
    assert_int_equal(c.rc, TF_CLI_CONTINUE);
    const tf_cli_list *which[] = {&l.traces, &l.frozen};
    const char *want[] = {traces, frozen};
    for (int k = 0; k < 2; k++) {
        got[0] = '\0';
        for (int i = 0; i < which[k]->n; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? " " : "",
                     which[k]->items[i]);
        assert_string_equal(got, want[k]);
    }
    tf_cli_free(&list_program, &l);
    assert_null(l.traces.items);
    assert_int_equal(l.frozen.n, 0);
}

static void test_lists(void **state)
{
    (void)state;
    /* A bare --frozen takes the operands after it, up to the next option. */
    const char *bare[] = {"imp", "a", "--frozen", "b", "c", "-q", "d", "-o", "p.json", NULL};
    expect_lists(bare, "a d", "b c");
    /* --frozen=X takes X alone. */
    const char *joined[] = {"imp", "--frozen=b", "a", "-o", "p.json", NULL};
    expect_lists(joined, "a", "b");
    const char *twice[] = {"imp", "a", "--frozen", "b", "-o", "p", "--frozen=c", NULL};
    expect_lists(twice, "a", "b c");
}

static void expect_list_complaint(const char *const *words, const char *message)
{
    lists l = {0};
    captured c;
    parse_words(&list_program, words, &l, &c);
    assert_int_equal(c.rc, TF_EXIT_USAGE);
    assert_string_equal(c.err, message);
    /* Freed on a complaint: nothing for the caller to release. */
    assert_null(l.traces.items);
    assert_null(l.frozen.items);
}

static void test_list_complaints(void **state)
{
    (void)state;
    const char *empty[] = {"imp", "a", "--frozen", "-o", "p.json", NULL};
    expect_list_complaint(empty, "imp: --frozen: missing value (see --help)\n");
    const char *no_output[] = {"imp", "a", "b", NULL};
    expect_list_complaint(no_output, "imp: --output: required (see --help)\n");
    const char *no_trace[] = {"imp", "-o", "p.json", NULL};
    expect_list_complaint(no_trace, "imp: no trace given (see --help)\n");
    const char *version[] = {"imp", "a", "--version", NULL};
    expect_list_complaint(version, "imp: --version: unknown option (see --help)\n");
    /* Without 3 the program lists no solver status. */
    lists l = {0};
    captured c;
    const char *help[] = {"imp", "--help", NULL};
    parse_words(&list_program, help, &l, &c);
    assert_int_equal(c.rc, 0);
    assert_contains(c.out, "\n  2  a bad command line");
    assert_null(strstr(c.out, "\n  3  "));
    assert_null(strstr(c.out, "--version"));
}

/* --- sizes ------------------------------------------------------------ */

static void expect_size(const char *text, uint64_t want)
{
    uint64_t got = 12345;
    if (tf_cli_parse_size(text, &got) != 0)
        fail_msg("\"%s\" refused, expected %llu", text, (unsigned long long)want);
    if (got != want)
        fail_msg("\"%s\" -> %llu, expected %llu", text, (unsigned long long)got,
                 (unsigned long long)want);
}

static void expect_no_size(const char *text)
{
    uint64_t got = 12345;
    if (tf_cli_parse_size(text, &got) == 0)
        fail_msg("\"%s\" read as %llu, expected a refusal", text, (unsigned long long)got);
    assert_true(got == 12345);
}

static void test_sizes(void **state)
{
    (void)state;
    expect_size("80GiB", 85899345920ULL);
    expect_size("80GB", 80000000000ULL);
    expect_size("4096", 4096);
    expect_size("4096B", 4096);
    expect_size("0", 0);
    expect_size("1kB", 1000);
    expect_size("1KB", 1000);
    expect_size("1KiB", 1024);
    expect_size("512MiB", 536870912ULL);
    expect_size("3MB", 3000000ULL);
    expect_size("2TB", 2000000000000ULL);
    expect_size("2TiB", 2199023255552ULL);
    expect_size("1PB", 1000000000000000ULL);
    expect_size("1.5KiB", 1536);
    expect_size("0.5GB", 500000000ULL);
    expect_size("18446744073709551615", UINT64_MAX);
    expect_size("16383PiB", 16383ULL << 50);
    expect_no_size("");
    expect_no_size("GiB");
    expect_no_size("-1");
    expect_no_size("+1");
    expect_no_size(" 1");
    expect_no_size("1.");
    expect_no_size(".5GB");
    expect_no_size("1.5");      /* a fraction of a byte */
    expect_no_size("0.3KiB");   /* 307.2 bytes */
    expect_no_size("80G");
    expect_no_size("80gib");
    expect_no_size("80 GiB");
    expect_no_size("1e3");
    expect_no_size("18446744073709551616");
    expect_no_size("16384PiB"); /* 2^64 */
    expect_no_size("20000PB");
}

/* --- the rest of the contract ------------------------------------------ */

static void test_statuses(void **state)
{
    (void)state;
    assert_int_equal(tf_cli_status(0), 0);
    assert_int_equal(tf_cli_status(TF_EINVAL), TF_EXIT_INPUT);
    assert_int_equal(tf_cli_status(TF_EIO), TF_EXIT_INPUT);
    assert_int_equal(tf_cli_status(TF_ERUNTIME), TF_EXIT_INPUT);
    assert_int_equal(tf_cli_status(TF_ESOLVER), TF_EXIT_SOLVER);
    int n = 0;
    assert_int_equal(tf_cli_parse_int("-3", -5, 5, &n), 0);
    assert_int_equal(n, -3);
    assert_int_equal(tf_cli_parse_int("6", -5, 5, &n), -1);
    double d = 0;
    assert_int_equal(tf_cli_parse_number("1e-3", &d), 0);
    assert_true(d == 1e-3);
    assert_int_equal(tf_cli_parse_number("1e999", &d), -1);
    assert_int_equal(tf_cli_parse_number("nan", &d), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind),     cmocka_unit_test(test_defaults_kept),
        cmocka_unit_test(test_getopt_spellings), cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_bad_options),    cmocka_unit_test(test_needs_and_bare),
        cmocka_unit_test(test_help),           cmocka_unit_test(test_lists),
        cmocka_unit_test(test_list_complaints), cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_statuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
