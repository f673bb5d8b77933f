/* cpufreq: requested and effective CPU frequency
 * (Documentation/admin-guide/pm/cpufreq.rst, intel_pstate.rst, amd-pstate.rst).
 *
 * Per online CPU, from /sys/devices/system/cpu/cpuN/cpufreq (a symlink to
 * ../cpufreq/policyN on kernels since 4.x, so CPUs sharing a policy read
 * the same files): the driver, the governor, the frequency the kernel last
 * requested or saw (scaling_cur_freq), the policy limits, the hardware
 * limits, EPP. All frequencies are kHz, as sysfs prints them.
 *
 * Effective frequency comes from the APERF and MPERF MSRs (APERF counts at
 * the actual clock and MPERF at the TSC rate, both only in C0): over an
 * interval, busy MHz = TSC MHz * dAPERF / dMPERF and average MHz =
 * dAPERF / dt. They are read through the perf `msr` PMU (one counter group
 * per CPU, kept open across samples) or else /dev/cpu/N/msr, on the live
 * root only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sense/sample.h"
#include "sense/sampler.h"

struct cpufreq_cpu {
    int cpu;
    char *driver;        /* scaling_driver: "intel_pstate", "acpi-cpufreq"; owned, NULL */
    char *governor;      /* scaling_governor: "powersave", "schedutil" */
    uint64_t cur_khz;    /* scaling_cur_freq; VAL_NONE when unreadable */
    uint64_t min_khz;    /* scaling_min_freq: policy limit */
    uint64_t max_khz;    /* scaling_max_freq */
    uint64_t hw_min_khz; /* cpuinfo_min_freq: hardware limit */
    uint64_t hw_max_khz; /* cpuinfo_max_freq (includes turbo on intel_pstate) */
    uint64_t hw_cur_khz; /* cpuinfo_cur_freq: root-only, absent on intel_pstate */
    uint64_t base_khz;   /* base_frequency: intel_pstate with HWP only */
    uint64_t nom_khz;    /* acpi_cppc/nominal_freq (MHz there) x 1000; VAL_NONE absent, 0 */
    int boost;           /* policyN/boost (6.7+, drivers with boost): 0/1, -1 absent */
    char *epp;           /* energy_performance_preference; NULL without EPP */
    char *epp_available; /* energy_performance_available_preferences */
    /* Raw counters (events since the perf counter was opened, or the MSR
     * value); VAL_NONE when not read. */
    uint64_t aperf, mperf, tsc;
    uint32_t msr_gen; /* changes when the counters were reopened */
};

/* "cpu MHz" of /proc/cpuinfo: on x86 the kernel's own APERF/MPERF-based
 * estimate (node_exporter exports it as node_cpu_frequency_hertz). */
struct cpufreq_mhz {
    int cpu;
    double mhz;
};

struct cpufreq_sample {
    unsigned ncpus;
    struct cpufreq_cpu *cpus;  /* online CPUs with a cpufreq directory, by id; owned */
    int boost;                 /* cpufreq/boost (acpi-cpufreq, amd-pstate): 0/1, -1 absent */
    char *intel_pstate_status; /* "active", "passive", "off"; NULL without intel_pstate */
    int no_turbo;              /* intel_pstate/no_turbo: 0/1, -1 absent */
    int max_perf_pct;          /* intel_pstate/max_perf_pct, -1 absent */
    int min_perf_pct;          /* intel_pstate/min_perf_pct, -1 absent */
    int turbo_pct;             /* intel_pstate/turbo_pct: % of P-states that are turbo, -1 absent */
    int num_pstates;           /* intel_pstate/num_pstates: turbo max - min ratio + 1, -1 absent */
    char *amd_pstate_status;   /* "active", "passive", "guided"; NULL without amd-pstate */
    const char *msr_source;    /* "perf msr PMU", "msr device"; NULL: see msr_why */
    char *msr_why;             /* why there is no effective frequency; owned */
    uint64_t msr_mono_ns;      /* CLOCK_MONOTONIC when the counters were read */
    size_t nmhz;
    struct cpufreq_mhz *mhz; /* from /proc/cpuinfo, in file order; owned */
};

/* Effective frequency of one CPU between two samples. */
struct cpufreq_eff {
    double busy_mhz; /* mean clock while in C0 */
    double avg_mhz;  /* mean clock over the interval, idle counted as 0 */
    double tsc_mhz;  /* measured TSC rate, or the nominal frequency; see below */
    double c0_pct;   /* dMPERF / dTSC; NaN without a TSC counter */
};

extern const struct sampler cpufreq_sampler;

/* The entry for a CPU id, or NULL. */
const struct cpufreq_cpu *cpufreq_find_cpu(const struct cpufreq_sample *s, int cpu);

/* Effective frequency of `cpu` between samples a and b. Without a TSC
 * counter the TSC rate is taken as base_frequency, else cpuinfo_max_freq.
 * Returns -ENODATA when a counter is missing in either sample (or the CPU
 * is), -ESTALE when the counters were reopened in between, -ERANGE when a
 * counter went backwards. busy_mhz is NaN when the CPU never left idle
 * (dMPERF 0). */
int cpufreq_effective(const struct cpufreq_sample *a, const struct cpufreq_sample *b, int cpu,
                      struct cpufreq_eff *ret);

/* Mean effective busy frequency in GHz over the CPUs that have APERF/MPERF
 * deltas; else the mean scaling_cur_freq of the later sample (b, or a when
 * b is NULL); NaN when neither exists. */
double cpufreq_mean_busy_ghz(const struct cpufreq_sample *a, const struct cpufreq_sample *b);

/* Parse /proc/cpuinfo for each "processor" and its "cpu MHz". Entries
 * without a MHz line are left out. Returns the number of entries (0 when
 * none: non-x86 kernels print no MHz), -EINVAL on a malformed MHz value.
 * *ret (owned by the caller) is set only on success. */
int cpufreq_parse_cpuinfo_mhz(const char *text, size_t len, struct cpufreq_mhz **ret,
                              size_t *ret_n);
