/* The one door to the kernel. Every read of /sys, /proc and /dev goes
 * through a host handle holding directory fds opened under a root: "/" on
 * a live machine, or a recorded tree (a fixture, a `watt snapshot`).
 *
 * Paths given to these functions are relative to the chosen directory
 * ("devices/system/cpu/online" under HOST_SYS). All functions return >= 0
 * on success and -errno on failure; ret_* are set only on success. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum host_dir {
    HOST_SYS,
    HOST_PROC,
    HOST_DEV,
    HOST_ROOTDIR, /* the root itself, for recorded metadata */
    HOST_NVML,    /* not a directory: NVIDIA GPUs' settings through NVML, which
                   * the tune layer reads and writes (tune/knob_io.h); every
                   * host_* read or write of it fails (-ENOENT). Paths are
                   * "GPU-UUID/power_limit_mw", shown as "nvml:PATH". */
    _HOST_DIR_MAX,
};

/* Called for every successful read, so `watt snapshot` can record exactly
 * the files watt reads. Paths are relative to the root ("sys/...").
 * `real` is where the file really lives after symlinks; links lists the
 * symlinks met on the way (each "path\0target\0"). */
struct host_recorder {
    void (*file)(void *ud, const char *real, const void *data, size_t len);
    void (*link)(void *ud, const char *path, const char *target);
    void (*dir)(void *ud, const char *real);
    void *ud;
};

struct host_fault;
struct host_cache;

/* What a read under an enabled cache (host_cache_enable) may assume. */
enum host_cache_mode {
    HOST_CACHE_OFF,     /* read the kernel's file now, as without a cache */
    HOST_CACHE_STATIC,  /* cannot have changed since the last drop: contents,
                         * listings, links and existence come from the cache */
    HOST_CACHE_DYNAMIC, /* moves: re-read now, through a file kept open
                         * (pread at 0) on a live root */
    HOST_CACHE_SLOW,    /* moves, but is wanted at most every slow_ns
                         * (host_cache_slow): read as DYNAMIC, then its
                         * last content is given back until that age */
};

struct host {
    char *root;               /* as given, owned; "/" when live */
    char *root_real;          /* realpath of root, owned */
    int fd[_HOST_DIR_MAX];    /* -1 when that directory is missing */
    bool live;                /* root is the running kernel's "/" */
    struct host_fault *fault; /* fault injection list (recorded roots only) */
    size_t nfault;
    struct host_recorder *rec; /* optional, borrowed */
    uint64_t nreads;           /* statistics: files read */
    bool tracefs_mounted;      /* host_tracefs_events() mounted it: unmount it again */
    struct host_cache *cache;  /* NULL: every read opens the file (report, top) */
    enum host_cache_mode cache_mode;
};

/* root NULL means $WATT_ROOT, else "/". A recorded root whose sys, proc,
 * dev or var is a symbolic link is refused (-ELOOP; ret_err, when not
 * NULL, gets one sentence naming it): those must be the tree's own. */
int host_open(const char *root, struct host **ret);
int host_open_err(const char *root, struct host **ret, char **ret_err);
void host_close(struct host *h);
void host_set_recorder(struct host *h, struct host_recorder *rec);

/* The kernel path as a user knows it ("/sys/devices/..."), prefixed by the
 * root when it is not "/". Owned by the caller. */
char *host_display_path(const struct host *h, enum host_dir d, const char *path);

/* The path as it is on the machine the tree came from ("/sys/devices/..."),
 * without the root: for commands a user would run there. Owned. */
char *host_kernel_path(enum host_dir d, const char *path);

/* Whole file, NUL-terminated (the length excludes the NUL). Files larger
 * than 64 MiB give -EFBIG. */
int host_read(struct host *h, enum host_dir d, const char *path, char **ret, size_t *ret_len);
/* One value: the file with trailing whitespace removed. */
int host_read_str(struct host *h, enum host_dir d, const char *path, char **ret);
/* A decimal unsigned value; garbage gives -EINVAL, overflow -ERANGE. */
int host_read_u64(struct host *h, enum host_dir d, const char *path, uint64_t *ret);
int host_read_i64(struct host *h, enum host_dir d, const char *path, int64_t *ret);
/* Exactly `len` bytes from offset `off` (binary files: cpu_dma_latency,
 * msr). Short reads give -EIO. */
int host_pread(struct host *h, enum host_dir d, const char *path, void *buf, size_t len,
               uint64_t off);

/* A directory handle: reads of its files open a short relative path, a
 * cheaper kernfs lookup than the full path (six files of a cpuidle state,
 * a device's attributes). Faults and the recorder see the full path. */
struct host_dirh {
    struct host *h;
    enum host_dir d;
    int fd;        /* O_PATH */
    char *path;    /* relative to d, owned */
    bool borrowed; /* fd belongs to the host's cache: not closed */
};

int host_dir_open(struct host *h, enum host_dir d, const char *path, struct host_dirh *ret);
void host_dir_close(struct host_dirh *dh);
int host_dir_read(struct host_dirh *dh, const char *name, char **ret, size_t *ret_len);
int host_dir_read_str(struct host_dirh *dh, const char *name, char **ret);
int host_dir_read_u64(struct host_dirh *dh, const char *name, uint64_t *ret);
int host_dir_read_i64(struct host_dirh *dh, const char *name, int64_t *ret);

/* Names in a directory, without "." and "..", in natural order
 * (cpu2 before cpu10). Free with host_free_list(). */
int host_list(struct host *h, enum host_dir d, const char *path, char ***ret, size_t *ret_n);
void host_free_list(char **list, size_t n);
int host_readlink(struct host *h, enum host_dir d, const char *path, char **ret);
/* The last component of a symlink's target ("ahci" for a driver link). */
int host_link_name(struct host *h, enum host_dir d, const char *path, char **ret);
bool host_exists(struct host *h, enum host_dir d, const char *path);
bool host_is_dir(struct host *h, enum host_dir d, const char *path);

/* Writes a value; only the tune layer's journal may call it. On a
 * recorded root the file is replaced (O_TRUNC) and a newline is appended
 * when VALUE lacks one, so it reads back as sysfs would show it; on a
 * live root the bytes go to the kernel as they are. Faults with op=write
 * (fault.h) make it fail with their errno. */
int host_write(struct host *h, enum host_dir d, const char *path, const char *value);
/* Exactly LEN bytes, no newline added (a restore of the bytes read). */
int host_write_raw(struct host *h, enum host_dir d, const char *path, const void *buf, size_t len);

/* The tune layer's own files under the root (the journal: ROOT/var/lib/
 * watt/journal), not kernel paths. PATH is relative to the root. The
 * directories are resolved beneath the root (links may not leave it;
 * on a live root, as in a chroot at "/") and the file is opened with
 * O_CLOEXEC | O_NOFOLLOW; with O_CREAT, missing parent directories are
 * made (0755), each inside the one before it. */
int host_state_open(struct host *h, const char *path, int flags, mode_t mode);
/* renameat() FROM over TO, then fsync() of TO's directory, so the rename
 * survives a power cut. */
int host_state_rename(struct host *h, const char *from, const char *to);
/* fsync() of the directory holding PATH: a new file's entry survives a
 * power cut. */
int host_state_fsync_dir(struct host *h, const char *path);
/* Whether state at PATH may be trusted: every directory from below the
 * root down to PATH, and PATH itself, that exists is owned by root (or by
 * this process's user: a tree of one's own under --root) and is not
 * writable by group or others. -EPERM with ret_why one sentence naming
 * the file, its owner or mode, and the command that fixes it. */
int host_state_check(struct host *h, const char *path, char **ret_why);
/* "/var/lib/watt/journal", or "ROOT/var/lib/watt/journal". Owned. */
char *host_state_display_path(const struct host *h, const char *path);

/* A raw fd (O_CLOEXEC) for ioctl/pread users. Opened for writing, the
 * op=write faults apply (fault.h); otherwise the read faults. */
int host_open_fd(struct host *h, enum host_dir d, const char *path, int flags);

/* perf_event_open(2). Only on a live root: a recorded tree has no PMU, so
 * this returns -ENOTSUP there. attr is a struct perf_event_attr. */
int host_perf_open(struct host *h, void *attr, pid_t pid, int cpu, int group_fd);

/* The scheduling policy of thread TID (SCHED_OTHER 0, FIFO 1, RR 2, BATCH 3,
 * IDLE 5, DEADLINE 6), or -errno (-ESRCH: gone). On a live root one
 * sched_getscheduler(2) call; on a recorded tree field 41 of
 * /proc/TID/stat (proc(5)). */
int host_sched_policy(struct host *h, pid_t tid);

/* tracefs (Documentation/trace/ftrace.rst): the event directories the
 * perf tracepoint users read ids and formats from. *ret_dir is the events
 * directory relative to HOST_ROOTDIR ("sys/kernel/tracing/events"), owned.
 * On a live root the mount table (/proc/self/mountinfo, mountinfo.h) is
 * asked first, before any mount(2): tracefs at /sys/kernel/tracing, else
 * a tracefs mounted anywhere, else debugfs's tracing/. Only when none is
 * listed is tracefs mounted at /sys/kernel/tracing (mount(2) "nodev",
 * "tracefs"); *ret_mounted says so, and host_tracefs_unmount() takes it
 * away again. A recorded root is looked in at sys/kernel/tracing/events,
 * then sys/kernel/debug/tracing/events (before 4.1), and -ENOENT without
 * either; -EACCES when tracefs is there but not searchable (mode 0700: not
 * root); the mount's -errno when it fails (-EPERM: not root, or a seccomp
 * filter's SystemCallErrorNumber=EPERM; -ENOSYS from some filters). */
int host_tracefs_events(struct host *h, char **ret_dir, bool *ret_mounted);
/* Unmount tracefs if host_tracefs_events() mounted it (and nobody holds a
 * file open there: then it stays). */
void host_tracefs_unmount(struct host *h);

/* socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, PROTOCOL): a query of the
 * running kernel (NETLINK_SOCK_DIAG: the TCP sockets of one port, as
 * ss(8) asks). Only on a live root: a recorded tree has no kernel to ask,
 * so -ENOTSUP there; -EPERM and the like where a sandbox refuses it. */
int host_netlink_open(struct host *h, int protocol);

/* The read cache of a long-running sampler (the agent; `watt report` and
 * `watt top` read without one). Once enabled, reads follow the mode set
 * with host_cache_mode(): STATIC ones (topology, names, latencies, device
 * lists and identities, mount info) cost no system call after the first;
 * DYNAMIC ones keep their file open (at most MAX_FDS of them; beyond,
 * opened each time) and pread() it, on a live root: a recorded tree's
 * files are opened each time (a replaced or removed file must show, and
 * a kept fd would not see it). A file read before that now answers ENODEV
 * or ENOENT (the device or CPU went away; on a recorded tree also a fault,
 * fault.h, standing in for the kernel) marks the cache stale: the next
 * host_cache_expire() drops it, so the next sample rescans. Faults are
 * matched before the cache, as without it; a recorder (snapshot) reads without it; a write
 * (host_write) makes the next static read of that file read it anew. */
void host_cache_enable(struct host *h, unsigned max_fds);
/* Set the mode; returns the one before, for the caller to restore. */
enum host_cache_mode host_cache_mode(struct host *h, enum host_cache_mode mode);
/* Forget everything cached and close the kept files (SIGHUP, hotplug). */
void host_cache_drop(struct host *h);
/* How old a HOST_CACHE_SLOW read may be (0, the default: as DYNAMIC).
 * The agent sets it for device runtime PM on a live root (docs/agent.md). */
void host_cache_slow(struct host *h, uint64_t max_age_ns);
/* Drop when stale or older than MAX_AGE_NS; true when it dropped. */
bool host_cache_expire(struct host *h, uint64_t now_ns, uint64_t max_age_ns);
/* A sampler's own judgement that a value it read will not move until the
 * next drop ("unsupported" runtime PM): host_cache_put() stores it as the
 * file's static content, host_cache_peek() gives it back (NULL when none,
 * or without a cache) without reading anything. */
void host_cache_put(struct host *h, enum host_dir d, const char *path, const char *value);
const char *host_cache_peek(struct host *h, enum host_dir d, const char *path);
struct host_cache_stats {
    bool enabled;
    size_t entries;
    unsigned kept_fds, max_fds;
    uint64_t hits, misses, drops;
};
void host_cache_stats(const struct host *h, struct host_cache_stats *ret);

/* Formatted-path variants: the path is built with printf. */
int host_read_strf(struct host *h, enum host_dir d, char **ret, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int host_read_u64f(struct host *h, enum host_dir d, uint64_t *ret, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int host_read_i64f(struct host *h, enum host_dir d, int64_t *ret, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool host_existsf(struct host *h, enum host_dir d, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes used when displaying paths and in snapshots. */
const char *host_dir_name(enum host_dir d); /* "sys", "proc", "dev", "" */

/* This process's resident set in bytes (the agent's self-metric): always
 * the running kernel's /proc/self, whatever root a host has. The file is
 * kept open (the first caller's process: not for use across fork()). */
int host_self_rss(uint64_t *ret);
/* This process's command line, arguments joined by spaces (at most 511
 * bytes): who holds a lock. Owned. */
int host_self_cmdline(char **ret);
/* The path of this process's executable (/proc/self/exe, links resolved):
 * where watt finds watt-fleet beside it. Owned. */
int host_self_exe(char **ret);
