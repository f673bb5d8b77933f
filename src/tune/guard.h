/* The latency guard: hold a CPU latency constraint only while a named
 * workload is busy, so the deep C-states come back when it is idle.
 *
 * A profile's [latency] section (run by the agent) names the workload and
 * the constraint:
 *
 *   [latency]
 *   workload = port:6379        ; cgroup:PATH | process:NAME | port:N
 *   latency_us = 0              ; µs (0: only POLL, no wake-up latency)
 *   cpus = 0-3                  ; optional: per-CPU resume latency instead
 *                               ; of the system-wide /dev/cpu_dma_latency
 *   busy_cpu_pct = 10           ; busy above this much of one CPU ...
 *   busy_connections = 1        ; ... or with this many ESTABLISHED (port)
 *   busy_after_s = 1            ; hold after busy this long without a break
 *   idle_after_s = 10           ; release after idle this long (hysteresis)
 *
 * Three parts, each testable alone: a pure state machine (time is an
 * argument), workload probes (cumulative counters read through the host
 * layer, differenced per tick), and the holder (an open fd on
 * cpu_dma_latency, whose request the kernel drops when the fd closes, or
 * journalled per-CPU writes with owner "guard"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/cpuset.h"
#include "host/host.h"

struct profile;

#define GUARD_JOURNAL_OWNER         "guard"
#define GUARD_DEFAULT_BUSY_CPU_PCT  10.0 /* % of one CPU */
#define GUARD_DEFAULT_CONNECTIONS   1
#define GUARD_DEFAULT_BUSY_AFTER_S  1.0
#define GUARD_DEFAULT_IDLE_AFTER_S  10.0
#define GUARD_LATENCY_DEFAULT_VALUE 2000000000 /* cpu_dma_latency: no constraint */

/* ---- the state machine (pure) ----
 *
 * IDLE --busy--> ARMING --busy for busy_after--> HELD --idle--> RELEASING
 *   ^              | idle                          ^   busy        |
 *   |<-------------'                               '---------------|
 *   '-------------------- idle for idle_after ---------------------'
 *
 * A tick's busy flag was measured over the interval since the previous
 * tick, so a run of busy (or idle) ticks counts from the previous tick's
 * time; the very first tick starts its run at its own time. With a zero
 * busy_after (idle_after) the first busy (idle) tick holds (releases). */
enum guard_state { GUARD_IDLE, GUARD_ARMING, GUARD_HELD, GUARD_RELEASING };

enum guard_action { GUARD_NONE, GUARD_HOLD, GUARD_RELEASE };

struct guard_fsm {
    enum guard_state state;
    uint64_t busy_after_ns, idle_after_ns;
    uint64_t run_start_ns; /* start of the busy run (ARMING) or idle run (RELEASING) */
    uint64_t last_ns;      /* the previous tick */
    bool ticked;           /* last_ns is valid */
    uint64_t held_ns;      /* time in HELD or RELEASING, up to the last tick */
    uint64_t transitions;  /* holds plus releases */
};

void guard_fsm_init(struct guard_fsm *f, double busy_after_s, double idle_after_s);
/* One tick: BUSY as measured since the previous tick. Time going
 * backwards counts as no time. Returns the change the holder must make. */
enum guard_action guard_fsm_tick(struct guard_fsm *f, uint64_t now_ns, bool busy);
/* Whether the constraint should be in force (HELD or RELEASING). */
bool guard_fsm_holding(const struct guard_fsm *f);
const char *guard_state_name(enum guard_state s); /* "idle", "arming", "held", "releasing" */

/* ---- workloads ---- */

enum guard_workload_kind { GUARD_WL_CGROUP, GUARD_WL_PROCESS, GUARD_WL_PORT };

struct guard_workload {
    enum guard_workload_kind kind;
    char *name;    /* cgroup path relative to the hierarchy's root (no leading
                    * '/'; "" is the root), or the process comm; owned */
    unsigned port; /* 1..65535 */
    char *spec;    /* as written: "port:6379"; owned */
};

/* "cgroup:PATH" (no ".." component), "process:NAME" (a comm: 1..15
 * bytes, no '/'), "port:N". ret_err one sentence. */
int guard_workload_parse(const char *spec, struct guard_workload *ret, char **ret_err);
void guard_workload_clear(struct guard_workload *w);

/* What one probe of the workload saw. */
struct guard_reading {
    bool present;         /* the cgroup exists, a process has the name, the port is in use */
    bool have_cpu;        /* cpu_ns is a delta over the interval */
    uint64_t cpu_ns;      /* CPU time used since the previous probe */
    unsigned nprocs;      /* process: how many have the name */
    unsigned connections; /* port: ESTABLISHED, IPv4 and IPv6 */
    bool listening;       /* port: something LISTENs on it */
    const char *source;   /* "cgroup v2 cpu.stat", "cgroup v1 cpuacct.usage",
                           * "process stat", "sock_diag netlink", "net/tcp
                           * text (...why)"; static or the probe's */
};

/* Pure parsers (unit tests and fuzzing). */
/* cgroup v2 cpu.stat: the usage_usec line. -EINVAL when missing. */
int guard_parse_cpu_stat(const char *text, uint64_t *ret_usage_us);
/* /proc/PID/stat: the comm (between the first '(' and the last ')', so a
 * comm holding spaces or ')' parses), utime + stime (clock ticks) and
 * starttime (clock ticks since boot). ret_comm owned. -EINVAL on garbage. */
int guard_parse_pid_stat(const char *text, size_t len, char **ret_comm, uint64_t *ret_ticks,
                         uint64_t *ret_start);
/* /proc/net/tcp or tcp6: connections ESTABLISHED (st 01) with local port
 * PORT added to *established, and *listening set when one LISTENs (0A).
 * Lines that do not parse are skipped. */
void guard_parse_net_tcp(const char *text, unsigned port, unsigned *established, bool *listening);
/* /proc/net/sockstat(6): N of the "PROTO: inuse N" line (PROTO "TCP" or
 * "TCP6"), the sockets in that table; -1 when missing or garbage. */
long guard_parse_sockstat_inuse(const char *text, const char *proto);

/* process: every process is read every this many probes; in between only
 * new ones and those with the name (a tick reads N small files otherwise). */
#define GUARD_PROCESS_RESCAN 10

/* A probe keeps the previous counters, so readings are deltas. */
struct guard_probe_pid {
    int pid;
    uint64_t start, ticks; /* starttime identifies the process across pid reuse */
    bool match;            /* its comm is the name */
};

struct guard_probe {
    const struct guard_workload *w; /* borrowed */
    bool have_prev;
    uint64_t prev_cpu_ns;         /* cgroup: the cumulative counter */
    struct guard_probe_pid *pids; /* process: every process seen, by pid */
    size_t npids;
    uint64_t scans;
    long clk_tck;
    /* port: on a live root the kernel is asked through NETLINK_SOCK_DIAG
     * for that port's sockets only (as ss(8) does), on one socket opened
     * at the first probe and kept until guard_probe_clear; elsewhere, or
     * when netlink is refused, the text tables net/tcp and tcp6 are read. */
    int nl_fd;         /* -1: none */
    int nl_err;        /* 0: netlink not tried yet, or in use; < 0: why the
                        * text tables are read (-ENOTSUP on a recorded
                        * root). Set before the first probe to force them. */
    unsigned nl_fails; /* queries failed in a row (3: give up on netlink) */
    bool nl_range;     /* the kernel refused INET_DIAG_BC_S_EQ (an older
                        * one): S_GE and S_LE instead */
    uint32_t nl_seq;   /* the last request's sequence number */
    unsigned nl_msgs;  /* sockets the kernel sent in the last probe: only
                        * the port's, when its filter works */
    void *nl_buf;      /* GUARD_NL_BUF bytes for recv() */
    char source[96];   /* port: what reading.source points to */
};

/* A netlink dump comes in datagrams of up to 32 KiB (the kernel sizes
 * them by the largest recv() so far); a larger buffer never truncates. */
#define GUARD_NL_BUF 65536

void guard_probe_init(struct guard_probe *p, const struct guard_workload *w);
/* Frees what the probe holds and closes its netlink socket. */
void guard_probe_clear(struct guard_probe *p);
/* Read the workload through H. A missing workload is a reading with
 * present false, not an error. Processes seen for the first time add no
 * CPU time (their time so far may predate the interval). */
int guard_probe_read(struct host *h, struct guard_probe *p, struct guard_reading *ret);

/* ---- the guard: configuration, probe, state machine and holder ---- */

struct guard_config {
    struct guard_workload workload;
    int32_t latency_us;  /* the constraint held, µs */
    struct cpuset cpus;  /* empty: the system-wide cpu_dma_latency */
    double busy_cpu_pct; /* % of one CPU */
    unsigned busy_connections;
    double busy_after_s, idle_after_s;
    char *origin; /* "profile web" for messages; owned */
};

/* The [latency] section of P. -ENOENT when P has none; -EINVAL with one
 * sentence naming the profile line otherwise. H gives "cpus = all". */
int guard_config_from_profile(struct host *h, const struct profile *p, struct guard_config *ret,
                              char **ret_err);
void guard_config_clear(struct guard_config *c);

struct guard;

/* JOURNAL is the journal path relative to H's root (NULL: the default),
 * used in per-CPU mode. C is copied. H is borrowed and must outlive G. */
int guard_new(struct host *h, const struct guard_config *c, const char *journal,
              struct guard **ret);
/* Lets go first (guard_release), then frees. NULL is fine. */
void guard_free(struct guard *g);

/* Probe, step the state machine, and hold or release. Returns 1 when the
 * constraint went into or out of force, 0 when nothing changed, < 0 when
 * a hold or release failed (it is tried again on the next tick; ret_msg
 * says why). ret_msg (owned, may be NULL) is one sentence for the log on
 * every change or failure. */
int guard_tick(struct guard *g, uint64_t now_ns, char **ret_msg);
/* Let go now (agent exit, profile change). 0, or the error of the
 * per-CPU restore (ret_err says what). */
int guard_release(struct guard *g, char **ret_err);

struct guard_status {
    const char *workload; /* the spec */
    enum guard_state state;
    bool held;                    /* the constraint is in force */
    bool present, busy, measured; /* measured: at least two probes */
    double cpu_ratio;             /* of one CPU over the last tick; NaN for port: */
    unsigned connections;         /* port: */
    bool listening;
    unsigned nprocs;
    int32_t target_us;
    const char *mode;     /* "global" or "cpus" */
    const char *cpus;     /* the cpulist in cpus mode, else "" */
    double held_s;        /* in force, in all, up to NOW */
    uint64_t transitions; /* went into or out of force */
    uint64_t failures;    /* holds or releases that failed */
    const char *note;     /* why it is idle or not holding, or NULL */
    const char *source;   /* what the last probe read (guard_reading.source),
                           * or NULL before the first */
};

/* Borrowed strings stay valid until the next guard_tick or guard_free. */
void guard_get_status(const struct guard *g, uint64_t now_ns, struct guard_status *ret);
