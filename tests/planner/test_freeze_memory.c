/* test_freeze_memory.c - plans under a memory limit against an independent
 * formulation.
 *
 * Random small profiles of every built-in schedule, with stage bytes,
 * recomputation on some stages and a limit below some rank's unfrozen
 * peak, go through the whole planner (tf_plan_from_profile: the profile's
 * JSON, R actions placed, the LP, the plan), once with each general solver
 * (lp_solve, CLP).  The same problem is then
 * built here a second way and solved with lp_solve: every DAG edge its own
 * row (no implied edges left out), and for every rank and every position
 * of its order one dense row "live bytes so far <= limit", written from
 * this file's own walk of the order (not memory.c's events: no running
 * sums).  Batch time, total freezing and total recomputation must agree,
 * the plan's own ratios must keep every rank within its limit by this
 * file's count, and where the planner finds no plan the second LP must be
 * infeasible too. */
#include <lpsolve/lp_lib.h>
#include <math.h>

#include "test_util.h"
#include "tf/dag.h"
#include "tf/planner.h"
#include "tf/profile.h"
#include "tf/schedule.h"

typedef struct stage_bytes {
    double s, a, af, g, x, c, rms; /* x: an I's transient */
    int recomputes;
} stage_bytes;

static double uniform(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (double)((*seed >> 8) & 0xFFFF) / 65535.0;
}

/* ---- this file's walk of one rank ------------------------------------ */

/* The live bytes after each action of rank r as linear expressions in
 * the ratios: coef[k][v] over the LP's columns (0: constant). */
typedef struct walk {
    int positions, columns;
    double *coef; /* positions x (columns + 1) */
} walk;

/* Which of (stage, microbatch)'s actions set its bytes. */
static int backward_of(const tf_schedule *s, int st, int mb)
{
    int b = tf_schedule_find(s, TF_ACT_B, st, mb);
    return b >= 0 ? b : tf_schedule_find(s, TF_ACT_I, st, mb);
}

static int weight_of(const tf_schedule *s, int st, int mb)
{
    int b = tf_schedule_find(s, TF_ACT_B, st, mb);
    return b >= 0 ? b : tf_schedule_find(s, TF_ACT_W, st, mb);
}

/* Adds c x (column v, or the constant for v < 0) to row k of w. */
static void add(walk *w, int k, int v, double c)
{
    w->coef[(size_t)k * (w->columns + 1) + (v < 0 ? 0 : v)] += c;
}

/* kept = A - f (A - Af) - q max(Af - C, 0), as bytes of (stage, mb)'s
 * forward: a linear expression added with sign `sign` into row k. */
static void add_kept(walk *w, int k, const stage_bytes *b, int fcol, int qcol, double sign,
                     int with_q)
{
    add(w, k, -1, sign * b->a);
    if (fcol > 0)
        add(w, k, fcol, -sign * (b->a - b->af));
    if (with_q && qcol > 0)
        add(w, k, qcol, -sign * fmax(b->af - b->c, 0.0));
}

/* The rows of rank r: the live bytes while and after each of its actions, written as
 * what every (stage, mb) holds at that moment. */
static walk walk_rank(const tf_schedule *s, const stage_bytes *bytes, const int *fcol,
                      const int *qcol, int columns, int r)
{
    walk w;
    const int n = s->rank_offset[r + 1] - s->rank_offset[r];
    w.positions = 2 * n;
    w.columns = columns;
    w.coef = calloc((size_t)w.positions * (columns + 1) + 1, sizeof *w.coef);
    /* Row 2k + 1: after the rank's k-th action; row 2k: while it runs,
     * which differs from the row before only in an I's transient. */
    for (int row = 0; row < w.positions; row++) {
        const int k = row / 2, running = row % 2 == 0;
        for (int st = 0; st < s->stages; st++)
            if (s->stage_rank[st] == r)
                add(&w, row, -1, bytes[st].s);
        const tf_action *now = &s->actions[s->rank_offset[r] + k];
        if (running && now->type == TF_ACT_I) {
            int f = fcol[weight_of(s, now->stage, now->microbatch)];
            add(&w, row, -1, bytes[now->stage].x);
            if (f > 0)
                add(&w, row, f, -bytes[now->stage].x);
        }
        /* Every action before k, and k itself once it has ended: what it
         * leaves held. */
        for (int j = s->rank_offset[r]; j < s->rank_offset[r] + k + !running; j++) {
            const tf_action *a = &s->actions[j];
            const stage_bytes *b = &bytes[a->stage];
            int bw = backward_of(s, a->stage, a->microbatch);
            int wt = weight_of(s, a->stage, a->microbatch);
            int f = fcol[wt], q = b->recomputes ? qcol[bw] : 0;
            if (a->type == TF_ACT_F) {
                add_kept(&w, row, b, f, q, 1.0, 1);
            } else if (a->type == TF_ACT_R) {
                if (q > 0)
                    add(&w, row, q, fmax(b->af - b->c, 0.0));
            } else if (a->type == TF_ACT_B || a->type == TF_ACT_I) {
                add_kept(&w, row, b, f, q, -1.0, 0);
                if (a->type == TF_ACT_I) {
                    add(&w, row, -1, b->g);
                    if (f > 0)
                        add(&w, row, f, -b->g);
                }
            } else if (a->type == TF_ACT_W) {
                add(&w, row, -1, -b->g);
                if (f > 0)
                    add(&w, row, f, b->g);
            }
        }
    }
    return w;
}

/* The live bytes of row k at the given column values. */
static double evaluate(const walk *w, int k, const double *value)
{
    const double *row = w->coef + (size_t)k * (w->columns + 1);
    double live = row[0];
    for (int v = 1; v <= w->columns; v++)
        live += row[v] * value[v];
    return live;
}

/* ---- the instance ---------------------------------------------------- */

typedef struct instance {
    tf_schedule s;        /* with R before every backward of recomputing stages */
    tf_dag g;
    double *max_ms, *min_ms, *rms; /* rms: an R's duration at q = 1 */
    double cap, limit;
    stage_bytes bytes[16];
    char json[16384];
} instance;

/* A random profile of `name`; its JSON text and this file's own copy. */
static int make_instance(const char *name, int p, int mb, unsigned *seed, instance *x)
{
    memset(x, 0, sizeof *x);
    int v = tf_schedule_default_stages_per_rank(name);
    tf_schedule plain;
    if (tf_schedule_build(name, p, v, mb, &plain, NULL))
        return -1;
    const int stages = plain.stages;
    int used = snprintf(x->json, sizeof x->json,
                        "{\"schedule\": \"%s\", \"ranks\": %d, \"stages_per_rank\": %d, "
                        "\"microbatches\": %d, \"stages\": [",
                        name, p, v, mb);
    unsigned char recomputes[16] = {0};
    for (int st = 0; st < stages; st++) {
        stage_bytes *b = &x->bytes[st];
        double fw = 1 + uniform(seed), bw = 2 + 2 * uniform(seed);
        b->s = 10 * uniform(seed);
        b->a = 5 + 10 * uniform(seed);
        b->af = b->a * uniform(seed);
        b->g = b->a * 1.2 * uniform(seed);
        b->x = uniform(seed) < 0.5 ? b->a * uniform(seed) : 0.0;
        b->recomputes = uniform(seed) < 0.6;
        b->c = b->af * uniform(seed);
        b->rms = fw;
        recomputes[st] = (unsigned char)b->recomputes;
        used += snprintf(x->json + used, sizeof x->json - used,
                         "%s{\"forward_ms\": %.17g, \"backward_ms\": %.17g, "
                         "\"backward_frozen_ms\": %.17g, \"backward_input_ms\": %.17g, "
                         "\"backward_weight_ms\": %.17g, \"backward_weight_frozen_ms\": %.17g, "
                         "\"static_bytes\": %.17g, \"activation_bytes\": %.17g, "
                         "\"activation_frozen_bytes\": %.17g, \"weight_grad_bytes\": %.17g, "
                         "\"backward_input_transient_bytes\": %.17g",
                         st ? ", " : "", fw, bw, bw * (0.3 + 0.5 * uniform(seed)), bw / 2,
                         bw / 2, bw / 2 * 0.05, b->s, b->a, b->af, b->g, b->x);
        if (b->recomputes)
            used += snprintf(x->json + used, sizeof x->json - used,
                             ", \"checkpoint_bytes\": %.17g, \"recompute_ms\": %.17g", b->c,
                             b->rms);
        used += snprintf(x->json + used, sizeof x->json - used, "}");
    }
    x->cap = 0.4 + 0.6 * uniform(seed);
    tf_schedule_insert_recompute(&plain, recomputes, &x->s);
    tf_schedule_free(&plain);
    /* The durations as the profile gives them, through the library. */
    snprintf(x->json + used, sizeof x->json - used, "], \"max_freeze_ratio\": %.17g}", x->cap);
    return 0;
}

/* ---- the second LP --------------------------------------------------- */

typedef struct second_lp {
    lprec *lp;
    int n, columns, col_T;
    int *tcol, *fcol, *qcol; /* per action of x->s: start, ratio, recompute (0: none) */
} second_lp;

/* Freezing changes a stage's bytes unless its frozen backward keeps as
 * much as an unfrozen one; W also holds the weight-gradient bytes. */
static int saves_bytes(const instance *x, const tf_action *a)
{
    const stage_bytes *b = &x->bytes[a->stage];
    return (a->type == TF_ACT_B && b->af < b->a) || (a->type == TF_ACT_W && (b->af < b->a || b->g > 0));
}

static void set_columns(const instance *x, const double *max_ms, const double *min_ms,
                        second_lp *l)
{
    const tf_schedule *s = &x->s;
    l->n = s->n_actions;
    l->tcol = calloc((size_t)l->n, sizeof *l->tcol);
    l->fcol = calloc((size_t)l->n, sizeof *l->fcol);
    l->qcol = calloc((size_t)l->n, sizeof *l->qcol);
    int c = 0;
    for (int i = 0; i < l->n; i++)
        l->tcol[i] = ++c;
    for (int i = 0; i < l->n; i++) {
        const tf_action *a = &s->actions[i];
        if ((a->type == TF_ACT_B || a->type == TF_ACT_W) &&
            (min_ms[i] < max_ms[i] || saves_bytes(x, a)))
            l->fcol[i] = ++c;
    }
    for (int i = 0; i < l->n; i++) {
        const tf_action *a = &s->actions[i];
        if (a->type == TF_ACT_R)
            l->qcol[backward_of(s, a->stage, a->microbatch)] = ++c;
    }
    l->col_T = ++c;
    l->columns = c;
}

/* The duration of action u as a row's entries: max - d f, or rms q. */
static int duration_terms(const instance *x, const second_lp *l, const double *max_ms,
                          const double *min_ms, int u, double sign, double *val, int *col)
{
    const tf_action *a = &x->s.actions[u];
    if (l->fcol[u]) {
        val[0] = -sign * (max_ms[u] - min_ms[u]);
        col[0] = l->fcol[u];
        return 1;
    }
    if (a->type == TF_ACT_R) {
        val[0] = sign * x->rms[u];
        col[0] = l->qcol[backward_of(&x->s, a->stage, a->microbatch)];
        return 1;
    }
    return 0;
}

static void add_time_rows(const instance *x, const double *max_ms, const double *min_ms,
                          second_lp *l)
{
    for (int u = 0; u < l->n; u++) {
        int first = x->g.succ_offset[u], last = x->g.succ_offset[u + 1];
        for (int e = first; e <= last; e++) {
            if (e == last && first != last)
                break;
            /* later - t_u - duration_u >= lag */
            double val[3] = {1.0, -1.0, 0};
            int col[3] = {e < last ? l->tcol[x->g.succ[e]] : l->col_T, l->tcol[u], 0};
            int extra = duration_terms(x, l, max_ms, min_ms, u, -1.0, val + 2, col + 2);
            add_constraintex(l->lp, 2 + extra, val, col, GE,
                             max_ms[u] + (e < last ? x->g.lag[e] : 0.0));
        }
    }
}

static void add_cap_rows(const instance *x, second_lp *l)
{
    for (int st = 0; st < x->s.stages; st++) {
        double val[512];
        int col[512], count = 0;
        for (int i = 0; i < l->n; i++)
            if (l->fcol[i] && x->s.actions[i].stage == st) {
                val[count] = 1.0;
                col[count++] = l->fcol[i];
            }
        if (count && x->cap < 1.0)
            add_constraintex(l->lp, count, val, col, LE, x->cap * count);
    }
}

static void add_memory_rows(const instance *x, second_lp *l)
{
    for (int r = 0; r < x->s.ranks; r++) {
        /* fcol per action, qcol per backward, as this walk wants them. */
        walk w = walk_rank(&x->s, x->bytes, l->fcol, l->qcol, l->columns, r);
        for (int k = 0; k < w.positions; k++) {
            double *row = w.coef + (size_t)k * (w.columns + 1);
            double val[1024];
            int col[1024], count = 0;
            for (int v = 1; v <= w.columns; v++)
                if (row[v] != 0.0) {
                    val[count] = row[v];
                    col[count++] = v;
                }
            add_constraintex(l->lp, count, val, col, LE, x->limit - row[0]);
        }
        free(w.coef);
    }
}

/* Minimises the sum of the given columns with the last objective's optimum
 * kept.  Returns lp_solve's status. */
static int minimise(second_lp *l, const int *cols, int count)
{
    double ones[4096];
    for (int k = 0; k < count; k++)
        ones[k] = 1.0;
    set_obj_fnex(l->lp, count, ones, (int *)cols);
    set_minim(l->lp);
    return solve(l->lp);
}

typedef struct optimum {
    int feasible;
    double T, freeze, recompute;
} optimum;

/* T, then least freezing, then least recomputation. */
static optimum solve_second(const instance *x, const double *max_ms, const double *min_ms)
{
    second_lp l = {0};
    set_columns(x, max_ms, min_ms, &l);
    l.lp = make_lp(0, l.columns);
    set_verbose(l.lp, NEUTRAL);
    for (int i = 0; i < l.n; i++) {
        if (l.fcol[i])
            set_upbo(l.lp, l.fcol[i], 1.0);
        if (l.qcol[i])
            set_upbo(l.lp, l.qcol[i], 1.0);
    }
    add_time_rows(x, max_ms, min_ms, &l);
    add_cap_rows(x, &l);
    add_memory_rows(x, &l);
    optimum o = {0};
    int status = minimise(&l, &l.col_T, 1);
    o.feasible = status == OPTIMAL;
    if (o.feasible) {
        o.T = get_objective(l.lp);
        set_upbo(l.lp, l.col_T, o.T * (1 + 1e-9) + 1e-9);
        int f[4096], q[4096], nf = 0, nq = 0;
        for (int i = 0; i < l.n; i++) {
            if (l.fcol[i])
                f[nf++] = l.fcol[i];
            if (l.qcol[i])
                q[nq++] = l.qcol[i];
        }
        if (nf) {
            assert_int_equal(minimise(&l, f, nf), OPTIMAL);
            o.freeze = get_objective(l.lp);
            double one[4096];
            for (int k = 0; k < nf; k++)
                one[k] = 1.0;
            add_constraintex(l.lp, nf, one, f, LE, o.freeze + 1e-9);
        }
        if (nq) {
            assert_int_equal(minimise(&l, q, nq), OPTIMAL);
            o.recompute = get_objective(l.lp);
        }
    }
    delete_lp(l.lp);
    free(l.tcol);
    free(l.fcol);
    free(l.qcol);
    return o;
}

/* ---- the checks ------------------------------------------------------ */

/* x's durations for its own schedule (with R), from the planner's reading
 * of the profile; and the limit: u of the largest unfrozen peak. */
static void durations_and_limit(instance *x, const tf_profile *p, double u)
{
    const int n = x->s.n_actions;
    double *own_max = malloc(sizeof(double) * p->schedule.n_actions);
    double *own_min = malloc(sizeof(double) * p->schedule.n_actions);
    tf_profile_durations(p, own_max, own_min);
    x->max_ms = malloc(sizeof(double) * n);
    x->min_ms = malloc(sizeof(double) * n);
    x->rms = calloc((size_t)n, sizeof(double));
    for (int i = 0, k = 0; i < n; i++) {
        const tf_action *a = &x->s.actions[i];
        if (a->type == TF_ACT_R) {
            x->max_ms[i] = x->min_ms[i] = 0.0;
            x->rms[i] = x->bytes[a->stage].rms;
        } else {
            x->max_ms[i] = own_max[k];
            x->min_ms[i] = own_min[k++];
        }
    }
    free(own_max);
    free(own_min);
    double worst = 0.0;
    int *zero_cols = calloc((size_t)n, sizeof(int));
    for (int r = 0; r < x->s.ranks; r++) {
        walk w = walk_rank(&x->s, x->bytes, zero_cols, zero_cols, 0, r);
        double *zero = calloc((size_t)w.columns + 1, sizeof *zero);
        assert_non_null(zero);
        for (int k = 0; k < w.positions; k++)
            worst = fmax(worst, evaluate(&w, k, zero));
        free(zero);
        free(w.coef);
    }
    free(zero_cols);
    x->limit = worst * u;
}

/* The plan's own ratios within the limit, by this file's walk. */
static void check_plan_fits(const instance *x, const tf_plan *plan)
{
    const tf_schedule *s = &plan->schedule;
    stage_bytes bytes[16];
    memcpy(bytes, x->bytes, sizeof bytes);
    int *fcol = calloc((size_t)s->n_actions, sizeof(int)), *qcol = calloc((size_t)s->n_actions, sizeof(int));
    double *value = calloc((size_t)2 * s->n_actions + 1, sizeof(double));
    int c = 0;
    for (int i = 0; i < s->n_actions; i++) {
        fcol[i] = ++c;
        value[c] = plan->actions[i].freeze_ratio;
        qcol[i] = ++c;
        value[c] = plan->actions[i].recompute_ratio;
    }
    for (int r = 0; r < s->ranks; r++) {
        walk w = walk_rank(s, bytes, fcol, qcol, c, r);
        for (int k = 0; k < w.positions; k++) {
            double live = evaluate(&w, k, value);
            if (live > x->limit * (1 + 1e-12))
                fail_msg("rank %d holds %.12g after action %d, above the limit %.12g", r, live,
                         k, x->limit);
        }
        free(w.coef);
    }
    free(fcol);
    free(qcol);
    free(value);
}

/* Returns 1 when a plan was made, 0 when neither the planner nor the
 * second LP found one.  Both general solvers plan; each must match the
 * second LP. */
static int check_instance(instance *x, double u)
{
    tf_profile p;
    tf_error err = {0};
    if (tf_profile_parse(x->json, "random.json", &p, &err))
        fail_msg("%s", err.msg);
    durations_and_limit(x, &p, u);
    tf_dag_build(&x->s, 0.0, &x->g, NULL);
    optimum second = solve_second(x, x->max_ms, x->min_ms);
    const tf_solver solvers[2] = {TF_SOLVER_LP_SOLVE, TF_SOLVER_CLP};
    for (int k = 0; k < 2; k++) {
        tf_plan_options o;
        tf_plan_options_init(&o);
        o.memory_limit = x->limit;
        o.solver = solvers[k];
        o.control.fallback = 0;
        tf_plan plan;
        int rc = tf_plan_from_profile(&p, &o, &plan, &err);
        const char *solver = tf_solver_name(solvers[k]);
        if (!second.feasible) {
            if (rc != TF_EINVAL)
                fail_msg("%s: the second LP finds no plan, %s %s", x->s.name, solver,
                         rc ? err.msg : "planned one");
            assert_contains(err.msg, "smallest achievable peak");
            continue;
        }
        if (rc)
            fail_msg("%s: %s: %s", x->s.name, solver, err.msg);
        assert_string_equal(plan.solver_name, solver);
        double freeze = 0.0, recompute = 0.0;
        for (int i = 0; i < plan.schedule.n_actions; i++) {
            freeze += plan.actions[i].freeze_ratio;
            recompute += plan.actions[i].recompute_ratio;
        }
        assert_close(plan.batch_ms_planned, second.T, 1e-6);
        assert_close(freeze, second.freeze, 1e-6);
        assert_close(recompute, second.recompute, 1e-5);
        check_plan_fits(x, &plan);
        tf_plan_free(&plan);
    }
    tf_profile_free(&p);
    return second.feasible;
}

static void free_instance(instance *x)
{
    tf_schedule_free(&x->s);
    tf_dag_free(&x->g);
    free(x->max_ms);
    free(x->min_ms);
    free(x->rms);
}

static void every_schedule_under_a_limit(void **state)
{
    (void)state;
    const char *names[] = {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS",
                           "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"};
    unsigned seed = 11;
    int planned = 0, refused = 0;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        for (int trial = 0; trial < 8; trial++) {
            int p = 2, mb = strcmp(names[k], "DualPipeV") == 0 ? 4 : 2 + trial % 3;
            if (strcmp(names[k], "Interleaved1F1B") == 0 || strcmp(names[k], "LoopedBFS") == 0 ||
                strcmp(names[k], "InterleavedZeroBubble") == 0)
                mb = 2 * (1 + trial % 2);
            instance x;
            if (make_instance(names[k], p, mb, &seed, &x))
                fail_msg("%s P=%d M=%d would not build", names[k], p, mb);
            double u = 0.6 + 0.38 * uniform(&seed);
            if (check_instance(&x, u))
                planned++;
            else
                refused++;
            free_instance(&x);
        }
    print_message("%d plans, %d without a plan\n", planned, refused);
    /* Both outcomes must have been exercised. */
    if (planned < 20 || refused < 2)
        fail_msg("%d plans, %d without a plan: widen the instances", planned, refused);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_schedule_under_a_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
