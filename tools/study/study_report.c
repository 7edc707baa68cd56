/* study_report.c - the results as CSV and as a markdown summary. */
#include "study.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "study_text.h"
#include "tf/profile.h"
#include "tf/util.h"

static const char *const csv_columns =
    "schedule,ranks,stages_per_rank,stages,layers_per_stage_min,layers_per_stage_max,"
    "microbatches,max_freeze_ratio,p2p_ms,batch_ms_unfrozen,batch_ms_all_frozen,"
    "batch_ms_planned,speedup,bubble_ratio_unfrozen,bubble_ratio_planned,mean_freeze_ratio,"
    "tokens_per_s_unfrozen,tokens_per_s_planned,tokens_per_s_per_gpu_planned,lp_variables,"
    "lp_constraints,solve_seconds";
/* Appended when the study has bytes (docs/tf-study.md). */
static const char *const csv_memory_columns =
    ",recompute,sequence_parallel,peak_memory_gib,peak_activation_gib,fits,fit_by";

static const double GiB = 1073741824.0;

/* What a plan needed to fit: "none", "freeze", "recompute" or both. */
static const char *fit_by(const tf_study_row *w)
{
    static const char *const names[4] = {"none", "freeze", "recompute", "freeze+recompute"};
    return w->fits == 1 ? names[w->fit_freezes + 2 * w->fit_recomputes] : "";
}

/* The memory columns of one row. */
static void csv_memory(st_text *t, const tf_study_row *w)
{
    const tf_study_config *c = &w->config;
    st_printf(t, ",%s,%s,%.10g,%.10g,%s,%s", tf_recompute_name((tf_recompute)c->recompute),
              c->sequence_parallel ? "true" : "false", w->peak_memory_bytes / GiB,
              w->peak_activation_bytes / GiB,
              w->fits < 0 ? "" : w->fits ? "true" : "false", fit_by(w));
}

int tf_study_to_csv(const tf_study_result *r, char **text, tf_error *err)
{
    st_text t = {0};
    st_printf(&t, "%s%s\n", csv_columns, r->has_memory ? csv_memory_columns : "");
    for (int i = 0; i < r->n_rows; i++) {
        const tf_study_row *w = &r->rows[i];
        if (w->status != TF_STUDY_SOLVED)
            continue;
        const tf_study_config *c = &w->config;
        /* %.10g keeps every figure the planner computes to well below any
         * timer's resolution while staying short. */
        st_printf(&t, "%s,%d,%d,%d,%d,%d,%d,%.10g,%.10g,", c->schedule, c->ranks,
                  c->stages_per_rank, w->stages, w->layers_per_stage_min,
                  w->layers_per_stage_max, c->microbatches, c->max_freeze_ratio, c->p2p_ms);
        st_printf(&t, "%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,", w->batch_ms_unfrozen,
                  w->batch_ms_all_frozen, w->batch_ms_planned, w->speedup,
                  w->bubble_ratio_unfrozen, w->bubble_ratio_planned, w->mean_freeze_ratio);
        st_printf(&t, "%.10g,%.10g,%.10g,%d,%d,%.6f", w->tokens_per_s_unfrozen,
                  w->tokens_per_s_planned, w->tokens_per_s_planned / c->ranks, w->lp_variables,
                  w->lp_constraints, w->solve_seconds);
        if (r->has_memory)
            csv_memory(&t, w);
        st_printf(&t, "\n");
    }
    if (st_finish(&t, text))
        return tf_fail(err, TF_ENOMEM, "out of memory writing the CSV");
    return 0;
}

/* ---- profiles --------------------------------------------------------- */

void tf_study_profile_name(const tf_study_config *c, char *buf, size_t size)
{
    char memory[48] = "";
    if (c->recompute >= 0)
        snprintf(memory, sizeof memory, "-%s-sp%d", tf_recompute_name((tf_recompute)c->recompute),
                 c->sequence_parallel);
    snprintf(buf, size, "%s-p%d-v%d-m%d-cap%g-p2p%g%s.profile.json", c->schedule, c->ranks,
             c->stages_per_rank, c->microbatches, c->max_freeze_ratio, c->p2p_ms, memory);
}

int tf_study_write_outputs(const tf_study *s, const tf_study_result *r, const char *csv_path,
                           const char *csv, const char *plot_path, const char *plot,
                           size_t plot_len, const char *profile_dir, tf_error *err)
{
    int max_files = 2 + (profile_dir ? r->n_rows : 0), count = 0, rc = 0;
    const char **paths = calloc((size_t)max_files + 1, sizeof *paths);
    const void **data = calloc((size_t)max_files + 1, sizeof *data);
    size_t *lens = calloc((size_t)max_files + 1, sizeof *lens);
    if (!paths || !data || !lens) {
        rc = tf_fail(err, TF_ENOMEM, "out of memory writing the study's outputs");
        goto done;
    }
    if (csv_path) {
        paths[count] = csv_path;
        data[count] = csv;
        lens[count++] = strlen(csv);
    }
    if (plot_path) {
        paths[count] = plot_path;
        data[count] = plot;
        lens[count++] = plot_len;
    }
    /* Entries from here on are profiles whose path and text are ours. */
    const int first_profile = count;
    if (profile_dir && mkdir(profile_dir, 0777) != 0 && errno != EEXIST) {
        rc = tf_fail(err, TF_EIO, "%s: cannot create the directory: %s", profile_dir,
                     strerror(errno));
        goto done;
    }
    for (int i = 0; profile_dir && i < r->n_rows && !rc; i++) {
        const tf_study_row *w = &r->rows[i];
        if (w->status != TF_STUDY_SOLVED)
            continue;
        char name[256];
        tf_study_profile_name(&w->config, name, sizeof name);
        size_t path_size = strlen(profile_dir) + strlen(name) + 2;
        char *path = malloc(path_size), *text = NULL;
        if (!path) {
            rc = tf_fail(err, TF_ENOMEM, "out of memory writing the study's profiles");
            break;
        }
        snprintf(path, path_size, "%s/%s", profile_dir, name);
        /* A profile must not replace the CSV, the plot or the study's own
         * measured profile. */
        for (int k = 0; k < first_profile && !rc; k++)
            if (tf_same_file(paths[k], path))
                rc = tf_fail(err, TF_EINVAL, "--profiles: the profile %s would replace %s", path,
                             paths[k]);
        if (!rc && s->profile_path[0] && tf_same_file(s->profile_path, path))
            rc = tf_fail(err, TF_EINVAL, "--profiles: the profile %s would replace the study's "
                         "measured profile", path);
        for (int k = first_profile; k < count && !rc; k++)
            if (strcmp(paths[k], path) == 0)
                rc = tf_fail(err, TF_EINVAL,
                             "--profiles: two configurations would both be written to %s (caps "
                             "or p2p lags that differ beyond 6 significant digits)",
                             path);
        tf_profile p;
        if (!rc && (rc = tf_study_make_profile(s, &w->config, &p, err)) == 0) {
            rc = tf_profile_to_json(&p, &text, err);
            tf_profile_free(&p);
        }
        if (rc) {
            free(path);
            break;
        }
        paths[count] = path;
        data[count] = text;
        lens[count++] = strlen(text);
    }
    if (!rc)
        rc = tf_write_files_atomic(count, paths, data, lens, err);
    for (int k = first_profile; k < count; k++) {
        free((void *)paths[k]);
        free((void *)data[k]);
    }
done:
    free(paths);
    free(data);
    free(lens);
    return rc;
}

/* ---- markdown summary ------------------------------------------------- */

/* A table of rows; first (may be NULL) names an extra leading column. */
static void table_header(FILE *f, const char *first)
{
    if (first)
        fprintf(f, "| %s ", first);
    fprintf(f, "| schedule | ranks | stages/rank | microbatches | cap | p2p ms | "
               "batch ms unfrozen -> planned | speedup | tokens/s planned | tokens/s per GPU | "
               "bubble unfrozen -> planned | mean freeze |\n");
    if (first)
        fprintf(f, "|---");
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
}

static void table_row(FILE *f, const char *first, const tf_study_row *w)
{
    const tf_study_config *c = &w->config;
    if (first)
        fprintf(f, "| %s ", first);
    fprintf(f,
            "| %s | %d | %d | %d | %.2g | %g | %.1f -> %.1f | %.3fx | %.0f | %.0f | "
            "%.1f%% -> %.1f%% | %.2f |\n",
            c->schedule, c->ranks, c->stages_per_rank, c->microbatches,
            c->max_freeze_ratio, c->p2p_ms, w->batch_ms_unfrozen, w->batch_ms_planned,
            w->speedup, w->tokens_per_s_planned, w->tokens_per_s_planned / c->ranks,
            100.0 * w->bubble_ratio_unfrozen, 100.0 * w->bubble_ratio_planned,
            w->mean_freeze_ratio);
}

/* Index of the best solved row matching the filter (by planned tokens/s,
 * per GPU if per_gpu) among those that fit the GPU's memory, the first on
 * ties; -1 if none. */
static int best_row(const tf_study_result *r, const char *schedule, int ranks, int per_gpu)
{
    int best = -1;
    double best_value = 0.0;
    for (int i = 0; i < r->n_rows; i++) {
        const tf_study_row *w = &r->rows[i];
        if (w->status != TF_STUDY_SOLVED || w->fits == 0 ||
            (schedule && strcmp(w->config.schedule, schedule) != 0) ||
            (ranks && w->config.ranks != ranks))
            continue;
        double value = w->tokens_per_s_planned / (per_gpu ? w->config.ranks : 1);
        if (best < 0 || value > best_value) {
            best = i;
            best_value = value;
        }
    }
    return best;
}

/* The memory of every solved row, and the fastest that fits. */
static void print_memory(const tf_study_result *r, FILE *f)
{
    int fit = 0, limited = r->memory_limit_bytes > 0;
    for (int i = 0; i < r->n_rows; i++)
        fit += r->rows[i].status == TF_STUDY_SOLVED && r->rows[i].fits != 0;
    fprintf(f, "\n## Memory\n\nPeak: the largest rank's bytes over the schedule's order under "
               "the plan (static + activations); activations: the transformer layers' alone.\n");
    if (limited) {
        fprintf(f, "Limit %.2f GiB per GPU: %d of %d planned configurations fit.\n",
                r->memory_limit_bytes / GiB, fit, r->solved);
        int best = best_row(r, NULL, 0, 1);
        if (best >= 0) {
            const tf_study_row *w = &r->rows[best];
            fprintf(f, "Fastest that fits (tokens/s per GPU): %s, %d ranks x %d, %d "
                       "microbatches, cap %.2g, recompute %s: %.0f tokens/s per GPU, peak "
                       "%.2f GiB (fit by %s).\n",
                    w->config.schedule, w->config.ranks, w->config.stages_per_rank,
                    w->config.microbatches, w->config.max_freeze_ratio,
                    tf_recompute_name((tf_recompute)w->config.recompute),
                    w->tokens_per_s_planned / w->config.ranks, w->peak_memory_bytes / GiB,
                    fit_by(w));
        } else {
            fprintf(f, "No configuration fits.\n");
        }
    }
    fprintf(f, "\n| schedule | ranks | stages/rank | microbatches | cap | recompute | seq. "
               "parallel | peak GiB | activations GiB | fits | fit by | tokens/s per GPU |\n"
               "|---|---:|---:|---:|---:|---|---|---:|---:|---|---|---:|\n");
    for (int i = 0; i < r->n_rows; i++) {
        const tf_study_row *w = &r->rows[i];
        const tf_study_config *c = &w->config;
        if (w->status != TF_STUDY_SOLVED)
            continue;
        fprintf(f, "| %s | %d | %d | %d | %.2g | %s | %s | %.2f | %.2f | %s | %s | %.0f |\n",
                c->schedule, c->ranks, c->stages_per_rank, c->microbatches, c->max_freeze_ratio,
                tf_recompute_name((tf_recompute)c->recompute), c->sequence_parallel ? "yes" : "no",
                w->peak_memory_bytes / GiB, w->peak_activation_bytes / GiB,
                w->fits < 0 ? "-" : w->fits ? "yes" : "**no**", w->fits == 1 ? fit_by(w) : "-",
                w->tokens_per_s_planned / c->ranks);
    }
}

/* Has an earlier solved row the same schedule (or rank count)? */
static int seen_before(const tf_study_result *r, int i, int by_ranks)
{
    for (int j = 0; j < i; j++) {
        const tf_study_row *a = &r->rows[j], *b = &r->rows[i];
        if (a->status != TF_STUDY_SOLVED)
            continue;
        if (by_ranks ? a->config.ranks == b->config.ranks
                     : strcmp(a->config.schedule, b->config.schedule) == 0)
            return 1;
    }
    return 0;
}

void tf_study_print_summary(const tf_study_result *r, FILE *f)
{
    fprintf(f, "# tf-study: %s\n\n", r->name);
    fprintf(f, "%d %s: %d solved, %d skipped, %d failed (%d %s, %.1f s).\n", r->n_rows,
            tf_plural(r->n_rows, "configuration", "configurations"), r->solved, r->skipped,
            r->failed, r->threads, tf_plural(r->threads, "thread", "threads"), r->wall_seconds);
    if (!r->solved) {
        fprintf(f, "\nNo configuration could be planned.\n");
        return;
    }
    fprintf(f, "Throughput is tokens/s of one pipeline under the freeze plan; per GPU divides "
               "it by the ranks.\nBubble = idle time / (ranks x batch time).\n");
    if (r->memory_limit_bytes > 0)
        fprintf(f, "Only configurations that fit %.2f GiB per GPU are ranked (## Memory).\n",
                r->memory_limit_bytes / GiB);

    fprintf(f, "\n## Best configuration per pipeline depth (most tokens/s)\n\n");
    table_header(f, NULL);
    for (int i = 0; i < r->n_rows; i++) {
        if (r->rows[i].status != TF_STUDY_SOLVED || seen_before(r, i, 1))
            continue;
        int best = best_row(r, NULL, r->rows[i].config.ranks, 0);
        if (best >= 0)
            table_row(f, NULL, &r->rows[best]);
        else
            fprintf(f, "| (no %d-rank configuration fits) |\n", r->rows[i].config.ranks);
    }

    fprintf(f, "\n## Best configuration per schedule (most tokens/s per GPU)\n\n");
    table_header(f, "rank");
    int n_schedules = 0;
    for (int i = 0; i < r->n_rows; i++)
        if (r->rows[i].status == TF_STUDY_SOLVED && !seen_before(r, i, 0))
            n_schedules++;
    /* Rank the schedules by their best per-GPU throughput. */
    int *best = calloc((size_t)n_schedules + 1, sizeof *best);
    int count = 0;
    for (int i = 0; i < r->n_rows && best; i++)
        if (r->rows[i].status == TF_STUDY_SOLVED && !seen_before(r, i, 0))
            if ((best[count] = best_row(r, r->rows[i].config.schedule, 0, 1)) >= 0)
                count++;
    for (int a = 1; a < count; a++)
        for (int b = a; b > 0; b--) {
            const tf_study_row *x = &r->rows[best[b - 1]], *y = &r->rows[best[b]];
            if (y->tokens_per_s_planned / y->config.ranks <=
                x->tokens_per_s_planned / x->config.ranks)
                break;
            int swap = best[b];
            best[b] = best[b - 1];
            best[b - 1] = swap;
        }
    for (int k = 0; k < count; k++) {
        char label[32];
        snprintf(label, sizeof label, "%d", k + 1);
        table_row(f, label, &r->rows[best[k]]);
    }
    free(best);

    fprintf(f, "\n## What freezing buys, per schedule\n\n"
               "| schedule | configurations | speedup min | median | max | "
               "mean bubble unfrozen -> planned | mean freeze ratio |\n"
               "|---|---:|---:|---:|---:|---:|---:|\n");
    double *speedups = malloc(((size_t)r->n_rows + 1) * sizeof *speedups);
    for (int i = 0; i < r->n_rows && speedups; i++) {
        if (r->rows[i].status != TF_STUDY_SOLVED || seen_before(r, i, 0))
            continue;
        const char *name = r->rows[i].config.schedule;
        int n = 0;
        double bubble_u = 0, bubble_p = 0, freeze = 0;
        for (int j = i; j < r->n_rows; j++) {
            const tf_study_row *w = &r->rows[j];
            if (w->status != TF_STUDY_SOLVED || strcmp(w->config.schedule, name) != 0)
                continue;
            speedups[n++] = w->speedup;
            bubble_u += w->bubble_ratio_unfrozen;
            bubble_p += w->bubble_ratio_planned;
            freeze += w->mean_freeze_ratio;
        }
        double median = tf_median(speedups, n); /* sorts: [0] and [n - 1] are the extremes */
        fprintf(f, "| %s | %d | %.3fx | %.3fx | %.3fx | %.1f%% -> %.1f%% | %.2f |\n", name, n,
                speedups[0], median, speedups[n - 1], 100.0 * bubble_u / n,
                100.0 * bubble_p / n, freeze / n);
    }
    free(speedups);
    if (r->has_memory)
        print_memory(r, f);
}
