/* study_text.c - a growing text buffer. */
#include "study_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf/error.h"

static int reserve(st_text *t, size_t extra)
{
    if (t->failed)
        return 0;
    if (t->len + extra + 1 <= t->cap)
        return 1;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + extra + 1)
        cap *= 2;
    char *data = realloc(t->data, cap);
    if (!data) {
        t->failed = 1;
        return 0;
    }
    t->data = data;
    t->cap = cap;
    return 1;
}

void st_printf(st_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) {
        t->failed = 1;
        return;
    }
    if (!reserve(t, (size_t)need))
        return;
    va_start(ap, fmt);
    vsnprintf(t->data + t->len, (size_t)need + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)need;
}

int st_finish(st_text *t, char **out)
{
    *out = NULL;
    if (!t->failed && !t->data)
        reserve(t, 0);
    if (t->failed) {
        free(t->data);
        memset(t, 0, sizeof *t);
        return TF_ENOMEM;
    }
    t->data[t->len] = '\0';
    *out = t->data;
    memset(t, 0, sizeof *t);
    return 0;
}
