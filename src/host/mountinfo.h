/* Where tracefs is: the mount table of proc(5)'s /proc/self/mountinfo
 * (Documentation/filesystems/proc.rst, "mountinfo"), read before anything
 * tries mount(2), so that a tracefs mounted anywhere (or debugfs's
 * automounted tracing/) is used as it is. */
#pragma once

#include <stddef.h>

/* What a mountinfo table offers, best first. */
enum mountinfo_trace_kind {
    MOUNTINFO_TRACE_NONE,
    MOUNTINFO_TRACE_DEBUGFS,   /* debugfs: its tracing/ directory, which the
                                * kernel automounts tracefs on when looked in */
    MOUNTINFO_TRACE_TRACEFS,   /* tracefs mounted somewhere else */
    MOUNTINFO_TRACE_CANONICAL, /* tracefs at /sys/kernel/tracing */
};

/* From the text of a mountinfo file, the tracing directory to use: the
 * canonical tracefs, else the first other tracefs mount, else the first
 * debugfs mount's "tracing" subdirectory. Only mounts of the file
 * system's root ("/" in field 4) count: a bind mount of a subdirectory has
 * no events/ at its top. The path is absolute, octal escapes (\040 for a
 * space) decoded, owned by the caller. Returns the kind found (> 0),
 * MOUNTINFO_TRACE_NONE (0, *ret_path untouched) when there is none,
 * -EBADMSG when a line is not mountinfo (*ret_line, when not NULL, gets
 * its 1-based number). */
int mountinfo_find_tracing(const char *text, size_t len, char **ret_path, unsigned *ret_line);

/* Where the cgroup hierarchies are (the packer's cpuset writes,
 * tune/packer.h): the first cgroup2 mount (*ret_v2) and the first cgroup
 * v1 mount whose super options hold "cpuset" (*ret_v1_cpuset), each of
 * its file system's root only; absolute, decoded, owned, NULL when none.
 * Returns a bit set (1: v2 found, 2: v1 cpuset found), or -EBADMSG when a
 * line is not mountinfo (*ret_line, when not NULL, gets its number;
 * nothing is returned then). */
int mountinfo_find_cgroup(const char *text, size_t len, char **ret_v2, char **ret_v1_cpuset,
                          unsigned *ret_line);
/* A mount point under /sys as a path relative to HOST_SYS
 * ("/sys/fs/cgroup/cpuset" gives "fs/cgroup/cpuset"), owned; NULL when it
 * is elsewhere. */
char *mountinfo_under_sys(const char *mount);
