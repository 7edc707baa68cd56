/* timeline_chrome.c - the plan as a Chrome/Perfetto trace (traceEvents JSON):
 * one process per rank and panel, one complete event ("ph": "X") per action
 * with its freeze ratio in args.  Loads in chrome://tracing and
 * ui.perfetto.dev, which handle schedules far larger than a picture can.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "model/json_util.h"
#include "timeline_internal.h"

/* Process metadata: its name and its place in the list. */
static int add_process(cJSON *events, int pid, const char *name)
{
    cJSON *meta = cJSON_CreateObject();
    cJSON *sort = cJSON_CreateObject();
    cJSON *args = cJSON_AddObjectToObject(meta, "args");
    cJSON *sort_args = cJSON_AddObjectToObject(sort, "args");
    if (!meta || !sort || !args || !sort_args) {
        cJSON_Delete(meta);
        cJSON_Delete(sort);
        return TF_ENOMEM;
    }
    cJSON_AddStringToObject(meta, "name", "process_name");
    cJSON_AddStringToObject(meta, "ph", "M");
    cJSON_AddNumberToObject(meta, "pid", pid);
    cJSON_AddStringToObject(args, "name", name);
    cJSON_AddItemToArray(events, meta);
    cJSON_AddStringToObject(sort, "name", "process_sort_index");
    cJSON_AddStringToObject(sort, "ph", "M");
    cJSON_AddNumberToObject(sort, "pid", pid);
    cJSON_AddNumberToObject(sort_args, "sort_index", pid);
    cJSON_AddItemToArray(events, sort);
    return 0;
}

static int add_action(cJSON *events, const tl_model *m, const tl_panel *p, int i, int pid)
{
    const tf_plan_action *pa = &m->plan->actions[i];
    const tf_action *a = &pa->action;
    char name[32], cell[32], type[2] = {tf_action_letter(a->type), '\0'};
    snprintf(name, sizeof name, "%c%d", type[0], a->microbatch);
    cJSON *ev = cJSON_CreateObject();
    cJSON *args = cJSON_AddObjectToObject(ev, "args");
    if (!ev || !args) {
        cJSON_Delete(ev);
        return TF_ENOMEM;
    }
    cJSON_AddStringToObject(ev, "name", name);
    cJSON_AddStringToObject(ev, "cat", type);
    cJSON_AddStringToObject(ev, "ph", "X");
    /* Trace times are microseconds. */
    tfj_add_number(ev, "ts", p->start[i] * 1000.0);
    tfj_add_number(ev, "dur", p->ms[i] * 1000.0);
    cJSON_AddNumberToObject(ev, "pid", pid);
    cJSON_AddNumberToObject(ev, "tid", 0);
    cJSON_AddStringToObject(args, "action", tf_action_format(a, cell));
    cJSON_AddNumberToObject(args, "stage", a->stage);
    cJSON_AddNumberToObject(args, "microbatch", a->microbatch);
    cJSON_AddStringToObject(args, "type", type);
    tfj_add_number(args, "freeze_ratio", p->ratio[i]);
    tfj_add_number(args, "start_ms", p->start[i]);
    tfj_add_number(args, "ms", p->ms[i]);
    tfj_add_number(args, "max_ms", pa->max_ms);
    tfj_add_number(args, "min_ms", pa->min_ms);
    cJSON_AddBoolToObject(args, "critical", p->critical[i] != 0);
    cJSON_AddItemToArray(events, ev);
    return 0;
}

static cJSON *build_trace(const tl_model *m)
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
            if (add_process(events, pid, name))
                goto oom;
            for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
                if (add_action(events, m, p, i, pid))
                    goto oom;
        }
    }
    return root;
oom:
    cJSON_Delete(root);
    return NULL;
}

int tl_render_chrome(const tl_model *m, char **data, size_t *len, tf_error *err)
{
    cJSON *root = build_trace(m);
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
