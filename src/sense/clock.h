/* clock: the kernel's clocksource and what the CPU says about its TSC.
 *
 * - /sys/devices/system/clocksource/clocksource0/{current,available}_clocksource
 *   (Documentation/admin-guide/kernel-parameters.txt "clocksource=",
 *   Documentation/timers/timekeeping.rst)
 * - /proc/cpuinfo: vendor_id, model name and the x86 feature flags that
 *   matter for the TSC:
 *     constant_tsc    ticks at a fixed rate whatever the core frequency
 *     nonstop_tsc     keeps ticking in deep C-states
 *                     (both together: the "invariant TSC", CPUID 80000007 EDX[8])
 *     tsc_reliable    the kernel trusts it without the clocksource watchdog
 *     tsc_known_freq  its frequency comes from CPUID/MSR, not calibration
 *     tsc_adjust      the TSC_ADJUST MSR, which shows any write to the TSC
 *     hypervisor      running under a hypervisor (a VM) */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "sense/sample.h"
#include "sense/sampler.h"

/* The TSC flags, one bit each. */
enum {
    TSCF_TSC = 1 << 0,
    TSCF_CONSTANT = 1 << 1,
    TSCF_NONSTOP = 1 << 2,
    TSCF_RELIABLE = 1 << 3,
    TSCF_KNOWN_FREQ = 1 << 4,
    TSCF_HYPERVISOR = 1 << 5,
    TSCF_ADJUST = 1 << 6,
};

struct cpuinfo {
    char *vendor;         /* vendor_id ("GenuineIntel"); NULL when absent (arm64); owned */
    char *model;          /* model name; NULL when absent; owned */
    unsigned nprocessors; /* "processor" entries */
    bool has_flags;       /* the first processor has a "flags" line (x86) */
    unsigned flags;       /* TSCF_* of the first processor */
    unsigned ndisagree;   /* processors whose TSCF_* differ from the first's */
    int first_disagree;   /* the first such processor number, -1 when none */
};

/* Parse /proc/cpuinfo (len bytes; no NUL needed). -EINVAL when there is no
 * "processor" line at all. */
int cpuinfo_parse(const char *text, size_t len, struct cpuinfo *ret);
void cpuinfo_clear(struct cpuinfo *c);

struct clock_sample {
    char *current;   /* "tsc", "kvm-clock", "hpet"; NULL when unreadable; owned */
    char *available; /* space-separated, as the kernel prints it; NULL when unreadable */
    bool have_cpuinfo;
    struct cpuinfo cpu; /* valid when have_cpuinfo */
};

extern const struct sampler clock_sampler;

/* For the report header and the power model; NULL/false when unknown. */
const char *clock_cpu_model(const struct clock_sample *c);
bool clock_is_vm(const struct clock_sample *c);

enum clock_verdict {
    CLOCK_TSC_UNKNOWN,         /* no cpuinfo flags or no clocksource to judge */
    CLOCK_TSC_NONE,            /* not x86: no TSC */
    CLOCK_TSC_TRUSTWORTHY,     /* invariant TSC, and it is the clocksource */
    CLOCK_TSC_NOT_INVARIANT,   /* lacks constant_tsc or nonstop_tsc */
    CLOCK_TSC_NOT_CLOCKSOURCE, /* invariant, but the kernel keeps time with another */
    CLOCK_TSC_INCONSISTENT,    /* processors disagree on the TSC flags */
};

enum clock_verdict clock_tsc_verdict(const struct clock_sample *c);
/* "trustworthy", "not_invariant", ... for JSON. */
const char *clock_verdict_name(enum clock_verdict v);
/* One line on what a clocksource means ("kvm-clock: ..."), never NULL. */
const char *clock_source_meaning(const char *name);
/* True when name is one of the space-separated words of list. */
bool clock_list_has(const char *list, const char *name);
