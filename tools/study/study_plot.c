/* study_plot.c - an SVG chart of a study, written directly (no plotting
 * dependency).  Top panel: tokens/s per GPU of every solved configuration,
 * the unfrozen throughput solid and the gain from the freeze plan pale on
 * top of it.  Bottom panel: the speedup (unfrozen / planned batch time).
 * Configurations keep the sweep order, so they are grouped by schedule;
 * each group has its own colour and a name above it.
 */
#include "study.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "study_text.h"
#include "tf/util.h"

/* Layout in pixels. */
enum {
    SLOT = 16,          /* horizontal space per configuration */
    BAR = 11,           /* bar width */
    GROUP_GAP = 14,     /* space between schedule groups */
    LEFT = 78,
    RIGHT = 24,
    TOP = 86,           /* title, legend and group names */
    PANEL_A = 250,      /* throughput panel height */
    BETWEEN = 34,
    PANEL_B = 150,      /* speedup panel height */
    BOTTOM = 118,       /* rotated configuration labels */
    TITLE_PX = 16,      /* title font size, shrunk down to TITLE_MIN_PX to fit */
    TITLE_MIN_PX = 11
};

/* The legend's second entry: the widest text of the legend line. */
static const char *const legend_gain = "gain from the freeze plan (planned = whole bar)";

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                      "#b07aa1", "#76b7b2", "#edc948", "#9c755f"};

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about `ticks` ticks up to span. */
static double nice_step(double span, int ticks)
{
    if (!(span > 0))
        return 1.0;
    double raw = span / ticks;
    double magnitude = pow(10.0, floor(log10(raw)));
    double norm = raw / magnitude;
    double step = norm < 1.5 ? 1.0 : norm < 3.0 ? 2.0 : norm < 7.0 ? 5.0 : 10.0;
    return step * magnitude;
}

static void tick_label(char *buf, size_t size, double value, double step)
{
    if (value == 0.0)
        snprintf(buf, size, "0");
    else if (step >= 1000.0)
        snprintf(buf, size, "%gk", value / 1000.0);
    else
        snprintf(buf, size, "%g", value);
}

/* The configuration's short label: only what the sweep varies. */
static void config_label(const tf_study_result *r, const tf_study_config *c, char *buf,
                         size_t size)
{
    int n = snprintf(buf, size, "pp%d", c->ranks);
    if (r->vary_stages_per_rank)
        n += snprintf(buf + n, size - (size_t)n, " v%d", c->stages_per_rank);
    if (r->vary_microbatches)
        n += snprintf(buf + n, size - (size_t)n, " m%d", c->microbatches);
    if (r->vary_cap)
        n += snprintf(buf + n, size - (size_t)n, " cap%g", c->max_freeze_ratio);
    if (r->vary_p2p)
        snprintf(buf + n, size - (size_t)n, " p2p%g", c->p2p_ms);
}

/* Draws a y axis with grid lines for [lo, hi] over panel [y0, y0 + height]. */
static void y_axis(st_text *t, double lo, double hi, double step, int x0, int x1, int y0,
                   int height, const char *title, const char *suffix)
{
    for (double v = lo; v <= hi + 1e-9 * step; v += step) {
        double y = y0 + height - (v - lo) / (hi - lo) * height;
        char label[32];
        tick_label(label, sizeof label, v, step);
        st_printf(t,
                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>\n"
                  "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" class=\"tick\">%s%s</text>\n",
                  x0, y, x1, y, x0 - 6, y + 4, label, suffix);
    }
    st_printf(t,
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n"
              "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\" "
              "class=\"axis\">%s</text>\n",
              x0, y0, x0, y0 + height, 16, y0 + height / 2, title);
}

/* Where everything goes: x[i] and group[i] for each solved row i (groups
 * start where the schedule changes), the picture's size and both panels'
 * scales. */
typedef struct plot_layout {
    double *x;
    int *group;
    int width, height, plot_right;
    double title_px;           /* the title's font size */
    int a_top, b_top;          /* the throughput and speedup panels */
    double step_a, top_a;      /* throughput axis: tick step and top */
    double step_b, top_b;      /* speedup axis */
} plot_layout;

static const char *group_colour(int group)
{
    return palette[group % (int)(sizeof palette / sizeof *palette)];
}

/* Estimated advance width in em of text in bold (bold != 0) or regular
 * Helvetica.  On Debian that resolves to DejaVu Sans, wider than Helvetica;
 * the per-character widths are DejaVu Sans's rounded up, so the estimate
 * errs wide and text placed by it stays inside the picture. */
static double text_em(const char *s, int bold)
{
    double em = 0.0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xc0) == 0x80)
            continue; /* UTF-8 continuation byte */
        if (*p >= 0xc0 || strchr("WMmw%", *p))
            em += bold ? 1.1 : 1.0;
        else if (*p >= 'A' && *p <= 'Z')
            em += bold ? 0.8 : 0.72;
        else
            em += bold ? 0.72 : 0.66;
    }
    return em;
}

/* The title's text, as drawn (the em dash is one character). */
static void title_text(const tf_study_result *r, char *buf, size_t size)
{
    snprintf(buf, size, "tf-study: %s \xe2\x80\x94 throughput and speedup of the freeze plan",
             r->name);
}

/* Widens the picture to hold the legend line, then sizes the title to the
 * width: a long study name shrinks the title down to TITLE_MIN_PX, and
 * past that widens the picture, so the title is never cut off at the right
 * edge. */
static void fit_title(const tf_study_result *r, plot_layout *l)
{
    double legend_right = LEFT + 106 + text_em(legend_gain, 0) * 12;
    l->width = (int)fmax(l->width, ceil(legend_right + RIGHT));
    char title[512];
    title_text(r, title, sizeof title);
    double em = text_em(title, 1), room = l->width - LEFT - RIGHT;
    l->title_px = TITLE_PX;
    if (em * TITLE_PX > room)
        l->title_px = fmax(TITLE_MIN_PX, floor(2 * room / em) / 2);
    l->width = (int)fmax(l->width, ceil(LEFT + em * l->title_px + RIGHT));
    l->plot_right = l->width - RIGHT;
}

/* Places the solved rows and scales both panels to fit them.  Returns 0 or
 * TF_ENOMEM (l then holds nothing to free). */
static int lay_out(const tf_study_result *r, plot_layout *l)
{
    l->x = calloc((size_t)r->n_rows + 1, sizeof *l->x);
    l->group = calloc((size_t)r->n_rows + 1, sizeof *l->group);
    if (!l->x || !l->group) {
        free(l->x);
        free(l->group);
        return TF_ENOMEM;
    }
    double cursor = LEFT + 10, max_tps = 0.0, max_speedup = 1.0;
    int groups = 0;
    const char *previous = NULL;
    for (int i = 0; i < r->n_rows; i++) {
        const tf_study_row *w = &r->rows[i];
        if (w->status != TF_STUDY_SOLVED)
            continue;
        if (!previous || strcmp(previous, w->config.schedule) != 0) {
            if (previous)
                cursor += GROUP_GAP;
            groups++;
            previous = w->config.schedule;
        }
        l->group[i] = groups - 1;
        l->x[i] = cursor;
        cursor += SLOT;
        max_tps = fmax(max_tps, w->tokens_per_s_planned / w->config.ranks);
        max_speedup = fmax(max_speedup, w->speedup);
    }
    l->width = (int)cursor + 10 + RIGHT;
    fit_title(r, l);
    l->a_top = TOP;
    l->b_top = TOP + PANEL_A + BETWEEN;
    l->height = l->b_top + PANEL_B + BOTTOM;
    l->step_a = nice_step(max_tps, 5);
    l->top_a = fmax(l->step_a, ceil(max_tps / l->step_a) * l->step_a);
    l->step_b = fmax(nice_step(max_speedup - 1.0, 4), 0.05);
    l->top_b = 1.0 + fmax(l->step_b, ceil((max_speedup - 1.0) / l->step_b) * l->step_b);
    return 0;
}

/* The SVG's opening, its title and the legend. */
static void write_head(st_text *t, const tf_study_result *r, const plot_layout *l)
{
    st_printf(t,
              "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
              "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\">\n"
              "<style>.tick{font-size:11px;fill:#444}.axis{font-size:12px;fill:#222}"
              ".label{font-size:10px;fill:#333}.group{font-size:13px;font-weight:bold}"
              ".title{font-size:16px;font-weight:bold}.legend{font-size:12px;fill:#222}</style>\n"
              "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
              l->width, l->height, l->width, l->height);
    char title[512];
    title_text(r, title, sizeof title);
    st_printf(t, "<text x=\"%d\" y=\"24\" class=\"title\" style=\"font-size:%gpx\">", LEFT,
              l->title_px);
    st_xml(t, title);
    st_printf(t, "</text>\n");
    /* Legend (in the first schedule's colour; every group uses the same code). */
    st_printf(t,
              "<rect x=\"%d\" y=\"36\" width=\"12\" height=\"12\" fill=\"#777\"/>"
              "<text x=\"%d\" y=\"46\" class=\"legend\">unfrozen</text>\n"
              "<rect x=\"%d\" y=\"36\" width=\"12\" height=\"12\" fill=\"#777\" "
              "fill-opacity=\"0.35\"/>"
              "<text x=\"%d\" y=\"46\" class=\"legend\">%s</text>\n",
              LEFT, LEFT + 16, LEFT + 90, LEFT + 106, legend_gain);
}

/* Alternating group bands and group names. */
static void write_groups(st_text *t, const tf_study_result *r, const plot_layout *l)
{
    int g = -1;
    for (int i = 0; i < r->n_rows; i++) {
        if (r->rows[i].status != TF_STUDY_SOLVED || l->group[i] == g)
            continue;
        g = l->group[i];
        double start = l->x[i], end = l->x[i];
        for (int j = i; j < r->n_rows; j++)
            if (r->rows[j].status == TF_STUDY_SOLVED && l->group[j] == g)
                end = l->x[j] + SLOT;
        if (g % 2)
            st_printf(t,
                      "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#f4f4f4\"/>\n",
                      start - 4, l->a_top, end - start + 8, l->b_top + PANEL_B - l->a_top);
        st_printf(t, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"group\" "
                     "fill=\"%s\">",
                  (start + end) / 2, l->a_top - 12, group_colour(g));
        st_xml(t, r->rows[i].config.schedule);
        st_printf(t, "</text>\n");
    }
}

static void write_axes(st_text *t, const plot_layout *l)
{
    y_axis(t, 0.0, l->top_a, l->step_a, LEFT, l->plot_right, l->a_top, PANEL_A,
           "tokens/s per GPU", "");
    y_axis(t, 1.0, l->top_b, l->step_b, LEFT, l->plot_right, l->b_top, PANEL_B, "speedup", "x");
    st_printf(t,
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n"
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n",
              LEFT, l->a_top + PANEL_A, l->plot_right, l->a_top + PANEL_A, LEFT,
              l->b_top + PANEL_B, l->plot_right, l->b_top + PANEL_B);
}

/* Solved row i: its bars in both panels with a tooltip, and its label. */
static void write_bars(st_text *t, const tf_study_result *r, const plot_layout *l, int i)
{
    const tf_study_row *w = &r->rows[i];
    const tf_study_config *c = &w->config;
    const char *colour = group_colour(l->group[i]);
    double bx = l->x[i] + (SLOT - BAR) / 2.0;
    double planned = w->tokens_per_s_planned / c->ranks;
    double unfrozen = w->tokens_per_s_unfrozen / c->ranks;
    double h_planned = planned / l->top_a * PANEL_A, h_unfrozen = unfrozen / l->top_a * PANEL_A;
    double h_speedup = (w->speedup - 1.0) / (l->top_b - 1.0) * PANEL_B;
    char tip[256];
    snprintf(tip, sizeof tip,
             "%s, %d %s x %d %s, %d %s, cap %g, p2p %g ms: "
             "%.0f -> %.0f tokens/s per GPU, speedup %.3fx, mean freeze %.2f",
             c->schedule, c->ranks, tf_plural(c->ranks, "rank", "ranks"), c->stages_per_rank,
             tf_plural(c->stages_per_rank, "stage", "stages"), c->microbatches,
             tf_plural(c->microbatches, "microbatch", "microbatches"), c->max_freeze_ratio,
             c->p2p_ms, unfrozen, planned, w->speedup, w->mean_freeze_ratio);
    st_printf(t, "<g><title>");
    st_xml(t, tip);
    st_printf(t,
              "</title>\n"
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\" "
              "fill-opacity=\"0.35\"/>\n"
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/>\n"
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/></g>\n",
              bx, l->a_top + PANEL_A - h_planned, BAR, h_planned, colour, bx,
              l->a_top + PANEL_A - h_unfrozen, BAR, h_unfrozen, colour, bx,
              l->b_top + PANEL_B - h_speedup, BAR, h_speedup, colour);
    char label[96];
    config_label(r, c, label, sizeof label);
    double lx = l->x[i] + SLOT / 2.0 + 4, ly = l->b_top + PANEL_B + 8;
    st_printf(t,
              "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"end\" "
              "class=\"label\">",
              lx, ly);
    st_xml(t, label);
    st_printf(t, "</text>\n");
}

int tf_study_to_svg(const tf_study_result *r, char **text, tf_error *err)
{
    *text = NULL;
    if (!r->solved)
        return tf_fail(err, TF_EINVAL, "no configuration was solved, nothing to plot");
    plot_layout l;
    if (lay_out(r, &l))
        return tf_fail(err, TF_ENOMEM, "out of memory drawing the plot");
    st_text t = {0};
    write_head(&t, r, &l);
    write_groups(&t, r, &l);
    write_axes(&t, &l);
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].status == TF_STUDY_SOLVED)
            write_bars(&t, r, &l, i);
    st_printf(&t, "</svg>\n");
    free(l.x);
    free(l.group);
    if (st_finish(&t, text))
        return tf_fail(err, TF_ENOMEM, "out of memory drawing the plot");
    return 0;
}
