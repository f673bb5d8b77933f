/* The tuning plan: a profile turned into the exact writes it means on this
 * machine (path: old -> new, and why), and their all-or-nothing apply
 * through the journal.
 *
 * Knobs (a profile key, the files it writes, Documentation it follows):
 *   cpufreq.governor   cpufreq/policyN/scaling_governor
 *   cpufreq.epp        cpufreq/policyN/energy_performance_preference
 *   cpufreq.boost      cpufreq/boost (1 = on), or intel_pstate/no_turbo (inverted)
 *   cpufreq.min_freq / max_freq   cpufreq/policyN/scaling_{min,max}_freq (kHz)
 *   cpuidle.max_latency_us        cpuN/cpuidle/stateK/disable
 *   pm_qos.resume_latency_us      cpuN/power/pm_qos_resume_latency_us
 *   devices.runtime_pm, autosuspend_delay_ms   DEVICE/power/control,
 *                                 power/autosuspend_delay_ms (the SAFE
 *                                 candidates of sense/devsafety.h only)
 *   devices.sata_link_pm          scsi_host/hostN/link_power_management_policy
 *   devices.pcie_aspm             /sys/module/pcie_aspm/parameters/policy
 *   kernel.nmi_watchdog           /proc/sys/kernel/nmi_watchdog
 *   kernel.dirty_writeback_centisecs  /proc/sys/vm/dirty_writeback_centisecs
 * A knob missing on this machine (no cpufreq in a VM) is skipped with a
 * note, never an error; a value the machine cannot take (a governor it
 * lacks, a frequency outside cpuinfo_min..max) is an error naming the
 * profile line. Values equal to what is there already are not planned. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "host/host.h"

struct profile;
struct devpolicy;
struct journal;

struct tune_change {
    enum host_dir dir;
    char *path;      /* relative to dir; owned */
    char *old_value; /* as read, trimmed, for display; owned */
    char *new_value; /* what is written; owned */
    char *knob;      /* "cpufreq.governor"; owned */
    char *why;       /* "performance governor: highest frequency at once"; owned */
    char *origin;    /* profile file:line of the setting; owned */
};

struct tune_plan {
    struct tune_change *v;
    size_t n;
    char **notes; /* "cpufreq.governor: skipped, no cpufreq on this machine"; owned */
    size_t nnotes;
    /* What the profile sets, changed or already right: "sys:PATH" for a
     * file, "knob:NAME" for a knob set on whatever files it finds
     * (devices.runtime_pm: a device already suspending is no longer a
     * candidate). Switching profiles puts back only what is not covered.
     * Owned; sorted by tune_plan_add_reverts(). */
    char **covered;
    size_t ncovered;
};

/* Build the plan for P on H. DP (may be NULL: built-in rules only) is the
 * device allow/deny policy. Errors (-EINVAL) name the profile line. */
int tune_plan_build(struct host *h, const struct profile *p, const struct devpolicy *dp,
                    struct tune_plan *ret, char **ret_err);
/* Append a change; takes copies. For the knob planners. */
int tune_plan_add(struct tune_plan *p, enum host_dir d, const char *path, const char *old_value,
                  const char *new_value, const char *knob, const char *why, const char *origin);
int tune_plan_note(struct tune_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Mark a file the profile sets as covered though it needs no change
 * (tune_plan_add covers its file itself); PATH NULL with KNOB covers the
 * knob as a whole. */
void tune_plan_cover(struct tune_plan *p, enum host_dir d, const char *path, const char *knob);
void tune_plan_free(struct tune_plan *p);

/* The [devices] knobs runtime_pm and autosuspend_delay_ms: exactly the
 * SAFE candidates that `watt report` lists under the same policy. */
int tune_plan_devices(struct host *h, const struct profile *p, const struct devpolicy *dp,
                      struct tune_plan *plan, char **ret_err);

/* Switching profiles: a profile is applied over the machine's original
 * values. Every path LOG (the journal as read) holds for OWNER ("cli")
 * that the plan does not touch, and whose value now differs from its
 * original (the old value of its first record), gets a change back to the
 * original. These go before the profile's own changes, so a governor goes
 * back before an EPP is written under it. PROFILE names the profile in
 * the why; JOURNAL is the journal's display path, for the origin. */
struct journal_log;
int tune_plan_add_reverts(struct host *h, struct tune_plan *p, const struct journal_log *log,
                          const char *owner, const char *profile, const char *journal);

/* The knob a kernel file belongs to ("cpufreq.governor"), or NULL. */
const char *tune_knob_for_path(enum host_dir d, const char *path);
/* What a value file means: the bracketed word of a choice list
 * ("[default] performance powersave" -> "default", as pcie_aspm prints
 * it and as it takes it back), else the text without trailing
 * whitespace. Owned. */
char *tune_value_active(const char *raw);

/* Apply every change in one journal transaction. If the kernel refuses
 * one (EINVAL, EPERM, EROFS, ...), every change already made is rolled
 * back and ret_err names the knob, the path, the value and the error. */
int tune_plan_apply(struct journal *j, const struct tune_plan *p, char **ret_err);
/* The same, and then read every file back through H: where the kernel
 * shows another value than written (a clamped frequency), a note in
 * ret_notes (owned; set on success) says so; the apply goes on. */
int tune_plan_apply_checked(struct journal *j, struct host *h, const struct tune_plan *p,
                            char ***ret_notes, size_t *ret_nnotes, char **ret_err);
