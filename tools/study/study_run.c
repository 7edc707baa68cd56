/* study_run.c - solving every configuration of a sweep on a pool of
 * threads.
 *
 * Thread safety: the study is only read; every configuration builds its own
 * schedule, DAG, profile and plan, and the planner makes one lp_solve model
 * (lprec) per solve.  lp_solve 5.5 keeps one piece of process-wide state on
 * this path: the first make_lp initialises its BLAS function pointers (checked
 * in a debugger: init_BLAS, called from make_lp and LUSOL_create).
 * tf_planner_init on the calling thread does that before any worker starts,
 * so the workers only read it.  One more static remains: LUSOL's rook-pivoting
 * routine (LU1MXR) keeps its loop variables in static locals.  lp_solve
 * switches a factorisation to rook pivoting only after repeated numerical
 * trouble (LUSOL_tightenpivot); two solves doing so at the same moment could
 * disturb each other.  -j 1 rules that out.
 */
#include "study.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tf/planner.h"
#include "tf/schedule.h"
#include "tf/util.h"

void tf_study_run_options_init(tf_study_run_options *o)
{
    memset(o, 0, sizeof *o);
    o->threads = 0;
    o->objective = TF_OBJECTIVE_LEAST_FREEZE;
    o->solver = TF_SOLVER_AUTO;
}

/* Shared state of one run; the lock guards next, done and the callback. */
typedef struct run_state {
    const tf_study *study;
    const tf_study_run_options *options;
    const tf_study_config *configs;
    const int *order;       /* configurations, largest first */
    tf_study_row *rows;     /* rows[i] belongs to configs[i]; each written by one worker */
    int n;
    int next;
    int done;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* signalled when done grows */
} run_state;

static void *worker(void *arg)
{
    run_state *st = arg;
    for (;;) {
        pthread_mutex_lock(&st->lock);
        int k = st->next < st->n ? st->next++ : -1;
        pthread_mutex_unlock(&st->lock);
        if (k < 0)
            return NULL;
        int i = st->order[k];
        tf_study_solve_with(st->study, &st->configs[i], st->options->objective,
                            st->options->solver, &st->rows[i]);
        pthread_mutex_lock(&st->lock);
        st->done++;
        if (st->options->progress)
            st->options->progress(st->options->progress_ctx, st->done, st->n);
        pthread_cond_signal(&st->changed);
        pthread_mutex_unlock(&st->lock);
    }
}

/* While the workers run: the progress callback once a second too, so that
 * one configuration solving for minutes still shows the run is alive. */
static void heartbeat(run_state *st)
{
    pthread_mutex_lock(&st->lock);
    while (st->done < st->n) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        /* A finished configuration has reported itself; only a quiet
         * second calls for a beat. */
        int quiet = pthread_cond_timedwait(&st->changed, &st->lock, &until) == ETIMEDOUT;
        if (quiet && st->options->progress && st->done < st->n)
            st->options->progress(st->options->progress_ctx, st->done, st->n);
    }
    pthread_mutex_unlock(&st->lock);
}

/* Work estimate of a configuration: its action count. */
static double size_of(const tf_study_config *c)
{
    return (double)c->ranks * c->stages_per_rank * c->microbatches *
           (tf_schedule_splits_backward(c->schedule) ? 3 : 2);
}

/* Largest first, so a big LP does not start last and leave the other
 * threads idle; qsort_r is not C11, so an insertion sort (sweeps are small
 * next to the solves). */
static void order_by_size(const tf_study_config *configs, int n, int *order)
{
    for (int i = 0; i < n; i++) {
        int j = i;
        double size = size_of(&configs[i]);
        while (j > 0 && size_of(&configs[order[j - 1]]) < size) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1024 ? (int)n : 1;
}

int tf_study_run(const tf_study *s, const tf_study_run_options *o, tf_study_result *out,
                 tf_error *err)
{
    memset(out, 0, sizeof *out);
    tf_study_run_options defaults;
    if (!o) {
        tf_study_run_options_init(&defaults);
        o = &defaults;
    }
    double started = tf_now_seconds();
    tf_study_config *configs;
    int n;
    int rc = tf_study_configs(s, &configs, &n, err);
    if (rc)
        return rc;
    out->rows = calloc((size_t)n + 1, sizeof *out->rows);
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    if (!out->rows || !order) {
        free(configs);
        free(order);
        tf_study_result_free(out);
        return tf_fail(err, TF_ENOMEM, "out of memory for %d configurations", n);
    }
    out->n_rows = n;
    snprintf(out->name, sizeof out->name, "%s", s->name);
    order_by_size(configs, n, order);

    int threads = o->threads > 0 ? o->threads : online_cpus();
    /* Without lp_solve's shared state set up, workers would race to set
     * it: one thread then, whose solves meet what failed here on their own. */
    if (tf_planner_init() != 0)
        threads = 1;
    if (threads > n)
        threads = n > 0 ? n : 1;
    run_state st = {.study = s, .options = o, .configs = configs, .order = order,
                    .rows = out->rows, .n = n};
    pthread_mutex_init(&st.lock, NULL);
    pthread_cond_init(&st.changed, NULL);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    int started_threads = 0;
    if (ids)
        for (; started_threads < threads; started_threads++)
            if (pthread_create(&ids[started_threads], NULL, worker, &st) != 0)
                break;
    /* With no thread at all, solve here rather than fail: same results. */
    if (started_threads == 0)
        worker(&st);
    else
        heartbeat(&st);
    for (int t = 0; t < started_threads; t++)
        pthread_join(ids[t], NULL);
    pthread_cond_destroy(&st.changed);
    pthread_mutex_destroy(&st.lock);
    free(ids);
    free(order);
    free(configs);

    out->threads = started_threads ? started_threads : 1;
    for (int i = 0; i < n; i++) {
        const tf_study_row *r = &out->rows[i];
        out->solved += r->status == TF_STUDY_SOLVED;
        out->skipped += r->status == TF_STUDY_SKIPPED;
        out->failed += r->status == TF_STUDY_FAILED;
    }
    /* Stages per rank "varies" only within a schedule: across schedules it
     * follows from the schedule's name. */
    for (int i = 1; i < n; i++) {
        const tf_study_config *a = &out->rows[i - 1].config, *b = &out->rows[i].config;
        if (strcmp(a->schedule, b->schedule) == 0 && a->stages_per_rank != b->stages_per_rank)
            out->vary_stages_per_rank = 1;
    }
    out->vary_ranks = s->n_ranks > 1;
    out->vary_microbatches = s->n_microbatches > 1;
    out->vary_cap = s->n_max_freeze_ratio > 1;
    out->vary_p2p = s->n_p2p_ms > 1;
    out->vary_recompute = s->n_recompute > 1;
    out->vary_sequence_parallel = s->n_sequence_parallel > 1;
    out->has_memory = s->has_bytes;
    out->memory_limit_bytes =
        s->gpu_memory_bytes > 0 ? s->gpu_memory_bytes - s->memory_headroom_bytes : 0.0;
    out->wall_seconds = tf_now_seconds() - started;
    return 0;
}

void tf_study_result_free(tf_study_result *r)
{
    free(r->rows);
    memset(r, 0, sizeof *r);
}
