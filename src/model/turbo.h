/* Turbo headroom per package: the base (non-turbo) and the turbo
 * frequencies the kernel exposes, the boost switch, the clock the busy
 * CPUs ran at, whether that clock went above base, and what in the
 * kernel's settings stops it (Documentation/admin-guide/pm/cpufreq.rst,
 * intel_pstate.rst, amd-pstate.rst).
 *
 * Where each figure comes from, best source first:
 * - base: intel_pstate base_frequency (HWP: the guaranteed frequency);
 *   else the ACPI _CPC nominal_freq (amd-pstate, cppc_cpufreq);
 *   else acpi-cpufreq's cpuinfo_max_freq, the _PSS P0 (nominal) state,
 *   less the 1 MHz that marks an Intel turbo pseudo-state ("2601 MHz").
 * - max non-turbo: intel_pstate's turbo_pct and num_pstates over the
 *   cpuinfo_min..max range (the ratio count that gives turbo_pct back);
 *   with no_turbo=1 cpuinfo_max_freq itself; else the base.
 * - max turbo: cpuinfo_max_freq where it includes turbo (intel_pstate with
 *   no_turbo=0, amd-pstate with boost on); acpi-cpufreq hides boost
 *   states from _PSS, so it is unknown there.
 * - busy clock: APERF/MPERF over the interval (sense/cpufreq.h); without
 *   an interval, /proc/cpuinfo "cpu MHz" (the kernel's own APERF/MPERF
 *   estimate at its last tick).
 * All frequencies MHz, NaN when unknown. */
#pragma once

#include <stdbool.h>

#include "host/topology.h"
#include "sense/cpufreq.h"

/* What stops a package from turbo, as bits of turbo_pkg.blockers. */
enum turbo_blocker {
    TURBO_BLOCK_NO_TURBO = 1u << 0,     /* intel_pstate/no_turbo = 1 */
    TURBO_BLOCK_BOOST_OFF = 1u << 1,    /* cpufreq/boost = 0 */
    TURBO_BLOCK_MAX_FREQ = 1u << 2,     /* scaling_max_freq below max turbo (or base) */
    TURBO_BLOCK_PERF_PCT = 1u << 3,     /* intel_pstate/max_perf_pct < 100 */
    TURBO_BLOCK_EPP_POWER = 1u << 4,    /* governor powersave with EPP "power" */
    TURBO_BLOCK_GOV_MIN = 1u << 5,      /* the generic powersave governor: min freq */
    TURBO_BLOCK_POLICY_BOOST = 1u << 6, /* policyN/boost = 0 (kernel 6.7+) */
};
#define TURBO_BLOCKERS 7

struct turbo_pkg {
    int package;
    unsigned ncpus; /* CPUs of the package with cpufreq */
    double base_mhz;
    const char *base_source; /* static; NULL when base is unknown */
    double nonturbo_mhz;
    const char *nonturbo_source;
    double turbo_mhz;
    const char *turbo_source; /* or why it is unknown */
    double limit_mhz;         /* lowest scaling_max_freq of the package */
    int boost;                /* 1 on, 0 off, -1 the kernel says nothing */
    const char *boost_source; /* "intel_pstate/no_turbo", "cpufreq/boost" */
    double busy_mean_mhz;     /* over the CPUs with a busy clock */
    double busy_max_mhz;
    unsigned busy_cpus;
    const char *busy_source; /* "APERF/MPERF", "cpuinfo cpu MHz"; NULL: none */
    int reached;             /* busy_max above base by > 1 %: 1, 0, -1 unknown */
    unsigned blockers;       /* enum turbo_blocker bits */
};

/* Headroom of package `pkg` from the later cpufreq sample b (a, the
 * earlier one, may be NULL: then there is no APERF/MPERF interval). */
void turbo_package(const struct cpufreq_sample *a, const struct cpufreq_sample *b,
                   const struct topology *t, int pkg, struct turbo_pkg *ret);

/* The n-th blocker's bit (0 <= n < TURBO_BLOCKERS), its short name for
 * JSON ("no_turbo", "boost_off", ...) and its sentence for the text. */
unsigned turbo_blocker_bit(unsigned n);
const char *turbo_blocker_name(unsigned bit);
const char *turbo_blocker_text(unsigned bit);

/* The non-turbo ratio count that intel_pstate's show_turbo_pct() turns
 * into turbo_pct: turbo_pct = 100 - floor(100 * n / num_pstates). 0 when
 * no n or more than one gives it back. */
unsigned turbo_nonturbo_states(int turbo_pct, int num_pstates);
