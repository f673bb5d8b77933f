/* CPU utilisation from /proc/stat: busy, iowait and steal per CPU and in
 * total, context switches and interrupts per second. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/table.h"
#include "base/util.h"
#include "sense/procstat.h"
#include "view/report.h"

/* One CPU's (or the total's, or a package's) utilisation over the interval. */
struct ut_row {
    int cpu, package; /* cpu -1 for the total and package rows */
    unsigned ncpus;   /* package rows: CPUs averaged */
    struct procstat_util u;
    bool ok;
};

static int cpu_package(const struct report_ctx *c, int cpu)
{
    const struct topology *t = &c->cur->topo;
    return cpu >= 0 && (unsigned)cpu < t->ncpu ? t->cpu[cpu].package : -1;
}

static void compute_row(const struct report_ctx *c, const struct procstat_cpu *x,
                        const struct procstat_cpu *y, struct ut_row *r)
{
    *r = (struct ut_row){.cpu = y->cpu, .package = cpu_package(c, y->cpu)};
    if (!c->b)
        return; /* one snapshot: no rates */
    int e = procstat_util(x, y, &r->u);
    r->ok = e == 0;
    if (e == -ENODATA && x)
        return; /* no tick passed: nothing to say */
    if (e < 0) {
        char where[48];
        if (y->cpu < 0)
            snprintf(where, sizeof(where), "total CPU utilisation");
        else
            snprintf(where, sizeof(where), "cpu%d utilisation", y->cpu);
        diags_add(c->diags, where, 0, "%s",
                  e == -ERANGE ? "a /proc/stat time counter went backwards between the samples"
                  : y->cpu < 0 ? "no total line in the first sample"
                               : "CPU was not online in the first sample");
    }
}

static struct ut_row *compute_rows(const struct report_ctx *c, unsigned *ret_n)
{
    const struct procstat_sample *ps = c->cur->procstat;
    const struct procstat_sample *pa = c->b ? c->a->procstat : NULL;
    *ret_n = ps->ncpus;
    struct ut_row *rows = xcalloc(ps->ncpus ? ps->ncpus : 1, sizeof(*rows));
    for (unsigned i = 0; i < ps->ncpus; i++)
        compute_row(c, procstat_find_cpu(pa, ps->cpus[i].cpu), &ps->cpus[i], &rows[i]);
    return rows;
}

/* Mean over a package's CPUs that have figures; busy_cpus is their sum.
 * ncpus counts all of the package's CPUs listed in /proc/stat. */
static void package_row(const struct ut_row *rows, unsigned n, int pkg, struct ut_row *ret)
{
    *ret = (struct ut_row){.cpu = -1, .package = pkg};
    struct procstat_util *m = &ret->u;
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        if (rows[i].package != pkg)
            continue;
        ret->ncpus++;
        if (!rows[i].ok)
            continue;
        const struct procstat_util *u = &rows[i].u;
        m->busy_pct += u->busy_pct;
        m->user_pct += u->user_pct;
        m->system_pct += u->system_pct;
        m->irq_pct += u->irq_pct;
        m->iowait_pct += u->iowait_pct;
        m->steal_pct += u->steal_pct;
        m->guest_pct += u->guest_pct;
        m->idle_pct += u->idle_pct;
        m->busy_cpus += u->busy_cpus;
        k++;
    }
    ret->ok = k > 0;
    if (!ret->ok)
        return;
    m->busy_pct /= k;
    m->user_pct /= k;
    m->system_pct /= k;
    m->irq_pct /= k;
    m->iowait_pct /= k;
    m->steal_pct /= k;
    m->guest_pct /= k;
    m->idle_pct /= k;
}

static void util_json(const struct ut_row *r, struct json *j)
{
    const struct procstat_util *u = &r->u;
    json_kv_double(j, "busy_pct", r->ok ? u->busy_pct : NAN);
    json_kv_double(j, "user_pct", r->ok ? u->user_pct : NAN);
    json_kv_double(j, "system_pct", r->ok ? u->system_pct : NAN);
    json_kv_double(j, "irq_pct", r->ok ? u->irq_pct : NAN);
    json_kv_double(j, "iowait_pct", r->ok ? u->iowait_pct : NAN);
    json_kv_double(j, "steal_pct", r->ok ? u->steal_pct : NAN);
    json_kv_double(j, "guest_pct", r->ok ? u->guest_pct : NAN);
    json_kv_double(j, "idle_pct", r->ok ? u->idle_pct : NAN);
    json_kv_double(j, "busy_cpus", r->ok ? u->busy_cpus : NAN);
}

/* Cumulative seconds per mode since boot, from the latest sample:
 * node_cpu_seconds_total{mode} and node_cpu_guest_seconds_total. */
static void seconds_json(const struct procstat_cpu *x, struct json *j)
{
    json_key(j, "seconds");
    json_object_begin(j);
    for (int m = 0; m < _PROCSTAT_NMODES; m++)
        json_kv_double(j, procstat_mode_name(m), procstat_seconds(x, m));
    json_object_end(j);
}

static void counter_json(struct json *j, const char *key, uint64_t v)
{
    json_key(j, key);
    v == VAL_NONE ? json_null(j) : json_u64(j, v);
}

/* Events per second of a cumulative counter; NaN without two readings. */
static double counter_rate(const struct report_ctx *c, size_t off, const char *what)
{
    if (!c->b || !c->a->procstat || !c->b->procstat || c->interval_s <= 0)
        return NAN;
    uint64_t x = *(const uint64_t *)((const char *)c->a->procstat + off);
    uint64_t y = *(const uint64_t *)((const char *)c->b->procstat + off);
    if (x == VAL_NONE || y == VAL_NONE)
        return NAN;
    if (y < x) {
        diags_add(c->diags, what, 0, "counter went backwards between the samples");
        return NAN;
    }
    return (double)(y - x) / c->interval_s;
}

#define RATE(c, field, what) counter_rate(c, offsetof(struct procstat_sample, field), what)

static void totals_json(const struct report_ctx *c, const struct procstat_sample *ps,
                        struct json *j)
{
    struct ut_row total = {.cpu = -1, .package = -1};
    if (ps->has_total) {
        const struct procstat_sample *pa = c->b ? c->a->procstat : NULL;
        compute_row(c, pa && pa->has_total ? &pa->total : NULL, &ps->total, &total);
        /* The "cpu" line's share is of all CPUs together: in CPUs' worth of
         * busy time it is the per-CPU sum, as busy_cpus is everywhere else. */
        if (total.ok)
            total.u.busy_cpus = procstat_busy_cpus(pa, ps);
    }
    json_key(j, "total");
    json_object_begin(j);
    util_json(&total, j);
    if (ps->has_total)
        seconds_json(&ps->total, j);
    json_object_end(j);
    json_kv_double(j, "busy_cpus", c->b ? procstat_busy_cpus(c->a->procstat, ps) : NAN);
    json_kv_double(j, "context_switches_per_s", RATE(c, ctxt, "ctxt per second"));
    json_kv_double(j, "interrupts_per_s", RATE(c, intr, "intr per second"));
    json_kv_double(j, "forks_per_s", RATE(c, processes, "processes per second"));
    counter_json(j, "context_switches", ps->ctxt);
    counter_json(j, "interrupts", ps->intr);
    counter_json(j, "forks", ps->processes);
    counter_json(j, "procs_running", ps->procs_running);
    counter_json(j, "procs_blocked", ps->procs_blocked);
    counter_json(j, "boot_time_s", ps->btime);
}

static void utilisation_json(const struct report_ctx *c, struct json *j)
{
    const struct procstat_sample *ps = c->cur->procstat;
    if (!ps) {
        json_null(j);
        return;
    }
    unsigned n;
    _cleanup_free_ struct ut_row *rows = compute_rows(c, &n);
    json_object_begin(j);
    json_kv_u64(j, "user_hz", PROCSTAT_USER_HZ);
    json_kv_string(j, "basis", c->b ? "interval" : "snapshot");
    totals_json(c, ps, j);
    json_key(j, "per_cpu");
    json_array_begin(j);
    for (unsigned i = 0; i < n; i++) {
        json_object_begin(j);
        json_kv_i64(j, "cpu", rows[i].cpu);
        json_kv_i64(j, "package", rows[i].package);
        util_json(&rows[i], j);
        seconds_json(&ps->cpus[i], j);
        json_object_end(j);
    }
    json_array_end(j);
    json_key(j, "per_package");
    json_array_begin(j);
    const struct topology *t = &c->cur->topo;
    for (unsigned p = 0; p < t->npackages; p++) {
        struct ut_row m;
        package_row(rows, n, t->package_ids[p], &m);
        json_object_begin(j);
        json_kv_i64(j, "package", m.package);
        json_kv_u64(j, "cpus", m.ncpus);
        util_json(&m, j);
        json_object_end(j);
    }
    json_array_end(j);
    json_object_end(j);
}

/* ---- text ----------------------------------------------------------- */

static char *pct(double v, bool ok)
{
    return ok && !isnan(v) ? xasprintf("%.1f", v) : xstrdup("-");
}

static void row_text(struct table *t, const char *label, const struct ut_row *r)
{
    const struct procstat_util *u = &r->u;
    char *cell[8] = {
        pct(u->busy_pct, r->ok),   pct(u->user_pct, r->ok),
        pct(u->system_pct, r->ok), pct(u->irq_pct, r->ok),
        pct(u->iowait_pct, r->ok), pct(u->steal_pct, r->ok),
        pct(u->guest_pct, r->ok),  r->ok ? xasprintf("%.2f", u->busy_cpus) : xstrdup("-"),
    };
    table_add(t, label, cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6], cell[7]);
    for (int i = 0; i < 8; i++)
        free(cell[i]);
}

static char *rate_text(double v)
{
    return isnan(v) ? xstrdup("-") : xasprintf("%.0f", v);
}

static void summary_text(const struct report_ctx *c, const struct procstat_sample *ps,
                         struct strbuf *out)
{
    struct ut_row total = {.cpu = -1};
    if (ps->has_total) {
        const struct procstat_sample *pa = c->b ? c->a->procstat : NULL;
        compute_row(c, pa && pa->has_total ? &pa->total : NULL, &ps->total, &total);
        /* The "cpu" line's share is of all CPUs together: in CPUs' worth of
         * busy time it is the per-CPU sum, as busy_cpus is everywhere else. */
        if (total.ok)
            total.u.busy_cpus = procstat_busy_cpus(pa, ps);
    }
    _cleanup_free_ char *busy = pct(total.u.busy_pct, total.ok);
    _cleanup_free_ char *iow = pct(total.u.iowait_pct, total.ok);
    _cleanup_free_ char *steal = pct(total.u.steal_pct, total.ok);
    double bc = c->b ? procstat_busy_cpus(c->a->procstat, ps) : NAN;
    strbuf_appendf(out, "  total busy %s %%", busy);
    if (!isnan(bc))
        strbuf_appendf(out, " (%.2f of %u CPUs)", bc, ps->ncpus);
    strbuf_appendf(out, ", iowait %s %%, steal %s %%\n", iow, steal);
    _cleanup_free_ char *cs = rate_text(RATE(c, ctxt, "ctxt per second"));
    _cleanup_free_ char *ir = rate_text(RATE(c, intr, "intr per second"));
    strbuf_appendf(out, "  context switches/s %s, interrupts/s %s", cs, ir);
    if (ps->procs_running != VAL_NONE && ps->procs_blocked != VAL_NONE)
        strbuf_appendf(out, ", runnable %" PRIu64 ", blocked on I/O %" PRIu64, ps->procs_running,
                       ps->procs_blocked);
    strbuf_putc(out, '\n');
}

struct rows_ctx {
    struct table *t;
    const struct ut_row *rows;
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
    struct ut_row m;
    package_row(x->rows, x->n, pkg, &m);
    row_text(x->t, label, &m);
}

static void utilisation_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct procstat_sample *ps = c->cur->procstat;
    if (!ps) {
        const char *why = report_unavailable(c, SAMPLER_PROCSTAT);
        strbuf_appendf(out, "  not available: %s\n", why ? why : "cannot read /proc/stat");
        return;
    }
    summary_text(c, ps, out);
    if (!c->b) {
        strbuf_append(out, "  one snapshot: no rates (use --interval)\n");
        return;
    }
    unsigned n;
    _cleanup_free_ struct ut_row *rows = compute_rows(c, &n);
    struct table t;
    table_init(&t, "cpu", ">busy %", ">user %", ">sys %", ">irq %", ">iowait %", ">steal %",
               ">guest %", ">busy CPUs", NULL);
    struct rows_ctx x = {.t = &t, .rows = rows, .n = n};
    bool per_cpu = report_cpu_rows(c, n, row_cpu_id, emit_cpu, emit_pkg, &x);
    table_render(&t, out, REPORT_WIDTH);
    table_free(&t);
    strbuf_append(out, "  % of each CPU's time; guest is part of user; pkgN: mean of its CPUs\n");
    if (!per_cpu)
        strbuf_appendf(out, "  (%u CPUs: per-package rows only; --per-cpu for every CPU)\n", n);
}

const struct report_section report_section_utilisation = {
    .key = "utilisation",
    .title = "Utilisation",
    .json = utilisation_json,
    .text = utilisation_text,
};
