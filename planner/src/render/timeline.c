/* timeline.c - tf-dot's library entry points: input loading, checks on the
 * plan, the panels to draw, format selection, which picture to draw and
 * atomic output.  The timeline is drawn in timeline_draw.c, the dependency
 * graph in timeline_dag.c, the Chrome trace in timeline_chrome.c.
 */
#include "tf/timeline.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "canvas_internal.h"
#include "model/json_util.h"
#include "tf/canvas.h"
#include "tf/planner.h"
#include "tf/profile.h"
#include "tf/util.h"
#include "timeline_internal.h"

void tf_timeline_options_init(tf_timeline_options *o)
{
    memset(o, 0, sizeof *o);
    o->dpi = 96.0;
}

static const char *const format_names[] = {"dot", "svg", "png", "pdf", "chrome"};

int tf_timeline_format_valid(const char *name)
{
    if (!name)
        return 0;
    for (size_t k = 0; k < sizeof format_names / sizeof *format_names; k++)
        if (!strcmp(name, format_names[k]))
            return 1;
    return 0;
}

const char *tf_timeline_format_for_path(const char *path)
{
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (dot && !strchr(dot, '/') && !strcasecmp(dot + 1, "json"))
        return "chrome";
    return tf_canvas_format_for_path(path);
}

int tf_timeline_load(const char *path, tf_plan *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    char *text;
    /* A plan or a profile: the larger of their limits. */
    size_t limit = TF_MAX_PLAN_BYTES > TF_MAX_PROFILE_BYTES ? TF_MAX_PLAN_BYTES
                                                            : TF_MAX_PROFILE_BYTES;
    int rc = tf_read_file_limit(path, limit, &text, NULL, err);
    if (rc)
        return rc;
    /* Peek at "format" to pick the parser; each parser then validates fully.
     * Plans always carry it; profiles may leave it out (formats.md). */
    cJSON *root;
    if ((rc = tfj_parse(text, path, &root, err))) {
        free(text);
        return rc;
    }
    const cJSON *format = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "format")
                                               : NULL;
    int is_profile = cJSON_IsObject(root) &&
                     (!format || (cJSON_IsString(format) &&
                                  !strcmp(format->valuestring, "tf-profile")));
    int is_plan = cJSON_IsString(format) && !strcmp(format->valuestring, "tf-plan");
    if (!is_profile && !is_plan) {
        tfj_ctx ctx = {.where = path, .path = "$"}, at;
        tfj_child(&ctx, "format", &at);
        rc = format ? tfj_fail(&at, format,
                               "expected \"tf-plan\" or \"tf-profile\" (tf-dot draws plans and "
                               "profiles)",
                               err)
                    : tfj_fail(&ctx, root, "expected a plan or profile object", err);
    }
    /* The typed parser makes a tree of its own: not two at once. */
    cJSON_Delete(root);
    if (is_profile) {
        tf_profile profile;
        rc = tf_profile_parse(text, path, &profile, err);
        if (!rc) {
            rc = tf_plan_unfrozen(&profile, out, err);
            tf_profile_free(&profile);
        }
    } else if (is_plan) {
        rc = tf_plan_parse(text, path, out, err);
    }
    free(text);
    if (rc)
        memset(out, 0, sizeof *out);
    return rc;
}

static void panel_free(tl_panel *p)
{
    free(p->start);
    free(p->ms);
    free(p->ratio);
    free(p->critical);
    memset(p, 0, sizeof *p);
}

static void model_free(tl_model *m)
{
    for (int k = 0; k < m->n_panels; k++) {
        tl_memory_free(&m->panels[k], m->plan->schedule.ranks);
        panel_free(&m->panels[k]);
    }
    tf_dag_free(&m->dag);
    free(m->local_stage);
    memset(m, 0, sizeof *m);
}

static int panel_alloc(tl_panel *p, int n)
{
    size_t count = (size_t)n + 1;
    p->start = calloc(count, sizeof *p->start);
    p->ms = calloc(count, sizeof *p->ms);
    p->ratio = calloc(count, sizeof *p->ratio);
    p->critical = calloc(count, 1);
    return p->start && p->ms && p->ratio && p->critical ? 0 : TF_ENOMEM;
}

/* The plan's own timeline, after checking every figure is drawable. */
static int planned_panel(const tf_plan *plan, tl_panel *p, tf_error *err)
{
    const tf_schedule *s = &plan->schedule;
    p->id_prefix = "p";
    p->name = "planned";
    for (int i = 0; i < s->n_actions; i++) {
        const tf_plan_action *a = &plan->actions[i];
        const tf_action *want = &s->actions[i];
        char cell[32];
        if (a->action.type != want->type || a->action.stage != want->stage ||
            a->action.microbatch != want->microbatch || a->action.rank != want->rank)
            return tf_fail(err, TF_EINVAL,
                           "inconsistent plan: actions[%d] is %s on rank %d, but the schedule "
                           "runs %s on rank %d there",
                           i, tf_action_format(&a->action, cell), a->action.rank,
                           tf_action_format(want, cell), want->rank);
        if (!isfinite(a->start_ms) || a->start_ms < 0 || !isfinite(a->ms) || a->ms < 0 ||
            !isfinite(a->freeze_ratio) || a->freeze_ratio < 0 || a->freeze_ratio > 1)
            return tf_fail(err, TF_EINVAL,
                           "inconsistent plan: actions[%d] (%s): start_ms %g, ms %g, "
                           "freeze_ratio %g (need finite times >= 0 and a ratio in [0, 1])",
                           i, tf_action_format(want, cell), a->start_ms, a->ms,
                           a->freeze_ratio);
        p->start[i] = a->start_ms;
        p->ms[i] = a->ms;
        p->ratio[i] = a->freeze_ratio;
        p->critical[i] = a->critical != 0;
        p->makespan = fmax(p->makespan, a->start_ms + a->ms);
    }
    return 0;
}

/* A drawn timeline must be one a pipeline can run: one action at a time per
 * rank, and nothing before its inputs (plus p2p lag) are ready.  A plan
 * edited by hand can break either; drawing it would show a false picture. */
static int check_panel(const tl_model *m, const tl_panel *p, tf_error *err)
{
    const tf_schedule *s = &m->plan->schedule;
    const double tol = 1e-6 * fmax(1.0, p->makespan);
    char a_cell[32], b_cell[32];
    for (int r = 0; r < s->ranks; r++) {
        for (int i = s->rank_offset[r] + 1; i < s->rank_offset[r + 1]; i++) {
            double prev_end = p->start[i - 1] + p->ms[i - 1];
            if (p->start[i] < prev_end - tol)
                return tf_fail(err, TF_EINVAL,
                               "inconsistent plan: on rank %d, %s starts at %.6g ms, before "
                               "the previous action %s ends at %.6g ms",
                               r, tf_action_format(&s->actions[i], a_cell), p->start[i],
                               tf_action_format(&s->actions[i - 1], b_cell), prev_end);
        }
    }
    const tf_dag *g = &m->dag;
    for (int u = 0; u < g->n; u++) {
        for (int e = g->succ_offset[u]; e < g->succ_offset[u + 1]; e++) {
            int v = g->succ[e];
            double ready = p->start[u] + p->ms[u] + g->lag[e];
            if (p->start[v] < ready - tol)
                return tf_fail(err, TF_EINVAL,
                               "inconsistent plan: %s starts at %.6g ms, before its "
                               "dependency %s ends (plus p2p %g ms) at %.6g ms",
                               tf_action_format(&s->actions[v], a_cell), p->start[v],
                               tf_action_format(&s->actions[u], b_cell), g->lag[e], ready);
        }
    }
    return 0;
}

/* The unfrozen timeline of the plan: every action at max_ms, each starting
 * as soon as the DAG allows. */
static int unfrozen_panel(const tl_model *m, tl_panel *p)
{
    const tf_plan *plan = m->plan;
    p->id_prefix = "u";
    p->name = "unfrozen";
    for (int i = 0; i < m->n; i++)
        p->ms[i] = tf_plan_action_unfrozen_ms(&plan->actions[i]);
    p->makespan = tf_dag_longest_path(&m->dag, p->ms, p->start);
    return tf_dag_critical(&m->dag, p->ms, p->critical);
}

static int model_build(const tf_plan *plan, const tf_timeline_options *opt, tl_model *m,
                       tf_error *err)
{
    memset(m, 0, sizeof *m);
    const tf_schedule *s = &plan->schedule;
    m->plan = plan;
    m->n = s->n_actions;
    if (m->n <= 0 || !plan->actions || s->ranks <= 0 || s->stages <= 0 || !s->rank_offset ||
        !s->stage_rank)
        return tf_fail(err, TF_EINVAL, "inconsistent plan: it has no actions to draw");
    int rc = tf_dag_build(s, plan->p2p_ms, &m->dag, err);
    if (rc)
        return rc;
    m->local_stage = calloc((size_t)s->stages + 1, sizeof *m->local_stage);
    if (!m->local_stage)
        return tf_fail(err, TF_ENOMEM, "out of memory drawing %d actions", m->n);
    /* Stages of one rank in increasing stage order: 0, 1, ... */
    for (int st = 0; st < s->stages; st++)
        for (int other = 0; other < st; other++)
            if (s->stage_rank[other] == s->stage_rank[st])
                m->local_stage[st]++;

    m->n_panels = opt->compare_unfrozen ? 2 : 1;
    tl_panel *planned = &m->panels[m->n_panels - 1];
    for (int k = 0; k < m->n_panels; k++)
        if (panel_alloc(&m->panels[k], m->n))
            return tf_fail(err, TF_ENOMEM, "out of memory drawing %d actions", m->n);
    if ((rc = planned_panel(plan, planned, err)) || (rc = check_panel(m, planned, err)))
        return rc;
    if (opt->compare_unfrozen && unfrozen_panel(m, &m->panels[0]))
        return tf_fail(err, TF_ENOMEM, "out of memory drawing %d actions", m->n);
    for (int k = 0; k < m->n_panels && !rc; k++)
        rc = tl_memory_build(m, &m->panels[k], err);
    return rc;
}

/* Renders the model through Graphviz (the timeline, or the dependency
 * graph when opt->dag) into a malloc'd buffer; format: "dot", "svg", "png"
 * or "pdf".  Returns 0, TF_EINVAL (too narrow, or Graphviz cannot render
 * the format) or TF_ENOMEM. */
static int render_graphviz(const tl_model *m, const tf_timeline_options *opt,
                           const char *format, char **data, size_t *len, tf_error *err)
{
    tf_canvas *c = tl_canvas_new_graph("timeline", !opt->dag);
    if (!c)
        return tf_fail(err, TF_ENOMEM, "out of memory creating the Graphviz graph");
    int rc = opt->dag ? tl_draw_dependency_graph(c, m, opt, err)
                      : tl_draw_timeline(c, m, opt, err);
    if (!rc)
        rc = tl_canvas_render(c, opt->dag ? "dot" : "nop", format, opt->dpi, data, len, err);
    tf_canvas_free(c);
    return rc;
}

int tf_timeline_render_data(const tf_plan *plan, const tf_timeline_options *opt,
                            const char *format, char **data, size_t *len, tf_error *err)
{
    *data = NULL;
    *len = 0;
    tf_timeline_options defaults;
    if (!opt) {
        tf_timeline_options_init(&defaults);
        opt = &defaults;
    }
    if (!tf_timeline_format_valid(format))
        return tf_fail(err, TF_EINVAL,
                       "unknown output format \"%s\" (expected dot, svg, png, pdf or chrome)",
                       format ? format : "(none)");
    if (!isfinite(opt->width) || opt->width > 100000)
        return tf_fail(err, TF_EINVAL, "width %g: expected at most 100000 points (0: automatic)",
                       opt->width);
    if (!(opt->dpi >= 10 && opt->dpi <= 1200))
        return tf_fail(err, TF_EINVAL, "dpi %g: expected a resolution in [10, 1200]", opt->dpi);
    if (opt->dag && opt->compare_unfrozen)
        return tf_fail(err, TF_EINVAL,
                       "--dag and --compare unfrozen do not combine: the dependency graph is "
                       "the same for both timelines");
    /* A profile is drawn as its unfrozen schedule (solver "none"): its two
     * panels would be the same timeline, titled as if something had been
     * planned.  Saying so beats a picture that looks like a plan's. */
    if (opt->compare_unfrozen && !strcmp(plan->solver_name, "none"))
        return tf_fail(err, TF_EINVAL,
                       "--compare unfrozen needs a plan, but the input is a profile (its "
                       "unfrozen schedule, nothing planned): both panels would show the same "
                       "timeline; run tf-plan on it and draw the plan, or leave out --compare");
    if (opt->flows && strcmp(format, "chrome") != 0)
        return tf_fail(err, TF_EINVAL,
                       "--flows draws the dependencies between ranks as arrows of a Chrome "
                       "trace: it needs format chrome (-T chrome, or a .json output), not %s",
                       format);
    if (opt->dag && !strcmp(format, "chrome"))
        return tf_fail(err, TF_EINVAL,
                       "--dag draws the dependency graph; a Chrome trace (format chrome) has "
                       "no graph to show: pick dot, svg, png or pdf");
    if (opt->dag && plan->schedule.n_actions > TF_TIMELINE_DAG_MAX_ACTIONS)
        return tf_fail(err, TF_EINVAL,
                       "--dag is for small schedules: %d actions (more than %d) would take "
                       "Graphviz minutes to lay out and no one could read the result; draw the "
                       "timeline instead, or a Chrome trace (format chrome)",
                       plan->schedule.n_actions, TF_TIMELINE_DAG_MAX_ACTIONS);
    tl_model m;
    int rc = model_build(plan, opt, &m, err);
    if (!rc)
        rc = !strcmp(format, "chrome") ? tl_render_chrome(&m, opt->flows, data, len, err)
                                        : render_graphviz(&m, opt, format, data, len, err);
    model_free(&m);
    return rc;
}

/* The widest picture the note suggests: beyond it (about 7 m on screen at
 * 96 dpi) a timeline is no longer read as one picture. */
enum { LABEL_WIDTH_MAX = 20000 };

/* The note for fit (tl_fit_labels) drawn in format, into note[size]. */
static void write_density_note(const tl_label_fit *fit, int actions, const char *format,
                               char *note, size_t size)
{
    int used;
    if (fit->dense)
        used = snprintf(note, size, "%d actions, %d on the busiest rank, get %.1f points of time "
                        "axis each: too dense to draw one by one (drawn without labels or "
                        "outlines)", actions, fit->busiest, fit->points);
    else
        used = snprintf(note, size, "%d of the %d boxes are too narrow for their labels (%.1f "
                        "points of time axis per action on the busiest rank)", fit->unlabelled,
                        fit->boxes, fit->points);
    if (used < 0 || (size_t)used >= size)
        return;
    if (fit->width_for_labels <= LABEL_WIDTH_MAX)
        used += snprintf(note + used, size - (size_t)used, "; to label every box: --width %.0f, "
                         "or fewer microbatches; or", fit->width_for_labels);
    else
        used += snprintf(note + used, size - (size_t)used, "; labels would need a picture %.0f "
                         "points wide: draw fewer microbatches, or", fit->width_for_labels);
    if (used < 0 || (size_t)used >= size)
        return;
    snprintf(note + used, size - (size_t)used, " write a Chrome trace (-T chrome) and zoom into "
             "any action in ui.perfetto.dev%s", !strcmp(format, "png")
             ? "; a PNG cannot be zoomed, an SVG can (a tooltip per action)" : "");
}

int tf_timeline_density_note(const tf_plan *plan, const tf_timeline_options *opt,
                             const char *format, char *note, size_t size)
{
    if (size > 0)
        note[0] = '\0';
    tf_timeline_options defaults;
    if (!opt) {
        tf_timeline_options_init(&defaults);
        opt = &defaults;
    }
    if (!format || !tf_timeline_format_valid(format) || !strcmp(format, "chrome") || opt->dag ||
        size == 0)
        return 0;
    tl_model m;
    tl_label_fit fit;
    tf_error err = {0};
    /* Crowded: more than a tenth of the boxes unlabelled (a few narrow
     * ones, partly frozen W say, are normal at any width that fits). */
    int crowded = !model_build(plan, opt, &m, &err) && !tl_fit_labels(&m, opt, &fit, &err) &&
                  (fit.dense || fit.unlabelled * 10 > fit.boxes);
    if (crowded)
        write_density_note(&fit, m.n, format, note, size);
    model_free(&m);
    return crowded;
}

int tf_timeline_render(const tf_plan *plan, const tf_timeline_options *opt, const char *path,
                       const char *format, tf_error *err)
{
    int to_stdout = !path || !strcmp(path, "-");
    if (!format) {
        format = to_stdout ? "dot" : tf_timeline_format_for_path(path);
        if (!format)
            return tf_fail(err, TF_EINVAL,
                           "%s: cannot tell the output format from the extension (use .dot, "
                           ".svg, .png, .pdf or .json, or name the format: dot, svg, png, pdf, "
                           "chrome)",
                           path);
    }
    char *data;
    size_t len;
    int rc = tf_timeline_render_data(plan, opt, format, &data, &len, err);
    if (rc)
        return rc;
    if (to_stdout) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
            rc = tf_fail(err, TF_EIO, "cannot write the %s output to stdout", format);
    } else {
        rc = tf_write_file_atomic(path, data, len, err);
    }
    free(data);
    return rc;
}
