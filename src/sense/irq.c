#include "sense/irq.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cpuset.h"
#include "base/parse.h"
#include "base/util.h"

/* Parse problems reported one by one before the rest are only counted, so
 * a file of garbage does not bury the report. */
#define IRQ_MAX_LINE_DIAGS 8
#define IRQ_MAX_LABEL      32

static char *dup_range(const char *p, const char *e)
{
    char *s = xmalloc((size_t)(e - p) + 1);
    memcpy(s, p, (size_t)(e - p));
    s[e - p] = '\0';
    return s;
}

/* Like dup_range, with each run of blanks made one space: the kernel pads
 * the chip, hwirq and trigger into columns ("GICv3  27 Level"). */
static char *dup_collapsed(const char *p, const char *e)
{
    char *s = xmalloc((size_t)(e - p) + 1), *o = s;
    for (; p < e; p++) {
        if (span_is_blank(*p) && o > s && o[-1] == ' ')
            continue;
        *o++ = span_is_blank(*p) ? ' ' : *p;
    }
    *o = '\0';
    return s;
}

/* One decimal number ending at a blank or the end of the line. */
static int parse_count(const char **pp, const char *e, uint64_t *ret)
{
    const char *p = *pp;
    uint64_t v = 0;
    if (p >= e || !isdigit((unsigned char)*p))
        return -EINVAL;
    for (; p < e && isdigit((unsigned char)*p); p++) {
        unsigned dgt = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            return -ERANGE;
        v = v * 10 + dgt;
    }
    if (p < e && !span_is_blank(*p))
        return -EINVAL;
    *pp = p;
    *ret = v;
    return 0;
}

/* "CPU0 CPU1 CPU4": column -> CPU id, strictly ascending. */
static int parse_header(const char *p, const char *e, struct irq_sample *s)
{
    size_t cap = 0;
    for (p = span_skip_blanks(p, e); p < e; p = span_skip_blanks(p, e)) {
        uint64_t id;
        if (e - p < 4 || memcmp(p, "CPU", 3) != 0)
            return -EINVAL;
        p += 3;
        if (parse_count(&p, e, &id) < 0 || id > CPUSET_MAX_CPU)
            return -EINVAL;
        if (s->ncpus && (int)id <= s->cpu[s->ncpus - 1])
            return -EINVAL;
        s->cpu = grow_array(s->cpu, sizeof(*s->cpu), s->ncpus, &cap);
        s->cpu[s->ncpus++] = (int)id;
    }
    return s->ncpus ? 0 : -EINVAL;
}

/* The trigger part the kernel prints after the chip: the flow handler name
 * ("edge", "fasteoi", alone or as "IR-IO-APIC-edge", "327680-edge") or,
 * with CONFIG_GENERIC_IRQ_SHOW_LEVEL, "Level"/"Edge". */
static bool is_trigger_token(const char *p, const char *e)
{
    static const char *const kinds[] = {"edge",   "level", "fasteoi",      "simple",
                                        "percpu", "eoi",   "percpu_devid", "bad",
                                        "nmi",    "none",  "edge_eoi"};
    const char *dash = NULL;
    for (const char *q = p; q < e; q++)
        if (*q == '-')
            dash = q;
    if (dash)
        p = dash + 1;
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        if ((size_t)(e - p) == strlen(kinds[i]) && strncasecmp(p, kinds[i], (size_t)(e - p)) == 0)
            return true;
    return false;
}

/* Split a numbered row's text into chip ("IR-PCI-MSI 327680-edge") and
 * handler names ("ehci_hcd:usb1, mmc0"). The kernel separates them only by
 * blanks, so the handler names are what follows the last trigger token;
 * without one, the last blank-separated word (and any words ending in ","
 * before it) when there are at least two words. */
static void split_numbered(const char *p, const char *e, struct irq_source *src)
{
    const char *name = NULL, *tok = p;
    while (tok < e) {
        const char *te = tok;
        while (te < e && !span_is_blank(*te))
            te++;
        if (is_trigger_token(tok, te))
            name = span_skip_blanks(te, e);
        tok = span_skip_blanks(te, e);
    }
    if (!name) {
        const char *q = e;
        while (q > p && !span_is_blank(q[-1]))
            q--;
        /* extend over "a, b" lists */
        while (q > p) {
            const char *w = span_trim_end(p, q);
            if (w == p || w[-1] != ',')
                break;
            q = w;
            while (q > p && !span_is_blank(q[-1]))
                q--;
        }
        name = q > p ? q : e;
    }
    const char *chip_end = span_trim_end(p, name);
    src->chip = chip_end > p ? dup_collapsed(p, chip_end) : NULL;
    src->name = name < e ? dup_range(name, e) : NULL;
}

/* x86 prints ERR and MIS, arm and arm64 Err, alpha and others ERR. */
static bool is_total_label(const char *label)
{
    return streq(label, "ERR") || streq(label, "MIS") || streq(label, "Err") || streq(label, "BAD");
}

/* One row; on failure *why says what was wrong with it. */
static int parse_row(const char *p, const char *e, unsigned ncpus, struct irq_source *ret,
                     const char **why)
{
    p = span_skip_blanks(p, e);
    const char *colon = memchr(p, ':', (size_t)(e - p));
    if (!colon || colon == p || colon - p >= IRQ_MAX_LABEL) {
        *why = "no \"LABEL:\" at the start of the line";
        return -EINVAL;
    }
    bool numeric = true;
    for (const char *q = p; q < colon; q++) {
        if (span_is_blank(*q) || !isprint((unsigned char)*q)) {
            *why = "malformed label";
            return -EINVAL;
        }
        numeric = numeric && isdigit((unsigned char)*q);
    }
    struct irq_source src = {.numeric = numeric, .count = xcalloc(ncpus, sizeof(uint64_t))};
    unsigned n = 0;
    const char *q = span_skip_blanks(colon + 1, e);
    while (n < ncpus && q < e && isdigit((unsigned char)*q)) {
        if (parse_count(&q, e, &src.count[n]) < 0) {
            free(src.count);
            *why = "garbage count";
            return -EINVAL;
        }
        src.total += src.count[n++];
        q = span_skip_blanks(q, e);
    }
    const char *rest_end = span_trim_end(q, e);
    src.label = dup_range(p, colon);
    /* Only these rows carry one total; any other short row was cut off. */
    src.total_only = n == 1 && q == rest_end && is_total_label(src.label);
    if (n == 0 || (n < ncpus && !src.total_only)) {
        free(src.count);
        free(src.label);
        *why = n == 0 ? "no counts" : "truncated row: fewer counts than CPU columns";
        return -EINVAL;
    }
    if (numeric)
        split_numbered(q, rest_end, &src);
    else if (q < rest_end)
        src.name = dup_range(q, rest_end);
    *ret = src;
    return 0;
}

static void source_clear(struct irq_source *s)
{
    free(s->label);
    free(s->chip);
    free(s->name);
    free(s->count);
}

void irq_sample_clear(struct irq_sample *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->nsources; i++)
        source_clear(&s->src[i]);
    free(s->src);
    free(s->cpu);
    *s = (struct irq_sample){0};
}

/* Search from a hint: rows keep their order between two reads, so the
 * usual lookup costs one comparison. */
static int find_from(const struct irq_sample *s, const char *label, unsigned hint)
{
    for (unsigned k = 0; k < s->nsources; k++) {
        unsigned i = (hint + k) % s->nsources;
        if (streq(s->src[i].label, label))
            return (int)i;
    }
    return -1;
}

const struct irq_source *irq_find(const struct irq_sample *s, const char *label)
{
    int i = s && s->nsources ? find_from(s, label, 0) : -1;
    return i < 0 ? NULL : &s->src[i];
}

struct parse_state {
    struct irq_sample s;
    size_t cap;
    uint64_t last_irq; /* numbered IRQs come in ascending order */
    bool any_irq;
    unsigned nbad;
    struct diags *d;
};

static bool is_duplicate(struct parse_state *ps, const struct irq_source *src)
{
    if (src->numeric) {
        uint64_t v = strtoull(src->label, NULL, 10);
        bool ascending = !ps->any_irq || v > ps->last_irq;
        ps->any_irq = true;
        if (v > ps->last_irq)
            ps->last_irq = v;
        if (ascending)
            return false;
    }
    return ps->s.nsources && find_from(&ps->s, src->label, 0) >= 0;
}

static void bad_line(struct parse_state *ps, unsigned lineno, const char *why)
{
    if (ps->nbad++ < IRQ_MAX_LINE_DIAGS) {
        char where[32];
        snprintf(where, sizeof(where), "line %u", lineno);
        diags_add(ps->d, where, 0, "%s: row skipped", why);
    }
}

int irq_parse(const char *text, size_t len, struct irq_sample *ret, struct diags *d)
{
    struct parse_state ps = {.d = d};
    const char *p = text, *end = text + len;
    unsigned lineno = 0;
    bool header = false;
    while (p < end) {
        size_t rest = (size_t)(end - p);
        const char *nl = memchr(p, '\n', rest);
        size_t linelen = nl ? (size_t)(nl - p) : rest;
        const char *e = p + linelen, *next = nl ? nl + 1 : end;
        lineno++;
        if (span_skip_blanks(p, e) == e) {
            p = next;
            continue;
        }
        if (!header) {
            if (parse_header(p, e, &ps.s) < 0) {
                char where[32];
                snprintf(where, sizeof(where), "line %u", lineno);
                diags_add(d, where, 0, "no CPU header (\"CPU0 CPU1 ...\"): cannot map columns");
                irq_sample_clear(&ps.s);
                return -EINVAL;
            }
            header = true;
            p = next;
            continue;
        }
        struct irq_source src;
        const char *why = NULL;
        if (memchr(p, '\0', linelen))
            bad_line(&ps, lineno, "NUL byte in line");
        else if (parse_row(p, e, ps.s.ncpus, &src, &why) < 0)
            bad_line(&ps, lineno, why);
        else if (is_duplicate(&ps, &src)) {
            bad_line(&ps, lineno, "duplicate label");
            source_clear(&src);
        } else {
            ps.s.src = grow_array(ps.s.src, sizeof(*ps.s.src), ps.s.nsources, &ps.cap);
            ps.s.src[ps.s.nsources++] = src;
        }
        p = next;
    }
    if (!header) {
        diags_add(d, "line 1", 0, "empty: no CPU header");
        return -EINVAL;
    }
    if (ps.nbad > IRQ_MAX_LINE_DIAGS)
        diags_add(d, "lines", 0, "%u more malformed rows skipped", ps.nbad - IRQ_MAX_LINE_DIAGS);
    *ret = ps.s;
    return 0;
}

/* ---- sampler ---- */

static int irq_probe(struct host *h, void **ret_state, char **ret_reason)
{
    if (host_exists(h, HOST_PROC, "interrupts"))
        return 1;
    *ret_reason = xstrdup("no /proc/interrupts");
    return 0;
}

static int irq_collect(struct host *h, void *state, struct sample *s)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = host_read(h, HOST_PROC, "interrupts", &text, &len);
    if (r < 0) {
        sample_diag_read(s, h, HOST_PROC, "interrupts", r);
        return r;
    }
    struct diags pd = {0};
    struct irq_sample tmp;
    r = irq_parse(text, len, &tmp, &pd);
    _cleanup_free_ char *path = host_display_path(h, HOST_PROC, "interrupts");
    for (size_t i = 0; i < pd.n; i++)
        diags_add(&s->diags, path, 0, "%s: %s", pd.v[i].where, pd.v[i].what);
    diags_free(&pd);
    if (r < 0)
        return r;
    s->irq = xmalloc(sizeof(*s->irq));
    *s->irq = tmp;
    return 0;
}

static void irq_free_sample(struct sample *s)
{
    if (!s->irq)
        return;
    irq_sample_clear(s->irq);
    free(s->irq);
    s->irq = NULL;
}

const struct sampler irq_sampler = {
    .name = "irq",
    .probe = irq_probe,
    .collect = irq_collect,
    .free_sample = irq_free_sample,
};

/* ---- rates ---- */

int irq_count_delta(uint64_t x, uint64_t y, uint64_t *ret)
{
    if (y >= x) {
        *ret = y - x;
        return 0;
    }
    /* The kernel's counts are unsigned int: a wrap shows as a value near
     * 2^32 followed by a small one. A smaller drop is a reset or a reused
     * IRQ number, not a wrap. */
    uint64_t wrapped = y + (UINT64_C(1) << 32) - x;
    if (x <= UINT32_MAX && wrapped < (UINT64_C(1) << 31)) {
        *ret = wrapped;
        return 0;
    }
    return -ERANGE;
}

static void describe(const struct irq_source *s, char *buf, size_t size)
{
    if (s->name)
        snprintf(buf, size, "IRQ %s (%s)", s->label, s->name);
    else
        snprintf(buf, size, "IRQ %s", s->label);
}

/* Column of b -> column of a for the same CPU, -1 when a lacks it; also the
 * union of both CPU lists. Both headers are ascending. */
static int *map_columns(const struct irq_sample *a, const struct irq_sample *b, struct irq_rates *r,
                        struct diags *d)
{
    int *amap = xcalloc(b->ncpus ? b->ncpus : 1, sizeof(int));
    r->cpu = xcalloc(a->ncpus + b->ncpus + 1, sizeof(int));
    r->cpu_per_s = xcalloc(a->ncpus + b->ncpus + 1, sizeof(double));
    unsigned i = 0, k = 0;
    while (i < a->ncpus || k < b->ncpus) {
        char where[48];
        if (k == b->ncpus || (i < a->ncpus && a->cpu[i] < b->cpu[k])) {
            snprintf(where, sizeof(where), "cpu%d interrupts", a->cpu[i]);
            diags_add(d, where, 0, "CPU went offline between the two samples: no rate");
            r->cpu_per_s[r->ncpus] = NAN;
            r->cpu[r->ncpus++] = a->cpu[i++];
        } else if (i == a->ncpus || b->cpu[k] < a->cpu[i]) {
            snprintf(where, sizeof(where), "cpu%d interrupts", b->cpu[k]);
            diags_add(d, where, 0, "CPU came online between the two samples: no rate");
            r->cpu_per_s[r->ncpus] = NAN;
            amap[k] = -1;
            r->cpu[r->ncpus++] = b->cpu[k++];
        } else {
            amap[k] = (int)i;
            r->cpu[r->ncpus++] = b->cpu[k++];
            i++;
        }
    }
    return amap;
}

static double source_rate(const struct irq_source *x, const struct irq_source *y, const int *amap,
                          unsigned ncols, double interval_s, double *cpu_per_s, struct diags *d)
{
    if (y->total_only) {
        uint64_t dv;
        return irq_count_delta(x->count[0], y->count[0], &dv) < 0 ? NAN : (double)dv / interval_s;
    }
    double sum = 0;
    bool backwards = false;
    for (unsigned k = 0; k < ncols; k++) {
        uint64_t dv;
        cpu_per_s[k] = NAN;
        if (amap[k] < 0)
            continue;
        if (irq_count_delta(x->count[amap[k]], y->count[k], &dv) < 0) {
            backwards = true;
            continue;
        }
        cpu_per_s[k] = (double)dv / interval_s;
        sum += cpu_per_s[k];
    }
    if (backwards) {
        char where[96];
        describe(y, where, sizeof(where));
        diags_add(d, where, 0, "counter went backwards between the two samples: no rate");
        return NAN;
    }
    return sum;
}

/* Sources of a that b no longer has. */
static void note_disappeared(const struct irq_sample *a, const bool *seen, struct irq_rates *r,
                             struct diags *d)
{
    for (unsigned i = 0; i < a->nsources; i++) {
        if (seen[i])
            continue;
        char where[96];
        describe(&a->src[i], where, sizeof(where));
        diags_add(d, where, 0, "disappeared between the two samples (driver unloaded?): skipped");
        r->nchanged++;
    }
}

static bool same_source(const struct irq_source *x, const struct irq_source *y)
{
    if (x->total_only != y->total_only)
        return false;
    if (!x->numeric)
        return true; /* a named row is its label */
    /* a numbered line whose handler changed is another device now */
    if (!x->name || !y->name)
        return x->name == y->name;
    return streq(x->name, y->name);
}

static void add_source(const struct irq_sample *a, const struct irq_sample *b, unsigned k,
                       const int *amap, double interval_s, bool *seen, struct irq_rates *r,
                       struct diags *d)
{
    const struct irq_source *y = &b->src[k];
    int ai = find_from(a, y->label, k);
    char where[96];
    describe(y, where, sizeof(where));
    if (ai < 0 || !same_source(&a->src[ai], y)) {
        diags_add(d, where, 0, "%s between the two samples: skipped",
                  ai < 0 ? "appeared" : "changed handler");
        if (ai >= 0)
            seen[ai] = true;
        r->nchanged++;
        return;
    }
    seen[ai] = true;
    struct irq_rate *rt = &r->src[r->nsources++];
    rt->src = y;
    if (!y->total_only)
        rt->cpu_per_s = xcalloc(b->ncpus, sizeof(double));
    rt->per_s = source_rate(&a->src[ai], y, amap, b->ncpus, interval_s, rt->cpu_per_s, d);
}

int irq_rates(const struct irq_sample *a, const struct irq_sample *b, double interval_s,
              struct irq_rates *ret, struct diags *d)
{
    if (!a || !b || !(interval_s > 0))
        return -EINVAL;
    struct irq_rates r = {0};
    _cleanup_free_ int *amap = map_columns(a, b, &r, d);
    _cleanup_free_ bool *seen = xcalloc(a->nsources + 1, sizeof(bool));
    r.src = xcalloc(b->nsources + 1, sizeof(*r.src));
    for (unsigned k = 0; k < b->nsources; k++)
        add_source(a, b, k, amap, interval_s, seen, &r, d);
    note_disappeared(a, seen, &r, d);
    /* Per CPU: every per-CPU row that has a number for that column. */
    unsigned u = 0;
    for (unsigned k = 0; k < b->ncpus; k++) {
        while (r.cpu[u] != b->cpu[k])
            u++;
        if (amap[k] < 0)
            continue;
        double sum = 0;
        for (unsigned i = 0; i < r.nsources; i++)
            if (r.src[i].cpu_per_s && !isnan(r.src[i].cpu_per_s[k]))
                sum += r.src[i].cpu_per_s[k];
        r.cpu_per_s[u] = sum;
    }
    *ret = r;
    return 0;
}

void irq_rates_free(struct irq_rates *r)
{
    if (!r)
        return;
    for (unsigned i = 0; i < r->nsources; i++)
        free(r->src[i].cpu_per_s);
    free(r->src);
    free(r->cpu);
    free(r->cpu_per_s);
    *r = (struct irq_rates){0};
}
