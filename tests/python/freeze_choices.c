/* freeze_choices: prints the tensors tf-exec freezes, step by step, for a
 * plan, through the executor's own selector (tfx_freeze_select), in the
 * order and with the ratios of tf-exec's training loop (executor/src/
 * exec.c).  The Python module's test compares its choices with these.
 *
 *   freeze_choices PLAN.json random|rotate SEED STEPS WARMUP RAMP K0,K1,...
 *
 * One line per (step, stage, microbatch): step stage microbatch bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/plan.h"
#include "tfx/freeze_select.h"

/* tf-exec's phase factor: 0 in the warm-up, then a linear ramp to 1. */
static double phase_factor(long step, int warmup, int ramp)
{
    if (step < warmup)
        return 0.0;
    if (ramp <= 0)
        return 1.0;
    double f = (double)(step - warmup + 1) / ramp;
    return f < 1.0 ? f : 1.0;
}

/* K per stage from "4,3,..."; returns 0 or -1. */
static int parse_tensors(const char *text, int stages, int *k)
{
    const char *p = text;
    for (int s = 0; s < stages; s++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 1 << 20 || (s + 1 < stages ? *end != ',' : *end != '\0'))
            return -1;
        k[s] = (int)v;
        p = end + 1;
    }
    return 0;
}

static int print_choices(const tf_plan *plan, tfx_freeze_selector *sel, long steps, int warmup,
                         int ramp, const int *k)
{
    const int S = plan->schedule.stages, M = plan->schedule.microbatches;
    int max_k = 1;
    for (int st = 0; st < S; st++)
        max_k = k[st] > max_k ? k[st] : max_k;
    double *ratio_of = calloc((size_t)S * M, sizeof *ratio_of);
    unsigned char *mask = malloc((size_t)max_k);
    if (!ratio_of || !mask) {
        free(ratio_of);
        free(mask);
        return 1;
    }
    for (int i = 0; i < plan->schedule.n_actions; i++) {
        const tf_plan_action *a = &plan->actions[i];
        if (a->action.type == TF_ACT_B || a->action.type == TF_ACT_W)
            ratio_of[a->action.stage * M + a->action.microbatch] = a->freeze_ratio;
    }
    for (long step = 0; step < steps; step++) {
        double factor = phase_factor(step, warmup, ramp);
        for (int st = 0; st < S; st++)
            for (int m = 0; m < M; m++) {
                tfx_freeze_select(sel, step, st, m, ratio_of[st * M + m] * factor, mask);
                printf("%ld %d %d ", step, st, m);
                for (int t = 0; t < k[st]; t++)
                    putchar(mask[t] ? '1' : '0');
                putchar('\n');
            }
    }
    free(ratio_of);
    free(mask);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: freeze_choices PLAN random|rotate SEED STEPS WARMUP RAMP K,...\n");
        return 2;
    }
    tf_error err = {0};
    tf_plan plan;
    tfx_select_method method;
    if (tf_plan_load(argv[1], &plan, &err) || tfx_select_method_parse(argv[2], &method, &err)) {
        fprintf(stderr, "freeze_choices: %s\n", err.msg);
        return 1;
    }
    int S = plan.schedule.stages, rc = 1;
    int *k = calloc((size_t)S, sizeof *k);
    tfx_freeze_selector sel = {0};
    if (k && parse_tensors(argv[7], S, k) == 0 &&
        tfx_freeze_selector_init(&sel, method, strtoull(argv[3], NULL, 10), S, k, &err) == 0)
        rc = print_choices(&plan, &sel, atol(argv[4]), atoi(argv[5]), atoi(argv[6]), k);
    else
        fprintf(stderr, "freeze_choices: bad tensor counts \"%s\" for %d stages\n", argv[7], S);
    tfx_freeze_selector_free(&sel);
    free(k);
    tf_plan_free(&plan);
    return rc;
}
