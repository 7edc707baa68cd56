/* plan_timeline.c - a program against the installed render library: draws
 * a plan's timeline as SVG on stdout, as tf-dot PLAN -o FILE.svg does. */
#include <stdio.h>

#include "tf/timeline.h"

int main(int argc, char **argv)
{
    tf_plan plan;
    tf_error err = {0};
    if (argc != 2 || tf_timeline_load(argv[1], &plan, &err) != 0) {
        fprintf(stderr, "plan_timeline: %s\n", argc == 2 ? err.msg : "usage: PLAN");
        return 1;
    }
    int rc = tf_timeline_render(&plan, NULL, "-", "svg", &err);
    if (rc != 0)
        fprintf(stderr, "plan_timeline: %s\n", err.msg);
    tf_plan_free(&plan);
    return rc != 0;
}
