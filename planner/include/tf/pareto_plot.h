/* pareto_plot.h - the trade-off curve of tf_plan_pareto (tf/planner.h) as a
 * chart (library tfrender, drawn on tf/canvas.h): the least batch time
 * against the swept limit, one straight piece between neighbouring
 * breakpoints (the curve is linear there), every point marked and, where
 * its label has room, labelled with its limit and batch time; the
 * unfrozen batch time as a dashed reference line; axes titled.  tf-plan
 * --pareto and --pareto-memory draw it with --plot.
 *
 * Geometry (what tests and readers can rely on), in points from the
 * top-left corner: x(v) = x(lo) + (v - lo) * x_scale and y(ms) = y(lo_ms)
 * - (ms - lo_ms) * y_scale, with both axes' ticks at round values: the
 * k-th tick's gridline has id "xgrid_k" ("ygrid_k"), its label, the value,
 * "xtick_k" ("ytick_k").  SVG ids: "pt_k" (the k-th point's mark,
 * centred on it, its tooltip the point's figures), "label_k" (its label,
 * where it has room), "seg_k" (the piece from
 * point k to k + 1), "unfrozen" (the reference line).
 */
#ifndef TF_PARETO_PLOT_H
#define TF_PARETO_PLOT_H

#include <stddef.h>

#include "tf/error.h"
#include "tf/planner.h"

/* Renders pa's chart in format ("svg", "png", "pdf" or "dot") into a
 * malloc'd buffer (*data, NUL-terminated after *len bytes; the caller
 * frees it); dpi sets a PNG's resolution.  Returns 0, TF_EINVAL (no
 * points, or a format Graphviz cannot write) or TF_ENOMEM; *data is NULL
 * on error.  Not thread-safe (Graphviz is not). */
int tf_pareto_plot_data(const tf_pareto *pa, const char *format, double dpi, char **data,
                        size_t *len, tf_error *err);

/* Renders pa's chart in the format path's extension names (.svg, .png,
 * .pdf, .dot) at 96 dpi and writes it to path atomically (on any error
 * path is untouched).  Returns 0, TF_EINVAL (an extension naming no
 * format, or as tf_pareto_plot_data), TF_ENOMEM or TF_EIO. */
int tf_pareto_plot(const tf_pareto *pa, const char *path, tf_error *err);

#endif
