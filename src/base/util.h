/* Small helpers used everywhere: cleanup attributes, array sizes, errno names. */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define _unused_      __attribute__((unused))

static inline void freep(void *p)
{
    free(*(void **)p);
}

static inline void closep(int *fd)
{
    if (*fd >= 0)
        close(*fd);
}

static inline void fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

static inline void closedirp(DIR **d)
{
    if (*d)
        closedir(*d);
}

#define _cleanup_free_     __attribute__((cleanup(freep)))
#define _cleanup_close_    __attribute__((cleanup(closep)))
#define _cleanup_fclose_   __attribute__((cleanup(fclosep)))
#define _cleanup_closedir_ __attribute__((cleanup(closedirp)))

/* Hand ownership out of a cleanup variable. */
#define TAKE_PTR(p)               \
    ({                            \
        __typeof__(p) _tmp = (p); \
        (p) = NULL;               \
        _tmp;                     \
    })
#define TAKE_FD(fd)      \
    ({                   \
        int _tmp = (fd); \
        (fd) = -1;       \
        _tmp;            \
    })

/* "EACCES" for 13: short, stable names for JSON and logs. */
const char *errno_name(int err);

/* Allocation that aborts on failure: a power tool out of memory has nothing
 * better to do, and checking every small strdup would hide real errors. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* The first N bytes of S (fewer at a NUL), NUL-terminated. */
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Append one element to a growable array: *arr has *n used of *cap. */
void *grow_array(void *arr, size_t elem, size_t n, size_t *cap);

uint64_t now_monotonic_ns(void);
uint64_t now_realtime_ns(void);

static inline bool streq(const char *a, const char *b)
{
    return a && b && __builtin_strcmp(a, b) == 0;
}
