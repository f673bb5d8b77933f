/* The metrics writer (metrics_writer.h). */
#include "agent/metrics_writer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "base/util.h"

static void put_u64(struct strbuf *o, uint64_t v)
{
    char buf[24], *p = buf + sizeof(buf);
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    strbuf_append_n(o, p, (size_t)(buf + sizeof(buf) - p));
}

static const uint64_t pow10_tab[] = {1,      10,      100,      1000,      10000,
                                     100000, 1000000, 10000000, 100000000, 1000000000};

/* v / 10^decimals as an exact decimal without trailing zeros: 240422366267
 * with 6 gives "240422.366267". */
static void put_fixed(struct strbuf *o, uint64_t v, unsigned decimals)
{
    uint64_t p = pow10_tab[decimals];
    put_u64(o, v / p);
    uint64_t frac = v % p;
    if (!frac)
        return;
    char buf[12];
    unsigned n = decimals;
    while (frac % 10 == 0) {
        frac /= 10;
        n--;
    }
    for (unsigned i = n; i > 0; i--) {
        buf[i - 1] = (char)('0' + frac % 10);
        frac /= 10;
    }
    strbuf_putc(o, '.');
    strbuf_append_n(o, buf, n);
}

/* Go's ParseFloat reads both formats; integral values print as integers. */
static void put_double(struct strbuf *o, double v)
{
    if (isnan(v)) {
        strbuf_append(o, "NaN");
        return;
    }
    if (isinf(v)) {
        strbuf_append(o, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v == trunc(v) && fabs(v) < 1e15) {
        if (v < 0)
            strbuf_putc(o, '-');
        put_u64(o, (uint64_t)fabs(v));
        return;
    }
    char buf[40];
    format_double(buf, sizeof(buf), v);
    strbuf_append(o, buf);
}

/* A label value with backslash, double quote and newline escaped. */
static void put_escaped(struct strbuf *o, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
        if (!esc)
            continue;
        strbuf_append_n(o, run, (size_t)(s - run));
        strbuf_append(o, esc);
        run = s + 1;
    }
    strbuf_append_n(o, run, (size_t)(s - run));
}

/* The family's name: OpenMetrics names counters without _total; text 0.0.4
 * uses the sample name throughout. */
static void put_family_name(struct mw *w)
{
    size_t len = strlen(w->f->name);
    if (w->om && w->f->type == FAM_COUNTER)
        len -= strlen("_total");
    strbuf_append_n(w->out, w->f->name, len);
}

static void put_header(struct mw *w)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    strbuf_append(w->out, "# HELP ");
    put_family_name(w);
    strbuf_putc(w->out, ' ');
    strbuf_append(w->out, w->f->help);
    strbuf_append(w->out, "\n# TYPE ");
    put_family_name(w);
    strbuf_putc(w->out, ' ');
    strbuf_append(w->out, types[w->f->type]);
    strbuf_putc(w->out, '\n');
    if (w->om && w->f->unit) {
        strbuf_append(w->out, "# UNIT ");
        put_family_name(w);
        strbuf_putc(w->out, ' ');
        strbuf_append(w->out, w->f->unit);
        strbuf_putc(w->out, '\n');
    }
    w->header = true;
}

/* Families print their metadata with their first series only, so a family
 * with nothing to show leaves no trace. */
void mw_fam(struct mw *w, const struct fam *f)
{
    w->f = f;
    w->header = false;
}

void mw_series(struct mw *w)
{
    if (!w->header)
        put_header(w);
    strbuf_append(w->out, w->f->name);
    w->nlabels = 0;
}

void mw_series_suffix(struct mw *w, const char *suffix)
{
    mw_series(w);
    strbuf_append(w->out, suffix);
}

static void mw_label_key(struct mw *w, const char *key)
{
    strbuf_putc(w->out, w->nlabels++ ? ',' : '{');
    strbuf_append(w->out, key);
    strbuf_append_n(w->out, "=\"", 2);
}

void mw_label(struct mw *w, const char *key, const char *value)
{
    mw_label_key(w, key);
    put_escaped(w->out, value ? value : "");
    strbuf_putc(w->out, '"');
}

void mw_label_int(struct mw *w, const char *key, int value)
{
    mw_label_key(w, key);
    if (value < 0)
        strbuf_putc(w->out, '-');
    put_u64(w->out, value < 0 ? -(uint64_t)value : (uint64_t)value);
    strbuf_putc(w->out, '"');
}

static void mw_value_begin(struct mw *w)
{
    if (w->nlabels)
        strbuf_putc(w->out, '}');
    strbuf_putc(w->out, ' ');
}

void mw_value_u64(struct mw *w, uint64_t v)
{
    mw_value_begin(w);
    put_u64(w->out, v);
    strbuf_putc(w->out, '\n');
}

void mw_value_fixed(struct mw *w, uint64_t v, unsigned decimals)
{
    mw_value_begin(w);
    put_fixed(w->out, v, decimals);
    strbuf_putc(w->out, '\n');
}

void mw_value_double(struct mw *w, double v)
{
    mw_value_begin(w);
    put_double(w->out, v);
    strbuf_putc(w->out, '\n');
}
