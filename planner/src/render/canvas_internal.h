/* canvas_internal.h - what the render library's pictures share beyond
 * tf/canvas.h (private to tfrender): the Graphviz graph behind a canvas,
 * for the dependency graph, which Graphviz lays out itself. */
#ifndef TF_CANVAS_INTERNAL_H
#define TF_CANVAS_INTERNAL_H

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <stddef.h>

#include "tf/canvas.h"

struct tf_canvas {
    Agraph_t *g;
    int count; /* marks made: the next node's name */
};

/* A canvas named name whose marks are pinned (pinned = 1, as
 * tf_canvas_new) or whose graph a layout engine places (pinned = 0: the
 * caller adds nodes, edges and clusters to tl_canvas_graph).  NULL when
 * out of memory. */
tf_canvas *tl_canvas_new_graph(const char *name, int pinned);

/* The graph behind c. */
static inline Agraph_t *tl_canvas_graph(tf_canvas *c)
{
    return c->g;
}

/* tf_canvas_render with layout engine ("nop" for pinned marks, "dot"). */
int tl_canvas_render(tf_canvas *c, const char *engine, const char *format, double dpi,
                     char **data, size_t *len, tf_error *err);

/* Sets attribute attr of any cgraph object (graph, node or edge; NULL:
 * no-op) as tf_canvas_set and tf_canvas_setf do for marks: agset takes
 * them all alike. */
#define tl_set(obj, attr, value) tf_canvas_set((tf_canvas_mark *)(obj), attr, value)
#define tl_setf(obj, attr, ...) tf_canvas_setf((tf_canvas_mark *)(obj), attr, __VA_ARGS__)

/* Copies text into out[size] with backslashes doubled and line ends made
 * spaces: Graphviz labels treat "\N", "\l" etc. as escapes, and titles may
 * come from the user.  Returns out. */
const char *tl_label_escape(const char *text, char *out, size_t size);

#endif
