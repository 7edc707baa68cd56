/* canvas.c - marks at pinned positions in a cgraph graph, rendered in the
 * process by gvc (see tf/canvas.h).
 *
 * Every mark is a node with pos="x,y!" and the "nop" engine (neato -n)
 * lays them out, so Graphviz draws exactly the geometry computed by the
 * caller.  Positions are stored as y = -top, so nothing needs the total
 * height in advance; Graphviz fits the bounding box to the marks.
 */
#include "canvas_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- text ---------------------------------------------------------------- */

double tf_canvas_text_width(const char *text, double size)
{
    double em = 0.0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
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
    return em * size;
}

const char *tl_label_escape(const char *text, char *out, size_t size)
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

/* ---- colours and ticks ------------------------------------------------------ */

/* The channels of "#rrggbb" (black for anything else). */
static void channels(const char *colour, double rgb[3])
{
    unsigned hex = 0;
    if (!colour || sscanf(colour, "#%6x", &hex) != 1)
        hex = 0;
    rgb[0] = (hex >> 16) & 0xff;
    rgb[1] = (hex >> 8) & 0xff;
    rgb[2] = hex & 0xff;
}

const char *tf_canvas_mix(const char *a, const char *b, double t, char out[8])
{
    double x[3], y[3];
    channels(a, x);
    channels(b, y);
    snprintf(out, 8, "#%02x%02x%02x", (unsigned)lround(x[0] + (y[0] - x[0]) * t),
             (unsigned)lround(x[1] + (y[1] - x[1]) * t), (unsigned)lround(x[2] + (y[2] - x[2]) * t));
    return out;
}

/* sRGB weights without gamma: good enough to pick a readable text colour. */
double tf_canvas_luminance(const char *colour)
{
    double c[3];
    channels(colour, c);
    return (0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]) / 255.0;
}

double tf_canvas_tick_step(double span, double length)
{
    if (!(span > 0) || !(length > 0))
        return 1.0;
    double target = fmax(2.0, length / 70.0);
    double raw = span / target;
    double mag = pow(10.0, floor(log10(raw)));
    static const double factors[] = {1.0, 2.0, 5.0, 10.0};
    double best = 10.0 * mag;
    for (size_t k = 0; k < sizeof factors / sizeof *factors; k++) {
        double step = factors[k] * mag;
        if (step / span * length < 36.0)
            continue;
        if (fabs(log(step / raw)) < fabs(log(best / raw)))
            best = step;
    }
    return best;
}

int tf_canvas_tick_decimals(double step)
{
    return step >= 1.0 || !(step > 0) ? 0 : (int)ceil(-log10(step) - 1e-9);
}

const char *tf_canvas_format_for_path(const char *path)
{
    static const struct {
        const char *ext, *format;
    } by_extension[] = {{"dot", "dot"}, {"gv", "dot"}, {"svg", "svg"}, {"png", "png"},
                        {"pdf", "pdf"}};
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot || strchr(dot, '/'))
        return NULL;
    for (size_t k = 0; k < sizeof by_extension / sizeof *by_extension; k++)
        if (!strcasecmp(dot + 1, by_extension[k].ext))
            return by_extension[k].format;
    return NULL;
}

/* ---- marks -------------------------------------------------------------------- */

void tf_canvas_set(tf_canvas_mark *m, const char *attr, const char *value)
{
    if (m)
        agset(m, (char *)attr, (char *)value);
}

void tf_canvas_setf(tf_canvas_mark *m, const char *attr, const char *fmt, ...)
{
    char value[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    tf_canvas_set(m, attr, value);
}

/* Declares every attribute marks use, with neutral defaults, so that agset
 * works on each node. */
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
    static const char *const edge_defaults[][2] = {
        {"arrowhead", "none"}, {"penwidth", "1"}, {"color", "#000000"}, {"style", ""},
        {"pos", ""},           {"id", ""},        {"class", ""},        {"tooltip", ""},
        {"headclip", "false"}, {"tailclip", "false"},
    };
    /* Edges of a pinned canvas are lines (tf_canvas_line); the dependency
     * graph styles its own. */
    for (size_t k = 0; pinned && k < sizeof edge_defaults / sizeof *edge_defaults; k++)
        agattr(g, AGEDGE, (char *)edge_defaults[k][0], (char *)edge_defaults[k][1]);
    agattr(g, AGRAPH, "fontname", "Helvetica");
    agattr(g, AGRAPH, "dpi", "72");
    if (pinned) {
        agattr(g, AGRAPH, "notranslate", "true");
        agattr(g, AGRAPH, "pad", "0");
    }
}

tf_canvas *tl_canvas_new_graph(const char *name, int pinned)
{
    tf_canvas *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->g = agopen((char *)name, Agdirected, NULL);
    if (!c->g) {
        free(c);
        return NULL;
    }
    declare_attributes(c->g, pinned);
    return c;
}

tf_canvas *tf_canvas_new(const char *name)
{
    return tl_canvas_new_graph(name, 1);
}

void tf_canvas_free(tf_canvas *c)
{
    if (!c)
        return;
    agclose(c->g);
    free(c);
}

static Agnode_t *new_node(tf_canvas *c)
{
    char name[32];
    snprintf(name, sizeof name, "n%d", c->count++);
    return agnode(c->g, name, 1);
}

tf_canvas_mark *tf_canvas_rect(tf_canvas *c, double x0, double top, double x1, double bottom,
                               const char *fill)
{
    Agnode_t *n = new_node(c);
    tf_canvas_mark *m = (tf_canvas_mark *)n;
    if (!n)
        return NULL;
    tf_canvas_setf(m, "pos", "%.3f,%.3f!", (x0 + x1) / 2, -(top + bottom) / 2);
    tf_canvas_setf(m, "width", "%.6f", (x1 - x0) / 72.0);
    tf_canvas_setf(m, "height", "%.6f", (bottom - top) / 72.0);
    tf_canvas_set(m, "fillcolor", fill);
    tf_canvas_set(m, "color", fill);
    return m;
}

/* A line is an edge between two invisible point nodes at its ends, its
 * spline given as pos (one cubic Bezier with its control points on the
 * line), so the "nop" engine draws it as given rather than routing it
 * around the other nodes. */
tf_canvas_mark *tf_canvas_line(tf_canvas *c, double x0, double y0, double x1, double y1,
                               const char *colour)
{
    Agnode_t *ends[2] = {new_node(c), new_node(c)};
    const double xy[2][2] = {{x0, y0}, {x1, y1}};
    for (int k = 0; k < 2; k++) {
        if (!ends[k])
            return NULL;
        tf_canvas_set((tf_canvas_mark *)ends[k], "shape", "point");
        tf_canvas_set((tf_canvas_mark *)ends[k], "style", "invis");
        tf_canvas_set((tf_canvas_mark *)ends[k], "width", "0.01");
        tf_canvas_set((tf_canvas_mark *)ends[k], "height", "0.01");
        tf_canvas_setf((tf_canvas_mark *)ends[k], "pos", "%.3f,%.3f!", xy[k][0], -xy[k][1]);
    }
    Agedge_t *e = agedge(c->g, ends[0], ends[1], NULL, 1);
    tf_canvas_mark *m = (tf_canvas_mark *)e;
    if (!e)
        return NULL;
    tf_canvas_setf(m, "pos", "%.3f,%.3f %.3f,%.3f %.3f,%.3f %.3f,%.3f", x0, -y0,
                   (2 * x0 + x1) / 3, -(2 * y0 + y1) / 3, (x0 + 2 * x1) / 3, -(y0 + 2 * y1) / 3,
                   x1, -y1);
    tf_canvas_set(m, "color", colour);
    return m;
}

tf_canvas_mark *tf_canvas_text(tf_canvas *c, double x, double y, const char *text,
                               const tf_canvas_text_style *style)
{
    const double size = style->size;
    const char align = style->align;
    const int bold = style->bold;
    char escaped[1024], label[1040];
    tl_label_escape(text, escaped, sizeof escaped);
    double w = ceil(tf_canvas_text_width(text, size) * (bold ? 1.1 : 1.0)) + 2;
    double cx = align == 'l' ? x + w / 2 : align == 'r' ? x - w / 2 : x;
    const char *justify = align == 'l' ? "\\l" : align == 'r' ? "\\r" : "";
    snprintf(label, sizeof label, "%s%s", escaped, justify);
    tf_canvas_mark *m = (tf_canvas_mark *)new_node(c);
    if (!m)
        return NULL;
    tf_canvas_set(m, "shape", "plaintext");
    tf_canvas_set(m, "style", "");
    tf_canvas_set(m, "fixedsize", "shape"); /* no warning if the estimate falls short */
    tf_canvas_setf(m, "pos", "%.3f,%.3f!", cx, -y);
    tf_canvas_setf(m, "width", "%.6f", w / 72.0);
    tf_canvas_setf(m, "height", "%.6f", ceil(size * 1.25) / 72.0);
    tf_canvas_set(m, "label", label);
    tf_canvas_setf(m, "fontsize", "%g", size);
    tf_canvas_set(m, "fontcolor", style->colour);
    if (bold)
        tf_canvas_set(m, "fontname", "Helvetica-Bold");
    return m;
}

/* ---- rendering ------------------------------------------------------------------ */

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

/* Graphviz's rendering of the laid-out graph, copied into malloc'd memory
 * (gvFreeRenderData must free Graphviz's own). */
static int render_laid_out(GVC_t *gvc, Agraph_t *g, const char *format, char **data,
                           size_t *len, tf_error *err)
{
    char *buffer = NULL;
    unsigned int length = 0;
    if (gvRenderData(gvc, g, format, &buffer, &length) != 0 || !buffer) {
        if (buffer)
            gvFreeRenderData(buffer);
        return tf_fail(err, TF_EINVAL,
                       "Graphviz cannot render format \"%s\" here (is its plugin installed? "
                       "`dot -c` registers plugins; png and pdf need libgvplugin_pango)",
                       format);
    }
    char *copy = malloc((size_t)length + 1);
    if (!copy) {
        gvFreeRenderData(buffer);
        return tf_fail(err, TF_ENOMEM, "out of memory holding a %u-byte %s", length, format);
    }
    memcpy(copy, buffer, length);
    copy[length] = '\0';
    gvFreeRenderData(buffer);
    *data = copy;
    *len = length;
    return 0;
}

/* SVG's text has no outline unless it asks for one, but ImageMagick's own
 * SVG renderer strokes text whose element does not say stroke="none",
 * and Graphviz's never says it: every label came out bold and smudged.
 * Returns a copy of the SVG (svg[0..*len - 1]) with stroke="none" on each
 * <text> element, *len updated; NULL when out of memory.  Graphviz writes
 * "<" inside text and attributes as "&lt;", so "<text " only starts
 * elements. */
static char *svg_unstroked_text(const char *svg, size_t *len)
{
    static const char tag[] = "<text ", extra[] = "stroke=\"none\" ";
    size_t count = 0;
    for (const char *p = strstr(svg, tag); p; p = strstr(p + 1, tag))
        count++;
    size_t out_len = *len + count * (sizeof extra - 1);
    char *out = malloc(out_len + 1), *w = out;
    if (!out)
        return NULL;
    const char *from = svg;
    for (const char *p = strstr(svg, tag); p; p = strstr(p + 1, tag)) {
        size_t keep = (size_t)(p - from) + sizeof tag - 1;
        memcpy(w, from, keep);
        w += keep;
        memcpy(w, extra, sizeof extra - 1);
        w += sizeof extra - 1;
        from = p + sizeof tag - 1;
    }
    memcpy(w, from, (size_t)(svg + *len - from));
    out[out_len] = '\0';
    *len = out_len;
    return out;
}

int tl_canvas_render(tf_canvas *c, const char *engine, const char *format, double dpi,
                     char **data, size_t *len, tf_error *err)
{
    *data = NULL;
    *len = 0;
    GVC_t *gvc = graphviz_context();
    if (!gvc)
        return tf_fail(err, TF_ENOMEM, "cannot start Graphviz (gvContext failed)");
    /* Bitmap resolution; vector formats keep 72 units per inch so SVG user
     * units are the layout's points. */
    char value[32];
    snprintf(value, sizeof value, "%g", !strcmp(format, "png") && dpi > 0 ? dpi : 72.0);
    agset(c->g, "dpi", value);
    if (gvLayout(gvc, c->g, engine) != 0)
        return tf_fail(err, TF_EINVAL, "Graphviz could not lay out the picture (engine %s)",
                       engine);
    int rc = render_laid_out(gvc, c->g, format, data, len, err);
    gvFreeLayout(gvc, c->g);
    if (rc == 0 && !strcmp(format, "svg")) {
        char *svg = svg_unstroked_text(*data, len);
        free(*data);
        *data = svg;
        if (!svg) {
            *len = 0;
            rc = tf_fail(err, TF_ENOMEM, "out of memory holding the SVG");
        }
    }
    return rc;
}

int tf_canvas_render(tf_canvas *c, const char *format, double dpi, char **data, size_t *len,
                     tf_error *err)
{
    return tl_canvas_render(c, "nop", format, dpi, data, len, err);
}
