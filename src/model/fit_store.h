/* The points the power model is fitted on (model/fit.h), kept bounded:
 * FIT_STORE_BUCKETS buckets by busy share (busy / CPUs), each a ring of
 * the FIT_STORE_PER_BUCKET newest points, so a week of idle replaces only
 * the idle bucket's points and the busy ones stay to pin the slope; and
 * the newest points win, so the model follows a machine that changed.
 * 4 KiB in all. Pure. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "model/fit.h"

#define FIT_STORE_BUCKETS    16
#define FIT_STORE_PER_BUCKET 16
#define FIT_STORE_MAX        (FIT_STORE_BUCKETS * FIT_STORE_PER_BUCKET)

struct fit_store_point {
    float busy, ghz, watts; /* ghz NaN when unknown */
    uint16_t cpus;
};

struct fit_store {
    struct fit_store_point p[FIT_STORE_BUCKETS][FIT_STORE_PER_BUCKET];
    uint8_t n[FIT_STORE_BUCKETS];    /* points held */
    uint8_t next[FIT_STORE_BUCKETS]; /* the slot the next point replaces */
    uint64_t seen;                   /* points offered and kept, all time */
};

/* Keep P (one sample: busy CPUs with POLL, measured watts) when usable: 1
 * to 65535 CPUs, busy in 0..cpus, finite positive watts; else -EINVAL. */
int fit_store_add(struct fit_store *s, const struct fit_point *p);
/* The points held, into OUT (room for FIT_STORE_MAX); returns how many. */
size_t fit_store_points(const struct fit_store *s, struct fit_point *out);
