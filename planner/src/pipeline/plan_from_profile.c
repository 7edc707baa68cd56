/* plan_from_profile.c - the planner (tf/planner.h): a profile's durations,
 * its DAG, the unfrozen and all-frozen bounds, its memory and limits, the
 * freeze LP through the chosen solver, and the plan (tf_plan_from_profile);
 * or the same without the LP (tf_plan_unfrozen).
 *
 * The one file of the library above both model/ (schedules, profiles, the
 * DAG, memory, plans) and solve/ (the freeze LP): it calls down into each,
 * and neither calls it.  render/ calls it to draw a profile as a plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/plan_internal.h"
#include "solve/freeze_common.h"
#include "tf/dag.h"
#include "tf/freeze.h"
#include "tf/planner.h"

int tf_planner_init(void)
{
    return tf_freeze_lpsolve_init();
}

void tf_plan_options_init(tf_plan_options *o)
{
    o->objective = TF_OBJECTIVE_LEAST_FREEZE;
    o->max_freeze_ratio = -1.0;
    o->max_action_ratio = 1.0;
    o->solver = TF_SOLVER_AUTO;
    tf_freeze_control_init(&o->control);
    o->memory_limit = 0.0;
    o->freeze_saves_memory = 1;
    o->aux_margin = TF_AUX_DEFAULT_MARGIN;
}

/* The schedule the LP solves, with what it needs: the profile's own, or
 * with R actions placed before the backwards of recomputing stages. */
typedef struct solved_schedule {
    tf_schedule schedule;      /* empty when the profile's own is solved */
    tf_dag dag;
    double *max_ms, *min_ms;   /* the durations the plan reports */
    double *solve_min_ms;      /* min_ms after the per-action cap's transform */
    double *recompute_ms;      /* NULL without R actions */
    tf_memory_model memory;    /* with the profile's bytes; empty without */
} solved_schedule;

/* Everything one plan takes, freed together. */
typedef struct plan_work {
    const tf_profile *p;
    const tf_plan_options *o;
    int solve;                 /* 0: the unfrozen plan, no LP */
    double *caps;              /* per stage: the caps asked for */
    double *solve_caps;        /* after the per-action cap's transform */
    double *limit;             /* per rank: the memory limit, or NULL */
    int binds;                 /* the limit binds: memory rows in the LP */
    solved_schedule lp;
    tf_freeze_result fr;
} plan_work;

static void solved_free(solved_schedule *x)
{
    tf_schedule_free(&x->schedule);
    tf_dag_free(&x->dag);
    free(x->max_ms);
    free(x->min_ms);
    free(x->solve_min_ms);
    free(x->recompute_ms);
    tf_memory_model_free(&x->memory);
}

static void work_free(plan_work *w)
{
    free(w->caps);
    free(w->solve_caps);
    free(w->limit);
    solved_free(&w->lp);
    tf_freeze_result_free(&w->fr);
}

/* The schedule solved: the profile's, or a copy with R actions. */
static const tf_schedule *lp_schedule(const plan_work *w)
{
    return w->lp.schedule.actions ? &w->lp.schedule : &w->p->schedule;
}

/* The memory options of this plan: whether freezing saves bytes, and the
 * caps (a stage capped at 0 never freezes). */
static tf_memory_options memory_options(const plan_work *w)
{
    tf_memory_options mo = {w->o ? w->o->freeze_saves_memory : 1, w->caps};
    return mo;
}

/* The limit per rank (the option's over the profile's), checked against
 * each rank's static bytes, which no freezing can lower. */
static int set_limit(plan_work *w, tf_error *err)
{
    const tf_profile *p = w->p;
    const int ranks = p->schedule.ranks;
    const double option = w->o ? w->o->memory_limit : 0.0;
    if (option > 0 && !p->memory)
        return tf_fail(err, TF_EINVAL, "a memory limit needs a profile with memory fields "
                       "(static_bytes, activation_bytes per stage; docs/formats.md)");
    if (!p->memory || (option <= 0 && !p->memory_limit))
        return 0;
    w->limit = calloc((size_t)ranks + 1, sizeof *w->limit);
    if (!w->limit)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    for (int r = 0; r < ranks; r++)
        w->limit[r] = option > 0 ? option : p->memory_limit[r];
    for (int r = 0; r < ranks; r++) {
        double fixed = 0.0;
        for (int st = 0; st < p->schedule.stages; st++)
            if (p->schedule.stage_rank[st] == r)
                fixed += p->memory[st].static_bytes;
        if (fixed > w->limit[r])
            return tf_fail(err, TF_EINVAL,
                           "memory limit %.17g bytes (%.3f GiB) on rank %d is below the rank's "
                           "static bytes %.17g (%.3f GiB: weights, gradients, optimizer "
                           "state), which no plan lowers",
                           w->limit[r], w->limit[r] / 1073741824.0, r, fixed,
                           fixed / 1073741824.0);
    }
    return 0;
}

/* The profile's durations (and R's: 0 frozen, 0 unfrozen; its length is
 * recompute_ms x q) for schedule s. */
static int lp_durations(plan_work *w, const tf_schedule *s, tf_error *err)
{
    const int n = s->n_actions;
    solved_schedule *x = &w->lp;
    x->max_ms = malloc(((size_t)n + 1) * sizeof *x->max_ms);
    x->min_ms = malloc(((size_t)n + 1) * sizeof *x->min_ms);
    x->solve_min_ms = malloc(((size_t)n + 1) * sizeof *x->solve_min_ms);
    if (!x->max_ms || !x->min_ms || !x->solve_min_ms)
        return tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", n);
    if (s == &w->p->schedule) {
        tf_profile_durations(w->p, x->max_ms, x->min_ms);
        return 0;
    }
    /* R actions in s shift the profile's actions: map them through a
     * copy of the profile that runs s minus its R. */
    x->recompute_ms = calloc((size_t)n + 1, sizeof *x->recompute_ms);
    double *own_max = malloc(((size_t)w->p->schedule.n_actions + 1) * sizeof *own_max);
    double *own_min = malloc(((size_t)w->p->schedule.n_actions + 1) * sizeof *own_min);
    int rc = x->recompute_ms && own_max && own_min ? 0 : TF_ENOMEM;
    if (!rc) {
        tf_profile_durations(w->p, own_max, own_min);
        for (int i = 0, k = 0; i < n; i++) {
            const tf_action *a = &s->actions[i];
            if (a->type == TF_ACT_R) {
                x->max_ms[i] = x->min_ms[i] = 0.0;
                x->recompute_ms[i] = w->p->memory[a->stage].recompute_ms;
            } else {
                x->max_ms[i] = own_max[k];
                x->min_ms[i] = own_min[k++];
            }
        }
    }
    free(own_max);
    free(own_min);
    return rc ? tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", n) : 0;
}

/* With a binding limit and a stage that can recompute, the schedule with
 * R actions (and its DAG); else the profile's own. */
static int choose_schedule(plan_work *w, tf_error *err)
{
    const tf_profile *p = w->p;
    const tf_schedule *s = &p->schedule;
    unsigned char *recomputes = calloc((size_t)s->stages + 1, 1);
    int any = 0;
    if (!recomputes)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    for (int st = 0; w->solve && w->binds && st < s->stages; st++)
        any |= recomputes[st] = (unsigned char)p->memory[st].recomputes;
    int rc = 0;
    if (any && tf_schedule_insert_recompute(s, recomputes, &w->lp.schedule))
        rc = tf_fail(err, TF_ENOMEM, "out of memory placing recomputation in %d actions",
                     s->n_actions);
    free(recomputes);
    if (!rc && any)
        rc = tf_dag_build(&w->lp.schedule, p->p2p_ms, &w->lp.dag, err);
    if (!rc)
        rc = lp_durations(w, lp_schedule(w), err);
    return rc;
}

/* A per-action cap c < 1 without touching the solvers: each action's
 * frozen time moves to max - c (max - min), so the solvers' ratio r' in
 * [0, 1] is the plan's r = c r', and a stage cap R on the mean of r is R / c
 * on the mean of r' (no cap at all from R >= c on); what a ratio saves in
 * bytes scales by c likewise.  The objectives (least total ratio, smallest
 * largest ratio) scale by c and keep their optimum. */
static void cap_each_action(plan_work *w, double c)
{
    const tf_schedule *s = lp_schedule(w);
    const double *max_ms = w->lp.max_ms;
    double *min_ms = w->lp.solve_min_ms;
    for (int i = 0; i < s->n_actions; i++)
        min_ms[i] = max_ms[i] - c * (max_ms[i] - min_ms[i]);
    for (int st = 0; st < s->stages; st++)
        w->solve_caps[st] = w->solve_caps[st] >= c ? 1.0 : w->solve_caps[st] / c;
    for (int k = 0; k < w->lp.memory.n_events; k++)
        w->lp.memory.events[k].freeze_coef *= c;
}

/* The problem tf_freeze_solve gets. */
static tf_freeze_problem problem_of(const plan_work *w, const tf_dag *dag)
{
    tf_freeze_problem problem;
    tf_freeze_problem_init(&problem);
    problem.schedule = lp_schedule(w);
    problem.dag = dag;
    problem.max_ms = w->lp.max_ms;
    problem.min_ms = w->lp.solve_min_ms;
    problem.cap = w->solve_caps;
    problem.objective = w->o ? w->o->objective : TF_OBJECTIVE_LEAST_FREEZE;
    problem.solver = w->o ? w->o->solver : TF_SOLVER_AUTO;
    if (w->binds) {
        problem.memory = &w->lp.memory;
        problem.memory_limit = w->limit;
        problem.recompute_ms = w->lp.recompute_ms;
    }
    return problem;
}

/* The memory model of the profile's own schedule (for the binding test)
 * or of the solved one. */
static int build_memory(plan_work *w, const tf_schedule *s, tf_error *err)
{
    tf_memory_model_free(&w->lp.memory);
    tf_memory_options mo = memory_options(w);
    return tf_memory_model_build(s, w->p->memory, &mo, &w->lp.memory, err);
}

/* The limit, whether it binds, the schedule to solve and its memory. */
static int prepare(plan_work *w, tf_error *err)
{
    const tf_profile *p = w->p;
    const int stages = p->schedule.stages;
    w->caps = calloc((size_t)stages + 1, sizeof *w->caps);
    w->solve_caps = calloc((size_t)stages + 1, sizeof *w->solve_caps);
    if (!w->caps || !w->solve_caps)
        return tf_fail(err, TF_ENOMEM, "out of memory");
    for (int st = 0; st < stages; st++)
        w->caps[st] = w->solve_caps[st] = w->o && w->o->max_freeze_ratio >= 0
                                              ? w->o->max_freeze_ratio
                                              : p->max_freeze_ratio[st];
    int rc = set_limit(w, err);
    if (!rc && p->memory && (rc = build_memory(w, &p->schedule, err)) == 0)
        w->binds = w->limit && tf_memory_first_over(&w->lp.memory, w->limit) >= 0;
    if (!rc)
        rc = choose_schedule(w, err);
    if (!rc && w->binds && lp_schedule(w) != &p->schedule)
        rc = build_memory(w, lp_schedule(w), err);
    if (!rc)
        memcpy(w->lp.solve_min_ms, w->lp.min_ms,
               (size_t)lp_schedule(w)->n_actions * sizeof *w->lp.min_ms);
    return rc;
}

/* The profile's aux work into the plan, to be placed in its bubbles. */
static int copy_aux(tf_plan *plan, const tf_profile *p, const tf_plan_options *o)
{
    plan->aux_margin = o ? o->aux_margin : TF_AUX_DEFAULT_MARGIN;
    if (!p->n_aux)
        return 0;
    plan->aux_work = malloc((size_t)p->n_aux * sizeof *plan->aux_work);
    if (!plan->aux_work)
        return TF_ENOMEM;
    memcpy(plan->aux_work, p->aux, (size_t)p->n_aux * sizeof *p->aux);
    plan->n_aux_work = p->n_aux;
    return 0;
}

/* The plan's shape and settings, before its actions are filled. */
static int plan_init(tf_plan *plan, const plan_work *w, const tf_schedule *s)
{
    const tf_profile *p = w->p;
    memset(plan, 0, sizeof *plan);
    if (tf_schedule_copy(s, &plan->schedule))
        return TF_ENOMEM;
    plan->max_freeze_ratio = calloc((size_t)s->stages + 1, sizeof *plan->max_freeze_ratio);
    plan->freeze_ratio_stage = calloc((size_t)s->stages + 1, sizeof *plan->freeze_ratio_stage);
    plan->actions = calloc((size_t)s->n_actions + 1, sizeof *plan->actions);
    if (!plan->max_freeze_ratio || !plan->freeze_ratio_stage || !plan->actions)
        return TF_ENOMEM;
    memcpy(plan->max_freeze_ratio, w->caps, (size_t)s->stages * sizeof *w->caps);
    plan->microbatch_tokens = p->microbatch_tokens;
    plan->p2p_ms = p->p2p_ms;
    plan->objective = w->o ? w->o->objective : TF_OBJECTIVE_LEAST_FREEZE;
    plan->max_action_ratio = w->o ? w->o->max_action_ratio : 1.0;
    plan->freeze_saves_memory = w->o ? w->o->freeze_saves_memory : 1;
    if (p->memory) {
        plan->memory = malloc((size_t)s->stages * sizeof *plan->memory);
        if (!plan->memory)
            return TF_ENOMEM;
        memcpy(plan->memory, p->memory, (size_t)s->stages * sizeof *p->memory);
    }
    if (w->limit) {
        plan->memory_limit = malloc(((size_t)s->ranks + 1) * sizeof *plan->memory_limit);
        if (!plan->memory_limit)
            return TF_ENOMEM;
        memcpy(plan->memory_limit, w->limit, (size_t)s->ranks * sizeof *w->limit);
    }
    return copy_aux(plan, p, w->o);
}

/* The solver's name, version and figures into the plan. */
static void record_solver(tf_plan *plan, const tf_freeze_result *fr, tf_solver requested)
{
    snprintf(plan->solver_name, sizeof plan->solver_name, "%s", fr->solver);
    snprintf(plan->solver_requested, sizeof plan->solver_requested, "%s",
             tf_solver_name(requested));
    tf_freeze_solver_version(fr->solver, plan->solver_version, sizeof plan->solver_version);
    snprintf(plan->solver_status, sizeof plan->solver_status, "%s", fr->status);
    snprintf(plan->solver_fallback, sizeof plan->solver_fallback, "%s", fr->fallback);
    plan->solver_variables = fr->variables;
    plan->solver_constraints = fr->constraints;
    plan->solver_seconds = fr->seconds;
}

/* The per-action arrays of the plan: the solved ones, without the R
 * actions that recompute nothing (a zero-length R constrains nothing: its
 * forward and its rank's previous action precede its backward anyway). */
typedef struct kept_arrays {
    tf_schedule schedule;
    double *max_ms, *min_ms, *ratio, *recompute, *duration, *start;
    unsigned char *critical;
} kept_arrays;

static void kept_free(kept_arrays *k)
{
    tf_schedule_free(&k->schedule);
    free(k->max_ms);
    free(k->min_ms);
    free(k->ratio);
    free(k->recompute);
    free(k->duration);
    free(k->start);
    free(k->critical);
}

static int keep_arrays(const plan_work *w, kept_arrays *k)
{
    const tf_schedule *s = lp_schedule(w);
    const int n = s->n_actions;
    unsigned char *keep = malloc((size_t)n + 1);
    int *index = tf_schedule_index(s);
    double **arrays[6] = {&k->max_ms, &k->min_ms, &k->ratio, &k->recompute, &k->duration,
                          &k->start};
    int rc = keep && index ? 0 : TF_ENOMEM;
    for (int j = 0; j < 6 && !rc; j++)
        if (!(*arrays[j] = malloc(((size_t)n + 1) * sizeof **arrays[j])))
            rc = TF_ENOMEM;
    if (!rc && !(k->critical = malloc((size_t)n + 1)))
        rc = TF_ENOMEM;
    for (int i = 0; i < n && !rc; i++) {
        const tf_action *a = &s->actions[i];
        int b = a->type == TF_ACT_R
                    ? tf_schedule_backward_of(s, index, a->stage, a->microbatch) : -1;
        keep[i] = a->type != TF_ACT_R || (b >= 0 && w->fr.recompute[b] > 0.0);
    }
    if (!rc)
        rc = tf_schedule_keep(s, keep, &k->schedule);
    for (int i = 0, m = 0; i < n && !rc; i++) {
        if (!keep[i])
            continue;
        const double *from[6] = {w->lp.max_ms, w->lp.min_ms, w->fr.ratio, w->fr.recompute,
                                 w->fr.duration, w->fr.start};
        for (int j = 0; j < 6; j++)
            (*arrays[j])[m] = from[j][i];
        if (s->actions[i].type == TF_ACT_R)
            (*arrays[0])[m] = w->lp.recompute_ms[i];
        m++;
    }
    free(keep);
    free(index);
    return rc;
}

/* The plan from the solved arrays. */
static int fill_solved(plan_work *w, tf_plan *plan, double unfrozen, double all_frozen,
                       tf_error *err)
{
    kept_arrays k = {0};
    tf_dag g = {0};
    int rc = keep_arrays(w, &k);
    if (rc)
        rc = tf_fail(err, TF_ENOMEM, "out of memory writing the plan");
    if (!rc)
        rc = tf_dag_build(&k.schedule, w->p->p2p_ms, &g, err);
    if (!rc && plan_init(plan, w, &k.schedule))
        rc = tf_fail(err, TF_ENOMEM, "out of memory writing the plan");
    if (!rc) {
        plan->batch_ms_unfrozen = unfrozen;
        plan->batch_ms_all_frozen = all_frozen;
        plan->batch_ms_planned = w->fr.makespan;
        record_solver(plan, &w->fr, w->o ? w->o->solver : TF_SOLVER_AUTO);
        tf_plan_arrays arrays = {k.max_ms, k.min_ms, k.ratio, k.recompute, k.duration,
                                 k.start};
        rc = tf_plan_fill(plan, &g, &arrays, k.critical, err);
    }
    tf_dag_free(&g);
    kept_free(&k);
    return rc;
}

/* The unfrozen plan of the profile's own schedule (no LP). */
static int fill_unfrozen(plan_work *w, const tf_dag *g, tf_plan *plan, double unfrozen,
                         double all_frozen, tf_error *err)
{
    const int n = w->p->schedule.n_actions;
    double *zeros = calloc((size_t)n + 1, sizeof *zeros);
    double *start = malloc(((size_t)n + 1) * sizeof *start);
    unsigned char *critical = malloc((size_t)n + 1);
    int rc = zeros && start && critical && !plan_init(plan, w, &w->p->schedule)
                 ? 0 : tf_fail(err, TF_ENOMEM, "out of memory planning %d actions", n);
    if (!rc) {
        plan->batch_ms_unfrozen = plan->batch_ms_planned = unfrozen;
        plan->batch_ms_all_frozen = all_frozen;
        snprintf(plan->solver_name, sizeof plan->solver_name, "none");
        snprintf(plan->solver_status, sizeof plan->solver_status, "unfrozen");
        tf_dag_longest_path(g, w->lp.max_ms, start);
        tf_plan_arrays arrays = {w->lp.max_ms, w->lp.min_ms, zeros, NULL, w->lp.max_ms, start};
        rc = tf_plan_fill(plan, g, &arrays, critical, err);
    }
    free(zeros);
    free(start);
    free(critical);
    return rc;
}

/* Shared body of tf_plan_from_profile and tf_plan_unfrozen. */
static int make_plan(const tf_profile *p, const tf_plan_options *o, int solve, tf_plan *out,
                     tf_error *err)
{
    plan_work w = {.p = p, .o = o, .solve = solve};
    tf_dag g = {0};
    memset(out, 0, sizeof *out);
    const double per_action = o ? o->max_action_ratio : 1.0;
    int rc = 0;
    const double margin = o ? o->aux_margin : TF_AUX_DEFAULT_MARGIN;
    if (solve && !(per_action > 0.0 && per_action <= 1.0))
        rc = tf_fail(err, TF_EINVAL, "max_action_ratio = %g: must be in (0, 1]", per_action);
    else if (!(margin >= 0.0 && margin <= TF_AUX_MAX_MARGIN))
        rc = tf_fail(err, TF_EINVAL, "aux_margin = %g: must be in [0, %g]", margin,
                     TF_AUX_MAX_MARGIN);
    if (!rc)
        rc = tf_dag_build(&p->schedule, p->p2p_ms, &g, err);
    if (!rc)
        rc = prepare(&w, err);
    if (rc)
        goto done;
    /* The bounds, on the profile's own schedule (an R lasts nothing
     * unfrozen): lp.max_ms and min_ms are its durations when no R was
     * placed, else recomputed here. */
    double *max_ms = malloc(((size_t)p->schedule.n_actions + 1) * sizeof *max_ms);
    double *min_ms = malloc(((size_t)p->schedule.n_actions + 1) * sizeof *min_ms);
    double *scratch = malloc(((size_t)p->schedule.n_actions + 1) * sizeof *scratch);
    double unfrozen = 0.0, all_frozen = 0.0;
    if (max_ms && min_ms && scratch) {
        tf_profile_durations(p, max_ms, min_ms);
        unfrozen = tf_dag_longest_path(&g, max_ms, scratch);
        all_frozen = tf_dag_longest_path(&g, min_ms, scratch);
    } else {
        rc = tf_fail(err, TF_ENOMEM, "out of memory planning");
    }
    free(max_ms);
    free(min_ms);
    free(scratch);
    if (rc)
        goto done;
    if (!solve) {
        rc = fill_unfrozen(&w, &g, out, unfrozen, all_frozen, err);
        goto done;
    }
    /* (At c = 1, max - (max - min) could differ from min by rounding.) */
    if (per_action < 1.0)
        cap_each_action(&w, per_action);
    tf_freeze_problem problem = problem_of(&w, w.lp.dag.succ ? &w.lp.dag : &g);
    if ((rc = tf_freeze_solve(&problem, o ? &o->control : NULL, &w.fr, err)))
        goto done;
    for (int i = 0; i < lp_schedule(&w)->n_actions; i++)
        w.fr.ratio[i] *= per_action;
    rc = fill_solved(&w, out, unfrozen, all_frozen, err);

done:
    if (rc)
        tf_plan_free(out);
    tf_dag_free(&g);
    work_free(&w);
    return rc;
}

int tf_plan_from_profile(const tf_profile *p, const tf_plan_options *o, tf_plan *out,
                         tf_error *err)
{
    return make_plan(p, o, 1, out, err);
}

/* The largest static bytes of any rank: no limit can be below it. */
static double largest_static(const tf_profile *p)
{
    double most = 0.0;
    for (int r = 0; r < p->schedule.ranks; r++) {
        double fixed = 0.0;
        for (int st = 0; st < p->schedule.stages; st++)
            if (p->schedule.stage_rank[st] == r)
                fixed += p->memory[st].static_bytes;
        most = fixed > most ? fixed : most;
    }
    return most;
}

int tf_plan_memory_floor(const tf_profile *p, const tf_plan_options *o, double *bytes,
                         tf_error *err)
{
    if (!p->memory)
        return tf_fail(err, TF_EINVAL, "the smallest memory limit needs a profile with memory "
                       "fields (static_bytes, activation_bytes per stage)");
    tf_plan_options probe;
    if (o)
        probe = *o;
    else
        tf_plan_options_init(&probe);
    /* A limit at the largest static bytes binds wherever any rank holds
     * activations above that, which is where the floor lies. */
    *bytes = probe.memory_limit = largest_static(p);
    plan_work w = {.p = p, .o = &probe, .solve = 1};
    int rc = prepare(&w, err);
    const int ranks = p->schedule.ranks;
    double *peaks = malloc(((size_t)ranks + 1) * sizeof *peaks);
    if (!rc && !peaks)
        rc = tf_fail(err, TF_ENOMEM, "out of memory");
    if (!rc && w.binds) {
        if (probe.max_action_ratio < 1.0)
            cap_each_action(&w, probe.max_action_ratio);
        tf_dag g = {0};
        if (!w.lp.dag.succ)
            rc = tf_dag_build(&p->schedule, p->p2p_ms, &g, err);
        tf_freeze_problem problem = problem_of(&w, w.lp.dag.succ ? &w.lp.dag : &g);
        if (!rc)
            rc = tf_freeze_memory_floor(&problem, peaks, err);
        for (int r = 0; r < ranks && !rc; r++)
            *bytes = peaks[r] > *bytes ? peaks[r] : *bytes;
        tf_dag_free(&g);
    }
    free(peaks);
    work_free(&w);
    return rc;
}

int tf_plan_unfrozen(const tf_profile *p, tf_plan *out, tf_error *err)
{
    return make_plan(p, NULL, 0, out, err);
}
