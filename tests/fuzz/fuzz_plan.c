/* fuzz_plan.c - libFuzzer target for plan.json (tf_plan_parse, which tf-dot
 * and tf-exec read plans through): a plan that is accepted must be written
 * back (tf_plan_to_json) into a plan that is accepted again with the same
 * figures. */
#include <math.h>

#include "fuzz_util.h"
#include "tf/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    tf_plan plan;
    tf_error err = {0};
    if (tf_plan_parse(text, "fuzz.json", &plan, &err) == 0) {
        char *json;
        FUZZ_CHECK(tf_plan_to_json(&plan, &json, &err) == 0, "%s", err.msg);
        tf_plan again;
        FUZZ_CHECK(tf_plan_parse(json, "written.json", &again, &err) == 0,
                   "a plan written by tf_plan_to_json is refused: %s", err.msg);
        FUZZ_CHECK(again.schedule.n_actions == plan.schedule.n_actions, "%d actions, then %d",
                   plan.schedule.n_actions, again.schedule.n_actions);
        /* 12 significant digits are written. */
        FUZZ_CHECK(fabs(again.batch_ms_planned - plan.batch_ms_planned) <=
                       1e-9 * fmax(1.0, plan.batch_ms_planned),
                   "batch %.17g, then %.17g", plan.batch_ms_planned, again.batch_ms_planned);
        tf_plan_free(&again);
        free(json);
        tf_plan_free(&plan);
    } else {
        FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");
    }
    free(text);
    return 0;
}
