/* cpuidle: per-CPU idle states (Documentation/admin-guide/pm/cpuidle.rst).
 * Under /sys/devices/system/cpu/cpuN/cpuidle/stateK/: name, desc (first
 * CPU only), latency (exit latency, µs), residency (target residency, µs),
 * usage (entries), time (µs spent), disable (0/1); and the driver and
 * governor in /sys/devices/system/cpu/cpuidle/. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sense/sample.h"
#include "sense/sampler.h"

struct cpuidle_state {
    char *name;            /* "C6", "POLL"; owned, NULL when unreadable */
    char *desc;            /* read for the first CPU only; NULL elsewhere */
    uint64_t latency_us;   /* VAL_NONE when unreadable */
    uint64_t residency_us; /* VAL_NONE when unreadable */
    uint64_t usage;        /* entries, cumulative */
    uint64_t time_us;      /* cumulative */
    int disable;           /* 0/1; -1 when unreadable */
};

struct cpuidle_cpu {
    int cpu;
    unsigned nstates;
    struct cpuidle_state *state; /* owned */
};

struct cpuidle_sample {
    char *driver;   /* "intel_idle", "acpi_idle", "haltpoll"; NULL when none */
    char *governor; /* "menu", "teo", "haltpoll" */
    unsigned ncpus;
    struct cpuidle_cpu *cpus; /* online CPUs with a cpuidle directory, by id */
};

extern const struct sampler cpuidle_sampler;

/* The entry for a CPU id, or NULL. */
const struct cpuidle_cpu *cpuidle_find_cpu(const struct cpuidle_sample *s, int cpu);

/* Residency between two samples of one CPU, per state, in percent of the
 * wall interval; also the implied C0 share. Returns -ENODATA when the CPU
 * is missing in either sample or its states differ, -ENOENT when a counter
 * was unreadable, -ERANGE when a counter went backwards. res_pct has room for a->nstates values. */
int cpuidle_residency(const struct cpuidle_cpu *a, const struct cpuidle_cpu *b, double interval_us,
                      double *res_pct, double *ret_c0_pct, double *ret_wakeups_per_s);
