/* fuzz_import.c - libFuzzer target for tf-import's reading of torch.profiler
 * traces (tfi_import, which takes paths).  The input holds the traces of one
 * run separated by NUL bytes, each written to a scratch file; a part that is
 * exactly "--frozen" starts the frozen run's traces.  Whatever tf-import
 * accepts must be a profile tf-plan plans: written as JSON it reads back
 * (tf_profile_parse), its lag is finite and within the planner's range, its
 * order builds a DAG, and up to 256 actions tf_plan_from_profile plans it. */
#include <math.h>

#include "fuzz_util.h"
#include "import.h"
#include "tf/dag.h"
#include "tf/plan.h"
#include "tf/planner.h"
#include "tf/profile.h"

enum { MAX_PARTS = 8, PLANNED_ACTIONS = 256 };

static void check_plannable(const tf_profile *p)
{
    tf_error err = {0};
    FUZZ_CHECK(isfinite(p->p2p_ms) && p->p2p_ms >= 0 && p->p2p_ms <= TF_MAX_DURATION_MS,
               "p2p_ms %g", p->p2p_ms);
    char *json;
    FUZZ_CHECK(tf_profile_to_json(p, &json, &err) == 0, "%s", err.msg);
    tf_profile again;
    FUZZ_CHECK(tf_profile_parse(json, "imported.json", &again, &err) == 0,
               "an imported profile is refused by the planner's reader: %s", err.msg);
    free(json);
    tf_dag g;
    FUZZ_CHECK(tf_dag_build(&again.schedule, again.p2p_ms, &g, &err) == 0,
               "an imported order does not build: %s", err.msg);
    tf_dag_free(&g);
    if (again.schedule.n_actions <= PLANNED_ACTIONS) {
        tf_plan_options o;
        tf_plan_options_init(&o);
        o.control.time_limit_s = 5.0;
        tf_plan plan;
        FUZZ_CHECK(tf_plan_from_profile(&again, &o, &plan, &err) == 0,
                   "tf-plan cannot plan an imported profile: %s", err.msg);
        tf_plan_free(&plan);
    }
    tf_profile_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char paths[MAX_PARTS][300];
    const char *traces[MAX_PARTS], *frozen[MAX_PARTS];
    tfi_options o;
    tfi_options_init(&o);
    o.traces = traces;
    o.frozen = frozen;
    int in_frozen = 0;
    size_t from = 0;
    for (int part = 0; part < MAX_PARTS && from <= size; part++) {
        const uint8_t *nul = part + 1 < MAX_PARTS ? memchr(data + from, 0, size - from) : NULL;
        size_t len = nul ? (size_t)(nul - (data + from)) : size - from;
        if (!in_frozen && len == 8 && memcmp(data + from, "--frozen", 8) == 0) {
            in_frozen = 1;
        } else {
            char name[32];
            snprintf(name, sizeof name, "trace%d.json", part);
            fuzz_write_file(fuzz_scratch_path(name, paths[part], sizeof paths[part]),
                            data + from, len);
            if (in_frozen)
                frozen[o.n_frozen++] = paths[part];
            else
                traces[o.n_traces++] = paths[part];
        }
        from += len + 1;
    }
    tf_profile p;
    tf_error err = {0};
    if (tfi_import(&o, &p, &err) == 0) {
        check_plannable(&p);
        tf_profile_free(&p);
    } else {
        FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");
    }
    return 0;
}
