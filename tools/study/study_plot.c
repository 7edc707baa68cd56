/* study_plot.c - the chart of a study, drawn on the render library's
 * canvas (tf/canvas.h), so SVG, PNG and PDF come from one drawing.
 *
 * One row per solved configuration, in sweep order, grouped by schedule
 * under the schedule's name, each group in its own colour.  Left panel:
 * tokens/s per GPU, the unfrozen throughput solid and the gain from the
 * freeze plan pale after it (the whole bar is the planned throughput).
 * Middle panel: the speedup (unfrozen / planned batch time) from 1x.  With
 * the model's bytes, a right panel: the largest rank's peak bytes under the
 * plan, the GPU's limit dashed across it; a configuration that does not
 * fit is drawn grey (its throughput and speedup are the plan without a
 * limit, which it cannot run) with its peak in red, and the fastest that
 * fits is named.  Bars run across so that every label reads horizontally.
 */
#include "study.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tf/canvas.h"
#include "tf/util.h"

/* Layout in points. */
enum {
    MARGIN = 14,
    TITLE_SIZE = 14,      /* shrunk down to TITLE_MIN to fit, then the picture widens */
    TITLE_MIN = 11,
    HEAD_H = 62,          /* title, legend and panel titles */
    GROUP_H = 18,         /* a schedule's name */
    ROW_H = 13,           /* a configuration */
    BAR_H = 9,
    PANEL_A = 340,        /* throughput panel width */
    PANEL_B = 190,        /* speedup panel width */
    PANEL_C = 190,        /* peak memory panel width */
    GAP = 46,             /* between the panels: the speedup's value labels */
    AXIS_H = 22           /* tick marks and labels under the rows */
};

/* Text, one style per kind; the title's size and a group name's colour
 * vary, so those two are made where they are drawn. */
static const tf_canvas_text_style LEGEND = {10, 'l', "#222222", 0};
static const tf_canvas_text_style PANEL_TITLE = {10.5, 'c', "#222222", 1};
static const tf_canvas_text_style TICK_LABEL = {9, 'c', "#444444", 0};
static const tf_canvas_text_style ROW_LABEL = {9, 'r', "#333333", 0};
static const tf_canvas_text_style SPEEDUP_VALUE = {8, 'l', "#555555", 0};
enum { GROUP_NAME_SIZE = 10 };

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                      "#b07aa1", "#76b7b2", "#edc948", "#9c755f"};
static const char *const legend_gain = "gain from the freeze plan (planned = whole bar)";
static const char *const speedup_title = "speedup (unfrozen / planned batch time)";
static const char *const NOT_FIT = "#b5b5b5"; /* a configuration that does not fit */
static const char *const OVER = "#d62728";    /* its peak, and the limit */
static const char *const best_note = "\xe2\x97\x80 fastest that fits";
static const double GiB = 1073741824.0;

static const char *group_colour(int group)
{
    return palette[group % (int)(sizeof palette / sizeof *palette)];
}

/* The pale shade of a group's colour that shows the gain. */
static const char *pale(const char *colour, char out[8])
{
    return tf_canvas_mix(colour, "#ffffff", 0.62, out);
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
        n += snprintf(buf + n, size - (size_t)n, " p2p%g", c->p2p_ms);
    if (r->vary_recompute)
        n += snprintf(buf + n, size - (size_t)n, " rc-%s",
                      tf_recompute_name((tf_recompute)c->recompute));
    if (r->vary_sequence_parallel)
        snprintf(buf + n, size - (size_t)n, "%s", c->sequence_parallel ? " sp" : "");
}

static void title_text(const tf_study_result *r, char *buf, size_t size)
{
    snprintf(buf, size, "tf-study: %s \xe2\x80\x94 throughput and speedup of the freeze plan",
             r->name);
}

/* Where everything goes. */
typedef struct chart {
    double label_w;          /* the configuration labels' column */
    double a0, b0, c0;       /* left edges of the panels (c0: memory, 0 without) */
    double width;            /* the whole picture */
    double title_size;
    double top_a, step_a;    /* throughput axis: its end and tick step */
    double top_b, step_b;    /* speedup axis, from 1 */
    double top_c, step_c;    /* peak memory axis, GiB */
    int best;                /* the fastest row that fits a limit; -1: none or no limit */
    double rows_top, rows_bottom;
} chart;

static int solved(const tf_study_result *r, int i)
{
    return r->rows[i].status == TF_STUDY_SOLVED;
}

/* Does solved row i start a new schedule group? */
static int starts_group(const tf_study_result *r, int i)
{
    for (int j = i - 1; j >= 0; j--)
        if (solved(r, j))
            return strcmp(r->rows[j].config.schedule, r->rows[i].config.schedule) != 0;
    return 1;
}

/* An axis end at a whole number of round ticks at or above top. */
static double axis_end(double top, double step)
{
    return fmax(step, ceil(top / step - 1e-9) * step);
}

/* The solved row with the most tokens/s per GPU among those that fit a
 * limit (the first on ties); -1 without a limit or when none fits. */
static int best_fitting(const tf_study_result *r)
{
    int best = -1;
    for (int i = 0; i < r->n_rows && r->memory_limit_bytes > 0; i++) {
        const tf_study_row *w = &r->rows[i];
        if (!solved(r, i) || w->fits != 1)
            continue;
        const tf_study_row *b = best >= 0 ? &r->rows[best] : NULL;
        if (!b || w->tokens_per_s_planned / w->config.ranks >
                      b->tokens_per_s_planned / b->config.ranks)
            best = i;
    }
    return best;
}

static void lay_out(const tf_study_result *r, chart *c)
{
    double max_tps = 0.0, max_speedup = 1.0, height = 0.0, max_gib = r->memory_limit_bytes / GiB;
    c->label_w = 40;
    for (int i = 0; i < r->n_rows; i++) {
        if (!solved(r, i))
            continue;
        const tf_study_row *w = &r->rows[i];
        char label[96];
        config_label(r, &w->config, label, sizeof label);
        c->label_w = fmax(c->label_w, tf_canvas_text_width(label, ROW_LABEL.size) + 10);
        if (starts_group(r, i)) /* the group's name stays left of the panel too */
            c->label_w = fmax(c->label_w,
                              1.1 * tf_canvas_text_width(w->config.schedule, GROUP_NAME_SIZE) + 8);
        max_tps = fmax(max_tps, w->tokens_per_s_planned / w->config.ranks);
        max_speedup = fmax(max_speedup, w->speedup);
        max_gib = fmax(max_gib, w->peak_memory_bytes / GiB);
        height += (starts_group(r, i) ? GROUP_H : 0) + ROW_H;
    }
    c->a0 = ceil(MARGIN + c->label_w); /* whole points: Graphviz rounds box sizes */
    c->b0 = c->a0 + PANEL_A + GAP;
    c->step_a = tf_canvas_tick_step(fmax(max_tps, 1.0), PANEL_A);
    c->top_a = axis_end(fmax(max_tps, 1.0), c->step_a);
    c->step_b = tf_canvas_tick_step(fmax(max_speedup - 1.0, 0.05), PANEL_B);
    c->top_b = 1.0 + axis_end(fmax(max_speedup - 1.0, 0.05), c->step_b);
    c->c0 = r->has_memory ? c->b0 + PANEL_B + 44 + tf_canvas_text_width(best_note, 8) : 0.0;
    c->step_c = tf_canvas_tick_step(fmax(max_gib, 1.0), PANEL_C);
    c->top_c = axis_end(fmax(max_gib, 1.0), c->step_c);
    c->best = best_fitting(r);
    c->rows_top = MARGIN + HEAD_H;
    c->rows_bottom = c->rows_top + height;
    /* Room for the speedups' value labels, and for the panel's title,
     * centred over the panel and wider than it. */
    c->width = fmax(c->b0 + PANEL_B + 44,
                    c->b0 + PANEL_B / 2.0 + 0.55 * tf_canvas_text_width(speedup_title, PANEL_TITLE.size)) +
               MARGIN;
    if (r->has_memory)
        c->width = c->c0 + PANEL_C + 24 + MARGIN;
    char title[512];
    title_text(r, title, sizeof title);
    double room = c->width - 2 * MARGIN, w = tf_canvas_text_width(title, TITLE_SIZE) * 1.1;
    c->title_size = w <= room ? TITLE_SIZE : fmax(TITLE_MIN, floor(2 * TITLE_SIZE * room / w) / 2);
    c->width = fmax(c->width, ceil(2 * MARGIN + w * c->title_size / TITLE_SIZE));
}

static double x_tps(const chart *c, double tps)
{
    return c->a0 + tps / c->top_a * PANEL_A;
}

static double x_speedup(const chart *c, double speedup)
{
    return c->b0 + (speedup - 1.0) / (c->top_b - 1.0) * PANEL_B;
}

static double x_gib(const chart *c, double gib)
{
    return c->c0 + gib / c->top_c * PANEL_C;
}

/* The title, the legend and the panels' titles. */
static void draw_head(tf_canvas *k, const tf_study_result *r, const chart *c)
{
    char title[512], shade[8];
    title_text(r, title, sizeof title);
    const tf_canvas_text_style title_style = {c->title_size, 'l', "#1b1b1b", 1};
    tf_canvas_set(tf_canvas_text(k, MARGIN, MARGIN + 8, title, &title_style), "id", "title");
    double y = MARGIN + 28, x = MARGIN;
    tf_canvas_rect(k, x, y - 6, x + 12, y + 6, "#777777");
    tf_canvas_text(k, x + 16, y, "unfrozen", &LEGEND);
    x += 16 + tf_canvas_text_width("unfrozen", LEGEND.size) + 18;
    tf_canvas_rect(k, x, y - 6, x + 12, y + 6, pale("#777777", shade));
    tf_canvas_text(k, x + 16, y, legend_gain, &LEGEND);
    y = c->rows_top - 10;
    tf_canvas_text(k, c->a0 + PANEL_A / 2.0, y, "tokens/s per GPU", &PANEL_TITLE);
    tf_canvas_text(k, c->b0 + PANEL_B / 2.0, y, speedup_title, &PANEL_TITLE);
    if (!r->has_memory)
        return;
    tf_canvas_text(k, c->c0 + PANEL_C / 2.0, y, "peak memory per GPU (GiB)", &PANEL_TITLE);
    if (!(r->memory_limit_bytes > 0))
        return;
    y = MARGIN + 28;
    x += 16 + tf_canvas_text_width(legend_gain, LEGEND.size) + 18;
    tf_canvas_rect(k, x, y - 6, x + 12, y + 6, NOT_FIT);
    char text[96];
    snprintf(text, sizeof text, "does not fit %.4g GiB (planned without the limit)",
             r->memory_limit_bytes / GiB);
    tf_canvas_text(k, x + 16, y, text, &LEGEND);
}

/* The limit, dashed down the memory panel. */
static void draw_limit(tf_canvas *k, const tf_study_result *r, const chart *c)
{
    if (!r->has_memory || !(r->memory_limit_bytes > 0))
        return;
    double x = round(x_gib(c, r->memory_limit_bytes / GiB));
    tf_canvas_mark *line = tf_canvas_rect(k, x, c->rows_top - 2, x + 1.5, c->rows_bottom, OVER);
    tf_canvas_setf(line, "tooltip", "limit %.4g GiB per GPU", r->memory_limit_bytes / GiB);
}

/* Ticks, gridlines and the baseline of one panel from x0 to x0 + width:
 * values from `from` to `to` in steps of `step`, labelled with suffix. */
static void draw_axis(tf_canvas *k, const chart *c, double x0, double width, double from,
                      double to, double step, const char *suffix)
{
    const double bottom = c->rows_bottom;
    for (int t = 0; from + t * step <= to + 1e-9 * step; t++) {
        double value = from + t * step, x = round(x0 + (value - from) / (to - from) * width);
        char label[32];
        if (step >= 1000.0 && value != 0.0)
            snprintf(label, sizeof label, "%gk%s", value / 1000.0, suffix);
        else
            snprintf(label, sizeof label, "%g%s", value, suffix);
        tf_canvas_rect(k, x, c->rows_top, x, bottom, t ? "#e3e3e3" : "#444444");
        tf_canvas_rect(k, x, bottom, x, bottom + 4, "#444444");
        tf_canvas_set(tf_canvas_text(k, x, bottom + 12, label, &TICK_LABEL), "class", "tick");
    }
    tf_canvas_rect(k, x0, bottom, x0 + width, bottom, "#444444");
}

/* The rows of the group that starts at solved row i: its name's and its
 * configurations'. */
static double group_height(const tf_study_result *r, int i)
{
    double h = GROUP_H;
    for (int j = i; j < r->n_rows; j++)
        if (solved(r, j)) {
            if (j > i && starts_group(r, j))
                break;
            h += ROW_H;
        }
    return h;
}

/* Each schedule group: with names 0, a band behind every other group (drawn
 * first, under the gridlines); with names 1, the group's name. */
static void draw_groups(tf_canvas *k, const tf_study_result *r, const chart *c, int names)
{
    double top = c->rows_top;
    for (int i = 0, group = 0; i < r->n_rows; i++) {
        if (!solved(r, i) || !starts_group(r, i))
            continue;
        double h = group_height(r, i);
        if (!names && group % 2)
            tf_canvas_rect(k, MARGIN, top, c->width - MARGIN, top + h, "#f4f4f4");
        if (names) {
            const tf_canvas_text_style name = {GROUP_NAME_SIZE, 'l', group_colour(group), 1};
            tf_canvas_text(k, MARGIN, top + GROUP_H / 2.0 + 1, r->rows[i].config.schedule,
                           &name);
        }
        top += h;
        group++;
    }
}

/* Solved row i: its label and bars, each bar with the configuration's
 * figures as its tooltip. */
static void draw_row(tf_canvas *k, const tf_study_result *r, const chart *c, int i, int group,
                     double top)
{
    const tf_study_row *w = &r->rows[i];
    const tf_study_config *g = &w->config;
    const char *colour = w->fits == 0 ? NOT_FIT : group_colour(group);
    const double mid = top + ROW_H / 2.0, bar_top = mid - BAR_H / 2.0, bar_bottom = mid + BAR_H / 2.0;
    const double unfrozen = w->tokens_per_s_unfrozen / g->ranks;
    const double planned = w->tokens_per_s_planned / g->ranks;
    char label[96], tip[480], shade[8];
    config_label(r, g, label, sizeof label);
    tf_canvas_text(k, c->a0 - 6, mid, label, &ROW_LABEL);
    snprintf(tip, sizeof tip,
             "%s, %d %s x %d %s, %d %s, cap %g, p2p %g ms: "
             "%.0f \xe2\x86\x92 %.0f tokens/s per GPU, speedup %.3fx, mean freeze %.2f",
             g->schedule, g->ranks, tf_plural(g->ranks, "rank", "ranks"), g->stages_per_rank,
             tf_plural(g->stages_per_rank, "stage", "stages"), g->microbatches,
             tf_plural(g->microbatches, "microbatch", "microbatches"), g->max_freeze_ratio,
             g->p2p_ms, unfrozen, planned, w->speedup, w->mean_freeze_ratio);
    if (r->has_memory) {
        size_t used = strlen(tip);
        snprintf(tip + used, sizeof tip - used, "; recompute %s%s, peak %.2f GiB%s",
                 tf_recompute_name((tf_recompute)g->recompute),
                 g->sequence_parallel ? ", sequence parallel" : "", w->peak_memory_bytes / GiB,
                 w->fits < 0 ? "" : w->fits ? " (fits)" : " (does not fit)");
    }
    double xu = round(x_tps(c, unfrozen)), xp = round(x_tps(c, fmax(planned, unfrozen)));
    tf_canvas_mark *bars[3] = {
        tf_canvas_rect(k, c->a0, bar_top, xu, bar_bottom, colour),
        xp > xu ? tf_canvas_rect(k, xu, bar_top, xp, bar_bottom, pale(colour, shade)) : NULL,
        tf_canvas_rect(k, c->b0, bar_top, round(x_speedup(c, w->speedup)), bar_bottom, colour)};
    for (int b = 0; b < 3; b++)
        tf_canvas_set(bars[b], "tooltip", tip);
    char value[64];
    snprintf(value, sizeof value, "%.2f\xc3\x97%s", w->speedup, i == c->best ? "  " : "");
    if (i == c->best)
        snprintf(value + strlen(value), sizeof value - strlen(value), "%s", best_note);
    tf_canvas_text(k, round(x_speedup(c, w->speedup)) + 4, mid, value, &SPEEDUP_VALUE);
    if (r->has_memory)
        tf_canvas_set(tf_canvas_rect(k, c->c0, bar_top, round(x_gib(c, w->peak_memory_bytes / GiB)),
                                     bar_bottom, w->fits == 0 ? OVER : group_colour(group)),
                      "tooltip", tip);
}

/* Every configuration's row, top down, under its group's name. */
static void draw_rows(tf_canvas *k, const tf_study_result *r, const chart *c)
{
    double y = c->rows_top;
    for (int i = 0, group = -1; i < r->n_rows; i++) {
        if (!solved(r, i))
            continue;
        if (starts_group(r, i)) {
            group++;
            y += GROUP_H;
        }
        draw_row(k, r, c, i, group, y);
        y += ROW_H;
    }
}

const char *tf_study_plot_format(const char *path)
{
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    const char *dot = strrchr(name, '.');
    if (!dot)
        return "svg"; /* /dev/null, a pipe: the text format */
    const char *format = tf_canvas_format_for_path(name);
    return format && strcmp(format, "dot") != 0 ? format : NULL;
}

int tf_study_plot(const tf_study_result *r, const char *format, char **data, size_t *len,
                  tf_error *err)
{
    *data = NULL;
    *len = 0;
    if (!r->solved)
        return tf_fail(err, TF_EINVAL, "no configuration was solved, nothing to plot");
    chart c;
    lay_out(r, &c);
    tf_canvas *k = tf_canvas_new("tf-study");
    if (!k)
        return tf_fail(err, TF_ENOMEM, "out of memory drawing the plot");
    /* Bands first, then the gridlines over them, then the bars on top. */
    draw_groups(k, r, &c, 0);
    draw_head(k, r, &c);
    draw_axis(k, &c, c.a0, PANEL_A, 0.0, c.top_a, c.step_a, "");
    draw_axis(k, &c, c.b0, PANEL_B, 1.0, c.top_b, c.step_b, "\xc3\x97");
    if (r->has_memory)
        draw_axis(k, &c, c.c0, PANEL_C, 0.0, c.top_c, c.step_c, "");
    draw_groups(k, r, &c, 1);
    draw_rows(k, r, &c);
    draw_limit(k, r, &c);
    /* The corners keep the margins inside Graphviz's bounding box. */
    tf_canvas_rect(k, 0, 0, 1, 1, "#ffffff");
    tf_canvas_rect(k, c.width - 1, c.rows_bottom + AXIS_H + MARGIN - 1, c.width,
                   c.rows_bottom + AXIS_H + MARGIN, "#ffffff");
    int rc = tf_canvas_render(k, format, 96.0, data, len, err);
    tf_canvas_free(k);
    return rc;
}
