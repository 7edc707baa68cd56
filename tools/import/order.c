/* order.c - the per-rank order a run executed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe.h"
#include "tf/dag.h"

static void note(const tfi_options *o, int warning, const char *message)
{
    if (o->note)
        o->note(o->note_ctx, warning, message);
}

static int same_action(const tf_action *a, const tf_action *b)
{
    return a->type == b->type && a->stage == b->stage && a->microbatch == b->microbatch &&
           a->rank == b->rank && a->pair == b->pair;
}

/* Fails naming the first action of `has` that step `lacks` does not hold. */
static int fail_missing(const tfi_run *run, int r, const tfi_step *has, const tfi_step *lacks,
                        tf_error *err)
{
    for (int i = 0; i < has->n_acts; i++) {
        const tf_action *a = &has->acts[i].a;
        if (tfi_step_find(lacks, a->type, a->stage, a->microbatch))
            continue;
        char cell[32], lacks_name[32], has_name[32];
        return tf_fail(err, TF_EINVAL, "%s%s: action PP:%s is missing from %s (%s has it): "
                       "every step must run the same actions; choose complete steps with "
                       "--steps", run->label, run->traces[r].path, tf_action_format(a, cell),
                       tfi_step_label(lacks->id, lacks_name), tfi_step_label(has->id, has_name));
    }
    return 0;
}

/* Rank r's steps must hold the same actions as its first; reordered[k]
 * is set where step k runs them in another order. */
static int check_steps_alike(const tfi_run *run, int r, char *reordered, tf_error *err)
{
    const tfi_step *first = tfi_run_step(run, r, 0);
    for (int k = 1; k < run->n_steps; k++) {
        const tfi_step *s = tfi_run_step(run, r, k);
        int rc = fail_missing(run, r, first, s, err);
        if (rc == 0)
            rc = fail_missing(run, r, s, first, err);
        if (rc)
            return rc;
        for (int i = 0; i < s->n_acts && !reordered[k]; i++)
            reordered[k] = !same_action(&s->acts[i].a, &first->acts[i].a);
    }
    return 0;
}

/* Each rank's actions in step k as order cells ("0F3", or a pair's
 * "(0F7;7B3)OVERLAP_F_B"), in rows[r][i]. */
static int make_cells(const tfi_run *run, int k, char ***rows, int *row_len, int *microbatches,
                      tf_error *err)
{
    for (int r = 0; r < run->ranks; r++) {
        const tfi_step *s = tfi_run_step(run, r, k);
        rows[r] = calloc((size_t)s->n_acts + 1, sizeof *rows[r]);
        if (!rows[r])
            return tf_fail(err, TF_ENOMEM, "out of memory");
        int cells = 0;
        for (int i = 0; i < s->n_acts; i++) {
            const tf_action *a = &s->acts[i].a;
            char cell[TF_CELL_MAX];
            int from = i;
            if (a->pair == TF_PAIR_FIRST && i + 1 < s->n_acts)
                tf_pair_format(a, &s->acts[++i].a, cell);
            else
                tf_action_format(a, cell);
            if (!(rows[r][cells++] = strdup(cell)))
                return tf_fail(err, TF_ENOMEM, "out of memory");
            for (int k = from; k <= i; k++)
                if (s->acts[k].a.microbatch + 1 > *microbatches)
                    *microbatches = s->acts[k].a.microbatch + 1;
        }
        row_len[r] = cells;
    }
    return 0;
}

static void free_cells(char ***rows, int ranks)
{
    for (int r = 0; rows && r < ranks; r++) {
        for (int i = 0; rows[r] && rows[r][i]; i++)
            free(rows[r][i]);
        free(rows[r]);
    }
    free(rows);
}

/* Builds the schedule from step k's per-rank orders. */
static int schedule_of_step(const tfi_run *run, int k, tf_schedule *out, tf_error *err)
{
    char ***rows = calloc((size_t)run->ranks, sizeof *rows);
    int *row_len = calloc((size_t)run->ranks, sizeof *row_len);
    int microbatches = 0;
    int rc = rows && row_len ? 0 : tf_fail(err, TF_ENOMEM, "out of memory");
    if (rc == 0)
        rc = make_cells(run, k, rows, row_len, &microbatches, err);
    if (rc == 0) {
        char where[256];
        char step[32];
        snprintf(where, sizeof where, "%sthe actions in %s of the traces", run->label,
                 tfi_step_label(run->steps[k], step));
        tf_cell_rows cells = {(const char *const *const *)rows, row_len, run->ranks};
        rc = tf_schedule_from_cells(&cells, microbatches, where, out, err);
    }
    free_cells(rows, run->ranks);
    free(row_len);
    return rc;
}

/* A stage that events name (a send to it, say) but no trace runs means the
 * trace of its rank is missing. */
static int check_stages_covered(const tfi_run *run, const tf_schedule *s, tf_error *err)
{
    for (int r = 0; r < run->ranks; r++) {
        int named = run->by_rank[r].max_stage_named;
        if (named >= s->stages)
            return tf_fail(err, TF_EINVAL, "%s%s exchanges data with stage %d, which no given "
                           "trace runs (the traces given run stages 0 to %d): missing rank, "
                           "give one trace per rank", run->label, run->traces[r].path, named,
                           s->stages - 1);
    }
    return 0;
}

/* Names s after the built-in schedule whose order it is, if any. */
static void name_schedule(tf_schedule *s)
{
    char names[256];
    snprintf(names, sizeof names, "%s", tf_schedule_builtin_names());
    snprintf(s->name, sizeof s->name, "imported");
    for (char *save = NULL, *name = strtok_r(names, " ", &save); name;
         name = strtok_r(NULL, " ", &save)) {
        tf_schedule b;
        if (tf_schedule_build(name, s->ranks, s->stages_per_rank, s->microbatches, &b, NULL))
            continue;
        int same = b.n_actions == s->n_actions;
        for (int i = 0; same && i < s->n_actions; i++)
            same = same_action(&b.actions[i], &s->actions[i]);
        tf_schedule_free(&b);
        if (same) {
            snprintf(s->name, sizeof s->name, "%s", name);
            return;
        }
    }
}

/* The traces of the ranks that a cycle message of tf_dag_build names
 * ("0F0(rank 0) -> ..."), or all of them when it names none. */
static void cycle_files(const tfi_run *run, const char *cycle, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    char *listed = calloc((size_t)run->ranks, 1);
    for (const char *p = cycle; listed && (p = strstr(p, "(rank ")) != NULL; p++) {
        int r = atoi(p + 6);
        if (r < 0 || r >= run->ranks || listed[r] || used + 8 >= size)
            continue;
        listed[r] = 1;
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "",
                                 run->traces[r].path);
    }
    for (int r = 0; used == 0 && r < run->ranks && used + 8 < size; r++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", r ? ", " : "",
                                 run->traces[r].path);
    free(listed);
}

/* The order of step k must be one tf-plan can plan: no cycle. */
static int check_plannable(const tfi_run *run, int k, const tf_schedule *s, tf_error *err)
{
    tf_dag g;
    tf_error why = {0};
    int rc = tf_dag_build(s, 0.0, &g, &why);
    if (rc == 0) {
        tf_dag_free(&g);
        return 0;
    }
    if (rc != TF_ECYCLE)
        return tf_fail(err, rc, "%s", why.msg);
    char step[32], files[400];
    cycle_files(run, why.msg, files, sizeof files);
    const char *cycle = strstr(why.msg, "cycle: ");
    return tf_fail(err, TF_ECYCLE, "%sthe order the traces ran in %s deadlocks, so tf-plan "
                   "cannot plan it (%s): these actions wait on each other in a cycle: %s; "
                   "every action must follow the ones it needs (its stage's previous "
                   "microbatch, its own F before its B), so the traces are of different runs "
                   "or were edited", run->label, tfi_step_label(run->steps[k], step), files,
                   cycle ? cycle + 7 : why.msg);
}

/* Step k's order, when it differs from the first's, must be plannable too. */
static int check_other_order(const tfi_run *run, int k, tf_error *err)
{
    tf_schedule s;
    int rc = schedule_of_step(run, k, &s, err);
    if (rc == 0)
        rc = check_plannable(run, k, &s, err);
    tf_schedule_free(&s);
    return rc;
}

/* Every step holds the same actions; those run in another order than the
 * first's are checked and noted. */
static int check_steps(const tfi_run *run, const tfi_options *o, tf_error *err)
{
    char *reordered = calloc((size_t)run->n_steps + 1, 1);
    int rc = reordered ? 0 : tf_fail(err, TF_ENOMEM, "out of memory"), differ = 0;
    for (int r = 0; rc == 0 && r < run->ranks; r++)
        rc = check_steps_alike(run, r, reordered, err);
    for (int k = 1; rc == 0 && k < run->n_steps; k++)
        if (reordered[k] && (rc = check_other_order(run, k, err)) == 0)
            differ++;
    free(reordered);
    if (rc == 0 && differ) {
        char message[200], step[32];
        snprintf(message, sizeof message, "%d of the %d steps run their actions in another "
                 "order than %s, whose order is used", differ, run->n_steps,
                 tfi_step_label(run->steps[0], step));
        note(o, 1, message);
    }
    return rc;
}

int tfi_observed_schedule(const tfi_run *run, const tfi_options *o, tf_schedule *out,
                          tf_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = check_steps(run, o, err);
    if (rc == 0)
        rc = schedule_of_step(run, 0, out, err);
    if (rc == 0)
        rc = check_stages_covered(run, out, err);
    if (rc == 0)
        rc = check_plannable(run, 0, out, err);
    if (rc) {
        tf_schedule_free(out);
        return rc;
    }
    name_schedule(out);
    return 0;
}
