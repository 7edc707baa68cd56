/* study_text.h - a growing text buffer for the CSV and the summary
 * (private to tools/study). */
#ifndef TF_STUDY_TEXT_H
#define TF_STUDY_TEXT_H

#include <stddef.h>

typedef struct st_text {
    char *data;   /* NUL-terminated, malloc'd; NULL until the first append */
    size_t len;
    size_t cap;
    int failed;   /* an allocation failed: later appends do nothing */
} st_text;

/* Appends printf-style text; on allocation failure sets t->failed. */
void st_printf(st_text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Hands the text to the caller (*out, caller frees) and returns 0, or frees
 * it and returns TF_ENOMEM if any append failed. */
int st_finish(st_text *t, char **out);

#endif
