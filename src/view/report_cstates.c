/* C-state residency per CPU and per package, with exit latencies. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/table.h"
#include "base/text.h"
#include "base/util.h"
#include "sense/cpuidle.h"
#include "view/report.h"
#include "view/report_cstate_pmu.h"

#define MAX_STATES 16

/* One CPU's figures: over the interval, or since boot with one sample. */
struct cs_row {
    int cpu, package;
    unsigned nstates;
    double pct[MAX_STATES]; /* % of the interval (or of idle time since boot) */
    double c0_pct;          /* NaN since boot */
    double wakeups_per_s;   /* NaN since boot */
    bool ok;
};

static void row_since_boot(const struct cpuidle_cpu *x, struct cs_row *r)
{
    double total = 0;
    for (unsigned k = 0; k < r->nstates; k++)
        total += x->state[k].time_us == VAL_NONE ? 0 : (double)x->state[k].time_us;
    for (unsigned k = 0; k < r->nstates; k++)
        r->pct[k] = total > 0 && x->state[k].time_us != VAL_NONE
                        ? 100.0 * (double)x->state[k].time_us / total
                        : NAN;
    r->c0_pct = r->wakeups_per_s = NAN;
    r->ok = total > 0;
}

static void compute_row(const struct report_ctx *c, const struct cpuidle_cpu *y, struct cs_row *r)
{
    *r = (struct cs_row){.cpu = y->cpu,
                         .nstates = y->nstates < MAX_STATES ? y->nstates : MAX_STATES};
    r->package = (unsigned)y->cpu < c->cur->topo.ncpu ? c->cur->topo.cpu[y->cpu].package : -1;
    if (!c->b) {
        row_since_boot(y, r);
        return;
    }
    const struct cpuidle_cpu *x = cpuidle_find_cpu(c->a->cpuidle, y->cpu);
    double pct[64];
    int e = cpuidle_residency(x, y, c->interval_s * 1e6, pct, &r->c0_pct, &r->wakeups_per_s);
    if (e < 0) {
        char where[48];
        snprintf(where, sizeof(where), "cpu%d C-state residency", y->cpu);
        diags_add(c->diags, where, 0, "%s",
                  e == -ERANGE ? "an idle counter went backwards between the two samples"
                  : x          ? "idle states changed between the two samples"
                               : "CPU was not online in the first sample");
        return;
    }
    memcpy(r->pct, pct, r->nstates * sizeof(double));
    r->ok = true;
}

/* Rows for every CPU that has cpuidle in the later sample. Owned array. */
static struct cs_row *compute_rows(const struct report_ctx *c, unsigned *ret_n)
{
    const struct cpuidle_sample *ci = c->cur->cpuidle;
    *ret_n = ci ? ci->ncpus : 0;
    struct cs_row *rows = xcalloc(*ret_n ? *ret_n : 1, sizeof(*rows));
    for (unsigned i = 0; i < *ret_n; i++)
        compute_row(c, &ci->cpus[i], &rows[i]);
    return rows;
}

/* Mean of a package's CPUs (a CPU-level view: the package's own C-states
 * come from the cstate_pkg PMU, report_cstate_pmu.c). */
static void package_mean(const struct cs_row *rows, unsigned n, int pkg, struct cs_row *ret)
{
    *ret = (struct cs_row){.cpu = -1, .package = pkg, .c0_pct = 0, .wakeups_per_s = 0};
    unsigned count = 0;
    for (unsigned i = 0; i < n; i++) {
        if (rows[i].package != pkg || !rows[i].ok)
            continue;
        if (count == 0)
            ret->nstates = rows[i].nstates;
        if (rows[i].nstates != ret->nstates)
            continue;
        for (unsigned k = 0; k < ret->nstates; k++)
            ret->pct[k] += rows[i].pct[k];
        ret->c0_pct += rows[i].c0_pct;
        ret->wakeups_per_s += rows[i].wakeups_per_s;
        count++;
    }
    for (unsigned k = 0; k < ret->nstates; k++)
        ret->pct[k] /= count;
    ret->c0_pct /= count;
    ret->ok = count > 0;
}

static void states_json(const struct cpuidle_sample *ci, struct json *j)
{
    json_array_begin(j);
    if (ci && ci->ncpus) {
        const struct cpuidle_cpu *first = &ci->cpus[0];
        for (unsigned k = 0; k < first->nstates; k++) {
            const struct cpuidle_state *st = &first->state[k];
            json_object_begin(j);
            json_kv_u64(j, "index", k);
            json_kv_string(j, "name", st->name);
            json_kv_string(j, "desc", st->desc);
            json_key(j, "latency_us");
            st->latency_us == VAL_NONE ? json_null(j) : json_u64(j, st->latency_us);
            json_key(j, "residency_us");
            st->residency_us == VAL_NONE ? json_null(j) : json_u64(j, st->residency_us);
            struct cpuset dis = {0};
            for (unsigned i = 0; i < ci->ncpus; i++)
                if (k < ci->cpus[i].nstates && ci->cpus[i].state[k].disable == 1)
                    cpuset_add(&dis, (unsigned)ci->cpus[i].cpu);
            _cleanup_free_ char *dl = cpuset_format(&dis);
            json_kv_string(j, "disabled_cpus", dl);
            cpuset_free(&dis);
            json_object_end(j);
        }
    }
    json_array_end(j);
}

/* A package row's source: "pmu" with the package PMU's residency (in the
 * order of package_pmu.states) when it measured the package, else "mean
 * of CPUs" (residency_pct is the mean of the package's CPUs either way). */
static void source_json(const struct report_ctx *c, int pkg, struct json *j)
{
    double pct[CSTATE_PMU_MAX_EVENTS];
    const struct cstate_pmu *p = NULL;
    const char *why = NULL;
    unsigned ne = report_pkg_pmu(c, pkg, pct, &p, &why);
    json_kv_string(j, "source", ne ? "pmu" : "mean of CPUs");
    json_key(j, "pmu_residency_pct");
    if (!ne) {
        json_null(j);
        return;
    }
    json_array_begin(j);
    for (unsigned k = 0; k < ne; k++)
        json_double(j, pct[k]);
    json_array_end(j);
}

static void row_json(const struct report_ctx *c, const struct cs_row *r,
                     const struct cpuidle_cpu *raw, struct json *j)
{
    json_object_begin(j);
    if (r->cpu < 0)
        source_json(c, r->package, j);
    if (r->cpu >= 0)
        json_kv_i64(j, "cpu", r->cpu);
    json_kv_i64(j, "package", r->package);
    json_kv_double(j, "c0_pct", r->ok ? r->c0_pct : NAN);
    json_kv_double(j, "wakeups_per_s", r->ok ? r->wakeups_per_s : NAN);
    json_key(j, "residency_pct");
    json_array_begin(j);
    for (unsigned k = 0; k < r->nstates; k++)
        json_double(j, r->ok ? r->pct[k] : NAN);
    json_array_end(j);
    if (raw) {
        json_key(j, "usage");
        json_array_begin(j);
        for (unsigned k = 0; k < raw->nstates; k++)
            raw->state[k].usage == VAL_NONE ? json_null(j) : json_u64(j, raw->state[k].usage);
        json_array_end(j);
        json_key(j, "time_us");
        json_array_begin(j);
        for (unsigned k = 0; k < raw->nstates; k++)
            raw->state[k].time_us == VAL_NONE ? json_null(j) : json_u64(j, raw->state[k].time_us);
        json_array_end(j);
    }
    json_object_end(j);
}

static void cstates_json(const struct report_ctx *c, struct json *j)
{
    const struct cpuidle_sample *ci = c->cur->cpuidle;
    if (!ci) {
        json_null(j);
        return;
    }
    unsigned n;
    _cleanup_free_ struct cs_row *rows = compute_rows(c, &n);
    json_object_begin(j);
    json_kv_string(j, "driver", ci->driver);
    json_kv_string(j, "governor", ci->governor);
    json_kv_string(j, "basis", c->b ? "interval" : "since_boot_idle_share");
    json_key(j, "states");
    states_json(ci, j);
    json_key(j, "per_cpu");
    json_array_begin(j);
    for (unsigned i = 0; i < n; i++)
        row_json(c, &rows[i], &ci->cpus[i], j);
    json_array_end(j);
    json_key(j, "per_package");
    json_array_begin(j);
    const struct topology *t = &c->cur->topo;
    for (unsigned p = 0; p < t->npackages; p++) {
        struct cs_row m;
        package_mean(rows, n, t->package_ids[p], &m);
        row_json(c, &m, NULL, j);
    }
    json_array_end(j);
    report_cstate_pmu_json(c, j);
    json_object_end(j);
}

static char *fmt_pct(double v, bool ok)
{
    return ok && !isnan(v) ? xasprintf("%.1f", v) : xstrdup("-");
}

static void table_row_text(struct table *t, const char *label, const struct cs_row *r,
                           unsigned nstates)
{
    char *cells[TABLE_MAX_COLS] = {0};
    unsigned nc = 0;
    cells[nc++] = xstrdup(label);
    cells[nc++] = fmt_pct(r->c0_pct, r->ok);
    for (unsigned k = 0; k < nstates && nc < TABLE_MAX_COLS - 1; k++)
        cells[nc++] = fmt_pct(k < r->nstates ? r->pct[k] : NAN, r->ok);
    cells[nc++] =
        r->ok && !isnan(r->wakeups_per_s) ? xasprintf("%.0f", r->wakeups_per_s) : xstrdup("-");
    table_add(t, cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7],
              cells[8], cells[9], cells[10], cells[11], cells[12], cells[13], cells[14], cells[15]);
    for (unsigned i = 0; i < nc; i++)
        free(cells[i]);
}

static void states_text(const struct cpuidle_sample *ci, struct strbuf *out)
{
    const struct cpuidle_cpu *first = &ci->cpus[0];
    for (unsigned k = 0; k < first->nstates; k++) {
        const struct cpuidle_state *st = &first->state[k];
        unsigned ndis = 0;
        for (unsigned i = 0; i < ci->ncpus; i++)
            ndis += k < ci->cpus[i].nstates && ci->cpus[i].state[k].disable == 1;
        _cleanup_free_ char *name = text_pad(st->name ? st->name : "?", 14);
        strbuf_appendf(out, "  state%u %s", k, name);
        char lat[24], res[24];
        snprintf(lat, sizeof(lat), "?");
        snprintf(res, sizeof(res), "?");
        if (st->latency_us != VAL_NONE)
            snprintf(lat, sizeof(lat), "%" PRIu64, st->latency_us);
        if (st->residency_us != VAL_NONE)
            snprintf(res, sizeof(res), "%" PRIu64, st->residency_us);
        strbuf_appendf(out, " exit latency %4s us, target residency %5s us", lat, res);
        if (ndis)
            strbuf_appendf(out, ", DISABLED on %u CPU%s", ndis, ndis == 1 ? "" : "s");
        strbuf_putc(out, '\n');
    }
}

struct rows_ctx {
    struct table *t;
    const struct cs_row *rows;
    unsigned n;
    unsigned nstates;
};

static int row_cpu_id(const void *ud, unsigned i)
{
    return ((const struct rows_ctx *)ud)->rows[i].cpu;
}

static void emit_cpu(void *ud, unsigned i, const char *label)
{
    struct rows_ctx *x = ud;
    table_row_text(x->t, label, &x->rows[i], x->nstates);
}

static void emit_pkg(void *ud, int pkg, const char *label)
{
    struct rows_ctx *x = ud;
    struct cs_row m;
    package_mean(x->rows, x->n, pkg, &m);
    table_row_text(x->t, label, &m, x->nstates);
}

static void cstates_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct cpuidle_sample *ci = c->cur->cpuidle;
    const char *why = report_unavailable(c, SAMPLER_CPUIDLE);
    if (!ci || !ci->ncpus) {
        strbuf_appendf(out, "  not available: %s\n", why ? why : "no CPU has cpuidle states");
        report_cstate_pmu_text(c, out); /* the hardware's view needs no cpuidle */
        return;
    }
    strbuf_appendf(out, "  driver %s, governor %s\n", ci->driver ? ci->driver : "-",
                   ci->governor ? ci->governor : "-");
    states_text(ci, out);
    unsigned n;
    _cleanup_free_ struct cs_row *rows = compute_rows(c, &n);
    unsigned nstates = ci->cpus[0].nstates < 12 ? ci->cpus[0].nstates : 12;
    const char *head[TABLE_MAX_COLS + 1] = {0};
    char names[12][24];
    unsigned nh = 0;
    head[nh++] = "cpu";
    head[nh++] = c->b ? ">C0 %" : ">C0";
    for (unsigned k = 0; k < nstates; k++) {
        const char *nm = ci->cpus[0].state[k].name;
        snprintf(names[k], sizeof(names[k]), ">%.13s %%", nm ? nm : "?");
        head[nh++] = names[k];
    }
    head[nh++] = ">wakeups/s";
    struct table t;
    table_init(&t, head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7], head[8],
               head[9], head[10], head[11], head[12], head[13], head[14], head[15], NULL);
    struct rows_ctx x = {.t = &t, .rows = rows, .n = n, .nstates = nstates};
    bool per_cpu = report_cpu_rows(c, n, row_cpu_id, emit_cpu, emit_pkg, &x);
    if (!c->b)
        strbuf_append(out, "  one snapshot: share of idle time per state since boot\n");
    table_render(&t, out, REPORT_WIDTH);
    table_free(&t);
    strbuf_append(out, "  pkgN rows: mean residency of the package's CPUs, total wake-ups\n");
    report_cstate_pmu_text(c, out);
    if (!per_cpu)
        strbuf_appendf(out, "  (%u CPUs: per-package rows only; --per-cpu for every CPU)\n", n);
}

const struct report_section report_section_cstates = {
    .key = "cstates",
    .title = "C-states (idle states)",
    .json = cstates_json,
    .text = cstates_text,
};
