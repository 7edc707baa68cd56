/* bench-solvers: the freeze-LP solvers side by side, end to end, in one run.
 *
 *   bench-solvers [--schedule NAME] [--ranks P] [--stages-per-rank V]
 *                 [--objective least-freeze|spread] [--limit S] [--solvers LIST]
 *                 [--python PATH] [--memory F] [--stage-times]
 *                 [--save-profiles DIR] [ACTIONS...]
 *
 * Default: 1F1B, 8 ranks, the schedule's default stages per rank, sizes
 * 2048 8192 32768 131072 actions, a limit of 300 s per solve, solvers
 * lp_solve,fast,clp,highs,scipy.  Each size is the jittered per-action profile of
 * bench_profile.h (the one bench-plan uses; with --stage-times its stage
 * times alone), with the microbatch count that
 * gives about that many actions (bench_microbatches_for; the row shows the
 * actual count), caps 0.8, objective least-freeze unless --objective says
 * spread (the HiGHS and SciPy rows then say "n/a": they solve
 * least-freeze only).
 *
 * What is timed: everything from the profile in memory to the plan result -
 * per-action durations, the DAG, the unfrozen and all-frozen bounds, the LP
 * (built and solved), the ratios, the planned longest path and the critical
 * actions.  For lp_solve, fast and clp that is tf_plan_from_profile with
 * tf_plan_options.solver set and no fallback, so that each row is that
 * solver's own; for HiGHS and SciPy the same steps in bench_pylp.c.  Not
 * timed: generating the profile, reading profile.json and writing plan.json
 * (JSON I/O is the same for every solver).  `solve_s` is the solver's own
 * share (LP build and solves, as the plan's solver.seconds reports it).
 * Both are wall-clock times; `cpu_s` is the CPU time the child (and, for
 * the Python rows, its interpreter) used from the fork (ru_utime +
 * ru_stime from wait4), the figure to read on a machine whose other jobs
 * leave a solve only part of a core; a timeout's row has none.
 *
 * Every solve runs in its own fork()ed child, one at a time, which sends its
 * figures back through a pipe.  A child still running after the limit is
 * killed (SIGKILL) and its row says "timeout".  Memory: `peak_MiB` is the
 * child's peak resident set (ru_maxrss from wait4), reported as measured,
 * nothing subtracted.  Two baselines for the reader to subtract:
 * `parent_MiB`, the parent's resident set at the fork (statm; it holds the
 * profile), and `idle_MiB`, the peak of a child forked at the same point that
 * exits at once.  A child inherits the parent's anonymous pages (heap,
 * profile) but not its resident file-backed pages (shared libraries), which
 * it counts only once it touches them, so the child's starting point is
 * idle_MiB, usually below parent_MiB; peak_MiB - idle_MiB is the solve's own.
 *
 * Agreement: `vs_lp_solve` gives each solver's batch time relative to
 * lp_solve's and the difference of the total freeze (sum of ratios); the
 * solvers solve the same lexicographic LP, so both should be ~0; beyond
 * tf-plan's test tolerances (1e-9 relative, 1e-6) the row ends in "DIFFERS".
 * The last row of each size is the speed-up (the reference's seconds /
 * each other solver's): over lp_solve, else over the first general solver
 * chosen (CLP, HiGHS, SciPy).
 *
 * HiGHS is not packaged for
 * Debian 12: its rows run native HiGHS through its Python interface
 * (highspy), and the SciPy rows scipy.optimize.linprog(method="highs"),
 * both by bench/solve_lp.py under --python (default: the PyTorch
 * environment's python, which has both), and say "not installed" where it
 * cannot import them (bench_pylp.h).  Their child runs Python as a
 * grandchild: ru_maxrss from wait4 covers it (Linux folds a reaped child's
 * peak into its parent's), and a timeout kills the child's whole process
 * group.
 *
 * Exit status (the toolkit's, cli.h): 0 when every solve finished or timed
 * out (timeouts are measurements), 1 when a profile could not be made or
 * saved, 2 for a bad command line, 3 when a solver failed or its child
 * crashed.
 * Like bench-plan, it asserts nothing about speed.
 */
#define _DEFAULT_SOURCE /* wait4 */
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_profile.h"
#include "cli.h"
#include "tf/freeze.h"
#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/schedule.h"
#include "tf/util.h"
#include "bench_pylp.h"

enum {
    SOLVER_LP_SOLVE = 0,
    SOLVER_FAST = 1,
    SOLVER_CLP = 2,
    SOLVER_HIGHS = 3,
    SOLVER_SCIPY = 4,
    N_SOLVERS = 5
};

/* The name of a SOLVER_* index, as --solvers and the rows spell it. */
static const char *solver_label(int solver)
{
    switch (solver) {
    case SOLVER_LP_SOLVE: return "lp_solve";
    case SOLVER_FAST: return "fast";
    case SOLVER_CLP: return "clp";
    case SOLVER_HIGHS: return "highs";
    default: return "scipy";
    }
}

/* Whether the Python solvers can run: per bench_pylp_solver, its version,
 * or why it cannot run. */
typedef struct python_rows {
    int available[2];
    char text[2][4200];
} python_rows;

/* Whether a SOLVER_* index runs in Python (bench_pylp.h), and which. */
static int python_solver(int solver, bench_pylp_solver *which)
{
    *which = solver == SOLVER_SCIPY ? BENCH_PYLP_SCIPY : BENCH_PYLP_HIGHS;
    return solver == SOLVER_HIGHS || solver == SOLVER_SCIPY;
}

#define MAX_SIZES 64

typedef struct bench_options {
    const char *schedule;        /* canonical built-in name */
    int ranks;
    int stages_per_rank;         /* 0: the schedule's default */
    double limit;                /* seconds per solve */
    tf_objective objective;
    int use[N_SOLVERS];          /* solvers to run */
    bench_pylp python;           /* the Python solvers' interpreter and script */
    const char *profile_dir;     /* where to save each size's profile, or NULL */
    double memory;               /* > 0: memory and a limit that binds (bench_add_memory) */
    int stage_times;             /* every action its stage's time (bench_stage_times_only) */
    tf_cli_list actions;         /* the ACTIONS operands */
    int sizes[MAX_SIZES];
    int n_sizes;
} bench_options;

/* What a child sends back through the pipe (well under PIPE_BUF, so one
 * write is atomic). */
typedef struct solve_report {
    int rc;                      /* 0 or a TF_E* code */
    double seconds;              /* end to end */
    double solve_seconds;        /* the solver's own share */
    double batch_ms, total_freeze;
    int variables, constraints;
    char solver[32];             /* the solver that ran, as the plan names it */
    bench_memory_rows memory_rows; /* with --memory, a tf plan's: its limit rows */
    char msg[512];               /* the error message when rc != 0 */
} solve_report;

typedef enum {
    RUN_OK,
    RUN_FAILED,
    RUN_TIMEOUT,
    RUN_CRASHED,
    RUN_NOT_INSTALLED,
    RUN_NOT_APPLICABLE
} run_outcome;

typedef struct measurement {
    run_outcome outcome;
    solve_report report;
    double peak_mib;             /* child's ru_maxrss */
    double cpu_seconds;          /* child's user + system time */
    int wait_status;             /* for RUN_CRASHED */
} measurement;

static const char synopsis[] =
    "usage: bench-solvers [--schedule NAME] [--ranks P] [--stages-per-rank V]\n"
    "                     [--objective least-freeze|spread] [--limit S]\n"
    "                     [--solvers LIST] [--python PATH]\n"
    "                     [--memory F] [--stage-times] [--save-profiles DIR]\n"
    "                     [ACTIONS...]\n"
    "\n"
    "Times the freeze-LP solvers end to end (profile in memory -> DAG -> LP -> plan)\n"
    "on synthetic profiles of about ACTIONS actions (default 2048 8192 32768\n"
    "131072), each solve in a fork()ed child: seconds, peak memory, batch time and\n"
    "total freeze found, and the speed-up over lp_solve (else over the first of\n"
    "clp, highs, scipy chosen).  A solve that times out is a measurement; one that\n"
    "fails or crashes exits 3 after the other rows.\n";

static void notes(FILE *f)
{
    tf_cli_print_schedules(f);
    fprintf(f, "--python by default: %s\n", TF_BENCH_PYTHON);
}

/* --solvers LIST into use[N_SOLVERS] (TF_CLI_CUSTOM). */
static int parse_solvers(const char *list, void *field, const char **expected)
{
    int *use = field, any = 0;
    *expected = "a comma-separated list of lp_solve, fast, clp, highs, scipy";
    for (int s = 0; s < N_SOLVERS; s++)
        use[s] = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (int s = 0; s < N_SOLVERS; s++)
            if (strlen(solver_label(s)) == len && strncmp(p, solver_label(s), len) == 0)
                use[s] = found = any = 1;
        if (!found)
            return -1;
        p += len;
        if (*p == ',')
            p++;
    }
    return any ? 0 : -1;
}

static const char *const prog = "bench-solvers";

#define AT(field) offsetof(bench_options, field)

static const tf_cli_option options[] = {
    {.name = "actions", .kind = TF_CLI_OPERANDS, .offset = AT(actions)},
    {"schedule", 0, TF_CLI_CUSTOM, AT(schedule), .parse = tf_cli_schedule, .arg = "NAME",
     .help = "built-in schedule (default 1F1B)"},
    {"ranks", 0, TF_CLI_INT, AT(ranks), 1, 4096, .arg = "P",
     .help = "pipeline ranks (default 8)"},
    {"stages-per-rank", 0, TF_CLI_INT, AT(stages_per_rank), 1, 64, .arg = "V",
     .help = "stages per rank (default: the schedule's)"},
    {"objective", 0, TF_CLI_CUSTOM, AT(objective), .parse = tf_cli_objective, .arg = "NAME",
     .help = "least-freeze (default) or spread (not for highs, scipy)"},
    {"limit", 0, TF_CLI_NUMBER, AT(limit), 0, 86400, .flags = TF_CLI_ABOVE_MIN, .arg = "S",
     .help = "seconds per solve before the child is killed (default 300)"},
    {"solvers", 0, TF_CLI_CUSTOM, AT(use), .parse = parse_solvers, .arg = "LIST",
     .help = "comma-separated subset of lp_solve,fast,clp,highs,scipy (default all)"},
    {"python", 0, TF_CLI_PATH, AT(python.python), .arg = "PATH",
     .help = "the python that runs the highs (highspy) and scipy rows"},
    {"memory", 0, TF_CLI_NUMBER, AT(memory), 0, 1, .flags = TF_CLI_ABOVE_MIN, .arg = "F",
     .help = "give each profile memory and a limit F of the way (0 < F <= 1; 1 binds nowhere) "
             "from the smallest any plan meets to the largest unfrozen peak (memory rows for "
             "lp_solve and clp; the fast row times its fallback to a general solver; highs and "
             "scipy n/a); under each "
             "planned row, its memory rows and how many the plan meets with equality"},
    {"stage-times", 0, TF_CLI_FLAG, AT(stage_times),
     .help = "every action takes its stage's time (the stages' times are still jittered): "
             "the shape of tf-study's and other stage-level profiles, without the per-action "
             "times that tf-import and tf-exec measure"},
    {"save-profiles", 0, TF_CLI_PATH, AT(profile_dir), .arg = "DIR",
     .help = "also write each size's profile to DIR/profile-ACTIONS.json, to time tf-plan on "
             "it with its JSON I/O (an existing file is an error)"},
};

static const tf_cli_program program = {prog, NULL, synopsis, options,
                                       sizeof options / sizeof options[0], notes, 1};

/* The ACTIONS operands, or the default sizes without any.  Returns
 * TF_CLI_CONTINUE or TF_EXIT_USAGE. */
static int take_sizes(bench_options *o)
{
    static const int default_sizes[] = {2048, 8192, 32768, 131072};
    for (int i = 0; i < o->actions.n; i++) {
        const char *size = o->actions.items[i];
        if (o->n_sizes == MAX_SIZES) {
            fprintf(stderr, "bench-solvers: at most %d sizes, got \"%s\" too\n", MAX_SIZES, size);
            return TF_EXIT_USAGE;
        }
        if (tf_cli_parse_int(size, 1, 100000000, &o->sizes[o->n_sizes]))
            return tf_cli_bad_value(prog, "ACTIONS", "an integer in [1, 100000000]", size);
        o->n_sizes++;
    }
    if (o->n_sizes == 0) {
        o->n_sizes = (int)(sizeof default_sizes / sizeof *default_sizes);
        memcpy(o->sizes, default_sizes, sizeof default_sizes);
    }
    return TF_CLI_CONTINUE;
}

/* Returns TF_CLI_CONTINUE, or the exit status: 0 after --help,
 * TF_EXIT_USAGE after printing the error (flag and value). */
static int parse_args(int argc, char **argv, bench_options *o)
{
    memset(o, 0, sizeof *o);
    o->objective = TF_OBJECTIVE_LEAST_FREEZE;
    o->schedule = "1F1B";
    o->ranks = 8;
    o->limit = 300.0;
    for (int s = 0; s < N_SOLVERS; s++)
        o->use[s] = 1;
    o->python.python = TF_BENCH_PYTHON;
    o->python.script = TF_BENCH_SOLVE_LP;
    int rc = tf_cli_parse(&program, argc, argv, o);
    if (rc == TF_CLI_CONTINUE) {
        rc = take_sizes(o);
        tf_cli_free(&program, o);
    }
    if (o->stages_per_rank == 0)
        o->stages_per_rank = tf_schedule_default_stages_per_rank(o->schedule);
    return rc;
}

/* The parent's resident set now, in MiB: /proc/self/statm, else its peak. */
static double resident_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size, resident;
    if (f) {
        int got = fscanf(f, "%ld %ld", &size, &resident);
        fclose(f);
        if (got == 2)
            return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* The peak resident set of a child forked now that exits at once, in MiB:
 * what every solve's child starts from.  0 if it cannot be measured. */
static double idle_child_mib(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return 0.0;
    if (pid == 0)
        _exit(0);
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    int status;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    return (double)ru.ru_maxrss / 1024.0;
}

/* The child's work: one solve, end to end, into *r. */
static void child_solve(const tf_profile *p, int solver, const bench_options *o,
                        solve_report *r)
{
    memset(r, 0, sizeof *r);
    tf_error err = {0};
    double started = tf_now_seconds();
    bench_pylp_solver which;
    if (python_solver(solver, &which)) {
        bench_lp_result lr;
        r->rc = bench_pylp_plan(p, &o->python, which, &lr, &err);
        r->seconds = tf_now_seconds() - started;
        if (!r->rc) {
            r->solve_seconds = lr.solve_seconds;
            r->batch_ms = lr.batch_ms;
            r->total_freeze = lr.total_freeze;
            r->variables = lr.columns;
            r->constraints = lr.rows;
            snprintf(r->solver, sizeof r->solver, "%s", solver_label(solver));
        }
    } else {
        tf_plan_options options;
        tf_plan_options_init(&options);
        options.solver = solver == SOLVER_FAST  ? TF_SOLVER_FAST
                         : solver == SOLVER_CLP ? TF_SOLVER_CLP
                                                : TF_SOLVER_LP_SOLVE;
        /* The fast solver hands memory rows to a general solver (CLP from
         * TF_FAST_SOLVER_MIN_ACTIONS on): its row then times that
         * fallback, the cost a user of --solver fast sees. */
        options.control.fallback = o->memory > 0;
        options.objective = o->objective;
        tf_plan plan;
        r->rc = tf_plan_from_profile(p, &options, &plan, &err);
        r->seconds = tf_now_seconds() - started;
        if (!r->rc) {
            r->solve_seconds = plan.solver_seconds;
            r->batch_ms = plan.batch_ms_planned;
            for (int i = 0; i < plan.schedule.n_actions; i++)
                r->total_freeze += plan.actions[i].freeze_ratio;
            r->variables = plan.solver_variables;
            r->constraints = plan.solver_constraints;
            snprintf(r->solver, sizeof r->solver, "%s", plan.solver_name);
            r->rc = bench_count_memory_rows(&plan, &r->memory_rows, &err);
            tf_plan_free(&plan);
        }
    }
    if (r->rc)
        snprintf(r->msg, sizeof r->msg, "%s", err.msg[0] ? err.msg : tf_strerror(r->rc));
}

/* Reads up to size bytes until EOF; returns the count (-1 on error). */
static ssize_t read_all(int fd, void *buf, size_t size)
{
    size_t got = 0;
    while (got < size) {
        ssize_t k = read(fd, (char *)buf + got, size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

static int write_all(int fd, const void *buf, size_t size)
{
    size_t done = 0;
    while (done < size) {
        ssize_t k = write(fd, (const char *)buf + done, size - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

/* Runs one solve in a child with a time limit and fills *m.  Returns 0, or
 * -1 (with a message on stderr) when the child could not be started. */
static int measure(const tf_profile *p, int solver, const bench_options *o, measurement *m)
{
    const double limit = o->limit;
    memset(m, 0, sizeof *m);
    int fds[2];
    if (pipe(fds) != 0) {
        perror("bench-solvers: pipe");
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("bench-solvers: fork");
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* its own group, so a timeout also kills Python (HiGHS, SciPy) */
        close(fds[0]);
        solve_report r;
        child_solve(p, solver, o, &r);
        _exit(write_all(fds[1], &r, sizeof r) == 0 ? 0 : 1);
    }
    setpgid(pid, pid); /* as the child does: whichever runs first */
    close(fds[1]);
    double deadline = tf_now_seconds() + limit;
    int timed_out = 0;
    for (;;) {
        double left = deadline - tf_now_seconds();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int ready = poll(&pfd, 1, (int)(left * 1000.0) + 1);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready != 0)
            break; /* data, EOF or an error: the read below tells */
    }
    ssize_t got = 0;
    if (timed_out)
        kill(-pid, SIGKILL);
    else
        got = read_all(fds[0], &m->report, sizeof m->report);
    close(fds[0]);
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    int status = 0;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    m->peak_mib = (double)ru.ru_maxrss / 1024.0; /* Linux: kilobytes */
    m->cpu_seconds = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    m->wait_status = status;
    if (timed_out)
        m->outcome = RUN_TIMEOUT;
    else if (got != (ssize_t)sizeof m->report)
        m->outcome = RUN_CRASHED;
    else
        m->outcome = m->report.rc ? RUN_FAILED : RUN_OK;
    return 0;
}

static void print_header(const bench_options *o, const python_rows *py)
{
    char version[32], clp_version[32];
    printf("bench-solvers: %s, %d %s x %d %s per rank, %s, %s times, caps 0.8, "
           "limit %g s per solve\n",
           o->schedule, o->ranks, tf_plural(o->ranks, "rank", "ranks"), o->stages_per_rank,
           tf_plural(o->stages_per_rank, "stage", "stages"), tf_objective_name(o->objective),
           o->stage_times ? "stage-level" : "per-action", o->limit);
    printf("solvers: lp_solve %s, fast (planner %s), clp %s, highs %s%s, scipy %s%s\n",
           tf_freeze_solver_version("lp_solve", version, sizeof version), TF_VERSION,
           tf_freeze_solver_version("clp", clp_version, sizeof clp_version),
           py->text[BENCH_PYLP_HIGHS],
           py->available[BENCH_PYLP_HIGHS] ? " (native, through highspy)" : "",
           py->text[BENCH_PYLP_SCIPY],
           py->available[BENCH_PYLP_SCIPY] ? " (linprog, method highs)" : "");
    if (py->available[BENCH_PYLP_HIGHS] || py->available[BENCH_PYLP_SCIPY])
        printf("python: %s %s\n", o->python.python, o->python.script);
    printf("seconds: end to end in a fork()ed child (DAG, bounds, LP, plan; no JSON I/O); "
           "solve_s: the solver's share; cpu_s: the child's CPU time\n");
    printf("peak_MiB: the child's ru_maxrss, as measured; baselines: parent_MiB (parent's RSS "
           "at fork), idle_MiB (an idle child's peak)\n");
    printf("vars/cons: LP columns/rows (fast: network nodes/arcs)\n\n");
    printf("%8s %6s  %-9s %-9s %9s %9s %9s %9s %10s %8s %8s %8s %18s %14s  %s\n", "actions",
           "micro", "solver", "status", "seconds", "solve_s", "cpu_s", "peak_MiB", "parent_MiB",
           "idle_MiB", "vars", "cons", "batch_ms", "total_freeze", "vs_lp_solve");
}

/* Under a row planned with a memory limit: how many limit rows its LP had
 * and how many the plan meets with equality, the rows that can bind. */
static void print_memory_rows(const bench_memory_rows *m)
{
    if (m->rows > 0)
        printf("%26smemory rows %d, at the limit under this plan %d (most on one rank %d)\n", "",
               m->rows, m->at_limit, m->most_on_rank);
}

static void print_row(int actions, int microbatches, int solver, const measurement *m,
                      double parent_mib, double idle_mib, const measurement *reference,
                      const bench_options *o, const python_rows *py)
{
    const double limit = o->limit;
    printf("%8d %6d  %-9s ", actions, microbatches, solver_label(solver));
    switch (m->outcome) {
    case RUN_NOT_INSTALLED:
        printf("%s\n", py->text[solver == SOLVER_SCIPY ? BENCH_PYLP_SCIPY : BENCH_PYLP_HIGHS]);
        return;
    case RUN_NOT_APPLICABLE:
        printf(o->memory > 0 ? "n/a       (time only: no memory rows)\n"
                             : "n/a       (least-freeze only)\n");
        return;
    case RUN_TIMEOUT:
        /* No cpu_s: a killed child never reaps its Python, whose time is lost. */
        printf("%-9s %9s %9s %9s %9.1f %10.1f %8.1f   (killed after %g s)\n", "timeout", "-",
               "-", "-", m->peak_mib, parent_mib, idle_mib, limit);
        return;
    case RUN_CRASHED:
        if (WIFSIGNALED(m->wait_status))
            printf("%-9s (child killed by signal %d)\n", "crashed", WTERMSIG(m->wait_status));
        else
            printf("%-9s (child exited with status %d and no result)\n", "crashed",
                   WIFEXITED(m->wait_status) ? WEXITSTATUS(m->wait_status) : -1);
        return;
    case RUN_FAILED:
        printf("%-9s %s\n", "failed", m->report.msg);
        return;
    case RUN_OK:
        break;
    }
    const solve_report *r = &m->report;
    /* "fallback": the fast solver declined (memory rows) and a general one solved. */
    const char *status = strcmp(r->solver, solver_label(solver)) ? "fallback" : "ok";
    printf("%-9s %9.3f %9.3f %9.3f %9.1f %10.1f %8.1f %8d %8d %18.9f %14.9f  ", status, r->seconds,
           r->solve_seconds, m->cpu_seconds, m->peak_mib, parent_mib, idle_mib, r->variables,
           r->constraints, r->batch_ms, r->total_freeze);
    if (solver == SOLVER_LP_SOLVE)
        printf("reference\n");
    else if (!reference || reference->outcome != RUN_OK)
        printf("-\n");
    else {
        const solve_report *ref = &reference->report;
        double rel = ref->batch_ms != 0 ? (r->batch_ms - ref->batch_ms) / ref->batch_ms
                                        : r->batch_ms - ref->batch_ms;
        double freeze = r->total_freeze - ref->total_freeze;
        /* tf-plan's tests hold the solvers to these tolerances. */
        int differs = !(fabs(rel) <= 1e-9 && fabs(freeze) <= 1e-6);
        printf("batch %+.1e rel, freeze %+.1e%s\n", rel, freeze, differs ? "  DIFFERS" : "");
    }
    print_memory_rows(&r->memory_rows);
}

/* The solver the speed-ups are over: lp_solve, the reference of the
 * answers, else the first general solver chosen (CLP, HiGHS, SciPy), so
 * that `--solvers fast,clp` prints its ratio too; -1 if none. */
static int speedup_reference(const bench_options *o)
{
    static const int general[] = {SOLVER_LP_SOLVE, SOLVER_CLP, SOLVER_HIGHS, SOLVER_SCIPY};
    for (size_t i = 0; i < sizeof general / sizeof general[0]; i++)
        if (o->use[general[i]])
            return general[i];
    return -1;
}

/* The last row of a size: each solver's speed-up over the reference. */
static void print_speedups(int actions, int microbatches, const bench_options *o,
                           const measurement *m)
{
    printf("%8d %6d  %-9s", actions, microbatches, "speed-up");
    const int ref = speedup_reference(o);
    int any = 0;
    for (int s = 0; s < N_SOLVERS && ref >= 0; s++) {
        if (!o->use[s] || s == ref)
            continue;
        const measurement *r = &m[ref], *x = &m[s];
        printf("%s%s over %s ", any++ ? ", " : " ", solver_label(s), solver_label(ref));
        double x_seconds = x->report.seconds > 0 ? x->report.seconds : 1e-9;
        /* Three significant figures: a solver 300 times slower than the
         * reference is 0.00333x, not "0.00x". */
        char ratio[64];
        if (r->outcome == RUN_OK && x->outcome == RUN_OK)
            printf("%sx", tf_format_significant(r->report.seconds / x_seconds, 3, ratio,
                                                sizeof ratio));
        else if (r->outcome == RUN_TIMEOUT && x->outcome == RUN_OK)
            printf("> %sx", tf_format_significant(o->limit / x_seconds, 3, ratio, sizeof ratio));
        else if (r->outcome == RUN_OK && x->outcome == RUN_TIMEOUT)
            printf("< %sx",
                   tf_format_significant(r->report.seconds / o->limit, 3, ratio, sizeof ratio));
        else
            printf("-");
    }
    printf("%s\n", any ? "" : " (needs two solvers, one of them general)");
}

/* Writes p to DIR/profile-ACTIONS.json unless that file exists.  Returns 0,
 * or -1 after printing why. */
static int save_profile(const tf_profile *p, const char *dir, int actions)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/profile-%d.json", dir, actions);
    if (access(path, F_OK) == 0) {
        fprintf(stderr, "bench-solvers: --save-profiles: %s exists; not overwritten\n", path);
        return -1;
    }
    tf_error err = {0};
    if (tf_profile_save(p, path, &err)) {
        fprintf(stderr, "bench-solvers: --save-profiles: %s\n", err.msg);
        return -1;
    }
    fprintf(stderr, "bench-solvers: wrote %s\n", path);
    return 0;
}

/* A row that needs no child: RUN_NOT_APPLICABLE (a Python solver with
 * spread or memory rows) or RUN_NOT_INSTALLED (a Python solver missing);
 * RUN_OK when the solver runs. */
static run_outcome row_without_child(int solver, const bench_options *o,
                                     const python_rows *py)
{
    bench_pylp_solver which;
    int in_python = python_solver(solver, &which);
    if (in_python && (o->objective != TF_OBJECTIVE_LEAST_FREEZE || o->memory > 0))
        return RUN_NOT_APPLICABLE;
    if (in_python && !py->available[which])
        return RUN_NOT_INSTALLED;
    return RUN_OK;
}

/* Every chosen solver on profile p, a row each, then the speed-ups.
 * Returns 0, TF_EXIT_SOLVER when a solve failed or crashed (the other rows
 * still run), or -1 when a child could not be started. */
static int run_solvers(const tf_profile *p, int microbatches, const bench_options *o,
                       const python_rows *py)
{
    const int actions = p->schedule.n_actions;
    double parent_mib = resident_mib(), idle_mib = idle_child_mib();
    measurement m[N_SOLVERS];
    memset(m, 0, sizeof m);
    int status = 0;
    for (int s = 0; s < N_SOLVERS; s++) {
        if (!o->use[s])
            continue;
        m[s].outcome = row_without_child(s, o, py);
        if (m[s].outcome != RUN_OK) {
            print_row(actions, microbatches, s, &m[s], parent_mib, idle_mib, NULL, o, py);
            continue;
        }
        if (measure(p, s, o, &m[s]))
            return -1;
        if (m[s].outcome == RUN_FAILED || m[s].outcome == RUN_CRASHED)
            status = TF_EXIT_SOLVER;
        print_row(actions, microbatches, s, &m[s], parent_mib, idle_mib,
                  o->use[SOLVER_LP_SOLVE] ? &m[SOLVER_LP_SOLVE] : NULL, o, py);
        fflush(stdout);
    }
    print_speedups(actions, microbatches, o, m);
    fflush(stdout);
    return status;
}

/* One size of about `size` actions: its profile, saved when asked, and
 * the solvers on it.  Returns as run_solvers does; a profile that cannot
 * be made is TF_EXIT_INPUT, one that cannot be saved -1. */
static int bench_size(int size, const bench_options *o, const python_rows *py)
{
    tf_error err = {0};
    int microbatches;
    tf_profile p;
    if (bench_microbatches_for(o->schedule, o->ranks, o->stages_per_rank, size, &microbatches,
                               &err) ||
        bench_make_profile(o->schedule, o->ranks, o->stages_per_rank, microbatches, &p, &err)) {
        fprintf(stderr, "bench-solvers: %d %s: %s\n", size, tf_plural(size, "action", "actions"),
                err.msg);
        return TF_EXIT_INPUT;
    }
    if (o->stage_times)
        bench_stage_times_only(&p);
    if (o->memory > 0 && bench_add_memory(&p, o->memory, &err)) {
        fprintf(stderr, "bench-solvers: %d %s: %s\n", size, tf_plural(size, "action", "actions"),
                err.msg);
        tf_profile_free(&p);
        return TF_EXIT_INPUT;
    }
    if (o->memory > 0)
        printf("memory: %d actions, every rank's limit %.3f GiB (%g of the way from the "
               "smallest any plan meets to the largest unfrozen peak)\n",
               p.schedule.n_actions, p.memory_limit[0] / 1073741824.0, o->memory);
    int rc = o->profile_dir && save_profile(&p, o->profile_dir, p.schedule.n_actions)
                 ? -1
                 : run_solvers(&p, microbatches, o, py);
    tf_profile_free(&p);
    return rc;
}

int main(int argc, char **argv)
{
    bench_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != TF_CLI_CONTINUE)
        return rc;
    python_rows py;
    for (int s = SOLVER_HIGHS; s <= SOLVER_SCIPY; s++) {
        bench_pylp_solver which;
        python_solver(s, &which);
        py.available[which] =
            o.use[s] && bench_pylp_available(&o.python, which, py.text[which], sizeof py.text[0]);
        if (!o.use[s])
            snprintf(py.text[which], sizeof py.text[0], "not chosen");
    }
    print_header(&o, &py);
    int status = 0;
    for (int k = 0; k < o.n_sizes; k++) {
        rc = bench_size(o.sizes[k], &o, &py);
        if (rc < 0)
            return TF_EXIT_INPUT;
        if (rc)
            status = rc;
    }
    return status;
}
