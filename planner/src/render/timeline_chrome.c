/* timeline_chrome.c - the plan as a Chrome/Perfetto trace (traceEvents JSON):
 * one process per rank and panel with one named thread, one complete event
 * ("ph": "X") per action (R actions included) with its freeze ratio (and for
 * an R or a recomputing backward the recompute ratio) in args, with memory the live
 * bytes (timeline_memory.c) and the limit as counter events ("ph": "C"),
 * which the viewers draw as a track per rank, and, when asked,
 * flow events ("ph": "s" / "f") for the dependencies between ranks, which
 * the viewers draw as arrows.  Loads in chrome://tracing and
 * ui.perfetto.dev, which handle schedules far larger than a picture can.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "model/json_util.h"
#include "timeline_internal.h"

/* A new event named name, of phase ph, in process pid, with an empty
 * args object (*args); NULL when out of memory (nothing to free). */
static cJSON *new_event(const char *name, const char *ph, int pid, cJSON **args)
{
    cJSON *ev = cJSON_CreateObject();
    *args = cJSON_AddObjectToObject(ev, "args");
    if (!ev || !*args) {
        cJSON_Delete(ev);
        return NULL;
    }
    cJSON_AddStringToObject(ev, "name", name);
    cJSON_AddStringToObject(ev, "ph", ph);
    cJSON_AddNumberToObject(ev, "pid", pid);
    return ev;
}

/* Process metadata: its name and its place in the list. */
static int add_process(cJSON *events, int pid, const char *name)
{
    cJSON *args, *sort_args, *meta = new_event("process_name", "M", pid, &args);
    cJSON *sort = new_event("process_sort_index", "M", pid, &sort_args);
    if (!meta || !sort) {
        cJSON_Delete(meta);
        cJSON_Delete(sort);
        return TF_ENOMEM;
    }
    cJSON_AddStringToObject(args, "name", name);
    cJSON_AddItemToArray(events, meta);
    cJSON_AddNumberToObject(sort_args, "sort_index", pid);
    cJSON_AddItemToArray(events, sort);
    return 0;
}

/* Thread metadata: the rank's one thread, named by the stages it runs
 * ("stage 3", "stages 0, 7"), so the viewer's row says which stages the
 * events are. */
static int add_thread(cJSON *events, const tf_schedule *s, int pid, int rank)
{
    cJSON *args, *meta = new_event("thread_name", "M", pid, &args);
    if (!meta)
        return TF_ENOMEM;
    char name[256];
    int used = snprintf(name, sizeof name, "%s", s->stages_per_rank > 1 ? "stages" : "stage");
    for (int st = 0, n = 0; st < s->stages && used < (int)sizeof name - 16; st++)
        if (s->stage_rank[st] == rank)
            used += snprintf(name + used, sizeof name - (size_t)used, "%s %d", n++ ? "," : "", st);
    cJSON_AddNumberToObject(meta, "tid", 0);
    cJSON_AddStringToObject(args, "name", name);
    cJSON_AddItemToArray(events, meta);
    return 0;
}

/* An event's name: "F3" on schedules with one stage per rank (the row
 * names the stage), PyTorch's "2F3" where a rank runs several. */
static const char *event_name(const tf_schedule *s, const tf_action *a, char *name)
{
    if (s->stages_per_rank > 1)
        return tf_action_format(a, name);
    snprintf(name, 32, "%c%d", tf_action_letter(a->type), a->microbatch);
    return name;
}

static int add_action(cJSON *events, const tl_model *m, const tl_panel *p, int i, int pid)
{
    const tf_schedule *s = &m->plan->schedule;
    const tf_plan_action *pa = &m->plan->actions[i];
    const tf_action *a = &pa->action;
    char name[32], cell[32], type[2] = {tf_action_letter(a->type), '\0'};
    cJSON *args, *ev = new_event(event_name(s, a, name), "X", pid, &args);
    if (!ev)
        return TF_ENOMEM;
    cJSON_AddStringToObject(ev, "cat", type);
    /* Trace times are microseconds. */
    tfj_add_number(ev, "ts", p->start[i] * 1000.0);
    tfj_add_number(ev, "dur", p->ms[i] * 1000.0);
    cJSON_AddNumberToObject(ev, "tid", 0);
    cJSON_AddStringToObject(args, "action", tf_action_format(a, cell));
    cJSON_AddNumberToObject(args, "stage", a->stage);
    cJSON_AddNumberToObject(args, "microbatch", a->microbatch);
    cJSON_AddStringToObject(args, "type", type);
    tfj_add_number(args, "freeze_ratio", p->ratio[i]);
    if (a->type == TF_ACT_R || pa->recompute_ratio > 0)
        tfj_add_number(args, "recompute_ratio", tl_recompute_ratio(m, p, i));
    tfj_add_number(args, "start_ms", p->start[i]);
    tfj_add_number(args, "ms", p->ms[i]);
    tfj_add_number(args, "max_ms", pa->max_ms);
    tfj_add_number(args, "min_ms", pa->min_ms);
    cJSON_AddBoolToObject(args, "critical", p->critical[i] != 0);
    int first = a->pair == TF_PAIR_FIRST ? i : a->pair == TF_PAIR_SECOND ? i - 1 : -1;
    if (first >= 0 && first + 1 < s->n_actions) {
        char pair[TF_CELL_MAX];
        cJSON_AddStringToObject(args, "pair", tf_pair_format(&s->actions[first],
                                                             &s->actions[first + 1], pair));
    }
    cJSON_AddItemToArray(events, ev);
    return 0;
}

/* A counter sample: series name of process pid holds value from ts_us
 * on (Perfetto draws one track per process and name). */
static int add_counter(cJSON *events, const char *name, int pid, double ts_us, double value)
{
    cJSON *args, *ev = new_event(name, "C", pid, &args);
    if (!ev)
        return TF_ENOMEM;
    tfj_add_number(ev, "ts", ts_us);
    tfj_add_number(args, "bytes", value);
    cJSON_AddItemToArray(events, ev);
    return 0;
}

/* Rank r's live bytes in panel p as counter samples, one per point of its
 * curve and one at the step's end, and its limit, when the plan has one,
 * as a flat series over the step. */
static int add_memory_counters(cJSON *events, const tl_model *m, const tl_panel *p, int r,
                               int pid)
{
    if (!p->memory)
        return 0;
    const tl_memory_curve *mc = &p->memory[r];
    for (int k = 0; k < mc->n; k++)
        if (add_counter(events, "live bytes", pid, mc->t[k] * 1000.0, mc->bytes[k]))
            return TF_ENOMEM;
    double end_us = p->makespan * 1000.0;
    if (add_counter(events, "live bytes", pid, end_us, mc->bytes[mc->n - 1]))
        return TF_ENOMEM;
    const double *limit = m->plan->memory_limit;
    if (limit && (add_counter(events, "memory limit", pid, 0.0, limit[r]) ||
                  add_counter(events, "memory limit", pid, end_us, limit[r])))
        return TF_ENOMEM;
    return 0;
}

/* One end of flow `id` ("s" at the sender, "f" at the receiver), bound to
 * the action slice it is drawn from or to: its timestamp is the middle of
 * that slice, which both chrome://tracing and Perfetto bind to the slice
 * that encloses it ("bp": "e"). */
static int add_flow_end(cJSON *events, const char *ph, const char *name, long id, int pid,
                        double ts_us)
{
    cJSON *ev = cJSON_CreateObject();
    if (!ev)
        return TF_ENOMEM;
    cJSON_AddStringToObject(ev, "name", name);
    cJSON_AddStringToObject(ev, "cat", "dependency");
    cJSON_AddStringToObject(ev, "ph", ph);
    cJSON_AddNumberToObject(ev, "id", (double)id);
    cJSON_AddNumberToObject(ev, "pid", pid);
    cJSON_AddNumberToObject(ev, "tid", 0);
    tfj_add_number(ev, "ts", ts_us);
    cJSON_AddStringToObject(ev, "bp", "e");
    cJSON_AddItemToArray(events, ev);
    return 0;
}

/* Flow events for every DAG edge between two ranks of panel k (pids
 * k * ranks + rank), ids counting on from *next_id. */
static int add_flows(cJSON *events, const tl_model *m, int k, long *next_id)
{
    const tf_schedule *s = &m->plan->schedule;
    const tl_panel *p = &m->panels[k];
    const tf_dag *g = &m->dag;
    for (int u = 0; u < g->n; u++)
        for (int e = g->succ_offset[u]; e < g->succ_offset[u + 1]; e++) {
            int v = g->succ[e];
            const tf_action *a = &s->actions[u], *b = &s->actions[v];
            if (a->rank == b->rank)
                continue;
            char from[32], to[32], name[80];
            snprintf(name, sizeof name, "%s -> %s", tf_action_format(a, from),
                     tf_action_format(b, to));
            long id = (*next_id)++;
            if (add_flow_end(events, "s", name, id, k * s->ranks + a->rank,
                             (p->start[u] + p->ms[u] / 2) * 1000.0) ||
                add_flow_end(events, "f", name, id, k * s->ranks + b->rank,
                             (p->start[v] + p->ms[v] / 2) * 1000.0))
                return TF_ENOMEM;
        }
    return 0;
}

static cJSON *build_trace(const tl_model *m, int flows)
{
    const tf_plan *plan = m->plan;
    const tf_schedule *s = &plan->schedule;
    cJSON *root = cJSON_CreateObject();
    cJSON *events = cJSON_AddArrayToObject(root, "traceEvents");
    cJSON *info = cJSON_AddObjectToObject(root, "otherData");
    if (!root || !events || !info) {
        cJSON_Delete(root);
        return NULL;
    }
    cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
    cJSON_AddStringToObject(info, "generator", "tf-dot");
    cJSON_AddStringToObject(info, "schedule", s->name);
    cJSON_AddNumberToObject(info, "ranks", s->ranks);
    cJSON_AddNumberToObject(info, "microbatches", s->microbatches);
    tfj_add_number(info, "batch_ms_unfrozen", plan->batch_ms_unfrozen);
    tfj_add_number(info, "batch_ms_planned", plan->batch_ms_planned);
    tfj_add_number(info, "speedup", plan->speedup);
    tfj_add_number(info, "freeze_ratio_mean", plan->freeze_ratio_mean);
    /* Panels in drawing order; pids number ranks panel by panel so each
     * panel's ranks stay together in the viewer. */
    for (int k = 0; k < m->n_panels; k++) {
        const tl_panel *p = &m->panels[k];
        for (int r = 0; r < s->ranks; r++) {
            int pid = k * s->ranks + r;
            char name[64];
            if (m->n_panels > 1)
                snprintf(name, sizeof name, "rank %d (%s)", r, p->name);
            else
                snprintf(name, sizeof name, "rank %d", r);
            if (add_process(events, pid, name) || add_thread(events, s, pid, r))
                goto oom;
            for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
                if (tl_runs(m, p, i) && add_action(events, m, p, i, pid))
                    goto oom;
            if (add_memory_counters(events, m, p, r, pid))
                goto oom;
        }
    }
    long next_id = 1;
    for (int k = 0; flows && k < m->n_panels; k++)
        if (add_flows(events, m, k, &next_id))
            goto oom;
    return root;
oom:
    cJSON_Delete(root);
    return NULL;
}

int tl_render_chrome(const tl_model *m, int flows, char **data, size_t *len, tf_error *err)
{
    cJSON *root = build_trace(m, flows);
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return tf_fail(err, TF_ENOMEM, "out of memory writing a trace of %d actions", m->n);
    /* cJSON's allocator is malloc; hand the text over as the caller's buffer. */
    size_t n = strlen(text);
    char *out = malloc(n + 2);
    if (!out) {
        cJSON_free(text);
        return tf_fail(err, TF_ENOMEM, "out of memory writing a trace of %d actions", m->n);
    }
    memcpy(out, text, n);
    out[n] = '\n';
    out[n + 1] = '\0';
    cJSON_free(text);
    *data = out;
    *len = n + 1;
    return 0;
}
