#include "sense/cpufreq.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/util.h"

#define CPU_DIR "devices/system/cpu"
#define MSR_PMU "bus/event_source/devices/msr"

/* Architectural MSR numbers (Intel SDM vol. 4; AMD implements the same). */
#define MSR_IA32_TSC   0x10
#define MSR_IA32_MPERF 0xE7
#define MSR_IA32_APERF 0xE8

enum msr_src {
    MSR_NONE,
    MSR_PERF, /* perf msr PMU: one group per CPU, no IPI storm */
    MSR_DEV,  /* /dev/cpu/N/msr: one IPI per pread */
};

/* Counters of one CPU opened through the perf msr PMU. */
struct msr_cpu {
    int fd[3]; /* aperf (group leader), mperf, tsc; -1 when not open */
    unsigned nfd;
    bool failed; /* open failed once: do not retry every sample */
    uint32_t gen;
};

struct cpufreq_state {
    enum msr_src src;
    char *why; /* why there are no APERF/MPERF readings; owned */
    bool why_reported;
    uint32_t pmu_type;
    uint64_t ev[3]; /* perf config of aperf, mperf, tsc */
    bool has_tsc;
    /* The TSC ticks at one rate on every CPU (constant_tsc), so one CPU's
     * TSC counter measures it for all: this saves one fd per CPU, which
     * matters on 384-CPU machines with a 1024-fd limit. */
    int tsc_cpu;
    struct msr_cpu *cpu; /* indexed by CPU id, ncpu of them */
    unsigned ncpu;
    uint32_t next_gen;
};

/* ---- probing -------------------------------------------------------- */

/* The first CPU with a cpufreq policy, preferring an online one: the
 * APERF/MPERF source is chosen by opening the counters on it, and an
 * offline CPU (cpu0 can be, on arm64 and some x86 kernels) would fail
 * that for every CPU. Only the live kernel is asked which are online:
 * on a recorded root there are no counters to open, and reading the
 * online list here would shift the tree's from=N faults by one read.
 * -1 when no CPU has cpufreq. */
static int first_cpufreq_cpu(struct host *h)
{
    char **names;
    size_t n;
    if (host_list(h, HOST_SYS, CPU_DIR, &names, &n) < 0)
        return -1;
    struct topology t;
    struct diags d = {0};
    bool have_topo = h->live && topology_read(h, &t, &d) == 0;
    diags_free(&d); /* the samples report them */
    int found = -1, any = -1;
    for (size_t i = 0; i < n && found < 0; i++) {
        int cpu;
        char tail;
        if (sscanf(names[i], "cpu%d%c", &cpu, &tail) != 1 || cpu < 0 ||
            !host_existsf(h, HOST_SYS, CPU_DIR "/cpu%d/cpufreq", cpu))
            continue;
        if (any < 0)
            any = cpu;
        if (!have_topo || cpuset_has(&t.online, (unsigned)cpu))
            found = cpu;
    }
    host_free_list(names, n);
    if (have_topo)
        topology_free(&t);
    return found >= 0 ? found : any;
}

/* An event file of the msr PMU reads "event=0x01". */
static int read_msr_event(struct host *h, const char *name, uint64_t *ret)
{
    _cleanup_free_ char *s = NULL;
    int r = host_read_strf(h, HOST_SYS, &s, MSR_PMU "/events/%s", name);
    if (r < 0)
        return r;
    if (strncmp(s, "event=", 6) != 0)
        return -EINVAL;
    return parse_u64_any(s + 6, ret);
}

static void msr_cpu_close(struct msr_cpu *m)
{
    for (unsigned k = 0; k < m->nfd; k++)
        if (m->fd[k] >= 0)
            close(m->fd[k]);
    m->nfd = 0;
}

static struct msr_cpu *msr_cpu_get(struct cpufreq_state *st, int cpu)
{
    if ((unsigned)cpu >= st->ncpu) {
        unsigned n = (unsigned)cpu + 1;
        st->cpu = xrealloc(st->cpu, n * sizeof(*st->cpu));
        memset(st->cpu + st->ncpu, 0, (n - st->ncpu) * sizeof(*st->cpu));
        st->ncpu = n;
    }
    return &st->cpu[cpu];
}

/* aperf leads a group read with PERF_FORMAT_GROUP: one IPI per CPU. */
static int perf_group_open(struct host *h, struct cpufreq_state *st, int cpu, struct msr_cpu *m)
{
    unsigned n = st->has_tsc && (st->tsc_cpu < 0 || st->tsc_cpu == cpu) ? 3 : 2;
    int fd[3] = {-1, -1, -1};
    for (unsigned k = 0; k < n; k++) {
        struct perf_event_attr a = {
            .type = st->pmu_type,
            .size = sizeof(a),
            .config = st->ev[k],
            .read_format = PERF_FORMAT_GROUP,
        };
        fd[k] = host_perf_open(h, &a, -1, cpu, k ? fd[0] : -1);
        if (fd[k] < 0) {
            int r = fd[k];
            for (unsigned i = 0; i < k; i++)
                close(fd[i]);
            return r;
        }
    }
    memcpy(m->fd, fd, sizeof(fd));
    m->nfd = n;
    m->gen = ++st->next_gen;
    if (n == 3)
        st->tsc_cpu = cpu;
    return 0;
}

static char *no_msr_reason(bool pmu, bool events, int perf_err, int dev_err)
{
    _cleanup_free_ char *pmu_s = events ? xasprintf("perf msr PMU: %s", strerror(-perf_err))
                                        : xstrdup(pmu ? "msr PMU lacks aperf/mperf" : "no msr PMU");
    if (dev_err == -ENOENT)
        return xasprintf("no APERF/MPERF (%s; /dev/cpu/N/msr absent)", pmu_s);
    return xasprintf("no APERF/MPERF (%s; /dev/cpu/N/msr: %s)", pmu_s, strerror(-dev_err));
}

/* Choose the counter source once; the reason stays in the state. */
static void msr_probe(struct host *h, struct cpufreq_state *st, int cpu)
{
    st->tsc_cpu = -1;
    uint64_t type;
    bool pmu = host_read_u64(h, HOST_SYS, MSR_PMU "/type", &type) == 0 && type <= UINT32_MAX;
    bool events = pmu && read_msr_event(h, "aperf", &st->ev[0]) == 0 &&
                  read_msr_event(h, "mperf", &st->ev[1]) == 0;
    if (!h->live) {
        st->why = xstrdup(events ? "APERF/MPERF need the live kernel's perf msr PMU"
                                 : "no APERF/MPERF on a recorded root");
        return;
    }
    int perf_err = 0;
    if (events) {
        st->pmu_type = (uint32_t)type;
        st->has_tsc = read_msr_event(h, "tsc", &st->ev[2]) == 0;
        perf_err = perf_group_open(h, st, cpu, msr_cpu_get(st, cpu));
        if (perf_err == 0) {
            st->src = MSR_PERF;
            return;
        }
    }
    char path[32];
    snprintf(path, sizeof(path), "cpu/%d/msr", cpu);
    uint64_t v;
    int dev_err = host_pread(h, HOST_DEV, path, &v, sizeof(v), MSR_IA32_APERF);
    if (dev_err == 0) {
        st->src = MSR_DEV;
        return;
    }
    st->why = no_msr_reason(pmu, events, perf_err, dev_err);
}

static int cpufreq_probe(struct host *h, void **ret_state, char **ret_reason)
{
    int cpu = first_cpufreq_cpu(h);
    if (cpu < 0) {
        *ret_reason = xstrdup("no cpufreq driver (VM or driver not loaded)");
        return 0;
    }
    struct cpufreq_state *st = xcalloc(1, sizeof(*st));
    msr_probe(h, st, cpu);
    *ret_state = st;
    return 1;
}

static void cpufreq_free_state(void *state)
{
    struct cpufreq_state *st = state;
    if (!st)
        return;
    for (unsigned i = 0; i < st->ncpu; i++)
        msr_cpu_close(&st->cpu[i]);
    free(st->cpu);
    free(st->why);
    free(st);
}

/* ---- sysfs values --------------------------------------------------- */

/* Files a kernel may lack (an older kernel, another driver): ENOENT is
 * not a problem for them. Each CPU is asked for each of them: a file one
 * CPU lacks (a partly recorded tree, a policy of another driver, a hybrid
 * part) may still be there on the next. cpuinfo_cur_freq is root-only
 * (0400): a non-root run gets EACCES on every CPU, which is counted and
 * reported once. */
struct read_ctx {
    struct host *h;
    struct sample *s;
    int cpu;
    struct host_dirh dh; /* cpuN/cpufreq: files are opened relative to it */
    unsigned denied;     /* CPUs whose cpuinfo_cur_freq gave EACCES */
};

static uint64_t cpu_u64(struct read_ctx *x, const char *name, bool optional)
{
    char path[128];
    snprintf(path, sizeof(path), CPU_DIR "/cpu%d/cpufreq/%s", x->cpu, name);
    uint64_t v;
    int r = host_dir_read_u64(&x->dh, name, &v);
    if (r == 0)
        return v;
    if (streq(name, "cpuinfo_cur_freq") && (r == -EACCES || r == -EPERM))
        x->denied++;
    else if (!(optional && r == -ENOENT))
        sample_diag_read(x->s, x->h, HOST_SYS, path, r);
    return VAL_NONE;
}

static char *cpu_str(struct read_ctx *x, const char *name, bool optional)
{
    char path[128];
    snprintf(path, sizeof(path), CPU_DIR "/cpu%d/cpufreq/%s", x->cpu, name);
    char *v = NULL;
    int r = host_dir_read_str(&x->dh, name, &v);
    if (r < 0 && !(optional && r == -ENOENT))
        sample_diag_read(x->s, x->h, HOST_SYS, path, r);
    return v;
}

/* The ACPI _CPC nominal frequency (Documentation/admin-guide/acpi/
 * cppc_sysfs.rst): outside cpufreq/, in MHz; 0 where the firmware leaves
 * the optional field out. Absent without _CPC. */
static uint64_t cppc_nom_khz(struct read_ctx *x)
{
    char path[96];
    snprintf(path, sizeof(path), CPU_DIR "/cpu%d/acpi_cppc/nominal_freq", x->cpu);
    uint64_t v;
    int r = host_read_u64(x->h, HOST_SYS, path, &v);
    if (r < 0 && r != -ENOENT)
        sample_diag_read(x->s, x->h, HOST_SYS, path, r);
    return r == 0 && v > 0 && v < UINT64_MAX / 1000 ? v * 1000 : VAL_NONE;
}

/* Under the agent's cache only the current frequencies are read every
 * sample (through files kept open); the driver, the governor, the limits
 * and the EPP are settings, read once a minute, at SIGHUP and after the
 * agent's own writes (host_write): a change by another tool shows within
 * a minute. The order is the report's (diags). */
static void read_cpu(struct read_ctx *x, struct cpufreq_cpu *c)
{
    struct host *h = x->h;
    c->cpu = x->cpu;
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_STATIC);
    c->driver = cpu_str(x, "scaling_driver", false);
    c->governor = cpu_str(x, "scaling_governor", false);
    host_cache_mode(h, HOST_CACHE_DYNAMIC);
    c->cur_khz = cpu_u64(x, "scaling_cur_freq", false);
    host_cache_mode(h, HOST_CACHE_STATIC);
    c->min_khz = cpu_u64(x, "scaling_min_freq", false);
    c->max_khz = cpu_u64(x, "scaling_max_freq", false);
    /* Always there on real kernels, absent from some recorded trees. */
    c->hw_min_khz = cpu_u64(x, "cpuinfo_min_freq", true);
    c->hw_max_khz = cpu_u64(x, "cpuinfo_max_freq", true);
    host_cache_mode(h, HOST_CACHE_DYNAMIC);
    c->hw_cur_khz = cpu_u64(x, "cpuinfo_cur_freq", true);
    host_cache_mode(h, HOST_CACHE_STATIC);
    c->base_khz = cpu_u64(x, "base_frequency", true);
    c->nom_khz = cppc_nom_khz(x);
    uint64_t boost = cpu_u64(x, "boost", true);
    c->boost = boost <= 1 ? (int)boost : -1;
    c->epp = cpu_str(x, "energy_performance_preference", true);
    c->epp_available = cpu_str(x, "energy_performance_available_preferences", true);
    host_cache_mode(h, m);
    c->aperf = c->mperf = c->tsc = VAL_NONE;
}

/* A global flag or percentage: -1 when absent or unreadable. */
static int global_int(struct host *h, struct sample *s, const char *path)
{
    uint64_t v;
    int r = host_read_u64(h, HOST_SYS, path, &v);
    if (r == 0 && v > 1000)
        r = -ERANGE;
    if (r == 0)
        return (int)v;
    if (r != -ENOENT)
        sample_diag_read(s, h, HOST_SYS, path, r);
    return -1;
}

static char *global_str(struct host *h, struct sample *s, const char *path)
{
    char *v = NULL;
    int r = host_read_str(h, HOST_SYS, path, &v);
    if (r < 0 && r != -ENOENT)
        sample_diag_read(s, h, HOST_SYS, path, r);
    return v;
}

static void read_globals(struct host *h, struct sample *s, struct cpufreq_sample *cf)
{
    cf->boost = global_int(h, s, CPU_DIR "/cpufreq/boost");
    cf->intel_pstate_status = global_str(h, s, CPU_DIR "/intel_pstate/status");
    cf->no_turbo = global_int(h, s, CPU_DIR "/intel_pstate/no_turbo");
    cf->max_perf_pct = global_int(h, s, CPU_DIR "/intel_pstate/max_perf_pct");
    cf->min_perf_pct = global_int(h, s, CPU_DIR "/intel_pstate/min_perf_pct");
    cf->turbo_pct = global_int(h, s, CPU_DIR "/intel_pstate/turbo_pct");
    cf->num_pstates = global_int(h, s, CPU_DIR "/intel_pstate/num_pstates");
    cf->amd_pstate_status = global_str(h, s, CPU_DIR "/amd_pstate/status");
}

/* ---- /proc/cpuinfo -------------------------------------------------- */

/* "key\t\t: value": the key with trailing blanks cut, and the value. */
static bool split_key(char *line, char **ret_key, char **ret_val)
{
    char *colon = strchr(line, ':');
    if (!colon)
        return false;
    *colon = '\0';
    *ret_key = strip_trailing(line);
    *ret_val = (char *)skip_space(colon + 1);
    return true;
}

int cpufreq_parse_cpuinfo_mhz(const char *text, size_t len, struct cpufreq_mhz **ret, size_t *ret_n)
{
    _cleanup_free_ char *buf = xmalloc(len + 1);
    memcpy(buf, text, len);
    buf[len] = '\0';
    _cleanup_free_ struct cpufreq_mhz *v = NULL;
    size_t n = 0, cap = 0;
    int64_t cpu = -1;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *key, *val;
        if (!split_key(line, &key, &val))
            continue;
        if (streq(key, "processor")) {
            /* s390 prints "processor 0: version = ..." : key differs */
            if (parse_i64(val, &cpu) < 0 || cpu < 0 || cpu > CPUSET_MAX_CPU)
                return -EINVAL;
        } else if (streq(key, "cpu MHz")) {
            double mhz;
            if (cpu < 0 || parse_double(val, &mhz) < 0 || !isfinite(mhz) || mhz < 0)
                return -EINVAL;
            v = grow_array(v, sizeof(*v), n, &cap);
            v[n++] = (struct cpufreq_mhz){.cpu = (int)cpu, .mhz = mhz};
            cpu = -1; /* one MHz line per processor */
        }
    }
    *ret = TAKE_PTR(v);
    *ret_n = n;
    return (int)(n > INT32_MAX ? INT32_MAX : n);
}

static void read_cpuinfo(struct host *h, struct sample *s, struct cpufreq_sample *cf)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = host_read(h, HOST_PROC, "cpuinfo", &text, &len);
    if (r == 0)
        r = cpufreq_parse_cpuinfo_mhz(text, len, &cf->mhz, &cf->nmhz);
    if (r < 0)
        sample_diag_read(s, h, HOST_PROC, "cpuinfo", r);
}

/* ---- APERF / MPERF -------------------------------------------------- */

static int perf_read_cpu(struct host *h, struct cpufreq_state *st, struct cpufreq_cpu *c)
{
    struct msr_cpu *m = msr_cpu_get(st, c->cpu);
    if (m->failed)
        return 0; /* reported when it failed */
    if (m->nfd == 0) {
        int r = perf_group_open(h, st, c->cpu, m);
        if (r < 0) {
            m->failed = true;
            return r;
        }
    }
    uint64_t buf[4];
    ssize_t n = read(m->fd[0], buf, sizeof(buf));
    if (n < 0)
        return -errno;
    if ((size_t)n != (1 + m->nfd) * sizeof(uint64_t) || buf[0] != m->nfd)
        return -EIO;
    c->aperf = buf[1];
    c->mperf = buf[2];
    c->tsc = m->nfd == 3 ? buf[3] : VAL_NONE;
    c->msr_gen = m->gen;
    return 0;
}

static int dev_read_cpu(struct host *h, struct cpufreq_cpu *c)
{
    char path[32];
    snprintf(path, sizeof(path), "cpu/%d/msr", c->cpu);
    uint64_t v[3];
    static const uint32_t reg[3] = {MSR_IA32_APERF, MSR_IA32_MPERF, MSR_IA32_TSC};
    for (int k = 0; k < 3; k++) {
        int r = host_pread(h, HOST_DEV, path, &v[k], sizeof(v[k]), reg[k]);
        if (r < 0)
            return r;
    }
    c->aperf = v[0];
    c->mperf = v[1];
    c->tsc = v[2];
    c->msr_gen = 0; /* the MSRs themselves: never reopened */
    return 0;
}

static void read_counters(struct host *h, struct cpufreq_state *st, struct sample *s,
                          struct cpufreq_sample *cf)
{
    if (!st || st->src == MSR_NONE) {
        cf->msr_why = xstrdup(st && st->why ? st->why : "no APERF/MPERF");
        if (st && !st->why_reported) {
            diags_add(&s->diags, "APERF/MPERF (effective frequency)", 0, "%s", cf->msr_why);
            st->why_reported = true;
        }
        return;
    }
    cf->msr_source = st->src == MSR_PERF ? "perf msr PMU" : "msr device";
    cf->msr_mono_ns = now_monotonic_ns();
    for (unsigned i = 0; i < cf->ncpus; i++) {
        struct cpufreq_cpu *c = &cf->cpus[i];
        int r = st->src == MSR_PERF ? perf_read_cpu(h, st, c) : dev_read_cpu(h, c);
        if (r < 0) {
            char where[64];
            snprintf(where, sizeof(where), "cpu%d APERF/MPERF", c->cpu);
            diags_add(&s->diags, where, -r, "cannot read the counters: %s", strerror(-r));
        }
    }
}

/* ---- the sampler ---------------------------------------------------- */

static int cpufreq_collect(struct host *h, void *state, struct sample *s)
{
    struct cpufreq_sample *cf = xcalloc(1, sizeof(*cf));
    s->cpufreq = cf;
    read_globals(h, s, cf);
    cf->cpus = xcalloc(s->topo.ncpu ? s->topo.ncpu : 1, sizeof(*cf->cpus));
    struct read_ctx x = {.h = h, .s = s};
    CPUSET_FOREACH (cpu, &s->topo.online) {
        char dir[64];
        snprintf(dir, sizeof(dir), CPU_DIR "/cpu%d/cpufreq", cpu);
        if ((unsigned)cpu >= s->topo.ncpu)
            continue;
        enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_STATIC);
        int r = host_dir_open(h, HOST_SYS, dir, &x.dh);
        host_cache_mode(h, m);
        if (r < 0)
            continue; /* no cpufreq policy for this CPU */
        x.cpu = cpu;
        read_cpu(&x, &cf->cpus[cf->ncpus++]);
        host_dir_close(&x.dh);
    }
    if (x.denied) {
        _cleanup_free_ char *p =
            host_display_path(h, HOST_SYS, CPU_DIR "/cpu*/cpufreq/cpuinfo_cur_freq");
        diags_add(&s->diags, p, EACCES, "permission denied on %u CPU%s (root-only file)", x.denied,
                  x.denied == 1 ? "" : "s");
    }
    read_counters(h, state, s, cf);
    read_cpuinfo(h, s, cf);
    return 0;
}

static void cpufreq_free_sample(struct sample *s)
{
    struct cpufreq_sample *cf = s->cpufreq;
    if (!cf)
        return;
    for (unsigned i = 0; i < cf->ncpus; i++) {
        free(cf->cpus[i].driver);
        free(cf->cpus[i].governor);
        free(cf->cpus[i].epp);
        free(cf->cpus[i].epp_available);
    }
    free(cf->cpus);
    free(cf->intel_pstate_status);
    free(cf->amd_pstate_status);
    free(cf->msr_why);
    free(cf->mhz);
    free(cf);
    s->cpufreq = NULL;
}

const struct cpufreq_cpu *cpufreq_find_cpu(const struct cpufreq_sample *s, int cpu)
{
    if (!s)
        return NULL;
    for (unsigned i = 0; i < s->ncpus; i++)
        if (s->cpus[i].cpu == cpu)
            return &s->cpus[i];
    return NULL;
}

/* ---- effective frequency ------------------------------------------- */

/* TSC rate in Hz measured by whichever CPU carries the TSC counter. */
static double measured_tsc_hz(const struct cpufreq_sample *a, const struct cpufreq_sample *b,
                              double dt)
{
    for (unsigned i = 0; i < b->ncpus; i++) {
        const struct cpufreq_cpu *y = &b->cpus[i];
        const struct cpufreq_cpu *x = cpufreq_find_cpu(a, y->cpu);
        if (x && x->tsc != VAL_NONE && y->tsc != VAL_NONE && y->tsc > x->tsc &&
            x->msr_gen == y->msr_gen)
            return (double)(y->tsc - x->tsc) / dt;
    }
    return NAN;
}

int cpufreq_effective(const struct cpufreq_sample *a, const struct cpufreq_sample *b, int cpu,
                      struct cpufreq_eff *ret)
{
    const struct cpufreq_cpu *x = cpufreq_find_cpu(a, cpu), *y = cpufreq_find_cpu(b, cpu);
    if (!x || !y || x->aperf == VAL_NONE || x->mperf == VAL_NONE || y->aperf == VAL_NONE ||
        y->mperf == VAL_NONE)
        return -ENODATA;
    if (x->msr_gen != y->msr_gen)
        return -ESTALE;
    if (y->aperf < x->aperf || y->mperf < x->mperf)
        return -ERANGE;
    if (b->msr_mono_ns <= a->msr_mono_ns)
        return -ENODATA;
    double dt = (double)(b->msr_mono_ns - a->msr_mono_ns) / 1e9;
    double da = (double)(y->aperf - x->aperf), dm = (double)(y->mperf - x->mperf);
    double tsc_hz = measured_tsc_hz(a, b, dt);
    bool measured = !isnan(tsc_hz);
    if (!measured) /* MPERF ticks at the nominal (base, non-turbo) rate */
        tsc_hz = y->base_khz != VAL_NONE     ? (double)y->base_khz * 1e3
                 : y->hw_max_khz != VAL_NONE ? (double)y->hw_max_khz * 1e3
                                             : NAN;
    if (isnan(tsc_hz))
        return -ENODATA;
    *ret = (struct cpufreq_eff){
        .busy_mhz = dm > 0 ? tsc_hz * da / dm / 1e6 : NAN,
        .avg_mhz = da / dt / 1e6,
        .tsc_mhz = tsc_hz / 1e6,
        .c0_pct = measured ? 100.0 * dm / (tsc_hz * dt) : NAN,
    };
    return 0;
}

double cpufreq_mean_busy_ghz(const struct cpufreq_sample *a, const struct cpufreq_sample *b)
{
    double sum = 0;
    unsigned n = 0;
    if (a && b)
        for (unsigned i = 0; i < b->ncpus; i++) {
            struct cpufreq_eff e;
            if (cpufreq_effective(a, b, b->cpus[i].cpu, &e) == 0 && !isnan(e.busy_mhz)) {
                sum += e.busy_mhz;
                n++;
            }
        }
    if (n)
        return sum / n / 1e3;
    const struct cpufreq_sample *later = b ? b : a;
    if (!later)
        return NAN;
    for (unsigned i = 0; i < later->ncpus; i++)
        if (later->cpus[i].cur_khz != VAL_NONE) {
            sum += (double)later->cpus[i].cur_khz;
            n++;
        }
    return n ? sum / n / 1e6 : NAN;
}

const struct sampler cpufreq_sampler = {
    .name = "cpufreq",
    .probe = cpufreq_probe,
    .collect = cpufreq_collect,
    .free_sample = cpufreq_free_sample,
    .free_state = cpufreq_free_state,
};
