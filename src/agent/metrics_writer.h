/* The Prometheus text / OpenMetrics writer the metric renderers share
 * (metrics.c, metrics_attrib.c): a family's HELP/TYPE/UNIT once, then its
 * series with labels escaped and values printed exactly. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"

enum fam_type { FAM_COUNTER, FAM_GAUGE, FAM_HISTOGRAM };

struct fam {
    const char *name; /* as samples spell it: counters end in _total */
    enum fam_type type;
    const char *unit; /* OpenMetrics UNIT, NULL when none */
    const char *help;
};

struct mw {
    struct strbuf *out;
    bool om;
    const struct fam *f;
    bool header;      /* the family's metadata is out */
    unsigned nlabels; /* labels of the current series */
};

#define COUNTER(n, u, h)                                     \
    {                                                        \
        .name = n, .type = FAM_COUNTER, .unit = u, .help = h \
    }
#define GAUGE(n, u, h)                                     \
    {                                                      \
        .name = n, .type = FAM_GAUGE, .unit = u, .help = h \
    }

#define HISTOGRAM(n, u, h)                                     \
    {                                                          \
        .name = n, .type = FAM_HISTOGRAM, .unit = u, .help = h \
    }

/* Start family f (its metadata goes out with its first series). */
void mw_fam(struct mw *w, const struct fam *f);
/* Start a series of the current family; labels follow, then one value. */
void mw_series(struct mw *w);
/* A series of the family's name and SUFFIX: a histogram's "_bucket",
 * "_count" and "_sum". */
void mw_series_suffix(struct mw *w, const char *suffix);
void mw_label(struct mw *w, const char *key, const char *value);
void mw_label_int(struct mw *w, const char *key, int value);
void mw_value_u64(struct mw *w, uint64_t v);
/* v / 10^decimals, exactly */
void mw_value_fixed(struct mw *w, uint64_t v, unsigned decimals);
void mw_value_double(struct mw *w, double v);
