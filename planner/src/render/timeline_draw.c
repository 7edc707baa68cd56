/* timeline_draw.c - the timeline on a canvas (tf/canvas.h): every mark at
 * a position computed here, in points from the top-left corner.  Box edges
 * are whole points, x0 = round(x(start)), x1 = round(x(end)): Graphviz
 * rounds fixed node sizes to whole points anyway, and rounding both edges
 * (not the width) keeps neighbouring boxes of a rank from overlapping.
 * The dependency graph (--dag) is timeline_dag.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canvas_internal.h"
#include "tf/util.h"
#include "timeline_internal.h"

/* ---- geometry, in points ------------------------------------------------ */
enum {
    MARGIN = 14,
    GUTTER_LEFT = 70,   /* rank labels */
    GUTTER_RIGHT = 66,  /* per-rank idle share */
    ROW_H = TL_ROW_H,   /* one rank's timeline lane */
    BOX_H = 20,         /* an action inside its row */
    PANEL_HEAD_H = 24,  /* panel heading in --compare */
    PANEL_GAP = 10,
    MIN_PLOT_W = 480,   /* automatic width bounds of the time axis */
    MAX_PLOT_W = 7200,
    NARROW_BOX = 4,     /* a box narrower than this vanishes under its outline... */
    MARKER_W = 2        /* ...so a marker this wide shows where it runs */
};
static const double LABEL_FONT = 9.0;

/* ---- text, one style per kind ------------------------------------------- */
static const tf_canvas_text_style TITLE = {14, 'l', "#1b1b1b", 1};
static const tf_canvas_text_style SUBTITLE = {10, 'l', "#444444", 0};
static const tf_canvas_text_style PANEL_HEAD = {11, 'l', "#1b1b1b", 1};
static const tf_canvas_text_style RANK_NAME = {10, 'r', "#333333", 0};
static const tf_canvas_text_style RANK_STAGES = {7.5, 'r', "#777777", 0};
static const tf_canvas_text_style IDLE_SHARE = {8, 'l', "#777777", 0};
static const tf_canvas_text_style TICK_LABEL = {9, 'c', "#333333", 0};
static const tf_canvas_text_style AXIS_NAME = {9, 'r', "#333333", 0};
static const tf_canvas_text_style LEGEND = {9, 'l', "#333333", 0};
static const tf_canvas_text_style SAVING = {10, 'c', "#2d6a2a", 1};

/* ---- colours -------------------------------------------------------------- */
static const char *type_colour(tf_action_type type)
{
    switch (type) {
    case TF_ACT_F: return "#4e79a7";
    case TF_ACT_B: return "#e15759";
    case TF_ACT_I: return "#f28e2b";
    case TF_ACT_R: return "#b07aa1";
    default: return "#59a14f";
    }
}

static const char *type_name(tf_action_type type)
{
    switch (type) {
    case TF_ACT_F: return "forward";
    case TF_ACT_B: return "backward";
    case TF_ACT_I: return "backward-input";
    case TF_ACT_R: return "recompute";
    default: return "backward-weight";
    }
}

/* The documented fill (timeline.h): type colour, darker for a rank's later
 * stages, then paler with the freeze ratio; into out, returned. */
const char *tl_action_fill(const tl_model *m, int i, double ratio, char out[8])
{
    const tf_action *a = &m->plan->schedule.actions[i];
    char base[8];
    int spr = m->plan->schedule.stages_per_rank;
    tf_canvas_mix(type_colour(a->type), "#000000",
                  spr > 1 ? 0.22 * m->local_stage[a->stage] / (spr - 1) : 0.0, base);
    return tf_canvas_mix(base, "#ffffff", 0.75 * ratio, out);
}

/* ---- figures shown in titles --------------------------------------------- */

static int plan_is_unfrozen(const tf_plan *plan)
{
    for (int i = 0; i < plan->schedule.n_actions; i++)
        if (plan->actions[i].freeze_ratio > 0)
            return 0;
    return 1;
}

/* Share of rank-time left idle in a panel (the bubble). */
static double idle_share(const tl_model *m, const tl_panel *p, int rank)
{
    const tf_schedule *s = &m->plan->schedule;
    if (p->makespan <= 0)
        return 0.0;
    int first = rank < 0 ? 0 : rank, last = rank < 0 ? s->ranks - 1 : rank;
    double busy = 0.0;
    for (int i = s->rank_offset[first]; i < s->rank_offset[last + 1]; i++)
        busy += p->ms[i];
    return fmax(0.0, 1.0 - busy / (p->makespan * (last - first + 1)));
}

void tl_title_lines(const tl_model *m, const tf_timeline_options *opt, char *line1,
                        char *line2, size_t size)
{
    const tf_plan *plan = m->plan;
    const tf_schedule *s = &plan->schedule;
    const tl_panel *planned = &m->panels[m->n_panels - 1];
    char stages[64] = "";
    if (s->stages_per_rank > 1)
        snprintf(stages, sizeof stages, " \xc3\x97 %d stages", s->stages_per_rank);
    if (opt->title)
        snprintf(line1, size, "%s", opt->title);
    else
        snprintf(line1, size, "%s \xc2\xb7 %d %s%s \xc2\xb7 %d %s", s->name, s->ranks,
                 tf_plural(s->ranks, "rank", "ranks"), stages, s->microbatches,
                 tf_plural(s->microbatches, "microbatch", "microbatches"));
    if (plan_is_unfrozen(plan))
        snprintf(line2, size, "unfrozen schedule \xc2\xb7 batch %.1f ms \xc2\xb7 bubble %.1f%%",
                 planned->makespan, 100.0 * idle_share(m, planned, -1));
    else
        snprintf(line2, size,
                 "batch %.1f ms (unfrozen %.1f ms, all frozen %.1f ms) \xc2\xb7 speedup "
                 "%.2f\xc3\x97 \xc2\xb7 mean freeze ratio %.2f \xc2\xb7 bubble %.1f%%",
                 planned->makespan, plan->batch_ms_unfrozen, plan->batch_ms_all_frozen,
                 plan->batch_ms_unfrozen / fmax(planned->makespan, 1e-12),
                 plan->freeze_ratio_mean, 100.0 * idle_share(m, planned, -1));
}

/* ---- the timeline ------------------------------------------------------------ */

typedef tl_frame frame;

/* The most actions any one rank runs. */
static int busiest_rank(const tl_model *m)
{
    const tf_schedule *s = &m->plan->schedule;
    int most = 1;
    for (int r = 0; r < s->ranks; r++)
        if (s->rank_offset[r + 1] - s->rank_offset[r] > most)
            most = s->rank_offset[r + 1] - s->rank_offset[r];
    return most;
}

/* The width the title needs. */
static double title_width(const char *line1, const char *line2)
{
    return fmax(tf_canvas_text_width(line1, TITLE.size),
                tf_canvas_text_width(line2, SUBTITLE.size));
}

/* The planned durations sorted ascending (malloc'd; NULL when out of
 * memory), and in *near_zero the duration under which a box counts as near
 * zero: a fifth of the median (a fully frozen W, typically).  The
 * automatic width and the count of unlabelled boxes leave those out. */
static double *sorted_durations(const tl_model *m, double *near_zero)
{
    const tl_panel *planned = &m->panels[m->n_panels - 1];
    double *sorted = malloc(((size_t)m->n + 1) * sizeof *sorted);
    if (sorted) {
        memcpy(sorted, planned->ms, (size_t)m->n * sizeof *sorted);
        *near_zero = 0.2 * tf_median(sorted, m->n); /* and sorts */
    }
    return sorted;
}

/* The top of the memory lanes' scale, in bytes: a round number of GiB
 * (1, 2 or 5 times a power of ten) at or above most, the highest peak or
 * limit; 1 GiB when nothing is ever held. */
static double memory_scale_top(double most)
{
    const double gib = 1073741824.0;
    if (!(most > 0))
        return gib;
    double step = tf_canvas_tick_step(most / gib, 350.0); /* about five steps */
    return ceil(most / gib / step - 1e-9) * step * gib;
}

/* The axis scale.  Automatic: wide enough that a typical short action (the
 * lower quartile of durations, ignoring near-zero ones such as frozen W)
 * holds a label like "F31", within [MIN_PLOT_W, MAX_PLOT_W]. */
static int choose_frame(const tl_model *m, const tf_timeline_options *opt, double title_w,
                        frame *f, tf_error *err)
{
    f->axis_ms = 0.0;
    for (int k = 0; k < m->n_panels; k++)
        f->axis_ms = fmax(f->axis_ms, m->panels[k].makespan);
    if (!(f->axis_ms > 0))
        f->axis_ms = 1.0; /* every action takes 0 ms: draw an empty 1 ms axis */
    f->x0 = MARGIN + GUTTER_LEFT;
    const double chrome = MARGIN + GUTTER_LEFT + GUTTER_RIGHT + MARGIN;
    if (opt->width > 0) {
        f->plot_w = floor(opt->width - chrome);
        if (f->plot_w < 100)
            return tf_fail(err, TF_EINVAL,
                           "width %g: too narrow; the picture needs at least %d points "
                           "(%d for labels and margins, 100 for the time axis)",
                           opt->width, (int)chrome + 100, (int)chrome);
    } else {
        double near_zero;
        double *sorted = sorted_durations(m, &near_zero);
        if (!sorted)
            return tf_fail(err, TF_ENOMEM, "out of memory drawing %d actions", m->n);
        int first = 0;
        while (first < m->n && sorted[first] < near_zero)
            first++;
        double typical = first < m->n ? sorted[first + (m->n - first) / 4] : 0.0;
        free(sorted);
        double need = tf_canvas_text_width("W31", LABEL_FONT) + 6;
        double w = typical > 0 ? need / typical * f->axis_ms : MIN_PLOT_W;
        w = fmax(w, title_w - GUTTER_LEFT - GUTTER_RIGHT);
        f->plot_w = ceil(fmin(fmax(w, MIN_PLOT_W), MAX_PLOT_W));
    }
    f->scale = f->plot_w / f->axis_ms;
    f->dense = f->plot_w / busiest_rank(m) < TF_TIMELINE_DENSE_POINTS;
    f->row_h = m->plan->memory ? ROW_H + TL_MEMORY_H : ROW_H;
    f->mem_top = m->plan->memory ? memory_scale_top(tl_memory_max_bytes(m)) : 0.0;
    return 0;
}

/* The frame the timeline is drawn in, as tl_draw_timeline would choose
 * it. */
static int frame_of(const tl_model *m, const tf_timeline_options *opt, frame *f, tf_error *err)
{
    char line1[512], line2[512];
    tl_title_lines(m, opt, line1, line2, sizeof line1);
    memset(f, 0, sizeof *f);
    return choose_frame(m, opt, title_width(line1, line2), f, err);
}

/* The label of action a that fits a box w points wide, at 9 pt or
 * smaller, else none.  On schedules with several stages per rank the label
 * names the stage as PyTorch names actions, "2F3", since "F3" alone does
 * not say which of the rank's stages ran (the shade only hints at it);
 * with one stage per rank the row already says it, and the shorter "F3"
 * fits narrower boxes.  Narrower boxes fall back to "F3", then "3" (the
 * colour still tells the type).  A W box pales towards white as it
 * freezes, so its colour cannot tell the type: a digit alone would read as
 * a stray number, and it gets "2W3", "W3" or none. */
static void fit_label(const tf_action *a, int name_stage, double w, char *label,
                      double *fontsize)
{
    static const double sizes[] = {9.0, 7.5, 6.0};
    char staged[48], full[32], short_label[32];
    snprintf(staged, sizeof staged, "%d%c%d", a->stage, tf_action_letter(a->type), a->microbatch);
    snprintf(full, sizeof full, "%c%d", tf_action_letter(a->type), a->microbatch);
    snprintf(short_label, sizeof short_label, "%d", a->microbatch);
    const char *candidates[] = {staged, full, short_label};
    int first = name_stage ? 0 : 1;
    int last = a->type == TF_ACT_W ? 1 : 2;
    for (int c = first; c <= last; c++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            if (tf_canvas_text_width(candidates[c], sizes[k]) + 3 <= w) {
                strcpy(label, candidates[c]);
                *fontsize = sizes[k];
                return;
            }
    label[0] = '\0';
    *fontsize = LABEL_FONT;
}

/* The width a box of action a needs for its shortest label ("3", or "W3"
 * for a W: fit_label's last candidate) at the smallest size, plus a point
 * for the rounding of box edges. */
static double shortest_label_need(const tf_action *a)
{
    char label[32];
    if (a->type == TF_ACT_W)
        snprintf(label, sizeof label, "W%d", a->microbatch);
    else
        snprintf(label, sizeof label, "%d", a->microbatch);
    return tf_canvas_text_width(label, 6.0) + 3 + 1;
}

int tl_fit_labels(const tl_model *m, const tf_timeline_options *opt, tl_label_fit *fit,
                  tf_error *err)
{
    memset(fit, 0, sizeof *fit);
    frame f;
    double near_zero, scale_needed = 0.0;
    int rc = frame_of(m, opt, &f, err);
    double *sorted = rc ? NULL : sorted_durations(m, &near_zero);
    if (rc || !sorted)
        return rc ? rc : tf_fail(err, TF_ENOMEM, "out of memory drawing %d actions", m->n);
    free(sorted);
    const int spr = m->plan->schedule.stages_per_rank;
    for (int k = 0; k < m->n_panels; k++)
        for (int i = 0; i < m->n; i++) {
            const tl_panel *p = &m->panels[k];
            const tf_action *a = &m->plan->actions[i].action;
            if (!(p->ms[i] >= near_zero) || !(p->ms[i] > 0))
                continue;
            char label[48];
            double fontsize, x0 = round(tl_x(&f, p->start[i]));
            label[0] = '\0';
            if (!f.dense)
                fit_label(a, spr > 1, round(tl_x(&f, p->start[i] + p->ms[i])) - x0, label,
                          &fontsize);
            fit->boxes++;
            fit->unlabelled += label[0] == '\0';
            scale_needed = fmax(scale_needed, shortest_label_need(a) / p->ms[i]);
        }
    fit->busiest = busiest_rank(m);
    fit->points = f.plot_w / fit->busiest;
    fit->dense = f.dense;
    const double chrome = MARGIN + GUTTER_LEFT + GUTTER_RIGHT + MARGIN;
    fit->width_for_labels =
        ceil(fmax(scale_needed * f.axis_ms, TF_TIMELINE_DENSE_POINTS * fit->busiest)) + chrome;
    return 0;
}

/* The overlapped pair action i belongs to, as PyTorch names it, into
 * name[TF_CELL_MAX]; "" when it belongs to none. */
static const char *pair_name(const tl_model *m, int i, char *name)
{
    const tf_schedule *s = &m->plan->schedule;
    int first = s->actions[i].pair == TF_PAIR_FIRST ? i
              : s->actions[i].pair == TF_PAIR_SECOND ? i - 1 : -1;
    name[0] = '\0';
    if (first >= 0 && first + 1 < s->n_actions)
        tf_pair_format(&s->actions[first], &s->actions[first + 1], name);
    return name;
}

/* ", recompute ratio q" for an R and a recomputing backward
 * (tl_recompute_ratio), into out[96]; "" for any other action. */
static const char *recompute_note(const tl_model *m, const tl_panel *p, int i, char *out)
{
    double q = tl_recompute_ratio(m, p, i);
    int is_r = m->plan->actions[i].action.type == TF_ACT_R;
    out[0] = '\0';
    if (is_r || q > 0)
        snprintf(out, 96, ", recompute ratio %.3f%s", q, is_r ? " (of its backward)" : "");
    return out;
}

static void draw_action(tf_canvas *c, const tl_model *m, const tl_panel *p, const frame *f, int i,
                        double row_top)
{
    const tf_plan_action *pa = &m->plan->actions[i];
    const tf_action *a = &pa->action;
    double x0 = round(tl_x(f, p->start[i])), x1 = round(tl_x(f, p->start[i] + p->ms[i]));
    double top = row_top + (ROW_H - BOX_H) / 2;
    char fill[8], cell[32], label[48], text[640], pair[TF_CELL_MAX];
    tl_action_fill(m, i, p->ratio[i], fill);
    tf_canvas_mark *n = tf_canvas_rect(c, x0, top, x1, top + BOX_H, fill);
    tf_action_format(a, cell);
    pair_name(m, i, pair);
    tf_canvas_setf(n, "id", "%s_%s", p->id_prefix, cell);
    tf_canvas_setf(n, "class", "action %c%s%s", tf_action_letter(a->type), p->critical[i] ? " critical" : "",
         pair[0] ? " pair" : "");
    /* Critical actions get a dark outline; others a hairline of white that
     * separates neighbours.  In dense rows a 1.6-point outline would cover
     * the whole box and white hairlines would pale every box, which reads
     * as freezing: the fill alone is drawn, and no label fits. */
    tf_canvas_set(n, "color", p->critical[i] ? "#1b1b1b" : "#ffffff");
    tf_canvas_set(n, "penwidth", f->dense ? "0" : p->critical[i] ? "1.6" : "0.6");
    double fontsize = LABEL_FONT;
    label[0] = '\0';
    if (!f->dense)
        fit_label(a, m->plan->schedule.stages_per_rank > 1, x1 - x0, label, &fontsize);
    tf_canvas_set(n, "label", label);
    if (fontsize != LABEL_FONT)
        tf_canvas_setf(n, "fontsize", "%g", fontsize);
    tf_canvas_set(n, "fontcolor", tf_canvas_luminance(fill) > 0.6 ? "#1b1b1b" : "#ffffff");
    char recompute[96];
    snprintf(text, sizeof text,
             "%s (%s, stage %d, microbatch %d) on rank %d: start %.3f ms, %.3f ms (max %.3f, min "
             "%.3f), freeze ratio %.3f%s%s%s%s",
             cell, type_name(a->type), a->stage, a->microbatch, a->rank, p->start[i], p->ms[i],
             pa->max_ms, pa->min_ms, p->ratio[i], recompute_note(m, p, i, recompute),
             p->critical[i] ? ", critical" : "", pair[0] ? "; half of the overlapped pair " : "",
             pair);
    tf_canvas_set(n, "tooltip", text);
}

/* An overlapped pair (first action i) runs as one node: its two boxes,
 * back to back, get one frame around them, a little taller than the boxes
 * like a marker, drawn over them.  id "<prefix>_pair_<F>_<B>", class
 * "pair"; its tooltip gives the pair's span.  Not in dense rows, where it
 * would cover the boxes. */
static void draw_pair_frame(tf_canvas *c, const tl_model *m, const tl_panel *p, const frame *f,
                            int i, double row_top)
{
    const tf_schedule *s = &m->plan->schedule;
    if (f->dense || s->actions[i].pair != TF_PAIR_FIRST || i + 1 >= s->n_actions)
        return;
    double end = p->start[i + 1] + p->ms[i + 1];
    double x0 = round(tl_x(f, p->start[i])), x1 = round(tl_x(f, end));
    char first[32], second[32], name[TF_CELL_MAX], text[320];
    tf_canvas_mark *n = tf_canvas_rect(c, x0, row_top + 1, fmax(x1, x0 + 1), row_top + ROW_H - 1, "#333333");
    tf_canvas_set(n, "style", "dashed");
    tf_canvas_set(n, "fillcolor", "none");
    tf_canvas_set(n, "penwidth", "1.2");
    tf_canvas_setf(n, "id", "%s_pair_%s_%s", p->id_prefix, tf_action_format(&s->actions[i], first),
         tf_action_format(&s->actions[i + 1], second));
    tf_canvas_set(n, "class", "pair");
    snprintf(text, sizeof text,
             "%s on rank %d: %s and %s issued together, one node of the schedule: start %.3f "
             "ms, %.3f ms (%s %.3f + %s %.3f)",
             pair_name(m, i, name), s->actions[i].rank, first, second, p->start[i],
             end - p->start[i], first, p->ms[i], second, p->ms[i + 1]);
    tf_canvas_set(n, "tooltip", text);
}

/* A box narrower than NARROW_BOX points (a fully frozen W, typically: a
 * hundredth of its unfrozen time) vanishes under its own outline and its
 * neighbours'.  A bar MARKER_W wide in the type's colour, darkened, and a
 * little taller than the boxes marks where it runs; drawn after the rank's
 * boxes, so it stays on top.  id "<prefix>_<action>_marker", class "marker". */
static void draw_marker(tf_canvas *c, const tl_model *m, const tl_panel *p, const frame *f, int i,
                        double row_top)
{
    double x0 = round(tl_x(f, p->start[i])), x1 = round(tl_x(f, p->start[i] + p->ms[i]));
    if (x1 - x0 >= NARROW_BOX || f->dense)
        return; /* in dense rows every box is narrow: markers would hide them all */
    const tf_action *a = &m->plan->actions[i].action;
    char colour[8], cell[32], text[256];
    tf_canvas_mix(type_colour(a->type), "#000000", 0.35, colour);
    double mid = (x0 + x1) / 2;
    tf_canvas_mark *n = tf_canvas_rect(c, mid - MARKER_W / 2.0, row_top + 1, mid + MARKER_W / 2.0,
                           row_top + ROW_H - 1, colour);
    tf_action_format(a, cell);
    tf_canvas_setf(n, "id", "%s_%s_marker", p->id_prefix, cell);
    tf_canvas_set(n, "class", "marker");
    snprintf(text, sizeof text,
             "%s (%s) on rank %d: start %.3f ms, %.3f ms, freeze ratio %.3f: too short to "
             "draw at this scale",
             cell, type_name(a->type), a->rank, p->start[i], p->ms[i], p->ratio[i]);
    tf_canvas_set(n, "tooltip", text);
}

/* One panel: lanes (idle shows as the empty lane), gridlines, boxes, rank
 * labels and idle shares.  Returns the y below it. */
static double draw_panel(tf_canvas *c, const tl_model *m, const tl_panel *p, const frame *f,
                         double step, double top)
{
    const tf_schedule *s = &m->plan->schedule;
    const double rows_h = (double)s->ranks * f->row_h;
    const double lane_end = round(tl_x(f, p->makespan));
    for (int r = 0; r < s->ranks; r++) {
        double row_top = top + r * f->row_h;
        tf_canvas_mark *lane = tf_canvas_rect(c, f->x0, row_top + 2, fmax(lane_end, f->x0 + 1),
                                  row_top + ROW_H - 2, "#eeeeee");
        tf_canvas_setf(lane, "id", "%s_lane_%d", p->id_prefix, r);
        tf_canvas_set(lane, "class", "lane");
        if (p == &m->panels[m->n_panels - 1])
            tl_draw_bubbles(c, m, p, f, r, row_top);
    }
    /* Gridlines over the lanes and under the boxes: they show in idle gaps. */
    for (int k = 0; k * step <= f->axis_ms * (1 + 1e-12); k++) {
        double x = round(tl_x(f, k * step));
        tf_canvas_rect(c, x, top, x, top + rows_h, "#d4d4d4");
    }
    for (int r = 0; r < s->ranks; r++)
        tl_draw_memory_lane(c, m, p, f, r, top + r * f->row_h + ROW_H);
    for (int r = 0; r < s->ranks; r++) {
        double row_top = top + r * f->row_h;
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
            if (tl_runs(m, p, i))
                draw_action(c, m, p, f, i, row_top);
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
            if (tl_runs(m, p, i))
                draw_marker(c, m, p, f, i, row_top);
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
            draw_pair_frame(c, m, p, f, i, row_top);
        char text[96];
        snprintf(text, sizeof text, "rank %d", r);
        double mid = row_top + ROW_H / 2.0;
        if (s->stages_per_rank > 1) {
            tf_canvas_text(c, f->x0 - 8, mid - 5, text, &RANK_NAME);
            int used = snprintf(text, sizeof text, "stage");
            for (int st = 0; st < s->stages && used < (int)sizeof text - 8; st++)
                if (s->stage_rank[st] == r)
                    used += snprintf(text + used, sizeof text - (size_t)used, "%s %d",
                                     used > 5 ? "," : "", st);
            tf_canvas_text(c, f->x0 - 8, mid + 6, text, &RANK_STAGES);
        } else {
            tf_canvas_text(c, f->x0 - 8, mid, text, &RANK_NAME);
        }
        snprintf(text, sizeof text, "idle %.0f%%", 100.0 * idle_share(m, p, r));
        tf_canvas_text(c, tl_x(f, f->axis_ms) + 8, mid, text, &IDLE_SHARE);
    }
    return top + rows_h;
}

/* The time axis under the panels: baseline, ticks at round times, labels.
 * Tick labels carry id="tick_k" and are centred on the tick. */
static double draw_axis(tf_canvas *c, const frame *f, double step, double top)
{
    double x_end = round(tl_x(f, f->axis_ms));
    tf_canvas_rect(c, f->x0, top, x_end, top, "#555555");
    int decimals = tf_canvas_tick_decimals(step);
    for (int k = 0; k * step <= f->axis_ms * (1 + 1e-12); k++) {
        double x = round(tl_x(f, k * step));
        tf_canvas_rect(c, x, top, x, top + 4, "#555555");
        char text[32];
        snprintf(text, sizeof text, "%.*f", decimals, k * step);
        tf_canvas_mark *label = tf_canvas_text(c, x, top + 12, text, &TICK_LABEL);
        tf_canvas_setf(label, "id", "tick_%d", k);
        tf_canvas_set(label, "class", "tick");
    }
    tf_canvas_text(c, f->x0 - 8, top + 12, "time (ms)", &AXIS_NAME);
    return top + 24;
}

/* Moves the legend cursor (x, y) to a new line when an item w points wide
 * would pass the right edge (unless it is first on its line). */
static void legend_room(double *x, double *y, double w, double left, double right,
                        double line_h)
{
    if (*x > left && *x + w > right) {
        *x = left;
        *y += line_h;
    }
}

/* A legend item: a swatch two squares wide in fill, then text, at the
 * cursor (x, y), wrapping to a new line as legend_room does. */
static void legend_swatch(tf_canvas *c, double *x, double *y, const frame *f, const char *fill,
                          const char *text)
{
    const double right = tl_x(f, f->axis_ms) + GUTTER_RIGHT, line_h = 18, sw = 12;
    double w = 2 * sw + 4 + tf_canvas_text_width(text, LEGEND.size) + 16;
    legend_room(x, y, w, f->x0, right, line_h);
    tf_canvas_rect(c, *x, *y - sw / 2, *x + 2 * sw, *y + sw / 2, fill);
    tf_canvas_text(c, *x + 2 * sw + 4, *y, text, &LEGEND);
    *x += w;
}

/* The legend, wrapped to the picture's width.  Returns the y below it. */
static double draw_legend(tf_canvas *c, const tl_model *m, const frame *f, double top)
{
    const tf_schedule *s = &m->plan->schedule;
    int present[TF_ACTION_TYPES] = {0}, freezable_type = -1;
    for (int i = 0; i < m->n; i++) {
        const tf_plan_action *a = &m->plan->actions[i];
        present[a->action.type] = 1;
        if (a->min_ms < a->max_ms && (a->action.type == TF_ACT_B || a->action.type == TF_ACT_W))
            if (freezable_type < 0 || a->action.type == TF_ACT_B)
                freezable_type = a->action.type;
    }
    const double right = tl_x(f, f->axis_ms) + GUTTER_RIGHT, line_h = 18, sw = 12;
    double x = f->x0, y = top + 10;
    char shade[8];
    for (int t = 0; t < TF_ACTION_TYPES; t++) {
        if (!present[t])
            continue;
        char text[48];
        snprintf(text, sizeof text, "%c %s", tf_action_letter((tf_action_type)t),
                 type_name((tf_action_type)t));
        double w = sw + 4 + tf_canvas_text_width(text, LEGEND.size) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        tf_canvas_rect(c, x, y - sw / 2, x + sw, y + sw / 2, type_colour((tf_action_type)t));
        tf_canvas_text(c, x + sw + 4, y, text, &LEGEND);
        x += w;
    }
    if (freezable_type >= 0) {
        const char *head = "freeze ratio  0";
        double w = tf_canvas_text_width(head, LEGEND.size) + 4 + 5 * sw + 4 +
                   tf_canvas_text_width("1", LEGEND.size) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        tf_canvas_text(c, x, y, head, &LEGEND);
        x += tf_canvas_text_width(head, LEGEND.size) + 4;
        const char *base = type_colour((tf_action_type)freezable_type);
        for (int k = 0; k < 5; k++) {
            tf_canvas_rect(c, x, y - sw / 2, x + sw, y + sw / 2,
                           tf_canvas_mix(base, "#ffffff", 0.75 * k / 4.0, shade));
            x += sw;
        }
        tf_canvas_text(c, x + 4, y, "1", &LEGEND);
        x += 4 + tf_canvas_text_width("1", LEGEND.size) + 16;
    }
    {
        double w = 2 * sw + 4 + tf_canvas_text_width("critical path", LEGEND.size) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        tf_canvas_mark *n = tf_canvas_rect(c, x, y - sw / 2, x + 2 * sw, y + sw / 2, "#ffffff");
        tf_canvas_set(n, "color", "#1b1b1b");
        tf_canvas_set(n, "penwidth", "1.6");
        tf_canvas_text(c, x + 2 * sw + 4, y, "critical path", &LEGEND);
        x += w;
    }
    legend_swatch(c, &x, &y, f, TL_BUBBLE_FILL, "idle window");
    if (m->plan->n_aux_work)
        legend_swatch(c, &x, &y, f, TL_AUX_FILL, "aux work in the idle time");
    if (m->n_panels > 1)
        legend_swatch(c, &x, &y, f, "#eeeeee", "idle (unfrozen)");
    if (m->plan->memory)
        legend_swatch(c, &x, &y, f, TL_MEMORY_FILL, "live memory, static part darker");
    if (m->plan->memory && m->plan->memory_limit) {
        double w = 2 * sw + 4 + tf_canvas_text_width("memory limit", LEGEND.size) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        tf_canvas_mark *n = tf_canvas_line(c, x, y, x + 2 * sw, y, TL_LIMIT_COLOUR);
        tf_canvas_set(n, "penwidth", "1.2");
        tf_canvas_set(n, "style", "dashed");
        tf_canvas_text(c, x + 2 * sw + 4, y, "memory limit", &LEGEND);
        x += w;
    }
    if (s->stages_per_rank > 1) {
        const char *text = "darker: a rank's later stage";
        double w = tf_canvas_text_width(text, LEGEND.size) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        tf_canvas_text(c, x, y, text, &LEGEND);
        x += w;
    }
    if (tf_schedule_has_pairs(s)) {
        const char *text = "overlapped pair (one node)";
        double w = 2 * sw + 4 + tf_canvas_text_width(text, LEGEND.size) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        tf_canvas_mark *n = tf_canvas_rect(c, x, y - sw / 2, x + 2 * sw, y + sw / 2, "#333333");
        tf_canvas_set(n, "style", "dashed");
        tf_canvas_set(n, "fillcolor", "none");
        tf_canvas_set(n, "penwidth", "1.2");
        tf_canvas_text(c, x + 2 * sw + 4, y, text, &LEGEND);
        x += w;
    }
    return y + line_h / 2;
}

/* In --compare, the time freezing saved: the stretch of the planned panel
 * between its end and the unfrozen end. */
static void draw_saving(tf_canvas *c, const tl_model *m, const frame *f, double top)
{
    const tl_panel *unfrozen = &m->panels[0], *planned = &m->panels[1];
    double saved = unfrozen->makespan - planned->makespan;
    double x0 = round(tl_x(f, planned->makespan)), x1 = round(tl_x(f, unfrozen->makespan));
    if (saved <= 0 || x1 - x0 < 2)
        return;
    double bottom = top + (double)m->plan->schedule.ranks * f->row_h;
    tf_canvas_mark *n = tf_canvas_rect(c, x0, top + 2, x1, bottom - 2, "#e6f4e4");
    tf_canvas_set(n, "color", "#4a9a45");
    tf_canvas_set(n, "penwidth", "1");
    tf_canvas_set(n, "style", "filled,dashed");
    tf_canvas_set(n, "id", "saved");
    char text[96];
    snprintf(text, sizeof text, "\xe2\x88\x92%.1f ms (\xe2\x88\x92%.1f%%)", saved,
             100.0 * saved / unfrozen->makespan);
    if (tf_canvas_text_width(text, SAVING.size) + 6 <= x1 - x0)
        tf_canvas_text(c, (x0 + x1) / 2, (top + bottom) / 2, text, &SAVING);
}

int tl_draw_timeline(tf_canvas *c, const tl_model *m, const tf_timeline_options *opt,
                     tf_error *err)
{
    char line1[512], line2[512];
    tl_title_lines(m, opt, line1, line2, sizeof line1);
    frame f = {0};
    int rc = choose_frame(m, opt, title_width(line1, line2), &f, err);
    if (rc)
        return rc;
    double step = tf_canvas_tick_step(f.axis_ms, f.plot_w);
    double y = MARGIN;
    tf_canvas_mark *t1 = tf_canvas_text(c, MARGIN, y + 8, line1, &TITLE);
    tf_canvas_set(t1, "id", "title");
    tf_canvas_mark *t2 = tf_canvas_text(c, MARGIN, y + 27, line2, &SUBTITLE);
    tf_canvas_set(t2, "id", "subtitle");
    y += 44;
    for (int k = 0; k < m->n_panels; k++) {
        const tl_panel *p = &m->panels[k];
        if (m->n_panels > 1) {
            char text[256];
            if (k == 0)
                snprintf(text, sizeof text,
                         "unfrozen \xc2\xb7 batch %.1f ms \xc2\xb7 bubble %.1f%%", p->makespan,
                         100.0 * idle_share(m, p, -1));
            else
                snprintf(text, sizeof text,
                         "planned \xc2\xb7 batch %.1f ms \xc2\xb7 %.2f\xc3\x97 faster \xc2\xb7 "
                         "mean freeze ratio %.2f \xc2\xb7 bubble %.1f%%",
                         p->makespan, m->panels[0].makespan / fmax(p->makespan, 1e-12),
                         m->plan->freeze_ratio_mean, 100.0 * idle_share(m, p, -1));
            tf_canvas_text(c, f.x0, y + PANEL_HEAD_H / 2.0 + 2, text, &PANEL_HEAD);
            y += PANEL_HEAD_H;
        }
        double panel_top = y;
        y = draw_panel(c, m, p, &f, step, y);
        if (m->n_panels > 1 && k == 1)
            draw_saving(c, m, &f, panel_top);
        y += k + 1 < m->n_panels ? PANEL_GAP : 4;
    }
    y = draw_axis(c, &f, step, y);
    y = draw_legend(c, m, &f, y + 4);
    /* Bottom-right corner: keeps the margins inside Graphviz's bounding box. */
    tf_canvas_rect(c, tl_x(&f, f.axis_ms) + GUTTER_RIGHT + MARGIN - 1, y + MARGIN - 1,
             tl_x(&f, f.axis_ms) + GUTTER_RIGHT + MARGIN, y + MARGIN, "#ffffff");
    /* Top-left corner: the bounding box starts at (0, 0), so the margins
     * above and left of the title are kept too. */
    tf_canvas_rect(c, 0, 0, 1, 1, "#ffffff");
    return 0;
}
