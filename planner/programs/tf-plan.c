/* tf-plan: profiled stage timings in, freeze plan out.  Parses arguments
 * and calls the planner library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/plan.h"
#include "tf/profile.h"
#include "tf/schedule.h"
#include "tf/timeline.h"
#include "tf/util.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_SOLVER = 3 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tf-plan PROFILE.json [-o PLAN.json] [options]\n"
            "\n"
            "Builds the schedule DAG of a profiled pipeline, solves the freeze LP for the\n"
            "least batch time under the freeze caps, writes the plan and prints a summary.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE          write plan.json here (atomically)\n"
            "  --objective NAME           least-freeze (default): among the fastest plans,\n"
            "                             the one that freezes least; spread: the one whose\n"
            "                             largest freeze ratio is smallest\n"
            "  --max-freeze-ratio R       cap on every stage's mean freeze ratio, in [0, 1]\n"
            "                             (default: the profile's, else 0.9)\n"
            "  --solver NAME              auto (default: chosen by the schedule's size),\n"
            "                             lp_solve, or fast (the structured exact solver);\n"
            "                             the plan records the solver that ran\n"
            "  --schedule-csv FILE        run the per-rank order in FILE (PyTorch compute-only\n"
            "                             CSV: one row per rank, cells like 0F3 1B2 2I0 2W0)\n"
            "  --timeline FILE            also draw the plan (format from the extension: .svg\n"
            "                             .png .pdf .dot, or .json for a Chrome/Perfetto trace)\n"
            "  -q, --quiet                print no summary\n"
            "  -h, --help                 show this help\n"
            "  --version                  show the version\n"
            "\n"
            "built-in schedules: %s\n"
            "exit status: 0 ok, 1 invalid input, 2 usage error, 3 solver failure\n",
            tf_schedule_builtin_names());
}

static int exit_code(int rc)
{
    return rc == TF_ESOLVER ? EXIT_SOLVER : EXIT_INPUT;
}

int main(int argc, char **argv)
{
    const char *profile_path = NULL, *output = NULL, *csv = NULL, *timeline = NULL;
    int quiet = 0;
    tf_plan_options options;
    tf_plan_options_init(&options);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(arg, "--version")) {
            printf("tf-plan %s\n", TF_VERSION);
            return 0;
        } else if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) {
            quiet = 1;
        } else if ((!strcmp(arg, "-o") || !strcmp(arg, "--output")) && has_value) {
            output = argv[++i];
        } else if (!strcmp(arg, "--schedule-csv") && has_value) {
            csv = argv[++i];
        } else if (!strcmp(arg, "--timeline") && has_value) {
            timeline = argv[++i];
            if (!tf_timeline_format_for_path(timeline)) {
                fprintf(stderr, "tf-plan: --timeline: cannot tell the format of \"%s\" (use .svg, "
                                ".png, .pdf, .dot or .json)\n",
                        timeline);
                return EXIT_USAGE;
            }
        } else if (!strcmp(arg, "--objective") && has_value) {
            if (tf_objective_parse(argv[++i], &options.objective)) {
                fprintf(stderr, "tf-plan: --objective: unknown objective \"%s\" (least-freeze, spread)\n",
                        argv[i]);
                return EXIT_USAGE;
            }
        } else if (!strcmp(arg, "--solver") && has_value) {
            if (tf_solver_parse(argv[++i], &options.solver)) {
                fprintf(stderr, "tf-plan: --solver: unknown solver \"%s\" (auto, lp_solve, fast)\n",
                        argv[i]);
                return EXIT_USAGE;
            }
        } else if (!strcmp(arg, "--max-freeze-ratio") && has_value) {
            char *end;
            double r = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(r >= 0.0 && r <= 1.0)) {
                fprintf(stderr, "tf-plan: --max-freeze-ratio: expected a number in [0, 1], got \"%s\"\n",
                        argv[i]);
                return EXIT_USAGE;
            }
            options.max_freeze_ratio = r;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "tf-plan: %s: unknown option or missing value (see --help)\n", arg);
            return EXIT_USAGE;
        } else if (!profile_path) {
            profile_path = arg;
        } else {
            fprintf(stderr, "tf-plan: unexpected argument \"%s\" (one profile at a time)\n", arg);
            return EXIT_USAGE;
        }
    }
    if (!profile_path) {
        usage(stderr);
        return EXIT_USAGE;
    }

    tf_error err = {0};
    tf_profile profile;
    tf_plan plan = {0};
    int rc = tf_profile_load(profile_path, &profile, &err);
    if (!rc && csv) {
        tf_schedule order;
        rc = tf_schedule_read_csv(csv, &order, &err);
        if (!rc) {
            rc = tf_profile_set_schedule(&profile, &order, &err);
            tf_schedule_free(&order);
        }
    }
    if (!rc)
        rc = tf_plan_from_profile(&profile, &options, &plan, &err);
    /* The plan and its picture are written as one unit: either both
     * replace their targets or neither does. */
    char *plan_json = NULL, *picture = NULL;
    size_t picture_len = 0;
    const char *paths[2];
    const void *data[2];
    size_t lens[2];
    int files = 0;
    if (!rc && output && (rc = tf_plan_to_json(&plan, &plan_json, &err)) == 0) {
        paths[files] = output;
        data[files] = plan_json;
        lens[files++] = strlen(plan_json);
    }
    if (!rc && timeline &&
        (rc = tf_timeline_render_data(&plan, NULL, tf_timeline_format_for_path(timeline),
                                      &picture, &picture_len, &err)) == 0) {
        paths[files] = timeline;
        data[files] = picture;
        lens[files++] = picture_len;
    }
    if (!rc && files > 0)
        rc = tf_write_files_atomic(files, paths, data, lens, &err);
    free(plan_json);
    free(picture);
    if (rc) {
        fprintf(stderr, "tf-plan: %s\n", err.msg[0] ? err.msg : tf_strerror(rc));
        tf_plan_free(&plan);
        tf_profile_free(&profile);
        return exit_code(rc);
    }
    if (!quiet) {
        tf_plan_print_summary(&plan, stdout);
        if (output)
            printf("plan          %s\n", output);
        if (timeline)
            printf("timeline      %s\n", timeline);
    }
    tf_plan_free(&plan);
    tf_profile_free(&profile);
    return 0;
}
