/* Who wakes the CPUs: interrupt sources from /proc/interrupts, by rate over
 * the interval (or by count since boot with one snapshot), and per CPU. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/table.h"
#include "base/util.h"
#include "sense/irq.h"
#include "view/report.h"

#define TOP_N        10
#define SOURCE_WIDTH 44

/* One source as shown: its rate when there is one. */
struct irq_row {
    const struct irq_source *src;
    const double *cpu_per_s; /* per column of the current sample, or NULL */
    double per_s;            /* NaN without a rate */
};

/* The section's figures, computed once per rendering. */
struct irq_view {
    const struct irq_sample *cur;
    bool rated; /* two samples and irq_rates() worked */
    struct irq_rates rates;
    unsigned nrows;
    struct irq_row *rows; /* sorted: rate (or count) descending */
    double total_per_s;   /* over per-CPU rows with a rate; NaN without rates */
};

static int row_cmp(const void *pa, const void *pb)
{
    const struct irq_row *a = pa, *b = pb;
    bool na = isnan(a->per_s), nb = isnan(b->per_s);
    if (na != nb)
        return na ? 1 : -1;
    if (!na && a->per_s != b->per_s)
        return a->per_s < b->per_s ? 1 : -1;
    if (a->src->total != b->src->total)
        return a->src->total < b->src->total ? 1 : -1;
    return strcmp(a->src->label, b->src->label);
}

static void view_build(const struct report_ctx *c, struct irq_view *v)
{
    *v = (struct irq_view){.cur = c->cur->irq, .total_per_s = NAN};
    if (!v->cur)
        return;
    if (c->b && c->a->irq && c->b->irq)
        v->rated = irq_rates(c->a->irq, c->b->irq, c->interval_s, &v->rates, c->diags) == 0;
    v->nrows = v->cur->nsources;
    v->rows = xcalloc(v->nrows + 1, sizeof(*v->rows));
    for (unsigned i = 0; i < v->nrows; i++)
        v->rows[i] = (struct irq_row){.src = &v->cur->src[i], .per_s = NAN};
    if (v->rated) {
        v->total_per_s = 0;
        for (unsigned i = 0; i < v->rates.nsources; i++) {
            const struct irq_rate *rt = &v->rates.src[i];
            struct irq_row *row = &v->rows[rt->src - v->cur->src];
            row->per_s = rt->per_s;
            row->cpu_per_s = rt->cpu_per_s;
            if (!rt->src->total_only && !isnan(rt->per_s))
                v->total_per_s += rt->per_s;
        }
    }
    qsort(v->rows, v->nrows, sizeof(*v->rows), row_cmp);
}

static void view_free(struct irq_view *v)
{
    irq_rates_free(&v->rates);
    free(v->rows);
}

static int cpu_package(const struct report_ctx *c, int cpu)
{
    return (unsigned)cpu < c->cur->topo.ncpu ? c->cur->topo.cpu[cpu].package : -1;
}

/* Interrupts since boot on one column, over every per-CPU row. */
static uint64_t column_count(const struct irq_sample *s, unsigned col)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < s->nsources; i++)
        if (!s->src[i].total_only)
            sum += s->src[i].count[col];
    return sum;
}

static int column_of(const struct irq_sample *s, int cpu)
{
    for (unsigned k = 0; k < s->ncpus; k++)
        if (s->cpu[k] == cpu)
            return (int)k;
    return -1;
}

static void per_cpu_json(const struct report_ctx *c, const struct irq_view *v, struct json *j)
{
    json_array_begin(j);
    unsigned n = v->rated ? v->rates.ncpus : v->cur->ncpus;
    for (unsigned u = 0; u < n; u++) {
        int cpu = v->rated ? v->rates.cpu[u] : v->cur->cpu[u];
        int col = column_of(v->cur, cpu);
        json_object_begin(j);
        json_kv_i64(j, "cpu", cpu);
        json_kv_i64(j, "package", cpu_package(c, cpu));
        json_key(j, "count");
        col < 0 ? json_null(j) : json_u64(j, column_count(v->cur, (unsigned)col));
        json_kv_double(j, "per_s", v->rated ? v->rates.cpu_per_s[u] : NAN);
        json_object_end(j);
    }
    json_array_end(j);
}

static void source_json(const struct irq_view *v, const struct irq_row *r, struct json *j)
{
    const struct irq_source *s = r->src;
    json_object_begin(j);
    json_kv_string(j, "irq", s->label);
    json_kv_bool(j, "numeric", s->numeric);
    json_kv_string(j, "chip", s->chip);
    json_kv_string(j, "name", s->name);
    json_kv_bool(j, "total_only", s->total_only);
    json_kv_u64(j, "count", s->total);
    json_kv_double(j, "per_s", r->per_s);
    json_kv_double(j, "share_pct",
                   s->total_only || !(v->total_per_s > 0) ? NAN
                                                          : 100.0 * r->per_s / v->total_per_s);
    json_key(j, "per_cpu");
    json_array_begin(j);
    for (unsigned k = 0; !s->total_only && k < v->cur->ncpus; k++) {
        if (s->count[k] == 0)
            continue;
        json_object_begin(j);
        json_kv_i64(j, "cpu", v->cur->cpu[k]);
        json_kv_u64(j, "count", s->count[k]);
        json_kv_double(j, "per_s", r->cpu_per_s ? r->cpu_per_s[k] : NAN);
        json_object_end(j);
    }
    json_array_end(j);
    json_object_end(j);
}

static void interrupts_json(const struct report_ctx *c, struct json *j)
{
    struct irq_view v;
    view_build(c, &v);
    if (!v.cur) {
        json_null(j);
        return;
    }
    json_object_begin(j);
    json_kv_string(j, "basis", v.rated ? "interval" : "since_boot");
    json_kv_double(j, "total_per_s", v.total_per_s);
    json_kv_u64(j, "sources_count", v.cur->nsources);
    json_kv_u64(j, "changed_sources", v.rates.nchanged);
    json_key(j, "per_cpu");
    per_cpu_json(c, &v, j);
    json_key(j, "sources");
    json_array_begin(j);
    for (unsigned i = 0; i < v.nrows; i++)
        source_json(&v, &v.rows[i], j);
    json_array_end(j);
    json_object_end(j);
    view_free(&v);
}

static char *clip(const char *s, size_t width)
{
    if (!s)
        return xstrdup("-");
    if (strlen(s) <= width)
        return xstrdup(s);
    return xasprintf("%.*s~", (int)width - 1, s);
}

/* Where a source lands: "cpu1" when on one CPU, else the CPU with the
 * largest share and how many more ("cpu0 64% +1"), or "spread: 96 CPUs"
 * when no CPU takes a tenth. */
static char *where_text(const struct irq_sample *cur, const struct irq_row *r)
{
    const struct irq_source *s = r->src;
    if (s->total_only)
        return xstrdup("(machine-wide)");
    double sum = 0, top = -1;
    int top_cpu = -1;
    unsigned nonzero = 0;
    for (unsigned k = 0; k < cur->ncpus; k++) {
        double x = r->cpu_per_s ? r->cpu_per_s[k] : (double)s->count[k];
        if (isnan(x) || x <= 0)
            continue;
        nonzero++;
        sum += x;
        if (x > top)
            top = x, top_cpu = cur->cpu[k];
    }
    if (nonzero == 0)
        return xstrdup("-");
    if (nonzero == 1)
        return xasprintf("cpu%d", top_cpu);
    if (top < sum / 10)
        return xasprintf("spread: %u CPUs", nonzero);
    return xasprintf("cpu%d %.0f%% +%u", top_cpu, 100 * top / sum, nonzero - 1);
}

static void top_table(const struct irq_view *v, struct strbuf *out)
{
    struct table t;
    table_init(&t, ">irq", "source [chip]", ">since boot", ">/s", ">share", "on CPUs", NULL);
    unsigned shown = 0;
    for (unsigned i = 0; i < v->nrows && shown < TOP_N; i++) {
        const struct irq_row *r = &v->rows[i];
        if (r->src->total_only)
            continue;
        char count[24];
        snprintf(count, sizeof(count), "%" PRIu64, r->src->total);
        _cleanup_free_ char *full =
            r->src->chip
                ? xasprintf("%s [%s]", r->src->name ? r->src->name : "(no handler)", r->src->chip)
                : xstrdup(r->src->name ? r->src->name : "-");
        _cleanup_free_ char *source = clip(full, SOURCE_WIDTH);
        _cleanup_free_ char *rate = isnan(r->per_s) ? xstrdup("-") : xasprintf("%.1f", r->per_s);
        _cleanup_free_ char *share = isnan(r->per_s) || !(v->total_per_s > 0)
                                         ? xstrdup("-")
                                         : xasprintf("%.0f%%", 100 * r->per_s / v->total_per_s);
        _cleanup_free_ char *where = where_text(v->cur, r);
        table_add(&t, r->src->label, source, count, rate, share, where);
        shown++;
    }
    table_render(&t, out, REPORT_WIDTH);
    table_free(&t);
}

/* Append "label value" items, wrapping lines at the report width. */
static void wrap_item(struct strbuf *out, size_t *col, const char *item)
{
    size_t n = strlen(item);
    if (*col + n + 2 > REPORT_WIDTH) {
        strbuf_append(out, ",\n    ");
        *col = 4;
    } else if (*col > 4) {
        strbuf_append(out, ", ");
        *col += 2;
    }
    strbuf_append(out, item);
    *col += n;
}

static void per_cpu_text(const struct report_ctx *c, const struct irq_view *v, struct strbuf *out)
{
    unsigned n = v->rated ? v->rates.ncpus : v->cur->ncpus;
    strbuf_append(out,
                  v->rated ? "  per CPU, interrupts/s:\n    " : "  per CPU, since boot:\n    ");
    size_t col = 4;
    for (unsigned u = 0; u < n; u++) {
        int cpu = v->rated ? v->rates.cpu[u] : v->cur->cpu[u];
        char item[64];
        if (v->rated && isnan(v->rates.cpu_per_s[u]))
            snprintf(item, sizeof(item), "cpu%d -", cpu);
        else if (v->rated)
            snprintf(item, sizeof(item), "cpu%d %.0f", cpu, v->rates.cpu_per_s[u]);
        else
            snprintf(item, sizeof(item), "cpu%d %" PRIu64, cpu, column_count(v->cur, u));
        wrap_item(out, &col, item);
    }
    strbuf_putc(out, '\n');
}

/* Large machines: one line per package, with its busiest CPU. */
static void per_package_text(const struct report_ctx *c, const struct irq_view *v,
                             struct strbuf *out)
{
    const struct topology *t = &c->cur->topo;
    for (unsigned p = 0; p < t->npackages; p++) {
        int pkg = t->package_ids[p];
        double sum = 0, top = -1;
        int top_cpu = -1;
        unsigned ncpu = 0;
        for (unsigned k = 0; k < v->cur->ncpus; k++) {
            int cpu = v->cur->cpu[k];
            if (cpu_package(c, cpu) != pkg)
                continue;
            int u = v->rated ? -1 : (int)k;
            for (unsigned i = 0; v->rated && i < v->rates.ncpus; i++)
                if (v->rates.cpu[i] == cpu)
                    u = (int)i;
            double x = u < 0      ? NAN
                       : v->rated ? v->rates.cpu_per_s[u]
                                  : (double)column_count(v->cur, k);
            if (isnan(x))
                continue;
            ncpu++;
            sum += x;
            if (x > top)
                top = x, top_cpu = cpu;
        }
        strbuf_appendf(out, "  pkg%d: %.0f %s over %u CPUs, most on cpu%d (%.0f)\n", pkg, sum,
                       v->rated ? "interrupts/s" : "since boot", ncpu, top_cpu, top);
    }
    strbuf_appendf(out, "  (%u CPUs: per-package lines only; --per-cpu for every CPU)\n",
                   v->cur->ncpus);
}

static void interrupts_text(const struct report_ctx *c, struct strbuf *out)
{
    struct irq_view v;
    view_build(c, &v);
    if (!v.cur) {
        const char *why = report_unavailable(c, SAMPLER_IRQ);
        strbuf_appendf(out, "  not available: %s\n",
                       why ? why : "interrupts unreadable (see problems)");
        return;
    }
    unsigned ntop = 0;
    for (unsigned i = 0; i < v.nrows; i++)
        ntop += !v.rows[i].src->total_only;
    ntop = ntop < TOP_N ? ntop : TOP_N;
    if (v.rated)
        strbuf_appendf(out, "  %.0f interrupts/s over %.2f s; top %u of %u sources by rate\n",
                       v.total_per_s, c->interval_s, ntop, v.cur->nsources);
    else
        strbuf_appendf(out, "  %s: top %u of %u sources by count since boot (no rates)\n",
                       c->b ? "no earlier sample to compare" : "one snapshot", ntop,
                       v.cur->nsources);
    top_table(&v, out);
    if (c->per_cpu || v.cur->ncpus <= 16 || c->cur->topo.npackages == 0)
        per_cpu_text(c, &v, out);
    else
        per_package_text(c, &v, out);
    for (unsigned i = 0; i < v.nrows; i++)
        if (v.rows[i].src->total_only && v.rows[i].src->total)
            strbuf_appendf(out, "  %s: %" PRIu64 " %s since boot\n", v.rows[i].src->label,
                           v.rows[i].src->total,
                           streq(v.rows[i].src->label, "MIS") ? "mis-routed interrupts"
                                                              : "erroneous interrupts");
    if (v.rates.nchanged)
        strbuf_appendf(out, "  %u sources appeared, disappeared or changed: not rated (problems)\n",
                       v.rates.nchanged);
    view_free(&v);
}

const struct report_section report_section_interrupts = {
    .key = "interrupts",
    .title = "Top interrupt sources",
    .json = interrupts_json,
    .text = interrupts_text,
};
