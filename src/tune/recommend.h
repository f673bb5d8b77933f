/* `watt tune --recommend`: which built-in profile fits this machine, and
 * why, as tuned's recommend.conf does, but with every reason shown.
 *
 * Two parts: recommend_facts_read() looks at the machine through the host
 * layer (DMI and the cpuinfo hypervisor flag, power_supply, the cpufreq and
 * cpuidle drivers, RAPL, the packages, latency-critical daemons by process
 * name and listening port); recommend_pick() is pure: facts in, a profile
 * and its reasons out, so fixtures and unit tests pin every rule. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "host/host.h"

/* A daemon whose users notice milliseconds: found by its comm or by a
 * LISTEN socket on its usual port. */
struct recommend_daemon {
    const char *comm;  /* as in /proc/PID/stat, at most 15 bytes */
    unsigned port;     /* its usual TCP port; 0: none */
    const char *label; /* "redis", for the reason line */
};
extern const struct recommend_daemon recommend_daemons[];
extern const size_t recommend_ndaemons;

struct recommend_facts {
    /* virtualisation: the hypervisor flag of /proc/cpuinfo (x86), and
     * DMI's sys_vendor / product_name */
    bool have_cpuinfo;    /* cpuinfo read and has a flags line */
    bool hypervisor_flag; /* "hypervisor" among the first CPU's flags */
    char *dmi_vendor;     /* owned; NULL when absent */
    char *dmi_product;    /* owned; NULL when absent */
    bool dmi_vm;          /* DMI names a hypervisor (QEMU, VMware, ...) */
    /* power_supply */
    unsigned nbatteries; /* type Battery, scope not Device (a mouse's) */
    char *battery;       /* the first one's name ("BAT0"); owned */
    /* drivers: NULL when none ("none" counts as none) */
    char *cpufreq_driver; /* scaling_driver of the first policy; owned */
    char *cpuidle_driver; /* cpuidle/current_driver; owned */
    unsigned ncstates;    /* states of the first CPU, POLL included */
    /* energy meters */
    bool rapl;            /* powercap intel-rapl zones or the perf power PMU */
    const char *rapl_via; /* "powercap", "perf power PMU"; static */
    /* topology */
    unsigned npackages, ncpus; /* 0: unknown */
    /* latency-critical daemons found: "redis-server (pid 812)" or
     * "port 6379 (redis) listening"; owned */
    char **latency;
    size_t nlatency;
    char *guard_workload;     /* a [latency] workload for the first one found:
                               * "port:6379" or "process:ptp4l"; owned */
    unsigned ndaemons_looked; /* processes read */
};

/* Reads what it can; a file that is missing is a fact ("no battery"), never
 * an error. Fails only when ret cannot be filled at all. */
int recommend_facts_read(struct host *h, struct recommend_facts *ret);
void recommend_facts_free(struct recommend_facts *f);

/* One line of the explanation. */
struct recommend_reason {
    char *check;  /* "virtualisation", "battery", ...; owned */
    char *found;  /* what the machine has; owned */
    char *means;  /* what it means for the choice; owned */
    bool decides; /* this reason chose the profile */
};

struct recommendation {
    const char *profile; /* a built-in's name; static */
    struct recommend_reason *v;
    size_t n;
};

/* Pure: the same facts always give the same profile and lines. */
void recommend_pick(const struct recommend_facts *f, struct recommendation *ret);
void recommendation_free(struct recommendation *r);
