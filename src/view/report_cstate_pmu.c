/* Package and core C-state residency from the cstate PMUs, for the
 * report's C-state section. */
#include "view/report_cstate_pmu.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "base/util.h"

/* The reading of PMU s in both samples, or NULL with *ret_why. */
static const struct cstate_pmu_reading *readings(const struct report_ctx *c,
                                                 enum cstate_pmu_scope s,
                                                 const struct cstate_pmu_reading **ret_x,
                                                 const char **ret_why)
{
    const struct cstate_pmu_sample *y = c->cur->cstate_pmu;
    if (!y) {
        const char *why = report_unavailable(c, SAMPLER_CSTATE_PMU);
        *ret_why = why ? why : "the cstate PMUs were not read";
        return NULL;
    }
    const struct cstate_pmu_reading *r = &y->r[s];
    if (!r->pmu.present) {
        *ret_why = s == CSTATE_PMU_PKG ? "no cstate_pkg perf PMU on this machine"
                                       : "no cstate_core perf PMU on this machine";
        return NULL;
    }
    if (r->pmu.why) {
        *ret_why = r->pmu.why;
        return NULL;
    }
    if (!c->b || !c->a->cstate_pmu) {
        *ret_why = "one snapshot: residency needs two readings";
        return NULL;
    }
    *ret_x = &c->a->cstate_pmu->r[s];
    return r;
}

/* Unit I's residencies in %; false with *ret_why when any is unusable. */
static bool unit_pct(const struct cstate_pmu_reading *x, const struct cstate_pmu_reading *y,
                     unsigned i, double *ret_pct, const char **ret_why)
{
    for (unsigned k = 0; k < y->pmu.nevents; k++) {
        double f;
        int r = cstate_pmu_reading_residency(x, y, i, k, &f);
        if (r < 0) {
            *ret_why = r == -ERANGE ? "a counter went backwards or ran faster than the TSC"
                                    : "a counter could not be read in both samples";
            return false;
        }
        ret_pct[k] = 100.0 * f;
    }
    return true;
}

unsigned report_pkg_pmu(const struct report_ctx *c, int pkg, double *ret_pct,
                        const struct cstate_pmu **ret_pmu, const char **ret_why)
{
    const struct cstate_pmu_reading *x = NULL;
    const struct cstate_pmu_reading *y = readings(c, CSTATE_PMU_PKG, &x, ret_why);
    if (!y)
        return 0;
    unsigned i, n = 0;
    for (unsigned u = 0; u < y->pmu.nunits; u++)
        n += y->pmu.units[u].package == pkg;
    if (!cstate_pmu_find_unit(&y->pmu, pkg, -1, &i)) {
        *ret_why = "no CPU of this package in the PMU's cpumask";
        return 0;
    }
    if (n > 1) { /* cstate_die: one die's residency is not the package's */
        *ret_why = "counted per die, not per package: see package_pmu.units";
        return 0;
    }
    if (!unit_pct(x, y, i, ret_pct, ret_why))
        return 0;
    *ret_pmu = &y->pmu;
    return y->pmu.nevents;
}

static void states_json(const struct cstate_pmu *p, const char *prefix, struct json *j)
{
    json_key(j, "states");
    json_array_begin(j);
    for (unsigned k = 0; k < p->nevents; k++) {
        char name[16];
        snprintf(name, sizeof(name), "%s%u", prefix, p->ev[k].number);
        json_string(j, name);
    }
    json_array_end(j);
}

static void pmu_json(const struct report_ctx *c, enum cstate_pmu_scope s, struct json *j)
{
    const char *why = NULL;
    const struct cstate_pmu_reading *x = NULL;
    const struct cstate_pmu_reading *y = readings(c, s, &x, &why);
    const struct cstate_pmu_sample *cur = c->cur->cstate_pmu;
    const struct cstate_pmu *p = cur && cur->r[s].pmu.present ? &cur->r[s].pmu : NULL;
    json_object_begin(j);
    json_kv_string(j, "pmu", p ? p->name : NULL);
    json_kv_string(j, "why", why);
    if (p)
        states_json(p, s == CSTATE_PMU_PKG ? "pc" : "cc", j);
    json_key(j, "units");
    json_array_begin(j);
    for (unsigned i = 0; y && i < y->pmu.nunits; i++) {
        const struct cstate_pmu_unit *u = &y->pmu.units[i];
        double pct[CSTATE_PMU_MAX_EVENTS];
        const char *uwhy = NULL;
        bool ok = unit_pct(x, y, i, pct, &uwhy);
        json_object_begin(j);
        json_kv_i64(j, "package", u->package);
        if (s == CSTATE_PMU_CORE)
            json_kv_i64(j, "core", u->core);
        json_kv_i64(j, "cpu", u->cpu);
        json_key(j, "residency_pct");
        json_array_begin(j);
        for (unsigned k = 0; k < y->pmu.nevents; k++)
            json_double(j, ok ? pct[k] : NAN);
        json_array_end(j);
        json_kv_string(j, "why", ok ? NULL : uwhy);
        json_object_end(j);
    }
    json_array_end(j);
    json_object_end(j);
}

void report_cstate_pmu_json(const struct report_ctx *c, struct json *j)
{
    json_key(j, "package_pmu");
    pmu_json(c, CSTATE_PMU_PKG, j);
    json_key(j, "core_pmu");
    pmu_json(c, CSTATE_PMU_CORE, j);
}

void report_cstate_pmu_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct topology *t = &c->cur->topo;
    unsigned measured = 0;
    const char *why = NULL;
    for (unsigned n = 0; n < t->npackages; n++) {
        double pct[CSTATE_PMU_MAX_EVENTS];
        const struct cstate_pmu *p = NULL;
        unsigned ne = report_pkg_pmu(c, t->package_ids[n], pct, &p, &why);
        if (!ne)
            continue;
        if (!measured++)
            strbuf_appendf(out, "  package C-states (%s PMU, %% of the interval):\n", p->name);
        strbuf_appendf(out, "    pkg%d", t->package_ids[n]);
        for (unsigned k = 0; k < ne; k++)
            strbuf_appendf(out, "  PC%u %5.1f", p->ev[k].number, pct[k]);
        strbuf_putc(out, '\n');
    }
    if (measured)
        return;
    if (!c->cur->cstate_pmu) /* the long reason is under "Not measured here" */
        why = "no cstate_pkg perf PMU (see \"Not measured here\")";
    report_wrap(out, "  package C-states: not measured: ", 4,
                why ? why : "no package in the topology");
}
