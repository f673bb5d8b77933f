/* The knob table: every kernel file watt may change, declared once.
 *
 * The planners (knobs.c, plan_devices.c, guard.c) write only files that
 * match a row, and the undo journal writes only values that a row
 * accepts (journal.c checks both at journal_set() and at restore): a
 * journal record naming anything else (a block device, core_pattern,
 * sysrq-trigger, uevent_helper, /proc/self/root/...) is refused, whatever
 * its checksum says. A new knob is one row here plus its planner.
 *
 * A pattern is a path relative to its directory (HOST_SYS, HOST_PROC, or
 * HOST_NVML: an NVIDIA GPU's setting by its UUID, tune/knob_io.h),
 * '/'-separated; in a component, '#' stands for one or more decimal
 * digits ("policy#", "cpu#"); a component "*" for any one name, "**" for
 * one to 16 names (device paths), where a name is made of the bytes
 * [A-Za-z0-9:._+-], other than "." and "..". */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "host/host.h"

/* The values a knob's file takes (a bit set); one trailing newline is
 * allowed in each, as sysfs shows them. */
enum {
    KNOB_V_BIT = 1 << 0,         /* "0" or "1" */
    KNOB_V_UINT = 1 << 1,        /* decimal, at most 20 digits */
    KNOB_V_INT = 1 << 2,         /* an optional '-' and decimal digits */
    KNOB_V_WORD = 1 << 3,        /* [a-z0-9_], 1 to 64 bytes: a governor, an EPP, a policy */
    KNOB_V_NA = 1 << 4,          /* "n/a": pm_qos's "poll only" */
    KNOB_V_ONAUTO = 1 << 5,      /* "on" or "auto": runtime PM's control */
    KNOB_V_CHOICE = 1 << 6,      /* words, one of them in brackets: "[default] performance" */
    KNOB_V_CPULIST = 1 << 7,     /* a kernel cpu-list as cpuset.cpus shows and takes it:
                                  * ids and ranges "0-3,8,10-11" (ids up to
                                  * CPUSET_MAX_CPU, ranges rising), or empty */
    KNOB_V_CONTROLLERS = 1 << 8, /* cgroup controllers, space-separated, each
                                  * optionally '+' or '-' prefixed: what
                                  * cgroup.subtree_control shows and takes */
};

struct knob {
    const char *name; /* "cpufreq.governor" */
    enum host_dir dir;
    const char *pattern;
    unsigned values; /* KNOB_V_* */
};

/* The row whose pattern PATH matches under D, or NULL. */
const struct knob *knob_find(enum host_dir d, const char *path);
/* Whether VALUE is one the knob takes. */
bool knob_value_ok(const struct knob *k, const char *value);
/* The whole table (docs and tests). */
const struct knob *knob_table(size_t *ret_n);
