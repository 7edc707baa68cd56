/* timeline_internal.h - what the timeline modules share (private to the
 * planner library): a checked plan with its DAG and the panels to draw.
 */
#ifndef TF_TIMELINE_INTERNAL_H
#define TF_TIMELINE_INTERNAL_H

#include <stddef.h>

#include "tf/dag.h"
#include "tf/plan.h"
#include "tf/timeline.h"

/* One rank's live bytes over a panel's step (tf/memory.h) as a step
 * curve: bytes[k] from t[k] until t[k + 1], the last until the step's
 * end.  t[0] = 0 with the rank's static bytes; then one point per memory
 * event, at the end of its action, except a backward's re-materialisation
 * (a recomputing backward with no R action), at its start.  Times never
 * decrease. */
typedef struct tl_memory_curve {
    double *t;         /* n: ms */
    double *bytes;     /* n */
    int n;
    int peak;          /* index of the first highest point */
} tl_memory_curve;

/* One timeline of the plan's actions: the planned one, or the unfrozen one
 * (every action at max_ms, earliest starts on the DAG). */
typedef struct tl_panel {
    const char *id_prefix; /* "p" planned, "u" unfrozen: SVG ids are <prefix>_<0F3> */
    const char *name;      /* "planned" or "unfrozen" */
    double *start;         /* n: start in ms */
    double *ms;            /* n: duration in ms */
    double *ratio;         /* n: freeze ratio */
    unsigned char *critical; /* n: on a critical path */
    double makespan;       /* latest end */
    tl_memory_curve *memory; /* ranks: each rank's live bytes; NULL when the plan
                                has no memory */
} tl_panel;

typedef struct tl_model {
    const tf_plan *plan;
    int n;                 /* actions */
    tf_dag dag;
    int *local_stage;      /* stages: index of each stage among its rank's stages */
    int n_panels;
    tl_panel panels[2];    /* top to bottom: [unfrozen,] planned */
} tl_model;

/* Does action i run in panel p?  Every action does but an R of 0 ms: a
 * recomputation of nothing (any R in the unfrozen panel) is not drawn. */
static inline int tl_runs(const tl_model *m, const tl_panel *p, int i)
{
    return m->plan->schedule.actions[i].type != TF_ACT_R || p->ms[i] > 0;
}

/* Fills p->memory from the plan's memory model, under the panel's times
 * and ratios: the planned panel (id_prefix "p") takes the plan's freeze
 * and recompute ratios, the unfrozen one none.  A plan without memory
 * leaves it NULL.  Returns 0, TF_EINVAL (a memory model that cannot be
 * built) or TF_ENOMEM; tl_memory_free frees what was made. */
int tl_memory_build(const tl_model *m, tl_panel *p, tf_error *err);

/* Frees p->memory (NULL: no-op). */
void tl_memory_free(tl_panel *p, int ranks);

/* The share of its backward that action i recomputes in panel p: an R's
 * backward's recompute ratio for an R, its own for a B or I, 0 for any
 * other action and in the unfrozen panel (nothing recomputed there). */
double tl_recompute_ratio(const tl_model *m, const tl_panel *p, int i);

/* The greatest of every panel's peaks and the plan's limits, in bytes (0
 * without memory): what a memory scale must reach. */
double tl_memory_max_bytes(const tl_model *m);

/* Where a picture puts time and lanes, in points (tl_draw_timeline's
 * choice, shared by the files that draw into its rows). */
typedef struct tl_frame {
    double x0;      /* x of time 0 */
    double scale;   /* points per ms */
    double axis_ms; /* time span of the axis */
    double plot_w;
    int dense;      /* under TF_TIMELINE_DENSE_POINTS per action on the busiest rank */
    double row_h;   /* one rank's rows: its timeline lane, and with memory its memory lane */
    double mem_top; /* with memory: the bytes at the top of a memory lane's scale */
} tl_frame;

static inline double tl_x(const tl_frame *f, double ms)
{
    return f->x0 + ms * f->scale;
}

/* The height of a rank's memory lane, under its timeline lane (TL_ROW_H
 * high), when the plan has memory. */
enum { TL_ROW_H = 26, TL_MEMORY_H = 52 };

struct tf_canvas;
/* Draws rank r's memory lane of panel p (its top at top): the live bytes
 * as a filled step curve on f's time axis, its static bytes (held all
 * step) darker at the bottom, and a scale from 0 to f->mem_top labelled in
 * GiB at the left; the limit (when the plan has one) as a red dashed line
 * over the step, and the peak marked, each with its value at the right.
 * SVG ids: <prefix>_mem_<r>_<k> (the curve's pieces, numbered left to
 * right; pieces of no width at one point drawn as one), <prefix>_mem_axis_<r>
 * (the zero line), <prefix>_mem_top_<r> (the scale's top line),
 * <prefix>_mem_scale_<r> (its label, "<GiB> GiB"), <prefix>_static_<r>,
 * <prefix>_peak_<r>, <prefix>_limit_<r>. */
void tl_draw_memory_lane(struct tf_canvas *c, const tl_model *m, const tl_panel *p,
                         const tl_frame *f, int r, double top);

/* Shades rank r's idle windows in the planned panel p (the plan's
 * per_rank bubbles), its timeline lane spanning [top, top + TL_ROW_H]: one
 * mark per window, id <prefix>_bubble_<r>_<k>, class "bubble", whose
 * tooltip gives the window; then the aux work placed in the windows during
 * the step (the plan's aux slices of step 0) over them, id
 * <prefix>_aux_<r>_<k>, class "aux". */
void tl_draw_bubbles(struct tf_canvas *c, const tl_model *m, const tl_panel *p,
                     const tl_frame *f, int r, double top);

/* The colours the lanes use, for the legend. */
#define TL_MEMORY_FILL "#9ecae1"
#define TL_STATIC_FILL "#6baed6"
#define TL_LIMIT_COLOUR "#c0392b"
#define TL_BUBBLE_FILL "#fbe3c4"
#define TL_AUX_FILL "#2a9d8f" /* aux work placed in a bubble */

/* The title's two lines (schedule and shape, or opt->title; then batch
 * times, speedup, mean freeze ratio and bubble) into line1 and line2 of
 * size bytes each. */
void tl_title_lines(const tl_model *m, const tf_timeline_options *opt, char *line1,
                    char *line2, size_t size);

/* The fill of action i at freeze ratio `ratio` (timeline.h: type colour,
 * darker for a rank's later stages, paler the more frozen), "#rrggbb" into
 * out; returns out. */
const char *tl_action_fill(const tl_model *m, int i, double ratio, char out[8]);

/* The two pictures of a plan, each drawn by its own file; timeline.c
 * picks one (opt->dag), so neither file calls the other's drawing. */
/* Draws the timeline (one panel, or two with opt->compare_unfrozen) into c
 * (a canvas made with tl_canvas_new_graph(name, 1), rendered with the "nop"
 * layout: every mark pinned).  Returns 0, TF_EINVAL (opt->width too narrow)
 * or TF_ENOMEM. */
int tl_draw_timeline(struct tf_canvas *c, const tl_model *m, const tf_timeline_options *opt,
                     tf_error *err);

/* Draws the dependency graph (--dag) into c (a canvas made with
 * tl_canvas_new_graph(name, 0), laid out by "dot"): the actions in one cluster
 * per rank, every DAG edge styled by its rule, and a legend.  Returns 0 or
 * TF_ENOMEM. */
int tl_draw_dependency_graph(struct tf_canvas *c, const tl_model *m,
                             const tf_timeline_options *opt, tf_error *err);

/* How the labels of the timeline tl_draw_timeline would draw with opt
 * fit its boxes.  Boxes near zero (under a fifth of the median duration:
 * a fully frozen W, typically) are left out: no width labels them. */
typedef struct tl_label_fit {
    int boxes;               /* boxes counted, every panel's */
    int unlabelled;          /* of those, the ones too narrow for any label */
    int busiest;             /* actions on the busiest rank */
    double points;           /* points of time axis per action on that rank */
    int dense;               /* rows drawn dense (TF_TIMELINE_DENSE_POINTS) */
    double width_for_labels; /* the picture width (opt->width) at which every box
                                counted holds a label */
} tl_label_fit;

/* Fills *fit.  Returns 0, or TF_EINVAL (opt->width too narrow) or
 * TF_ENOMEM as the render would. */
int tl_fit_labels(const tl_model *m, const tf_timeline_options *opt, tl_label_fit *fit,
                  tf_error *err);

/* Writes the model as Chrome/Perfetto trace JSON (malloc'd, caller frees);
 * flows: also a flow event per cross-rank DAG edge. */
int tl_render_chrome(const tl_model *m, int flows, char **data, size_t *len, tf_error *err);

#endif
