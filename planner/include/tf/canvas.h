/* canvas.h - pictures drawn at fixed positions and rendered by Graphviz in
 * the process (library tfrender): the one drawing stack of the toolkit.
 * tf-dot's timelines and tf-study's chart are drawn on it; it writes SVG,
 * PNG, PDF and DOT alike.
 *
 * Coordinates are points (1/72 in, the SVG unit), x to the right and y
 * down from the top-left corner; the picture's size is that of what is
 * drawn (keep a margin by drawing a white mark in the corners).  Colours
 * are "#rrggbb" strings (or "none" for an unfilled outline).  Text is
 * Helvetica, which Graphviz resolves through fontconfig (DejaVu Sans on
 * Debian); tf_canvas_text_width estimates its width on the wide side.
 */
#ifndef TF_CANVAS_H
#define TF_CANVAS_H

#include <stddef.h>

#include "tf/error.h"

typedef struct tf_canvas tf_canvas;
/* One rectangle, line or line of text on a canvas, owned by the canvas. */
typedef struct tf_canvas_mark tf_canvas_mark;

/* A new empty canvas; name is the picture's title in SVG (and its graph's
 * name in DOT).  NULL when out of memory. */
tf_canvas *tf_canvas_new(const char *name);

/* Frees c and every mark on it; NULL is a no-op. */
void tf_canvas_free(tf_canvas *c);

/* A filled rectangle from (x0, top) to (x1, bottom), no outline.  Edges on
 * whole points stay crisp; a zero width or height draws a 1-point line.
 * NULL when out of memory (the canvas stays usable). */
tf_canvas_mark *tf_canvas_rect(tf_canvas *c, double x0, double top, double x1, double bottom,
                               const char *fill);

/* A straight line from (x0, y0) to (x1, y1), 1 point wide, in colour;
 * unlike a rectangle it may slope.  Its width, dash ("style" "dashed"),
 * "id", "class" and "tooltip" are set with tf_canvas_set ("penwidth",
 * "style", ...) like a rectangle's.  NULL when out of memory (the canvas
 * stays usable). */
tf_canvas_mark *tf_canvas_line(tf_canvas *c, double x0, double y0, double x1, double y1,
                               const char *colour);

/* How a line of text looks and which of its points sits at the (x, y)
 * it is drawn at.  A picture names one per kind of text it draws (its
 * title, its axis labels, ...) and draws every such text with it. */
typedef struct tf_canvas_text_style {
    double size;        /* points, > 0 */
    char align;         /* 'l': the text starts at x; 'r': it ends at x; 'c': centred on x */
    const char *colour; /* "#rrggbb" */
    int bold;           /* 1: bold; 0: regular */
} tf_canvas_text_style;

/* One line of text (newlines become spaces) drawn in style (read during
 * the call only), centred vertically on y and placed on x by
 * style->align.  NULL when out of memory. */
tf_canvas_mark *tf_canvas_text(tf_canvas *c, double x, double y, const char *text,
                               const tf_canvas_text_style *style);

/* Sets a Graphviz node attribute of mark m (NULL: no-op): "id" and "class"
 * (SVG), "tooltip" (SVG, a hover text), "color" (the outline's colour),
 * "penwidth" (its width in points; 0 none), "style" ("dashed",
 * "filled,dashed"), "fillcolor", "label" (text inside a rectangle),
 * "fontsize", "fontcolor". */
void tf_canvas_set(tf_canvas_mark *m, const char *attr, const char *value);

/* tf_canvas_set with a printf-formatted value (up to 1023 bytes). */
void tf_canvas_setf(tf_canvas_mark *m, const char *attr, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Estimated advance width in points of UTF-8 text at size points: DejaVu
 * Sans's widths, wider than Helvetica's, so text placed by it fits
 * wherever the picture is viewed (bold text is about 10% wider). */
double tf_canvas_text_width(const char *text, double size);

/* A round tick spacing for an axis spanning span units over length
 * points: 1, 2 or 5 times a power of ten, the one nearest to a tick every
 * 70 points, never closer than 36 (room for a label like "1250"). */
double tf_canvas_tick_step(double span, double length);

/* How many decimals label ticks step apart (a tf_canvas_tick_step):
 * 0 for steps of 1 and more, else enough to tell neighbours apart (0.05:
 * 2). */
int tf_canvas_tick_decimals(double step);

/* Mixes colours a and b ("#rrggbb"): t = 0 gives a, 1 gives b.  Writes
 * "#rrggbb" into out and returns it. */
const char *tf_canvas_mix(const char *a, const char *b, double t, char out[8]);

/* Relative luminance of colour ("#rrggbb") in [0, 1]: above about 0.6,
 * dark text reads on it, below, white text. */
double tf_canvas_luminance(const char *colour);

/* The picture format a path's extension names: "svg", "png", "pdf" or
 * "dot" (also .gv); NULL for any other.  Static strings. */
const char *tf_canvas_format_for_path(const char *path);

/* Renders c in format ("svg", "png", "pdf", "dot") into a malloc'd buffer
 * (*data, NUL-terminated after *len bytes; the caller frees it); dpi sets
 * a PNG's resolution (pixels = points x dpi / 72), other formats keep 72
 * units per inch.  Returns 0, TF_EINVAL (a format Graphviz cannot write
 * here: its plugin is missing) or TF_ENOMEM; *data is NULL on error.  Not
 * thread-safe (Graphviz is not); the process keeps one Graphviz context,
 * freed at exit. */
int tf_canvas_render(tf_canvas *c, const char *format, double dpi, char **data, size_t *len,
                     tf_error *err);

#endif
