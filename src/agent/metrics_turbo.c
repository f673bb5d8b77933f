#include "agent/metrics_turbo.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "base/util.h"

#include "model/turbo.h"

static const struct fam f_base =
    GAUGE("watt_cpu_base_frequency_hertz", "hertz",
          "Base (nominal, non-turbo) frequency of the package: intel_pstate base_frequency, "
          "ACPI _CPC nominal_freq, or acpi-cpufreq's _PSS P0.");
static const struct fam f_nonturbo =
    GAUGE("watt_cpu_max_nonturbo_frequency_hertz", "hertz",
          "Highest non-turbo frequency of the package (intel_pstate turbo_pct and num_pstates, "
          "else the base).");
static const struct fam f_turbo =
    GAUGE("watt_cpu_max_turbo_frequency_hertz", "hertz",
          "Highest turbo frequency of the package, where cpuinfo_max_freq includes turbo.");
static const struct fam f_boost =
    GAUGE("watt_cpu_turbo_enabled", NULL,
          "1 when turbo is allowed (intel_pstate/no_turbo 0, else cpufreq/boost 1), 0 when not.");
static const struct fam f_busy = GAUGE("watt_cpu_package_busy_frequency_hertz", "hertz",
                                       "Clock of the package's CPUs while busy: stat mean or max "
                                       "over its CPUs (APERF/MPERF, else cpuinfo cpu MHz).");
static const struct fam f_reached =
    GAUGE("watt_cpu_turbo_reached", NULL,
          "1 when the busiest CPU of the package ran above base by over 1 %, 0 when not.");
static const struct fam f_blocked =
    GAUGE("watt_cpu_turbo_blocked", NULL,
          "1 for each setting that holds the package below turbo (reason: no_turbo, boost_off, "
          "max_freq_cap, max_perf_pct, powersave_epp_power, powersave_governor, "
          "policy_boost_off).");

static void pkg_series(struct mw *w, int pkg)
{
    mw_series(w);
    mw_label_int(w, "package", pkg);
}

/* One MHz figure per package as Hz; NaN leaves the series out. */
static void mhz_family(struct mw *w, const struct fam *f, const struct turbo_pkg *h, unsigned n,
                       size_t off)
{
    mw_fam(w, f);
    for (unsigned p = 0; p < n; p++) {
        double v = *(const double *)((const char *)&h[p] + off);
        if (isfinite(v)) {
            pkg_series(w, h[p].package);
            mw_value_double(w, v * 1e6);
        }
    }
}

static void flag_family(struct mw *w, const struct fam *f, const struct turbo_pkg *h, unsigned n,
                        size_t off)
{
    mw_fam(w, f);
    for (unsigned p = 0; p < n; p++) {
        int v = *(const int *)((const char *)&h[p] + off);
        if (v >= 0) {
            pkg_series(w, h[p].package);
            mw_value_u64(w, (uint64_t)v);
        }
    }
}

static void busy_family(struct mw *w, const struct turbo_pkg *h, unsigned n)
{
    mw_fam(w, &f_busy);
    for (unsigned p = 0; p < n; p++)
        for (int k = 0; k < 2 && h[p].busy_cpus; k++) {
            pkg_series(w, h[p].package);
            mw_label(w, "stat", k ? "max" : "mean");
            mw_value_double(w, (k ? h[p].busy_max_mhz : h[p].busy_mean_mhz) * 1e6);
        }
}

static void blocked_family(struct mw *w, const struct turbo_pkg *h, unsigned n)
{
    mw_fam(w, &f_blocked);
    for (unsigned p = 0; p < n; p++)
        for (unsigned k = 0; k < TURBO_BLOCKERS; k++) {
            unsigned bit = turbo_blocker_bit(k);
            if (!(h[p].blockers & bit))
                continue;
            pkg_series(w, h[p].package);
            mw_label(w, "reason", turbo_blocker_name(bit));
            mw_value_u64(w, 1);
        }
}

void metrics_render_turbo(struct mw *w, const struct report_ctx *c)
{
    const struct cpufreq_sample *cf = c->cur->cpufreq;
    const struct topology *t = &c->cur->topo;
    if (!cf || !cf->ncpus || !t->npackages)
        return;
    struct turbo_pkg *h = xcalloc(t->npackages, sizeof(*h));
    for (unsigned p = 0; p < t->npackages; p++)
        turbo_package(c->b ? c->a->cpufreq : NULL, cf, t, t->package_ids[p], &h[p]);
    unsigned n = t->npackages;
    mhz_family(w, &f_base, h, n, offsetof(struct turbo_pkg, base_mhz));
    mhz_family(w, &f_nonturbo, h, n, offsetof(struct turbo_pkg, nonturbo_mhz));
    mhz_family(w, &f_turbo, h, n, offsetof(struct turbo_pkg, turbo_mhz));
    flag_family(w, &f_boost, h, n, offsetof(struct turbo_pkg, boost));
    busy_family(w, h, n);
    flag_family(w, &f_reached, h, n, offsetof(struct turbo_pkg, reached));
    blocked_family(w, h, n);
    free(h);
}
