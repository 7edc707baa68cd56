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
    BOTTOM = 118        /* rotated configuration labels */
};

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

int tf_study_to_svg(const tf_study_result *r, char **text, tf_error *err)
{
    *text = NULL;
    if (!r->solved)
        return tf_fail(err, TF_EINVAL, "no configuration was solved, nothing to plot");
    /* x position of each solved row; groups start where the schedule changes. */
    double *x = calloc((size_t)r->n_rows + 1, sizeof *x);
    int *group = calloc((size_t)r->n_rows + 1, sizeof *group);
    if (!x || !group) {
        free(x);
        free(group);
        return tf_fail(err, TF_ENOMEM, "out of memory drawing the plot");
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
        group[i] = groups - 1;
        x[i] = cursor;
        cursor += SLOT;
        max_tps = fmax(max_tps, w->tokens_per_s_planned / w->config.ranks);
        max_speedup = fmax(max_speedup, w->speedup);
    }
    const int width = (int)cursor + 10 + RIGHT;
    const int plot_right = width - RIGHT;
    const int a_top = TOP, b_top = TOP + PANEL_A + BETWEEN;
    const int height = b_top + PANEL_B + BOTTOM;
    double step_a = nice_step(max_tps, 5);
    double top_a = fmax(step_a, ceil(max_tps / step_a) * step_a);
    double step_b = nice_step(max_speedup - 1.0, 4);
    if (step_b < 0.05)
        step_b = 0.05;
    double top_b = 1.0 + fmax(step_b, ceil((max_speedup - 1.0) / step_b) * step_b);

    st_text t = {0};
    st_printf(&t,
              "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
              "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\">\n"
              "<style>.tick{font-size:11px;fill:#444}.axis{font-size:12px;fill:#222}"
              ".label{font-size:10px;fill:#333}.group{font-size:13px;font-weight:bold}"
              ".title{font-size:16px;font-weight:bold}.legend{font-size:12px;fill:#222}</style>\n"
              "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
              width, height, width, height);
    st_printf(&t, "<text x=\"%d\" y=\"24\" class=\"title\">tf-study: ", LEFT);
    st_xml(&t, r->name);
    st_printf(&t, " &#8212; throughput and speedup of the freeze plan</text>\n");
    /* Legend (in the first schedule's colour; every group uses the same code). */
    st_printf(&t,
              "<rect x=\"%d\" y=\"36\" width=\"12\" height=\"12\" fill=\"#777\"/>"
              "<text x=\"%d\" y=\"46\" class=\"legend\">unfrozen</text>\n"
              "<rect x=\"%d\" y=\"36\" width=\"12\" height=\"12\" fill=\"#777\" "
              "fill-opacity=\"0.35\"/>"
              "<text x=\"%d\" y=\"46\" class=\"legend\">gain from the freeze plan (planned = "
              "whole bar)</text>\n",
              LEFT, LEFT + 16, LEFT + 90, LEFT + 106);

    /* Alternating group bands and group names. */
    int g = -1;
    for (int i = 0; i < r->n_rows; i++) {
        if (r->rows[i].status != TF_STUDY_SOLVED || group[i] == g)
            continue;
        g = group[i];
        double start = x[i], end = x[i];
        for (int j = i; j < r->n_rows; j++)
            if (r->rows[j].status == TF_STUDY_SOLVED && group[j] == g)
                end = x[j] + SLOT;
        const char *colour = palette[g % (int)(sizeof palette / sizeof *palette)];
        if (g % 2)
            st_printf(&t,
                      "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#f4f4f4\"/>\n",
                      start - 4, a_top, end - start + 8, b_top + PANEL_B - a_top);
        st_printf(&t, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"group\" "
                      "fill=\"%s\">",
                  (start + end) / 2, a_top - 12, colour);
        st_xml(&t, r->rows[i].config.schedule);
        st_printf(&t, "</text>\n");
    }

    y_axis(&t, 0.0, top_a, step_a, LEFT, plot_right, a_top, PANEL_A, "tokens/s per GPU", "");
    y_axis(&t, 1.0, top_b, step_b, LEFT, plot_right, b_top, PANEL_B, "speedup", "x");
    st_printf(&t,
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n"
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n",
              LEFT, a_top + PANEL_A, plot_right, a_top + PANEL_A, LEFT, b_top + PANEL_B,
              plot_right, b_top + PANEL_B);

    for (int i = 0; i < r->n_rows; i++) {
        const tf_study_row *w = &r->rows[i];
        if (w->status != TF_STUDY_SOLVED)
            continue;
        const tf_study_config *c = &w->config;
        const char *colour = palette[group[i] % (int)(sizeof palette / sizeof *palette)];
        double bx = x[i] + (SLOT - BAR) / 2.0;
        double planned = w->tokens_per_s_planned / c->ranks;
        double unfrozen = w->tokens_per_s_unfrozen / c->ranks;
        double h_planned = planned / top_a * PANEL_A, h_unfrozen = unfrozen / top_a * PANEL_A;
        double h_speedup = (w->speedup - 1.0) / (top_b - 1.0) * PANEL_B;
        char tip[256];
        snprintf(tip, sizeof tip,
                 "%s, %d ranks x %d stages, %d microbatches, cap %g, p2p %g ms: "
                 "%.0f -> %.0f tokens/s per GPU, speedup %.3fx, mean freeze %.2f",
                 c->schedule, c->ranks, c->stages_per_rank, c->microbatches, c->max_freeze_ratio,
                 c->p2p_ms, unfrozen, planned, w->speedup, w->mean_freeze_ratio);
        st_printf(&t, "<g><title>");
        st_xml(&t, tip);
        st_printf(&t,
                  "</title>\n"
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\" "
                  "fill-opacity=\"0.35\"/>\n"
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/>\n"
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/></g>\n",
                  bx, a_top + PANEL_A - h_planned, BAR, h_planned, colour, bx,
                  a_top + PANEL_A - h_unfrozen, BAR, h_unfrozen, colour, bx,
                  b_top + PANEL_B - h_speedup, BAR, h_speedup, colour);
        char label[96];
        config_label(r, c, label, sizeof label);
        double lx = x[i] + SLOT / 2.0 + 4, ly = b_top + PANEL_B + 8;
        st_printf(&t,
                  "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"end\" "
                  "class=\"label\">",
                  lx, ly);
        st_xml(&t, label);
        st_printf(&t, "</text>\n");
    }
    st_printf(&t, "</svg>\n");
    free(x);
    free(group);
    if (st_finish(&t, text))
        return tf_fail(err, TF_ENOMEM, "out of memory drawing the plot");
    return 0;
}
