/* The knob table (knob.h). */
#include "knob.h"

#include <string.h>

#include "base/cpuset.h"
#include "base/util.h"

#define DEVICE_MAX_DEPTH 16 /* "**": names in a device path */

static const struct knob knobs[] = {
    {"cpufreq.governor", HOST_SYS, "devices/system/cpu/cpufreq/policy#/scaling_governor",
     KNOB_V_WORD},
    {"cpufreq.epp", HOST_SYS, "devices/system/cpu/cpufreq/policy#/energy_performance_preference",
     KNOB_V_WORD | KNOB_V_UINT},
    {"cpufreq.boost", HOST_SYS, "devices/system/cpu/cpufreq/boost", KNOB_V_BIT},
    {"cpufreq.boost", HOST_SYS, "devices/system/cpu/intel_pstate/no_turbo", KNOB_V_BIT},
    {"cpufreq.min_freq", HOST_SYS, "devices/system/cpu/cpufreq/policy#/scaling_min_freq",
     KNOB_V_UINT},
    {"cpufreq.max_freq", HOST_SYS, "devices/system/cpu/cpufreq/policy#/scaling_max_freq",
     KNOB_V_UINT},
    {"cpuidle.max_latency_us", HOST_SYS, "devices/system/cpu/cpu#/cpuidle/state#/disable",
     KNOB_V_BIT},
    {"pm_qos.resume_latency_us", HOST_SYS, "devices/system/cpu/cpu#/power/pm_qos_resume_latency_us",
     KNOB_V_UINT | KNOB_V_NA},
    /* a device as the devices sampler names it: its real path, or its bus
     * link where the tree has no link (a recorded root) */
    {"devices.runtime_pm", HOST_SYS, "devices/**/power/control", KNOB_V_ONAUTO},
    {"devices.runtime_pm", HOST_SYS, "bus/*/devices/*/power/control", KNOB_V_ONAUTO},
    {"devices.autosuspend_delay_ms", HOST_SYS, "devices/**/power/autosuspend_delay_ms", KNOB_V_INT},
    {"devices.autosuspend_delay_ms", HOST_SYS, "bus/*/devices/*/power/autosuspend_delay_ms",
     KNOB_V_INT},
    {"devices.sata_link_pm", HOST_SYS, "class/scsi_host/host#/link_power_management_policy",
     KNOB_V_WORD},
    {"devices.pcie_aspm", HOST_SYS, "module/pcie_aspm/parameters/policy",
     KNOB_V_WORD | KNOB_V_CHOICE},
    /* the packer (tune/packer.h): a cgroup's cpuset, on the v2 hierarchy
     * or the v1 cpuset one, mounted under /sys/fs/cgroup */
    {"cgroup.cpuset_cpus", HOST_SYS, "fs/cgroup/**/cpuset.cpus", KNOB_V_CPULIST},
    /* [pack] enable_controller = yes: "+cpuset" in a parent's subtree_control */
    {"cgroup.subtree_control", HOST_SYS, "fs/cgroup/cgroup.subtree_control", KNOB_V_CONTROLLERS},
    {"cgroup.subtree_control", HOST_SYS, "fs/cgroup/**/cgroup.subtree_control", KNOB_V_CONTROLLERS},
    /* a GPU, through its DRM card's link (tune/knobs_gpu.c): amdgpu's
     * power cap, i915/xe's PL1 limit (µW), amdgpu's performance level */
    {"gpu.power_limit_w", HOST_SYS, "class/drm/card#/device/hwmon/hwmon#/power1_cap", KNOB_V_UINT},
    {"gpu.power_limit_w", HOST_SYS, "class/drm/card#/device/hwmon/hwmon#/power1_max", KNOB_V_UINT},
    {"gpu.perf_level", HOST_SYS, "class/drm/card#/device/power_dpm_force_performance_level",
     KNOB_V_WORD},
    /* an NVIDIA GPU's power management limit, mW, through NVML
     * (tune/knob_io.h): "GPU-UUID/power_limit_mw" */
    {"gpu.power_limit_w", HOST_NVML, "*/power_limit_mw", KNOB_V_UINT},
    {"kernel.nmi_watchdog", HOST_PROC, "sys/kernel/nmi_watchdog", KNOB_V_BIT},
    {"kernel.dirty_writeback_centisecs", HOST_PROC, "sys/vm/dirty_writeback_centisecs",
     KNOB_V_UINT},
};

const struct knob *knob_table(size_t *ret_n)
{
    *ret_n = ARRAY_SIZE(knobs);
    return knobs;
}

static bool name_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
           c == '.' || c == '_' || c == '+' || c == '-';
}

/* A name a wildcard may stand for. */
static bool plain_name(const char *s, size_t n)
{
    if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_byte(s[i]))
            return false;
    return true;
}

/* One component S[0..n) against pattern component P[0..pn). */
static bool component_match(const char *p, size_t pn, const char *s, size_t n)
{
    if (pn == 1 && p[0] == '*')
        return plain_name(s, n);
    size_t i = 0, k = 0;
    while (i < pn) {
        if (p[i] == '#') {
            size_t d = 0;
            while (k + d < n && s[k + d] >= '0' && s[k + d] <= '9')
                d++;
            if (d == 0 || d > 10)
                return false;
            k += d;
            i++;
            continue;
        }
        if (k == n || s[k] != p[i])
            return false;
        i++, k++;
    }
    return k == n;
}

/* PATH (its components) against PATTERN, from the front. */
static bool path_match(const char *p, const char *s)
{
    if (!*p || !*s)
        return !*p && !*s;
    size_t pn = strcspn(p, "/"), n = strcspn(s, "/");
    const char *pnext = p[pn] ? p + pn + 1 : p + pn, *snext = s[n] ? s + n + 1 : s + n;
    if (s[n] == '/' && !*snext)
        return false; /* a trailing slash */
    if (pn == 2 && p[0] == '*' && p[1] == '*') {
        /* one to DEVICE_MAX_DEPTH names, then the rest of the pattern */
        const char *c = s;
        for (int depth = 1; depth <= DEVICE_MAX_DEPTH && *c; depth++) {
            size_t cn = strcspn(c, "/");
            if (!plain_name(c, cn))
                return false;
            c = c[cn] ? c + cn + 1 : c + cn;
            if (path_match(pnext, c))
                return true;
        }
        return false;
    }
    return component_match(p, pn, s, n) && path_match(pnext, snext);
}

const struct knob *knob_find(enum host_dir d, const char *path)
{
    if (!path)
        return NULL;
    for (size_t i = 0; i < ARRAY_SIZE(knobs); i++)
        if (knobs[i].dir == d && path_match(knobs[i].pattern, path))
            return &knobs[i];
    return NULL;
}

static bool all_digits(const char *s, size_t n, size_t max)
{
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static bool word(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* "[default] performance powersave ": words split by single spaces, one
 * of them (only one) in brackets; the kernel ends the list with a space
 * (pcie_aspm_get_policy()). */
static bool choice_list(const char *s, size_t n)
{
    if (n && s[n - 1] == ' ')
        n--;
    int bracketed = 0;
    for (size_t i = 0; i < n;) {
        size_t w = 0;
        while (i + w < n && s[i + w] != ' ')
            w++;
        bool br = w >= 2 && s[i] == '[' && s[i + w - 1] == ']';
        if (!(br ? word(s + i + 1, w - 2) : word(s + i, w)))
            return false;
        bracketed += br;
        i += w;
        if (i < n && ++i == n)
            return false; /* a trailing space */
    }
    return bracketed == 1;
}

/* "0-3,8,10-11" or "": what cpulist_parse() in the kernel takes for a
 * cpuset (lib/bitmap-str.c without the ":used/group" form, which cpuset
 * files never show), ids at most CPUSET_MAX_CPU, each range rising. */
static bool cpu_list(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned long lo = 0, hi;
        size_t d = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9' && d < 5; i++, d++)
            lo = lo * 10 + (unsigned long)(s[i] - '0');
        if (d == 0 || lo > CPUSET_MAX_CPU)
            return false;
        hi = lo;
        if (i < n && s[i] == '-') {
            i++;
            hi = 0, d = 0;
            for (; i < n && s[i] >= '0' && s[i] <= '9' && d < 5; i++, d++)
                hi = hi * 10 + (unsigned long)(s[i] - '0');
            if (d == 0 || hi > CPUSET_MAX_CPU || hi < lo)
                return false;
        }
        if (i == n)
            return true;
        if (s[i] != ',' || ++i == n)
            return false;
    }
    return true; /* empty */
}

/* "cpu memory", "+cpuset", "" : controller names ([a-z_], 1 to 32 bytes),
 * single spaces between, each optionally prefixed by '+' or '-'. */
static bool controllers(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (s[i] == '+' || s[i] == '-')
            i++;
        size_t w = 0;
        while (i + w < n && ((s[i + w] >= 'a' && s[i + w] <= 'z') || s[i + w] == '_'))
            w++;
        if (w == 0 || w > 32)
            return false;
        i += w;
        if (i < n && (s[i] != ' ' || ++i == n))
            return false;
    }
    return true;
}

bool knob_value_ok(const struct knob *k, const char *value)
{
    if (!k || !value)
        return false;
    size_t n = strlen(value);
    if (n && value[n - 1] == '\n')
        n--;
    unsigned v = k->values;
    if ((v & KNOB_V_BIT) && n == 1 && (value[0] == '0' || value[0] == '1'))
        return true;
    if ((v & KNOB_V_UINT) && all_digits(value, n, 20))
        return true;
    if ((v & KNOB_V_INT) &&
        (value[0] == '-' ? all_digits(value + 1, n - 1, 19) : all_digits(value, n, 19)))
        return true;
    if ((v & KNOB_V_WORD) && word(value, n))
        return true;
    if ((v & KNOB_V_NA) && n == 3 && !memcmp(value, "n/a", 3))
        return true;
    if ((v & KNOB_V_ONAUTO) &&
        ((n == 2 && !memcmp(value, "on", 2)) || (n == 4 && !memcmp(value, "auto", 4))))
        return true;
    if ((v & KNOB_V_CHOICE) && choice_list(value, n))
        return true;
    if ((v & KNOB_V_CPULIST) && cpu_list(value, n))
        return true;
    if ((v & KNOB_V_CONTROLLERS) && controllers(value, n))
        return true;
    return false;
}
