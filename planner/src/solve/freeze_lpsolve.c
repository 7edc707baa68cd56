/* freeze_lpsolve.c - the freeze-ratio LP, built sparse and solved with lp_solve.
 *
 * Columns (1-based, lp_solve's convention):
 *   1 .. n             t_i, start of action i                  (>= 0)
 *   n+1 .. n+k         r_j, ratio of the j-th freezable action  ([0, 1])
 *   n+k+1              T, the makespan                          (>= 0)
 *   n+k+2              z, the largest ratio (spread objective only)
 * A freezable action's duration is max - d r with d = max - min, so no
 * duration column is needed and fixed actions contribute only constants.
 * Rows: one per DAG edge (t_v - t_u + d_u r_u >= max_u + lag), one per sink
 * (T - t_u + d_u r_u >= max_u), one cap row per stage with freezable actions
 * and a cap below 1 (sum r <= cap * count), and for spread one row per ratio
 * (r_j - z <= 0).
 *
 * Lexicographic optimum by sequential solves: minimise T; fix T's upper
 * bound at the optimum and minimise sum r (least-freeze), or first max r then
 * sum r (spread).  Each re-solve starts from the previous optimal basis.
 */
#include <lpsolve/lp_lib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "freeze_common.h"
#include "model/freezable.h"
#include "tf/util.h"

char *tf_freeze_solver_version(char *buf, size_t size)
{
    int major, minor, release, build;
    lp_solve_version(&major, &minor, &release, &build);
    snprintf(buf, size, "%d.%d.%d.%d", major, minor, release, build);
    return buf;
}

/* make_lp and the creation of a basis factorisation (LUSOL) both call
 * init_BLAS, which sets lp_solve's BLAS function pointers the first time
 * and afterwards only reads its flag; a one-row LP goes through both. */
int tf_freeze_lpsolve_init(void)
{
    lprec *lp = make_lp(0, 1);
    if (!lp)
        return TF_ENOMEM;
    double one = 1.0;
    int column = 1;
    set_verbose(lp, NEUTRAL);
    add_constraintex(lp, 1, &one, &column, GE, 1.0);
    set_obj_fnex(lp, 1, &one, &column);
    set_minim(lp);
    solve(lp);
    delete_lp(lp);
    return 0;
}

/* Not an lp_solve status: a failed solve left the model with other
 * dimensions than it was built with (seen after a numerical failure of the
 * primal retry below), so nothing more can be read from or solved on it. */
enum { MODEL_DAMAGED = -100, TIME_LIMIT = -101 };

static const char *status_name(int status)
{
    switch (status) {
    case NOMEMORY: return "out of memory";
    case OPTIMAL: return "optimal";
    case SUBOPTIMAL: return "suboptimal";
    case INFEASIBLE: return "infeasible";
    case UNBOUNDED: return "unbounded";
    case DEGENERATE: return "degenerate";
    case NUMFAILURE: return "numerical failure";
    case USERABORT: return "aborted";
    case TIMEOUT: return "timeout";
    case PRESOLVED: return "presolved";
    case MODEL_DAMAGED: return "numerical failure that changed the model's size";
    case TIME_LIMIT: return "stopped at the time limit";
    default: return "unknown status";
    }
}

/* The model under construction, with scratch rows for add_constraintex. */
typedef struct lp_model {
    lprec *lp;
    int n;               /* actions */
    int k;               /* freezable actions */
    int *ratio_column;   /* n: column of r_i, 0 if fixed */
    long long iteration_limit; /* guard against a cycling simplex (guarded_solve) */
    const tf_freeze_limits *lim; /* time limit and progress (may be NULL) */
    const char *step;    /* the objective being minimised, for progress lines */
    int timed_out;       /* the abort callback stopped a solve at the deadline */
    int rows, columns;   /* the built model's size, which solves must keep */
    double *span;        /* n: max - min */
    int col_T, col_z;
} lp_model;

static int add_row(lp_model *m, int count, double *values, int *columns, int type, double rhs)
{
    return add_constraintex(m->lp, count, values, columns, type, rhs) ? 0 : TF_ENOMEM;
}

/* Row "finish of u (+ lag) <= later": later_column - t_u + d_u r_u >= max_u + lag. */
static int add_precedence(lp_model *m, int u, int later_column, double max_u, double lag)
{
    double values[3] = {1.0, -1.0, 0.0};
    int columns[3] = {later_column, u + 1, 0};
    int count = 2;
    if (m->ratio_column[u]) {
        values[2] = m->span[u];
        columns[2] = m->ratio_column[u];
        count = 3;
    }
    return add_row(m, count, values, columns, GE, max_u + lag);
}

static int build_model(const tf_freeze_problem *p, lp_model *m)
{
    const tf_schedule *s = p->schedule;
    const tf_dag *g = p->dag;
    const double *max_ms = p->max_ms, *min_ms = p->min_ms, *cap = p->cap;
    const int n = s->n_actions;
    m->n = n;
    m->ratio_column = calloc((size_t)n + 1, sizeof *m->ratio_column);
    m->span = calloc((size_t)n + 1, sizeof *m->span);
    int *stage_count = calloc((size_t)s->stages + 1, sizeof *stage_count);
    if (!m->ratio_column || !m->span || !stage_count) {
        free(stage_count);
        return TF_ENOMEM;
    }
    m->k = 0;
    for (int i = 0; i < n; i++) {
        if (tf_action_freezable(&s->actions[i], max_ms[i], min_ms[i])) {
            m->ratio_column[i] = n + 1 + m->k++;
            m->span[i] = max_ms[i] - min_ms[i];
            stage_count[s->actions[i].stage]++;
        }
    }
    m->col_T = n + m->k + 1;
    m->col_z = p->objective == TF_OBJECTIVE_SPREAD ? m->col_T + 1 : 0;
    int columns = m->col_z ? m->col_z : m->col_T;
    m->lp = make_lp(0, columns);
    if (!m->lp) {
        free(stage_count);
        return TF_ENOMEM;
    }
    set_verbose(m->lp, NEUTRAL);
    /* No scaling: every coefficient is 1, -1 or a duration span, already
     * well scaled, and lp_solve's default geometric + equilibrate scaling
     * makes its dual simplex cycle without end on uniform-time schedules
     * (e.g. ZBVZeroBubble, 8 ranks, 32 microbatches, cap 0.5). */
    set_scaling(m->lp, SCALE_NONE);
    for (int i = 0; i < n; i++)
        if (m->ratio_column[i])
            set_upbo(m->lp, m->ratio_column[i], 1.0);
    if (m->col_z)
        set_upbo(m->lp, m->col_z, 1.0);

    int rc = 0;
    set_add_rowmode(m->lp, TRUE);
    /* Objective: T. */
    double one = 1.0;
    if (!set_obj_fnex(m->lp, 1, &one, &m->col_T))
        rc = TF_ENOMEM;
    for (int u = 0; u < n && !rc; u++) {
        int first = g->succ_offset[u], last = g->succ_offset[u + 1];
        for (int e = first; e < last && !rc; e++)
            if (!tf_freeze_edge_implied(s, g, u, e))
                rc = add_precedence(m, u, g->succ[e] + 1, max_ms[u], g->lag[e]);
        if (first == last && !rc)
            rc = add_precedence(m, u, m->col_T, max_ms[u], 0.0);
    }
    /* Cap rows: the stage's mean ratio may not exceed its cap. */
    int *columns_buf = malloc(((size_t)m->k + 2) * sizeof *columns_buf);
    double *values_buf = malloc(((size_t)m->k + 2) * sizeof *values_buf);
    if (!columns_buf || !values_buf)
        rc = TF_ENOMEM;
    for (int st = 0; st < s->stages && !rc; st++) {
        if (stage_count[st] == 0 || cap[st] >= 1.0)
            continue;
        int count = 0;
        for (int i = 0; i < n; i++)
            if (m->ratio_column[i] && s->actions[i].stage == st) {
                columns_buf[count] = m->ratio_column[i];
                values_buf[count++] = 1.0;
            }
        rc = add_row(m, count, values_buf, columns_buf, LE, cap[st] * stage_count[st]);
    }
    for (int i = 0; i < n && !rc && m->col_z; i++) {
        if (!m->ratio_column[i])
            continue;
        double values[2] = {1.0, -1.0};
        int cols[2] = {m->ratio_column[i], m->col_z};
        rc = add_row(m, 2, values, cols, LE, 0.0);
    }
    free(columns_buf);
    free(values_buf);
    free(stage_count);
    set_add_rowmode(m->lp, FALSE);
    set_minim(m->lp);
    return rc;
}

static void free_model(lp_model *m)
{
    if (m->lp)
        delete_lp(m->lp);
    free(m->ratio_column);
    free(m->span);
    memset(m, 0, sizeof *m);
}

/* lp_solve's abort callback, called every iteration: stops a solve whose
 * simplex has run far past any normal iteration count, or past the time
 * limit, and reports progress.  A healthy solve of this LP takes about 3
 * iterations per row; lp_solve's default dual simplex can cycle on some
 * degenerate schedules (Interleaved1F1B, 4 ranks, 64 microbatches) and
 * would otherwise never return. */
static int __WINAPI stop_when_cycling(lprec *lp, void *handle)
{
    lp_model *m = handle;
    long long iterations = get_total_iter(lp);
    if (m->lim && m->lim->progress && tf_progress_due(m->lim->progress))
        tf_progress_note(m->lim->progress, "lp_solve: minimising %s, %lld iterations", m->step,
                         iterations);
    if (tf_freeze_past_deadline(m->lim)) {
        m->timed_out = 1;
        return TRUE;
    }
    return iterations > m->iteration_limit;
}

/* solve() with the cycling guard: if the default simplex runs past the
 * guard, the primal simplex (which does not cycle on those cases) solves
 * again from the start, with a guard 20 times larger.  Returns lp_solve's
 * status, or MODEL_DAMAGED if the model's size changed. */
static int guarded_solve(lp_model *m, int *solves)
{
    m->iteration_limit = 50LL * (m->rows + m->columns) + 10000;
    put_abortfunc(m->lp, stop_when_cycling, m);
    set_simplextype(m->lp, SIMPLEX_DUAL_PRIMAL);
    int status = solve(m->lp);
    (*solves)++;
    if (m->timed_out)
        return TIME_LIMIT;
    if (status == USERABORT) {
        default_basis(m->lp);
        set_simplextype(m->lp, SIMPLEX_PRIMAL_PRIMAL);
        /* From the slack basis the primal simplex needs many more
         * iterations (about 250,000 on spread for that schedule). */
        m->iteration_limit *= 20;
        status = solve(m->lp);
        (*solves)++;
        if (m->timed_out)
            return TIME_LIMIT;
    }
    if (get_Nrows(m->lp) != m->rows || get_Ncolumns(m->lp) != m->columns)
        return MODEL_DAMAGED;
    return status;
}

/* 0 for OPTIMAL; else TF_ESOLVER naming the status (or the time limit)
 * and the objective of m->step. */
static int report_status(const lp_model *m, int status, tf_freeze_result *out, tf_error *err)
{
    snprintf(out->status, sizeof out->status, "%s", status_name(status));
    if (status == TIME_LIMIT)
        return tf_fail(err, TF_ESOLVER,
                       "lp_solve: stopped at the time limit (%g s) while minimising %s after "
                       "%lld iterations",
                       m->lim->time_limit_s, m->step, (long long)get_total_iter(m->lp));
    if (status != OPTIMAL)
        return tf_fail(err, TF_ESOLVER, "lp_solve: %s while minimising %s (status %d)",
                       status_name(status), m->step, status);
    return 0;
}

/* Solves, and if the optimum is not proven, reports lp_solve's status. */
static int solve_step(lp_model *m, const char *step, int *solves, tf_freeze_result *out,
                      tf_error *err)
{
    m->step = step;
    return report_status(m, guarded_solve(m, solves), out, err);
}

/* Solves with `column` bounded by the optimum just found, so the next
 * objective keeps it optimal.  The bound is the exact optimum; only if
 * lp_solve's round-off makes that infeasible is it relaxed by 1e-9
 * relative, far below any timer's resolution. */
static int solve_keeping_optimum(lp_model *m, int column, double optimum, const char *step,
                                 int *solves, tf_freeze_result *out, tf_error *err)
{
    set_upbo(m->lp, column, optimum);
    m->step = step;
    int status = guarded_solve(m, solves);
    if (status == INFEASIBLE || status == NUMFAILURE) {
        set_upbo(m->lp, column, optimum + 1e-9 * fmax(1.0, fabs(optimum)));
        return solve_step(m, step, solves, out, err);
    }
    return report_status(m, status, out, err);
}

/* Objective sum of all ratios. */
static int set_sum_objective(lp_model *m)
{
    int *cols = malloc(((size_t)m->k + 1) * sizeof *cols);
    double *vals = malloc(((size_t)m->k + 1) * sizeof *vals);
    int ok = cols && vals;
    if (ok) {
        int count = 0;
        for (int i = 0; i < m->n; i++)
            if (m->ratio_column[i]) {
                cols[count] = m->ratio_column[i];
                vals[count++] = 1.0;
            }
        ok = set_obj_fnex(m->lp, count, vals, cols);
    }
    free(cols);
    free(vals);
    return ok ? 0 : TF_ENOMEM;
}

int tf_freeze_lpsolve_run(const tf_freeze_problem *p, const tf_freeze_limits *lim,
                          tf_freeze_result *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    double started = tf_now_seconds();
    const int n = p->schedule->n_actions;
    lp_model m = {0};
    int rc = build_model(p, &m);
    if (rc) {
        free_model(&m);
        return tf_fail(err, rc, "out of memory building the freeze LP for %d actions", n);
    }
    m.lim = lim;
    m.rows = out->constraints = get_Nrows(m.lp);
    m.columns = out->variables = get_Ncolumns(m.lp);
    int solves = 0;
    double *values = malloc(((size_t)out->variables + 1) * sizeof *values);
    if (tf_freeze_result_alloc(out, n) || !values) {
        rc = tf_fail(err, TF_ENOMEM, "out of memory solving the freeze LP");
        goto done;
    }

    if ((rc = solve_step(&m, "the batch time", &solves, out, err)))
        goto done;
    double makespan = get_var_primalresult(m.lp, get_Nrows(m.lp) + m.col_T);
    if (m.k > 0) {
        double bounded = makespan;
        int bounded_column = m.col_T;
        if (m.col_z) {
            double one = 1.0;
            if (!set_obj_fnex(m.lp, 1, &one, &m.col_z)) {
                rc = tf_fail(err, TF_ENOMEM, "out of memory");
                goto done;
            }
            if ((rc = solve_keeping_optimum(&m, m.col_T, makespan, "the largest freeze ratio",
                                            &solves, out, err)))
                goto done;
            bounded = get_var_primalresult(m.lp, get_Nrows(m.lp) + m.col_z);
            bounded_column = m.col_z;
        }
        if ((rc = set_sum_objective(&m))) {
            rc = tf_fail(err, rc, "out of memory");
            goto done;
        }
        if ((rc = solve_keeping_optimum(&m, bounded_column, bounded, "the total freeze ratio",
                                        &solves, out, err)))
            goto done;
    }
    get_variables(m.lp, values);
    for (int i = 0; i < n; i++)
        out->ratio[i] = m.ratio_column[i] ? values[m.ratio_column[i] - 1] : 0.0;
    /* The batch time reported is the longest path under the planned
     * durations, which the LP bounds from above; they agree to solver
     * precision. */
    out->makespan = tf_freeze_apply_ratios(p->dag, p->max_ms, p->min_ms, out->ratio,
                                           out->duration, out->start);
    out->solves = solves;
    snprintf(out->status, sizeof out->status, "optimal");
    snprintf(out->solver, sizeof out->solver, "lp_solve");

done:
    free(values);
    free_model(&m);
    out->seconds = tf_now_seconds() - started;
    if (rc)
        tf_freeze_result_free(out);
    return rc;
}
