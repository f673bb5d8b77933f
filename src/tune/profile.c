/* Tuning profiles: the key table, value checks, the INI parser (inih, with
 * our own line reader so every value keeps its file:line) and includes. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cpuset.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "tune/profile.h"

/* ---- the key table ---------------------------------------------------- */

static const char *const w_governor[] = {"performance",  "powersave", "schedutil", "ondemand",
                                         "conservative", "userspace", NULL};
static const char *const w_epp[] = {"default",       "performance", "balance_performance",
                                    "balance_power", "power",       NULL};
static const char *const w_onoff[] = {"on", "off", NULL};
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

#define LATENCY_MAX_US 2000000000.0 /* the cpu_dma_latency default: no constraint */
#define FREQ_MAX_KHZ   100000000.0  /* 100 GHz: above any CPU, catches unit slips */

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
    KEY("cpufreq", "boost", PROFILE_KEY_WORDS, .words = w_onoff,
        .help = "turbo/boost above the base clock",
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

    KEY("kernel", "nmi_watchdog", PROFILE_KEY_INT, .min = 0, .max = 1,
        .help = "hard-lockup detector: 1 on, 0 off", .file = "proc: sys/kernel/nmi_watchdog"),
    KEY("kernel", "dirty_writeback_centisecs", PROFILE_KEY_INT, .min = 0, .max = 360000,
        .help = "interval between writeback flusher wake-ups, 1/100 s",
        .file = "proc: sys/vm/dirty_writeback_centisecs"),

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
};
const size_t profile_nkeys = ARRAY_SIZE(profile_keys);

static const char *const sections[] = {"profile", "cpufreq", "cpuidle", "pm_qos",
                                       "devices", "kernel",  "latency", NULL};

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
static const char *closest(const char *s, const char *const *words)
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

static char *join_words(const char *const *words, const char *last_sep)
{
    struct strbuf b = {0};
    for (size_t i = 0; words[i]; i++) {
        if (i)
            strbuf_append(&b, words[i + 1] ? ", " : last_sep);
        strbuf_append(&b, words[i]);
    }
    return strbuf_steal(&b);
}

/* ---- names and lists -------------------------------------------------- */

bool profile_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 64 || strstr(name, ".."))
        return false;
    if (!islower((unsigned char)name[0]) && !isdigit((unsigned char)name[0]))
        return false;
    for (size_t i = 1; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!islower(c) && !isdigit(c) && c != '_' && c != '.' && c != '-')
            return false;
    }
    return true;
}

void profile_names_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static char *trimmed(const char *s, size_t n)
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
        char *item = trimmed(p, len);
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
        _cleanup_free_ char *want = join_words(k->words, " or ");
        const char *near = closest(items[i], k->words);
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
    _cleanup_free_ char *want = join_words(k->words, " or ");
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
    }
    if (err) {
        *ret_err = err;
        return -EINVAL;
    }
    return 0;
}

/* ---- one file --------------------------------------------------------- */

struct parse {
    const char *origin;
    /* our line reader: inih numbers nothing for its handler */
    const char *pos;
    int line;          /* the line inih works on, from 1 */
    bool indented;     /* it starts with blank space */
    int key_line;      /* the last key = value line, 0 before any */
    int header_line;   /* the last [section] line, 0 before any */
    int latency_line;  /* the last [latency] line, 0 when none */
    struct profile *p; /* own values; "" is a removal */
    size_t cap;
    long pending; /* index of the value a continuation would extend, -1 */
    int pending_line;
    char *err; /* the first error (lowest line), without origin */
    int err_line;
};

static void set_err(struct parse *ps, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(struct parse *ps, int line, const char *fmt, ...)
{
    if (ps->err && ps->err_line <= line)
        return;
    free(ps->err);
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&ps->err, fmt, ap) < 0)
        abort();
    va_end(ap);
    ps->err_line = line;
}

/* Check the value that just stopped growing. */
static void finalize(struct parse *ps)
{
    if (ps->pending < 0)
        return;
    const struct profile_value *v = &ps->p->v[ps->pending];
    const struct profile_key *k = profile_key_find(v->section, v->key);
    char *why = NULL;
    if (*v->value && profile_value_check(k, v->value, &why) < 0) {
        set_err(ps, ps->pending_line, "%s", why);
        free(why);
    } else if (k->kind == PROFILE_KEY_CPUS) {
        /* "0-3, 8" is stored as the kernel writes it, "0-3,8" */
        char *out = v->value;
        for (const char *c = v->value; *c; c++)
            if (!isspace((unsigned char)*c))
                *out++ = *c;
        *out = '\0';
    }
    ps->pending = -1;
}

static void check_section(struct parse *ps, const char *name)
{
    for (size_t i = 0; sections[i]; i++)
        if (streq(name, sections[i]))
            return;
    const char *near = closest(name, sections);
    if (near) {
        set_err(ps, ps->line, "unknown section [%s]: did you mean [%s]?", name, near);
        return;
    }
    _cleanup_free_ char *want = join_words(sections, " or ");
    set_err(ps, ps->line, "unknown section [%s] (want %s)", name, want);
}

/* What inih will do with this line, as far as we need to know. */
static void scan_line(struct parse *ps, const char *line)
{
    const char *s = line;
    if (ps->line == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
        (unsigned char)s[2] == 0xBF)
        s += 3;
    const char *t = s;
    while (isspace((unsigned char)*t))
        t++;
    ps->indented = t > s && *t;
    bool continuation = ps->indented && ps->key_line > ps->header_line;
    if (ps->err || continuation || *t != '[')
        return;
    const char *close = strchr(t, ']');
    if (!close)
        return; /* inih reports the line */
    finalize(ps);
    ps->header_line = ps->line;
    _cleanup_free_ char *name = xmalloc((size_t)(close - t));
    memcpy(name, t + 1, (size_t)(close - t - 1));
    name[close - t - 1] = '\0';
    if (streq(name, "latency"))
        ps->latency_line = ps->line;
    check_section(ps, name);
}

static char *reader(char *str, int num, void *stream)
{
    struct parse *ps = stream;
    if (!*ps->pos)
        return NULL;
    const char *nl = strchr(ps->pos, '\n');
    size_t n = nl ? (size_t)(nl - ps->pos) : strlen(ps->pos);
    ps->line++;
    if (n > (size_t)num - 1) {
        set_err(ps, ps->line, "line is longer than %d characters", num - 1);
        return NULL;
    }
    memcpy(str, ps->pos, n);
    str[n] = '\0';
    ps->pos += n + (nl != NULL);
    scan_line(ps, str);
    return str;
}

static void unknown_key(struct parse *ps, const char *section, const char *key)
{
    const char *names[ARRAY_SIZE(profile_keys) + 1];
    size_t n = 0;
    const char *elsewhere = NULL;
    for (size_t i = 0; i < profile_nkeys; i++) {
        if (streq(profile_keys[i].section, section))
            names[n++] = profile_keys[i].key;
        else if (streq(profile_keys[i].key, key) && !elsewhere)
            elsewhere = profile_keys[i].section;
    }
    names[n] = NULL;
    const char *near = closest(key, names);
    if (!*key)
        set_err(ps, ps->line, "a line with no key before '='");
    else if (elsewhere)
        set_err(ps, ps->line, "'%s' belongs in [%s], not [%s]", key, elsewhere, section);
    else if (near)
        set_err(ps, ps->line, "unknown key '%s' in [%s]: did you mean '%s'?", key, section, near);
    else {
        _cleanup_free_ char *want = join_words(names, " or ");
        set_err(ps, ps->line, "unknown key '%s' in [%s] (want %s)", key, section, want);
    }
}

static void add_value(struct parse *ps, const char *section, const char *key, const char *value)
{
    if (!*section) {
        const char *home = NULL;
        for (size_t i = 0; i < profile_nkeys && !home; i++)
            if (streq(profile_keys[i].key, key))
                home = profile_keys[i].section;
        if (home)
            set_err(ps, ps->line, "'%s' is outside a section (put it under [%s])", key, home);
        else
            set_err(ps, ps->line, "'%s' is outside a section", key);
        return;
    }
    if (!profile_key_find(section, key)) {
        unknown_key(ps, section, key);
        return;
    }
    struct profile *p = ps->p;
    size_t i;
    for (i = 0; i < p->n; i++)
        if (streq(p->v[i].section, section) && streq(p->v[i].key, key))
            break;
    if (i == p->n) {
        p->v = grow_array(p->v, sizeof(*p->v), p->n, &ps->cap);
        p->v[p->n++] = (struct profile_value){xstrdup(section), xstrdup(key), NULL, NULL};
    }
    free(p->v[i].value);
    free(p->v[i].origin);
    p->v[i].value = xstrdup(value);
    p->v[i].origin = xasprintf("%s:%d", ps->origin, ps->line);
    ps->pending = (long)i;
    ps->pending_line = ps->line;
}

/* An indented line after a key: inih hands it over as more of that key. */
static void continue_value(struct parse *ps, const char *key, const char *line)
{
    if (ps->pending < 0)
        return; /* the key it continues was refused */
    /* inih (r55) leaves inline comments on continuation lines */
    _cleanup_free_ char *more = xstrdup(line);
    for (char *c = more; *c; c++) {
        if (c > more && *c == ';' && isspace((unsigned char)c[-1])) {
            *c = '\0';
            strip_trailing(more);
            break;
        }
    }
    struct profile_value *v = &ps->p->v[ps->pending];
    const struct profile_key *k = profile_key_find(v->section, v->key);
    if (more[0] == '[' || strchr(more, '=')) {
        set_err(ps, ps->line,
                "indented line is read as more of '%s' (line %d): remove the indentation", key,
                ps->pending_line);
        return;
    }
    if (!k->list && k->kind != PROFILE_KEY_TEXT) {
        set_err(ps, ps->line,
                "'%s' takes one value, and this indented line would continue it (line %d): "
                "remove the indentation or join the lines",
                key, ps->pending_line);
        return;
    }
    /* "a," + "b" and "a" + "b" both give "a, b" */
    size_t n = strlen(v->value);
    const char *sep = !k->list ? " " : n && v->value[n - 1] == ',' ? " " : ", ";
    char *joined = n ? xasprintf("%s%s%s", v->value, sep, more) : xstrdup(more);
    free(v->value);
    v->value = joined;
}

static int on_entry(void *user, const char *section, const char *key, const char *value)
{
    struct parse *ps = user;
    if (ps->err)
        return 1;
    if (ps->indented && ps->key_line > ps->header_line) {
        continue_value(ps, key, value);
        return 1;
    }
    finalize(ps);
    ps->key_line = ps->line;
    if (!ps->err)
        add_value(ps, section, key, value);
    return 1; /* errors are ours: inih's own are syntax only */
}

/* Describe the line inih refused. */
static char *syntax_error(const char *text, int line)
{
    const char *s = text;
    for (int i = 1; i < line && s; i++) {
        s = strchr(s, '\n');
        if (s)
            s++;
    }
    if (!s)
        return xstrdup("syntax error");
    size_t n = strcspn(s, "\n");
    _cleanup_free_ char *t = trimmed(s, n);
    if (t[0] == '[')
        return xstrdup("section header without a closing ']'");
    if (strlen(t) > 40)
        strcpy(t + 37, "...");
    return xasprintf("'%s' is not 'key = value', a [section] or a comment", t);
}

struct file {
    struct profile *p; /* own values, [profile] ones taken out */
    char **inc;
    size_t ninc;
    char *inc_origin; /* FILE:LINE of the include line */
    int latency_line;
};

static void file_free(struct file *f)
{
    profile_free(f->p);
    profile_names_free(f->inc, f->ninc);
    free(f->inc_origin);
    *f = (struct file){0};
}

/* Move [profile] description and include out of the values. */
static void take_profile_keys(struct file *f)
{
    struct profile *p = f->p;
    size_t out = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct profile_value *v = &p->v[i];
        if (!streq(v->section, "profile")) {
            p->v[out++] = *v;
            continue;
        }
        if (streq(v->key, "description")) {
            free(p->description);
            p->description = *v->value ? TAKE_PTR(v->value) : NULL;
        } else if (*v->value) {
            /* finalize() checked it: the split cannot fail */
            if (profile_split_list(v->value, &f->inc, &f->ninc) < 0)
                abort();
            f->inc_origin = TAKE_PTR(v->origin);
        }
        free(v->section);
        free(v->key);
        free(v->value);
        free(v->origin);
    }
    p->n = out;
}

static int parse_file(const char *text, const char *origin, struct file *ret, char **ret_err)
{
    struct parse ps = {.origin = origin, .pos = text, .pending = -1};
    ps.p = xcalloc(1, sizeof(*ps.p));
    int r = ini_parse_stream(reader, &ps, on_entry, &ps);
    finalize(&ps);
    if (r > 0 && (!ps.err || r < ps.err_line)) {
        free(ps.err);
        ps.err = syntax_error(text, r);
        ps.err_line = r;
    } else if (r < 0 && !ps.err) {
        ps.err = xstrdup("out of memory");
    }
    if (ps.err) {
        *ret_err = xasprintf("%s:%d: %s", origin, ps.err_line, ps.err);
        free(ps.err);
        profile_free(ps.p);
        return -EINVAL;
    }
    ps.p->name = xstrdup(origin);
    ps.p->origin = xstrdup(origin);
    struct file f = {.p = ps.p, .latency_line = ps.latency_line};
    take_profile_keys(&f);
    *ret = f;
    return 0;
}

int profile_parse_text(const char *text, const char *origin, struct profile **ret,
                       char ***ret_includes, size_t *ret_nincludes, char **ret_err)
{
    struct file f;
    int r = parse_file(text, origin, &f, ret_err);
    if (r < 0)
        return r;
    if (ret_includes) {
        *ret_includes = TAKE_PTR(f.inc);
        *ret_nincludes = f.ninc;
        f.ninc = 0;
    }
    *ret = TAKE_PTR(f.p);
    file_free(&f);
    return 0;
}

/* ---- files and built-ins ---------------------------------------------- */

/* 0 with the text, -ENOENT when there is no such file (ret_err unset),
 * another -errno with ret_err. */
static int read_profile_file(const char *path, char **ret, char **ret_err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return -ENOENT;
        *ret_err = xasprintf("cannot read %s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        *ret_err = xasprintf("cannot read %s: %s", path, strerror(e));
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        *ret_err = xasprintf("%s is not a regular file", path);
        return -EINVAL;
    }
    /* read up to one byte past the limit: the file may grow under us */
    size_t cap = st.st_size < PROFILE_MAX_BYTES ? (size_t)st.st_size + 2 : PROFILE_MAX_BYTES + 2;
    _cleanup_free_ char *buf = xmalloc(cap);
    size_t n = 0;
    while (n <= PROFILE_MAX_BYTES) {
        if (n + 1 >= cap) {
            cap = cap * 2 < PROFILE_MAX_BYTES + 2 ? cap * 2 : PROFILE_MAX_BYTES + 2;
            buf = xrealloc(buf, cap);
        }
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            *ret_err = xasprintf("cannot read %s: %s", path, strerror(e));
            return -e;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    if (n > PROFILE_MAX_BYTES) {
        *ret_err = xasprintf("%s is larger than 1 MiB: not a profile", path);
        return -EFBIG;
    }
    const char *nul = memchr(buf, '\0', n);
    if (nul) {
        *ret_err = xasprintf("%s has a NUL byte at offset %zu: not a text file", path,
                             (size_t)(nul - buf));
        return -EINVAL;
    }
    buf[n] = '\0';
    *ret = TAKE_PTR(buf);
    return 0;
}

static char *user_path(const char *confdir, const char *name)
{
    return xasprintf("%s/profiles.d/%s.conf", confdir, name);
}

/* ---- resolution ------------------------------------------------------- */

struct node {
    const char *name; /* borrowed from the file that includes it */
    bool builtin;
};

struct resolve {
    const char *confdir;
    struct node stack[PROFILE_MAX_DEPTH + 2];
    size_t depth;
    struct profile *acc;
    size_t cap;
    char *latency_origin; /* the last [latency] header applied */
    char *err;
    bool missing; /* the named profile itself does not exist */
};

static void chain(const struct resolve *rs, size_t from, const struct node *last, struct strbuf *b)
{
    for (size_t i = from; i <= rs->depth; i++) {
        const struct node *n = i < rs->depth ? &rs->stack[i] : last;
        bool shadowed = false;
        for (size_t j = 0; j < rs->depth && n->builtin; j++)
            shadowed |= !rs->stack[j].builtin && streq(rs->stack[j].name, n->name);
        strbuf_appendf(b, "%s%s%s", i > from ? " -> " : "", n->name, shadowed ? " (built-in)" : "");
    }
}

static void acc_apply(struct resolve *rs, const struct profile_value *v)
{
    struct profile *p = rs->acc;
    size_t i;
    for (i = 0; i < p->n; i++)
        if (streq(p->v[i].section, v->section) && streq(p->v[i].key, v->key))
            break;
    if (!*v->value) { /* removal */
        if (i == p->n)
            return;
        struct profile_value *gone = &p->v[i];
        free(gone->section);
        free(gone->key);
        free(gone->value);
        free(gone->origin);
        memmove(gone, gone + 1, (p->n - i - 1) * sizeof(*gone));
        p->n--;
        return;
    }
    if (i == p->n) {
        p->v = grow_array(p->v, sizeof(*p->v), p->n, &rs->cap);
        p->v[p->n++] = (struct profile_value){xstrdup(v->section), xstrdup(v->key), NULL, NULL};
    }
    free(p->v[i].value);
    free(p->v[i].origin);
    p->v[i].value = xstrdup(v->value);
    p->v[i].origin = xstrdup(v->origin);
}

/* Find NAME's text: the user file unless BUILTIN_ONLY, else the built-in. */
static int find_source(struct resolve *rs, const char *name, bool builtin_only, const char *from,
                       char **ret_text, char **ret_origin, bool *ret_builtin)
{
    _cleanup_free_ char *path = user_path(rs->confdir, name);
    if (!builtin_only) {
        char *err = NULL;
        int r = read_profile_file(path, ret_text, &err);
        if (r == 0) {
            *ret_origin = TAKE_PTR(path);
            *ret_builtin = false;
            return 0;
        }
        if (r != -ENOENT) {
            rs->err = from ? xasprintf("%s: %s", from, err) : TAKE_PTR(err);
            free(err);
            return r;
        }
    }
    const char *text = profile_builtin_text(name);
    if (text) {
        *ret_text = xstrdup(text);
        *ret_origin = xasprintf("built-in %s", name);
        *ret_builtin = true;
        return 0;
    }
    if (builtin_only)
        rs->err = xasprintf("%s: there is no built-in profile '%s' (an include of a profile's "
                            "own name means the built-in it shadows)",
                            from, name);
    else
        rs->err = xasprintf("%s%sno profile '%s': not built in, and no %s", from ? from : "",
                            from ? ": " : "", name, path);
    rs->missing = !from;
    return -ENOENT;
}

static int resolve_one(struct resolve *rs, const char *name, bool builtin_only, const char *from);

static int resolve_includes(struct resolve *rs, const struct file *f, const char *name,
                            bool builtin)
{
    for (size_t i = 0; i < f->ninc; i++) {
        /* a built-in means built-ins; a user file's own name means the built-in */
        bool child_builtin = builtin || streq(f->inc[i], name);
        int r = resolve_one(rs, f->inc[i], child_builtin, f->inc_origin);
        if (r < 0)
            return r;
    }
    return 0;
}

static int resolve_one(struct resolve *rs, const char *name, bool builtin_only, const char *from)
{
    _cleanup_free_ char *text = NULL, *origin = NULL;
    bool builtin;
    int r = find_source(rs, name, builtin_only, from, &text, &origin, &builtin);
    if (r < 0)
        return r;
    struct node me = {name, builtin};
    for (size_t i = 0; i < rs->depth; i++) {
        if (streq(rs->stack[i].name, name) && rs->stack[i].builtin == builtin) {
            struct strbuf b = {0};
            chain(rs, i, &me, &b);
            rs->err = xasprintf("%s: include cycle %s", from, strbuf_str(&b));
            strbuf_free(&b);
            return -ELOOP;
        }
    }
    if (rs->depth > PROFILE_MAX_DEPTH) {
        struct strbuf b = {0};
        chain(rs, 0, &me, &b);
        rs->err = xasprintf("%s: includes nest deeper than %d levels (%s)", from, PROFILE_MAX_DEPTH,
                            strbuf_str(&b));
        strbuf_free(&b);
        return -ELOOP;
    }
    struct file f;
    r = parse_file(text, origin, &f, &rs->err);
    if (r < 0)
        return r;
    rs->stack[rs->depth++] = me;
    r = resolve_includes(rs, &f, name, builtin);
    rs->depth--;
    if (r >= 0) {
        for (size_t i = 0; i < f.p->n; i++)
            acc_apply(rs, &f.p->v[i]);
        if (f.latency_line) {
            free(rs->latency_origin);
            rs->latency_origin = xasprintf("%s:%d", origin, f.latency_line);
        }
        if (rs->depth == 0) {
            rs->acc->origin = TAKE_PTR(origin);
            rs->acc->description = TAKE_PTR(f.p->description);
        }
    }
    file_free(&f);
    return r;
}

/* min_freq above max_freq, where the two can be compared without the machine. */
static int check_freq_order(const struct profile *p, char **ret_err)
{
    const struct profile_value *lo = profile_get(p, "cpufreq", "min_freq");
    const struct profile_value *hi = profile_get(p, "cpufreq", "max_freq");
    struct profile_freq a, b;
    if (!lo || !hi || profile_parse_freq(lo->value, &a) < 0 ||
        profile_parse_freq(hi->value, &b) < 0)
        return 0;
    bool bad = (a.kind == PROFILE_FREQ_MAX && b.kind != PROFILE_FREQ_MAX) ||
               (b.kind == PROFILE_FREQ_MIN && a.kind != PROFILE_FREQ_MIN) ||
               (a.kind == b.kind && a.value > b.value);
    if (!bad)
        return 0;
    *ret_err = xasprintf("%s: min_freq %s is above max_freq %s (set at %s)", lo->origin, lo->value,
                         hi->value, hi->origin);
    return -EINVAL;
}

static int check_latency_section(const struct resolve *rs, char **ret_err)
{
    if (!profile_has_section(rs->acc, "latency"))
        return 0;
    if (!profile_get(rs->acc, "latency", "workload")) {
        *ret_err = xasprintf("%s: [latency] needs workload = cgroup:PATH, process:NAME or port:N",
                             rs->latency_origin ? rs->latency_origin : rs->acc->origin);
        return -EINVAL;
    }
    if (!profile_get(rs->acc, "latency", "latency_us")) {
        *ret_err = xasprintf("%s: [latency] needs latency_us = the limit in µs to hold while "
                             "the workload is busy",
                             rs->latency_origin ? rs->latency_origin : rs->acc->origin);
        return -EINVAL;
    }
    return 0;
}

/* "did you mean 'latency'?" for a name that is not there. */
static char *name_hint(const char *name, const char *confdir)
{
    size_t n = strlen(name);
    if (n > 5 && streq(name + n - 5, ".conf")) {
        _cleanup_free_ char *stem = strndup(name, n - 5);
        if (stem && profile_name_ok(stem))
            return xasprintf(" (did you mean '%s'?)", stem);
    }
    char **names;
    size_t nn;
    if (profile_list(confdir, &names, &nn) < 0)
        return xstrdup("");
    char *hint = NULL;
    names = xrealloc(names, (nn + 1) * sizeof(*names));
    names[nn] = NULL;
    const char *near = closest(name, (const char *const *)names);
    hint = near ? xasprintf(" (did you mean '%s'?)", near) : xstrdup("");
    profile_names_free(names, nn);
    return hint;
}

int profile_load(const char *name, const char *confdir, struct profile **ret, char **ret_err)
{
    if (!confdir)
        confdir = PROFILE_CONFDIR_DEFAULT;
    if (!profile_name_ok(name)) {
        _cleanup_free_ char *hint = name_hint(name ? name : "", confdir);
        *ret_err = xasprintf("'%s' is not a profile name (want a-z, 0-9, '_', '.', '-', at most "
                             "64, no '/' or '..')%s",
                             name ? name : "", hint);
        return -EINVAL;
    }
    struct resolve rs = {.confdir = confdir};
    rs.acc = xcalloc(1, sizeof(*rs.acc));
    rs.acc->name = xstrdup(name);
    int r = resolve_one(&rs, name, false, NULL);
    if (r == -ENOENT && rs.missing) {
        _cleanup_free_ char *hint = name_hint(name, confdir);
        char *e = xasprintf("%s%s", rs.err, hint);
        free(rs.err);
        rs.err = e;
    }
    if (r >= 0)
        r = check_latency_section(&rs, &rs.err);
    if (r >= 0)
        r = check_freq_order(rs.acc, &rs.err);
    free(rs.latency_origin);
    if (r < 0) {
        profile_free(rs.acc);
        *ret_err = rs.err;
        return r;
    }
    *ret = rs.acc;
    return 0;
}

/* ---- access ----------------------------------------------------------- */

void profile_free(struct profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].section);
        free(p->v[i].key);
        free(p->v[i].value);
        free(p->v[i].origin);
    }
    free(p->v);
    free(p->name);
    free(p->description);
    free(p->origin);
    free(p);
}

const struct profile_value *profile_get(const struct profile *p, const char *section,
                                        const char *key)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (streq(p->v[i].section, section) && streq(p->v[i].key, key))
            return &p->v[i];
    return NULL;
}

bool profile_has_section(const struct profile *p, const char *section)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (streq(p->v[i].section, section))
            return true;
    return false;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int profile_list(const char *confdir, char ***ret, size_t *ret_n)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; profile_builtin_names[i]; i++) {
        v = grow_array(v, sizeof(*v), n, &cap);
        v[n++] = xstrdup(profile_builtin_names[i]);
    }
    _cleanup_free_ char *dir =
        xasprintf("%s/profiles.d", confdir ? confdir : PROFILE_CONFDIR_DEFAULT);
    _cleanup_closedir_ DIR *d = opendir(dir);
    if (!d && errno != ENOENT && errno != ENOTDIR) {
        int e = errno;
        profile_names_free(v, n);
        return -e;
    }
    for (struct dirent *de; d && (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (de->d_type == DT_DIR || len <= 5 || !streq(de->d_name + len - 5, ".conf"))
            continue;
        char *stem = strndup(de->d_name, len - 5);
        if (!stem || !profile_name_ok(stem)) {
            free(stem);
            continue;
        }
        v = grow_array(v, sizeof(*v), n, &cap);
        v[n++] = stem;
    }
    qsort(v, n, sizeof(*v), cmp_names);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out && streq(v[out - 1], v[i]))
            free(v[i]);
        else
            v[out++] = v[i];
    }
    *ret = v;
    *ret_n = out;
    return 0;
}
