/* bench_clp.c - the freeze LP through CLP's C interface (see bench_clp.h). */
#include "bench_clp.h"

#include <coin/Clp_C_Interface.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/freezable.h"
#include "solve/freeze_common.h"
#include "tf/dag.h"
#include "tf/util.h"

/* The LP in CLP's column-major form, built from row triplets. */
typedef struct clp_lp {
    int rows, columns, col_T;
    int *ratio_column;       /* n: 0-based column of r_i, -1 if fixed */
    CoinBigIndex *start;     /* columns + 1 */
    int *index;              /* row of each element */
    double *value;
    double *col_lower, *col_upper, *obj, *row_lower, *row_upper;
} clp_lp;

static void free_lp(clp_lp *m)
{
    free(m->ratio_column);
    free(m->start);
    free(m->index);
    free(m->value);
    free(m->col_lower);
    free(m->col_upper);
    free(m->obj);
    free(m->row_lower);
    free(m->row_upper);
    memset(m, 0, sizeof *m);
}

/* Row triplets under construction. */
typedef struct triplets {
    int count, rows;
    int *row, *column;
    double *value;
    double *lower;           /* per row; upper is +inf except cap rows */
    double *upper;
} triplets;

static void add_entry(triplets *t, int column, double value)
{
    t->row[t->count] = t->rows;
    t->column[t->count] = column;
    t->value[t->count++] = value;
}

/* later - t_u + d_u r_u >= max_u + lag, as freeze_lpsolve.c's add_precedence. */
static void add_precedence(triplets *t, const clp_lp *m, const double *span, int u, int later,
                           double bound)
{
    add_entry(t, later, 1.0);
    add_entry(t, u, -1.0);
    if (m->ratio_column[u] >= 0)
        add_entry(t, m->ratio_column[u], span[u]);
    t->lower[t->rows] = bound;
    t->upper[t->rows++] = DBL_MAX;
}

/* Numbers the columns: t_i (0 .. n-1), then r_i of each freezable action
 * (m->ratio_column, -1 if fixed, with its span and its stage counted),
 * then T.  Returns the number of ratio columns. */
static int number_columns(const tf_schedule *s, const double *max_ms, const double *min_ms,
                          clp_lp *m, double *span, int *stage_count)
{
    const int n = s->n_actions;
    int k = 0;
    for (int i = 0; i < n; i++) {
        m->ratio_column[i] = -1;
        if (tf_action_freezable(&s->actions[i], max_ms[i], min_ms[i])) {
            m->ratio_column[i] = n + k++;
            span[i] = max_ms[i] - min_ms[i];
            stage_count[s->actions[i].stage]++;
        }
    }
    m->col_T = n + k;
    m->columns = n + k + 1;
    return k;
}

/* The rows as triplets: one per kept DAG edge and per sink, one cap row
 * per stage with freezable actions and a cap below 1. */
static void add_rows(triplets *t, const tf_schedule *s, const tf_dag *g, const clp_lp *m,
                     const double *span, const double *max_ms, const double *cap,
                     const int *stage_count)
{
    const int n = s->n_actions;
    for (int u = 0; u < n; u++) {
        int first = g->succ_offset[u], last = g->succ_offset[u + 1];
        for (int e = first; e < last; e++) {
            int v = g->succ[e];
            if (tf_freeze_edge_implied(s, g, u, e))
                continue;
            add_precedence(t, m, span, u, v, max_ms[u] + g->lag[e]);
        }
        if (first == last)
            add_precedence(t, m, span, u, m->col_T, max_ms[u]);
    }
    for (int st = 0; st < s->stages; st++) {
        if (stage_count[st] == 0 || cap[st] >= 1.0)
            continue;
        for (int i = 0; i < n; i++)
            if (m->ratio_column[i] >= 0 && s->actions[i].stage == st)
                add_entry(t, m->ratio_column[i], 1.0);
        t->lower[t->rows] = -DBL_MAX;
        t->upper[t->rows++] = cap[st] * stage_count[st];
    }
}

/* Row triplets -> CLP's columns (a counting sort keeps rows ascending);
 * the row bounds move from t to m.  Returns 0 or TF_ENOMEM. */
static int to_columns(triplets *t, clp_lp *m)
{
    m->rows = t->rows;
    m->index = malloc(((size_t)t->count + 1) * sizeof *m->index);
    m->value = malloc(((size_t)t->count + 1) * sizeof *m->value);
    CoinBigIndex *fill = malloc((size_t)m->columns * sizeof *fill);
    if (!m->index || !m->value || !fill) {
        free(fill);
        return TF_ENOMEM;
    }
    for (int e = 0; e < t->count; e++)
        m->start[t->column[e] + 1]++;
    for (int c = 0; c < m->columns; c++)
        m->start[c + 1] += m->start[c];
    memcpy(fill, m->start, (size_t)m->columns * sizeof *fill);
    for (int e = 0; e < t->count; e++) {
        CoinBigIndex at = fill[t->column[e]]++;
        m->index[at] = t->row[e];
        m->value[at] = t->value[e];
    }
    free(fill);
    m->row_lower = t->lower;
    m->row_upper = t->upper;
    t->lower = t->upper = NULL;
    return 0;
}

static int build_lp(const tf_schedule *s, const tf_dag *g, const double *max_ms,
                    const double *min_ms, const double *cap, clp_lp *m)
{
    const int n = s->n_actions;
    double *span = calloc((size_t)n + 1, sizeof *span);
    int *stage_count = calloc((size_t)s->stages + 1, sizeof *stage_count);
    m->ratio_column = malloc(((size_t)n + 1) * sizeof *m->ratio_column);
    if (!span || !stage_count || !m->ratio_column) {
        free(span);
        free(stage_count);
        return TF_ENOMEM;
    }
    int k = number_columns(s, max_ms, min_ms, m, span, stage_count);
    size_t max_rows = (size_t)g->n_edges + (size_t)n + (size_t)s->stages + 1;
    size_t max_entries = 3 * ((size_t)g->n_edges + (size_t)n) + (size_t)k + 1;
    triplets t = {0};
    t.row = malloc(max_entries * sizeof *t.row);
    t.column = malloc(max_entries * sizeof *t.column);
    t.value = malloc(max_entries * sizeof *t.value);
    t.lower = malloc(max_rows * sizeof *t.lower);
    t.upper = malloc(max_rows * sizeof *t.upper);
    m->col_lower = calloc((size_t)m->columns, sizeof *m->col_lower);
    m->col_upper = malloc((size_t)m->columns * sizeof *m->col_upper);
    m->obj = calloc((size_t)m->columns, sizeof *m->obj);
    m->start = calloc((size_t)m->columns + 1, sizeof *m->start);
    int rc = 0;
    if (!t.row || !t.column || !t.value || !t.lower || !t.upper || !m->col_lower ||
        !m->col_upper || !m->obj || !m->start)
        rc = TF_ENOMEM;
    if (!rc) {
        for (int c = 0; c < m->columns; c++)
            m->col_upper[c] = c >= n && c < m->col_T ? 1.0 : DBL_MAX;
        m->obj[m->col_T] = 1.0;
        add_rows(&t, s, g, m, span, max_ms, cap, stage_count);
        rc = to_columns(&t, m);
    }
    free(t.row);
    free(t.column);
    free(t.value);
    free(t.lower);
    free(t.upper);
    free(span);
    free(stage_count);
    return rc;
}

static const char *clp_status_name(int status)
{
    switch (status) {
    case 0: return "optimal";
    case 1: return "primal infeasible";
    case 2: return "dual infeasible";
    case 3: return "stopped on iterations or time";
    case 4: return "stopped on errors";
    default: return "unknown status";
    }
}

/* Solves the loaded model lexicographically; fills ratio[n] (snapped). */
static int solve_lp(Clp_Simplex *model, clp_lp *m, int n, double *ratio, tf_error *err)
{
    Clp_initialSolve(model);
    int status = Clp_status(model);
    if (status != 0 || !Clp_isProvenOptimal(model))
        return tf_fail(err, TF_ESOLVER, "CLP: %s while minimising the batch time (status %d)",
                       clp_status_name(status), status);
    double makespan = Clp_primalColumnSolution(model)[m->col_T];
    int has_ratio = 0;
    memset(m->obj, 0, (size_t)m->columns * sizeof *m->obj);
    for (int i = 0; i < n; i++)
        if (m->ratio_column[i] >= 0) {
            m->obj[m->ratio_column[i]] = 1.0;
            has_ratio = 1;
        }
    if (has_ratio) {
        Clp_chgObjCoefficients(model, m->obj);
        m->col_upper[m->col_T] = makespan;
        Clp_chgColumnUpper(model, m->col_upper);
        Clp_primal(model, 0);
        status = Clp_status(model);
        if (status == 1) {
            m->col_upper[m->col_T] = makespan + 1e-9 * fmax(1.0, fabs(makespan));
            Clp_chgColumnUpper(model, m->col_upper);
            Clp_primal(model, 0);
            status = Clp_status(model);
        }
        if (status != 0 || !Clp_isProvenOptimal(model))
            return tf_fail(err, TF_ESOLVER,
                           "CLP: %s while minimising the total freeze ratio (status %d)",
                           clp_status_name(status), status);
    }
    const double *x = Clp_primalColumnSolution(model);
    for (int i = 0; i < n; i++)
        ratio[i] = m->ratio_column[i] >= 0 ? x[m->ratio_column[i]] : 0.0;
    return 0;
}

const char *bench_clp_version(void)
{
    return Clp_Version();
}

int bench_clp_plan(const tf_profile *p, bench_lp_result *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    bench_lp_plan w;
    int rc = bench_lp_begin(p, &w, err);
    if (rc)
        return rc;
    const int n = w.n;
    clp_lp m = {0};
    Clp_Simplex *model = NULL;
    double started = tf_now_seconds();
    if ((rc = build_lp(w.s, &w.g, w.max_ms, w.min_ms, p->max_freeze_ratio, &m))) {
        rc = tf_fail(err, rc, "out of memory building the freeze LP for %d actions", n);
        goto done;
    }
    out->rows = m.rows;
    out->columns = m.columns;
    model = Clp_newModel();
    if (!model) {
        rc = tf_fail(err, TF_ENOMEM, "CLP: could not create a model");
        goto done;
    }
    Clp_setLogLevel(model, 0);
    Clp_loadProblem(model, m.columns, m.rows, m.start, m.index, m.value, m.col_lower,
                    m.col_upper, m.obj, m.row_lower, m.row_upper);
    if ((rc = solve_lp(model, &m, n, w.ratio, err)))
        goto done;
    out->solve_seconds = tf_now_seconds() - started;
    rc = bench_lp_finish(&w, out, err);
done:
    if (model)
        Clp_deleteModel(model);
    free_lp(&m);
    bench_lp_free(&w);
    return rc;
}
