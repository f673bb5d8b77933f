/* Tuning profiles: the key table, the checks of one value against its
 * key, and the typed views of values the plan and the guard use. The file
 * parser and include resolution are in profile.c. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpuset.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "tune/profile.h"
#include "tune/profile_internal.h"
/* ---- the key table ---------------------------------------------------- */

static const char *const w_governor[] = {"performance",  "powersave", "schedutil", "ondemand",
                                         "conservative", "userspace", NULL};
static const char *const w_epp[] = {"default",       "performance", "balance_performance",
                                    "balance_power", "power",       NULL};
static const char *const w_runtime_pm[] = {"auto", "keep", NULL};
static const char *const w_sata[] = {"max_performance",
                                     "medium_power",
                                     "med_power_with_dipm",
                                     "min_power_with_partial",
                                     "min_power",
                                     "keep_firmware_settings",
                                     "keep",
                                     NULL};
static const char *const w_aspm[] = {"default",        "performance", "powersave",
                                     "powersupersave", "keep",        NULL};
static const char *const w_idle_latency[] = {"none", "first", NULL};
static const char *const w_qos_latency[] = {"none", "n/a", NULL};
static const char *const w_missing[] = {"error", "skip", NULL};
static const char *const w_demand[] = {"machine", "cgroups", NULL};
/* amdgpu's power_dpm_force_performance_level (Documentation/gpu/amdgpu/
 * thermal.rst), and keep: leave it */
static const char *const w_perf_level[] = {"auto",
                                           "low",
                                           "high",
                                           "manual",
                                           "profile_standard",
                                           "profile_min_sclk",
                                           "profile_min_mclk",
                                           "profile_peak",
                                           "keep",
                                           NULL};

#define LATENCY_MAX_US 2000000000.0 /* the cpu_dma_latency default: no constraint */
#define FREQ_MAX_KHZ   100000000.0  /* 100 GHz: above any CPU, catches unit slips */
#define GPU_MAX_W      100000.0     /* 100 kW: above any board, catches mW/µW slips */

#define KEY(s, k, kind_, ...)                              \
    {                                                      \
        .section = s, .key = k, .kind = kind_, __VA_ARGS__ \
    }

const struct profile_key profile_keys[] = {
    KEY("profile", "description", PROFILE_KEY_TEXT,
        .help = "one line, shown when profiles are listed"),
    KEY("profile", "include", PROFILE_KEY_TEXT, .list = true,
        .help = "profiles applied first, in order, then this file"),

    KEY("cpufreq", "governor", PROFILE_KEY_WORDS, .words = w_governor, .list = true,
        .help = "scaling governor; the first one the machine offers wins",
        .file = "devices/system/cpu/cpufreq/policyN/scaling_governor"),
    KEY("cpufreq", "epp", PROFILE_KEY_WORDS, .words = w_epp, .list = true,
        .help = "energy/performance preference (HWP, amd-pstate); the first available wins",
        .file = "devices/system/cpu/cpufreq/policyN/energy_performance_preference"),
    KEY("cpufreq", "boost", PROFILE_KEY_BOOL,
        .help = "turbo/boost above the base clock (a boolean)",
        .file = "devices/system/cpu/cpufreq/boost or intel_pstate/no_turbo (inverted)"),
    KEY("cpufreq", "min_freq", PROFILE_KEY_FREQ, .min = 1, .max = FREQ_MAX_KHZ,
        .help = "floor of the governor's range: min, max, kHz, MHz, GHz or % of the maximum",
        .file = "devices/system/cpu/cpufreq/policyN/scaling_min_freq"),
    KEY("cpufreq", "max_freq", PROFILE_KEY_FREQ, .min = 1, .max = FREQ_MAX_KHZ,
        .help = "ceiling of the governor's range: min, max, kHz, MHz, GHz or % of the maximum",
        .file = "devices/system/cpu/cpufreq/policyN/scaling_max_freq"),
    KEY("cpufreq", "cpus", PROFILE_KEY_CPUS, .help = "the CPUs whose policies change (all)"),

    KEY("cpuidle", "max_latency_us", PROFILE_KEY_LATENCY, .words = w_idle_latency, .min = 0,
        .max = LATENCY_MAX_US,
        .help = "disable every idle state whose exit latency (µs) is above this",
        .file = "devices/system/cpu/cpuN/cpuidle/stateK/disable"),
    KEY("cpuidle", "cpus", PROFILE_KEY_CPUS, .help = "the CPUs whose states change (all)"),

    KEY("pm_qos", "resume_latency_us", PROFILE_KEY_LATENCY, .words = w_qos_latency, .min = 1,
        .max = LATENCY_MAX_US, .help = "per-CPU resume latency limit in µs, none or n/a",
        .file = "devices/system/cpu/cpuN/power/pm_qos_resume_latency_us"),
    KEY("pm_qos", "cpus", PROFILE_KEY_CPUS, .help = "the CPUs that get the limit (all)"),

    KEY("devices", "runtime_pm", PROFILE_KEY_WORDS, .words = w_runtime_pm,
        .help = "auto: runtime-suspend the safe candidates; keep: leave devices alone",
        .file = "DEVICE/power/control"),
    KEY("devices", "autosuspend_delay_ms", PROFILE_KEY_INT, .min = 0, .max = 600000,
        .help = "idle time (ms) before a safe candidate suspends",
        .file = "DEVICE/power/autosuspend_delay_ms"),
    KEY("devices", "sata_link_pm", PROFILE_KEY_WORDS, .words = w_sata, .list = true,
        .help = "SATA link power policy; the first the host accepts wins",
        .file = "class/scsi_host/hostN/link_power_management_policy"),
    KEY("devices", "pcie_aspm", PROFILE_KEY_WORDS, .words = w_aspm, .help = "PCIe ASPM policy",
        .file = "module/pcie_aspm/parameters/policy"),

    KEY("kernel", "nmi_watchdog", PROFILE_KEY_BOOL, .help = "hard-lockup detector (a boolean)",
        .file = "proc: sys/kernel/nmi_watchdog"),
    KEY("kernel", "dirty_writeback_centisecs", PROFILE_KEY_INT, .min = 0, .max = 360000,
        .help = "interval between writeback flusher wake-ups, 1/100 s",
        .file = "proc: sys/vm/dirty_writeback_centisecs"),

    KEY("gpu", "power_limit_w", PROFILE_KEY_REAL, .min = 1, .max = GPU_MAX_W,
        .help = "board power limit, W, within each GPU's own range",
        .file = "class/drm/cardN/device/hwmon/hwmonM/power1_cap (amdgpu) or power1_max "
                "(i915, xe); NVML's power management limit"),
    KEY("gpu", "power_limit_pct", PROFILE_KEY_REAL, .min = 1, .max = 100,
        .help = "board power limit, % of each GPU's maximum limit", .file = "as power_limit_w"),
    KEY("gpu", "perf_level", PROFILE_KEY_WORDS, .words = w_perf_level,
        .help = "amdgpu performance level; keep: leave it",
        .file = "class/drm/cardN/device/power_dpm_force_performance_level"),
    KEY("gpu", "gpus", PROFILE_KEY_GPUS,
        .help = "the GPUs that change: all, or cardN, nvmlN, PCI addresses (all)"),

    KEY("latency", "workload", PROFILE_KEY_WORKLOAD,
        .help = "what must be busy: cgroup:PATH, process:NAME or port:N"),
    KEY("latency", "latency_us", PROFILE_KEY_INT, .min = 0, .max = LATENCY_MAX_US,
        .help = "the limit (µs) held while the workload is busy",
        .file = "dev: cpu_dma_latency, or cpuN/power/pm_qos_resume_latency_us with cpus"),
    KEY("latency", "cpus", PROFILE_KEY_CPUS,
        .help = "hold per-CPU resume latency on these instead of the global limit"),
    KEY("latency", "busy_cpu_pct", PROFILE_KEY_REAL, .min = 0, .max = 100000,
        .help = "busy above this CPU use, % of one CPU"),
    KEY("latency", "busy_connections", PROFILE_KEY_INT, .min = 1, .max = 1000000,
        .help = "busy at this many established connections (port workloads)"),
    KEY("latency", "busy_after_s", PROFILE_KEY_REAL, .min = 0, .max = 3600,
        .help = "busy for this long (s) before the limit is held"),
    KEY("latency", "idle_after_s", PROFILE_KEY_REAL, .min = 0, .max = 86400,
        .help = "idle for this long (s) before the limit is released"),

    KEY("pack", "cgroups", PROFILE_KEY_TEXT,
        .help = "cgroups to pack, space-separated (system.slice user.slice machine.slice)",
        .file = "fs/cgroup/CGROUP/cpuset.cpus (v2, or the v1 cpuset hierarchy)"),
    KEY("pack", "missing", PROFILE_KEY_WORDS, .words = w_missing,
        .help = "a named cgroup that does not exist: error (at load) or skip"),
    KEY("pack", "headroom", PROFILE_KEY_REAL, .min = 0, .max = 10,
        .help = "plan for demand x (1 + headroom) CPUs (0.25)"),
    KEY("pack", "shrink_slack", PROFILE_KEY_REAL, .min = 0, .max = 10,
        .help = "shrink only when demand x (1 + headroom) x (1 + slack) fits (0.25)"),
    KEY("pack", "min_cpus", PROFILE_KEY_INT, .min = 1, .max = 8192,
        .help = "the packed set holds at least this many CPUs (1)"),
    KEY("pack", "window_s", PROFILE_KEY_REAL, .min = 1, .max = 3600,
        .help = "demand: the machine's busy CPUs over this window, s (10)"),
    KEY("pack", "demand", PROFILE_KEY_WORDS, .words = w_demand,
        .help = "machine: busy CPUs from /proc/stat; cgroups: the packed cgroups' cpu.stat usage"),
    KEY("pack", "enable_controller", PROFILE_KEY_BOOL,
        .help = "cgroup2: write +cpuset where a parent's subtree_control lacks it (journalled)",
        .file = "fs/cgroup/PARENT/cgroup.subtree_control"),
    KEY("pack", "interval_s", PROFILE_KEY_REAL, .min = 0.01, .max = 60,
        .help = "the packer's tick, s (1)"),
    KEY("pack", "pressure_stall_us", PROFILE_KEY_INT, .min = 1, .max = 10000000,
        .help = "PSI trigger: grow at this much CPU stall (µs) per window (10000)",
        .file = "cpu.pressure of each cgroup (cgroup2), else proc: pressure/cpu"),
    KEY("pack", "pressure_window_us", PROFILE_KEY_INT, .min = 500000, .max = 10000000,
        .help = "PSI trigger window, µs (500000)"),
};
const size_t profile_nkeys = ARRAY_SIZE(profile_keys);

const char *const profile_sections[] = {"profile", "cpufreq", "cpuidle", "pm_qos", "devices",
                                        "kernel",  "gpu",     "latency", "pack",   NULL};

const struct profile_key *profile_key_find(const char *section, const char *key)
{
    for (size_t i = 0; i < profile_nkeys; i++)
        if (streq(profile_keys[i].section, section) && streq(profile_keys[i].key, key))
            return &profile_keys[i];
    return NULL;
}

/* ---- suggestions ------------------------------------------------------ */

/* Optimal string alignment distance (a swap of neighbours costs 1); long
 * strings are never "close". */
static unsigned edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64)
        return 99;
    unsigned d[65][65];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (unsigned)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (unsigned)j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            unsigned cost = a[i - 1] != b[j - 1];
            unsigned v = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[n][m];
}

/* The closest word within distance 2, or NULL. */
const char *profile_closest(const char *s, const char *const *words)
{
    const char *best = NULL;
    unsigned best_d = 3;
    for (size_t i = 0; words[i]; i++) {
        unsigned dist = edit_distance(s, words[i]);
        if (dist < best_d) {
            best_d = dist;
            best = words[i];
        }
    }
    return best;
}

char *profile_join_words(const char *const *words, const char *last_sep)
{
    struct strbuf b = {0};
    for (size_t i = 0; words[i]; i++) {
        if (i)
            strbuf_append(&b, words[i + 1] ? ", " : last_sep);
        strbuf_append(&b, words[i]);
    }
    return strbuf_steal(&b);
}

/* ---- lists ------------------------------------------------------------ */

char *profile_trimmed(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char *r = xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}

int profile_split_list(const char *value, char ***ret, size_t *ret_n)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    const char *p = value;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char *item = profile_trimmed(p, len);
        if (!*item) {
            free(item);
            profile_names_free(v, n);
            return -EINVAL;
        }
        v = grow_array(v, sizeof(*v), n, &cap);
        v[n++] = item;
        if (!comma)
            break;
        p = comma + 1;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

/* ---- typed values ----------------------------------------------------- */

/* A plain decimal number: digits, at most one '.', no sign, no exponent,
 * no "inf" (what strtod would also take). */
static int parse_decimal(const char *s, size_t len, double *ret)
{
    size_t digits = 0, dots = 0;
    for (size_t i = 0; i < len; i++) {
        if (isdigit((unsigned char)s[i]))
            digits++;
        else if (s[i] == '.')
            dots++;
        else
            return -EINVAL;
    }
    if (!digits || dots > 1 || len > 32)
        return -EINVAL;
    char buf[40];
    memcpy(buf, s, len);
    buf[len] = '\0';
    *ret = strtod(buf, NULL);
    return 0;
}

int profile_parse_freq(const char *value, struct profile_freq *ret)
{
    if (streq(value, "min") || streq(value, "max")) {
        *ret = (struct profile_freq){streq(value, "min") ? PROFILE_FREQ_MIN : PROFILE_FREQ_MAX, 0};
        return 0;
    }
    size_t len = strspn(value, "0123456789.");
    double d;
    if (parse_decimal(value, len, &d) < 0)
        return -EINVAL;
    const char *unit = value + len;
    while (*unit == ' ' || *unit == '\t')
        unit++;
    struct profile_freq f = {PROFILE_FREQ_KHZ, d};
    if (streq(unit, "%")) {
        f.kind = PROFILE_FREQ_PCT;
        if (d < 1 || d > 100)
            return -ERANGE;
        *ret = f;
        return 0;
    }
    if (!*unit || strcasecmp(unit, "khz") == 0) {
        if (d != floor(d))
            return -EINVAL;
    } else if (strcasecmp(unit, "mhz") == 0) {
        f.value = round(d * 1e3);
    } else if (strcasecmp(unit, "ghz") == 0) {
        f.value = round(d * 1e6);
    } else {
        return -EINVAL;
    }
    if (f.value < 1 || f.value > FREQ_MAX_KHZ)
        return -ERANGE;
    *ret = f;
    return 0;
}

static int parse_integer(const char *s, long long *ret)
{
    /* no '+': the kernel's parsers and the guard's refuse it */
    if (!isdigit((unsigned char)s[0]) && !(s[0] == '-' && isdigit((unsigned char)s[1])))
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *ret = v;
    return 0;
}

int profile_parse_latency(const char *value, struct profile_latency *ret)
{
    static const struct {
        const char *word;
        enum profile_latency_kind kind;
    } words[] = {{"none", PROFILE_LATENCY_NONE},
                 {"first", PROFILE_LATENCY_FIRST},
                 {"n/a", PROFILE_LATENCY_NA}};
    for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
        if (streq(value, words[i].word)) {
            *ret = (struct profile_latency){words[i].kind, 0};
            return 0;
        }
    }
    long long us;
    int r = parse_integer(value, &us);
    if (r < 0)
        return r;
    if (us < 0 || us > (long long)LATENCY_MAX_US)
        return -ERANGE;
    *ret = (struct profile_latency){PROFILE_LATENCY_US, us};
    return 0;
}

/* Returns NULL, or why VALUE is not a workload. */
static const char *workload_parse(const char *value, struct profile_workload *ret)
{
    struct profile_workload w = {0};
    if (strncmp(value, "cgroup:", 7) == 0) {
        const char *path = value + 7;
        size_t n = strlen(path);
        if (n > 1024)
            return "the cgroup path is longer than 1024 characters";
        if (path[0] != '/')
            return "the cgroup path starts with '/' below the cgroup2 mount "
                   "(cgroup:/system.slice/redis.service)";
        if (strstr(path, "/../") || strstr(path, "/./") || strstr(path, "//") ||
            (n >= 3 && streq(path + n - 3, "/..")) || (n >= 2 && streq(path + n - 2, "/.")))
            return "the cgroup path has an empty, '.' or '..' component";
        for (size_t i = 0; i < n; i++)
            if (iscntrl((unsigned char)path[i]))
                return "the cgroup path has a control character";
        w = (struct profile_workload){PROFILE_WORKLOAD_CGROUP, path, 0};
    } else if (strncmp(value, "process:", 8) == 0) {
        const char *name = value + 8;
        size_t n = strlen(name);
        if (n < 1 || n > 15 || strchr(name, '/'))
            return "a process name (the kernel's comm) is 1 to 15 characters without '/'";
        for (size_t i = 0; i < n; i++)
            if (iscntrl((unsigned char)name[i]))
                return "the process name has a control character";
        w = (struct profile_workload){PROFILE_WORKLOAD_PROCESS, name, 0};
    } else if (strncmp(value, "port:", 5) == 0) {
        long long port;
        if (value[5] == '-' || parse_integer(value + 5, &port) < 0 || port < 1 || port > 65535)
            return "the port is an integer in 1..65535";
        w = (struct profile_workload){PROFILE_WORKLOAD_PORT, NULL, (unsigned)port};
    } else {
        return "want cgroup:PATH, process:NAME or port:N";
    }
    *ret = w;
    return NULL;
}

int profile_parse_workload(const char *value, struct profile_workload *ret)
{
    return workload_parse(value, ret) ? -EINVAL : 0;
}

int profile_parse_cpus(const char *value, struct cpuset *ret)
{
    if (streq(value, "all"))
        return 1;
    /* cpuset_parse takes the kernel's format, which has no blanks */
    _cleanup_free_ char *compact = xmalloc(strlen(value) + 1);
    size_t n = 0;
    for (const char *p = value; *p; p++)
        if (!isspace((unsigned char)*p))
            compact[n++] = *p;
    compact[n] = '\0';
    if (!n)
        return -EINVAL;
    for (size_t i = 0; i + 1 < n; i++)
        if (compact[i] == ',' && compact[i + 1] == ',')
            return -EINVAL;
    struct cpuset set;
    int r = cpuset_parse(compact, &set);
    if (r < 0)
        return r;
    if (cpuset_count(&set) == 0) {
        cpuset_free(&set);
        return -EINVAL;
    }
    *ret = set;
    return 0;
}

/* "card0", "nvml1": a sysfs DRM card or an NVML index, as the GPU
 * sample names them (sense/gpu.h). */
static bool gpu_id_ok(const char *s)
{
    const char *d = !strncmp(s, "card", 4) ? s + 4 : !strncmp(s, "nvml", 4) ? s + 4 : NULL;
    if (!d || !*d || strlen(d) > 4 || (d[0] == '0' && d[1]))
        return false;
    for (; *d; d++)
        if (!isdigit((unsigned char)*d))
            return false;
    return true;
}

/* "0000:03:00.0": a PCI address, 4-digit domain, lower-case hex. */
static bool gpu_pdev_ok(const char *s)
{
    static const char form[] = "xxxx:xx:xx.x";
    if (strlen(s) != sizeof(form) - 1)
        return false;
    for (size_t i = 0; form[i]; i++)
        if (form[i] == 'x' ? !isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f')
                           : s[i] != form[i])
            return false;
    return s[11] <= '7';
}

int profile_parse_gpus(const char *value, char ***ret, size_t *ret_n)
{
    if (streq(value, "all"))
        return 1;
    char **v;
    size_t n;
    if (profile_split_list(value, &v, &n) < 0)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < i; j++)
            dup |= streq(v[i], v[j]);
        if (dup || !(gpu_id_ok(v[i]) || gpu_pdev_ok(v[i]))) {
            profile_names_free(v, n);
            return -EINVAL;
        }
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

/* ---- value checks ----------------------------------------------------- */

static char *check_words(const struct profile_key *k, const char *value)
{
    if (!k->list && strchr(value, ','))
        return xasprintf("%s takes one word, not a list ('%s')", k->key, value);
    char **items;
    size_t n;
    if (profile_split_list(value, &items, &n) < 0)
        return xasprintf("%s '%s' has an empty item (want words separated by commas)", k->key,
                         value);
    char *err = NULL;
    for (size_t i = 0; i < n && !err; i++) {
        bool known = false;
        for (size_t w = 0; k->words[w] && !known; w++)
            known = streq(items[i], k->words[w]);
        for (size_t j = 0; j < i && known && !err; j++)
            if (streq(items[i], items[j]))
                err = xasprintf("%s lists '%s' twice", k->key, items[i]);
        if (known)
            continue;
        _cleanup_free_ char *want = profile_join_words(k->words, " or ");
        const char *near = profile_closest(items[i], k->words);
        if (near)
            err = xasprintf("%s '%s' is not a known value: did you mean '%s'? (want %s)", k->key,
                            items[i], near, want);
        else
            err = xasprintf("%s '%s' is not a known value (want %s)", k->key, items[i], want);
    }
    profile_names_free(items, n);
    return err;
}

static char *check_number(const struct profile_key *k, const char *value)
{
    double d;
    if (k->kind == PROFILE_KEY_INT) {
        long long v;
        int r = parse_integer(value, &v);
        if (r == -EINVAL)
            return xasprintf("%s '%s' is not an integer (want %.15g..%.15g)", k->key, value, k->min,
                             k->max);
        d = r < 0 ? HUGE_VAL : (double)v;
    } else {
        const char *s = value + (value[0] == '-' || value[0] == '+');
        if (parse_decimal(s, strlen(s), &d) < 0)
            return xasprintf("%s '%s' is not a number (want %.15g..%.15g)", k->key, value, k->min,
                             k->max);
        if (value[0] == '-')
            d = -d;
    }
    if (d < k->min || d > k->max)
        return xasprintf("%s %s is out of range (want %.15g..%.15g)", k->key, value, k->min,
                         k->max);
    return NULL;
}

static char *check_latency(const struct profile_key *k, const char *value)
{
    _cleanup_free_ char *want = profile_join_words(k->words, " or ");
    struct profile_latency l;
    int r = profile_parse_latency(value, &l);
    bool word_ok = false;
    for (size_t i = 0; k->words[i]; i++)
        word_ok |= streq(value, k->words[i]);
    if (r == 0 && l.kind != PROFILE_LATENCY_US && !word_ok)
        r = -EINVAL;
    if (r == -EINVAL)
        return xasprintf("%s '%s' is not a latency (want µs as an integer, or %s)", k->key, value,
                         want);
    if (r == 0 && l.kind == PROFILE_LATENCY_US && l.us < k->min && streq(k->section, "pm_qos"))
        return xasprintf("%s 0 is ambiguous (the kernel file reads 0 as no constraint): write "
                         "'none' for no constraint or 'n/a' for no latency at all",
                         k->key);
    if (r < 0 || (l.kind == PROFILE_LATENCY_US && l.us < k->min))
        return xasprintf("%s %s is out of range (want %.15g..%.15g µs, or %s)", k->key, value,
                         k->min, k->max, want);
    return NULL;
}

static char *check_include(const struct profile_key *k, const char *value)
{
    char **items;
    size_t n;
    if (profile_split_list(value, &items, &n) < 0)
        return xasprintf("%s '%s' has an empty name between commas", k->key, value);
    char *err = NULL;
    for (size_t i = 0; i < n && !err; i++) {
        if (!profile_name_ok(items[i]))
            err = xasprintf("%s: '%s' is not a profile name (want a-z, 0-9, '_', '.', '-', "
                            "at most 64, no '/' or '..')",
                            k->key, items[i]);
        for (size_t j = 0; j < i && !err; j++)
            if (streq(items[i], items[j]))
                err = xasprintf("%s names '%s' twice", k->key, items[i]);
    }
    profile_names_free(items, n);
    return err;
}

int profile_value_check(const struct profile_key *k, const char *value, char **ret_err)
{
    char *err = NULL;
    struct profile_freq f;
    struct profile_workload w;
    struct cpuset set;
    int r;
    switch (k->kind) {
    case PROFILE_KEY_WORDS:
        err = check_words(k, value);
        break;
    case PROFILE_KEY_INT:
    case PROFILE_KEY_REAL:
        err = check_number(k, value);
        break;
    case PROFILE_KEY_FREQ:
        r = profile_parse_freq(value, &f);
        if (r == -EINVAL)
            err = xasprintf("%s '%s' is not a frequency (want min, max, N kHz, N MHz, N GHz "
                            "or N%%)",
                            k->key, value);
        else if (r < 0)
            err = xasprintf("%s '%s' is out of range (want 1 kHz..100 GHz, or 1..100%%)", k->key,
                            value);
        break;
    case PROFILE_KEY_LATENCY:
        err = check_latency(k, value);
        break;
    case PROFILE_KEY_CPUS:
        r = profile_parse_cpus(value, &set);
        if (r == 0)
            cpuset_free(&set);
        if (r == -ERANGE)
            err = xasprintf("%s '%s' has a reversed range or an id above %d", k->key, value,
                            CPUSET_MAX_CPU);
        else if (r < 0)
            err =
                xasprintf("%s '%s' is not a CPU list (want all, or ids like 0-3,8)", k->key, value);
        break;
    case PROFILE_KEY_WORKLOAD: {
        const char *why = workload_parse(value, &w);
        if (why)
            err = xasprintf("%s '%s': %s", k->key, value, why);
        break;
    }
    case PROFILE_KEY_TEXT:
        if (k->list)
            err = check_include(k, value);
        break;
    case PROFILE_KEY_GPUS: {
        char **ids = NULL;
        size_t nids = 0;
        r = profile_parse_gpus(value, &ids, &nids);
        if (r < 0)
            err = xasprintf("%s '%s' is not a GPU list (want all, or cardN, nvmlN and PCI "
                            "addresses like 0000:03:00.0, each once)",
                            k->key, value);
        else if (r == 0)
            profile_names_free(ids, nids);
        break;
    }
    case PROFILE_KEY_BOOL: {
        bool b;
        if (parse_bool(value, &b) < 0)
            err = xasprintf("%s '%s' is not a boolean (want " PARSE_BOOL_WORDS ")", k->key, value);
        break;
    }
    }
    if (err) {
        *ret_err = err;
        return -EINVAL;
    }
    return 0;
}
