/* profile.h - profiled stage timings (profile.json, docs/formats.md).
 *
 * A profile names a schedule (built-in, or an explicit `order`), the pipeline
 * shape, per-stage timings, optional per-action measured overrides and the
 * freeze caps.  Loading validates everything: an error names the JSON path
 * and the bad value.
 */
#ifndef TF_PROFILE_H
#define TF_PROFILE_H

#include "tf/aux.h"
#include "tf/error.h"
#include "tf/memory.h"
#include "tf/schedule.h"

/* Longest duration (and p2p lag) accepted anywhere, in ms: about 2.8 hours
 * for one action of one microbatch, far beyond any real pipeline, and small
 * enough that the LP's sums over millions of actions stay well conditioned.
 * Larger finite values are input errors that name the field. */
#define TF_MAX_DURATION_MS 1e7

/* The largest profile.json read: a profile of TF_MAX_ACTIONS actions with
 * every action measured ("actions") and an explicit "order" is about 21 MB
 * as tf-exec writes it. */
#define TF_MAX_PROFILE_BYTES ((size_t)64 << 20)

/* The cap a profile without "max_freeze_ratio" gets, and the frozen times
 * one without a measured frozen time gets: the reference's defaults, B
 * frozen = 0.5 x B and W frozen = 0.01 x W. */
#define TF_DEFAULT_CAP 0.9
#define TF_DEFAULT_B_FROZEN 0.5
#define TF_DEFAULT_W_FROZEN 0.01

typedef struct tf_stage_times {
    double forward_ms;
    double backward_ms;                /* full B */
    double backward_frozen_ms;         /* B with every weight frozen */
    double backward_input_ms;          /* I, split schedules only (else 0) */
    double backward_weight_ms;         /* W, split schedules only (else 0) */
    double backward_weight_frozen_ms;  /* W frozen */
    double parameters;                 /* parameter count, 0 if unknown */
} tf_stage_times;

typedef struct tf_action_time {
    tf_action_type type;
    int stage, microbatch;
    double ms;          /* measured full duration */
    double frozen_ms;   /* measured frozen duration, < 0 if not given */
} tf_action_time;

/* The measured duration of an overlapped pair (schedule.h) as a whole, as
 * a profiler sees it: one span for both actions. */
typedef struct tf_pair_time {
    tf_action forward, backward; /* the pair's actions (rank -1) */
    double ms;                   /* the pair, unfrozen */
    double frozen_ms;            /* the pair with the backward's weights frozen; < 0 if
                                    not given */
} tf_pair_time;

typedef struct tf_profile {
    tf_schedule schedule;      /* built-in or from `order` */
    double microbatch_tokens;  /* 0 if not given */
    double p2p_ms;
    double *max_freeze_ratio;  /* one cap per stage (schedule.stages entries) */
    tf_stage_times *stages;    /* schedule.stages entries */
    tf_action_time *overrides; /* measured per-action durations */
    int n_overrides;
    tf_pair_time *pairs;       /* measured pair durations ("pairs") */
    int n_pairs;
    /* Memory (formats.md): each stage's bytes, NULL when no stage gives
     * static_bytes or activation_bytes; and memory_limit_bytes, one per
     * rank, NULL when not given. */
    tf_stage_memory *memory;   /* schedule.stages entries */
    double *memory_limit;      /* schedule.ranks entries */
    /* Aux work (tf/aux.h): the stages' "aux" lists, in stage order; NULL
     * and 0 when no stage declares any. */
    tf_aux_work *aux;
    int n_aux;
} tf_profile;

/* Parses and validates profile JSON text.  `where` names the source in
 * messages (a path).  Missing frozen times default as in the reference:
 * B frozen = 0.5 x B, W frozen = 0.01 x W.  On success *out owns its memory
 * (tf_profile_free); on error *out is zeroed and err names the field. */
int tf_profile_parse(const char *json, const char *where, tf_profile *out, tf_error *err);

/* Reads path and parses it as tf_profile_parse does; a file over
 * TF_MAX_PROFILE_BYTES is refused unread (tf_read_file_limit). */
int tf_profile_load(const char *path, tf_profile *out, tf_error *err);

/* Parses a profile for an order given from outside (tf-plan
 * --schedule-csv): *out gets a copy of `order` as its schedule, and the
 * profile its timings, caps, lag, tokens and measured actions and pairs,
 * which must fit that order ("stages" one entry per stage of it).  The
 * profile's "schedule" and "order" are not used; "ranks",
 * "stages_per_rank" and "microbatches" may be left out, and where given
 * must agree with the order (an error names the field otherwise). */
int tf_profile_parse_for(const char *json, const char *where, const tf_schedule *order,
                         tf_profile *out, tf_error *err);

/* Reads path and parses it as tf_profile_parse_for does. */
int tf_profile_load_for(const char *path, const tf_schedule *order, tf_profile *out,
                        tf_error *err);

/* Serialises a profile as JSON (malloc'd string, caller frees). */
int tf_profile_to_json(const tf_profile *p, char **json, tf_error *err);

/* Writes the profile to path atomically. */
int tf_profile_save(const tf_profile *p, const char *path, tf_error *err);

/* Fills max_ms[i] and min_ms[i] for every action i of p->schedule: the full
 * and fully frozen durations (equal for F and I).  Overrides win.  A pair
 * measured whole (p->pairs) is split between its actions: the forward keeps
 * its own time, or the pair's frozen time where that is shorter; the
 * backward gets the rest, so the two add up to the pair's time unfrozen
 * and to its frozen time frozen.  Without a measured frozen time, freezing
 * saves in the pair what it saves on the backward alone. */
void tf_profile_durations(const tf_profile *p, double *max_ms, double *min_ms);

/* Frees everything p owns and zeroes it. */
void tf_profile_free(tf_profile *p);

#endif
