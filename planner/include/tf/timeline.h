/* timeline.h - drawing a plan (tf-dot, docs/tf-dot.md): the timeline (with
 * memory, each rank's live bytes in a lane under its row), the unfrozen vs
 * planned comparison, the dependency graph, and a Chrome/Perfetto trace
 * (with memory, a live-bytes counter per rank).
 *
 * Pictures are built as cgraph graphs with pinned node positions (the "nop"
 * layout, i.e. neato -n) and rendered in-process by gvc into memory; files are
 * written atomically, so a failed render never leaves a partial file behind.
 *
 * Geometry (what tests and readers can rely on), in points (1/72 in, the SVG
 * user unit): x(t) = x(0) + t * scale for every panel of one picture; an
 * action's box spans [round(x(start)), round(x(start + ms))] and one rank's
 * boxes never overlap.  SVG elements carry ids and classes:
 *   box of action "0F3" (stage 0, F, microbatch 3):  id="p_0F3" in the planned
 *   panel, id="u_0F3" in the unfrozen panel of --compare; class "action F"
 *   plus " critical" on a critical path and " pair" for half of an
 *   overlapped pair; labelled "F3", or "0F3" (PyTorch's name) on schedules
 *   with several stages per rank, shorter when the box is narrow;
 *   the frame around an overlapped pair's two boxes: id="p_pair_0F7_7B3",
 *   class "pair";
 *   axis tick k (label = time in ms): id="tick_k", class "tick";
 *   rank r's k-th idle window (the plan's per_rank bubbles): id="p_bubble_r_k";
 *   with memory, rank r's memory lane under its row: ids "p_mem_r_k" (the
 *   live bytes' pieces), "p_peak_r", "p_limit_r" and its scale (docs/tf-dot.md).
 * Fill: the type's colour (F #4e79a7, B #e15759, I #f28e2b, W #59a14f,
 * R #b07aa1),
 * darkened by 22% x (local stage index) / (stages_per_rank - 1) on ranks
 * hosting several stages, then mixed with white by 0.75 x freeze_ratio.
 */
#ifndef TF_TIMELINE_H
#define TF_TIMELINE_H

#include <stddef.h>

#include "tf/error.h"
#include "tf/plan.h"

/* The largest schedule --dag draws: Graphviz's dot layout of the DAG takes
 * ~2 s at 1,024 actions and minutes at 4,096. */
enum { TF_TIMELINE_DAG_MAX_ACTIONS = 1024 };

/* Pictures (not Chrome traces) of this many boxes and more take seconds:
 * Graphviz draws about 40,000 boxes a second on a 2-core machine, so the
 * programs say what they are doing before they start. */
enum { TF_TIMELINE_SLOW_BOXES = 65536 };
/* Rows with fewer points of time axis per action than this (on the busiest
 * rank) are dense: boxes are drawn without labels, outlines or markers,
 * since an outline would cover each box (SVG classes and tooltips still
 * say which actions are critical). */
enum { TF_TIMELINE_DENSE_POINTS = 4 };

typedef struct tf_timeline_options {
    int compare_unfrozen; /* 1: draw the unfrozen timeline above the planned one */
    int dag;              /* 1: draw the dependency graph instead of the timeline */
    double width;         /* picture width in points (1/72 in, the SVG unit); <= 0:
                             automatic, wide enough for a typical short action to
                             hold its label, 480..7200 points of time axis.  The
                             timeline needs at least 264 points. */
    double dpi;           /* resolution of PNG output (default 96): pixels = points x dpi / 72 */
    const char *title;    /* NULL: an automatic title (schedule, shape); the second line
                             always states batch times, speedup and mean freeze ratio */
    int flows;            /* chrome only: a flow event ("s"/"f") per dependency between
                             ranks, drawn as arrows by Perfetto and chrome://tracing */
} tf_timeline_options;

/* Defaults: planned timeline only, automatic width, 96 dpi, automatic title. */
void tf_timeline_options_init(tf_timeline_options *o);

/* The output format named by a path's extension: "dot" (.dot, .gv), "svg",
 * "png", "pdf" or "chrome" (.json).  Returns a static string, or NULL when
 * the extension names none of them. */
const char *tf_timeline_format_for_path(const char *path);

/* Is name one of "dot", "svg", "png", "pdf", "chrome"? */
int tf_timeline_format_valid(const char *name);

/* Reads a plan.json, or a profile.json whose unfrozen schedule is then
 * planned without the LP (tf_plan_unfrozen).  On success *out owns its memory
 * (tf_plan_free); on error *out is zeroed and err names the file and field.
 * Returns 0, TF_EIO, TF_EINVAL, TF_ECYCLE or TF_ENOMEM. */
int tf_timeline_load(const char *path, tf_plan *out, tf_error *err);

/* Renders plan in format ("dot", "svg", "png", "pdf", "chrome") into a
 * malloc'd buffer: *data (caller frees with free(); always NUL-terminated
 * after *len bytes) and *len bytes.  opt may be NULL (defaults).  Checks
 * first that the plan is consistent (no two actions of a rank overlap, no
 * action starts before a dependency ends plus p2p lag, ratios in [0, 1]);
 * otherwise TF_EINVAL naming the actions.  Returns 0, TF_EINVAL (bad plan,
 * format or option, --dag on more than TF_TIMELINE_DAG_MAX_ACTIONS,
 * compare_unfrozen on a profile's unfrozen plan, solver "none", flows with
 * a format other than chrome), TF_ECYCLE
 * or TF_ENOMEM; *data is NULL on error.  Not thread-safe (Graphviz is not):
 * the process keeps one Graphviz context, freed at exit. */
int tf_timeline_render_data(const tf_plan *plan, const tf_timeline_options *opt,
                            const char *format, char **data, size_t *len, tf_error *err);

/* Advice for a picture too dense to label: when format is a picture
 * ("svg", "png", "pdf", "dot"; not "chrome", not --dag) and more than a
 * tenth of the boxes of the timeline drawn with opt (NULL: defaults) are
 * too narrow for any label (boxes near zero, under a fifth of the median
 * duration, are left out: no width labels a fully frozen W), or its rows
 * are dense, writes into note[size] how many
 * boxes (or, for dense rows, TF_TIMELINE_DENSE_POINTS, how many actions
 * on how many points each) and what to do: the --width that labels every
 * box (when it is at most 20,000 points), fewer microbatches, or a Chrome
 * trace (-T chrome); for a PNG, that an SVG can be zoomed.  Returns 1 then.
 * Otherwise, or when the plan cannot be drawn (the render reports why),
 * returns 0 with note "". */
int tf_timeline_density_note(const tf_plan *plan, const tf_timeline_options *opt,
                             const char *format, char *note, size_t size);

/* Renders plan as tf_timeline_render_data does and writes it to path
 * atomically (temporary file + rename: on any error path is untouched), or
 * to stdout when path is NULL or "-".  format NULL: from path's extension
 * ("dot" for stdout); an unknown extension is TF_EINVAL.  Returns 0,
 * TF_EINVAL, TF_ENOMEM or TF_EIO. */
int tf_timeline_render(const tf_plan *plan, const tf_timeline_options *opt, const char *path,
                       const char *format, tf_error *err);

#endif
