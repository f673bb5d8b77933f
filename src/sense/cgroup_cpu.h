/* cgroup_cpu: each cgroup's CPU time from its own accounting (cgroup v2
 * cpu.stat usage_usec; v1 cpuacct.usage), instead of summing its
 * processes from a scan of /proc. Used by the latency guard (one named
 * cgroup) and by the agent's per-cgroup energy (the whole v2 tree, each
 * cgroup's own time without its children's). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "host/host.h"

/* cgroup v2 cpu.stat text: the usage_usec line. -EINVAL when missing. */
int cgroup_cpu_parse_stat(const char *text, uint64_t *ret_usage_us);

/* One cgroup's CPU time, ns since it was made. name: the path below the
 * hierarchy's root without the leading "/" ("" for the root,
 * "system.slice/ssh.service"). v2 (pure, or hybrid's "unified"), then v1
 * cpuacct (separate or co-mounted with cpu). *ret_src: "cgroup v2
 * cpu.stat" or "cgroup v1 cpuacct.usage". -ENOENT when none has it. */
int cgroup_cpu_read(struct host *h, const char *name, uint64_t *ret_ns, const char **ret_src);

struct cgroup_cpu {
    char *path;        /* "/" or "/system.slice/ssh.service", as /proc/PID/cgroup says; owned */
    uint64_t id;       /* the directory's inode: the kernel's cgroup id; 0 unknown */
    uint64_t usage_ns; /* its cpu.stat usage_usec, children included */
};

struct cgroup_cpu_snapshot {
    size_t n;
    struct cgroup_cpu *v; /* sorted by path */
    const char *root;     /* the v2 mount under /sys ("fs/cgroup", "fs/cgroup/unified"); static */
    bool truncated;       /* more cgroups than the bound: the rest are in their ancestors */
};

/* The v2 tree: every cgroup's usage (at most max, 0 means 4096; deeper
 * than 16 levels is not walked). ids are taken from prev (same path)
 * unless refresh_ids; a directory's id costs an open and an fstat.
 * -ENOENT when no cgroup v2 hierarchy is mounted. */
int cgroup_cpu_scan(struct host *h, const struct cgroup_cpu_snapshot *prev, bool refresh_ids,
                    size_t max, struct cgroup_cpu_snapshot *ret);
void cgroup_cpu_snapshot_clear(struct cgroup_cpu_snapshot *s);
/* Each cgroup of b's own CPU seconds since a (ret[i] for b->v[i]): its
 * usage's growth less its children's (a child new in b: all of its
 * usage; a child gone since a: its last growth stays with the parent).
 * Never negative. */
void cgroup_cpu_own_delta(const struct cgroup_cpu_snapshot *a, const struct cgroup_cpu_snapshot *b,
                          double *ret);
/* By path, or by id (a linear search); NULL when absent. */
const struct cgroup_cpu *cgroup_cpu_find(const struct cgroup_cpu_snapshot *s, const char *path);
const struct cgroup_cpu *cgroup_cpu_find_id(const struct cgroup_cpu_snapshot *s, uint64_t id);
