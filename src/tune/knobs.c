/* The knob planners: a profile's values turned into the files they mean
 * on this machine (Documentation/admin-guide/pm/cpufreq.rst, cpuidle.rst,
 * ABI/testing/sysfs-devices-power, sysfs-class-scsi_host, sysctl/vm.rst,
 * sysctl/kernel.rst). Each adds a change per file whose value differs. */
#include "tune/knobs.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/util.h"
#include "tune/plan.h"
#include "tune/profile.h"

#define CPU_DIR     "devices/system/cpu"
#define POLICY_DIR  CPU_DIR "/cpufreq"
#define ASPM_POLICY "module/pcie_aspm/parameters/policy"

/* ---------------------------------------------------------------- helpers */

int knobs_bool(const char *v, bool *ret)
{
    return parse_bool(v, ret);
}

/* Does the space-separated list OFFERED (brackets allowed) hold WORD? */
static bool offered_has(const char *offered, const char *word, size_t len)
{
    const char *s = offered;
    while (s && *s) {
        while (*s == ' ' || *s == '[' || *s == ']' || *s == '\n' || *s == '\t')
            s++;
        size_t n = strcspn(s, " []\n\t");
        if (n && n == len && memcmp(s, word, len) == 0)
            return true;
        s += n;
    }
    return false;
}

char *knobs_first_offered(const char *list, const char *offered)
{
    const char *s = list;
    while (s && *s) {
        while (*s == ',' || isspace((unsigned char)*s))
            s++;
        size_t n = strcspn(s, ", \t\n");
        if (n && offered_has(offered, s, n))
            return strndup(s, n) ?: xstrdup("");
        s += n;
    }
    return NULL;
}

int knobs_freq_khz(const char *v, uint64_t cmin, uint64_t cmax, uint64_t *ret)
{
    /* The profile's own parser, so that what loads is what is planned. */
    struct profile_freq f;
    int r = v ? profile_parse_freq(v, &f) : -EINVAL;
    if (r < 0)
        return r;
    switch (f.kind) {
    case PROFILE_FREQ_MIN:
        *ret = cmin;
        break;
    case PROFILE_FREQ_MAX:
        *ret = cmax;
        break;
    case PROFILE_FREQ_PCT:
        *ret = (uint64_t)llround((double)cmax * f.value / 100.0);
        break;
    default:
        *ret = (uint64_t)f.value;
        break;
    }
    return 0;
}

/* A value of the profile, NULL when unset or emptied ("governor ="). */
static const struct profile_value *get(const struct knob_ctx *c, const char *section,
                                       const char *key)
{
    const struct profile_value *v = profile_get(c->p, section, key);
    return v && v->value && *v->value ? v : NULL;
}

static int fail(struct knob_ctx *c, char *msg)
{
    free(c->err);
    c->err = msg;
    return -EINVAL;
}

/* Can the file be written at all? Opening for writing runs no store()
 * and costs nothing, and it finds what no write could change: a sysctl
 * the kernel made 0444 (nmi_watchdog without a hard-lockup detector, as
 * in most VMs), a read-only mount. Such a knob is missing here: a note.
 * Without root, EACCES is a permission problem, so the change is planned
 * and the apply fails naming it. */
bool knobs_writable(struct knob_ctx *c, enum host_dir d, const char *path, const char *knob,
                    const char *origin)
{
    /* O_NONBLOCK: a FIFO in a recorded tree must not hang a dry run */
    int fd = host_open_fd(c->h, d, path, O_WRONLY | O_NOCTTY | O_NONBLOCK);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    if (fd != -EROFS && !(fd == -EACCES && geteuid() == 0))
        return true;
    _cleanup_free_ char *kpath = host_kernel_path(d, path);
    tune_plan_note(c->plan, "%s: skipped, %s is read-only on this machine (%s) (%s)", knob, kpath,
                   errno_name(-fd), origin);
    return false;
}

/* Plan NEW for one file unless it holds it already. -ENOENT when the file
 * is missing (the caller notes it); other read errors are noted here. */
static int plan_file(struct knob_ctx *c, enum host_dir d, const char *path, const char *new_value,
                     const char *knob, const char *why, const char *origin)
{
    _cleanup_free_ char *raw = NULL;
    int r = host_read_str(c->h, d, path, &raw);
    if (r == -ENOENT || r == -ENOTDIR)
        return -ENOENT;
    if (r < 0) {
        _cleanup_free_ char *kpath = host_kernel_path(d, path);
        tune_plan_note(c->plan, "%s: cannot read %s: %s; left as it is (%s)", knob, kpath,
                       strerror(-r), origin);
        return 0;
    }
    _cleanup_free_ char *cur = tune_value_active(raw);
    if (streq(cur, new_value)) {
        tune_plan_cover(c->plan, d, path, NULL);
        return 0;
    }
    if (!knobs_writable(c, d, path, knob, origin))
        return 0;
    return tune_plan_add(c->plan, d, path, cur, new_value, knob, why, origin);
}

static void note_missing(struct knob_ctx *c, const struct profile_value *v, const char *knob,
                         const char *what)
{
    tune_plan_note(c->plan, "%s: skipped, %s (%s)", knob, what, v->origin);
}

int knobs_begin(struct knob_ctx *c)
{
    _cleanup_free_ char *online = NULL;
    int r = host_read_str(c->h, HOST_SYS, CPU_DIR "/online", &online);
    if (r < 0 || cpuset_parse(online, &c->online) < 0)
        c->online = (struct cpuset){0}; /* no CPU knobs can apply */
    return 0;
}

void knobs_end(struct knob_ctx *c)
{
    cpuset_free(&c->online);
}

/* The online CPUs SECTION's "cpus" names: every online CPU without it. */
static int section_cpus(struct knob_ctx *c, const char *section, struct cpuset *ret)
{
    const struct profile_value *v = get(c, section, "cpus");
    struct cpuset want = {0}, set = {0};
    if (v && !streq(v->value, "all") && cpuset_parse(v->value, &want) < 0)
        return fail(c, xasprintf("%s: %s.cpus '%s' is not a CPU list (want \"0-3,8\" or \"all\")",
                                 v->origin, section, v->value));
    bool all = !v || streq(v->value, "all");
    unsigned missing = 0;
    CPUSET_FOREACH (cpu, all ? &c->online : &want) {
        if (cpuset_has(&c->online, (unsigned)cpu))
            cpuset_add(&set, (unsigned)cpu);
        else
            missing++;
    }
    if (missing) {
        _cleanup_free_ char *online = cpuset_format(&c->online);
        tune_plan_note(c->plan,
                       "%s.cpus: %u of the CPUs listed are not online here (online: %s) "
                       "and are left alone (%s)",
                       section, missing, online, v->origin);
    }
    cpuset_free(&want);
    *ret = set;
    return 0;
}

/* ---------------------------------------------------------------- cpufreq */

struct policy {
    char *dir;       /* "devices/system/cpu/cpufreq/policy3" */
    char *governors; /* scaling_available_governors */
    char *governor;  /* scaling_governor now */
    char *driver;    /* scaling_driver */
    char *epps;      /* energy_performance_available_preferences; NULL without EPP */
    uint64_t cmin, cmax, smin, smax;
    char *new_governor; /* planned, NULL when unchanged; owned */
};

static void policies_free(struct policy *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].dir);
        free(v[i].governors);
        free(v[i].governor);
        free(v[i].driver);
        free(v[i].epps);
        free(v[i].new_governor);
    }
    free(v);
}

/* Does the policy cover a CPU of SET? affected_cpus lists its online CPUs
 * ("0 32": space-separated, not a range list). */
static bool policy_selected(struct knob_ctx *c, const char *dir, const struct cpuset *set)
{
    _cleanup_free_ char *cpus = NULL;
    if (host_read_strf(c->h, HOST_SYS, &cpus, "%s/affected_cpus", dir) < 0 &&
        host_read_strf(c->h, HOST_SYS, &cpus, "%s/related_cpus", dir) < 0)
        return false;
    for (char *s = cpus; *s;) {
        char *end;
        unsigned long cpu = strtoul(s, &end, 10);
        if (end == s)
            break;
        if (cpu <= CPUSET_MAX_CPU && cpuset_has(set, (unsigned)cpu))
            return true;
        s = end;
        while (*s == ' ' || *s == ',')
            s++;
    }
    return false;
}

static int read_policy(struct knob_ctx *c, const char *name, struct policy *p)
{
    *p = (struct policy){.dir = xasprintf(POLICY_DIR "/%s", name)};
    struct host *h = c->h;
    host_read_strf(h, HOST_SYS, &p->governors, "%s/scaling_available_governors", p->dir);
    host_read_strf(h, HOST_SYS, &p->governor, "%s/scaling_governor", p->dir);
    host_read_strf(h, HOST_SYS, &p->driver, "%s/scaling_driver", p->dir);
    host_read_strf(h, HOST_SYS, &p->epps, "%s/energy_performance_available_preferences", p->dir);
    host_read_u64f(h, HOST_SYS, &p->cmin, "%s/cpuinfo_min_freq", p->dir);
    host_read_u64f(h, HOST_SYS, &p->cmax, "%s/cpuinfo_max_freq", p->dir);
    host_read_u64f(h, HOST_SYS, &p->smin, "%s/scaling_min_freq", p->dir);
    host_read_u64f(h, HOST_SYS, &p->smax, "%s/scaling_max_freq", p->dir);
    return 0;
}

/* The policies covering a CPU of SET, in natural order. */
static size_t list_policies(struct knob_ctx *c, const struct cpuset *set, struct policy **ret)
{
    char **names = NULL;
    size_t n = 0, np = 0;
    *ret = NULL;
    if (host_list(c->h, HOST_SYS, POLICY_DIR, &names, &n) < 0)
        return 0;
    struct policy *v = xcalloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        unsigned id;
        char tail;
        if (sscanf(names[i], "policy%u%c", &id, &tail) != 1)
            continue;
        _cleanup_free_ char *dir = xasprintf(POLICY_DIR "/%s", names[i]);
        if (!policy_selected(c, dir, set))
            continue;
        read_policy(c, names[i], &v[np++]);
    }
    host_free_list(names, n);
    *ret = v;
    return np;
}

static const char *governor_why(const char *g)
{
    static const char *const why[][2] = {
        {"performance", "performance governor: the highest frequency at once, no ramp-up delay"},
        {"powersave", "powersave governor: the lowest frequency the load allows (dynamic with "
                      "intel_pstate/amd-pstate)"},
        {"schedutil", "schedutil governor: frequency follows the scheduler's utilisation"},
        {"ondemand", "ondemand governor: frequency jumps up under load, steps down when idle"},
        {"conservative", "conservative governor: frequency moves in small steps"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(why); i++)
        if (streq(why[i][0], g))
            return why[i][1];
    return "the profile's governor";
}

static int plan_governor(struct knob_ctx *c, struct policy *v, size_t n)
{
    const struct profile_value *pv = get(c, "cpufreq", "governor");
    for (size_t i = 0; pv && i < n; i++) {
        _cleanup_free_ char *g = knobs_first_offered(pv->value, v[i].governors);
        if (!g)
            return fail(c, xasprintf("%s: cpufreq.governor: none of '%s' is offered by %s (it "
                                     "offers: %s)",
                                     pv->origin, pv->value, strrchr(v[i].dir, '/') + 1,
                                     v[i].governors ? v[i].governors : "nothing"));
        _cleanup_free_ char *path = xasprintf("%s/scaling_governor", v[i].dir);
        if (plan_file(c, HOST_SYS, path, g, "cpufreq.governor", governor_why(g), pv->origin) ==
            -ENOENT)
            note_missing(c, pv, "cpufreq.governor", "a policy has no scaling_governor");
        v[i].new_governor = TAKE_PTR(g);
    }
    return 0;
}

static const char *epp_why(const char *e)
{
    if (streq(e, "performance"))
        return "energy/performance preference performance: the hardware picks the highest "
               "frequency";
    if (streq(e, "balance_performance"))
        return "energy/performance preference balance_performance: fast, saves some power";
    if (streq(e, "balance_power"))
        return "energy/performance preference balance_power: saves power, a bit slower";
    if (streq(e, "power"))
        return "energy/performance preference power: the lowest power, slowest ramp";
    return "energy/performance preference as the firmware set it";
}

/* EPP after the governor: intel_pstate and amd-pstate refuse any EPP but
 * "performance" under the performance governor (EBUSY), so the EPP is
 * planned against the governor the policy will have. */
static int plan_epp(struct knob_ctx *c, struct policy *v, size_t n)
{
    const struct profile_value *pv = get(c, "cpufreq", "epp");
    for (size_t i = 0; pv && i < n; i++) {
        if (!v[i].epps) {
            note_missing(c, pv, "cpufreq.epp",
                         "the cpufreq driver has no energy_performance_preference");
            continue;
        }
        _cleanup_free_ char *e = knobs_first_offered(pv->value, v[i].epps);
        if (!e)
            return fail(c, xasprintf("%s: cpufreq.epp: none of '%s' is offered by %s (it "
                                     "offers: %s)",
                                     pv->origin, pv->value, strrchr(v[i].dir, '/') + 1, v[i].epps));
        const char *gov = v[i].new_governor ? v[i].new_governor : v[i].governor;
        if (streq(gov, "performance") && !streq(e, "performance")) {
            tune_plan_note(c->plan,
                           "cpufreq.epp: '%s' skipped where the governor is performance: the "
                           "driver holds EPP at performance there (%s)",
                           e, pv->origin);
            continue;
        }
        _cleanup_free_ char *path = xasprintf("%s/energy_performance_preference", v[i].dir);
        if (plan_file(c, HOST_SYS, path, e, "cpufreq.epp", epp_why(e), pv->origin) == -ENOENT)
            note_missing(c, pv, "cpufreq.epp",
                         "the cpufreq driver has no energy_performance_preference");
    }
    return 0;
}

/* cpufreq/boost (acpi-cpufreq, amd-pstate: 1 = on), or intel_pstate's
 * no_turbo (1 = off). */
static int plan_boost(struct knob_ctx *c)
{
    const struct profile_value *pv = get(c, "cpufreq", "boost");
    if (!pv)
        return 0;
    bool on;
    if (knobs_bool(pv->value, &on) < 0)
        return fail(
            c, xasprintf("%s: cpufreq.boost '%s': want " PARSE_BOOL_WORDS, pv->origin, pv->value));
    const char *why = on ? "turbo on: a busy core runs above base clock while others sleep"
                         : "turbo off: a steady, lower clock and less power";
    int r = plan_file(c, HOST_SYS, POLICY_DIR "/boost", on ? "1" : "0", "cpufreq.boost", why,
                      pv->origin);
    if (r == -ENOENT)
        r = plan_file(c, HOST_SYS, CPU_DIR "/intel_pstate/no_turbo", on ? "0" : "1",
                      "cpufreq.boost", why, pv->origin);
    if (r == -ENOENT)
        note_missing(c, pv, "cpufreq.boost",
                     "the cpufreq driver has no boost switch (cpufreq/boost, "
                     "intel_pstate/no_turbo)");
    return 0;
}

static int freq_of(struct knob_ctx *c, const struct profile_value *pv, const char *key,
                   const struct policy *p, uint64_t *ret)
{
    uint64_t khz;
    int r = knobs_freq_khz(pv->value, p->cmin, p->cmax, &khz);
    if (r == -EINVAL)
        return fail(c, xasprintf("%s: cpufreq.%s '%s': want min, max, kHz, \"N MHz\", \"N GHz\" "
                                 "or \"N%%\"",
                                 pv->origin, key, pv->value));
    if (r < 0 || khz < p->cmin || khz > p->cmax)
        return fail(c, xasprintf("%s: cpufreq.%s '%s' is outside what %s allows: "
                                 "cpuinfo_min_freq %llu to cpuinfo_max_freq %llu kHz",
                                 pv->origin, key, pv->value, strrchr(p->dir, '/') + 1,
                                 (unsigned long long)p->cmin, (unsigned long long)p->cmax));
    *ret = khz;
    return 0;
}

static int plan_limit(struct knob_ctx *c, const struct policy *p, const char *key, uint64_t khz,
                      const char *origin)
{
    char val[32];
    snprintf(val, sizeof(val), "%llu", (unsigned long long)khz);
    _cleanup_free_ char *path = xasprintf("%s/scaling_%s", p->dir, key);
    _cleanup_free_ char *knob = xasprintf("cpufreq.%s", key);
    _cleanup_free_ char *why =
        xasprintf("frequency %s %.0f MHz", streq(key, "min_freq") ? "floor" : "ceiling",
                  (double)khz / 1000.0);
    plan_file(c, HOST_SYS, path, val, knob, why, origin);
    return 0;
}

/* min and max in the order the kernel takes without clamping: a floor
 * above the current ceiling needs the ceiling raised first. */
static int plan_freqs(struct knob_ctx *c, const struct policy *v, size_t n)
{
    const struct profile_value *pmin = get(c, "cpufreq", "min_freq");
    const struct profile_value *pmax = get(c, "cpufreq", "max_freq");
    for (size_t i = 0; (pmin || pmax) && i < n; i++) {
        const struct policy *p = &v[i];
        uint64_t lo = p->smin, hi = p->smax;
        if (!p->cmax) {
            note_missing(c, pmin ? pmin : pmax, pmin ? "cpufreq.min_freq" : "cpufreq.max_freq",
                         "a policy has no cpuinfo_min_freq/cpuinfo_max_freq");
            continue;
        }
        if ((pmin && freq_of(c, pmin, "min_freq", p, &lo) < 0) ||
            (pmax && freq_of(c, pmax, "max_freq", p, &hi) < 0))
            return -EINVAL;
        if (lo > hi)
            return fail(c, xasprintf("%s: cpufreq.min_freq %llu kHz is above max_freq %llu kHz "
                                     "on %s",
                                     (pmin ? pmin : pmax)->origin, (unsigned long long)lo,
                                     (unsigned long long)hi, strrchr(p->dir, '/') + 1));
        bool max_first = pmax && lo > p->smax;
        if (max_first)
            plan_limit(c, p, "max_freq", hi, pmax->origin);
        if (pmin)
            plan_limit(c, p, "min_freq", lo, pmin->origin);
        if (pmax && !max_first)
            plan_limit(c, p, "max_freq", hi, pmax->origin);
    }
    return 0;
}

int knobs_cpufreq(struct knob_ctx *c)
{
    static const char *const keys[] = {"governor", "epp", "boost", "min_freq", "max_freq"};
    bool any = false;
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        any |= get(c, "cpufreq", keys[i]) != NULL;
    if (!any)
        return 0;
    struct cpuset set;
    if (section_cpus(c, "cpufreq", &set) < 0)
        return -EINVAL;
    struct policy *v;
    size_t n = list_policies(c, &set, &v);
    cpuset_free(&set);
    if (!n) {
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
            const struct profile_value *pv = get(c, "cpufreq", keys[i]);
            _cleanup_free_ char *knob = xasprintf("cpufreq.%s", keys[i]);
            if (pv && !streq(keys[i], "boost"))
                note_missing(c, pv, knob, "no cpufreq policy for these CPUs on this machine");
        }
    }
    int r = plan_governor(c, v, n);
    if (r >= 0)
        r = plan_epp(c, v, n);
    if (r >= 0)
        r = plan_boost(c);
    if (r >= 0)
        r = plan_freqs(c, v, n);
    policies_free(v, n);
    return r;
}

/* ---------------------------------------------------------------- latency */

#define LAT_NONE  UINT64_MAX       /* no limit */
#define LAT_FIRST (UINT64_MAX - 1) /* the shallowest non-POLL state's latency */

/* A LATENCY value: µs, "none", "first"; "n/a" is 0 µs. */
static int latency_of(struct knob_ctx *c, const struct profile_value *pv, const char *knob,
                      uint64_t *ret)
{
    if (streq(pv->value, "none"))
        *ret = LAT_NONE;
    else if (streq(pv->value, "first"))
        *ret = LAT_FIRST;
    else if (streq(pv->value, "n/a"))
        *ret = 0;
    else if (parse_u64(pv->value, ret) < 0 || *ret > 2000000000)
        return fail(c, xasprintf("%s: %s '%s': want microseconds (0..2000000000), none or first",
                                 pv->origin, knob, pv->value));
    return 0;
}

struct cstate {
    char name[32];
    uint64_t latency_us;
    bool poll;
};

/* The C-states of one CPU (at most 16: CPUIDLE_STATE_MAX is 10). */
static size_t read_cstates(struct knob_ctx *c, int cpu, struct cstate *v, size_t max)
{
    size_t n = 0;
    for (unsigned k = 0; n < max; k++) {
        _cleanup_free_ char *name = NULL;
        if (host_read_strf(c->h, HOST_SYS, &name, CPU_DIR "/cpu%d/cpuidle/state%u/name", cpu, k) <
            0)
            break;
        struct cstate *s = &v[n++];
        snprintf(s->name, sizeof(s->name), "%s", name);
        s->poll = streq(name, "POLL");
        if (host_read_u64f(c->h, HOST_SYS, &s->latency_us, CPU_DIR "/cpu%d/cpuidle/state%u/latency",
                           cpu, k) < 0)
            s->latency_us = s->poll ? 0 : LAT_NONE - 2;
    }
    return n;
}

/* The exit latency of the shallowest state that is not POLL; 0 if none. */
static uint64_t first_latency(const struct cstate *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!v[i].poll)
            return v[i].latency_us;
    return 0;
}

static void plan_cpu_states(struct knob_ctx *c, int cpu, const struct cstate *v, size_t n,
                            uint64_t limit, const char *origin)
{
    for (size_t k = 0; k < n; k++) {
        bool off = !v[k].poll && limit != LAT_NONE && v[k].latency_us > limit;
        _cleanup_free_ char *why = NULL;
        if (v[k].poll)
            why = xstrdup("POLL is never disabled");
        else if (limit == LAT_NONE)
            why = xasprintf("%s: no latency limit, every state enabled", v[k].name);
        else
            why = xasprintf("%s: exit latency %llu us %s the %llu us limit", v[k].name,
                            (unsigned long long)v[k].latency_us, off ? "is above" : "is within",
                            (unsigned long long)limit);
        _cleanup_free_ char *path = xasprintf(CPU_DIR "/cpu%d/cpuidle/state%zu/disable", cpu, k);
        plan_file(c, HOST_SYS, path, off ? "1" : "0", "cpuidle.max_latency_us", why, origin);
    }
}

int knobs_cpuidle(struct knob_ctx *c)
{
    const struct profile_value *pv = get(c, "cpuidle", "max_latency_us");
    if (!pv)
        return 0;
    uint64_t want;
    struct cpuset set;
    if (latency_of(c, pv, "cpuidle.max_latency_us", &want) < 0 ||
        section_cpus(c, "cpuidle", &set) < 0)
        return -EINVAL;
    unsigned with = 0;
    CPUSET_FOREACH (cpu, &set) {
        struct cstate v[16];
        size_t n = read_cstates(c, cpu, v, ARRAY_SIZE(v));
        if (!n)
            continue;
        with++;
        plan_cpu_states(c, cpu, v, n, want == LAT_FIRST ? first_latency(v, n) : want, pv->origin);
    }
    cpuset_free(&set);
    if (!with)
        note_missing(c, pv, "cpuidle.max_latency_us", "no cpuidle states on this machine");
    return 0;
}

/* pm_qos_resume_latency_us takes "0" for no limit and "n/a" for a limit
 * of 0 µs (drivers/base/power/sysfs.c), so the profile's 0 is "n/a". */
static void pm_qos_value(uint64_t us, char *buf, size_t size, char **ret_why)
{
    if (us == LAT_NONE) {
        snprintf(buf, size, "0");
        *ret_why = xstrdup("no resume-latency limit: every C-state may be used");
    } else if (us == 0) {
        snprintf(buf, size, "n/a");
        *ret_why = xstrdup("zero resume latency (written n/a): the CPU only polls when idle");
    } else {
        snprintf(buf, size, "%llu", (unsigned long long)us);
        *ret_why = xasprintf("resume latency at most %llu us: deeper C-states are skipped",
                             (unsigned long long)us);
    }
}

int knobs_pm_qos(struct knob_ctx *c)
{
    const struct profile_value *pv = get(c, "pm_qos", "resume_latency_us");
    if (!pv)
        return 0;
    uint64_t want;
    struct cpuset set;
    if (latency_of(c, pv, "pm_qos.resume_latency_us", &want) < 0 ||
        section_cpus(c, "pm_qos", &set) < 0)
        return -EINVAL;
    unsigned with = 0;
    CPUSET_FOREACH (cpu, &set) {
        uint64_t us = want;
        if (want == LAT_FIRST) {
            struct cstate v[16];
            size_t n = read_cstates(c, cpu, v, ARRAY_SIZE(v));
            if (!n) {
                note_missing(c, pv, "pm_qos.resume_latency_us",
                             "'first' needs cpuidle states, and a CPU has none");
                continue;
            }
            us = first_latency(v, n);
        }
        char val[32];
        _cleanup_free_ char *why = NULL;
        pm_qos_value(us, val, sizeof(val), &why);
        _cleanup_free_ char *path = xasprintf(CPU_DIR "/cpu%d/power/pm_qos_resume_latency_us", cpu);
        if (plan_file(c, HOST_SYS, path, val, "pm_qos.resume_latency_us", why, pv->origin) !=
            -ENOENT)
            with++;
    }
    cpuset_free(&set);
    if (!with)
        note_missing(c, pv, "pm_qos.resume_latency_us",
                     "no CPU has power/pm_qos_resume_latency_us here");
    return 0;
}

/* ---------------------------------------------------------------- devices, kernel */

int knobs_sata(struct knob_ctx *c)
{
    const struct profile_value *pv = get(c, "devices", "sata_link_pm");
    if (!pv)
        return 0;
    /* libata takes any policy word (ata_lpm_policy_names); there is no
     * list of what a host offers, so the first word wins. */
    size_t len = strcspn(skip_space(pv->value), ", \t");
    _cleanup_free_ char *word = strndup(skip_space(pv->value), len);
    if (!word || streq(word, "keep"))
        return 0; /* "keep": leave the hosts as they are */
    _cleanup_free_ char *why = xasprintf("SATA link power policy %s", word);
    char **hosts = NULL;
    size_t n = 0, with = 0;
    host_list(c->h, HOST_SYS, "class/scsi_host", &hosts, &n);
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *path =
            xasprintf("class/scsi_host/%s/link_power_management_policy", hosts[i]);
        if (plan_file(c, HOST_SYS, path, word, "devices.sata_link_pm", why, pv->origin) != -ENOENT)
            with++;
    }
    host_free_list(hosts, n);
    if (!with)
        note_missing(c, pv, "devices.sata_link_pm", "no SATA host with link power management here");
    return 0;
}

/* Since Linux 5.5 every PCI device has a link/ directory, whose
 * l0s_aspm, l1_aspm, ... files are visible only when the kernel controls
 * ASPM and the link can do it (aspm_ctrl_attrs_are_visible: none when
 * aspm_disabled, set when the firmware keeps PCIe control through _OSC
 * or FADT). The policy then refuses every write with EPERM. Older kernels
 * have no link/ at all: the policy is planned. */
static bool aspm_controllable(struct knob_ctx *c)
{
    char **devs = NULL;
    size_t n = 0;
    bool seen_link = false, capable = false;
    host_list(c->h, HOST_SYS, "bus/pci/devices", &devs, &n);
    for (size_t i = 0; i < n && !capable; i++) {
        char **attrs = NULL;
        size_t na = 0;
        _cleanup_free_ char *link = xasprintf("bus/pci/devices/%s/link", devs[i]);
        if (host_list(c->h, HOST_SYS, link, &attrs, &na) < 0)
            continue;
        seen_link = true;
        for (size_t k = 0; k < na && !capable; k++)
            capable = strstr(attrs[k], "aspm") != NULL;
        host_free_list(attrs, na);
    }
    host_free_list(devs, n);
    return capable || !seen_link;
}

int knobs_pcie_aspm(struct knob_ctx *c)
{
    const struct profile_value *pv = get(c, "devices", "pcie_aspm");
    if (!pv)
        return 0;
    if (streq(pv->value, "keep"))
        return 0; /* leave the policy as it is */
    _cleanup_free_ char *offered = NULL;
    if (host_read_str(c->h, HOST_SYS, ASPM_POLICY, &offered) < 0) {
        note_missing(c, pv, "devices.pcie_aspm", "no PCIe ASPM policy on this machine");
        return 0;
    }
    if (!strchr(offered, '[')) {
        /* A recorded tree shows the last word written, not the kernel's
         * choice list: offer what drivers/pci/pcie/aspm.c offers. */
        free(offered);
        offered = xstrdup("default performance powersave powersupersave");
    }
    _cleanup_free_ char *w = knobs_first_offered(pv->value, offered);
    if (!w)
        return fail(c, xasprintf("%s: devices.pcie_aspm: none of '%s' is offered here (it offers: "
                                 "%s)",
                                 pv->origin, pv->value, offered));
    _cleanup_free_ char *cur = tune_value_active(offered);
    if (!streq(cur, w) && !aspm_controllable(c)) {
        note_missing(c, pv, "devices.pcie_aspm",
                     "the firmware keeps ASPM control here (no PCI device has link/*_aspm): "
                     "the kernel refuses the policy");
        return 0;
    }
    _cleanup_free_ char *why = xasprintf("PCIe ASPM policy %s%s", w,
                                         streq(w, "performance") ? ": links never enter L0s/L1"
                                         : streq(w, "default")   ? ": as the firmware set it"
                                                                 : ": links sleep when idle");
    plan_file(c, HOST_SYS, ASPM_POLICY, w, "devices.pcie_aspm", why, pv->origin);
    return 0;
}

int knobs_kernel(struct knob_ctx *c)
{
    const struct profile_value *wd = get(c, "kernel", "nmi_watchdog");
    if (wd) {
        bool on;
        if (knobs_bool(wd->value, &on) < 0)
            return fail(c, xasprintf("%s: kernel.nmi_watchdog '%s': want " PARSE_BOOL_WORDS,
                                     wd->origin, wd->value));
        const char *why = on ? "NMI watchdog on: hard lockups are detected"
                             : "NMI watchdog off: no periodic NMI on every CPU, and the PMU "
                               "counter it holds is free";
        if (plan_file(c, HOST_PROC, "sys/kernel/nmi_watchdog", on ? "1" : "0",
                      "kernel.nmi_watchdog", why, wd->origin) == -ENOENT)
            note_missing(c, wd, "kernel.nmi_watchdog", "this kernel has no NMI watchdog");
    }
    const struct profile_value *dw = get(c, "kernel", "dirty_writeback_centisecs");
    if (dw) {
        uint64_t cs;
        if (parse_u64(dw->value, &cs) < 0 || cs > 360000)
            return fail(c, xasprintf("%s: kernel.dirty_writeback_centisecs '%s': want 0..360000",
                                     dw->origin, dw->value));
        char val[32];
        snprintf(val, sizeof(val), "%llu", (unsigned long long)cs);
        _cleanup_free_ char *why =
            cs ? xasprintf("flush dirty pages every %.1f s: fewer writeback wake-ups when larger",
                           (double)cs / 100.0)
               : xstrdup("periodic writeback off: dirty pages flush only on pressure or age");
        if (plan_file(c, HOST_PROC, "sys/vm/dirty_writeback_centisecs", val,
                      "kernel.dirty_writeback_centisecs", why, dw->origin) == -ENOENT)
            note_missing(c, dw, "kernel.dirty_writeback_centisecs",
                         "this kernel has no vm.dirty_writeback_centisecs sysctl");
    }
    return 0;
}
