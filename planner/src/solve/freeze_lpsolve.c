/* freeze_lpsolve.c - the freeze-ratio LP, built sparse and solved with lp_solve.
 *
 * Columns: freeze_lpsolve.h.  A freezable action's duration is max - d r
 * with d = max - min, an R's is its recompute_ms times the recompute ratio
 * q of the backward it serves, so no duration column is needed and fixed
 * actions contribute only constants.  Rows: one per DAG edge
 * (t_v - t_u + d_u r_u >= max_u + lag), one per sink (T - t_u + d_u r_u >=
 * max_u), one cap row per stage with freezable actions and a cap below 1
 * (sum r <= cap * count), for spread one row per ratio (r_j - z <= 0), and
 * with a binding memory limit the memory rows (freeze_memory.c) and, with
 * recomputation, s - sum r = 0.
 *
 * Lexicographic optimum by sequential solves: minimise T; fix T's upper
 * bound at the optimum and minimise sum r (least-freeze), or first max r then
 * sum r (spread); with recomputation, then fix sum r and minimise sum q.
 * Each re-solve starts from the previous optimal basis.  The sequence is
 * written once against lp_engine; lpsolve_engine below runs it on
 * lp_solve, freeze_clp.c's on CLP.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "freeze_lpsolve.h"
#include "model/freezable.h"
#include "tf/util.h"

char *tf_freeze_lpsolve_version(char *buf, size_t size)
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
    case ACCURACYERROR: return "a solution it could not make accurate";
    case USERABORT: return "aborted";
    case TIMEOUT: return "timeout";
    case PRESOLVED: return "presolved";
    case MODEL_DAMAGED: return "numerical failure that changed the model's size";
    case TIME_LIMIT: return "stopped at the time limit";
    default: return "unknown status";
    }
}

int tf_lp_add_row(lp_model *m, int count, double *values, int *columns, int type, double rhs)
{
    return add_constraintex(m->lp, count, values, columns, type, rhs) ? 0 : TF_ENOMEM;
}

/* Row "finish of u (+ lag) <= later": later_column - t_u + d_u r_u >= max_u + lag,
 * or for an R, later_column - t_u - recompute_ms q >= lag. */
static int add_precedence(lp_model *m, const tf_freeze_problem *p, int u, int later_column,
                          double lag)
{
    double values[3] = {1.0, -1.0, 0.0};
    int columns[3] = {later_column, u + 1, 0};
    int count = 2;
    int served = m->recompute_of[u];
    if (m->ratio_column[u]) {
        values[2] = m->span[u];
        columns[2] = m->ratio_column[u];
        count = 3;
    } else if (served >= 0 && m->recompute_column[served]) {
        values[2] = -p->recompute_ms[u];
        columns[2] = m->recompute_column[served];
        count = 3;
    }
    return tf_lp_add_row(m, count, values, columns, GE, p->max_ms[u] + lag);
}

/* The columns of r and q, and m's arrays.  With a binding memory limit,
 * actions whose ratio changes their rank's bytes freeze too, and each R
 * gives its backward a q. */
static int assign_columns(const tf_freeze_problem *p, int memory, lp_model *m,
                          int *stage_count)
{
    const tf_schedule *s = p->schedule;
    const int n = s->n_actions;
    unsigned char *freezable = malloc((size_t)n + 1);
    unsigned char *recomputed = calloc((size_t)n + 1, 1);
    int rc = freezable && recomputed ? tf_freeze_recompute_targets(p, m->recompute_of, recomputed)
                                     : TF_ENOMEM;
    if (rc) {
        free(freezable);
        free(recomputed);
        return rc;
    }
    tf_freezable_mark(s, p->max_ms, p->min_ms, memory ? p->memory : NULL, freezable);
    m->k = 0;
    for (int i = 0; i < n; i++) {
        if (freezable[i]) {
            m->ratio_column[i] = n + 1 + m->k++;
            m->span[i] = p->max_ms[i] - p->min_ms[i];
            stage_count[s->actions[i].stage]++;
        }
    }
    /* Recomputation is a choice only where memory binds; otherwise every
     * R keeps q = 0 and lasts nothing. */
    m->kq = 0;
    for (int j = 0; memory && j < n; j++)
        if (recomputed[j])
            m->recompute_column[j] = n + m->k + 1 + m->kq++;
    free(freezable);
    free(recomputed);
    return 0;
}

/* Every precedence row, and each sink's row into T. */
static int add_precedences(lp_model *m, const tf_freeze_problem *p)
{
    const tf_dag *g = p->dag;
    int rc = 0;
    for (int u = 0; u < m->n && !rc; u++) {
        int first = g->succ_offset[u], last = g->succ_offset[u + 1];
        for (int e = first; e < last && !rc; e++)
            if (!tf_freeze_edge_implied(p->schedule, g, u, e))
                rc = add_precedence(m, p, u, g->succ[e] + 1, g->lag[e]);
        if (first == last && !rc)
            rc = add_precedence(m, p, u, m->col_T, 0.0);
    }
    return rc;
}

/* Cap rows (the stage's mean ratio may not exceed its cap), spread's rows
 * r - z <= 0, and with recomputation s - sum r = 0. */
static int add_ratio_rows(lp_model *m, const tf_freeze_problem *p, const int *stage_count)
{
    const tf_schedule *s = p->schedule;
    int *columns_buf = malloc(((size_t)m->k + 2) * sizeof *columns_buf);
    double *values_buf = malloc(((size_t)m->k + 2) * sizeof *values_buf);
    int rc = columns_buf && values_buf ? 0 : TF_ENOMEM;
    for (int st = 0; st < s->stages && !rc; st++) {
        if (stage_count[st] == 0 || p->cap[st] >= 1.0)
            continue;
        int count = 0;
        for (int i = 0; i < m->n; i++)
            if (m->ratio_column[i] && s->actions[i].stage == st) {
                columns_buf[count] = m->ratio_column[i];
                values_buf[count++] = 1.0;
            }
        rc = tf_lp_add_row(m, count, values_buf, columns_buf, LE, p->cap[st] * stage_count[st]);
    }
    for (int i = 0; i < m->n && !rc && m->col_z; i++) {
        if (!m->ratio_column[i])
            continue;
        double values[2] = {1.0, -1.0};
        int cols[2] = {m->ratio_column[i], m->col_z};
        rc = tf_lp_add_row(m, 2, values, cols, LE, 0.0);
    }
    if (!rc && m->col_sum) {
        int count = 0;
        for (int i = 0; i < m->n; i++)
            if (m->ratio_column[i]) {
                columns_buf[count] = m->ratio_column[i];
                values_buf[count++] = -1.0;
            }
        columns_buf[count] = m->col_sum;
        values_buf[count++] = 1.0;
        rc = tf_lp_add_row(m, count, values_buf, columns_buf, EQ, 0.0);
    }
    free(columns_buf);
    free(values_buf);
    return rc;
}

static int build_model(const tf_freeze_problem *p, lp_model *m)
{
    const tf_schedule *s = p->schedule;
    const int n = s->n_actions;
    const int memory = tf_freeze_memory_binds(p);
    m->n = n;
    m->ratio_column = calloc((size_t)n + 1, sizeof *m->ratio_column);
    m->recompute_column = calloc((size_t)n + 1, sizeof *m->recompute_column);
    m->recompute_of = calloc((size_t)n + 1, sizeof *m->recompute_of);
    m->span = calloc((size_t)n + 1, sizeof *m->span);
    int *stage_count = calloc((size_t)s->stages + 1, sizeof *stage_count);
    int rc = m->ratio_column && m->recompute_column && m->recompute_of && m->span && stage_count
                 ? assign_columns(p, memory, m, stage_count)
                 : TF_ENOMEM;
    if (rc) {
        free(stage_count);
        return rc;
    }
    m->col_T = n + m->k + m->kq + 1;
    int columns = m->col_T;
    m->col_z = p->objective == TF_OBJECTIVE_SPREAD ? ++columns : 0;
    m->col_sum = m->kq > 0 && m->k > 0 ? ++columns : 0;
    m->col_y = memory ? columns + 1 : 0;
    if (memory)
        columns += p->memory->n_events;
    m->lp = make_lp(0, columns);
    if (!m->lp) {
        free(stage_count);
        return TF_ENOMEM;
    }
    set_verbose(m->lp, NEUTRAL);
    /* No scaling: every coefficient is 1, -1, a duration span or a byte
     * count in units of its limit, already well scaled, and lp_solve's
     * default geometric + equilibrate scaling makes its dual simplex cycle
     * without end on uniform-time schedules (e.g. ZBVZeroBubble, 8 ranks,
     * 32 microbatches, cap 0.5). */
    set_scaling(m->lp, SCALE_NONE);
    for (int i = 0; i < n; i++) {
        if (m->ratio_column[i])
            set_upbo(m->lp, m->ratio_column[i], 1.0);
        if (m->recompute_column[i])
            set_upbo(m->lp, m->recompute_column[i], 1.0);
    }
    if (m->col_z)
        set_upbo(m->lp, m->col_z, 1.0);

    set_add_rowmode(m->lp, TRUE);
    /* Objective: T. */
    double one = 1.0;
    if (!set_obj_fnex(m->lp, 1, &one, &m->col_T))
        rc = TF_ENOMEM;
    if (!rc)
        rc = add_precedences(m, p);
    if (!rc)
        rc = add_ratio_rows(m, p, stage_count);
    if (!rc && memory)
        rc = tf_lp_add_memory_rows(m, p);
    free(stage_count);
    set_add_rowmode(m->lp, FALSE);
    set_minim(m->lp);
    return rc;
}

static void free_model(lp_model *m)
{
    if (m->engine && m->engine->release)
        m->engine->release(m);
    if (m->lp)
        delete_lp(m->lp);
    free(m->ratio_column);
    free(m->recompute_column);
    free(m->recompute_of);
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
static int lpsolve_solve(lp_model *m, int *solves)
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

static int lpsolve_set_objective(lp_model *m, int count, double *values, int *columns)
{
    return set_obj_fnex(m->lp, count, values, columns) ? 0 : TF_ENOMEM;
}

static void lpsolve_set_upper(lp_model *m, int column, double value)
{
    set_upbo(m->lp, column, value);
}

static void lpsolve_restart(lp_model *m)
{
    default_basis(m->lp);
}

static double lpsolve_value(lp_model *m, int column)
{
    return get_var_primalresult(m->lp, get_Nrows(m->lp) + column);
}

static long long lpsolve_iterations(lp_model *m)
{
    return (long long)get_total_iter(m->lp);
}

/* lp_solve solves its own model: nothing to load or release. */
static const lp_engine lpsolve_engine = {
    .name = "lp_solve",
    .solve = lpsolve_solve,
    .set_objective = lpsolve_set_objective,
    .set_upper = lpsolve_set_upper,
    .restart = lpsolve_restart,
    .value = lpsolve_value,
    .iterations = lpsolve_iterations,
};

/* 0 for OPTIMAL; else TF_ESOLVER naming the engine, the status (or the
 * time limit) and the objective of m->step. */
static int report_status(lp_model *m, int status, tf_freeze_result *out, tf_error *err)
{
    snprintf(out->status, sizeof out->status, "%s", status_name(status));
    if (status == TIME_LIMIT)
        return tf_fail(err, TF_ESOLVER,
                       "%s: stopped at the time limit (%g s) while minimising %s after "
                       "%lld iterations", m->engine->name,
                       m->lim->time_limit_s, m->step, m->engine->iterations(m));
    if (status != OPTIMAL)
        return tf_fail(err, TF_ESOLVER, "%s: %s while minimising %s (status %d)",
                       m->engine->name, status_name(status), m->step, status);
    return 0;
}

/* Solves, and if the optimum is not proven, reports lp_solve's status. */
static int solve_step(lp_model *m, const char *step, int *solves, tf_freeze_result *out,
                      tf_error *err)
{
    m->step = step;
    return report_status(m, m->engine->solve(m, solves), out, err);
}

/* What a retry from a relaxed bound or the slack basis has cured:
 * round-off calling the bounded problem infeasible, or lp_solve unable to
 * make its answer accurate (seen minimising recomputation under a memory
 * limit, Interleaved1F1B, 2 ranks, measured bytes). */
static int retryable(int status)
{
    return status == INFEASIBLE || status == NUMFAILURE || status == ACCURACYERROR;
}

/* Solves with `column` bounded by the optimum just found, so the next
 * objective keeps it optimal.  The bound is the exact optimum; only if
 * lp_solve's round-off makes that infeasible is it relaxed by 1e-9
 * relative, far below any timer's resolution.  If lp_solve still calls it
 * infeasible, it solves once more from the slack basis: started from the
 * last optimal basis, its dual simplex has called such a problem
 * infeasible (least recomputation under a memory limit, GPipe, 3 ranks)
 * that it solves from the start.  Last, from the slack basis, the bound is
 * relaxed by 1e-7, 1e-6 and 1e-5 relative (a limit exactly at a breakpoint
 * of the memory trade-off, ZBVZeroBubble with measured bytes, needed
 * 1e-7): still a few microseconds of a batch, a rounding of the ratios. */
static int solve_keeping_optimum(lp_model *m, int column, double optimum, const char *step,
                                 int *solves, tf_freeze_result *out, tf_error *err)
{
    m->engine->set_upper(m, column, optimum);
    m->step = step;
    int status = m->engine->solve(m, solves);
    if (retryable(status)) {
        m->engine->set_upper(m, column, optimum + 1e-9 * fmax(1.0, fabs(optimum)));
        status = m->engine->solve(m, solves);
    }
    if (retryable(status)) {
        m->engine->restart(m);
        status = m->engine->solve(m, solves);
    }
    for (double slack = 1e-7; retryable(status) && slack <= 1e-5; slack *= 10) {
        m->engine->set_upper(m, column, optimum + slack * fmax(1.0, fabs(optimum)));
        m->engine->restart(m);
        status = m->engine->solve(m, solves);
    }
    return report_status(m, status, out, err);
}

/* Objective: the sum of the non-zero entries of column[n] (the ratios or
 * the recompute ratios). */
static int set_sum_objective(lp_model *m, const int *column)
{
    int *cols = malloc(((size_t)m->n + 1) * sizeof *cols);
    double *vals = malloc(((size_t)m->n + 1) * sizeof *vals);
    int ok = cols && vals;
    if (ok) {
        int count = 0;
        for (int i = 0; i < m->n; i++)
            if (column[i]) {
                cols[count] = column[i];
                vals[count++] = 1.0;
            }
        ok = m->engine->set_objective(m, count, vals, cols) == 0;
    }
    free(cols);
    free(vals);
    return ok ? 0 : TF_ENOMEM;
}

/* After the batch time: least freezing (spread: the largest ratio first),
 * then least recomputation, each keeping the optimum before it. */
static int solve_freezing(lp_model *m, double makespan, int *solves, tf_freeze_result *out,
                          tf_error *err)
{
    double bounded = makespan;
    int bounded_column = m->col_T;
    if (m->k > 0) {
        if (m->col_z) {
            double one = 1.0;
            if (m->engine->set_objective(m, 1, &one, &m->col_z))
                return tf_fail(err, TF_ENOMEM, "out of memory");
            int rc = solve_keeping_optimum(m, m->col_T, makespan, "the largest freeze ratio",
                                           solves, out, err);
            if (rc)
                return rc;
            bounded = m->engine->value(m, m->col_z);
            bounded_column = m->col_z;
        }
        if (set_sum_objective(m, m->ratio_column))
            return tf_fail(err, TF_ENOMEM, "out of memory");
        int rc = solve_keeping_optimum(m, bounded_column, bounded, "the total freeze ratio",
                                       solves, out, err);
        if (rc)
            return rc;
        if (m->col_sum) {
            bounded = m->engine->value(m, m->col_sum);
            bounded_column = m->col_sum;
        }
    }
    if (m->kq == 0)
        return 0;
    if (set_sum_objective(m, m->recompute_column))
        return tf_fail(err, TF_ENOMEM, "out of memory");
    return solve_keeping_optimum(m, bounded_column, bounded, "the total recompute ratio", solves,
                                 out, err);
}

int tf_lp_run(const tf_freeze_problem *p, const tf_freeze_limits *lim, const lp_engine *e,
              tf_freeze_result *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    double started = tf_now_seconds();
    const int n = p->schedule->n_actions;
    lp_model m = {0};
    int rc = build_model(p, &m);
    m.engine = e;
    if (!rc && e->load)
        rc = e->load(&m);
    if (rc) {
        free_model(&m);
        return tf_fail(err, rc, "out of memory building the freeze LP for %d actions", n);
    }
    m.lim = lim;
    m.rows = out->constraints = get_Nrows(m.lp);
    m.columns = out->variables = get_Ncolumns(m.lp);
    int solves = 0;
    if (tf_freeze_result_alloc(out, n)) {
        rc = tf_fail(err, TF_ENOMEM, "out of memory solving the freeze LP");
        goto done;
    }
    if ((rc = solve_step(&m, "the batch time", &solves, out, err)))
        goto done;
    double makespan = e->value(&m, m.col_T);
    if ((rc = solve_freezing(&m, makespan, &solves, out, err)))
        goto done;
    for (int i = 0; i < n; i++) {
        out->ratio[i] = m.ratio_column[i] ? e->value(&m, m.ratio_column[i]) : 0.0;
        out->recompute[i] = m.recompute_column[i] ? e->value(&m, m.recompute_column[i]) : 0.0;
    }
    /* The batch time reported is the longest path under the planned
     * durations, which the LP bounds from above; they agree to solver
     * precision. */
    out->makespan = tf_freeze_apply(p, out);
    out->solves = solves;
    snprintf(out->status, sizeof out->status, "optimal");
    snprintf(out->solver, sizeof out->solver, "%s", e->name);

done:
    free_model(&m);
    out->seconds = tf_now_seconds() - started;
    if (rc)
        tf_freeze_result_free(out);
    return rc;
}

int tf_freeze_lpsolve_run(const tf_freeze_problem *p, const tf_freeze_limits *lim,
                          tf_freeze_result *out, tf_error *err)
{
    return tf_lp_run(p, lim, &lpsolve_engine, out, err);
}
