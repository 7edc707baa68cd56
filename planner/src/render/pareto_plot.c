/* pareto_plot.c - the trade-off curve as a chart on a canvas
 * (tf/pareto_plot.h): axes with round ticks, the curve as straight pieces
 * between its breakpoints, each point marked and labelled where there is
 * room.
 */
#include "tf/pareto_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/canvas.h"
#include "tf/util.h"

/* ---- geometry, in points ------------------------------------------------ */
enum { LEFT = 78, TOP = 70, PLOT_W = 560, PLOT_H = 320, RIGHT = 40, BOTTOM = 56 };

static const tf_canvas_text_style TITLE = {14, 'l', "#1b1b1b", 1};
static const tf_canvas_text_style SUBTITLE = {10, 'l', "#444444", 0};
static const tf_canvas_text_style TICK_X = {9, 'c', "#333333", 0};
static const tf_canvas_text_style TICK_Y = {9, 'r', "#333333", 0};
static const tf_canvas_text_style AXIS_TITLE = {10, 'c', "#1b1b1b", 1};
static const tf_canvas_text_style POINT_LABEL = {8, 'l', "#1b1b1b", 0};
static const tf_canvas_text_style REFERENCE = {8, 'r', "#777777", 0};
static const char *const CURVE = "#4e79a7";

/* One axis: the values lo..hi over length points, ticks every step. */
typedef struct axis {
    double lo, hi, step;
} axis;

/* An axis over [min, max] with round ends, a tick every step. */
static axis axis_over(double min, double max, double length)
{
    axis a;
    if (!(max > min)) {
        double pad = fmax(fabs(min) * 0.05, 1e-3);
        min -= pad;
        max += pad;
    }
    a.step = tf_canvas_tick_step(max - min, length);
    a.lo = floor(min / a.step + 1e-9) * a.step;
    a.hi = ceil(max / a.step - 1e-9) * a.step;
    return a;
}

typedef struct chart {
    axis x, y;
    int memory;  /* x in bytes, shown in GiB */
} chart;

static double x_of(const chart *ch, double v)
{
    return LEFT + (v - ch->x.lo) / (ch->x.hi - ch->x.lo) * PLOT_W;
}

static double y_of(const chart *ch, double ms)
{
    return TOP + PLOT_H - (ms - ch->y.lo) / (ch->y.hi - ch->y.lo) * PLOT_H;
}

/* The swept value as shown: GiB for memory, the ratio itself otherwise. */
static double shown(const chart *ch, double x)
{
    return ch->memory ? x / 1073741824.0 : x;
}

static void chart_of(const tf_pareto *pa, chart *ch)
{
    double x_min = INFINITY, x_max = -INFINITY, y_min = pa->batch_ms_unfrozen,
           y_max = pa->batch_ms_unfrozen;
    ch->memory = pa->axis == TF_PARETO_MEMORY;
    for (int k = 0; k < pa->n; k++) {
        x_min = fmin(x_min, shown(ch, pa->points[k].x));
        x_max = fmax(x_max, shown(ch, pa->points[k].x));
        y_min = fmin(y_min, pa->points[k].batch_ms);
        y_max = fmax(y_max, pa->points[k].batch_ms);
    }
    ch->x = axis_over(x_min, x_max, PLOT_W);
    ch->y = axis_over(y_min, y_max, PLOT_H);
    if (ch->memory) { /* the axis is in GiB: back to bytes for x_of */
        ch->x.lo *= 1073741824.0;
        ch->x.hi *= 1073741824.0;
    }
}

/* Frame, gridlines, tick labels and axis titles. */
static void draw_axes(tf_canvas *c, const chart *ch)
{
    const double bottom = TOP + PLOT_H, right = LEFT + PLOT_W;
    const double unit = ch->memory ? 1073741824.0 : 1.0, span = (ch->x.hi - ch->x.lo) / unit;
    char text[64];
    for (int k = 0; k * ch->x.step <= span * (1 + 1e-9); k++) {
        double v = ch->x.lo / unit + k * ch->x.step, x = round(x_of(ch, v * unit));
        tf_canvas_mark *grid = tf_canvas_rect(c, x, TOP, x, bottom, "#e4e4e4");
        tf_canvas_setf(grid, "id", "xgrid_%d", k);
        snprintf(text, sizeof text, "%.*f", tf_canvas_tick_decimals(ch->x.step), v);
        tf_canvas_mark *n = tf_canvas_text(c, x, bottom + 12, text, &TICK_X);
        tf_canvas_setf(n, "id", "xtick_%d", k);
    }
    for (int k = 0; k * ch->y.step <= (ch->y.hi - ch->y.lo) * (1 + 1e-9); k++) {
        double v = ch->y.lo + k * ch->y.step, y = round(y_of(ch, v));
        tf_canvas_mark *grid = tf_canvas_rect(c, LEFT, y, right, y, "#e4e4e4");
        tf_canvas_setf(grid, "id", "ygrid_%d", k);
        snprintf(text, sizeof text, "%.*f", tf_canvas_tick_decimals(ch->y.step), v);
        tf_canvas_mark *n = tf_canvas_text(c, LEFT - 6, y, text, &TICK_Y);
        tf_canvas_setf(n, "id", "ytick_%d", k);
    }
    tf_canvas_rect(c, LEFT, bottom, right, bottom, "#555555");
    tf_canvas_rect(c, LEFT, TOP, LEFT, bottom, "#555555");
    tf_canvas_text(c, LEFT + PLOT_W / 2.0, bottom + 32,
                   ch->memory ? "memory limit of every rank (GiB)"
                              : "largest freeze ratio of any action (--max-action-ratio)",
                   &AXIS_TITLE);
    tf_canvas_text(c, LEFT, TOP - 14, "batch time (ms)", &AXIS_TITLE);
}

/* The unfrozen batch time: a dashed grey line with its value. */
static void draw_reference(tf_canvas *c, const chart *ch, double unfrozen_ms)
{
    double y = y_of(ch, unfrozen_ms);
    tf_canvas_mark *n = tf_canvas_line(c, LEFT, y, LEFT + PLOT_W, y, "#999999");
    tf_canvas_set(n, "style", "dashed");
    tf_canvas_set(n, "id", "unfrozen");
    char text[64];
    snprintf(text, sizeof text, "unfrozen %.1f ms", unfrozen_ms);
    tf_canvas_text(c, LEFT + PLOT_W - 4, y - 8, text, &REFERENCE);
}

/* Point k's label, "64.0 GiB, 426.7 ms" or "0.50, 426.7 ms", into out. */
static const char *point_label(const chart *ch, const tf_pareto_point *pt, char *out,
                               size_t size)
{
    if (ch->memory)
        snprintf(out, size, "%.1f GiB, %.1f ms", shown(ch, pt->x), pt->batch_ms);
    else
        snprintf(out, size, "%.3g, %.1f ms", pt->x, pt->batch_ms);
    return out;
}

/* Does the box [x0, x1] x [y0, y1] meet a label already placed
 * (boxes[4 * k ..], n of them) or any point's mark? */
static int crowded(const chart *ch, const tf_pareto *pa, const double *boxes, int n,
                   const double box[4])
{
    for (int k = 0; k < n; k++) {
        const double *o = &boxes[4 * k];
        if (box[0] < o[1] && o[0] < box[1] && box[2] < o[3] && o[2] < box[3])
            return 1;
    }
    for (int k = 0; k < pa->n; k++) {
        double x = x_of(ch, pa->points[k].x), y = y_of(ch, pa->points[k].batch_ms);
        if (box[0] < x + 4 && x - 4 < box[1] && box[2] < y + 4 && y - 4 < box[3])
            return 1;
    }
    return 0;
}

/* Point k's mark, a square with the point's figures as tooltip. */
static void draw_point(tf_canvas *c, const chart *ch, const tf_pareto *pa, int k)
{
    const tf_pareto_point *pt = &pa->points[k];
    double x = x_of(ch, pt->x), y = y_of(ch, pt->batch_ms);
    char text[96];
    tf_canvas_mark *n = tf_canvas_rect(c, x - 3, y - 3, x + 3, y + 3, "#1b1b1b");
    tf_canvas_setf(n, "id", "pt_%d", k);
    tf_canvas_setf(n, "tooltip", "%s; speedup %.3f\xc3\x97, mean freeze ratio %.4f, "
                   "recompute %.3f", point_label(ch, pt, text, sizeof text),
                   pa->batch_ms_unfrozen / fmax(pt->batch_ms, 1e-12), pt->freeze_ratio_mean,
                   pt->recompute_sum);
}

/* The curve's pieces, then each point's mark and label.  The curve falls
 * and is convex, so above and right of a point lies nothing of it: the
 * label goes there (above and left where the plot ends), unless it would
 * cover an earlier label or a point (the tooltip still has it). */
static int draw_curve(tf_canvas *c, const chart *ch, const tf_pareto *pa)
{
    const tf_pareto_point *p = pa->points;
    for (int k = 0; k + 1 < pa->n; k++) {
        tf_canvas_mark *n = tf_canvas_line(c, x_of(ch, p[k].x), y_of(ch, p[k].batch_ms),
                                           x_of(ch, p[k + 1].x), y_of(ch, p[k + 1].batch_ms),
                                           CURVE);
        tf_canvas_set(n, "penwidth", "2");
        tf_canvas_setf(n, "id", "seg_%d", k);
    }
    double *boxes = malloc(((size_t)pa->n + 1) * 4 * sizeof *boxes);
    if (!boxes)
        return TF_ENOMEM;
    int placed = 0;
    for (int k = 0; k < pa->n; k++) {
        draw_point(c, ch, pa, k);
        double x = x_of(ch, p[k].x), y = y_of(ch, p[k].batch_ms);
        char text[96];
        point_label(ch, &p[k], text, sizeof text);
        double w = tf_canvas_text_width(text, POINT_LABEL.size);
        double left = x + 5 + w <= LEFT + PLOT_W ? x + 5 : x - 5 - w;
        double box[4] = {left, left + w, y - 16, y - 4};
        if (crowded(ch, pa, boxes, placed, box))
            continue;
        tf_canvas_mark *n = tf_canvas_text(c, left, y - 10, text, &POINT_LABEL);
        tf_canvas_setf(n, "id", "label_%d", k);
        memcpy(&boxes[4 * placed++], box, sizeof box);
    }
    free(boxes);
    return 0;
}

static int draw_chart(tf_canvas *c, const tf_pareto *pa)
{
    chart ch;
    chart_of(pa, &ch);
    char text[256];
    tf_canvas_text(c, 14, 22, ch.memory ? "Least batch time against the memory limit"
                                        : "Least batch time against the per-action freeze cap",
                   &TITLE);
    snprintf(text, sizeof text, "%d %s: the ends and every breakpoint, linear between "
             "\xc2\xb7 %d %s solved", pa->n, tf_plural(pa->n, "point", "points"), pa->solves,
             tf_plural(pa->solves, "plan", "plans"));
    tf_canvas_text(c, 14, 40, text, &SUBTITLE);
    draw_axes(c, &ch);
    draw_reference(c, &ch, pa->batch_ms_unfrozen);
    if (draw_curve(c, &ch, pa))
        return TF_ENOMEM;
    /* The corners keep the margins inside Graphviz's bounding box. */
    tf_canvas_rect(c, 0, 0, 1, 1, "#ffffff");
    tf_canvas_rect(c, LEFT + PLOT_W + RIGHT - 1, TOP + PLOT_H + BOTTOM - 1, LEFT + PLOT_W + RIGHT,
                   TOP + PLOT_H + BOTTOM, "#ffffff");
    return 0;
}

int tf_pareto_plot_data(const tf_pareto *pa, const char *format, double dpi, char **data,
                        size_t *len, tf_error *err)
{
    *data = NULL;
    *len = 0;
    if (!pa || pa->n < 1 || !pa->points)
        return tf_fail(err, TF_EINVAL, "a trade-off curve without points: nothing to plot");
    tf_canvas *c = tf_canvas_new("pareto");
    if (!c)
        return tf_fail(err, TF_ENOMEM, "out of memory creating the chart");
    int rc = draw_chart(c, pa) ? tf_fail(err, TF_ENOMEM, "out of memory drawing the chart")
                               : tf_canvas_render(c, format, dpi, data, len, err);
    tf_canvas_free(c);
    return rc;
}

int tf_pareto_plot(const tf_pareto *pa, const char *path, tf_error *err)
{
    const char *format = tf_canvas_format_for_path(path);
    if (!format)
        return tf_fail(err, TF_EINVAL,
                       "%s: cannot tell the chart's format from the extension (use .svg, .png, "
                       ".pdf or .dot)", path);
    char *data;
    size_t len;
    int rc = tf_pareto_plot_data(pa, format, 96.0, &data, &len, err);
    if (!rc)
        rc = tf_write_file_atomic(path, data, len, err);
    free(data);
    return rc;
}
