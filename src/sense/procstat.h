/* procstat: CPU time and scheduler counters from /proc/stat
 * (Documentation/filesystems/proc.rst, "1.7 Miscellaneous kernel
 * statistics in /proc/stat"; fs/proc/stat.c).
 *
 * The `cpu` line sums every possible CPU; the `cpuN` lines list the online
 * CPUs only, so a CPU that goes offline disappears. Times are in USER_HZ
 * ticks, which is 100 per second on every architecture Linux supports
 * today (the ABI fixed it; CONFIG_HZ is a different thing), so watt
 * assumes 100 as node_exporter does. Columns came one kernel at a time:
 * user nice system idle (2.4), iowait irq softirq (2.5.41), steal
 * (2.6.11), guest (2.6.24), guest_nice (2.6.33); missing ones read as
 * VAL_NONE. guest and guest_nice are already counted in user and nice. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "sense/sample.h"
#include "sense/sampler.h"

#define PROCSTAT_USER_HZ 100

enum procstat_mode {
    PROCSTAT_USER,
    PROCSTAT_NICE,
    PROCSTAT_SYSTEM,
    PROCSTAT_IDLE,
    PROCSTAT_IOWAIT,
    PROCSTAT_IRQ,
    PROCSTAT_SOFTIRQ,
    PROCSTAT_STEAL,
    PROCSTAT_GUEST,
    PROCSTAT_GUEST_NICE,
    _PROCSTAT_NMODES,
};

/* "user", "nice", ..., "guest_nice": the column names, as node_exporter's
 * mode label spells them. */
const char *procstat_mode_name(enum procstat_mode m);

struct procstat_cpu {
    int cpu;                          /* -1 for the `cpu` total line */
    uint64_t ticks[_PROCSTAT_NMODES]; /* cumulative USER_HZ ticks; VAL_NONE: no column */
};

struct procstat_sample {
    bool has_total;
    struct procstat_cpu total; /* the `cpu` line, when has_total */
    unsigned ncpus;
    struct procstat_cpu *cpus; /* `cpuN` lines, in file order; owned */
    uint64_t ctxt;             /* context switches since boot; VAL_NONE: absent */
    uint64_t intr;             /* interrupts since boot (first number of `intr`) */
    uint64_t btime;            /* boot time, seconds since the epoch */
    uint64_t processes;        /* forks since boot */
    uint64_t procs_running;    /* runnable tasks now */
    uint64_t procs_blocked;    /* tasks in uninterruptible I/O wait now */
};

/* Shares of one CPU's (or the total's) ticks between two samples, in % of
 * all its ticks; NaN for a column the kernel does not have. */
struct procstat_util {
    double busy_pct;   /* everything but idle, iowait and steal */
    double user_pct;   /* user + nice, guest included */
    double system_pct; /* system */
    double irq_pct;    /* irq + softirq */
    double iowait_pct;
    double steal_pct; /* time a hypervisor ran someone else */
    double guest_pct; /* guest + guest_nice: running VMs (part of user) */
    double idle_pct;
    double busy_cpus; /* busy_pct / 100: CPUs' worth of busy time */
};

extern const struct sampler procstat_sampler;

/* Parse the text of /proc/stat. Lines with garbage are skipped and named
 * in d (which may be NULL). Returns 0, or -EBADMSG when no `cpu` line at
 * all could be read; ret (to be freed with procstat_sample_clear) is set
 * only on success. */
int procstat_parse(const char *text, size_t len, struct procstat_sample *ret, struct diags *d);
void procstat_sample_clear(struct procstat_sample *s);

/* The `cpuN` entry, or NULL. */
const struct procstat_cpu *procstat_find_cpu(const struct procstat_sample *s, int cpu);

/* Utilisation between two readings of one CPU. Returns -ENODATA when
 * either is NULL or no tick passed, -ERANGE when a counter went backwards
 * (proc.rst warns that iowait can decrease; NO_HZ idle accounting has
 * had such bugs too). */
int procstat_util(const struct procstat_cpu *a, const struct procstat_cpu *b,
                  struct procstat_util *ret);

/* Cumulative seconds of one mode (ticks / USER_HZ); NaN when absent. */
double procstat_seconds(const struct procstat_cpu *c, enum procstat_mode m);

/* Sum over CPUs of their busy fraction between a and b (1.5 = one and a
 * half CPUs busy); NaN when b is NULL or no CPU has a delta. */
double procstat_busy_cpus(const struct procstat_sample *a, const struct procstat_sample *b);
