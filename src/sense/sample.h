/* A sample: one immutable reading of everything watt senses, taken at one
 * moment. Two samples make rates. Each sampler fills its own member and
 * reports problems into diags, so an absent value always has a reason. */
#pragma once

#include <stdint.h>

#include "base/diag.h"
#include "host/host.h"
#include "host/topology.h"

struct cpuidle_sample;
struct cpufreq_sample;
struct procstat_sample;
struct rapl_sample;
struct hwmon_sample;
struct irq_sample;
struct devices_sample;
struct latency_sample;
struct clock_sample;
struct cstate_pmu_sample;
struct gpu_sample;
struct dcmi_sample;

/* Sentinel for an unsigned value that could not be read. */
#define VAL_NONE UINT64_MAX

struct sample {
    uint64_t mono_ns; /* CLOCK_MONOTONIC when the sample started */
    uint64_t real_ns; /* CLOCK_REALTIME, for display */
    uint64_t cost_ns; /* how long taking it took */
    struct topology topo;
    struct diags diags;
    char *kernel;   /* /proc/sys/kernel/osrelease, NULL when unreadable */
    char *hostname; /* /proc/sys/kernel/hostname */

    /* Each NULL when its sampler is not usable here (see sense->why). */
    struct cpuidle_sample *cpuidle;
    struct cpufreq_sample *cpufreq;
    struct procstat_sample *procstat;
    struct rapl_sample *rapl;
    struct hwmon_sample *hwmon;
    struct irq_sample *irq;
    struct devices_sample *devices;
    struct latency_sample *latency;
    struct clock_sample *clock;
    struct cstate_pmu_sample *cstate_pmu;
    struct gpu_sample *gpu; /* sense/gpu.h */
    /* sense/dcmi.h: the BMC's wall power */
    struct dcmi_sample *dcmi;
};

/* Add a diagnostic for a failed read of a kernel path. */
void sample_diag_read(struct sample *s, struct host *h, enum host_dir d, const char *path, int err);
