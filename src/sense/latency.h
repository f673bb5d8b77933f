/* latency: the CPU latency constraints in force (PM QoS), which decide the
 * deepest C-state the cpuidle governor may pick.
 *
 * - /dev/cpu_dma_latency (Documentation/power/pm_qos_interface.rst): read
 *   4 bytes, a native-endian s32, the system-wide CPU latency limit in µs.
 *   2000000000 (PM_QOS_CPU_LATENCY_DEFAULT_VALUE, 2000 s) means no
 *   constraint. It is the minimum of every request: processes holding the
 *   device open with a value written, and drivers in the kernel. Who holds
 *   them is not visible anywhere in sysfs.
 * - /sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us
 *   (Documentation/ABI/testing/sysfs-devices-power): "0" no constraint,
 *   "n/a" no latency tolerated (only states with zero exit latency), else
 *   µs.
 *
 * The governors (menu, teo, ladder) use the smaller of the two
 * (cpuidle_governor_latency_req()) and skip every state whose exit latency
 * is above it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sense/sample.h"
#include "sense/sampler.h"

/* Constraint values in µs, with two markers. */
#define LATENCY_NONE    INT64_MAX /* no constraint */
#define LATENCY_UNKNOWN (-1)      /* could not be read */

/* The s32 read from /dev/cpu_dma_latency that means "no constraint". */
#define LATENCY_GLOBAL_DEFAULT 2000000000

struct latency_cpu {
    int cpu;
    int64_t resume_us; /* pm_qos_resume_latency_us: LATENCY_NONE for "0", 0 for
                          "n/a", else µs; LATENCY_UNKNOWN when unreadable */
};

/* A process with /dev/cpu_dma_latency open: one of them (or a driver in
 * the kernel, which is not visible) set the global constraint. */
struct latency_holder {
    int pid;
    char *comm; /* /proc/PID/comm; NULL when it exited meanwhile */
};

struct latency_sample {
    int64_t global_us;  /* LATENCY_NONE when the default, LATENCY_UNKNOWN when
                           unreadable, else µs */
    int64_t global_raw; /* the s32 as read; LATENCY_UNKNOWN when unreadable */
    unsigned ncpus;
    struct latency_cpu *cpus; /* online CPUs, by id; owned */
    /* Only looked for while a global constraint is in force (a scan of
     * every process's fds costs ~1 ms per 1000 fds). */
    bool holders_scanned;
    unsigned holders_unreadable; /* processes whose fd/ could not be listed */
    size_t nholders;
    struct latency_holder *holders; /* owned */
};

extern const struct sampler latency_sampler;

/* The 4 bytes of /dev/cpu_dma_latency: ret_us as in global_us, ret_raw the
 * s32. -EIO when len is not 4, -EINVAL for a negative value. */
int latency_parse_global(const void *buf, size_t len, int64_t *ret_us, int64_t *ret_raw);
/* The text of pm_qos_resume_latency_us ("0\n", "n/a\n", "20\n"). -EINVAL
 * on garbage, -ERANGE above S32_MAX. */
int latency_parse_resume(const char *text, size_t len, int64_t *ret_us);

const struct latency_cpu *latency_find_cpu(const struct latency_sample *l, int cpu);
/* The constraint in force for a CPU: the smaller of the global and the
 * CPU's own. LATENCY_NONE when neither constrains; when one is unreadable
 * the other alone (a lower bound of what is known), LATENCY_UNKNOWN when
 * both are. */
int64_t latency_in_force_us(const struct latency_sample *l, int cpu);
/* True when the constraint in force for the CPU is below the state's exit
 * latency, so the governor will not pick the state. False when it is not
 * known to be excluded (no constraint, nothing readable, unknown latency). */
bool latency_excludes_state(const struct latency_sample *l, int cpu, uint64_t state_latency_us);
