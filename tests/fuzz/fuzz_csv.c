/* fuzz_csv.c - libFuzzer target for PyTorch's compute-only schedule CSV
 * (tf_schedule_read_csv, which takes a path: the input is written to a
 * scratch file first).  An accepted schedule must build its DAG (or be
 * refused as a deadlock) and survive tf_schedule_write_csv and a second
 * read unchanged. */
#include "fuzz_util.h"
#include "tf/dag.h"
#include "tf/schedule.h"

static void check_round_trip(const tf_schedule *s)
{
    char path[300];
    tf_error err = {0};
    fuzz_scratch_path("written.csv", path, sizeof path);
    FUZZ_CHECK(tf_schedule_write_csv(s, path, &err) == 0, "%s", err.msg);
    tf_schedule again;
    FUZZ_CHECK(tf_schedule_read_csv(path, &again, &err) == 0,
               "a CSV written by tf_schedule_write_csv is refused: %s", err.msg);
    FUZZ_CHECK(again.n_actions == s->n_actions && again.ranks == s->ranks &&
                   again.stages == s->stages && again.microbatches == s->microbatches,
               "shape changed: %d actions, %d ranks -> %d actions, %d ranks", s->n_actions,
               s->ranks, again.n_actions, again.ranks);
    for (int i = 0; i < s->n_actions; i++)
        FUZZ_CHECK(memcmp(&again.actions[i], &s->actions[i], sizeof *s->actions) == 0,
                   "action %d changed", i);
    tf_schedule_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    fuzz_scratch_path("input.csv", path, sizeof path);
    fuzz_write_file(path, data, size);
    tf_schedule s;
    tf_error err = {0};
    if (tf_schedule_read_csv(path, &s, &err) == 0) {
        tf_dag g;
        if (tf_dag_build(&s, 0.0, &g, &err) == 0)
            tf_dag_free(&g);
        check_round_trip(&s);
        tf_schedule_free(&s);
    } else {
        FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");
    }
    return 0;
}
