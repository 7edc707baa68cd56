/* bench_pylp.c - the freeze LP through HiGHS from Python (see bench_pylp.h). */
#define _DEFAULT_SOURCE /* mkstemps, fdopen */
#include "bench_pylp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/freezable.h"
#include "solve/freeze_common.h"
#include "tf/dag.h"
#include "tf/util.h"

/* Runs argv with stdout into a buffer (NUL-terminated, caller frees) and
 * stderr discarded.  Returns the exit status (-1 if it did not exit
 * normally or could not be started); *out is NULL on failure to start. */
static int run_capture(char *const argv[], char **out)
{
    *out = NULL;
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        if (!freopen("/dev/null", "w", stderr))
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t size = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    for (;;) {
        if (buf && size + 1 == cap) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
            } else {
                buf = grown;
                cap *= 2;
            }
        }
        char sink[4096];
        char *into = buf ? buf + size : sink;
        size_t room = buf ? cap - size - 1 : sizeof sink;
        ssize_t k = read(fds[0], into, room);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        if (buf)
            size += (size_t)k;
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (buf)
        buf[size] = '\0';
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The package a solver imports, and the expression that is its version. */
static const char *const version_code[] = {
    [BENCH_PYLP_HIGHS] = "import highspy; print(highspy.Highs().version())",
    [BENCH_PYLP_SCIPY] = "import scipy, scipy.optimize; print(scipy.__version__)",
};

int bench_pylp_available(const bench_pylp *py, bench_pylp_solver solver, char *version,
                         size_t size)
{
    if (access(py->script, R_OK) != 0) {
        snprintf(version, size, "no %s", py->script);
        return 0;
    }
    char *out;
    char *argv[] = {(char *)py->python, "-c", (char *)version_code[solver], NULL};
    int status = run_capture(argv, &out);
    /* highspy prints a banner before the version: take the last line. */
    const char *last = NULL;
    for (char *line = out ? strtok(out, "\n") : NULL; line; line = strtok(NULL, "\n"))
        last = line;
    int ok = status == 0 && last;
    if (ok)
        snprintf(version, size, "%s", last);
    else
        snprintf(version, size, "not installed (%s cannot import %s)", py->python,
                 solver == BENCH_PYLP_HIGHS ? "highspy" : "scipy");
    free(out);
    return ok;
}

/* Writes the compact LP (bench_pylp.h) in CPLEX LP format: columns s<i>
 * (start of action i), r<j> (ratio of the j-th freezable action), T.
 * ratio_index[i] is j or -1.  Returns 0, or -1 on a write error. */
static int write_lp(FILE *f, const tf_schedule *s, const tf_dag *g, const double *max_ms,
                    const double *min_ms, const double *cap, const int *ratio_index, int k,
                    int *rows)
{
    const int n = s->n_actions;
    int row = 0;
    fprintf(f, "\\ ratios %d\nMinimize\n obj: T\nSubject To\n", k);
    for (int u = 0; u < n; u++) {
        int first = g->succ_offset[u], last = g->succ_offset[u + 1];
        char ratio_term[64] = "";
        if (ratio_index[u] >= 0)
            snprintf(ratio_term, sizeof ratio_term, " + %.17g r%d", max_ms[u] - min_ms[u],
                     ratio_index[u]);
        for (int e = first; e < last; e++) {
            int v = g->succ[e];
            if (tf_freeze_edge_implied(s, g, u, e))
                continue;
            fprintf(f, " c%d: s%d - s%d%s >= %.17g\n", row++, v, u, ratio_term,
                    max_ms[u] + g->lag[e]);
        }
        if (first == last)
            fprintf(f, " c%d: T - s%d%s >= %.17g\n", row++, u, ratio_term, max_ms[u]);
    }
    for (int st = 0; st < s->stages; st++) {
        int count = 0;
        for (int i = 0; i < n; i++)
            count += ratio_index[i] >= 0 && s->actions[i].stage == st;
        if (count == 0 || cap[st] >= 1.0)
            continue;
        fprintf(f, " c%d:", row++);
        int terms = 0;
        for (int i = 0; i < n; i++) {
            if (ratio_index[i] < 0 || s->actions[i].stage != st)
                continue;
            fprintf(f, "%s r%d", terms ? " +" : "", ratio_index[i]);
            if (++terms % 16 == 0)
                fputc('\n', f); /* short lines; a row may span several */
        }
        fprintf(f, " <= %.17g\n", cap[st] * count);
    }
    fprintf(f, "Bounds\n");
    for (int j = 0; j < k; j++)
        fprintf(f, " r%d <= 1\n", j);
    fprintf(f, "End\n");
    *rows = row;
    return ferror(f) ? -1 : 0;
}

/* Parses solve_lp.py's output: "ok SECONDS T" and k ratios, or "error MSG".
 * Returns 0 or TF_ESOLVER with the message. */
static int parse_output(const char *text, int k, double *ratio_by_index, double *seconds,
                        tf_error *err)
{
    if (strncmp(text, "ok ", 3) != 0) {
        const char *msg = strncmp(text, "error ", 6) == 0 ? text + 6 : text;
        return tf_fail(err, TF_ESOLVER, "%.*s", (int)strcspn(msg, "\n"), msg);
    }
    char *end;
    *seconds = strtod(text + 3, &end);
    const char *p = strchr(text, '\n');
    for (int j = 0; j < k; j++) {
        if (!p)
            return tf_fail(err, TF_ESOLVER, "%d ratios printed, expected %d", j, k);
        ratio_by_index[j] = strtod(p + 1, &end);
        if (end == p + 1)
            return tf_fail(err, TF_ESOLVER, "ratio %d is not a number", j);
        p = strchr(end, '\n');
    }
    return 0;
}

int bench_pylp_plan(const tf_profile *p, const bench_pylp *py, bench_pylp_solver solver,
                    bench_lp_result *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    bench_lp_plan w;
    int rc = bench_lp_begin(p, &w, err);
    if (rc)
        return rc;
    const int n = w.n;
    double *ratio_by_index = calloc((size_t)n + 1, sizeof *ratio_by_index);
    int *ratio_index = malloc(((size_t)n + 1) * sizeof *ratio_index);
    const char *tmp = getenv("TMPDIR");
    char path[4096]; /* the .lp: HiGHS reads a file by its extension */
    snprintf(path, sizeof path, "%s/tf-bench-pylp-XXXXXX.lp", tmp && *tmp ? tmp : "/tmp");
    char *output = NULL;
    int fd = -1;
    if (!ratio_by_index || !ratio_index) {
        rc = tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", n);
        goto done;
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        ratio_index[i] =
            tf_action_freezable(&w.s->actions[i], w.max_ms[i], w.min_ms[i]) ? k++ : -1;
    fd = mkstemps(path, 3);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        rc = tf_fail(err, TF_EIO, "cannot create %s: %s", path, strerror(errno));
        goto done;
    }
    fd = -1; /* f owns it */
    int wrote = write_lp(f, w.s, &w.g, w.max_ms, w.min_ms, p->max_freeze_ratio, ratio_index, k,
                         &out->rows);
    if (fclose(f) != 0 || wrote) {
        rc = tf_fail(err, TF_EIO, "cannot write %s", path);
        goto done;
    }
    out->columns = n + k + 1;
    char *argv[] = {(char *)py->python, (char *)py->script,
                    solver == BENCH_PYLP_HIGHS ? "highs" : "scipy", path, NULL};
    int status = run_capture(argv, &output);
    if (!output) {
        rc = tf_fail(err, TF_EIO, "cannot run %s %s", py->python, py->script);
        goto done;
    }
    if ((rc = parse_output(output, k, ratio_by_index, &out->solve_seconds, err)))
        goto done;
    if (status != 0) {
        rc = tf_fail(err, TF_ESOLVER, "%s exited with status %d", py->script, status);
        goto done;
    }
    for (int i = 0; i < n; i++)
        w.ratio[i] = ratio_index[i] >= 0 ? ratio_by_index[ratio_index[i]] : 0.0;
    rc = bench_lp_finish(&w, out, err);
done:
    if (fd >= 0)
        close(fd);
    unlink(path);
    free(output);
    free(ratio_by_index);
    free(ratio_index);
    bench_lp_free(&w);
    return rc;
}
