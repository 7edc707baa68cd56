/* freeze_memory.c - memory in the freeze LP: every rank's live bytes as a
 * running sum over its events (tf/memory.h), kept within its limit; and,
 * when no plan fits, each rank's smallest achievable peak for the message.
 *
 * The running sum y_e = y_(e-1) + (event e's change) keeps each row to a
 * few entries however long the rank's order is (one dense row per event
 * would hold every earlier event); y is in units of the rank's limit, so
 * the rows are as well scaled as the time rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "freeze_lpsolve.h"
#include "model/freezable.h"

/* lp_solve keeps rows feasible to 1e-10 in the rows' units (here the
 * limit), so a relative margin ten times that suffices for one row; along
 * a rank's running sum the rows' errors can add up past it (0.41 bytes,
 * 5.6e-9, on a fuzzed profile), which tf_freeze_solve's count of the
 * plan's peaks catches (solver.c). */
double tf_lp_memory_target(double limit)
{
    return limit * (1.0 - 1e-9);
}

/* Row y_e - y_(e-1) - change / scale = (the constant part) / scale, into
 * model lp with the given columns of f and q (0: not a column: that ratio
 * is 0) and y_e's column; prev_column 0 for a rank's first event, whose
 * y_(e-1) is the constant start / scale. */
typedef struct event_row {
    lprec *lp;
    double scale, start;
    int column, prev_column, freeze_column, recompute_column;
} event_row;

static int add_event_row(const event_row *r, const tf_memory_event *e)
{
    double values[4];
    int columns[4], count = 0;
    values[count] = 1.0;
    columns[count++] = r->column;
    if (r->prev_column) {
        values[count] = -1.0;
        columns[count++] = r->prev_column;
    }
    if (r->freeze_column) {
        values[count] = -e->freeze_coef / r->scale;
        columns[count++] = r->freeze_column;
    }
    if (r->recompute_column) {
        values[count] = -e->recompute_coef / r->scale;
        columns[count++] = r->recompute_column;
    }
    double rhs = (e->constant + (r->prev_column ? 0.0 : r->start)) / r->scale;
    return add_constraintex(r->lp, count, values, columns, EQ, rhs) ? 0 : TF_ENOMEM;
}

int tf_lp_add_memory_rows(lp_model *m, const tf_freeze_problem *p)
{
    const tf_memory_model *mem = p->memory;
    for (int r = 0; r < mem->ranks; r++) {
        double limit = p->memory_limit[r];
        double bound = tf_lp_memory_target(limit) / limit;
        for (int e = mem->event_offset[r]; e < mem->event_offset[r + 1]; e++) {
            const tf_memory_event *ev = &mem->events[e];
            event_row row = {m->lp, limit, mem->static_bytes[r], m->col_y + e,
                             e > mem->event_offset[r] ? m->col_y + e - 1 : 0,
                             ev->freeze_action >= 0 ? m->ratio_column[ev->freeze_action] : 0,
                             ev->recompute_action >= 0
                                 ? m->recompute_column[ev->recompute_action] : 0};
            if (add_event_row(&row, ev))
                return TF_ENOMEM;
            set_unbounded(m->lp, row.column);
            if (tf_memory_event_can_rise(ev))
                set_upbo(m->lp, row.column, bound);
        }
    }
    return 0;
}

/* --- The smallest achievable peak of one rank ------------------------ */

/* Columns: f of the rank's freezing actions, q of its recomputed
 * backwards, y of its events, z the peak (bytes / scale). */
typedef struct peak_model {
    lprec *lp;
    int *freeze_column, *recompute_column; /* per action, 0: none */
    int columns;
} peak_model;

/* Gives every action the rank's events name a column: f, and q where an
 * R serves the backward (as in the whole LP: recomputed[j]). */
static int peak_columns(const tf_memory_model *mem, int r, const unsigned char *recomputed,
                        peak_model *pm)
{
    int columns = 0;
    for (int e = mem->event_offset[r]; e < mem->event_offset[r + 1]; e++) {
        const tf_memory_event *ev = &mem->events[e];
        int f = ev->freeze_action, q = ev->recompute_action;
        if (f >= 0 && !pm->freeze_column[f])
            pm->freeze_column[f] = ++columns;
        if (q >= 0 && recomputed[q] && !pm->recompute_column[q])
            pm->recompute_column[q] = ++columns;
    }
    return columns;
}

/* Each stage's cap, as in the whole LP: its mean over every action it may
 * freeze (freezable) at most the cap, the actions that do not change the
 * rank's bytes left at 0. */
static int peak_caps(const tf_freeze_problem *p, int r, const unsigned char *freezable,
                     peak_model *pm)
{
    const tf_schedule *s = p->schedule;
    int *columns = malloc(((size_t)s->n_actions + 1) * sizeof *columns);
    double *ones = malloc(((size_t)s->n_actions + 1) * sizeof *ones);
    int rc = columns && ones ? 0 : TF_ENOMEM;
    for (int st = 0; st < s->stages && !rc; st++) {
        if (s->stage_rank[st] != r || p->cap[st] >= 1.0)
            continue;
        int count = 0, all = 0;
        for (int i = 0; i < s->n_actions; i++) {
            if (s->actions[i].stage != st || !freezable[i])
                continue;
            all++;
            if (pm->freeze_column[i]) {
                columns[count] = pm->freeze_column[i];
                ones[count++] = 1.0;
            }
        }
        if (count > 0 && !add_constraintex(pm->lp, count, ones, columns, LE, p->cap[st] * all))
            rc = TF_ENOMEM;
    }
    free(columns);
    free(ones);
    return rc;
}

/* Which actions the whole LP lets freeze and which backwards recompute. */
typedef struct peak_choices {
    unsigned char *freezable, *recomputed;
} peak_choices;

/* min z subject to every y_e <= z, in units of the rank's limit. */
static int min_peak(const tf_freeze_problem *p, const peak_choices *c, int r, double *peak)
{
    const tf_memory_model *mem = p->memory;
    const int n = p->schedule->n_actions;
    const int first = mem->event_offset[r], events = mem->event_offset[r + 1] - first;
    const double scale = p->memory_limit[r];
    peak_model pm = {NULL, calloc((size_t)n + 1, sizeof *pm.freeze_column),
                     calloc((size_t)n + 1, sizeof *pm.recompute_column), 0};
    int rc = pm.freeze_column && pm.recompute_column ? 0 : TF_ENOMEM;
    int ratios = rc ? 0 : peak_columns(mem, r, c->recomputed, &pm);
    int z = ratios + events + 1;
    if (!rc && !(pm.lp = make_lp(0, z)))
        rc = TF_ENOMEM;
    if (!rc) {
        set_verbose(pm.lp, NEUTRAL);
        set_add_rowmode(pm.lp, TRUE);
        for (int c = 1; c <= ratios; c++)
            set_upbo(pm.lp, c, 1.0);
        for (int e = 0; e < events && !rc; e++) {
            const tf_memory_event *ev = &mem->events[first + e];
            int y = ratios + 1 + e;
            event_row row = {pm.lp, scale, mem->static_bytes[r], y, e ? y - 1 : 0,
                             ev->freeze_action >= 0 ? pm.freeze_column[ev->freeze_action] : 0,
                             ev->recompute_action >= 0
                                 ? pm.recompute_column[ev->recompute_action] : 0};
            double values[2] = {1.0, -1.0};
            int columns[2] = {y, z};
            rc = add_event_row(&row, ev) ||
                         !add_constraintex(pm.lp, 2, values, columns, LE, 0.0)
                     ? TF_ENOMEM : 0;
            set_unbounded(pm.lp, y);
        }
        /* The start (static bytes alone) is a peak candidate too. */
        double one = 1.0;
        if (!rc && !add_constraintex(pm.lp, 1, &one, &z, GE, mem->static_bytes[r] / scale))
            rc = TF_ENOMEM;
        if (!rc)
            rc = peak_caps(p, r, c->freezable, &pm);
        set_add_rowmode(pm.lp, FALSE);
        if (!rc && !set_obj_fnex(pm.lp, 1, &one, &z))
            rc = TF_ENOMEM;
    }
    if (!rc) {
        set_minim(pm.lp);
        rc = solve(pm.lp) == OPTIMAL ? 0 : TF_ESOLVER;
        *peak = rc ? NAN : get_var_primalresult(pm.lp, get_Nrows(pm.lp) + z) * scale;
    }
    if (pm.lp)
        delete_lp(pm.lp);
    free(pm.freeze_column);
    free(pm.recompute_column);
    return rc;
}

/* Appends "rank R: X GiB (static S GiB) against a limit of L GiB" to buf. */
static void describe_rank(char *buf, size_t size, const tf_freeze_problem *p, int r,
                          double peak)
{
    const double gib = 1073741824.0;
    size_t used = strlen(buf);
    snprintf(buf + used, size - used,
             "%srank %d: its smallest achievable peak is %.0f bytes (%.3f GiB; static "
             "%.3f GiB), above its memory limit %.17g bytes (%.3f GiB)",
             used ? "; " : "", r, ceil(peak), peak / gib, p->memory->static_bytes[r] / gib,
             p->memory_limit[r], p->memory_limit[r] / gib);
}

/* Which actions may freeze and which backwards recompute, as in the whole
 * LP; freed by choices_free. */
static int choices_init(const tf_freeze_problem *p, peak_choices *c, tf_error *err)
{
    const int n = p->schedule->n_actions;
    c->freezable = malloc((size_t)n + 1);
    c->recomputed = calloc((size_t)n + 1, 1);
    int *served = malloc(((size_t)n + 1) * sizeof *served);
    int rc = c->freezable && c->recomputed && served
                 ? tf_freeze_recompute_targets(p, served, c->recomputed) : TF_ENOMEM;
    free(served);
    if (rc)
        return tf_fail(err, TF_ENOMEM, "out of memory finding the smallest memory peaks");
    tf_freezable_mark(p->schedule, p->max_ms, p->min_ms, p->memory, c->freezable);
    return 0;
}

static void choices_free(peak_choices *c)
{
    free(c->freezable);
    free(c->recomputed);
}

/* peaks[r] for each rank with wanted[r] (NULL: all): its smallest
 * achievable peak; the others get NAN. */
static int floors(const tf_freeze_problem *p, const unsigned char *wanted, double *peaks,
                  tf_error *err)
{
    peak_choices c = {0};
    int rc = choices_init(p, &c, err);
    for (int r = 0; r < p->memory->ranks && !rc; r++) {
        peaks[r] = NAN;
        if (wanted && !wanted[r])
            continue;
        if ((rc = min_peak(p, &c, r, &peaks[r])))
            rc = tf_fail(err, rc, "lp_solve: could not find rank %d's smallest memory peak", r);
    }
    choices_free(&c);
    return rc;
}

int tf_freeze_memory_floor(const tf_freeze_problem *p, double *peaks, tf_error *err)
{
    return floors(p, NULL, peaks, err);
}

int tf_freeze_memory_check(const tf_freeze_problem *p, tf_error *err)
{
    const tf_memory_model *mem = p->memory;
    const int ranks = mem->ranks;
    tf_memory_peak *unfrozen = malloc(((size_t)ranks + 1) * sizeof *unfrozen);
    unsigned char *over = calloc((size_t)ranks + 1, 1);
    double *peaks = malloc(((size_t)ranks + 1) * sizeof *peaks);
    int rc = unfrozen && over && peaks ? 0 : tf_fail(err, TF_ENOMEM, "out of memory");
    char message[sizeof err->msg] = "";
    if (!rc) {
        /* Ranks within their limit unfrozen need nothing. */
        tf_memory_peaks(mem, NULL, NULL, unfrozen);
        for (int r = 0; r < ranks; r++)
            over[r] = unfrozen[r].bytes > p->memory_limit[r];
        rc = floors(p, over, peaks, err);
    }
    for (int r = 0; r < ranks && !rc; r++)
        if (over[r] && peaks[r] > tf_lp_memory_target(p->memory_limit[r]))
            describe_rank(message, sizeof message, p, r, peaks[r]);
    free(unfrozen);
    free(over);
    free(peaks);
    if (!rc && message[0])
        rc = tf_fail(err, TF_EINVAL, "no plan fits the memory limit: %s (freezing and "
                     "recomputing all the caps allow brings it no lower)", message);
    return rc;
}
