/* tasks: processes from /proc/PID (Documentation/filesystems/proc.rst,
 * "Table 1-2 Contents of the status fields" and "Table 1-4 Contents of the
 * stat fields"; fs/proc/array.c).
 *
 * A process is identified by (pid, starttime): starttime (stat field 22,
 * clock ticks after boot) tells a reused PID from the old one. CPU time is
 * utime + stime of /proc/PID/stat, which covers every thread, live or
 * reaped. Context switches are per thread (/proc/PID/task/TID/status
 * voluntary_ctxt_switches and nonvoluntary_ctxt_switches), so they are
 * summed over the threads alive at the scan; a thread that exits between
 * two scans takes its switches with it (the window counts them as
 * `lost_threads`).
 *
 * A process that exits between two scans is gone: its last interval of CPU
 * time cannot be read from /proc. Callers see it as `exited` in the
 * difference and account the node's remaining busy time as unaccounted.
 * Memory is bounded by max_tasks. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "host/host.h"

struct task_info {
    int32_t pid;           /* tgid */
    uint64_t start_ticks;  /* stat field 22: with pid, the process's identity */
    char comm[32];         /* stat field 2, without the parentheses */
    char *cmdline;         /* argv joined with spaces, at most 256 bytes; NULL for
                              kernel threads and when unreadable; owned */
    char *cgroup;          /* cgroup v2 path ("/system.slice/ssh.service"), or the
                              v1 cpuacct/cpu hierarchy's; NULL when unknown; owned */
    bool kthread;          /* PF_KTHREAD in stat field 9 */
    char state;            /* stat field 3 */
    uint64_t utime, stime; /* stat fields 14 and 15, USER_HZ ticks, all threads */
    int last_cpu;          /* stat field 39 */
    unsigned nthreads;     /* stat field 20 */
    uint64_t vol_ctxsw;    /* summed over live threads; VAL_NONE when not read */
    uint64_t invol_ctxsw;  /* likewise */
};

struct tasks_snapshot {
    uint64_t mono_ns; /* CLOCK_MONOTONIC at the start of the scan */
    size_t n;
    struct task_info *t; /* owned; ascending pid */
    size_t vanished;     /* PIDs listed that were gone before they could be read */
    bool truncated;      /* more than max_tasks processes: the rest were left out */
};

struct tasks_opts {
    bool ctxsw;       /* walk task/TID/status for context switches (costs one
                         open per thread) */
    bool cgroups;     /* read /proc/PID/cgroup (cached from prev by identity) */
    bool cmdline;     /* read /proc/PID/cmdline (cached from prev by identity) */
    size_t max_tasks; /* 0 means 65536 */
};

/* Scan /proc. prev (may be NULL) lends cached cmdline and cgroup strings of
 * processes with the same identity (they are copied). Per-process problems
 * (a process that exits mid-read) are not errors; garbage in a file is
 * named in d. Returns 0, or < 0 when /proc itself cannot be listed. */
int tasks_scan(struct host *h, const struct tasks_opts *o, const struct tasks_snapshot *prev,
               struct tasks_snapshot *ret, struct diags *d);
void tasks_snapshot_clear(struct tasks_snapshot *s);
const struct task_info *tasks_find(const struct tasks_snapshot *s, int32_t pid);

/* The process (tgid) a thread id belongs to: /proc/TID/status Tgid.
 * -ENOENT when the thread is gone. */
int tasks_tgid_of(struct host *h, int32_t tid, int32_t *ret);

/* One process's activity between two snapshots. */
struct task_delta {
    const struct task_info *t; /* in the later snapshot; borrowed */
    double cpu_s;              /* (utime + stime) difference in seconds */
    uint64_t vol_ctxsw;        /* voluntary switches in the window; VAL_NONE unknown */
    bool is_new;               /* not in the earlier snapshot (born, or PID reused):
                                  cpu_s counts all its time since it started */
};

struct tasks_diff_stats {
    size_t exited;    /* in a, not in b (or PID reused) */
    size_t born;      /* in b, not in a */
    size_t reused;    /* same pid, different start time */
    size_t backwards; /* counters that went backwards: left out, named in d */
};

/* b - a, one delta per process in b, in b's order. A process born in the
 * window counts its whole CPU time (it all happened inside the window,
 * give or take the clock ticks before a was taken). */
int tasks_diff(const struct tasks_snapshot *a, const struct tasks_snapshot *b,
               struct task_delta **ret, size_t *ret_n, struct tasks_diff_stats *st,
               struct diags *d);

/* Parsers (the fuzz targets' entries). */
int tasks_parse_stat(const char *text, size_t len, struct task_info *ret);
/* voluntary_ctxt_switches, nonvoluntary_ctxt_switches and Tgid from
 * status text; each VAL_NONE / -1 when absent. */
int tasks_parse_status(const char *text, size_t len, uint64_t *vol, uint64_t *invol, int32_t *tgid);
/* The cgroup path from /proc/PID/cgroup text: the v2 line "0::PATH"; else
 * the v1 line that lists cpuacct or cpu. Returns a new string or NULL. */
char *tasks_parse_cgroup(const char *text, size_t len);
