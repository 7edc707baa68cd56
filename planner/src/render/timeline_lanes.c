/* timeline_lanes.c - what a rank's rows show besides its action boxes:
 * its idle windows shaded in the timeline lane, and its live bytes in the
 * memory lane under it (timeline_memory.c computes them).
 */
#include <math.h>
#include <stdio.h>

#include "canvas_internal.h"
#include "timeline_internal.h"

static const tf_canvas_text_style SCALE = {7, 'r', "#555555", 0};
static const tf_canvas_text_style PEAK = {7.5, 'l', "#1b1b1b", 1};
static const tf_canvas_text_style LIMIT = {7.5, 'l', TL_LIMIT_COLOUR, 0};

/* The scale inside a memory lane: bytes 0 at its bottom, f->mem_top at
 * its top, 4 points of air above and below. */
enum { LANE_PAD = 4 };

static double gib(double bytes)
{
    return bytes / 1073741824.0;
}

static double y_of(const tl_frame *f, double top, double bytes)
{
    double bottom = top + TL_MEMORY_H - LANE_PAD, h = TL_MEMORY_H - 2 * LANE_PAD;
    return bottom - (f->mem_top > 0 ? bytes / f->mem_top : 0.0) * h;
}

/* The scale: a faint line at the top value, "<top> GiB" and "0" in the
 * left gutter. */
static void draw_scale(tf_canvas *c, const tl_frame *f, const tl_panel *p, int r, double top)
{
    double y_top = y_of(f, top, f->mem_top), y_zero = y_of(f, top, 0.0);
    double x_end = round(tl_x(f, f->axis_ms));
    tf_canvas_mark *top_line = tf_canvas_rect(c, f->x0, y_top, x_end, y_top, "#e4e4e4");
    tf_canvas_setf(top_line, "id", "%s_mem_top_%d", p->id_prefix, r);
    tf_canvas_mark *axis = tf_canvas_rect(c, f->x0, y_zero, x_end, y_zero, "#999999");
    tf_canvas_setf(axis, "id", "%s_mem_axis_%d", p->id_prefix, r);
    char text[48];
    snprintf(text, sizeof text, "%.4g GiB", gib(f->mem_top));
    tf_canvas_mark *label = tf_canvas_text(c, f->x0 - 8, y_top + 2, text, &SCALE);
    tf_canvas_setf(label, "id", "%s_mem_scale_%d", p->id_prefix, r);
    tf_canvas_text(c, f->x0 - 8, y_zero - 2, "0", &SCALE);
}

/* Piece k of the curve spans [x0, x1] (whole points) at bytes. */
static void piece_at(const tl_frame *f, const tl_panel *p, const tl_memory_curve *mc, int k,
                     double span[2])
{
    double end = k + 1 < mc->n ? mc->t[k + 1] : p->makespan;
    span[0] = round(tl_x(f, mc->t[k]));
    span[1] = round(tl_x(f, fmax(end, mc->t[k])));
}

/* The curve as filled rectangles from the zero line up to its bytes, one
 * per piece, numbered left to right.  A piece of no width becomes a
 * 1-point spike, so a short-lived high still shows; neighbouring pieces of
 * no width at the same point make one spike, the highest (in dense rows
 * most pieces have no width). */
static void draw_curve(tf_canvas *c, const tl_frame *f, const tl_panel *p, int r, double top)
{
    const tl_memory_curve *mc = &p->memory[r];
    double y_zero = y_of(f, top, 0.0), span[2], next[2];
    int drawn = 0;
    for (int k = 0; k < mc->n; k++) {
        piece_at(f, p, mc, k, span);
        double bytes = mc->bytes[k];
        while (span[1] == span[0] && k + 1 < mc->n) {
            piece_at(f, p, mc, k + 1, next);
            if (next[0] != span[0] || next[1] != span[0])
                break;
            bytes = fmax(bytes, mc->bytes[++k]);
        }
        tf_canvas_mark *n =
            tf_canvas_rect(c, span[0], y_of(f, top, bytes), span[1], y_zero, TL_MEMORY_FILL);
        tf_canvas_setf(n, "id", "%s_mem_%d_%d", p->id_prefix, r, drawn++);
        tf_canvas_set(n, "class", "memory");
        tf_canvas_setf(n, "tooltip", "rank %d: %.3f GiB live from %.3f ms", r, gib(bytes),
                       mc->t[k]);
    }
}

/* The static bytes, held all step: a darker band at the bottom of the
 * curve (drawn over it). */
static void draw_static(tf_canvas *c, const tl_frame *f, const tl_panel *p, int r, double top)
{
    double bytes = p->memory[r].bytes[0];
    tf_canvas_mark *n = tf_canvas_rect(c, f->x0, y_of(f, top, bytes),
                                       fmax(round(tl_x(f, p->makespan)), f->x0 + 1),
                                       y_of(f, top, 0.0), TL_STATIC_FILL);
    tf_canvas_setf(n, "id", "%s_static_%d", p->id_prefix, r);
    tf_canvas_set(n, "class", "static");
    tf_canvas_setf(n, "tooltip", "rank %d: %.3f GiB static (weights, gradients, optimizer state)",
                   r, gib(bytes));
}

/* The limit as a red line across the step, its value at the right. */
static void draw_limit(tf_canvas *c, const tl_model *m, const tl_frame *f, const tl_panel *p,
                       int r, double top)
{
    if (!m->plan->memory_limit)
        return;
    double limit = m->plan->memory_limit[r], y = y_of(f, top, limit);
    tf_canvas_mark *n = tf_canvas_line(c, f->x0, y, fmax(round(tl_x(f, p->makespan)), f->x0 + 1),
                                       y, TL_LIMIT_COLOUR);
    tf_canvas_set(n, "penwidth", "1.2");
    tf_canvas_set(n, "style", "dashed");
    tf_canvas_setf(n, "id", "%s_limit_%d", p->id_prefix, r);
    tf_canvas_set(n, "class", "limit");
    tf_canvas_setf(n, "tooltip", "rank %d: memory limit %.3f GiB", r, gib(limit));
    char text[48];
    snprintf(text, sizeof text, "limit %.1f GiB", gib(limit));
    tf_canvas_text(c, tl_x(f, f->axis_ms) + 8, top + TL_MEMORY_H - 10, text, &LIMIT);
}

/* The peak: a dark dot where the curve first reaches it, its value at the
 * right. */
static void draw_peak(tf_canvas *c, const tl_frame *f, const tl_panel *p, int r, double top)
{
    const tl_memory_curve *mc = &p->memory[r];
    double bytes = mc->bytes[mc->peak], x = round(tl_x(f, mc->t[mc->peak]));
    double y = y_of(f, top, bytes);
    tf_canvas_mark *n = tf_canvas_rect(c, x - 2, y - 2, x + 2, y + 2, "#1b1b1b");
    tf_canvas_setf(n, "id", "%s_peak_%d", p->id_prefix, r);
    tf_canvas_set(n, "class", "peak");
    tf_canvas_setf(n, "tooltip", "rank %d: peak %.3f GiB from %.3f ms", r, gib(bytes),
                   mc->t[mc->peak]);
    char text[48];
    snprintf(text, sizeof text, "peak %.1f GiB", gib(bytes));
    tf_canvas_text(c, tl_x(f, f->axis_ms) + 8, top + 10, text, &PEAK);
}

void tl_draw_memory_lane(tf_canvas *c, const tl_model *m, const tl_panel *p, const tl_frame *f,
                         int r, double top)
{
    if (!p->memory)
        return;
    draw_scale(c, f, p, r, top);
    draw_curve(c, f, p, r, top);
    draw_static(c, f, p, r, top);
    draw_limit(c, m, f, p, r, top);
    draw_peak(c, f, p, r, top);
}

/* The aux work placed in rank r's bubbles during the step itself
 * (tf/aux.h; what spills to later steps is not in this step's picture). */
static void draw_aux(tf_canvas *c, const tl_model *m, const tl_panel *p, const tl_frame *f,
                     int r, double top)
{
    const tf_plan *plan = m->plan;
    for (int k = 0; k < plan->aux.n_slices; k++) {
        const tf_aux_slice *a = &plan->aux.slices[k];
        if (a->rank != r || a->step != 0)
            continue;
        double x0 = tl_x(f, a->start_ms), x1 = tl_x(f, a->start_ms + a->ms);
        if (x1 - x0 < 1.0)
            x1 = x0 + 1.0; /* a sliver still shows */
        const tf_aux_work *w = &plan->aux_work[a->work];
        tf_canvas_mark *n = tf_canvas_rect(c, x0, top + 6, x1, top + TL_ROW_H - 6, TL_AUX_FILL);
        tf_canvas_setf(n, "id", "%s_aux_%d_%d", p->id_prefix, r, k);
        tf_canvas_set(n, "class", "aux");
        if (a->microbatch >= 0)
            tf_canvas_setf(n, "tooltip", "%s of stage %d, microbatch %d: %.3f to %.3f ms", w->name,
                           w->stage, a->microbatch, a->start_ms, a->start_ms + a->ms);
        else
            tf_canvas_setf(n, "tooltip", "%s of stage %d, once per step: %.3f to %.3f ms",
                           w->name, w->stage, a->start_ms, a->start_ms + a->ms);
    }
}

void tl_draw_bubbles(tf_canvas *c, const tl_model *m, const tl_panel *p, const tl_frame *f,
                     int r, double top)
{
    if (!m->plan->per_rank)
        return;
    const tf_plan_rank *pr = &m->plan->per_rank[r];
    for (int k = 0; k < pr->n_bubbles; k++) {
        double from = pr->bubbles[2 * k], to = pr->bubbles[2 * k + 1];
        double x0 = round(tl_x(f, from)), x1 = round(tl_x(f, to));
        if (x1 <= x0)
            continue; /* under a point: the lane shows no gap there either */
        tf_canvas_mark *n = tf_canvas_rect(c, x0, top + 2, x1, top + TL_ROW_H - 2,
                                           TL_BUBBLE_FILL);
        tf_canvas_setf(n, "id", "%s_bubble_%d_%d", p->id_prefix, r, k);
        tf_canvas_set(n, "class", "bubble");
        tf_canvas_setf(n, "tooltip", "rank %d idle from %.3f to %.3f ms (%.3f ms)", r, from, to,
                       to - from);
    }
    draw_aux(c, m, p, f, r, top);
}
