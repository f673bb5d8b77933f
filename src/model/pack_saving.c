#include "model/pack_saving.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "base/util.h"

double pack_saving_rapl_w(const struct power_readings *r, enum power_scope scope)
{
    double sum = 0;
    unsigned n = 0;
    for (size_t i = 0; r && i < r->n; i++) {
        if (r->v[i].scope != scope || !streq(r->v[i].source, "rapl"))
            continue;
        if (isnan(r->v[i].watts))
            return NAN;
        sum += r->v[i].watts;
        n++;
    }
    return n ? sum : NAN;
}

static bool in_idle_package(const struct pack_plan *p, int package)
{
    for (unsigned i = 0; i < p->nidle_packages; i++)
        if (p->idle_packages[i] == package)
            return true;
    return false;
}

/* Online CPUs of each package, indexed like topo->package_ids. */
static unsigned *cpus_per_package(const struct topology *t)
{
    unsigned *n = xcalloc(t->npackages, sizeof(*n));
    for (unsigned c = 0; c < t->ncpu; c++) {
        if (!t->cpu[c].online)
            continue;
        int k = topology_package_index(t, t->cpu[c].package);
        if (k >= 0)
            n[k]++;
    }
    return n;
}

/* The meter over the model: what RAPL measured divided by the model's
 * figure for the same part. 1 when there is no meter or the ratio is
 * meaningless. */
static double scale(double measured, double model_w, bool *ret_measured)
{
    *ret_measured = isfinite(measured) && measured > 0 && model_w > 0;
    return *ret_measured ? measured / model_w : 1.0;
}

static void price_cores(const struct pack_saving_input *in, struct pack_saving *s)
{
    const struct topology *t = in->topo;
    const struct pack_plan *p = in->plan;
    _cleanup_free_ unsigned *per_pkg = cpus_per_package(t);
    double core_part = PACK_SAVING_CORE_SHARE * s->pkg_awake_w;
    for (unsigned c = 0; c < t->ncpu; c++) {
        if (!cpuset_has(&p->idle_cores, c) || !t->cpu[c].online)
            continue;
        s->idle_cpus++;
        int pkg = t->cpu[c].package;
        int k = topology_package_index(t, pkg);
        if (in_idle_package(p, pkg) || k < 0 || !per_pkg[k])
            continue;
        s->idle_cpus_awake_pkg++;
        s->saving_core_w +=
            core_part / per_pkg[k] * PACK_SAVING_SHALLOW_SHARE * (1 - PACK_SAVING_CORE_DEEP_SHARE);
    }
}

int pack_saving_estimate(const struct pack_saving_input *in, struct pack_saving *ret)
{
    if (!in || !in->topo || !in->plan || !in->model || !in->topo->npackages ||
        !isfinite(in->busy_cpus) || in->busy_cpus < 0)
        return -EINVAL;
    const struct topology *t = in->topo;
    const struct power_model *m = in->model;
    struct pack_saving s = {
        .cpus = cpuset_count(&t->online),
        .cores = t->ncores,
        .packages = t->npackages,
        .packed_cpus = in->plan->ncpus,
        .idle_cores = in->plan->nidle_cores,
        .idle_packages = in->plan->nidle_packages,
    };
    double ghz = isfinite(in->ghz) ? in->ghz : 0;
    s.idle_w = model_estimate(m, s.cpus, 0, ghz);
    double active_w = model_estimate(m, s.cpus, in->busy_cpus, ghz) - s.idle_w;
    s.pkg_scale =
        scale(in->rapl_package_w, PACK_SAVING_CPU_SHARE * s.idle_w + active_w, &s.pkg_measured);
    s.dram_scale = scale(in->rapl_dram_w, PACK_SAVING_DRAM_SHARE * s.idle_w, &s.dram_measured);

    s.pkg_awake_w = PACK_SAVING_CPU_SHARE * s.idle_w * s.pkg_scale / s.packages;
    s.pkg_deep_w = PACK_SAVING_PKG_DEEP_SHARE * s.pkg_awake_w;
    s.dram_w = PACK_SAVING_DRAM_SHARE * s.idle_w * s.dram_scale / s.packages;
    s.cpu_w = s.cpus ? PACK_SAVING_CORE_SHARE * s.pkg_awake_w * s.packages / s.cpus : 0;

    price_cores(in, &s);
    s.saving_pkg_w = s.idle_packages * (s.pkg_awake_w - s.pkg_deep_w);
    s.saving_dram_w = s.idle_packages * PACK_SAVING_DRAM_SR_SAVE * s.dram_w;
    s.saving_w = s.saving_pkg_w + s.saving_dram_w + s.saving_core_w;
    /* the model's own error counts only where no meter scaled it */
    double model_pct = s.pkg_measured ? 0 : m->error_pct;
    s.uncertainty_pct = hypot(PACK_SAVING_ASSUMED_PCT, model_pct);
    s.low_w = fmax(0, s.saving_w * (1 - s.uncertainty_pct / 100));
    s.high_w = s.saving_w * (1 + s.uncertainty_pct / 100);
    *ret = s;
    return 0;
}

char *pack_saving_assumptions(const struct pack_saving *s, const struct power_model *m)
{
    _cleanup_free_ char *pkg = s->pkg_measured
                                   ? xasprintf("scaled x%.2f to RAPL package watts", s->pkg_scale)
                                   : xstrdup("no RAPL package meter: model shares unscaled");
    _cleanup_free_ char *dram = s->dram_measured
                                    ? xasprintf("scaled x%.2f to RAPL dram watts", s->dram_scale)
                                    : xstrdup("no RAPL dram meter: unscaled");
    return xasprintf(
        "model %s (±%.0f %%): node idle %.1f W; CPU packages %.0f %% of it (%s): %.1f W per "
        "package awake and idle, %.1f W in its deepest package C-state (%.0f %%); cores %.0f %% "
        "of a package's idle power (%.2f W per CPU), %.0f %% of a spread idle CPU's time held "
        "shallow, core C6 at %.0f %% of shallow; DRAM %.0f %% of node idle (%s): %.1f W per "
        "package, self-refresh saves %.0f %% of an idle package's; shares ±%.0f %%, total "
        "±%.0f %%",
        m->name, m->error_pct, s->idle_w, 100 * PACK_SAVING_CPU_SHARE, pkg, s->pkg_awake_w,
        s->pkg_deep_w, 100 * PACK_SAVING_PKG_DEEP_SHARE, 100 * PACK_SAVING_CORE_SHARE, s->cpu_w,
        100 * PACK_SAVING_SHALLOW_SHARE, 100 * PACK_SAVING_CORE_DEEP_SHARE,
        100 * PACK_SAVING_DRAM_SHARE, dram, s->dram_w, 100 * PACK_SAVING_DRAM_SR_SAVE,
        PACK_SAVING_ASSUMED_PCT, s->uncertainty_pct);
}
