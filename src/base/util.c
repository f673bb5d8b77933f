#include "util.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

const char *errno_name(int err)
{
    if (err < 0)
        err = -err;
    const char *n = strerrorname_np(err);
    return n ? n : "EUNKNOWN";
}

static void oom(void)
{
    fputs("watt: out of memory\n", stderr);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        oom();
    return p;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");
    if (!p)
        oom();
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (!p)
        oom();
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0)
        oom();
    return s;
}

void *grow_array(void *arr, size_t elem, size_t n, size_t *cap)
{
    if (n < *cap)
        return arr;
    size_t ncap = *cap ? *cap * 2 : 8;
    arr = xrealloc(arr, ncap * elem);
    memset((char *)arr + *cap * elem, 0, (ncap - *cap) * elem);
    *cap = ncap;
    return arr;
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t now_monotonic_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

uint64_t now_realtime_ns(void)
{
    return clock_ns(CLOCK_REALTIME);
}
