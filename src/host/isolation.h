/* CPUs the kernel was told to keep to themselves: isolcpus= and
 * nohz_full=. The packer (model/pack.h) never puts work on them.
 *
 * Three sources, because each sees part of it:
 *  - sys/devices/system/cpu/isolated: possible CPUs outside the
 *    HK_TYPE_DOMAIN housekeeping mask (isolcpus= with the "domain" flag,
 *    the default); a plain isolcpus=nohz,... does not show here;
 *  - sys/devices/system/cpu/nohz_full: tick_nohz_full_mask; the file
 *    exists only with CONFIG_NO_HZ_FULL, and where no nohz_full= was given
 *    a kernel with CONFIG_CPUMASK_OFFSTACK prints "(null)" (the mask was
 *    never allocated; LKML 2025-10-06 "tick/nohz: avoid showing '(null)'
 *    if nohz_full= not set" makes later kernels print an empty line),
 *    both read here as empty;
 *  - /proc/cmdline: every isolcpus= (whatever its flags: nohz, domain,
 *    managed_irq all mean "reserved") and nohz_full= on it, in the
 *    kernel's cpu-list grammar (Documentation/admin-guide/
 *    kernel-parameters.rst, "cpu lists": ids, ranges, "N" for the last
 *    CPU, "all", and "a-b:used/group").
 * The union is what must never be packed. */
#pragma once

#include <stddef.h>

#include "base/cpuset.h"
#include "base/diag.h"
#include "host/host.h"

struct cpu_isolation {
    struct cpuset isolated;  /* sysfs "isolated"; empty when absent */
    struct cpuset nohz_full; /* sysfs "nohz_full"; empty when absent or "(null)" */
    struct cpuset cmdline;   /* isolcpus= and nohz_full= on /proc/cmdline */
    struct cpuset all;       /* the union of the three */
};

/* Reads the three sources; NCPU is nr_cpu_ids (topology.ncpu), for "N"
 * and "all". A missing file is no isolation; an unreadable or malformed
 * one is a diag and adds nothing. Never fails: returns 0. */
int isolation_read(struct host *h, unsigned ncpu, struct cpu_isolation *ret, struct diags *diags);
void isolation_free(struct cpu_isolation *iso);

/* The CPUs named by isolcpus= and nohz_full= on a kernel command line
 * (all occurrences, united: the conservative reading). Parameters after
 * "--" belong to init and are not read. Returns how many of those
 * parameters were malformed and skipped (the kernel ignores them too);
 * *ret is always set. */
int isolation_parse_cmdline(const char *cmdline, unsigned ncpu, struct cpuset *ret);
/* One value of a cpu-list boot parameter, LEN bytes at S (no flags).
 * -EINVAL on garbage or a reversed range, -ERANGE for ids >= ncpu; *ret
 * set only on success. */
int isolation_parse_cpulist(const char *s, size_t len, unsigned ncpu, struct cpuset *ret);
