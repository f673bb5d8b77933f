/* Package and core C-state residency from the perf cstate PMUs
 * (arch/x86/events/intel/cstate.c): "cstate_core" counts per core
 * (CORE_C1/C3/C6/C7_RESIDENCY), "cstate_pkg" per package ("cstate_die"
 * per die where a package has several) (PKG_C2/C3/C6/C7/C8/C9/C10).
 *
 * The events and the CPU that reads each core or package are discovered
 * from sysfs (events/cN-residency, cpumask), so a recorded tree describes
 * them; counters open only on the live kernel, one per event and unit on
 * the cpumask's CPU, with a TSC counter (the "msr" PMU's tsc event) on the
 * same CPU as the denominator.
 *
 * What this relies on: the residency MSRs count at the TSC's rate (Intel
 * SDM vol. 4, MSR_PKG_Cx_RESIDENCY "counts at the same frequency as the
 * TSC"), which is why turbostat shows Pkg%pc6 as 100 * delta(pc6) /
 * delta(tsc) and why a fraction here is delta(count) / delta(tsc). The
 * kernel accumulates the counts in 64 bits (cstate_pmu_event_update), so
 * a delta never wraps. The driver hides an event whose MSR reads 0 at
 * boot (perf_msr_probe with no_zero) and refuses to load under a
 * hypervisor, so "no PMU" is the normal answer in a VM. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "host/host.h"

enum cstate_pmu_scope {
    CSTATE_PMU_CORE, /* cstate_core: one unit per core */
    CSTATE_PMU_PKG,  /* cstate_pkg or cstate_die: one unit per package (die) */
    _CSTATE_PMU_MAX,
};

#define CSTATE_PMU_MAX_EVENTS 8

struct cstate_pmu_event {
    char state[8];   /* "c6" from "c6-residency" */
    unsigned number; /* 6: PC6 on the package PMU, CC6 on the core PMU */
    uint64_t config; /* "event=0x02" */
};

/* One counted unit: a core or a package (die), read on one CPU. */
struct cstate_pmu_unit {
    int cpu;                       /* the cpumask's CPU that reads it */
    int package;                   /* physical_package_id, -1 unknown */
    int core;                      /* core_id on the core PMU, else -1 */
    int fd[CSTATE_PMU_MAX_EVENTS]; /* live only; -1 otherwise */
    int tsc_fd;                    /* msr PMU tsc on .cpu; -1 if none */
};

struct cstate_pmu {
    bool present;     /* the PMU's sysfs directory exists */
    const char *name; /* "cstate_core", "cstate_pkg", "cstate_die" */
    uint32_t type;    /* perf_event_attr.type */
    unsigned nevents; /* in increasing state number */
    struct cstate_pmu_event ev[CSTATE_PMU_MAX_EVENTS];
    unsigned nunits;
    struct cstate_pmu_unit *units; /* owned */
    char *why;                     /* owned; NULL when every counter opened, else why not */
};

struct cstate_pmu_state {
    struct cstate_pmu pmu[_CSTATE_PMU_MAX];
    char *why_missing; /* owned; set when neither PMU is here */
};

/* One reading of every counter: counts[unit][event] and tsc[unit], each
 * VAL_NONE where it could not be read. */
struct cstate_pmu_counts {
    unsigned nunits, nevents;
    uint64_t *counts; /* nunits * nevents, owned */
    uint64_t *tsc;    /* nunits, owned */
};

/* What a sample holds: each PMU as discovered (units copied, their fds
 * not to be used) and, on the live kernel, one reading of its counters
 * (counts.nunits 0 when not read: why says why). */
struct cstate_pmu_reading {
    struct cstate_pmu pmu; /* units and why owned by the reading */
    struct cstate_pmu_counts counts;
};

struct cstate_pmu_sample {
    struct cstate_pmu_reading r[_CSTATE_PMU_MAX];
};

struct sampler;
extern const struct sampler cstate_pmu_sampler;

/* The share of the interval unit I of reading Y spent in event K, from
 * the readings X (earlier) and Y: -ENODATA where either was not read,
 * else cstate_pmu_residency's answer. */
int cstate_pmu_reading_residency(const struct cstate_pmu_reading *x,
                                 const struct cstate_pmu_reading *y, unsigned i, unsigned k,
                                 double *ret_fraction);

/* "c6-residency" gives state "c6", number 6; anything else -EINVAL (the
 * directory holds nothing else today, but a future ".scale" is skipped). */
int cstate_pmu_parse_event_name(const char *file, char ret_state[8], unsigned *ret_number);

/* The share of the interval a unit spent in a state: delta(count) /
 * delta(tsc), both 64-bit kernel accumulations (never wrapping).
 * -ERANGE when a counter went backwards or ran more than 1 % faster than
 * the TSC (a unit that moved CPU, a counter reset); -EINVAL when the TSC
 * did not advance or a reading is VAL_NONE. A count just over the TSC
 * (the two are read one after the other, not atomically) is clamped to 1. */
int cstate_pmu_residency(uint64_t count0, uint64_t count1, uint64_t tsc0, uint64_t tsc1,
                         double *ret_fraction);

/* Discover both PMUs under h and, on a live root, open their counters.
 * Never fails: what is missing is said in st->why_missing or pmu->why. */
void cstate_pmu_discover(struct host *h, struct cstate_pmu_state *st);
/* Read every counter of one PMU now (live only; -ENOTSUP otherwise). */
int cstate_pmu_read(const struct cstate_pmu *p, struct cstate_pmu_counts *ret);
void cstate_pmu_counts_free(struct cstate_pmu_counts *c);
void cstate_pmu_state_free(struct cstate_pmu_state *st);
/* The unit of p whose package (and, on the core PMU, core) match; NULL. */
const struct cstate_pmu_unit *cstate_pmu_find_unit(const struct cstate_pmu *p, int package,
                                                   int core, unsigned *ret_index);
