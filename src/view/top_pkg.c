/* watt top's package rows: the cstate PMUs' package and core C-states
 * where they measured the package (view/report_cstate_pmu.c decides, as
 * for the report), else the mean of its CPUs' cpuidle residency. */
#include "view/top_pkg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "sense/cstate_pmu.h"
#include "view/report_cstate_pmu.h"

static void add_state(struct top_pkg *p, const char *prefix, unsigned number, double pct)
{
    if (p->nstates == TOP_PKG_STATES)
        return;
    struct top_pkg_state *s = &p->st[p->nstates++];
    snprintf(s->name, sizeof(s->name), "%s%u", prefix, number);
    s->residency_pct = pct;
}

/* The mean over the package's cores of each core C-state, when the core
 * PMU measured them in both samples; nothing otherwise. */
static void core_states(const struct report_ctx *rc, struct top_pkg *p)
{
    const struct cstate_pmu_sample *xs = rc->a->cstate_pmu, *ys = rc->b->cstate_pmu;
    if (!xs || !ys)
        return;
    const struct cstate_pmu_reading *x = &xs->r[CSTATE_PMU_CORE], *y = &ys->r[CSTATE_PMU_CORE];
    if (!y->pmu.present || y->pmu.why)
        return;
    for (unsigned k = 0; k < y->pmu.nevents; k++) {
        double sum = 0;
        unsigned n = 0;
        for (unsigned i = 0; i < y->pmu.nunits; i++) {
            double fr;
            if (y->pmu.units[i].package == p->package &&
                cstate_pmu_reading_residency(x, y, i, k, &fr) == 0) {
                sum += fr;
                n++;
            }
        }
        if (n)
            add_state(p, "CC", y->pmu.ev[k].number, 100.0 * sum / n);
    }
}

static int cpu_package(const struct topology *t, int cpu)
{
    return cpu >= 0 && (unsigned)cpu < t->ncpu ? t->cpu[cpu].package : -1;
}

/* The busy % and, for the fallback, the cpuidle residency of the
 * package's CPUs, averaged (states by the first CPU's list). */
static void cpu_means(const struct top_frame *f, const struct topology *t, struct top_pkg *p,
                      bool states)
{
    const struct top_cpu *first = NULL;
    double busy = 0, sum[TOP_PKG_STATES] = {0};
    unsigned nbusy = 0, n = 0;
    for (size_t i = 0; i < f->ncpus_rows; i++) {
        const struct top_cpu *c = &f->cpus[i];
        if (cpu_package(t, c->cpu) != p->package)
            continue;
        p->ncpus++;
        if (!isnan(c->busy_pct)) {
            busy += c->busy_pct;
            nbusy++;
        }
        if (!first)
            first = c;
        if (!states || c->nstates != first->nstates || !c->nstates || isnan(c->st[0].residency_pct))
            continue;
        for (size_t k = 0; k < c->nstates && k < TOP_PKG_STATES; k++)
            sum[k] += c->st[k].residency_pct;
        n++;
    }
    p->busy_pct = nbusy ? busy / nbusy : NAN;
    for (size_t k = 0; states && first && k < first->nstates && k < TOP_PKG_STATES; k++) {
        struct top_pkg_state *s = &p->st[p->nstates++];
        snprintf(s->name, sizeof(s->name), "%s", first->st[k].name);
        s->residency_pct = n ? sum[k] / n : NAN;
    }
}

void top_build_pkgs(struct top_frame *f, const struct report_ctx *rc)
{
    const struct topology *t = &rc->cur->topo;
    f->npkgs = t->npackages;
    f->pkgs = xcalloc(f->npkgs ? f->npkgs : 1, sizeof(*f->pkgs));
    for (size_t i = 0; i < f->npkgs; i++) {
        struct top_pkg *p = &f->pkgs[i];
        p->package = t->package_ids[i];
        double pct[CSTATE_PMU_MAX_EVENTS];
        const struct cstate_pmu *pmu = NULL;
        const char *why = NULL;
        /* without the sense handle (a collector fed samples by watt report)
         * a missing PMU sample has no reason to ask for */
        bool ask = rc->b && (rc->cur->cstate_pmu || rc->sense);
        unsigned ne = ask ? report_pkg_pmu(rc, p->package, pct, &pmu, &why) : 0;
        p->pmu = ne > 0;
        for (unsigned k = 0; k < ne; k++)
            add_state(p, "PC", pmu->ev[k].number, pct[k]);
        if (p->pmu)
            core_states(rc, p);
        else
            snprintf(p->why, sizeof(p->why), "%s",
                     why     ? why
                     : rc->b ? "the cstate PMUs were not read"
                             : "one sample");
        cpu_means(f, t, p, !p->pmu);
    }
}
