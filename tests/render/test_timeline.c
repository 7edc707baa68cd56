/* test_timeline.c - the timeline renderer (tf/timeline.h) checked against the
 * numbers of the plans it draws.
 *
 * SVG output is read back with plain string scanning (Graphviz's SVG layout
 * is regular: one <g id=... class="node ..."> group per node with its
 * <polygon> and <text>) and every action's box is compared with the plan:
 * x = x(0) + start x scale and width = duration x scale within a point, where
 * x(0) and the scale come from the drawn axis ticks themselves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tf/dag.h"
#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/profile.h"
#include "tf/timeline.h"
#include "tf/util.h"

/* ---- plans under test ---------------------------------------------------- */

/* 1F1B, 4 ranks, 8 microbatches, uneven stages: the LP freezes some B. */
static const char *profile_1f1b =
    "{\"format\":\"tf-profile\",\"version\":1,\"schedule\":\"1F1B\",\"ranks\":4,"
    "\"stages_per_rank\":1,\"microbatches\":8,\"microbatch_tokens\":8192,\"p2p_ms\":0.0,"
    "\"max_freeze_ratio\":0.8,\"stages\":["
    "{\"forward_ms\":15.5,\"backward_ms\":45.9,\"backward_frozen_ms\":24.1},"
    "{\"forward_ms\":14.0,\"backward_ms\":41.0,\"backward_frozen_ms\":20.0},"
    "{\"forward_ms\":15.5,\"backward_ms\":45.9,\"backward_frozen_ms\":24.1},"
    "{\"forward_ms\":20.5,\"backward_ms\":55.9,\"backward_frozen_ms\":30.1}]}";

/* ZBVZeroBubble: two stages per rank (V shape), split backward (I and W),
 * and a p2p lag, so cross-rank edges carry time. */
static const char *profile_zbv =
    "{\"format\":\"tf-profile\",\"version\":1,\"schedule\":\"ZBVZeroBubble\",\"ranks\":2,"
    "\"stages_per_rank\":2,\"microbatches\":4,\"p2p_ms\":0.5,\"max_freeze_ratio\":0.6,"
    "\"stages\":["
    "{\"forward_ms\":7,\"backward_ms\":21,\"backward_frozen_ms\":10,\"backward_input_ms\":9,"
    "\"backward_weight_ms\":12,\"backward_weight_frozen_ms\":0.2},"
    "{\"forward_ms\":8,\"backward_ms\":22,\"backward_frozen_ms\":11,\"backward_input_ms\":10,"
    "\"backward_weight_ms\":12,\"backward_weight_frozen_ms\":0.2},"
    "{\"forward_ms\":8,\"backward_ms\":22,\"backward_frozen_ms\":11,\"backward_input_ms\":10,"
    "\"backward_weight_ms\":12,\"backward_weight_frozen_ms\":0.2},"
    "{\"forward_ms\":9,\"backward_ms\":25,\"backward_frozen_ms\":12,\"backward_input_ms\":11,"
    "\"backward_weight_ms\":14,\"backward_weight_frozen_ms\":0.2}]}";

/* DualPipeV, 2 ranks x 2 stages (V shape), 5 microbatches: overlapped
 * pairs, stages mixing B with I + W, and a p2p lag. */
static const char *profile_dualpipev =
    "{\"format\":\"tf-profile\",\"version\":1,\"schedule\":\"DualPipeV\",\"ranks\":2,"
    "\"microbatches\":5,\"p2p_ms\":0.3,\"max_freeze_ratio\":0.7,\"stages\":["
    "{\"forward_ms\":6,\"backward_ms\":12,\"backward_input_ms\":6,\"backward_weight_ms\":6},"
    "{\"forward_ms\":7,\"backward_ms\":13,\"backward_input_ms\":6,\"backward_weight_ms\":7},"
    "{\"forward_ms\":7,\"backward_ms\":13,\"backward_input_ms\":6,\"backward_weight_ms\":7},"
    "{\"forward_ms\":8,\"backward_ms\":16,\"backward_input_ms\":7,\"backward_weight_ms\":9}]}";

/* 1F1B with memory: 4 ranks, 8 microbatches, 1 GB of activations per
 * forward (0.6 GB frozen, 0.1 GB checkpointed), and a limit of static +
 * 3.2 GB that rank 0's four forwards in flight (static + 4 GB unfrozen)
 * must be brought under by freezing and recomputation (R actions). */
static const char *profile_memory =
    "{\"format\":\"tf-profile\",\"version\":1,\"schedule\":\"1F1B\",\"ranks\":4,"
    "\"microbatches\":8,\"max_freeze_ratio\":0.8,\"memory_limit_bytes\":5.2e9,\"stages\":["
    "{\"forward_ms\":15,\"backward_ms\":45,\"backward_frozen_ms\":24,\"static_bytes\":2e9,"
    "\"activation_bytes\":1e9,\"activation_frozen_bytes\":6e8,\"checkpoint_bytes\":1e8,"
    "\"recompute_ms\":15},"
    "{\"forward_ms\":14,\"backward_ms\":41,\"backward_frozen_ms\":20,\"static_bytes\":2e9,"
    "\"activation_bytes\":1e9,\"activation_frozen_bytes\":6e8,\"checkpoint_bytes\":1e8,"
    "\"recompute_ms\":14},"
    "{\"forward_ms\":15,\"backward_ms\":45,\"backward_frozen_ms\":24,\"static_bytes\":2e9,"
    "\"activation_bytes\":1e9,\"activation_frozen_bytes\":6e8,\"checkpoint_bytes\":1e8,"
    "\"recompute_ms\":15},"
    "{\"forward_ms\":20,\"backward_ms\":55,\"backward_frozen_ms\":30,\"static_bytes\":2e9,"
    "\"activation_bytes\":1e9,\"activation_frozen_bytes\":6e8,\"checkpoint_bytes\":1e8,"
    "\"recompute_ms\":20}]}";

static void make_plan(const char *profile_json, int solve, tf_plan *plan)
{
    tf_error err = {0};
    tf_profile profile;
    int rc = tf_profile_parse(profile_json, "test profile", &profile, &err);
    if (rc)
        fail_msg("profile: %s", err.msg);
    rc = solve ? tf_plan_from_profile(&profile, NULL, plan, &err)
               : tf_plan_unfrozen(&profile, plan, &err);
    tf_profile_free(&profile);
    if (rc)
        fail_msg("plan: %s", err.msg);
}

static char *render(const tf_plan *plan, const tf_timeline_options *opt, const char *format,
                    size_t *len)
{
    char *data = NULL;
    size_t n = 0;
    tf_error err = {0};
    int rc = tf_timeline_render_data(plan, opt, format, &data, &n, &err);
    if (rc)
        fail_msg("render %s: %s", format, err.msg);
    assert_non_null(data);
    assert_true(n > 0);
    if (len)
        *len = n;
    return data;
}

/* ---- reading the SVG ------------------------------------------------------ */

typedef struct box {
    int found;
    double x0, x1, y0, y1;
    unsigned fill; /* 0xrrggbb */
    char cls[128];
    char label[32];
    char tooltip[512];
} box;

/* The text of one node group: from its <g id="..."> to the next node. */
static const char *node_group(const char *svg, const char *id, const char **end)
{
    char key[96];
    snprintf(key, sizeof key, "<g id=\"%s\" class=\"", id);
    const char *start = strstr(svg, key);
    *end = NULL;
    if (!start)
        return NULL;
    const char *next = strstr(start + 1, "<!-- ");
    *end = next ? next : start + strlen(start);
    return start;
}

/* Value of attr="..." inside [from, end), copied into out[size]. */
static int attr_in(const char *from, const char *end, const char *attr, char *out, size_t size)
{
    char key[64];
    snprintf(key, sizeof key, " %s=\"", attr);
    const char *p = strstr(from, key);
    if (!p || p >= end)
        return 0;
    p += strlen(key);
    const char *q = strchr(p, '"');
    if (!q || q >= end || (size_t)(q - p) >= size)
        return 0;
    memcpy(out, p, (size_t)(q - p));
    out[q - p] = '\0';
    return 1;
}

/* Widens b's corners to the polygon's points ("x,y x,y ..."). */
static void add_points(box *b, const char *points)
{
    b->x0 = b->y0 = HUGE_VAL;
    b->x1 = b->y1 = -HUGE_VAL;
    for (char *p = (char *)points; *p;) {
        char *next;
        double x = strtod(p, &next);
        if (next == p || *next != ',')
            break;
        double y = strtod(next + 1, &p);
        b->x0 = fmin(b->x0, x);
        b->x1 = fmax(b->x1, x);
        b->y0 = fmin(b->y0, y);
        b->y1 = fmax(b->y1, y);
        while (*p == ' ')
            p++;
    }
}

static box find_box(const char *svg, const char *id)
{
    box b = {0};
    const char *end, *g = node_group(svg, id, &end);
    if (!g)
        return b;
    char points[512], fill[16];
    const char *polygon = strstr(g, "<polygon");
    if (!attr_in(g, end, "class", b.cls, sizeof b.cls) || !polygon || polygon >= end ||
        !attr_in(polygon, end, "points", points, sizeof points) ||
        !attr_in(polygon, end, "fill", fill, sizeof fill) || fill[0] != '#')
        return b;
    b.fill = (unsigned)strtoul(fill + 1, NULL, 16);
    add_points(&b, points);
    attr_in(g, end, "xlink:title", b.tooltip, sizeof b.tooltip);
    const char *text = strstr(polygon, "<text");
    if (text && text < end) {
        const char *open = strchr(text, '>'), *close = strstr(text, "</text>");
        if (open && close && close > open && (size_t)(close - open - 1) < sizeof b.label) {
            memcpy(b.label, open + 1, (size_t)(close - open - 1));
            b.label[close - open - 1] = '\0';
        }
    }
    b.found = 1;
    return b;
}

/* The drawn axis: x of time 0 and points per ms, from the tick labels
 * (id="tick_k", centred on their tick, text = time in ms). */
static void read_axis(const char *svg, double *x_zero, double *scale)
{
    double first_x = 0, first_ms = 0, last_x = 0, last_ms = 0;
    int ticks = 0;
    for (int k = 0;; k++) {
        char id[32], x_text[32];
        snprintf(id, sizeof id, "tick_%d", k);
        const char *end, *g = node_group(svg, id, &end);
        if (!g)
            break;
        const char *text = strstr(g, "<text");
        assert_non_null(text);
        assert_true(text < end);
        assert_true(attr_in(text, end, "x", x_text, sizeof x_text));
        assert_non_null(strstr(text, "text-anchor=\"middle\""));
        double ms = strtod(strchr(text, '>') + 1, NULL);
        double x = strtod(x_text, NULL);
        if (ticks == 0) {
            first_x = x;
            first_ms = ms;
        }
        last_x = x;
        last_ms = ms;
        ticks++;
    }
    assert_true(ticks >= 3);
    assert_true(last_ms > first_ms);
    *scale = (last_x - first_x) / (last_ms - first_ms);
    *x_zero = first_x - first_ms * *scale;
}

static int count(const char *haystack, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The documented fill (timeline.h): type colour, darkened by 22% x local
 * stage / (stages_per_rank - 1), then mixed with white by 0.75 x ratio. */
static unsigned expected_fill(const tf_plan *plan, int i, double ratio)
{
    static const unsigned base[4] = {0x4e79a7, 0xe15759, 0xf28e2b, 0x59a14f};
    const tf_schedule *s = &plan->schedule;
    const tf_action *a = &s->actions[i];
    int local = 0;
    for (int st = 0; st < a->stage; st++)
        local += s->stage_rank[st] == a->rank;
    double dark = s->stages_per_rank > 1 ? 0.22 * local / (s->stages_per_rank - 1) : 0.0;
    unsigned out = 0;
    for (int shift = 16; shift >= 0; shift -= 8) {
        double c = (base[a->type] >> shift) & 0xff;
        c = c * (1 - dark);
        c = c + (255 - c) * 0.75 * ratio;
        out |= (unsigned)lround(c) << shift;
    }
    return out;
}

static int fill_close(unsigned a, unsigned b)
{
    for (int shift = 16; shift >= 0; shift -= 8)
        if (abs((int)((a >> shift) & 0xff) - (int)((b >> shift) & 0xff)) > 1)
            return 0;
    return 1;
}

/* Every action of one panel: one labelled box, at start x scale, as wide as
 * its duration, in its rank's row, coloured by type and freeze ratio,
 * outlined when critical; a rank's boxes never overlap. */
static void check_panel(const char *svg, const tf_plan *plan, const char *prefix,
                        const double *start, const double *ms, const double *ratio,
                        const unsigned char *critical)
{
    const tf_schedule *s = &plan->schedule;
    double x_zero, scale;
    read_axis(svg, &x_zero, &scale);
    double row_y0 = 0, row_y1 = 0, previous_row_y1 = -HUGE_VAL;
    for (int r = 0; r < s->ranks; r++) {
        double previous_x1 = -HUGE_VAL;
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++) {
            const tf_action *a = &s->actions[i];
            char cell[32], id[48], label[32], want_class[64];
            tf_action_format(a, cell);
            snprintf(id, sizeof id, "%s_%s", prefix, cell);
            box b = find_box(svg, id);
            if (!b.found)
                fail_msg("no box with id %s", id);
            double want_x0 = x_zero + start[i] * scale, want_w = ms[i] * scale;
            if (fabs(b.x0 - want_x0) > 1.0 || fabs((b.x1 - b.x0) - want_w) > 1.0)
                fail_msg("%s: box x %.2f..%.2f, want %.2f..%.2f (start %g ms, %g ms, scale %g)",
                         id, b.x0, b.x1, want_x0, want_x0 + want_w, start[i], ms[i], scale);
            /* Labelled "F3", or as PyTorch names the action ("2F3") where a
             * rank runs several stages (a box too narrow for that shows
             * "F3"); a box too narrow for "F3" shows "3" (its colour tells
             * the type), one narrower than a digit no text; every box
             * names its action in its tooltip. */
            snprintf(label, sizeof label, "%c%d", tf_action_letter(a->type), a->microbatch);
            int several = s->stages_per_rank > 1;
            double w = b.x1 - b.x0;
            if (strcmp(b.label, several ? cell : label) != 0 &&
                !(several && w < 30 && strcmp(b.label, label) == 0) &&
                !(w < 24 && atoi(b.label) == a->microbatch && b.label[0] >= '0' &&
                  b.label[0] <= '9') &&
                !(w < 12 && b.label[0] == '\0'))
                fail_msg("%s: label \"%s\" in a box %.1f points wide, want \"%s\"", id, b.label, w,
                         several ? cell : label);
            if (strncmp(b.tooltip, cell, strlen(cell)) != 0 || b.tooltip[strlen(cell)] != ' ')
                fail_msg("%s: tooltip \"%s\" does not name %s", id, b.tooltip, cell);
            snprintf(want_class, sizeof want_class, "node action %c%s%s",
                     tf_action_letter(a->type), critical[i] ? " critical" : "",
                     a->pair ? " pair" : "");
            assert_string_equal(b.cls, want_class);
            if (!fill_close(b.fill, expected_fill(plan, i, ratio[i])))
                fail_msg("%s: fill #%06x, want #%06x for freeze ratio %g", id, b.fill,
                         expected_fill(plan, i, ratio[i]), ratio[i]);
            /* One row per rank, ranks top to bottom. */
            if (i == s->rank_offset[r]) {
                row_y0 = b.y0;
                row_y1 = b.y1;
                assert_true(row_y0 >= previous_row_y1);
            }
            assert_true(fabs(b.y0 - row_y0) < 0.01 && fabs(b.y1 - row_y1) < 0.01);
            /* Execution order is time order: each box starts after the last ends. */
            if (b.x0 < previous_x1 - 0.01)
                fail_msg("%s overlaps the previous box of rank %d: starts at %.2f, previous "
                         "ends at %.2f",
                         id, r, b.x0, previous_x1);
            previous_x1 = b.x1;
        }
        previous_row_y1 = row_y1;
    }
}

static void check_planned_panel(const char *svg, const tf_plan *plan)
{
    int n = plan->schedule.n_actions;
    double *start = malloc(sizeof *start * (size_t)n), *ms = malloc(sizeof *ms * (size_t)n);
    double *ratio = malloc(sizeof *ratio * (size_t)n);
    unsigned char *critical = malloc((size_t)n);
    for (int i = 0; i < n; i++) {
        start[i] = plan->actions[i].start_ms;
        ms[i] = plan->actions[i].ms;
        ratio[i] = plan->actions[i].freeze_ratio;
        critical[i] = (unsigned char)plan->actions[i].critical;
    }
    check_panel(svg, plan, "p", start, ms, ratio, critical);
    free(start);
    free(ms);
    free(ratio);
    free(critical);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_svg_geometry_1f1b(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_1f1b, 1, &plan);
    int frozen = 0;
    for (int i = 0; i < plan.schedule.n_actions; i++)
        frozen += plan.actions[i].freeze_ratio > 0.01;
    assert_true(frozen > 0); /* the test must see shading */
    char *svg = render(&plan, NULL, "svg", NULL);
    assert_int_equal(count(svg, "class=\"node action "), plan.schedule.n_actions);
    check_planned_panel(svg, &plan);
    /* The title states the figures. */
    char batch[64];
    snprintf(batch, sizeof batch, "batch %.1f ms", plan.batch_ms_planned);
    assert_non_null(strstr(svg, batch));
    assert_non_null(strstr(svg, "1F1B"));
    assert_non_null(strstr(svg, "speedup"));
    free(svg);
    tf_plan_free(&plan);
}

static void test_svg_geometry_zero_bubble(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_zbv, 1, &plan);
    char *svg = render(&plan, NULL, "svg", NULL);
    assert_int_equal(count(svg, "class=\"node action "), plan.schedule.n_actions);
    check_planned_panel(svg, &plan);
    free(svg);
    tf_plan_free(&plan);
}

/* An explicit width changes the scale, not the truth of the geometry. */
static void test_svg_geometry_width(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_1f1b, 1, &plan);
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    opt.width = 2400;
    char *svg = render(&plan, &opt, "svg", NULL);
    assert_non_null(strstr(svg, "<svg width=\"2400pt\""));
    check_planned_panel(svg, &plan);
    free(svg);
    tf_plan_free(&plan);
}

/* A fully frozen W runs for a sixtieth of its unfrozen time.  Its box, a
 * point or two wide, vanished under the outlines, and a little wider it
 * showed a lone digit in near-white.  Every box narrower than 4 points gets
 * a marker at least 2 points wide, centred on it and taller than the boxes;
 * a W box shows "W3" (or "2W3") or nothing. */
static void check_narrow_boxes(const char *svg, const tf_plan *plan, int *narrow)
{
    *narrow = 0;
    for (int i = 0; i < plan->schedule.n_actions; i++) {
        const tf_action *a = &plan->actions[i].action;
        char cell[32], id[48], marker_id[64];
        snprintf(id, sizeof id, "p_%s", tf_action_format(a, cell));
        snprintf(marker_id, sizeof marker_id, "p_%s_marker", cell);
        box b = find_box(svg, id), marker = find_box(svg, marker_id);
        assert_true(b.found);
        if (a->type == TF_ACT_W && b.label[0] && !strchr(b.label, 'W'))
            fail_msg("%s: label \"%s\" in a box %.1f points wide, want %s, W%d or none", id,
                     b.label, b.x1 - b.x0, cell, a->microbatch);
        if (b.x1 - b.x0 >= 4) {
            if (marker.found)
                fail_msg("%s: a marker on a box %.1f points wide", id, b.x1 - b.x0);
            continue;
        }
        ++*narrow;
        if (!marker.found)
            fail_msg("%s: a box %.1f points wide and no marker", id, b.x1 - b.x0);
        assert_string_equal(marker.cls, "node marker");
        assert_true(marker.x1 - marker.x0 >= 2 - 0.01);
        assert_true(fabs((marker.x0 + marker.x1) - (b.x0 + b.x1)) <= 2.0);
        assert_true(marker.y0 < b.y0 && marker.y1 > b.y1);
        assert_true(strncmp(marker.tooltip, cell, strlen(cell)) == 0);
    }
    assert_int_equal(count(svg, "class=\"node marker\""), *narrow);
}

static void test_frozen_w_visible(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_zbv, 1, &plan);
    int frozen = 0;
    for (int i = 0; i < plan.schedule.n_actions; i++)
        frozen += plan.actions[i].action.type == TF_ACT_W &&
                  plan.actions[i].freeze_ratio >= 1 - 1e-9;
    assert_true(frozen > 0); /* the test must see fully frozen W */
    char *svg = render(&plan, NULL, "svg", NULL);
    int narrow;
    check_narrow_boxes(svg, &plan, &narrow);
    assert_true(narrow >= frozen);
    free(svg);
    /* 50 points per ms: a frozen W (0.2 ms) is 10 points, room for a lone
     * digit but not for "W3". */
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    opt.width = 164 + ceil(50 * plan.batch_ms_planned);
    svg = render(&plan, &opt, "svg", NULL);
    check_narrow_boxes(svg, &plan, &narrow);
    check_planned_panel(svg, &plan);
    free(svg);
    tf_plan_free(&plan);
}

/* Dense rows (under TF_TIMELINE_DENSE_POINTS of axis per action): no text,
 * no markers, no outlines; a PNG of them gets a note naming the formats
 * for that size, an SVG a note without the PNG's advice, and a roomy PNG
 * none. */
static void test_dense_rows(void **state)
{
    (void)state;
    const char *profile =
        "{\"schedule\":\"1F1B\",\"ranks\":4,\"microbatches\":64,\"stages\":["
        "{\"forward_ms\":15,\"backward_ms\":45,\"backward_frozen_ms\":24},"
        "{\"forward_ms\":14,\"backward_ms\":41,\"backward_frozen_ms\":20},"
        "{\"forward_ms\":15,\"backward_ms\":45,\"backward_frozen_ms\":24},"
        "{\"forward_ms\":20,\"backward_ms\":55,\"backward_frozen_ms\":30}]}";
    tf_plan plan;
    make_plan(profile, 0, &plan);
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    opt.width = 600; /* 436 points of axis for 128 actions a rank: 3.4 each */
    char note[512];
    assert_int_equal(tf_timeline_density_note(&plan, &opt, "png", note, sizeof note), 1);
    assert_non_null(strstr(note, "512 actions, 128 on the busiest rank"));
    assert_non_null(strstr(note, "SVG"));
    assert_non_null(strstr(note, "-T chrome"));
    assert_int_equal(tf_timeline_density_note(&plan, &opt, "svg", note, sizeof note), 1);
    assert_non_null(strstr(note, "too dense to draw one by one"));
    assert_null(strstr(note, "PNG"));
    assert_int_equal(tf_timeline_density_note(&plan, &opt, "chrome", note, sizeof note), 0);
    assert_string_equal(note, "");
    char *svg = render(&plan, &opt, "svg", NULL);
    assert_int_equal(count(svg, "class=\"node action "), plan.schedule.n_actions);
    assert_int_equal(count(svg, "class=\"node marker\""), 0);
    for (int i = 0; i < plan.schedule.n_actions; i++) {
        char cell[32], id[48];
        snprintf(id, sizeof id, "p_%s", tf_action_format(&plan.actions[i].action, cell));
        const char *end, *g = node_group(svg, id, &end);
        assert_non_null(g);
        const char *text = strstr(g, "<text");
        if (text && text < end)
            fail_msg("%s: a label in a dense row", id);
        const char *pen = strstr(g, "stroke-width=\"");
        assert_true(pen && pen < end && strtod(pen + 14, NULL) == 0.0);
    }
    free(svg);
    /* The automatic width gives 1F1B's 128 actions a rank room enough. */
    assert_int_equal(tf_timeline_density_note(&plan, NULL, "png", note, sizeof note), 0);
    tf_plan_free(&plan);
}

/* 1F1B on 2 ranks, 8 microbatches, F 3 ms and B 10 ms, at a width that
 * gives 4/3 points a millisecond: each F box is about 4 points, too narrow
 * even for "3" at 6 points (6.8 with its margin), each B box about 13,
 * room for "B3" (11.3): 16 of the 32 boxes are unlabelled, and the note
 * says so.  At the width it suggests every box has its label and there is
 * no note. */
static void test_too_narrow_to_label(void **state)
{
    (void)state;
    const char *profile =
        "{\"schedule\":\"1F1B\",\"ranks\":2,\"microbatches\":8,\"stages\":["
        "{\"forward_ms\":3,\"backward_ms\":10},{\"forward_ms\":3,\"backward_ms\":10}]}";
    tf_plan plan;
    make_plan(profile, 0, &plan);
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    const double chrome = 164; /* rank names, idle shares, margins (tf-dot.md) */
    opt.width = chrome + floor(plan.batch_ms_planned * 4.0 / 3.0);
    char note[512];
    assert_int_equal(tf_timeline_density_note(&plan, &opt, "svg", note, sizeof note), 1);
    assert_non_null(strstr(note, "16 of the 32 boxes are too narrow for their labels"));
    assert_non_null(strstr(note, "fewer microbatches"));
    assert_non_null(strstr(note, "-T chrome"));
    const char *at = strstr(note, "--width ");
    assert_non_null(at);
    opt.width = strtod(at + 8, NULL);
    assert_true(opt.width > chrome + plan.batch_ms_planned * 4.0 / 3.0);
    assert_int_equal(tf_timeline_density_note(&plan, &opt, "svg", note, sizeof note), 0);
    char *svg = render(&plan, &opt, "svg", NULL);
    for (int i = 0; i < plan.schedule.n_actions; i++) {
        char cell[32], id[48];
        snprintf(id, sizeof id, "p_%s", tf_action_format(&plan.actions[i].action, cell));
        const char *end, *g = node_group(svg, id, &end);
        const char *text = g ? strstr(g, "<text") : NULL;
        if (!text || text > end)
            fail_msg("%s: no label at --width %g", id, opt.width);
    }
    free(svg);
    tf_plan_free(&plan);
}

/* Paler means more frozen: among B boxes, lightness rises with the ratio. */
static void test_shading_follows_ratio(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_1f1b, 1, &plan);
    char *svg = render(&plan, NULL, "svg", NULL);
    double lo_ratio = 2, hi_ratio = -1, lo_light = 0, hi_light = 0;
    for (int i = 0; i < plan.schedule.n_actions; i++) {
        const tf_plan_action *a = &plan.actions[i];
        if (a->action.type != TF_ACT_B || a->action.stage != 3)
            continue;
        char cell[32], id[48];
        snprintf(id, sizeof id, "p_%s", tf_action_format(&a->action, cell));
        box b = find_box(svg, id);
        assert_true(b.found);
        double light = ((b.fill >> 16) & 0xff) + ((b.fill >> 8) & 0xff) + (b.fill & 0xff);
        if (a->freeze_ratio < lo_ratio) {
            lo_ratio = a->freeze_ratio;
            lo_light = light;
        }
        if (a->freeze_ratio > hi_ratio) {
            hi_ratio = a->freeze_ratio;
            hi_light = light;
        }
    }
    assert_true(hi_ratio > lo_ratio + 0.1);
    assert_true(hi_light > lo_light);
    free(svg);
    tf_plan_free(&plan);
}

/* --compare unfrozen: both timelines on one axis; the unfrozen one is the
 * profile's unfrozen plan, computed independently by tf_plan_unfrozen. */
static void test_compare_unfrozen(void **state)
{
    (void)state;
    tf_plan plan, unfrozen;
    make_plan(profile_1f1b, 1, &plan);
    make_plan(profile_1f1b, 0, &unfrozen);
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    opt.compare_unfrozen = 1;
    char *svg = render(&plan, &opt, "svg", NULL);
    int n = plan.schedule.n_actions;
    assert_int_equal(count(svg, "class=\"node action "), 2 * n);
    check_planned_panel(svg, &plan);
    double *start = malloc(sizeof *start * (size_t)n), *ms = malloc(sizeof *ms * (size_t)n);
    double *ratio = calloc((size_t)n, sizeof *ratio);
    unsigned char *critical = malloc((size_t)n);
    for (int i = 0; i < n; i++) {
        start[i] = unfrozen.actions[i].start_ms;
        ms[i] = unfrozen.actions[i].ms;
        critical[i] = (unsigned char)unfrozen.actions[i].critical;
    }
    check_panel(svg, &plan, "u", start, ms, ratio, critical);
    /* The unfrozen panel is drawn above the planned one. */
    box u = find_box(svg, "u_0F0"), p = find_box(svg, "p_0F0");
    assert_true(u.y1 < p.y0);
    /* The saved time is marked. */
    assert_non_null(strstr(svg, "id=\"saved\""));
    free(start);
    free(ms);
    free(ratio);
    free(critical);
    free(svg);
    tf_plan_free(&plan);
    tf_plan_free(&unfrozen);
}

static void test_binary_formats(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_zbv, 1, &plan);
    size_t len;
    char *png = render(&plan, NULL, "png", &len);
    assert_true(len > 8 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8));
    free(png);
    char *pdf = render(&plan, NULL, "pdf", &len);
    assert_true(len > 5 && !memcmp(pdf, "%PDF-", 5));
    free(pdf);
    char *dot = render(&plan, NULL, "dot", &len);
    assert_true(!strncmp(dot, "digraph", 7));
    assert_non_null(strstr(dot, "pos=")); /* positions travel with the DOT */
    free(dot);
    char *svg = render(&plan, NULL, "svg", &len);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "</svg>"));
    free(svg);
    tf_plan_free(&plan);
}

/* Higher dpi: more PNG pixels for the same picture. */
static void test_png_dpi(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_1f1b, 1, &plan);
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    opt.width = 900;
    size_t len;
    unsigned widths[2];
    for (int k = 0; k < 2; k++) {
        opt.dpi = k ? 144 : 72;
        unsigned char *png = (unsigned char *)render(&plan, &opt, "png", &len);
        assert_true(len > 24);
        widths[k] = (unsigned)png[16] << 24 | (unsigned)png[17] << 16 | (unsigned)png[18] << 8 |
                    png[19];
        free(png);
    }
    assert_true(widths[0] >= 899 && widths[0] <= 901);
    assert_true(widths[1] >= 2 * widths[0] - 2 && widths[1] <= 2 * widths[0] + 2);
    tf_plan_free(&plan);
}

static void test_chrome_trace(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_zbv, 1, &plan);
    size_t len;
    char *json = render(&plan, NULL, "chrome", &len);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    assert_true(cJSON_IsArray(events));
    int n = plan.schedule.n_actions, complete = 0;
    int *seen = calloc((size_t)n, sizeof *seen);
    const cJSON *ev;
    cJSON_ArrayForEach(ev, events)
    {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");
        assert_true(cJSON_IsString(ph));
        if (strcmp(ph->valuestring, "X") != 0)
            continue;
        complete++;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
        const cJSON *cell = cJSON_GetObjectItemCaseSensitive(args, "action");
        assert_true(cJSON_IsString(cell));
        tf_action a;
        assert_int_equal(tf_action_parse(cell->valuestring, &a, NULL), 0);
        int i = tf_schedule_find(&plan.schedule, a.type, a.stage, a.microbatch);
        assert_true(i >= 0);
        seen[i]++;
        const tf_plan_action *pa = &plan.actions[i];
        double ts = cJSON_GetObjectItemCaseSensitive(ev, "ts")->valuedouble;
        double dur = cJSON_GetObjectItemCaseSensitive(ev, "dur")->valuedouble;
        double ratio = cJSON_GetObjectItemCaseSensitive(args, "freeze_ratio")->valuedouble;
        int pid = cJSON_GetObjectItemCaseSensitive(ev, "pid")->valueint;
        assert_true(fabs(ts - pa->start_ms * 1000) <= 1e-6 * fmax(1, ts));
        assert_true(fabs(dur - pa->ms * 1000) <= 1e-6 * fmax(1, dur));
        assert_true(fabs(ratio - pa->freeze_ratio) <= 1e-9);
        assert_int_equal(pid, pa->action.rank); /* one process per rank */
    }
    assert_int_equal(complete, n);
    for (int i = 0; i < n; i++)
        assert_int_equal(seen[i], 1);
    free(seen);
    cJSON_Delete(root);
    free(json);
    tf_plan_free(&plan);
}

/* On ranks with several stages the boxes name the stage as PyTorch names
 * actions: wide enough, every box reads "2F3", "3I1", "0W2". */
static void test_labels_name_the_stage(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_zbv, 1, &plan);
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    opt.width = 164 + ceil(100 * plan.batch_ms_planned);
    char *svg = render(&plan, &opt, "svg", NULL);
    for (int i = 0; i < plan.schedule.n_actions; i++) {
        char cell[32], id[48];
        tf_action_format(&plan.actions[i].action, cell);
        snprintf(id, sizeof id, "p_%s", cell);
        box b = find_box(svg, id);
        assert_true(b.found);
        if (b.x1 - b.x0 >= 30 && strcmp(b.label, cell) != 0)
            fail_msg("%s: label \"%s\" in a box %.1f points wide, want \"%s\"", id, b.label,
                     b.x1 - b.x0, cell);
    }
    check_planned_panel(svg, &plan);
    free(svg);
    tf_plan_free(&plan);
}

/* The frame's corners of node `id` (a polygon without a fill), or found 0. */
static box find_frame(const char *svg, const char *id)
{
    box b = {0};
    const char *end, *g = node_group(svg, id, &end);
    char points[512];
    const char *polygon = g ? strstr(g, "<polygon") : NULL;
    if (!g || !polygon || polygon >= end || !attr_in(g, end, "class", b.cls, sizeof b.cls) ||
        !attr_in(polygon, end, "points", points, sizeof points))
        return b;
    add_points(&b, points);
    attr_in(g, end, "xlink:title", b.tooltip, sizeof b.tooltip);
    b.found = 1;
    return b;
}

/* DualPipeV's overlapped pairs: two boxes back to back, each its own
 * action (class "pair"), framed together: the frame spans from the
 * forward's start to the backward's end and stands a little above and
 * below the boxes; its tooltip names the pair. */
static void test_pair_frames(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_dualpipev, 1, &plan);
    char *svg = render(&plan, NULL, "svg", NULL);
    check_planned_panel(svg, &plan);
    int pairs = 0;
    for (int i = 0; i + 1 < plan.schedule.n_actions; i++) {
        const tf_action *f = &plan.actions[i].action, *bw = &plan.actions[i + 1].action;
        if (f->pair != TF_PAIR_FIRST)
            continue;
        pairs++;
        char fc[32], bc[32], id[96], name[TF_CELL_MAX];
        tf_action_format(f, fc);
        tf_action_format(bw, bc);
        snprintf(id, sizeof id, "p_%s", fc);
        box first = find_box(svg, id);
        snprintf(id, sizeof id, "p_%s", bc);
        box second = find_box(svg, id);
        snprintf(id, sizeof id, "p_pair_%s_%s", fc, bc);
        box frame = find_frame(svg, id);
        if (!first.found || !second.found || !frame.found)
            fail_msg("pair %s %s: box or frame %s missing", fc, bc, id);
        assert_true(fabs(second.x0 - first.x1) <= 1.0); /* back to back */
        assert_true(fabs(frame.x0 - first.x0) <= 1.0 && fabs(frame.x1 - second.x1) <= 1.0);
        assert_true(frame.y0 < first.y0 && frame.y1 > first.y1);
        assert_string_equal(frame.cls, "node pair");
        assert_non_null(strstr(frame.tooltip, tf_pair_format(f, bw, name)));
        assert_non_null(strstr(second.tooltip, name));
    }
    assert_true(pairs >= 4);
    assert_int_equal(count(svg, "class=\"node pair\""), pairs);
    assert_int_equal(count(svg, " pair\""), 3 * pairs); /* the frame and its two boxes */
    free(svg);
    tf_plan_free(&plan);
}

/* The Chrome trace names the events as the boxes are labelled, names each
 * rank's thread by its stages, and with flows gives one arrow per
 * dependency between ranks, starting inside the sender's slice and ending
 * inside the receiver's. */
static void test_chrome_names_threads_and_flows(void **state)
{
    (void)state;
    const char *profiles[] = {profile_1f1b, profile_dualpipev};
    for (int k = 0; k < 2; k++) {
        tf_plan plan;
        make_plan(profiles[k], 1, &plan);
        const tf_schedule *s = &plan.schedule;
        tf_timeline_options opt;
        tf_timeline_options_init(&opt);
        opt.flows = 1;
        char *json = render(&plan, &opt, "chrome", NULL);
        cJSON *root = cJSON_Parse(json);
        const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), *ev;
        tf_dag dag;
        assert_int_equal(tf_dag_build(s, plan.p2p_ms, &dag, NULL), 0);
        int cross = 0;
        for (int u = 0; u < dag.n; u++)
            for (int e = dag.succ_offset[u]; e < dag.succ_offset[u + 1]; e++)
                cross += s->actions[u].rank != s->actions[dag.succ[e]].rank;
        int threads = 0, starts = 0, ends = 0;
        long id_sum = 0;
        cJSON_ArrayForEach(ev, events)
        {
            const char *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph")->valuestring;
            const char *name = cJSON_GetObjectItemCaseSensitive(ev, "name")->valuestring;
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
            int pid = cJSON_GetObjectItemCaseSensitive(ev, "pid")->valueint;
            if (!strcmp(ph, "M") && !strcmp(name, "thread_name")) {
                const char *thread = cJSON_GetObjectItemCaseSensitive(args, "name")->valuestring;
                if (k == 0) {
                    char want[32];
                    snprintf(want, sizeof want, "stage %d", pid);
                    assert_string_equal(thread, want);
                } else {
                    char want[32];
                    snprintf(want, sizeof want, "stages %d, %d", pid, 2 * s->ranks - 1 - pid);
                    assert_string_equal(thread, want);
                }
                threads++;
            } else if (!strcmp(ph, "X")) {
                tf_action a;
                assert_int_equal(
                    tf_action_parse(cJSON_GetObjectItemCaseSensitive(args, "action")->valuestring,
                                    &a, NULL),
                    0);
                char want[32];
                if (k == 0)
                    snprintf(want, sizeof want, "%c%d", tf_action_letter(a.type), a.microbatch);
                else
                    tf_action_format(&a, want);
                assert_string_equal(name, want);
            } else if (!strcmp(ph, "s") || !strcmp(ph, "f")) {
                /* "0F1 -> 1F1": the end's own action holds its timestamp. */
                char from[32], to[32];
                assert_int_equal(sscanf(name, "%31s -> %31s", from, to), 2);
                tf_action a;
                assert_int_equal(tf_action_parse(ph[0] == 's' ? from : to, &a, NULL), 0);
                int i = tf_schedule_find(s, a.type, a.stage, a.microbatch);
                double ts = cJSON_GetObjectItemCaseSensitive(ev, "ts")->valuedouble / 1000.0;
                const tf_plan_action *pa = &plan.actions[i];
                assert_true(ts >= pa->start_ms - 1e-9 && ts <= pa->start_ms + pa->ms + 1e-9);
                assert_int_equal(pid, pa->action.rank);
                assert_string_equal(cJSON_GetObjectItemCaseSensitive(ev, "bp")->valuestring, "e");
                long id = (long)cJSON_GetObjectItemCaseSensitive(ev, "id")->valuedouble;
                id_sum += ph[0] == 's' ? id : -id;
                if (ph[0] == 's')
                    starts++;
                else
                    ends++;
            }
        }
        assert_int_equal(threads, s->ranks);
        assert_true(cross > 0);
        assert_int_equal(starts, cross);
        assert_int_equal(ends, cross);
        assert_int_equal(id_sum, 0);
        tf_dag_free(&dag);
        cJSON_Delete(root);
        free(json);
        /* Without the option no flow; flows need the trace format. */
        opt.flows = 0;
        json = render(&plan, &opt, "chrome", NULL);
        assert_null(strstr(json, "\"ph\":\"s\""));
        free(json);
        opt.flows = 1;
        char *data = NULL;
        size_t len = 0;
        tf_error err = {0};
        assert_int_equal(tf_timeline_render_data(&plan, &opt, "svg", &data, &len, &err),
                         TF_EINVAL);
        assert_non_null(strstr(err.msg, "--flows"));
        assert_null(data);
        tf_plan_free(&plan);
    }
}

/* --dag: one node per action, one edge per DAG edge, styled per rule. */
static void test_dag_view(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_zbv, 1, &plan);
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    opt.dag = 1;
    char *svg = render(&plan, &opt, "svg", NULL);
    tf_dag dag;
    assert_int_equal(tf_dag_build(&plan.schedule, plan.p2p_ms, &dag, NULL), 0);
    assert_int_equal(count(svg, "class=\"node action "), plan.schedule.n_actions);
    assert_int_equal(count(svg, "class=\"edge dep"), dag.n_edges);
    for (int u = 0; u < dag.n; u++) {
        for (int e = dag.succ_offset[u]; e < dag.succ_offset[u + 1]; e++) {
            char a[32], b[32], id[80], cls[128];
            tf_action_format(&plan.schedule.actions[u], a);
            tf_action_format(&plan.schedule.actions[dag.succ[e]], b);
            snprintf(id, sizeof id, "e_%s_%s", a, b);
            const char *end, *g = node_group(svg, id, &end);
            if (!g)
                fail_msg("no edge %s", id);
            assert_true(attr_in(g, end, "class", cls, sizeof cls));
            for (int rule = 0; rule < 5; rule++) {
                char word[16];
                snprintf(word, sizeof word, "rule%d", rule + 1);
                assert_int_equal(strstr(cls, word) != NULL, (dag.rule[e] >> rule) & 1);
            }
        }
    }
    assert_non_null(strstr(svg, "backward to previous stage")); /* legend */
    tf_dag_free(&dag);
    free(svg);
    tf_plan_free(&plan);
}

/* A plan whose times contradict its schedule is refused, naming actions. */
static void test_inconsistent_plans(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_1f1b, 1, &plan);
    tf_error err = {0};
    char *data = (char *)1;
    size_t len = 7;
    /* Overlap on one rank: the second action of rank 0 starts at 0. */
    double saved = plan.actions[1].start_ms;
    plan.actions[1].start_ms = 0.0;
    assert_int_equal(tf_timeline_render_data(&plan, NULL, "svg", &data, &len, &err), TF_EINVAL);
    assert_null(data);
    assert_non_null(strstr(err.msg, "inconsistent plan"));
    assert_non_null(strstr(err.msg, "0F1"));
    plan.actions[1].start_ms = saved;
    /* A dependency broken across ranks: 1F0 before 0F0 ends. */
    int i = tf_schedule_find(&plan.schedule, TF_ACT_F, 1, 0);
    saved = plan.actions[i].start_ms;
    plan.actions[i].start_ms = 1.0;
    tf_error_clear(&err);
    assert_int_equal(tf_timeline_render_data(&plan, NULL, "png", &data, &len, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "1F0"));
    assert_non_null(strstr(err.msg, "0F0"));
    plan.actions[i].start_ms = saved;
    /* A bad freeze ratio. */
    plan.actions[3].freeze_ratio = 1.5;
    assert_int_equal(tf_timeline_render_data(&plan, NULL, "chrome", &data, &len, &err),
                     TF_EINVAL);
    assert_non_null(strstr(err.msg, "freeze_ratio"));
    tf_plan_free(&plan);
}

static void test_bad_options(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_1f1b, 1, &plan);
    tf_error err = {0};
    char *data;
    size_t len;
    assert_int_equal(tf_timeline_render_data(&plan, NULL, "gif", &data, &len, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "gif"));
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    opt.width = 50;
    assert_int_equal(tf_timeline_render_data(&plan, &opt, "svg", &data, &len, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "width"));
    tf_timeline_options_init(&opt);
    opt.dag = 1;
    assert_int_equal(tf_timeline_render_data(&plan, &opt, "chrome", &data, &len, &err),
                     TF_EINVAL);
    opt.compare_unfrozen = 1;
    assert_int_equal(tf_timeline_render_data(&plan, &opt, "svg", &data, &len, &err), TF_EINVAL);
    tf_plan_free(&plan);
    /* A profile's unfrozen schedule has nothing to compare with. */
    make_plan(profile_1f1b, 0, &plan);
    opt.dag = 0;
    assert_int_equal(tf_timeline_render_data(&plan, &opt, "svg", &data, &len, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "--compare unfrozen"));
    assert_non_null(strstr(err.msg, "profile"));
    tf_plan_free(&plan);
}

static void test_format_for_path(void **state)
{
    (void)state;
    assert_string_equal(tf_timeline_format_for_path("a/b.svg"), "svg");
    assert_string_equal(tf_timeline_format_for_path("x.PNG"), "png");
    assert_string_equal(tf_timeline_format_for_path("x.pdf"), "pdf");
    assert_string_equal(tf_timeline_format_for_path("x.gv"), "dot");
    assert_string_equal(tf_timeline_format_for_path("x.dot"), "dot");
    assert_string_equal(tf_timeline_format_for_path("trace.json"), "chrome");
    assert_null(tf_timeline_format_for_path("x.gif"));
    assert_null(tf_timeline_format_for_path("noextension"));
    assert_null(tf_timeline_format_for_path("dir.svg/file"));
    assert_true(tf_timeline_format_valid("chrome"));
    assert_false(tf_timeline_format_valid("jpeg"));
}

/* Output files: written whole or not at all. */
static void test_atomic_output(void **state)
{
    (void)state;
    char dir[] = "/tmp/tf-dot-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], unwritable[256];
    snprintf(path, sizeof path, "%s/timeline.svg", dir);
    snprintf(unwritable, sizeof unwritable, "%s/missing-dir/timeline.svg", dir);
    tf_plan plan;
    make_plan(profile_1f1b, 1, &plan);
    tf_error err = {0};
    assert_int_equal(tf_timeline_render(&plan, NULL, path, NULL, &err), 0);
    char *good;
    size_t good_len;
    assert_int_equal(tf_read_file(path, &good, &good_len, NULL), 0);
    assert_non_null(strstr(good, "</svg>"));
    /* A failing render leaves the existing file as it was. */
    plan.actions[1].start_ms = 0.0;
    assert_int_equal(tf_timeline_render(&plan, NULL, path, NULL, &err), TF_EINVAL);
    char *after;
    size_t after_len;
    assert_int_equal(tf_read_file(path, &after, &after_len, NULL), 0);
    assert_int_equal(after_len, good_len);
    assert_memory_equal(after, good, good_len);
    free(after);
    free(good);
    tf_plan_free(&plan);
    make_plan(profile_1f1b, 1, &plan);
    /* An unwritable path is an i/o error and creates nothing. */
    assert_int_equal(tf_timeline_render(&plan, NULL, unwritable, NULL, &err), TF_EIO);
    assert_non_null(strstr(err.msg, "missing-dir"));
    /* An unknown extension is refused before any work. */
    snprintf(unwritable, sizeof unwritable, "%s/timeline.gif", dir);
    assert_int_equal(tf_timeline_render(&plan, NULL, unwritable, NULL, &err), TF_EINVAL);
    struct stat st;
    assert_int_not_equal(stat(unwritable, &st), 0);
    /* The directory holds the good file and no temporaries. */
    char listing[512];
    snprintf(listing, sizeof listing, "ls -A %s | wc -l", dir);
    FILE *ls = popen(listing, "r");
    int files = 0;
    assert_int_equal(fscanf(ls, "%d", &files), 1);
    pclose(ls);
    assert_int_equal(files, 1);
    unlink(path);
    rmdir(dir);
    tf_plan_free(&plan);
}

/* Loading: plans and profiles are drawn; anything else is refused by name. */
static void test_load(void **state)
{
    (void)state;
    char dir[] = "/tmp/tf-dot-load-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    tf_error err = {0};
    tf_plan plan;
    snprintf(path, sizeof path, "%s/profile.json", dir);
    assert_int_equal(tf_write_file_atomic(path, profile_1f1b, strlen(profile_1f1b), NULL), 0);
    assert_int_equal(tf_timeline_load(path, &plan, &err), 0);
    assert_int_equal(plan.schedule.n_actions, 64);
    for (int i = 0; i < plan.schedule.n_actions; i++)
        assert_true(plan.actions[i].freeze_ratio == 0.0);
    tf_plan_free(&plan);

    const char *not_plan = "{\"format\": \"something-else\", \"version\": 1}";
    assert_int_equal(tf_write_file_atomic(path, not_plan, strlen(not_plan), NULL), 0);
    assert_int_equal(tf_timeline_load(path, &plan, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, "$.format"));
    assert_non_null(strstr(err.msg, "tf-plan"));
    assert_null(plan.actions);
    const char *not_json = "this is not JSON";
    assert_int_equal(tf_write_file_atomic(path, not_json, strlen(not_json), NULL), 0);
    assert_int_equal(tf_timeline_load(path, &plan, &err), TF_EINVAL);
    assert_non_null(strstr(err.msg, path));
    unlink(path);
    assert_int_equal(tf_timeline_load(path, &plan, &err), TF_EIO);
    rmdir(dir);
}

/* ---- memory lanes, idle windows, recomputation ---------------------------- */

/* The text of the text node id into out[size]; 0 when there is none. */
static int text_of(const char *svg, const char *id, char *out, size_t size)
{
    const char *end, *g = node_group(svg, id, &end);
    const char *text = g ? strstr(g, "<text") : NULL;
    if (!text || text >= end)
        return 0;
    const char *open = strchr(text, '>'), *close = strstr(text, "</text>");
    if (!open || !close || close < open || (size_t)(close - open - 1) >= size)
        return 0;
    memcpy(out, open + 1, (size_t)(close - open - 1));
    out[close - open - 1] = '\0';
    return 1;
}

/* The y of the line (an edge: path d="Mx,y C...") with id; NAN if none. */
static double line_y(const char *svg, const char *id)
{
    char key[96];
    snprintf(key, sizeof key, "<g id=\"%s\" class=\"edge", id);
    const char *g = strstr(svg, key), *d = g ? strstr(g, " d=\"M") : NULL;
    const char *comma = d ? strchr(d, ',') : NULL;
    return comma ? strtod(comma + 1, NULL) : NAN;
}

/* A memory lane's scale, read from the picture: y of 0 bytes and points
 * per byte. */
typedef struct lane_scale {
    double y_zero, per_byte;
} lane_scale;

static lane_scale read_lane_scale(const char *svg, const char *prefix, int r)
{
    char id[64], text[64];
    snprintf(id, sizeof id, "%s_mem_axis_%d", prefix, r);
    box zero = find_box(svg, id);
    snprintf(id, sizeof id, "%s_mem_top_%d", prefix, r);
    box top = find_box(svg, id);
    snprintf(id, sizeof id, "%s_mem_scale_%d", prefix, r);
    assert_true(zero.found && top.found);
    assert_true(text_of(svg, id, text, sizeof text));
    assert_non_null(strstr(text, " GiB"));
    double top_bytes = strtod(text, NULL) * 1073741824.0;
    assert_true(top_bytes > 0);
    lane_scale ls = {(zero.y0 + zero.y1) / 2, 0};
    ls.per_byte = (ls.y_zero - (top.y0 + top.y1) / 2) / top_bytes;
    assert_true(ls.per_byte > 0);
    return ls;
}

/* Rank r's memory lane in panel prefix: its highest piece and the peak
 * mark sit at the peak's bytes, every piece stands on the zero line, the
 * limit line at the limit's bytes.  Returns the highest piece's top. */
static double check_memory_lane(const char *svg, const tf_plan *plan, const char *prefix, int r,
                                double peak)
{
    lane_scale ls = read_lane_scale(svg, prefix, r);
    double highest = HUGE_VAL;
    int pieces = 0;
    for (;; pieces++) {
        char id[64];
        snprintf(id, sizeof id, "%s_mem_%d_%d", prefix, r, pieces);
        box b = find_box(svg, id);
        if (!b.found)
            break;
        assert_string_equal(b.cls, "node memory");
        assert_true(fabs(b.y1 - ls.y_zero) <= 1.0);
        highest = fmin(highest, b.y0);
    }
    assert_true(pieces >= 2);
    double want = ls.y_zero - peak * ls.per_byte;
    assert_true(fabs(highest - want) <= 1.0);
    char id[64];
    snprintf(id, sizeof id, "%s_peak_%d", prefix, r);
    box mark = find_box(svg, id);
    assert_true(mark.found);
    assert_true(fabs((mark.y0 + mark.y1) / 2 - want) <= 1.0);
    snprintf(id, sizeof id, "%s_limit_%d", prefix, r);
    double limit_y = line_y(svg, id);
    assert_true(fabs(limit_y - (ls.y_zero - plan->memory_limit[r] * ls.per_byte)) <= 0.6);
    return highest;
}

static void test_memory_lanes(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_memory, 1, &plan);
    assert_non_null(plan.memory);
    assert_non_null(plan.memory_limit);
    tf_timeline_options opt;
    tf_timeline_options_init(&opt);
    opt.compare_unfrozen = 1;
    char *svg = render(&plan, &opt, "svg", NULL);
    for (int r = 0; r < plan.schedule.ranks; r++) {
        const tf_plan_rank *pr = &plan.per_rank[r];
        check_memory_lane(svg, &plan, "p", r, pr->peak_planned.bytes);
        double unfrozen_top = check_memory_lane(svg, &plan, "u", r, pr->peak_unfrozen.bytes);
        char id[64];
        snprintf(id, sizeof id, "u_limit_%d", r);
        /* Rank 0 holds four forwards unfrozen: over its limit there. */
        if (r == 0)
            assert_true(unfrozen_top < line_y(svg, id) - 1);
    }
    /* Bytes change at the end of each action: rank 0's second piece starts
     * where its first forward ends. */
    double x_zero, scale;
    read_axis(svg, &x_zero, &scale);
    box second = find_box(svg, "p_mem_0_1");
    assert_true(second.found);
    const tf_plan_action *f0 = &plan.actions[plan.schedule.rank_offset[0]];
    assert_int_equal(f0->action.type, TF_ACT_F);
    assert_true(fabs(second.x0 - round(x_zero + (f0->start_ms + f0->ms) * scale)) <= 1.0);
    free(svg);
    tf_plan_free(&plan);
}

/* Without memory fields there is no memory lane. */
static void test_no_memory_lane(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_1f1b, 1, &plan);
    char *svg = render(&plan, NULL, "svg", NULL);
    assert_null(strstr(svg, "_mem_"));
    assert_null(strstr(svg, "live memory"));
    free(svg);
    tf_plan_free(&plan);
}

/* Every idle window of the plan's per_rank bubbles is shaded where it is,
 * in the planned panel. */
static void test_idle_windows(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_1f1b, 1, &plan);
    char *svg = render(&plan, NULL, "svg", NULL);
    double x_zero, scale;
    read_axis(svg, &x_zero, &scale);
    int windows = 0;
    for (int r = 0; r < plan.schedule.ranks; r++) {
        const tf_plan_rank *pr = &plan.per_rank[r];
        assert_true(pr->n_bubbles >= 1);
        for (int k = 0; k < pr->n_bubbles; k++) {
            char id[64];
            snprintf(id, sizeof id, "p_bubble_%d_%d", r, k);
            box b = find_box(svg, id);
            double x0 = round(x_zero + pr->bubbles[2 * k] * scale);
            double x1 = round(x_zero + pr->bubbles[2 * k + 1] * scale);
            assert_int_equal(b.found, x1 > x0);
            if (!b.found)
                continue;
            windows++;
            assert_string_equal(b.cls, "node bubble");
            assert_true(fabs(b.x0 - x0) <= 1.0 && fabs(b.x1 - x1) <= 1.0);
        }
    }
    assert_int_equal(count(svg, "class=\"node bubble\""), windows);
    free(svg);
    tf_plan_free(&plan);
}

/* R actions are boxes of their own, in the legend, their tooltip giving
 * the recompute ratio of the backward they serve. */
static void test_recompute_boxes(void **state)
{
    (void)state;
    tf_plan plan;
    make_plan(profile_memory, 1, &plan);
    char *svg = render(&plan, NULL, "svg", NULL);
    int r_boxes = 0;
    for (int i = 0; i < plan.schedule.n_actions; i++) {
        const tf_action *a = &plan.actions[i].action;
        if (a->type != TF_ACT_R)
            continue;
        int b = tf_schedule_find(&plan.schedule, TF_ACT_B, a->stage, a->microbatch);
        assert_true(b >= 0);
        char cell[32], id[48], want[64];
        snprintf(id, sizeof id, "p_%s", tf_action_format(a, cell));
        box r = find_box(svg, id);
        assert_true(r.found);
        assert_non_null(strstr(r.cls, "action R"));
        snprintf(want, sizeof want, "recompute ratio %.3f",
                 plan.actions[b].recompute_ratio);
        assert_non_null(strstr(r.tooltip, want));
        assert_true(plan.actions[b].recompute_ratio > 0);
        r_boxes++;
    }
    assert_true(r_boxes >= 1);
    assert_non_null(strstr(svg, ">R recompute<"));
    free(svg);
    tf_plan_free(&plan);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_svg_geometry_1f1b),
        cmocka_unit_test(test_svg_geometry_zero_bubble),
        cmocka_unit_test(test_svg_geometry_width),
        cmocka_unit_test(test_frozen_w_visible),
        cmocka_unit_test(test_dense_rows),
        cmocka_unit_test(test_too_narrow_to_label),
        cmocka_unit_test(test_shading_follows_ratio),
        cmocka_unit_test(test_compare_unfrozen),
        cmocka_unit_test(test_binary_formats),
        cmocka_unit_test(test_png_dpi),
        cmocka_unit_test(test_chrome_trace),
        cmocka_unit_test(test_labels_name_the_stage),
        cmocka_unit_test(test_pair_frames),
        cmocka_unit_test(test_chrome_names_threads_and_flows),
        cmocka_unit_test(test_dag_view),
        cmocka_unit_test(test_inconsistent_plans),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_format_for_path),
        cmocka_unit_test(test_atomic_output),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_memory_lanes),
        cmocka_unit_test(test_no_memory_lane),
        cmocka_unit_test(test_idle_windows),
        cmocka_unit_test(test_recompute_boxes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
