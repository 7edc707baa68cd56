/* bench_highs.c - the freeze LP through HiGHS run by node (see bench_highs.h). */
#define _DEFAULT_SOURCE /* mkstemp, fdopen */
#include "bench_highs.h"

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

int bench_highs_available(const char *dir, char *why, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/solve.mjs", dir);
    if (access(path, R_OK) != 0) {
        snprintf(why, size, "no %s", path);
        return 0;
    }
    snprintf(path, sizeof path, "%s/node_modules/highs/package.json", dir);
    if (access(path, R_OK) != 0) {
        snprintf(why, size, "not installed (npm ci --prefix %s)", dir);
        return 0;
    }
    char *out;
    char *argv[] = {"node", "--version", NULL};
    int status = run_capture(argv, &out);
    free(out);
    if (status != 0) {
        snprintf(why, size, "node not found");
        return 0;
    }
    return 1;
}

void bench_highs_version(const char *dir, char *version, size_t size)
{
    snprintf(version, size, "unknown");
    char path[4096];
    snprintf(path, sizeof path, "%s/node_modules/highs/package.json", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *at = strstr(line, "\"version\"");
        char *open = at ? strchr(at + 9, '"') : NULL;
        char *close = open ? strchr(open + 1, '"') : NULL;
        if (close) {
            snprintf(version, size, "%.*s", (int)(close - open - 1), open + 1);
            break;
        }
    }
    fclose(f);
}

/* Writes the compact LP (bench_clp.h) in CPLEX LP format: columns s<i>
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

/* Parses solve.mjs's output: "ok SECONDS T" and k ratios, or "error MSG".
 * Returns 0 or TF_ESOLVER with the message. */
static int parse_output(const char *text, int k, double *ratio_by_index, double *seconds,
                        tf_error *err)
{
    if (strncmp(text, "ok ", 3) != 0) {
        const char *msg = strncmp(text, "error ", 6) == 0 ? text + 6 : text;
        return tf_fail(err, TF_ESOLVER, "HiGHS: %.*s", (int)strcspn(msg, "\n"), msg);
    }
    char *end;
    *seconds = strtod(text + 3, &end);
    const char *p = strchr(text, '\n');
    for (int j = 0; j < k; j++) {
        if (!p)
            return tf_fail(err, TF_ESOLVER, "HiGHS: %d ratios printed, expected %d", j, k);
        ratio_by_index[j] = strtod(p + 1, &end);
        if (end == p + 1)
            return tf_fail(err, TF_ESOLVER, "HiGHS: ratio %d is not a number", j);
        p = strchr(end, '\n');
    }
    return 0;
}

int bench_highs_plan(const tf_profile *p, const char *dir, bench_lp_result *out,
                     tf_error *err)
{
    memset(out, 0, sizeof *out);
    bench_lp_plan w;
    int rc = bench_lp_begin(p, &w, err);
    if (rc)
        return rc;
    const int n = w.n;
    double *ratio_by_index = calloc((size_t)n + 1, sizeof *ratio_by_index);
    int *ratio_index = malloc(((size_t)n + 1) * sizeof *ratio_index);
    char path[] = "/tmp/tf-bench-highs-XXXXXX";
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
    fd = mkstemp(path);
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
    char script[4096];
    snprintf(script, sizeof script, "%s/solve.mjs", dir);
    char *argv[] = {"node", script, path, NULL};
    int status = run_capture(argv, &output);
    if (!output) {
        rc = tf_fail(err, TF_EIO, "cannot run node %s", script);
        goto done;
    }
    if ((rc = parse_output(output, k, ratio_by_index, &out->solve_seconds, err)))
        goto done;
    if (status != 0) {
        rc = tf_fail(err, TF_ESOLVER, "HiGHS: node exited with status %d", status);
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
