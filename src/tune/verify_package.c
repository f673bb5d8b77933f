/* verify's per-package figures: idle and deepest-state residency of the
 * package's CPUs, the busy clock (APERF/MPERF), RAPL package and DRAM
 * watts, and the package's own C-states from the cstate_pkg PMU where it
 * counted (docs/cstate-pmu.md); where it did not, pc_why says why, and
 * the package rows carry only what the CPUs show. */
#include "tune/verify_package.h"

#include <math.h>
#include <stdlib.h>

#include "base/util.h"
#include "sense/cpufreq.h"
#include "sense/cpuidle.h"
#include "sense/sampler.h"
#include "tune/verify.h"
#include "view/report.h"
#include "view/report_cstate_pmu.h"

struct pkg_acc {
    unsigned n, nmhz;
    double idle, deepest, mhz;
};

/* One CPU's idle share and deepest-state residency into its package. */
static void add_cpu(struct pkg_acc *acc, const struct cpuidle_cpu *ca, const struct cpuidle_cpu *cb,
                    double interval_s)
{
    _cleanup_free_ double *res = xcalloc(cb->nstates ? cb->nstates : 1, sizeof(*res));
    double c0, wk;
    if (!ca || cpuidle_residency(ca, cb, interval_s * 1e6, res, &c0, &wk) < 0)
        return;
    acc->n++;
    acc->idle += 100.0 - c0;
    if (cb->nstates)
        acc->deepest += res[cb->nstates - 1];
}

static void sum_cpus(const struct report_ctx *c, struct pkg_acc *acc)
{
    const struct topology *t = &c->cur->topo;
    const struct cpuidle_sample *ia = c->a->cpuidle, *ib = c->b->cpuidle;
    for (unsigned i = 0; ib && i < ib->ncpus; i++) {
        const struct cpuidle_cpu *cb = &ib->cpus[i];
        if (cb->cpu < 0 || (unsigned)cb->cpu >= t->ncpu)
            continue;
        int k = topology_package_index(t, t->cpu[cb->cpu].package);
        if (k >= 0)
            add_cpu(&acc[k], ia ? cpuidle_find_cpu(ia, cb->cpu) : NULL, cb, c->interval_s);
    }
    for (unsigned cpu = 0; c->a->cpufreq && c->b->cpufreq && cpu < t->ncpu; cpu++) {
        int k = t->cpu[cpu].online ? topology_package_index(t, t->cpu[cpu].package) : -1;
        struct cpufreq_eff eff;
        if (k < 0 || cpufreq_effective(c->a->cpufreq, c->b->cpufreq, (int)cpu, &eff) < 0 ||
            isnan(eff.busy_mhz))
            continue;
        acc[k].nmhz++;
        acc[k].mhz += eff.busy_mhz;
    }
}

/* RAPL watts of one scope and package; NaN when absent or without a rate. */
static double rapl_w(const struct power_readings *r, enum power_scope scope, int package)
{
    double sum = NAN;
    for (size_t i = 0; r && i < r->n; i++) {
        const struct power_reading *p = &r->v[i];
        if (p->scope != scope || p->package != package || !streq(p->source, "rapl"))
            continue;
        if (isnan(p->watts))
            return NAN;
        sum = isnan(sum) ? p->watts : sum + p->watts;
    }
    return sum;
}

void tune_verify_packages_build(struct tune_verify_window *w, const struct report_ctx *c,
                                const struct power_readings *r)
{
    const struct topology *t = &c->cur->topo;
    if (!t->npackages)
        return;
    _cleanup_free_ struct pkg_acc *acc = xcalloc(t->npackages, sizeof(*acc));
    sum_cpus(c, acc);
    w->npackages = t->npackages;
    w->pkg = xcalloc(t->npackages, sizeof(*w->pkg));
    const char *why = NULL;
    for (unsigned k = 0; k < t->npackages; k++) {
        struct tune_verify_package *p = &w->pkg[k];
        int id = t->package_ids[k];
        *p = (struct tune_verify_package){
            .package = id,
            .ncpus = acc[k].n,
            .idle_pct = acc[k].n ? acc[k].idle / acc[k].n : NAN,
            .deepest_pct = acc[k].n ? acc[k].deepest / acc[k].n : NAN,
            .busy_mhz = acc[k].nmhz ? acc[k].mhz / acc[k].nmhz : NAN,
            .package_w = rapl_w(r, POWER_SCOPE_PACKAGE, id),
            .dram_w = rapl_w(r, POWER_SCOPE_DRAM, id),
        };
        const struct cstate_pmu *pmu = NULL;
        /* without a PMU sample report_pkg_pmu() asks c->sense why, and
         * verify's ctx has no sense: the window is built from samples */
        unsigned ne = c->cur->cstate_pmu ? report_pkg_pmu(c, id, p->pc_pct, &pmu, &why) : 0;
        for (unsigned e = 0; e < ne; e++)
            p->pc_number[e] = pmu->ev[e].number;
        p->npc = ne;
        if (ne && !w->pc_pmu)
            w->pc_pmu = xstrdup(pmu->name);
    }
    if (!w->pc_pmu)
        w->pc_why = xstrdup(!c->cur->cstate_pmu ? "the cstate PMUs were not read (no perf PMU here)"
                            : why               ? why
                                                : "the package PMU counted nothing");
}

void tune_verify_packages_free(struct tune_verify_window *w)
{
    free(w->pkg);
    free(w->pc_pmu);
    free(w->pc_why);
}

void tune_verify_packages_json(struct json *j, const struct tune_verify_window *w)
{
    json_key(j, "packages");
    json_array_begin(j);
    for (unsigned k = 0; k < w->npackages; k++) {
        const struct tune_verify_package *p = &w->pkg[k];
        json_object_begin(j);
        json_kv_i64(j, "package", p->package);
        json_kv_u64(j, "cpus", p->ncpus);
        json_kv_double(j, "idle_pct", p->idle_pct);
        json_kv_double(j, "deepest_state_pct", p->deepest_pct);
        json_kv_double(j, "busy_mhz", p->busy_mhz);
        json_kv_double(j, "rapl_package_w", p->package_w);
        json_kv_double(j, "rapl_dram_w", p->dram_w);
        json_key(j, "package_cstates");
        json_array_begin(j);
        for (unsigned e = 0; e < p->npc; e++) {
            json_object_begin(j);
            char name[16];
            snprintf(name, sizeof(name), "pc%u", p->pc_number[e]);
            json_kv_string(j, "state", name);
            json_kv_double(j, "residency_pct", p->pc_pct[e]);
            json_object_end(j);
        }
        json_array_end(j);
        json_object_end(j);
    }
    json_array_end(j);
    json_kv_string(j, "package_pmu", w->pc_pmu);
    json_kv_string(j, "package_pmu_why", w->pc_why);
}
