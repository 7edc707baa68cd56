/* timeline_internal.h - what the timeline modules share (private to the
 * planner library): a checked plan with its DAG and the panels to draw.
 */
#ifndef TF_TIMELINE_INTERNAL_H
#define TF_TIMELINE_INTERNAL_H

#include <stddef.h>

#include "tf/dag.h"
#include "tf/plan.h"
#include "tf/timeline.h"

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
} tl_panel;

typedef struct tl_model {
    const tf_plan *plan;
    int n;                 /* actions */
    tf_dag dag;
    int *local_stage;      /* stages: index of each stage among its rank's stages */
    int n_panels;
    tl_panel panels[2];    /* top to bottom: [unfrozen,] planned */
} tl_model;

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
struct tf_canvas;
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
