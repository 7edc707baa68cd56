/* timeline_draw.c - the timeline and the dependency graph as cgraph graphs,
 * rendered in-process by gvc.
 *
 * The timeline pins every node (pos="x,y!") and lays out with the "nop"
 * engine (neato -n): Graphviz draws exactly the geometry computed here.
 * Coordinates are computed top-down in points and stored as y = -top, so
 * nothing needs the total height in advance; Graphviz fits the bounding box.
 * Box edges are whole points, x0 = round(x(start)), x1 = round(x(end)):
 * Graphviz rounds fixed node sizes to whole points anyway, and rounding both
 * edges (not the width) keeps neighbouring boxes of a rank from overlapping.
 *
 * The dependency graph (--dag) is laid out by the "dot" engine, one cluster
 * per rank, edges styled by the DAG rule that produced them.
 */
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/util.h"
#include "timeline_internal.h"

/* ---- geometry, in points ------------------------------------------------ */
enum {
    MARGIN = 14,
    GUTTER_LEFT = 70,   /* rank labels */
    GUTTER_RIGHT = 66,  /* per-rank idle share */
    ROW_H = 26,         /* one rank */
    BOX_H = 20,         /* an action inside its row */
    PANEL_HEAD_H = 24,  /* panel heading in --compare */
    PANEL_GAP = 10,
    MIN_PLOT_W = 480,   /* automatic width bounds of the time axis */
    MAX_PLOT_W = 7200,
    NARROW_BOX = 4,     /* a box narrower than this vanishes under its outline... */
    MARKER_W = 2        /* ...so a marker this wide shows where it runs */
};
static const double LABEL_FONT = 9.0;

/* ---- colours -------------------------------------------------------------- */
typedef struct rgb {
    double r, g, b; /* 0..255 */
} rgb;

static rgb rgb_of(unsigned hex)
{
    return (rgb){(hex >> 16) & 0xff, (hex >> 8) & 0xff, hex & 0xff};
}

static rgb mix(rgb a, rgb b, double t)
{
    return (rgb){a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
}

static char *rgb_hex(rgb c, char out[8])
{
    snprintf(out, 8, "#%02x%02x%02x", (unsigned)lround(c.r), (unsigned)lround(c.g),
             (unsigned)lround(c.b));
    return out;
}

/* Relative luminance in [0, 1] (sRGB weights, no gamma: good enough to pick
 * a readable text colour). */
static double luminance(rgb c)
{
    return (0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b) / 255.0;
}

static rgb type_colour(tf_action_type type)
{
    switch (type) {
    case TF_ACT_F: return rgb_of(0x4e79a7);
    case TF_ACT_B: return rgb_of(0xe15759);
    case TF_ACT_I: return rgb_of(0xf28e2b);
    default: return rgb_of(0x59a14f);
    }
}

static const char *type_name(tf_action_type type)
{
    switch (type) {
    case TF_ACT_F: return "forward";
    case TF_ACT_B: return "backward";
    case TF_ACT_I: return "backward-input";
    default: return "backward-weight";
    }
}

/* The documented fill (timeline.h): type colour, darker for a rank's later
 * stages, then paler with the freeze ratio. */
static rgb action_fill(const tl_model *m, int i, double ratio)
{
    const tf_action *a = &m->plan->schedule.actions[i];
    rgb c = type_colour(a->type);
    int spr = m->plan->schedule.stages_per_rank;
    if (spr > 1)
        c = mix(c, rgb_of(0x000000), 0.22 * m->local_stage[a->stage] / (spr - 1));
    return mix(c, rgb_of(0xffffff), 0.75 * ratio);
}

/* ---- text ------------------------------------------------------------------ */

/* Estimated advance width of UTF-8 text at fontsize.  Graphviz does not size
 * fixed nodes by their text, so labels are fitted and aligned with this
 * estimate.  The widths are DejaVu Sans's (what "Helvetica" resolves to on
 * Debian), which are wider than Helvetica's: an estimate on the wide side
 * keeps text inside its node wherever the picture is viewed. */
static double text_width(const char *s, double fontsize)
{
    double em = 0.0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xc0) == 0x80)
            continue; /* UTF-8 continuation byte */
        if (*p >= '0' && *p <= '9')
            em += 0.64;
        else if (strchr(" .,:;!|()[]'", *p) || *p == 'I' || *p == 'i' || *p == 'l' ||
                 *p == 'j' || *p == 't' || *p == 'f')
            em += 0.36;
        else if (*p == 'W' || *p == 'm' || *p == 'M' || *p == 'w' || *p == '%')
            em += 0.98;
        else if (*p >= 'A' && *p <= 'Z')
            em += 0.74;
        else
            em += 0.63;
    }
    return em * fontsize;
}

/* Copies text into out[size] with backslashes doubled: Graphviz labels treat
 * "\N", "\l" etc. as escapes, and titles may come from the user. */
static const char *label_escape(const char *text, char *out, size_t size)
{
    size_t k = 0;
    for (const char *p = text; *p && k + 2 < size; p++) {
        if (*p == '\\')
            out[k++] = '\\';
        out[k++] = (*p == '\n' || *p == '\r') ? ' ' : *p;
    }
    out[k] = '\0';
    return out;
}

/* ---- the canvas: a graph plus a node counter --------------------------- */
typedef struct canvas {
    Agraph_t *g;
    int count;
} canvas;

static void set(void *obj, const char *attr, const char *value)
{
    agset(obj, (char *)attr, (char *)value);
}

static void setf(void *obj, const char *attr, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void setf(void *obj, const char *attr, const char *fmt, ...)
{
    char value[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    set(obj, attr, value);
}

/* Declares every attribute the drawing uses, with neutral defaults, so
 * agset works on each object. */
static void declare_attributes(Agraph_t *g, int pinned)
{
    static const char *const node_defaults[][2] = {
        {"shape", "box"},        {"fixedsize", "shape"},   {"style", "filled"},
        {"label", ""},           {"margin", "0"},          {"penwidth", "0"},
        {"color", "#ffffff"},    {"fillcolor", "#ffffff"}, {"fontname", "Helvetica"},
        {"fontsize", "9"},       {"fontcolor", "#222222"}, {"width", "0.75"},
        {"height", "0.5"},       {"pos", ""},              {"id", ""},
        {"class", ""},           {"tooltip", ""},
    };
    for (size_t k = 0; k < sizeof node_defaults / sizeof *node_defaults; k++)
        agattr(g, AGNODE, (char *)node_defaults[k][0], (char *)node_defaults[k][1]);
    agattr(g, AGRAPH, "fontname", "Helvetica");
    if (pinned) {
        agattr(g, AGRAPH, "notranslate", "true");
        agattr(g, AGRAPH, "pad", "0");
    }
}

static Agnode_t *new_node(canvas *c)
{
    char name[32];
    snprintf(name, sizeof name, "n%d", c->count++);
    return agnode(c->g, name, 1);
}

/* A filled rectangle with top-down corners (x0, top) - (x1, bottom), whole
 * points expected.  Zero width draws Graphviz's minimum, a 1 pt line. */
static Agnode_t *put_rect(canvas *c, double x0, double top, double x1, double bottom,
                          const char *fill)
{
    Agnode_t *n = new_node(c);
    setf(n, "pos", "%.3f,%.3f!", (x0 + x1) / 2, -(top + bottom) / 2);
    setf(n, "width", "%.6f", (x1 - x0) / 72.0);
    setf(n, "height", "%.6f", (bottom - top) / 72.0);
    set(n, "fillcolor", fill);
    set(n, "color", fill);
    return n;
}

/* A line of text centred vertically on y; align 'l' starts at x, 'r' ends
 * at x, 'c' is centred on x. */
static Agnode_t *put_text(canvas *c, double x, double y, const char *text, double fontsize,
                          char align, const char *colour, int bold)
{
    char escaped[1024], label[1040];
    label_escape(text, escaped, sizeof escaped);
    double w = ceil(text_width(text, fontsize) * (bold ? 1.1 : 1.0)) + 2;
    double cx = align == 'l' ? x + w / 2 : align == 'r' ? x - w / 2 : x;
    const char *justify = align == 'l' ? "\\l" : align == 'r' ? "\\r" : "";
    snprintf(label, sizeof label, "%s%s", escaped, justify);
    Agnode_t *n = new_node(c);
    set(n, "shape", "plaintext");
    set(n, "style", "");
    set(n, "fixedsize", "shape"); /* no warning if the estimate falls short */
    setf(n, "pos", "%.3f,%.3f!", cx, -y);
    setf(n, "width", "%.6f", w / 72.0);
    setf(n, "height", "%.6f", ceil(fontsize * 1.25) / 72.0);
    set(n, "label", label);
    setf(n, "fontsize", "%g", fontsize);
    set(n, "fontcolor", colour);
    if (bold)
        set(n, "fontname", "Helvetica-Bold");
    return n;
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

static void title_lines(const tl_model *m, const tf_timeline_options *opt, char *line1,
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

typedef struct frame {
    double x0;      /* x of time 0 */
    double scale;   /* points per ms */
    double axis_ms; /* time span of the axis */
    double plot_w;
    int dense;      /* under TF_TIMELINE_DENSE_POINTS per action on the busiest rank */
} frame;

static double x_at(const frame *f, double ms)
{
    return f->x0 + ms * f->scale;
}

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
    return fmax(text_width(line1, 14), text_width(line2, 10));
}

/* The axis scale.  Automatic: wide enough that a typical short action (the
 * lower quartile of durations, ignoring near-zero ones such as frozen W)
 * holds a label like "F31", within [MIN_PLOT_W, MAX_PLOT_W]. */
static int choose_frame(const tl_model *m, const tf_timeline_options *opt, double title_w,
                        frame *f, tf_error *err)
{
    const tl_panel *planned = &m->panels[m->n_panels - 1];
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
        double *sorted = malloc(((size_t)m->n + 1) * sizeof *sorted);
        if (!sorted)
            return tf_fail(err, TF_ENOMEM, "out of memory drawing %d actions", m->n);
        memcpy(sorted, planned->ms, (size_t)m->n * sizeof *sorted);
        double median = tf_median(sorted, m->n); /* and sorts */
        int first = 0;
        while (first < m->n && sorted[first] < 0.2 * median)
            first++;
        double typical = first < m->n ? sorted[first + (m->n - first) / 4] : 0.0;
        free(sorted);
        double need = text_width("W31", LABEL_FONT) + 6;
        double w = typical > 0 ? need / typical * f->axis_ms : MIN_PLOT_W;
        w = fmax(w, title_w - GUTTER_LEFT - GUTTER_RIGHT);
        f->plot_w = ceil(fmin(fmax(w, MIN_PLOT_W), MAX_PLOT_W));
    }
    f->scale = f->plot_w / f->axis_ms;
    f->dense = f->plot_w / busiest_rank(m) < TF_TIMELINE_DENSE_POINTS;
    return 0;
}

int tl_points_per_action(const tl_model *m, const tf_timeline_options *opt, double *points,
                         int *busiest, tf_error *err)
{
    char line1[512], line2[512];
    title_lines(m, opt, line1, line2, sizeof line1);
    frame f = {0};
    int rc = choose_frame(m, opt, title_width(line1, line2), &f, err);
    *busiest = busiest_rank(m);
    *points = rc ? 0.0 : f.plot_w / *busiest;
    return rc;
}

/* Round tick spacing: 1, 2 or 5 times a power of ten, the one giving the
 * tick count nearest to one per 70 points, but never closer than 36 points
 * (room for a label like "1250"). */
static double tick_step(double span, double plot_w)
{
    double target = fmax(2.0, plot_w / 70.0);
    double raw = span / target;
    double mag = pow(10.0, floor(log10(raw)));
    static const double factors[] = {1.0, 2.0, 5.0, 10.0};
    double best = 10.0 * mag;
    for (size_t k = 0; k < sizeof factors / sizeof *factors; k++) {
        double step = factors[k] * mag;
        if (step / span * plot_w < 36.0)
            continue;
        if (fabs(log(step / raw)) < fabs(log(best / raw)))
            best = step;
    }
    return best;
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
            if (text_width(candidates[c], sizes[k]) + 3 <= w) {
                strcpy(label, candidates[c]);
                *fontsize = sizes[k];
                return;
            }
    label[0] = '\0';
    *fontsize = LABEL_FONT;
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

static void draw_action(canvas *c, const tl_model *m, const tl_panel *p, const frame *f, int i,
                        double row_top)
{
    const tf_plan_action *pa = &m->plan->actions[i];
    const tf_action *a = &pa->action;
    double x0 = round(x_at(f, p->start[i])), x1 = round(x_at(f, p->start[i] + p->ms[i]));
    double top = row_top + (ROW_H - BOX_H) / 2;
    rgb fill = action_fill(m, i, p->ratio[i]);
    char hex[8], cell[32], label[48], text[640], pair[TF_CELL_MAX];
    Agnode_t *n = put_rect(c, x0, top, x1, top + BOX_H, rgb_hex(fill, hex));
    tf_action_format(a, cell);
    pair_name(m, i, pair);
    setf(n, "id", "%s_%s", p->id_prefix, cell);
    setf(n, "class", "action %c%s%s", tf_action_letter(a->type), p->critical[i] ? " critical" : "",
         pair[0] ? " pair" : "");
    /* Critical actions get a dark outline; others a hairline of white that
     * separates neighbours.  In dense rows a 1.6-point outline would cover
     * the whole box and white hairlines would pale every box, which reads
     * as freezing: the fill alone is drawn, and no label fits. */
    set(n, "color", p->critical[i] ? "#1b1b1b" : "#ffffff");
    set(n, "penwidth", f->dense ? "0" : p->critical[i] ? "1.6" : "0.6");
    double fontsize = LABEL_FONT;
    label[0] = '\0';
    if (!f->dense)
        fit_label(a, m->plan->schedule.stages_per_rank > 1, x1 - x0, label, &fontsize);
    set(n, "label", label);
    if (fontsize != LABEL_FONT)
        setf(n, "fontsize", "%g", fontsize);
    set(n, "fontcolor", luminance(fill) > 0.6 ? "#1b1b1b" : "#ffffff");
    snprintf(text, sizeof text,
             "%s (%s, stage %d, microbatch %d) on rank %d: start %.3f ms, %.3f ms (max %.3f, min "
             "%.3f), freeze ratio %.3f%s%s%s",
             cell, type_name(a->type), a->stage, a->microbatch, a->rank, p->start[i], p->ms[i],
             pa->max_ms, pa->min_ms, p->ratio[i], p->critical[i] ? ", critical" : "",
             pair[0] ? "; half of the overlapped pair " : "", pair);
    set(n, "tooltip", text);
}

/* An overlapped pair (first action i) runs as one node: its two boxes,
 * back to back, get one frame around them, a little taller than the boxes
 * like a marker, drawn over them.  id "<prefix>_pair_<F>_<B>", class
 * "pair"; its tooltip gives the pair's span.  Not in dense rows, where it
 * would cover the boxes. */
static void draw_pair_frame(canvas *c, const tl_model *m, const tl_panel *p, const frame *f,
                            int i, double row_top)
{
    const tf_schedule *s = &m->plan->schedule;
    if (f->dense || s->actions[i].pair != TF_PAIR_FIRST || i + 1 >= s->n_actions)
        return;
    double end = p->start[i + 1] + p->ms[i + 1];
    double x0 = round(x_at(f, p->start[i])), x1 = round(x_at(f, end));
    char first[32], second[32], name[TF_CELL_MAX], text[320];
    Agnode_t *n = put_rect(c, x0, row_top + 1, fmax(x1, x0 + 1), row_top + ROW_H - 1, "#333333");
    set(n, "style", "dashed");
    set(n, "fillcolor", "none");
    set(n, "penwidth", "1.2");
    setf(n, "id", "%s_pair_%s_%s", p->id_prefix, tf_action_format(&s->actions[i], first),
         tf_action_format(&s->actions[i + 1], second));
    set(n, "class", "pair");
    snprintf(text, sizeof text,
             "%s on rank %d: %s and %s issued together, one node of the schedule: start %.3f "
             "ms, %.3f ms (%s %.3f + %s %.3f)",
             pair_name(m, i, name), s->actions[i].rank, first, second, p->start[i],
             end - p->start[i], first, p->ms[i], second, p->ms[i + 1]);
    set(n, "tooltip", text);
}

/* A box narrower than NARROW_BOX points (a fully frozen W, typically: a
 * hundredth of its unfrozen time) vanishes under its own outline and its
 * neighbours'.  A bar MARKER_W wide in the type's colour, darkened, and a
 * little taller than the boxes marks where it runs; drawn after the rank's
 * boxes, so it stays on top.  id "<prefix>_<action>_marker", class "marker". */
static void draw_marker(canvas *c, const tl_model *m, const tl_panel *p, const frame *f, int i,
                        double row_top)
{
    double x0 = round(x_at(f, p->start[i])), x1 = round(x_at(f, p->start[i] + p->ms[i]));
    if (x1 - x0 >= NARROW_BOX || f->dense)
        return; /* in dense rows every box is narrow: markers would hide them all */
    const tf_action *a = &m->plan->actions[i].action;
    char hex[8], cell[32], text[256];
    rgb colour = mix(type_colour(a->type), rgb_of(0x000000), 0.35);
    double mid = (x0 + x1) / 2;
    Agnode_t *n = put_rect(c, mid - MARKER_W / 2.0, row_top + 1, mid + MARKER_W / 2.0,
                           row_top + ROW_H - 1, rgb_hex(colour, hex));
    tf_action_format(a, cell);
    setf(n, "id", "%s_%s_marker", p->id_prefix, cell);
    set(n, "class", "marker");
    snprintf(text, sizeof text,
             "%s (%s) on rank %d: start %.3f ms, %.3f ms, freeze ratio %.3f: too short to "
             "draw at this scale",
             cell, type_name(a->type), a->rank, p->start[i], p->ms[i], p->ratio[i]);
    set(n, "tooltip", text);
}

/* One panel: lanes (idle shows as the empty lane), gridlines, boxes, rank
 * labels and idle shares.  Returns the y below it. */
static double draw_panel(canvas *c, const tl_model *m, const tl_panel *p, const frame *f,
                         double step, double top)
{
    const tf_schedule *s = &m->plan->schedule;
    const double rows_h = (double)s->ranks * ROW_H;
    const double lane_end = round(x_at(f, p->makespan));
    for (int r = 0; r < s->ranks; r++) {
        double row_top = top + r * ROW_H;
        Agnode_t *lane = put_rect(c, f->x0, row_top + 2, fmax(lane_end, f->x0 + 1),
                                  row_top + ROW_H - 2, "#eeeeee");
        setf(lane, "id", "%s_lane_%d", p->id_prefix, r);
        set(lane, "class", "lane");
    }
    /* Gridlines over the lanes and under the boxes: they show in idle gaps. */
    for (int k = 0; k * step <= f->axis_ms * (1 + 1e-12); k++) {
        double x = round(x_at(f, k * step));
        put_rect(c, x, top, x, top + rows_h, "#d4d4d4");
    }
    for (int r = 0; r < s->ranks; r++) {
        double row_top = top + r * ROW_H;
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
            draw_action(c, m, p, f, i, row_top);
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
            draw_marker(c, m, p, f, i, row_top);
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
            draw_pair_frame(c, m, p, f, i, row_top);
        char text[96];
        snprintf(text, sizeof text, "rank %d", r);
        double mid = row_top + ROW_H / 2.0;
        if (s->stages_per_rank > 1) {
            put_text(c, f->x0 - 8, mid - 5, text, 10, 'r', "#333333", 0);
            int used = snprintf(text, sizeof text, "stage");
            for (int st = 0; st < s->stages && used < (int)sizeof text - 8; st++)
                if (s->stage_rank[st] == r)
                    used += snprintf(text + used, sizeof text - (size_t)used, "%s %d",
                                     used > 5 ? "," : "", st);
            put_text(c, f->x0 - 8, mid + 6, text, 7.5, 'r', "#777777", 0);
        } else {
            put_text(c, f->x0 - 8, mid, text, 10, 'r', "#333333", 0);
        }
        snprintf(text, sizeof text, "idle %.0f%%", 100.0 * idle_share(m, p, r));
        put_text(c, x_at(f, f->axis_ms) + 8, mid, text, 8, 'l', "#777777", 0);
    }
    return top + rows_h;
}

/* The time axis under the panels: baseline, ticks at round times, labels.
 * Tick labels carry id="tick_k" and are centred on the tick. */
static double draw_axis(canvas *c, const frame *f, double step, double top)
{
    double x_end = round(x_at(f, f->axis_ms));
    put_rect(c, f->x0, top, x_end, top, "#555555");
    int decimals = step >= 1.0 ? 0 : (int)ceil(-log10(step) - 1e-9);
    for (int k = 0; k * step <= f->axis_ms * (1 + 1e-12); k++) {
        double x = round(x_at(f, k * step));
        put_rect(c, x, top, x, top + 4, "#555555");
        char text[32];
        snprintf(text, sizeof text, "%.*f", decimals, k * step);
        Agnode_t *label = put_text(c, x, top + 12, text, 9, 'c', "#333333", 0);
        setf(label, "id", "tick_%d", k);
        set(label, "class", "tick");
    }
    put_text(c, f->x0 - 8, top + 12, "time (ms)", 9, 'r', "#333333", 0);
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

/* The legend, wrapped to the picture's width.  Returns the y below it. */
static double draw_legend(canvas *c, const tl_model *m, const frame *f, double top)
{
    const tf_schedule *s = &m->plan->schedule;
    int present[4] = {0}, freezable_type = -1;
    for (int i = 0; i < m->n; i++) {
        const tf_plan_action *a = &m->plan->actions[i];
        present[a->action.type] = 1;
        if (a->min_ms < a->max_ms && (a->action.type == TF_ACT_B || a->action.type == TF_ACT_W))
            if (freezable_type < 0 || a->action.type == TF_ACT_B)
                freezable_type = a->action.type;
    }
    const double right = x_at(f, f->axis_ms) + GUTTER_RIGHT, line_h = 18, sw = 12;
    double x = f->x0, y = top + 10;
    char hex[8];
    for (int t = 0; t < 4; t++) {
        if (!present[t])
            continue;
        char text[48];
        snprintf(text, sizeof text, "%c %s", tf_action_letter((tf_action_type)t),
                 type_name((tf_action_type)t));
        double w = sw + 4 + text_width(text, 9) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        rgb colour = type_colour((tf_action_type)t);
        put_rect(c, x, y - sw / 2, x + sw, y + sw / 2, rgb_hex(colour, hex));
        put_text(c, x + sw + 4, y, text, 9, 'l', "#333333", 0);
        x += w;
    }
    if (freezable_type >= 0) {
        const char *head = "freeze ratio  0";
        double w = text_width(head, 9) + 4 + 5 * sw + 4 + text_width("1", 9) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        put_text(c, x, y, head, 9, 'l', "#333333", 0);
        x += text_width(head, 9) + 4;
        rgb base = type_colour((tf_action_type)freezable_type);
        for (int k = 0; k < 5; k++) {
            rgb shade = mix(base, rgb_of(0xffffff), 0.75 * k / 4.0);
            put_rect(c, x, y - sw / 2, x + sw, y + sw / 2, rgb_hex(shade, hex));
            x += sw;
        }
        put_text(c, x + 4, y, "1", 9, 'l', "#333333", 0);
        x += 4 + text_width("1", 9) + 16;
    }
    {
        double w = 2 * sw + 4 + text_width("critical path", 9) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        Agnode_t *n = put_rect(c, x, y - sw / 2, x + 2 * sw, y + sw / 2, "#ffffff");
        set(n, "color", "#1b1b1b");
        set(n, "penwidth", "1.6");
        put_text(c, x + 2 * sw + 4, y, "critical path", 9, 'l', "#333333", 0);
        x += w;
    }
    {
        double w = 2 * sw + 4 + text_width("idle", 9) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        put_rect(c, x, y - sw / 2, x + 2 * sw, y + sw / 2, "#eeeeee");
        put_text(c, x + 2 * sw + 4, y, "idle", 9, 'l', "#333333", 0);
        x += w;
    }
    if (s->stages_per_rank > 1) {
        const char *text = "darker: a rank's later stage";
        double w = text_width(text, 9) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        put_text(c, x, y, text, 9, 'l', "#333333", 0);
        x += w;
    }
    if (tf_schedule_has_pairs(s)) {
        const char *text = "overlapped pair (one node)";
        double w = 2 * sw + 4 + text_width(text, 9) + 16;
        legend_room(&x, &y, w, f->x0, right, line_h);
        Agnode_t *n = put_rect(c, x, y - sw / 2, x + 2 * sw, y + sw / 2, "#333333");
        set(n, "style", "dashed");
        set(n, "fillcolor", "none");
        set(n, "penwidth", "1.2");
        put_text(c, x + 2 * sw + 4, y, text, 9, 'l', "#333333", 0);
        x += w;
    }
    return y + line_h / 2;
}

/* In --compare, the time freezing saved: the stretch of the planned panel
 * between its end and the unfrozen end. */
static void draw_saving(canvas *c, const tl_model *m, const frame *f, double top)
{
    const tl_panel *unfrozen = &m->panels[0], *planned = &m->panels[1];
    double saved = unfrozen->makespan - planned->makespan;
    double x0 = round(x_at(f, planned->makespan)), x1 = round(x_at(f, unfrozen->makespan));
    if (saved <= 0 || x1 - x0 < 2)
        return;
    double bottom = top + (double)m->plan->schedule.ranks * ROW_H;
    Agnode_t *n = put_rect(c, x0, top + 2, x1, bottom - 2, "#e6f4e4");
    set(n, "color", "#4a9a45");
    set(n, "penwidth", "1");
    set(n, "style", "filled,dashed");
    set(n, "id", "saved");
    char text[96];
    snprintf(text, sizeof text, "\xe2\x88\x92%.1f ms (\xe2\x88\x92%.1f%%)", saved,
             100.0 * saved / unfrozen->makespan);
    if (text_width(text, 10) + 6 <= x1 - x0)
        put_text(c, (x0 + x1) / 2, (top + bottom) / 2, text, 10, 'c', "#2d6a2a", 1);
}

/* Draws the timeline (one panel, or two with --compare) into c with pinned
 * positions, for the nop layout.  Returns 0 or TF_EINVAL (too narrow). */
static int draw_timeline(canvas *c, const tl_model *m, const tf_timeline_options *opt,
                         tf_error *err)
{
    char line1[512], line2[512];
    title_lines(m, opt, line1, line2, sizeof line1);
    frame f = {0};
    int rc = choose_frame(m, opt, title_width(line1, line2), &f, err);
    if (rc)
        return rc;
    double step = tick_step(f.axis_ms, f.plot_w);
    double y = MARGIN;
    Agnode_t *t1 = put_text(c, MARGIN, y + 8, line1, 14, 'l', "#1b1b1b", 1);
    set(t1, "id", "title");
    Agnode_t *t2 = put_text(c, MARGIN, y + 27, line2, 10, 'l', "#444444", 0);
    set(t2, "id", "subtitle");
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
            put_text(c, f.x0, y + PANEL_HEAD_H / 2.0 + 2, text, 11, 'l', "#1b1b1b", 1);
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
    put_rect(c, x_at(&f, f.axis_ms) + GUTTER_RIGHT + MARGIN - 1, y + MARGIN - 1,
             x_at(&f, f.axis_ms) + GUTTER_RIGHT + MARGIN, y + MARGIN, "#ffffff");
    /* Top-left corner: the bounding box starts at (0, 0), so the margins
     * above and left of the title are kept too. */
    put_rect(c, 0, 0, 1, 1, "#ffffff");
    return 0;
}

/* ---- the dependency graph ------------------------------------------------ */

static const struct {
    unsigned char rule;
    const char *name, *colour, *style, *penwidth;
} rule_styles[] = {
    /* In priority order: an edge from several rules is drawn as the first. */
    {TF_EDGE_FORWARD_NEXT_STAGE, "forward to next stage", "#2f6eb5", "solid", "1.4"},
    {TF_EDGE_BACKWARD_PREV_STAGE, "backward to previous stage", "#c43c3e", "solid", "1.4"},
    {TF_EDGE_BACKWARD_AFTER_FORWARD, "backward after forward", "#8e44ad", "dashed", "1.2"},
    {TF_EDGE_MICROBATCH, "next microbatch", "#8c8c8c", "dotted", "1.2"},
    {TF_EDGE_PAIR, "overlapped pair (joins it, or enters or leaves it as one node)", "#333333",
     "bold", "2"},
    {TF_EDGE_RANK_ORDER, "rank order", "#b0b0b0", "solid", "1"},
};
enum { N_RULES = sizeof rule_styles / sizeof *rule_styles };

/* The graph's title (the timeline's two lines) and the attributes every
 * cluster, node and edge of the dependency graph starts from. */
static void set_graph_defaults(Agraph_t *g, const tl_model *m, const tf_timeline_options *opt)
{
    char line1[512], line2[512], escaped[512], title[1100];
    title_lines(m, opt, line1, line2, sizeof line1);
    /* Two left-justified lines ("\\l" ends a left-justified line). */
    int used = snprintf(title, sizeof title, "%s\\l", label_escape(line1, escaped, sizeof escaped));
    snprintf(title + used, sizeof title - (size_t)used, "%s\\l",
             label_escape(line2, escaped, sizeof escaped));
    agattr(g, AGRAPH, "rankdir", "LR");
    agattr(g, AGRAPH, "newrank", "true");
    agattr(g, AGRAPH, "nodesep", "0.12");
    agattr(g, AGRAPH, "ranksep", "0.35");
    agattr(g, AGRAPH, "labelloc", "t");
    agattr(g, AGRAPH, "labeljust", "l");
    agattr(g, AGRAPH, "fontsize", "11");
    /* Graph attributes declared here are also the clusters' defaults. */
    agattr(g, AGRAPH, "label", "");
    agattr(g, AGRAPH, "style", "filled");
    agattr(g, AGRAPH, "fillcolor", "#f6f6f6");
    agattr(g, AGRAPH, "color", "#dddddd");
    agset(g, "label", title);
    agset(g, "fontsize", "13");
    agattr(g, AGNODE, "fixedsize", "false");
    agattr(g, AGNODE, "width", "0.45");
    agattr(g, AGNODE, "height", "0.3");
    agattr(g, AGNODE, "fontsize", "10");
    agattr(g, AGNODE, "margin", "0.04,0.02");
    agattr(g, AGEDGE, "color", "#b0b0b0");
    agattr(g, AGEDGE, "style", "solid");
    agattr(g, AGEDGE, "penwidth", "1");
    agattr(g, AGEDGE, "arrowsize", "0.6");
    agattr(g, AGEDGE, "id", "");
    agattr(g, AGEDGE, "class", "");
    agattr(g, AGEDGE, "tooltip", "");
}

/* Action i of panel p as a node of cluster, filled and outlined as on the
 * timeline. */
static Agnode_t *draw_dag_node(Agraph_t *cluster, const tl_model *m, const tl_panel *p, int i)
{
    const tf_schedule *s = &m->plan->schedule;
    const tf_action *a = &s->actions[i];
    char cell[32], hex[8], text[256];
    tf_action_format(a, cell);
    Agnode_t *n = agnode(cluster, cell, 1);
    if (s->stages_per_rank > 1)
        set(n, "label", cell);
    else
        setf(n, "label", "%c%d", tf_action_letter(a->type), a->microbatch);
    rgb fill = action_fill(m, i, p->ratio[i]);
    set(n, "fillcolor", rgb_hex(fill, hex));
    set(n, "fontcolor", luminance(fill) > 0.6 ? "#1b1b1b" : "#ffffff");
    set(n, "color", p->critical[i] ? "#1b1b1b" : "#ffffff");
    set(n, "penwidth", p->critical[i] ? "1.6" : "0.6");
    setf(n, "id", "%s_%s", p->id_prefix, cell);
    setf(n, "class", "action %c%s", tf_action_letter(a->type), p->critical[i] ? " critical" : "");
    snprintf(text, sizeof text, "%s: start %.3f ms, %.3f ms, freeze ratio %.3f%s", cell,
             p->start[i], p->ms[i], p->ratio[i], p->critical[i] ? ", critical" : "");
    set(n, "tooltip", text);
    return n;
}

/* One cluster per rank holding its actions; nodes[i] gets action i. */
static void draw_dag_nodes(Agraph_t *g, const tl_model *m, Agnode_t **nodes)
{
    const tf_schedule *s = &m->plan->schedule;
    const tl_panel *p = &m->panels[m->n_panels - 1];
    for (int r = 0; r < s->ranks; r++) {
        char name[32], label[32];
        snprintf(name, sizeof name, "cluster_rank%d", r);
        Agraph_t *cluster = agsubg(g, name, 1);
        snprintf(label, sizeof label, "rank %d", r);
        agset(cluster, "label", label);
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
            nodes[i] = draw_dag_node(cluster, m, p, i);
    }
}

/* Edge e of the DAG (u -> its successor), styled by the first of its rules
 * in rule_styles, with every rule in its classes and tooltip. */
static void draw_dag_edge(Agraph_t *g, const tl_model *m, Agnode_t **nodes, int u, int e)
{
    const tf_dag *dag = &m->dag;
    const tf_schedule *s = &m->plan->schedule;
    int v = dag->succ[e], style = N_RULES - 1;
    for (int k = N_RULES - 1; k >= 0; k--)
        if (dag->rule[e] & rule_styles[k].rule)
            style = k;
    Agedge_t *edge = agedge(g, nodes[u], nodes[v], NULL, 1);
    char a_cell[32], b_cell[32], classes[160] = "dep", tip[256];
    tf_action_format(&s->actions[u], a_cell);
    tf_action_format(&s->actions[v], b_cell);
    int tip_used = snprintf(tip, sizeof tip, "%s -> %s:", a_cell, b_cell);
    for (int k = 0; k < N_RULES; k++) {
        if (!(dag->rule[e] & rule_styles[k].rule))
            continue;
        size_t len = strlen(classes);
        snprintf(classes + len, sizeof classes - len, " rule%d",
                 (int)log2(rule_styles[k].rule) + 1);
        if (tip_used < (int)sizeof tip)
            tip_used += snprintf(tip + tip_used, sizeof tip - (size_t)tip_used, " %s;",
                                 rule_styles[k].name);
    }
    if (dag->lag[e] > 0 && tip_used < (int)sizeof tip)
        snprintf(tip + tip_used, sizeof tip - (size_t)tip_used, " p2p %g ms", dag->lag[e]);
    setf(edge, "id", "e_%s_%s", a_cell, b_cell);
    set(edge, "class", classes);
    set(edge, "tooltip", tip);
    set(edge, "color", rule_styles[style].colour);
    set(edge, "style", rule_styles[style].style);
    set(edge, "penwidth", rule_styles[style].penwidth);
}

/* Legend: one sample edge per rule, in its own cluster; the pair's only
 * when the schedule has pairs. */
static void draw_dag_legend(Agraph_t *g, int pairs)
{
    Agraph_t *legend = agsubg(g, "cluster_legend", 1);
    agset(legend, "label",
          "edges by DAG rule; boxes coloured by type (F blue, B red, I orange, W green),\\l"
          "paler the more frozen, outlined on the critical path\\l");
    agset(legend, "fontsize", "10");
    agset(legend, "fillcolor", "#ffffff");
    for (int rule = 1; rule <= N_RULES; rule++) {
        int k = 0; /* the style entry of this rule number */
        while (k < N_RULES - 1 && rule_styles[k].rule != 1 << (rule - 1))
            k++;
        if (rule_styles[k].rule == TF_EDGE_PAIR && !pairs)
            continue;
        char name[32], text[96];
        snprintf(name, sizeof name, "legend_from_%d", rule);
        Agnode_t *from = agnode(legend, name, 1);
        set(from, "label", "");
        set(from, "width", "0.05");
        set(from, "height", "0.05");
        set(from, "style", "invis");
        snprintf(name, sizeof name, "legend_to_%d", rule);
        Agnode_t *to = agnode(legend, name, 1);
        snprintf(text, sizeof text, "%d. %s", rule, rule_styles[k].name);
        set(to, "label", text);
        set(to, "shape", "plaintext");
        set(to, "style", "");
        set(to, "fontcolor", "#333333");
        Agedge_t *edge = agedge(g, from, to, NULL, 1);
        set(edge, "color", rule_styles[k].colour);
        set(edge, "style", rule_styles[k].style);
        set(edge, "penwidth", rule_styles[k].penwidth);
    }
}

/* Draws the dependency graph (--dag) into c: the actions in one cluster
 * per rank, every DAG edge styled by its rule, and a legend; dot lays it
 * out.  Returns 0 or TF_ENOMEM. */
static int draw_dependency_graph(canvas *c, const tl_model *m, const tf_timeline_options *opt,
                                 tf_error *err)
{
    set_graph_defaults(c->g, m, opt);
    Agnode_t **nodes = calloc((size_t)m->n + 1, sizeof *nodes);
    if (!nodes)
        return tf_fail(err, TF_ENOMEM, "out of memory drawing %d actions", m->n);
    draw_dag_nodes(c->g, m, nodes);
    for (int u = 0; u < m->dag.n; u++)
        for (int e = m->dag.succ_offset[u]; e < m->dag.succ_offset[u + 1]; e++)
            draw_dag_edge(c->g, m, nodes, u, e);
    free(nodes);
    draw_dag_legend(c->g, tf_schedule_has_pairs(&m->plan->schedule));
    return 0;
}

/* ---- rendering ------------------------------------------------------------ */

static GVC_t *shared_context;

static void free_shared_context(void)
{
    gvFreeContext(shared_context);
    shared_context = NULL;
}

/* The one Graphviz context of the process, created on first use and freed at
 * exit.  Why not one per render: Graphviz 2.43's pango plugin caches, in
 * statics, a pointer to the last font name, a string owned by the context's
 * font dictionary; after gvFreeContext a later context's first text layout
 * strcmp()s freed memory (AddressSanitizer: heap-use-after-free).  A single
 * context keeps that string alive.  Graphviz is not thread-safe, so neither
 * is rendering. */
static GVC_t *graphviz_context(void)
{
    if (!shared_context) {
        shared_context = gvContext();
        if (shared_context)
            atexit(free_shared_context);
    }
    return shared_context;
}

int tl_render_graphviz(const tl_model *m, const tf_timeline_options *opt, const char *format,
                       char **data, size_t *len, tf_error *err)
{
    *data = NULL;
    *len = 0;
    GVC_t *gvc = graphviz_context();
    if (!gvc)
        return tf_fail(err, TF_ENOMEM, "cannot start Graphviz (gvContext failed)");
    canvas c = {.g = agopen("timeline", Agdirected, NULL), .count = 0};
    int rc = 0, laid_out = 0;
    if (!c.g) {
        rc = tf_fail(err, TF_ENOMEM, "out of memory creating the Graphviz graph");
        goto done;
    }
    declare_attributes(c.g, !opt->dag);
    /* Bitmap resolution; vector formats keep 72 units per inch so SVG user
     * units are the layout's points. */
    char dpi[32];
    snprintf(dpi, sizeof dpi, "%g", !strcmp(format, "png") ? opt->dpi : 72.0);
    agattr(c.g, AGRAPH, "dpi", dpi);
    rc = opt->dag ? draw_dependency_graph(&c, m, opt, err) : draw_timeline(&c, m, opt, err);
    if (rc)
        goto done;
    if (gvLayout(gvc, c.g, opt->dag ? "dot" : "nop") != 0) {
        rc = tf_fail(err, TF_EINVAL, "Graphviz could not lay out the %s (engine %s)",
                     opt->dag ? "dependency graph" : "timeline", opt->dag ? "dot" : "nop");
        goto done;
    }
    laid_out = 1;
    char *buffer = NULL;
    unsigned int length = 0;
    if (gvRenderData(gvc, c.g, format, &buffer, &length) != 0 || !buffer) {
        if (buffer)
            gvFreeRenderData(buffer);
        rc = tf_fail(err, TF_EINVAL,
                     "Graphviz cannot render format \"%s\" here (is its plugin installed? "
                     "`dot -c` registers plugins; png and pdf need libgvplugin_pango)",
                     format);
        goto done;
    }
    /* Hand back malloc'd memory (gvFreeRenderData must free Graphviz's own). */
    char *copy = malloc((size_t)length + 1);
    if (!copy) {
        gvFreeRenderData(buffer);
        rc = tf_fail(err, TF_ENOMEM, "out of memory holding a %u-byte %s", length, format);
        goto done;
    }
    memcpy(copy, buffer, length);
    copy[length] = '\0';
    gvFreeRenderData(buffer);
    *data = copy;
    *len = length;
done:
    if (laid_out)
        gvFreeLayout(gvc, c.g);
    if (c.g)
        agclose(c.g);
    return rc;
}
