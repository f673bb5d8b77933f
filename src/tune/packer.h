/* The packer, acting: confine the cgroups a profile's [pack] section names
 * to the packed CPU set of model/pack.h, through journalled cpuset.cpus
 * writes (owner "pack"), grown at once on CPU pressure (a PSI trigger the
 * agent polls) and shrunk with hysteresis on its timer (docs/pack.md).
 *
 *   [pack]
 *   cgroups = system.slice user.slice machine.slice   ; space-separated
 *   missing = error            ; or skip: a named cgroup that is not there
 *   headroom = 0.25            ; plan for demand × (1 + headroom)
 *   shrink_slack = 0.25        ; shrink only with this much more to spare
 *   min_cpus = 1
 *   window_s = 10              ; demand: busy CPUs over this window
 *   demand = machine           ; or cgroups: the packed cgroups' usage only
 *   interval_s = 1             ; the packer's tick
 *   enable_controller = no     ; v2: yes writes +cpuset where a parent lacks it
 *   pressure_stall_us = 10000  ; PSI trigger "some STALL WINDOW"
 *   pressure_window_us = 500000
 *
 * Demand is the machine's busy CPUs from /proc/stat's "cpu" line (busy =
 * user nice system irq softirq steal; guest is inside user), differenced
 * over the window: the packed set must hold what cannot move too (kernel
 * threads, the root cgroup's tasks, interrupts), which the moved cgroups'
 * own usage would miss, and a v1 cpuset hierarchy has no cpu.stat.
 * demand = cgroups sums the packed cgroups' usage_usec from cpu.stat on
 * the cgroup2 hierarchy instead (the same paths there on a hybrid
 * machine): for a machine whose other load is not the packer's business
 * (a shared test VM), at the price of not counting what cannot move. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/cpuset.h"
#include "host/host.h"
#include "model/pack.h"

struct profile;

#define PACK_JOURNAL_OWNER         "pack"
#define PACK_DEFAULT_CGROUPS       "system.slice user.slice machine.slice"
#define PACK_DEFAULT_WINDOW_S      10.0
#define PACK_DEFAULT_INTERVAL_S    1.0
#define PACK_DEFAULT_STALL_US      10000u
#define PACK_DEFAULT_PSI_WINDOW_US 500000u
#define PACK_MAX_CGROUPS           64
#define PACK_MAX_DEPTH             16 /* descendants walked below a packed cgroup */

/* Where cpuset.cpus files are, relative to HOST_SYS. */
struct pack_hier {
    char *base; /* "fs/cgroup/cpuset" (v1) or "fs/cgroup" (v2); NULL: none */
    bool v1;    /* the v1 cpuset hierarchy (children must stay subsets) */
    char *v2;   /* the cgroup2 mount, for cpu.pressure (may differ from
                 * base on a hybrid machine); NULL: none */
    char *why;  /* base NULL: why there is no cpuset hierarchy */
};

/* From the mount table (proc self/mountinfo), else the usual places;
 * only mounts under /sys count (HOST_SYS). Never fails: see base/why. */
void pack_hier_find(struct host *h, struct pack_hier *ret);
void pack_hier_clear(struct pack_hier *p);

struct pack_config {
    char **cgroups; /* relative to the hierarchy's root, no leading '/'; owned */
    size_t ncgroups;
    bool missing_skip;
    double headroom, shrink_slack;
    unsigned min_cpus;
    double window_s, interval_s;
    bool demand_cgroups;    /* demand = cgroups: their cpu.stat usage, not /proc/stat */
    bool enable_controller; /* v2: write +cpuset to parents' subtree_control (journalled) */
    unsigned stall_us, psi_window_us;
    struct cpuset guard_cpus; /* [latency] cpus: never packed */
    char *guard_cgroup;       /* [latency] workload = cgroup:PATH: left alone; owned */
    char *origin;             /* "profile web"; owned */
};

/* The [pack] section of P. -ENOENT when P has none; -EINVAL with one
 * sentence naming the profile line otherwise: a bad value, a cgroup that
 * does not exist (unless missing = skip), no cpuset hierarchy. */
int pack_config_from_profile(struct host *h, const struct profile *p, struct pack_config *ret,
                             char **ret_err);
void pack_config_clear(struct pack_config *c);

/* /proc/stat's "cpu" line: busy and total ticks. -EINVAL when missing. */
int pack_parse_proc_stat(const char *text, uint64_t *ret_busy, uint64_t *ret_total);

/* A PSI file's first line, "some avg10=.. avg60=.. avg300=.. total=N":
 * N, the stall in µs since boot. -EINVAL otherwise. */
int pack_parse_pressure_total(const char *text, uint64_t *ret_us);

struct packer;

/* JOURNAL relative to H's root (NULL: the default). C is copied. */
int packer_new(struct host *h, const struct pack_config *c, const char *journal,
               struct packer **ret);
/* Restores (packer_release) first, then frees. NULL is fine. */
void packer_free(struct packer *p);

/* One tick at NOW (CLOCK_MONOTONIC): measure, decide, write. Returns 1
 * when the set changed, 0 when not, < 0 when a write failed (everything
 * this tick wrote is rolled back; ret_msg says why) or the journal was
 * locked (-EBUSY, tried again next tick). ret_msg (owned, may be NULL):
 * one sentence on every change or failure. */
int packer_tick(struct packer *p, uint64_t now_ns, char **ret_msg);
/* A PSI trigger fired (the fd from packer_fds was readable with POLLPRI)
 * at WOKE_NS: grow by one core at once. Same returns as packer_tick. */
int packer_pressure(struct packer *p, int fd, uint64_t woke_ns, char **ret_msg);
/* The PSI trigger fds to poll for POLLPRI (EPOLLPRI). */
size_t packer_fds(const struct packer *p, const int **ret);
/* Put every cpuset back (journal_restore of owner "pack"). 0, or the
 * error (ret_err says what; the records stay for watt restore). */
int packer_release(struct packer *p, char **ret_err);

/* Growth latencies, seconds: the histogram's upper bounds. */
#define PACK_LATENCY_BUCKETS 8
extern const double pack_latency_bounds[PACK_LATENCY_BUCKETS];

struct pack_cgroup_status {
    const char *path;
    bool packed;      /* confined to the packed set now (watt wrote it, not left alone) */
    const char *note; /* why it is left alone, or NULL */
};

struct pack_status {
    const char *state; /* "measuring", "packed", "unpacked", "failing" */
    const char *cpus;  /* the packed set, "" when none */
    unsigned ncpus;
    double demand_cpus, target_cpus; /* NaN before the first measure */
    const char *hierarchy;           /* "cgroup v1 cpuset at /sys/..." */
    const char *demand_source;       /* what the demand is read from */
    const char *pressure_source;     /* the trigger files, or why none */
    struct pack_cgroup_status *cgroups;
    size_t ncgroups;
    uint64_t actions[4]; /* by enum pack_action */
    uint64_t failures, pressure_events;
    double last_grow_latency_s; /* NaN when none yet */
    uint64_t grow_latency_count;
    double grow_latency_sum_s;
    uint64_t grow_latency_buckets[PACK_LATENCY_BUCKETS]; /* cumulative */
    const char *note;                                    /* the last failure or NULL */
    double interval_s;
    double shrink_hold_s; /* how long a pressure growth holds off a shrink now */
};

/* Borrowed strings stay valid until the next tick, pressure or free. */
void packer_get_status(const struct packer *p, struct pack_status *ret);
