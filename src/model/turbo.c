#include "model/turbo.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "base/util.h"

/* A clock within 1 % of base is base: APERF/MPERF over a short interval
 * and the kernel's tick estimate both wander by a few MHz. */
#define REACHED_MARGIN 1.01

static double mhz_of(uint64_t khz)
{
    return khz == VAL_NONE ? NAN : (double)khz / 1e3;
}

static bool pkg_has(const struct topology *t, int cpu, int pkg)
{
    return cpu >= 0 && (unsigned)cpu < t->ncpu && t->cpu[cpu].package == pkg;
}

static bool is(const char *s, const char *want)
{
    return s && streq(s, want);
}

unsigned turbo_nonturbo_states(int turbo_pct, int num_pstates)
{
    if (turbo_pct < 0 || turbo_pct > 100 || num_pstates <= 0)
        return 0;
    unsigned found = 0, count = 0;
    for (int n = 1; n <= num_pstates; n++)
        if (100 - 100 * n / num_pstates == turbo_pct) {
            if (!found)
                found = (unsigned)n;
            count++;
        }
    return count == 1 ? found : 0;
}

/* Base and max non-turbo from one CPU's files (the package's first CPU
 * with cpufreq: a package shares one model). */
static void nominal(const struct cpufreq_sample *cf, const struct cpufreq_cpu *c,
                    struct turbo_pkg *r)
{
    bool intel = is(c->driver, "intel_pstate") || is(c->driver, "intel_cpufreq");
    double hw_max = mhz_of(c->hw_max_khz), hw_min = mhz_of(c->hw_min_khz);
    if (c->base_khz != VAL_NONE) {
        r->base_mhz = mhz_of(c->base_khz);
        r->base_source = "base_frequency";
    } else if (c->nom_khz != VAL_NONE) {
        r->base_mhz = mhz_of(c->nom_khz);
        r->base_source = "acpi_cppc nominal_freq";
    } else if (is(c->driver, "acpi-cpufreq") && c->hw_max_khz != VAL_NONE) {
        /* ACPI marks Intel's turbo range as a P0 1 MHz above nominal. */
        bool marker = c->hw_max_khz % 10000 == 1000;
        r->base_mhz = hw_max - (marker ? 1 : 0);
        r->base_source =
            marker ? "_PSS P0 less the 1 MHz turbo marker" : "_PSS P0 (cpuinfo_max_freq)";
    }
    unsigned n = turbo_nonturbo_states(cf->turbo_pct, cf->num_pstates);
    if (intel && cf->no_turbo == 1 && !isnan(hw_max)) {
        r->nonturbo_mhz = hw_max;
        r->nonturbo_source = "cpuinfo_max_freq with no_turbo=1";
    } else if (intel && n && cf->num_pstates > 1 && !isnan(hw_max) && !isnan(hw_min)) {
        r->nonturbo_mhz = hw_min + (n - 1) * (hw_max - hw_min) / (cf->num_pstates - 1);
        r->nonturbo_source = "intel_pstate turbo_pct/num_pstates";
    } else if (r->base_source) {
        r->nonturbo_mhz = r->base_mhz;
        r->nonturbo_source = r->base_source;
    }
    if (!r->base_source && r->nonturbo_source) {
        r->base_mhz = r->nonturbo_mhz;
        r->base_source = r->nonturbo_source;
    }
}

static void turbo_max(const struct cpufreq_sample *cf, const struct cpufreq_cpu *c,
                      struct turbo_pkg *r)
{
    bool intel = is(c->driver, "intel_pstate") || is(c->driver, "intel_cpufreq");
    bool amd = c->driver && strncmp(c->driver, "amd-pstate", 10) == 0;
    if (intel && cf->no_turbo == 1) {
        r->turbo_source = "hidden by no_turbo=1";
    } else if ((intel || (amd && r->boost != 0)) && c->hw_max_khz != VAL_NONE) {
        r->turbo_mhz = mhz_of(c->hw_max_khz);
        r->turbo_source = "cpuinfo_max_freq";
    } else if (amd) {
        r->turbo_source = "hidden while boost is off";
    } else {
        r->turbo_source = "not exposed by this driver";
    }
}

static void boost_state(const struct cpufreq_sample *cf, struct turbo_pkg *r)
{
    if (cf->no_turbo >= 0) {
        r->boost = !cf->no_turbo;
        r->boost_source = "intel_pstate/no_turbo";
    } else if (cf->boost >= 0) {
        r->boost = cf->boost;
        r->boost_source = "cpufreq/boost";
    }
}

/* The busy clock of each CPU: APERF/MPERF where the interval gives it. */
static void busy_clock(const struct cpufreq_sample *a, const struct cpufreq_sample *b,
                       const struct topology *t, int pkg, struct turbo_pkg *r)
{
    double sum = 0;
    for (unsigned i = 0; a && i < b->ncpus; i++) {
        struct cpufreq_eff e;
        if (!pkg_has(t, b->cpus[i].cpu, pkg) || cpufreq_effective(a, b, b->cpus[i].cpu, &e) < 0 ||
            isnan(e.busy_mhz))
            continue;
        sum += e.busy_mhz;
        r->busy_max_mhz = r->busy_cpus++ ? fmax(r->busy_max_mhz, e.busy_mhz) : e.busy_mhz;
    }
    if (r->busy_cpus) {
        r->busy_source = "APERF/MPERF";
    } else {
        for (size_t i = 0; i < b->nmhz; i++) {
            if (!pkg_has(t, b->mhz[i].cpu, pkg))
                continue;
            sum += b->mhz[i].mhz;
            r->busy_max_mhz = r->busy_cpus++ ? fmax(r->busy_max_mhz, b->mhz[i].mhz) : b->mhz[i].mhz;
        }
        if (r->busy_cpus)
            r->busy_source = "cpuinfo cpu MHz";
    }
    if (r->busy_cpus)
        r->busy_mean_mhz = sum / r->busy_cpus;
}

static unsigned settings_blockers(const struct cpufreq_sample *cf, const struct cpufreq_cpu *c,
                                  const struct turbo_pkg *r)
{
    unsigned bl = 0;
    if (cf->no_turbo == 1)
        bl |= TURBO_BLOCK_NO_TURBO;
    if (cf->boost == 0)
        bl |= TURBO_BLOCK_BOOST_OFF;
    else if (c->boost == 0) /* per policy, only while the global switch is on */
        bl |= TURBO_BLOCK_POLICY_BOOST;
    if (cf->max_perf_pct >= 0 && cf->max_perf_pct < 100)
        bl |= TURBO_BLOCK_PERF_PCT;
    double cap = mhz_of(c->max_khz);
    if (!isnan(cap) && (isnan(r->turbo_mhz) ? cap < r->base_mhz : cap < r->turbo_mhz))
        bl |= TURBO_BLOCK_MAX_FREQ;
    if (is(c->governor, "powersave")) {
        /* intel_pstate (active) and amd-pstate-epp run their own powersave
         * policy, steered by EPP; other drivers run the generic governor,
         * which holds scaling_min_freq. */
        bool setpolicy = is(c->driver, "intel_pstate") || is(c->driver, "amd-pstate-epp");
        if (setpolicy && is(c->epp, "power"))
            bl |= TURBO_BLOCK_EPP_POWER;
        else if (!setpolicy)
            bl |= TURBO_BLOCK_GOV_MIN;
    }
    return bl;
}

void turbo_package(const struct cpufreq_sample *a, const struct cpufreq_sample *b,
                   const struct topology *t, int pkg, struct turbo_pkg *ret)
{
    struct turbo_pkg r = {
        .package = pkg,
        .base_mhz = NAN,
        .nonturbo_mhz = NAN,
        .turbo_mhz = NAN,
        .limit_mhz = NAN,
        .boost = -1,
        .busy_mean_mhz = NAN,
        .busy_max_mhz = NAN,
        .reached = -1,
    };
    const struct cpufreq_cpu *first = NULL;
    for (unsigned i = 0; b && i < b->ncpus; i++) {
        const struct cpufreq_cpu *c = &b->cpus[i];
        if (!pkg_has(t, c->cpu, pkg))
            continue;
        r.ncpus++;
        if (!first)
            first = c;
        double cap = mhz_of(c->max_khz);
        if (!isnan(cap) && (isnan(r.limit_mhz) || cap < r.limit_mhz))
            r.limit_mhz = cap;
    }
    if (!first) {
        *ret = r;
        return;
    }
    boost_state(b, &r);
    nominal(b, first, &r);
    turbo_max(b, first, &r);
    busy_clock(a, b, t, pkg, &r);
    for (unsigned i = 0; i < b->ncpus; i++)
        if (pkg_has(t, b->cpus[i].cpu, pkg))
            r.blockers |= settings_blockers(b, &b->cpus[i], &r);
    if (r.busy_cpus && !isnan(r.base_mhz))
        r.reached = r.busy_max_mhz > r.base_mhz * REACHED_MARGIN;
    *ret = r;
}

static const struct {
    unsigned bit;
    const char *name, *text;
} blockers[TURBO_BLOCKERS] = {
    {TURBO_BLOCK_NO_TURBO, "no_turbo", "intel_pstate/no_turbo is 1"},
    {TURBO_BLOCK_BOOST_OFF, "boost_off", "cpufreq/boost is 0"},
    {TURBO_BLOCK_MAX_FREQ, "max_freq_cap", "scaling_max_freq is below the turbo range"},
    {TURBO_BLOCK_PERF_PCT, "max_perf_pct", "intel_pstate/max_perf_pct is below 100"},
    {TURBO_BLOCK_EPP_POWER, "powersave_epp_power", "governor powersave with EPP \"power\""},
    {TURBO_BLOCK_GOV_MIN, "powersave_governor", "the powersave governor holds scaling_min_freq"},
    {TURBO_BLOCK_POLICY_BOOST, "policy_boost_off", "a CPU's cpufreq policy has boost 0"},
};

unsigned turbo_blocker_bit(unsigned n)
{
    return n < TURBO_BLOCKERS ? blockers[n].bit : 0;
}

const char *turbo_blocker_name(unsigned bit)
{
    for (unsigned i = 0; i < TURBO_BLOCKERS; i++)
        if (blockers[i].bit == bit)
            return blockers[i].name;
    return NULL;
}

const char *turbo_blocker_text(unsigned bit)
{
    for (unsigned i = 0; i < TURBO_BLOCKERS; i++)
        if (blockers[i].bit == bit)
            return blockers[i].text;
    return NULL;
}
