/* The built-in profiles. `watt tune --dry-run` shows each change with the
 * line it comes from, so the comments in this text say why each value is
 * what it is; docs/tune-profiles.md has the same reasons with references.
 * A built-in's includes always mean built-ins. */
#include <stddef.h>
#include <string.h>

#include "tune/profile.h"

static const char performance[] =
    "# performance: the top clock at once and no link power saving. It leaves\n"
    "# C-states alone: idle cores still sleep deeply (see the latency profile).\n"
    "[profile]\n"
    "description = highest clock at once, boost on, no SATA/PCIe link power saving\n"
    "\n"
    "[cpufreq]\n"
    "# The performance governor holds every policy at scaling_max_freq (cpufreq.rst);\n"
    "# intel_pstate in active mode runs its own performance algorithm instead.\n"
    "governor = performance\n"
    "# EPP 0 on HWP and amd-pstate: the hardware picks speed over energy. intel_pstate\n"
    "# forces it under the performance policy anyway; saying so keeps the diff honest.\n"
    "epp = performance\n"
    "# Frequencies above the base clock, where the other cores leave power to spare.\n"
    "boost = on\n"
    "\n"
    "[devices]\n"
    "# No SATA link power management: waking a link from Partial takes up to 10 us,\n"
    "# from Slumber up to 10 ms (link_power_management_policy.rst, Kconfig LPM help).\n"
    "sata_link_pm = max_performance\n"
    "# ASPM off on every PCIe link: no L0s/L1 exit latency on the first transfer\n"
    "# after an idle gap (pcie_aspm.policy in kernel-parameters.txt).\n"
    "pcie_aspm = performance\n";

static const char latency[] =
    "# latency: performance, and no wait for a clock ramp or a deep C-state exit.\n"
    "# It sets nothing in [kernel]: the NMI watchdog and writeback interval do not\n"
    "# change wake-up latency. A guard that holds the limit only while a workload is\n"
    "# busy needs the workload's name: see [latency] in docs/tune-profiles.md.\n"
    "[profile]\n"
    "description = performance, every core at its top clock, only the shallowest C-states\n"
    "include = performance\n"
    "\n"
    "[cpufreq]\n"
    "# Floor = ceiling: no ramp-up after idle. tuned's latency-performance does this\n"
    "# with intel_pstate's min_perf_pct = 100; scaling_min_freq works on every driver.\n"
    "min_freq = max\n"
    "\n"
    "[cpuidle]\n"
    "# Disable every state whose exit latency is above the shallowest non-POLL state's\n"
    "# (C1 on most machines). tuned gets this with force_latency=cstate.id_no_zero:1,\n"
    "# an open /dev/cpu_dma_latency; we write each state's disable file (cpuidle.rst),\n"
    "# journalled, so `watt restore` undoes it and every tool can see it.\n"
    "max_latency_us = first\n";

static const char balanced[] =
    "# balanced: the kernel's dynamic defaults, made explicit, so that applying it\n"
    "# undoes a pinned profile: scale with load, sleep deeply when idle.\n"
    "[profile]\n"
    "description = scale with load, every C-state allowed, safe devices runtime-suspended\n"
    "\n"
    "[cpufreq]\n"
    "# schedutil follows the scheduler's own utilisation (cpufreq.rst); acpi-cpufreq and\n"
    "# amd-pstate offer it. intel_pstate in active mode offers only performance and\n"
    "# powersave, and its powersave is the dynamic one (intel_pstate.rst): the first\n"
    "# governor the machine offers wins.\n"
    "governor = schedutil, powersave\n"
    "# The usual firmware default on HWP machines: performance first, energy when idle.\n"
    "epp = balance_performance\n"
    "boost = on\n"
    "# The full cpuinfo_min_freq..cpuinfo_max_freq range, undoing any pinned floor.\n"
    "min_freq = min\n"
    "max_freq = max\n"
    "\n"
    "[cpuidle]\n"
    "# Every idle state enabled: the idle governor picks the deepest one that pays off.\n"
    "max_latency_us = none\n"
    "\n"
    "[devices]\n"
    "# Runtime PM for the devices the safety policy passes: never input devices, virtio,\n"
    "# the root disk's path or the default route's NIC (sysfs-devices-power: control).\n"
    "runtime_pm = auto\n"
    "# 2 s idle before a suspend: the USB core's own default (usbcore.autosuspend).\n"
    "autosuspend_delay_ms = 2000\n"
    "# Partial and device-initiated Slumber, as Intel's RST driver does; min_power adds\n"
    "# host-initiated Slumber and DevSleep, whose exits take milliseconds.\n"
    "sata_link_pm = med_power_with_dipm\n"
    "# The firmware's own ASPM settings.\n"
    "pcie_aspm = default\n";

static const char powersave[] =
    "# powersave: balanced, with less eager hardware, no turbo, deeper link states and\n"
    "# fewer periodic wake-ups. Costs some latency and peak speed.\n"
    "[profile]\n"
    "description = balanced, plus balance_power EPP, no boost, L1 substates, fewer wake-ups\n"
    "include = balanced\n"
    "\n"
    "[cpufreq]\n"
    "# balance_power, not power: EPP 255 keeps cores slow under load, which costs much\n"
    "# latency for little energy on a server, where idle power is set by C-states.\n"
    "epp = balance_power\n"
    "# Turbo's last bins cost far more power than the speed they give.\n"
    "boost = off\n"
    "\n"
    "[devices]\n"
    "autosuspend_delay_ms = 1000\n"
    "# ASPM with the L1.1/L1.2 substates where the link supports them.\n"
    "pcie_aspm = powersupersave\n"
    "\n"
    "[kernel]\n"
    "# powertop's advice: the hard-lockup detector interrupts every CPU with a periodic\n"
    "# perf NMI, waking it from idle, and holds a perf counter. Lockups still show up\n"
    "# through the soft-lockup watchdog (sysctl/kernel.rst: nmi_watchdog).\n"
    "nmi_watchdog = 0\n"
    "# Flusher threads wake every 15 s instead of 5 s (powertop's value, sysctl/vm.rst);\n"
    "# dirty data may wait up to 10 s longer before it reaches the disk.\n"
    "dirty_writeback_centisecs = 1500\n";

const char *const profile_builtin_names[] = {"balanced", "latency", "performance", "powersave",
                                             NULL};

const char *profile_builtin_text(const char *name)
{
    static const struct {
        const char *name, *text;
    } builtins[] = {
        {"balanced", balanced},
        {"latency", latency},
        {"performance", performance},
        {"powersave", powersave},
    };
    for (size_t i = 0; name && i < sizeof(builtins) / sizeof(builtins[0]); i++)
        if (strcmp(name, builtins[i].name) == 0)
            return builtins[i].text;
    return NULL;
}
