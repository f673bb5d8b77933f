/* Tuning profiles: INI files (inih) naming knob values, with includes.
 *
 * Built-in profiles (performance, latency, balanced, powersave) are
 * compiled in; user profiles are CONFDIR/profiles.d/NAME.conf (CONFDIR is
 * /etc/watt, or --config-dir / $WATT_CONFIG_DIR). A user profile with a
 * built-in's name shadows it; inside it, "include = NAME" of its own name
 * means the built-in. A built-in's includes always mean built-ins, so a
 * user file never changes what another built-in does. Names are
 * [a-z0-9][a-z0-9_.-]{0,63} without "..".
 *
 *   [profile]
 *   description = what it is for, one line
 *   include = balanced, my-base      ; applied in order, then this file
 *
 *   [cpufreq]  governor, epp, boost, min_freq, max_freq, cpus
 *   [cpuidle]  max_latency_us, cpus
 *   [pm_qos]   resume_latency_us, cpus
 *   [devices]  runtime_pm, autosuspend_delay_ms, sata_link_pm, pcie_aspm
 *   [kernel]   nmi_watchdog, dirty_writeback_centisecs
 *   [gpu]      power_limit_w, power_limit_pct, perf_level, gpus
 *   [latency]  workload, latency_us, cpus, busy_cpu_pct, busy_connections,
 *              busy_after_s, idle_after_s        (run by the agent)
 *
 * The later value of a key wins (a file over what it includes, and a
 * later line over an earlier one in the same file); an empty value
 * ("governor =") removes an inherited one. The key table (profile_keys)
 * checks syntax and ranges at load time; whether a value exists on this
 * machine (a governor, a frequency) is the plan's job. A resolved profile
 * with any [latency] key needs both workload and latency_us.
 *
 * inih's rules, as users meet them: comments start a line with '#' or
 * ';'; an inline comment is " ;" (a ';' after whitespace; '#' is not one);
 * an indented line right after a key continues that key's value (list
 * keys join it with ", ", description with " "); lines are at most 199
 * characters. A file is at most PROFILE_MAX_BYTES and has no NUL byte. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define PROFILE_CONFDIR_DEFAULT "/etc/watt"
#define PROFILE_MAX_DEPTH       8         /* include nesting below the named profile */
#define PROFILE_MAX_BYTES       (1 << 20) /* a profile file larger than this is refused */

struct profile_value {
    char *section; /* "cpufreq"; owned */
    char *key;     /* "governor"; owned */
    char *value;   /* "performance", trimmed (a CPUS list without blanks); owned */
    char *origin;  /* "/etc/watt/profiles.d/web.conf:12" or "built-in balanced:7"; owned */
};

struct profile {
    char *name;        /* owned */
    char *description; /* the named file's own; owned; NULL when none */
    char *origin;      /* file, or "built-in NAME"; owned */
    /* Resolved settings, includes applied, one per (section, key), in
     * first-set order. */
    struct profile_value *v;
    size_t n;
};

enum profile_key_kind {
    PROFILE_KEY_WORDS,    /* one of words[] (a comma-separated list of them
                           * when list is true: the first the machine has wins) */
    PROFILE_KEY_INT,      /* integer in [min, max] */
    PROFILE_KEY_REAL,     /* number in [min, max] */
    PROFILE_KEY_FREQ,     /* "min", "max", N kHz, "N MHz", "N GHz", or "N%" of cpuinfo_max_freq */
    PROFILE_KEY_LATENCY,  /* µs in [min, max], or one of words[]: "none" (no
                           * constraint), "first" (the shallowest non-POLL
                           * state's exit latency), "n/a" (no latency at all) */
    PROFILE_KEY_CPUS,     /* a CPU list "0-3,8" or "all" */
    PROFILE_KEY_WORKLOAD, /* "cgroup:PATH", "process:NAME" or "port:N" */
    PROFILE_KEY_TEXT,     /* free text (description, include) */
    PROFILE_KEY_BOOL,     /* parse_bool(): yes/no, true/false, on/off, 1/0 */
    PROFILE_KEY_GPUS,     /* "all", or GPUs: "card0", "nvml1", "0000:03:00.0" */
};

struct profile_key {
    const char *section, *key;
    enum profile_key_kind kind;
    const char *const *words; /* NULL-terminated, for WORDS and LATENCY */
    bool list;
    double min, max;
    const char *help; /* one line, for docs and --help */
    const char *file; /* the kernel file it writes (NULL when none), for docs */
};

extern const struct profile_key profile_keys[];
extern const size_t profile_nkeys;
const struct profile_key *profile_key_find(const char *section, const char *key);
/* Check one value against its key; ret_err one sentence without origin. */
int profile_value_check(const struct profile_key *k, const char *value, char **ret_err);

/* Load NAME (user file or built-in) with its includes; confdir NULL is
 * PROFILE_CONFDIR_DEFAULT. Errors name file and line:
 * "web.conf:7: unknown key 'govenor' in [cpufreq]: did you mean
 * 'governor'?", "web.conf:9: governor 'fast' is not a known value (want
 * performance, powersave, ...)", include cycles ("b.conf:2: include cycle
 * a -> b -> a") and depth (-ELOOP), a missing profile ("no profile 'x':
 * not built in, and no /etc/watt/profiles.d/x.conf", -ENOENT), a bad
 * name, value or [latency] section (-EINVAL), a file over 1 MiB (-EFBIG),
 * an unreadable one (its -errno). */
int profile_load(const char *name, const char *confdir, struct profile **ret, char **ret_err);
/* One file's text without resolving includes (fuzz target): its own
 * values in file order (a value "" is a removal), includes listed in
 * *ret_includes (owned; ret_includes may be NULL). (*ret)->name and
 * ->origin are ORIGIN; errors start "ORIGIN:LINE: ". -EINVAL. */
int profile_parse_text(const char *text, const char *origin, struct profile **ret,
                       char ***ret_includes, size_t *ret_nincludes, char **ret_err);
void profile_free(struct profile *p);

/* The value of (section, key), or NULL when unset. */
const struct profile_value *profile_get(const struct profile *p, const char *section,
                                        const char *key);
bool profile_has_section(const struct profile *p, const char *section);

/* Built-ins. */
extern const char *const profile_builtin_names[];   /* NULL-terminated */
const char *profile_builtin_text(const char *name); /* NULL when not built in */

/* Every profile name, built-ins and user files together, sorted, no
 * duplicates (a user file shadowing a built-in is listed once); files in
 * profiles.d whose stem is not a valid name are left out. A missing
 * profiles.d gives the built-ins; another error is -errno. Free *ret with
 * profile_names_free(). */
int profile_list(const char *confdir, char ***ret, size_t *ret_n);
void profile_names_free(char **v, size_t n);
/* Whether NAME is a valid profile name. */
bool profile_name_ok(const char *name);

/* Typed views of values that passed profile_value_check(), for the plan
 * and the guard. Each returns 0, or -EINVAL on text the key would refuse;
 * ret is set only on success. */
enum profile_freq_kind { PROFILE_FREQ_MIN, PROFILE_FREQ_MAX, PROFILE_FREQ_KHZ, PROFILE_FREQ_PCT };
struct profile_freq {
    enum profile_freq_kind kind;
    double value; /* kHz (an integer) for KHZ, percent of cpuinfo_max_freq for PCT */
};
int profile_parse_freq(const char *value, struct profile_freq *ret);

enum profile_latency_kind {
    PROFILE_LATENCY_US,    /* us holds the bound */
    PROFILE_LATENCY_NONE,  /* no constraint: every state enabled, pm_qos "0" */
    PROFILE_LATENCY_FIRST, /* the shallowest non-POLL state's exit latency */
    PROFILE_LATENCY_NA,    /* no latency at all: pm_qos "n/a" */
};
struct profile_latency {
    enum profile_latency_kind kind;
    long long us;
};
int profile_parse_latency(const char *value, struct profile_latency *ret);

enum profile_workload_kind {
    PROFILE_WORKLOAD_CGROUP,  /* arg: a path below the cgroup2 mount, "/system.slice/x" */
    PROFILE_WORKLOAD_PROCESS, /* arg: a comm name, 1..15 bytes */
    PROFILE_WORKLOAD_PORT,    /* port: a listening TCP port */
};
struct profile_workload {
    enum profile_workload_kind kind;
    const char *arg; /* points into the value given; NULL for PORT */
    unsigned port;
};
int profile_parse_workload(const char *value, struct profile_workload *ret);

/* A CPUS value: 1 for "all" (ret untouched), 0 with *ret set (owned) for
 * a list; blanks after commas are allowed ("0-3, 8"). */
struct cpuset;
int profile_parse_cpus(const char *value, struct cpuset *ret);

/* A GPUS value: 1 for "all" (ret untouched), 0 with the ids (trimmed,
 * each once: "cardN", "nvmlN" or a PCI address "0000:03:00.0") in *ret
 * (free with profile_names_free()), -EINVAL otherwise. */
int profile_parse_gpus(const char *value, char ***ret, size_t *ret_n);

/* Split a comma-separated list ("schedutil, powersave") into trimmed
 * words; an empty item is -EINVAL. Free with profile_names_free(). */
int profile_split_list(const char *value, char ***ret, size_t *ret_n);
