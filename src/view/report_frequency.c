/* CPU frequency: driver, governor, EPP, turbo, and per CPU the frequency
 * the kernel requested (scaling_cur_freq) next to the effective one
 * (APERF/MPERF) over the interval. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/table.h"
#include "base/util.h"
#include "model/turbo.h"
#include "sense/cpufreq.h"
#include "view/report.h"

/* One CPU's (or a package's mean) figures. MHz, NaN when absent. */
struct fq_row {
    int cpu, package;
    unsigned ncpus;    /* package rows: CPUs with a value */
    double cur_mhz;    /* scaling_cur_freq */
    double min_mhz;    /* scaling_min_freq */
    double max_mhz;    /* scaling_max_freq */
    double hw_max_mhz; /* cpuinfo_max_freq */
    struct cpufreq_eff eff;
    bool eff_ok;
};

static double khz_to_mhz(uint64_t khz)
{
    return khz == VAL_NONE ? NAN : (double)khz / 1e3;
}

static int cpu_package(const struct report_ctx *c, int cpu)
{
    const struct topology *t = &c->cur->topo;
    return cpu >= 0 && (unsigned)cpu < t->ncpu ? t->cpu[cpu].package : -1;
}

static void effective_diag(const struct report_ctx *c, int cpu, int e)
{
    if (e == -ENODATA)
        return; /* no counters: said once, in the sampler's reason */
    char where[48];
    snprintf(where, sizeof(where), "cpu%d effective frequency", cpu);
    diags_add(c->diags, where, 0, "%s",
              e == -ERANGE ? "APERF or MPERF went backwards between the samples"
                           : "the counters were reopened between the samples");
}

static void compute_row(const struct report_ctx *c, const struct cpufreq_cpu *y, struct fq_row *r)
{
    *r = (struct fq_row){
        .cpu = y->cpu,
        .package = cpu_package(c, y->cpu),
        .ncpus = 1,
        .cur_mhz = khz_to_mhz(y->cur_khz),
        .min_mhz = khz_to_mhz(y->min_khz),
        .max_mhz = khz_to_mhz(y->max_khz),
        .hw_max_mhz = khz_to_mhz(y->hw_max_khz),
        .eff = {NAN, NAN, NAN, NAN},
    };
    if (!c->b)
        return;
    int e = cpufreq_effective(c->a->cpufreq, c->b->cpufreq, y->cpu, &r->eff);
    r->eff_ok = e == 0;
    if (e < 0) {
        r->eff = (struct cpufreq_eff){NAN, NAN, NAN, NAN};
        effective_diag(c, y->cpu, e);
    }
}

static struct fq_row *compute_rows(const struct report_ctx *c, unsigned *ret_n)
{
    const struct cpufreq_sample *cf = c->cur->cpufreq;
    *ret_n = cf->ncpus;
    struct fq_row *rows = xcalloc(cf->ncpus ? cf->ncpus : 1, sizeof(*rows));
    for (unsigned i = 0; i < cf->ncpus; i++)
        compute_row(c, &cf->cpus[i], &rows[i]);
    return rows;
}

/* Mean of the values that exist; NaN when none does. */
struct mean {
    double sum;
    unsigned n;
};

static void mean_add(struct mean *m, double v)
{
    if (!isnan(v)) {
        m->sum += v;
        m->n++;
    }
}

static double mean_get(const struct mean *m)
{
    return m->n ? m->sum / m->n : NAN;
}

static void package_row(const struct fq_row *rows, unsigned n, int pkg, struct fq_row *ret)
{
    struct mean cur = {0}, lo = {0}, hi = {0}, hw = {0}, busy = {0}, avg = {0}, c0 = {0};
    unsigned count = 0;
    for (unsigned i = 0; i < n; i++) {
        if (rows[i].package != pkg)
            continue;
        count++;
        mean_add(&cur, rows[i].cur_mhz);
        mean_add(&lo, rows[i].min_mhz);
        mean_add(&hi, rows[i].max_mhz);
        mean_add(&hw, rows[i].hw_max_mhz);
        mean_add(&busy, rows[i].eff.busy_mhz);
        mean_add(&avg, rows[i].eff.avg_mhz);
        mean_add(&c0, rows[i].eff.c0_pct);
    }
    *ret = (struct fq_row){
        .cpu = -1,
        .package = pkg,
        .ncpus = count,
        .cur_mhz = mean_get(&cur),
        .min_mhz = mean_get(&lo),
        .max_mhz = mean_get(&hi),
        .hw_max_mhz = mean_get(&hw),
        .eff = {mean_get(&busy), mean_get(&avg), NAN, mean_get(&c0)},
        .eff_ok = avg.n > 0,
    };
}

/* Turbo headroom of one package (model/turbo.h): APERF/MPERF over the
 * interval when there is one. */
static void headroom(const struct report_ctx *c, int pkg, struct turbo_pkg *ret)
{
    turbo_package(c->b ? c->a->cpufreq : NULL, c->cur->cpufreq, &c->cur->topo, pkg, ret);
}

/* ---- JSON ----------------------------------------------------------- */

static void kv_khz(struct json *j, const char *key, uint64_t v)
{
    json_key(j, key);
    v == VAL_NONE ? json_null(j) : json_u64(j, v);
}

static void kv_int_or_null(struct json *j, const char *key, int v)
{
    json_key(j, key);
    v < 0 ? json_null(j) : json_i64(j, v);
}

/* Distinct values of a string member across CPUs, in CPU order. */
static void distinct_json(const struct cpufreq_sample *cf, size_t off, struct json *j)
{
    json_array_begin(j);
    for (unsigned i = 0; i < cf->ncpus; i++) {
        const char *v = *(char *const *)((const char *)&cf->cpus[i] + off);
        bool seen = !v;
        for (unsigned k = 0; k < i && !seen; k++)
            seen = streq(v, *(char *const *)((const char *)&cf->cpus[k] + off));
        if (!seen)
            json_string(j, v);
    }
    json_array_end(j);
}

/* true, false, or -1 when the kernel says nothing. */
static int turbo_state(const struct cpufreq_sample *cf)
{
    if (cf->no_turbo >= 0)
        return !cf->no_turbo;
    return cf->boost;
}

static void drivers_json(const struct cpufreq_sample *cf, struct json *j)
{
    json_key(j, "drivers");
    distinct_json(cf, offsetof(struct cpufreq_cpu, driver), j);
    json_key(j, "governors");
    distinct_json(cf, offsetof(struct cpufreq_cpu, governor), j);
    json_key(j, "epp");
    distinct_json(cf, offsetof(struct cpufreq_cpu, epp), j);
    int turbo = turbo_state(cf);
    json_key(j, "turbo");
    turbo < 0 ? json_null(j) : json_bool(j, turbo);
    json_key(j, "boost");
    cf->boost < 0 ? json_null(j) : json_bool(j, cf->boost);
    json_key(j, "intel_pstate");
    if (cf->intel_pstate_status || cf->no_turbo >= 0) {
        json_object_begin(j);
        json_kv_string(j, "status", cf->intel_pstate_status);
        kv_int_or_null(j, "no_turbo", cf->no_turbo);
        kv_int_or_null(j, "max_perf_pct", cf->max_perf_pct);
        kv_int_or_null(j, "min_perf_pct", cf->min_perf_pct);
        json_object_end(j);
    } else {
        json_null(j);
    }
    json_key(j, "amd_pstate");
    if (cf->amd_pstate_status) {
        json_object_begin(j);
        json_kv_string(j, "status", cf->amd_pstate_status);
        json_object_end(j);
    } else {
        json_null(j);
    }
}

static void eff_json(const struct fq_row *r, struct json *j)
{
    json_kv_double(j, "busy_mhz", r->eff_ok ? r->eff.busy_mhz : NAN);
    json_kv_double(j, "avg_mhz", r->eff_ok ? r->eff.avg_mhz : NAN);
    json_kv_double(j, "c0_pct", r->eff_ok ? r->eff.c0_pct : NAN);
}

static void cpu_json(const struct fq_row *r, const struct cpufreq_cpu *x, struct json *j)
{
    json_object_begin(j);
    json_kv_i64(j, "cpu", x->cpu);
    json_kv_i64(j, "package", r->package);
    json_kv_string(j, "driver", x->driver);
    json_kv_string(j, "governor", x->governor);
    json_kv_string(j, "epp", x->epp);
    json_kv_string(j, "epp_available", x->epp_available);
    kv_khz(j, "scaling_cur_khz", x->cur_khz);
    kv_khz(j, "scaling_min_khz", x->min_khz);
    kv_khz(j, "scaling_max_khz", x->max_khz);
    kv_khz(j, "cpuinfo_min_khz", x->hw_min_khz);
    kv_khz(j, "cpuinfo_max_khz", x->hw_max_khz);
    kv_khz(j, "cpuinfo_cur_khz", x->hw_cur_khz);
    kv_khz(j, "base_khz", x->base_khz);
    eff_json(r, j);
    json_kv_double(j, "tsc_mhz", r->eff_ok ? r->eff.tsc_mhz : NAN);
    kv_khz(j, "aperf", x->aperf);
    kv_khz(j, "mperf", x->mperf);
    kv_khz(j, "tsc", x->tsc);
    json_object_end(j);
}

static void headroom_json(const struct turbo_pkg *h, struct json *j)
{
    json_key(j, "turbo");
    json_object_begin(j);
    json_kv_double(j, "base_mhz", h->base_mhz);
    json_kv_string(j, "base_source", h->base_source);
    json_kv_double(j, "max_nonturbo_mhz", h->nonturbo_mhz);
    json_kv_string(j, "max_nonturbo_source", h->nonturbo_source);
    json_kv_double(j, "max_turbo_mhz", h->turbo_mhz);
    json_kv_string(j, "max_turbo_source", h->turbo_source);
    json_kv_double(j, "scaling_max_lowest_mhz", h->limit_mhz);
    json_key(j, "boost");
    h->boost < 0 ? json_null(j) : json_bool(j, h->boost);
    json_kv_string(j, "boost_source", h->boost_source);
    json_kv_double(j, "busy_mean_mhz", h->busy_mean_mhz);
    json_kv_double(j, "busy_max_mhz", h->busy_max_mhz);
    json_kv_u64(j, "busy_cpus", h->busy_cpus);
    json_kv_string(j, "busy_source", h->busy_source);
    json_key(j, "reached");
    h->reached < 0 ? json_null(j) : json_bool(j, h->reached);
    json_key(j, "blocked_by");
    json_array_begin(j);
    for (unsigned k = 0; k < TURBO_BLOCKERS; k++)
        if (h->blockers & turbo_blocker_bit(k))
            json_string(j, turbo_blocker_name(turbo_blocker_bit(k)));
    json_array_end(j);
    json_object_end(j);
}

static void mhz_json(const struct cpufreq_sample *cf, struct json *j)
{
    json_key(j, "proc_cpuinfo_mhz");
    json_array_begin(j);
    for (size_t i = 0; i < cf->nmhz; i++) {
        json_object_begin(j);
        json_kv_i64(j, "cpu", cf->mhz[i].cpu);
        json_kv_double(j, "mhz", cf->mhz[i].mhz);
        json_object_end(j);
    }
    json_array_end(j);
}

static void frequency_json(const struct report_ctx *c, struct json *j)
{
    const struct cpufreq_sample *cf = c->cur->cpufreq;
    if (!cf) {
        json_null(j);
        return;
    }
    unsigned n;
    _cleanup_free_ struct fq_row *rows = compute_rows(c, &n);
    json_object_begin(j);
    drivers_json(cf, j);
    json_kv_string(j, "basis", c->b ? "interval" : "snapshot");
    json_kv_string(j, "effective_source", cf->msr_source);
    json_kv_string(j, "effective_unavailable", cf->msr_why);
    json_kv_double(j, "mean_busy_ghz", cpufreq_mean_busy_ghz(c->b ? c->a->cpufreq : NULL, cf));
    json_key(j, "per_cpu");
    json_array_begin(j);
    for (unsigned i = 0; i < n; i++)
        cpu_json(&rows[i], &cf->cpus[i], j);
    json_array_end(j);
    json_key(j, "per_package");
    json_array_begin(j);
    const struct topology *t = &c->cur->topo;
    for (unsigned p = 0; p < t->npackages; p++) {
        struct fq_row m;
        package_row(rows, n, t->package_ids[p], &m);
        json_object_begin(j);
        json_kv_i64(j, "package", m.package);
        json_kv_u64(j, "cpus", m.ncpus);
        json_kv_double(j, "scaling_cur_mhz", m.cur_mhz);
        json_kv_double(j, "scaling_min_mhz", m.min_mhz);
        json_kv_double(j, "scaling_max_mhz", m.max_mhz);
        eff_json(&m, j);
        struct turbo_pkg h;
        headroom(c, m.package, &h);
        headroom_json(&h, j);
        json_object_end(j);
    }
    json_array_end(j);
    mhz_json(cf, j);
    json_object_end(j);
}

/* ---- text ----------------------------------------------------------- */

static void distinct_text(const struct cpufreq_sample *cf, size_t off, struct strbuf *out)
{
    unsigned shown = 0;
    for (unsigned i = 0; i < cf->ncpus; i++) {
        const char *v = *(char *const *)((const char *)&cf->cpus[i] + off);
        bool seen = !v;
        for (unsigned k = 0; k < i && !seen; k++)
            seen = streq(v, *(char *const *)((const char *)&cf->cpus[k] + off));
        if (!seen)
            strbuf_appendf(out, "%s%s", shown++ ? "/" : "", v);
    }
    if (!shown)
        strbuf_putc(out, '-');
}

static void header_text(const struct cpufreq_sample *cf, struct strbuf *out)
{
    strbuf_append(out, "  driver ");
    distinct_text(cf, offsetof(struct cpufreq_cpu, driver), out);
    if (cf->intel_pstate_status)
        strbuf_appendf(out, " (%s)", cf->intel_pstate_status);
    else if (cf->amd_pstate_status)
        strbuf_appendf(out, " (amd_pstate %s)", cf->amd_pstate_status);
    strbuf_append(out, ", governor ");
    distinct_text(cf, offsetof(struct cpufreq_cpu, governor), out);
    int turbo = turbo_state(cf);
    strbuf_appendf(out, ", turbo %s\n", turbo < 0 ? "unknown" : turbo ? "on" : "off");
    bool epp = false;
    for (unsigned i = 0; i < cf->ncpus && !epp; i++)
        epp = cf->cpus[i].epp;
    if (epp) {
        strbuf_append(out, "  energy/performance preference (EPP) ");
        distinct_text(cf, offsetof(struct cpufreq_cpu, epp), out);
        strbuf_putc(out, '\n');
    }
    if (cf->max_perf_pct >= 0 && cf->min_perf_pct >= 0)
        strbuf_appendf(out, "  intel_pstate performance limits %d..%d %%\n", cf->min_perf_pct,
                       cf->max_perf_pct);
    if (cf->msr_why)
        strbuf_appendf(out, "  effective frequency not measured:%s%s\n",
                       strlen(cf->msr_why) > 60 ? "\n    " : " ", cf->msr_why);
}

static char *mhz(double v)
{
    return isnan(v) ? xstrdup("-") : xasprintf("%.0f", v);
}

static void row_text(struct table *t, const char *label, const struct fq_row *r)
{
    char *cell[7] = {
        mhz(r->cur_mhz),
        mhz(r->eff_ok ? r->eff.busy_mhz : NAN),
        mhz(r->eff_ok ? r->eff.avg_mhz : NAN),
        r->eff_ok && !isnan(r->eff.c0_pct) ? xasprintf("%.1f", r->eff.c0_pct) : xstrdup("-"),
        mhz(r->min_mhz),
        mhz(r->max_mhz),
        mhz(r->hw_max_mhz),
    };
    table_add(t, label, cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6]);
    for (int i = 0; i < 7; i++)
        free(cell[i]);
}

struct rows_ctx {
    struct table *t;
    const struct fq_row *rows;
    unsigned n;
};

static int row_cpu_id(const void *ud, unsigned i)
{
    return ((const struct rows_ctx *)ud)->rows[i].cpu;
}

static void emit_cpu(void *ud, unsigned i, const char *label)
{
    struct rows_ctx *x = ud;
    row_text(x->t, label, &x->rows[i]);
}

static void emit_pkg(void *ud, int pkg, const char *label)
{
    struct rows_ctx *x = ud;
    struct fq_row m;
    package_row(x->rows, x->n, pkg, &m);
    row_text(x->t, label, &m);
}

static char *boost_cell(const struct turbo_pkg *h)
{
    return xstrdup(h->boost < 0 ? "-" : h->boost ? "on" : "off");
}

static char *busy_cell(const struct turbo_pkg *h)
{
    if (!h->busy_cpus)
        return xstrdup("-");
    return xasprintf("%.0f / %.0f", h->busy_mean_mhz, h->busy_max_mhz);
}

/* One line per setting that holds the package below turbo. */
static void blockers_text(const struct turbo_pkg *h, struct strbuf *out)
{
    for (unsigned k = 0; k < TURBO_BLOCKERS; k++)
        if (h->blockers & turbo_blocker_bit(k))
            strbuf_appendf(out, "  pkg%d turbo blocked: %s\n", h->package,
                           turbo_blocker_text(turbo_blocker_bit(k)));
}

/* Per package: base, max non-turbo, max turbo, the lowest cap, the boost
 * switch, the busy clock (mean / highest CPU) and whether it went past
 * base; then what blocks turbo and where the figures came from. */
static void headroom_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct topology *topo = &c->cur->topo;
    struct turbo_pkg *h = xcalloc(topo->npackages ? topo->npackages : 1, sizeof(*h));
    struct table t;
    strbuf_append(out, "  turbo headroom\n");
    table_init(&t, "pkg", ">base MHz", ">non-turbo", ">max turbo", ">cap MHz", "boost",
               ">busy MHz mean / max", "reached", NULL);
    for (unsigned p = 0; p < topo->npackages; p++) {
        headroom(c, topo->package_ids[p], &h[p]);
        char *cell[7] = {
            mhz(h[p].base_mhz),
            mhz(h[p].nonturbo_mhz),
            mhz(h[p].turbo_mhz),
            mhz(h[p].limit_mhz),
            boost_cell(&h[p]),
            busy_cell(&h[p]),
            xstrdup(h[p].reached < 0 ? "unknown"
                    : h[p].reached   ? "yes"
                                     : "no"),
        };
        char label[24];
        snprintf(label, sizeof(label), "pkg%d", h[p].package);
        table_add(&t, label, cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6]);
        for (int i = 0; i < 7; i++)
            free(cell[i]);
    }
    table_render(&t, out, REPORT_WIDTH);
    table_free(&t);
    for (unsigned p = 0; p < topo->npackages; p++)
        blockers_text(&h[p], out);
    if (topo->npackages) {
        const struct turbo_pkg *x = &h[0];
        strbuf_appendf(out,
                       "  base: %s; max turbo: %s\n  busy: %s\n  reached: the busiest CPU's clock "
                       "above base by over 1 %%\n",
                       x->base_source ? x->base_source : "unknown",
                       x->turbo_source ? x->turbo_source : "unknown",
                       !x->busy_source                        ? "no busy clock"
                       : streq(x->busy_source, "APERF/MPERF") ? "APERF/MPERF over the interval"
                                                              : "cpu MHz of cpuinfo (the kernel's "
                                                                "APERF/MPERF estimate)");
    }
    free(h);
}

static void frequency_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct cpufreq_sample *cf = c->cur->cpufreq;
    if (!cf || !cf->ncpus) {
        const char *why = report_unavailable(c, SAMPLER_CPUFREQ);
        strbuf_appendf(out, "  not available: %s\n", why ? why : "no online CPU has cpufreq");
        return;
    }
    header_text(cf, out);
    unsigned n;
    _cleanup_free_ struct fq_row *rows = compute_rows(c, &n);
    struct table t;
    table_init(&t, "cpu", ">cur MHz", ">busy MHz", ">avg MHz", ">C0 %", ">min MHz", ">max MHz",
               ">hw max MHz", NULL);
    struct rows_ctx x = {.t = &t, .rows = rows, .n = n};
    bool per_cpu = report_cpu_rows(c, n, row_cpu_id, emit_cpu, emit_pkg, &x);
    table_render(&t, out, REPORT_WIDTH);
    table_free(&t);
    strbuf_append(out, "  cur: last requested/observed by the kernel (scaling_cur_freq); busy: "
                       "mean clock in C0,\n  avg: mean clock over the interval (APERF/MPERF); "
                       "pkgN: mean of its CPUs\n");
    if (!per_cpu)
        strbuf_appendf(out, "  (%u CPUs: per-package rows only; --per-cpu for every CPU)\n", n);
    headroom_text(c, out);
}

const struct report_section report_section_frequency = {
    .key = "frequency",
    .title = "Frequency",
    .json = frequency_json,
    .text = frequency_text,
};
