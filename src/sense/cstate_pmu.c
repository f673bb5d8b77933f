/* Package and core C-state residency from the perf cstate PMUs: discovery
 * from sysfs, counters on the live kernel, the residency arithmetic. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cpuset.h"
#include "base/util.h"
#include "sense/cstate_pmu.h"
#include "sense/rapl.h"
#include "sense/sample.h"
#include "sense/sampler.h"

#define PMU_DIR "bus/event_source/devices/"

int cstate_pmu_parse_event_name(const char *file, char ret_state[8], unsigned *ret_number)
{
    static const char suffix[] = "-residency";
    if (!file || file[0] != 'c' || file[1] < '0' || file[1] > '9')
        return -EINVAL;
    unsigned n = 0, len = 1;
    while (file[len] >= '0' && file[len] <= '9') {
        n = n * 10 + (unsigned)(file[len] - '0');
        if (++len > 3)
            return -EINVAL; /* c0..c99: room for "c99" in ret_state */
    }
    if (!streq(file + len, suffix))
        return -EINVAL;
    memcpy(ret_state, file, len);
    ret_state[len] = '\0';
    *ret_number = n;
    return 0;
}

int cstate_pmu_residency(uint64_t count0, uint64_t count1, uint64_t tsc0, uint64_t tsc1,
                         double *ret_fraction)
{
    if (count0 == VAL_NONE || count1 == VAL_NONE || tsc0 == VAL_NONE || tsc1 == VAL_NONE ||
        tsc1 <= tsc0)
        return tsc1 < tsc0 && tsc0 != VAL_NONE && tsc1 != VAL_NONE ? -ERANGE : -EINVAL;
    if (count1 < count0)
        return -ERANGE;
    double f = (double)(count1 - count0) / (double)(tsc1 - tsc0);
    if (f > 1.01)
        return -ERANGE;
    *ret_fraction = f > 1.0 ? 1.0 : f;
    return 0;
}

static int cmp_event(const void *a, const void *b)
{
    const struct cstate_pmu_event *x = a, *y = b;
    return (x->number > y->number) - (x->number < y->number);
}

/* The PMU's events, in state order. Returns how many, or -errno. */
static int read_events(struct host *h, const char *pmu, struct cstate_pmu *p)
{
    char dir[96];
    snprintf(dir, sizeof(dir), PMU_DIR "%s/events", pmu);
    char **names = NULL;
    size_t n = 0;
    int r = host_list(h, HOST_SYS, dir, &names, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && p->nevents < CSTATE_PMU_MAX_EVENTS; i++) {
        struct cstate_pmu_event e = {0};
        if (cstate_pmu_parse_event_name(names[i], e.state, &e.number) < 0)
            continue;
        _cleanup_free_ char *cfg = NULL;
        if (host_read_strf(h, HOST_SYS, &cfg, "%s/%s", dir, names[i]) < 0 ||
            rapl_parse_perf_event(cfg, strlen(cfg), &e.config) < 0)
            continue; /* unreadable or a format we do not know: not counted */
        p->ev[p->nevents++] = e;
    }
    host_free_list(names, n);
    qsort(p->ev, p->nevents, sizeof(p->ev[0]), cmp_event);
    return (int)p->nevents;
}

static int read_units(struct host *h, const char *pmu, enum cstate_pmu_scope scope,
                      struct cstate_pmu *p)
{
    _cleanup_free_ char *mask = NULL;
    struct cpuset set = {0};
    int r = host_read_strf(h, HOST_SYS, &mask, PMU_DIR "%s/cpumask", pmu);
    if (r == 0)
        r = cpuset_parse(mask, &set);
    if (r < 0)
        return r;
    p->units = xcalloc(cpuset_count(&set) + 1, sizeof(*p->units));
    CPUSET_FOREACH (cpu, &set) {
        int64_t pkg = -1, core = -1;
        host_read_i64f(h, HOST_SYS, &pkg, "devices/system/cpu/cpu%d/topology/physical_package_id",
                       cpu);
        if (scope == CSTATE_PMU_CORE)
            host_read_i64f(h, HOST_SYS, &core, "devices/system/cpu/cpu%d/topology/core_id", cpu);
        struct cstate_pmu_unit *u = &p->units[p->nunits++];
        *u = (struct cstate_pmu_unit){
            .cpu = cpu, .package = (int)pkg, .core = (int)core, .tsc_fd = -1};
        for (unsigned k = 0; k < CSTATE_PMU_MAX_EVENTS; k++)
            u->fd[k] = -1;
    }
    cpuset_free(&set);
    return (int)p->nunits;
}

static int open_counter(struct host *h, uint32_t type, uint64_t config, int cpu)
{
    struct perf_event_attr attr = {.type = type, .size = sizeof(attr), .config = config};
    /* system-wide on the cpumask's CPU: the driver counts only that way */
    return host_perf_open(h, &attr, -1, cpu, -1);
}

static char *open_why(int fd, int cpu, const char *what)
{
    if (fd == -ENOTSUP)
        return xstrdup("needs the live kernel: perf counters cannot be read from a recorded root");
    return xasprintf("cannot open the %s counter on CPU %d: %s%s", what, cpu, strerror(-fd),
                     fd == -EACCES || fd == -EPERM
                         ? " (needs root, CAP_PERFMON or perf_event_paranoid <= 0)"
                         : "");
}

/* The msr PMU's tsc event (arch/x86/events/msr.c), the denominator. */
static int tsc_config(struct host *h, uint32_t *ret_type, uint64_t *ret_config)
{
    uint64_t type;
    _cleanup_free_ char *cfg = NULL;
    int r = host_read_u64(h, HOST_SYS, PMU_DIR "msr/type", &type);
    if (r == 0 && type > UINT32_MAX)
        r = -ERANGE;
    if (r == 0)
        r = host_read_str(h, HOST_SYS, PMU_DIR "msr/events/tsc", &cfg);
    if (r == 0)
        r = rapl_parse_perf_event(cfg, strlen(cfg), ret_config);
    if (r == 0)
        *ret_type = (uint32_t)type;
    return r;
}

static void open_counters(struct host *h, struct cstate_pmu *p)
{
    uint32_t ttype = 0;
    uint64_t tcfg = 0;
    if (tsc_config(h, &ttype, &tcfg) < 0) {
        p->why = xstrdup("no msr PMU tsc event to divide by: residency not computed");
        return;
    }
    for (unsigned i = 0; i < p->nunits && !p->why; i++) {
        struct cstate_pmu_unit *u = &p->units[i];
        for (unsigned k = 0; k < p->nevents && !p->why; k++) {
            u->fd[k] = open_counter(h, p->type, p->ev[k].config, u->cpu);
            if (u->fd[k] < 0)
                p->why = open_why(u->fd[k], u->cpu, p->ev[k].state);
        }
        if (!p->why) {
            u->tsc_fd = open_counter(h, ttype, tcfg, u->cpu);
            if (u->tsc_fd < 0)
                p->why = open_why(u->tsc_fd, u->cpu, "tsc");
        }
    }
}

static void discover_one(struct host *h, const char *name, enum cstate_pmu_scope scope,
                         struct cstate_pmu *p)
{
    char dir[64];
    snprintf(dir, sizeof(dir), PMU_DIR "%s", name);
    p->name = name;
    p->present = true;
    uint64_t type;
    int r = host_read_u64f(h, HOST_SYS, &type, "%s/type", dir);
    if (r < 0 || type > UINT32_MAX) {
        p->why = xasprintf("the %s PMU has no usable type: %s", name,
                           r < 0 ? strerror(-r) : "out of range");
        return;
    }
    p->type = (uint32_t)type;
    r = read_events(h, name, p);
    if (r <= 0) {
        p->why = xasprintf("the %s PMU lists no residency events%s%s", name, r < 0 ? ": " : "",
                           r < 0 ? strerror(-r) : "");
        return;
    }
    r = read_units(h, name, scope, p);
    if (r <= 0) {
        p->why =
            xasprintf("the %s PMU has no usable cpumask: %s", name, r < 0 ? strerror(-r) : "empty");
        return;
    }
    open_counters(h, p);
}

void cstate_pmu_discover(struct host *h, struct cstate_pmu_state *st)
{
    *st = (struct cstate_pmu_state){0};
    if (host_exists(h, HOST_SYS, PMU_DIR "cstate_core"))
        discover_one(h, "cstate_core", CSTATE_PMU_CORE, &st->pmu[CSTATE_PMU_CORE]);
    /* cstate_die replaces cstate_pkg where a package has several dies */
    const char *pkg = host_exists(h, HOST_SYS, PMU_DIR "cstate_die") ? "cstate_die" : "cstate_pkg";
    if (host_exists(h, HOST_SYS, PMU_DIR "cstate_die") ||
        host_exists(h, HOST_SYS, PMU_DIR "cstate_pkg"))
        discover_one(h, pkg, CSTATE_PMU_PKG, &st->pmu[CSTATE_PMU_PKG]);
    if (!st->pmu[CSTATE_PMU_CORE].present && !st->pmu[CSTATE_PMU_PKG].present)
        st->why_missing =
            xstrdup("no cstate_core or cstate_pkg perf PMU: intel_cstate is not loaded, the CPU "
                    "model is not in its table (AMD has none), or this is a virtual machine (the "
                    "driver does not load under a hypervisor)");
}

static uint64_t read_fd(int fd)
{
    uint64_t v;
    return fd >= 0 && pread(fd, &v, sizeof(v), 0) == (ssize_t)sizeof(v) ? v : VAL_NONE;
}

int cstate_pmu_read(const struct cstate_pmu *p, struct cstate_pmu_counts *ret)
{
    if (!p->present || p->why)
        return -ENOTSUP;
    struct cstate_pmu_counts c = {.nunits = p->nunits, .nevents = p->nevents};
    c.counts = xcalloc((size_t)p->nunits * p->nevents + 1, sizeof(uint64_t));
    c.tsc = xcalloc(p->nunits + 1, sizeof(uint64_t));
    for (unsigned i = 0; i < p->nunits; i++) {
        const struct cstate_pmu_unit *u = &p->units[i];
        /* the TSC right after the counts, as turbostat reads them; the
         * small skew is what cstate_pmu_residency's clamp absorbs */
        for (unsigned k = 0; k < p->nevents; k++)
            c.counts[(size_t)i * p->nevents + k] = read_fd(u->fd[k]);
        c.tsc[i] = read_fd(u->tsc_fd);
    }
    *ret = c;
    return 0;
}

void cstate_pmu_counts_free(struct cstate_pmu_counts *c)
{
    if (!c)
        return;
    free(c->counts);
    free(c->tsc);
    *c = (struct cstate_pmu_counts){0};
}

void cstate_pmu_state_free(struct cstate_pmu_state *st)
{
    if (!st)
        return;
    for (unsigned s = 0; s < _CSTATE_PMU_MAX; s++) {
        struct cstate_pmu *p = &st->pmu[s];
        for (unsigned i = 0; i < p->nunits; i++) {
            for (unsigned k = 0; k < CSTATE_PMU_MAX_EVENTS; k++)
                if (p->units[i].fd[k] >= 0)
                    close(p->units[i].fd[k]);
            if (p->units[i].tsc_fd >= 0)
                close(p->units[i].tsc_fd);
        }
        free(p->units);
        free(p->why);
    }
    free(st->why_missing);
    *st = (struct cstate_pmu_state){0};
}

const struct cstate_pmu_unit *cstate_pmu_find_unit(const struct cstate_pmu *p, int package,
                                                   int core, unsigned *ret_index)
{
    for (unsigned i = 0; i < p->nunits; i++)
        if (p->units[i].package == package && (core < 0 || p->units[i].core == core)) {
            if (ret_index)
                *ret_index = i;
            return &p->units[i];
        }
    return NULL;
}

/* ---- the sampler ---- */

static int cstate_probe(struct host *h, void **ret_state, char **ret_reason)
{
    struct cstate_pmu_state *st = xcalloc(1, sizeof(*st));
    cstate_pmu_discover(h, st);
    if (st->why_missing) {
        *ret_reason = xstrdup(st->why_missing);
        cstate_pmu_state_free(st);
        free(st);
        return 0;
    }
    *ret_state = st;
    return 1;
}

static void copy_pmu(const struct cstate_pmu *p, struct cstate_pmu_reading *r)
{
    r->pmu = *p;
    r->pmu.units = xcalloc(p->nunits + 1, sizeof(*p->units));
    if (p->nunits)
        memcpy(r->pmu.units, p->units, p->nunits * sizeof(*p->units));
    r->pmu.why = p->why ? xstrdup(p->why) : NULL;
}

static int cstate_collect(struct host *h, void *state, struct sample *s)
{
    (void)h;
    const struct cstate_pmu_state *st = state;
    struct cstate_pmu_sample *c = xcalloc(1, sizeof(*c));
    for (unsigned i = 0; i < _CSTATE_PMU_MAX; i++) {
        if (!st->pmu[i].present)
            continue;
        copy_pmu(&st->pmu[i], &c->r[i]);
        cstate_pmu_read(&st->pmu[i], &c->r[i].counts); /* -ENOTSUP: why is set */
    }
    s->cstate_pmu = c;
    return 0;
}

static void cstate_free_sample(struct sample *s)
{
    if (!s->cstate_pmu)
        return;
    for (unsigned i = 0; i < _CSTATE_PMU_MAX; i++) {
        free(s->cstate_pmu->r[i].pmu.units);
        free(s->cstate_pmu->r[i].pmu.why);
        cstate_pmu_counts_free(&s->cstate_pmu->r[i].counts);
    }
    free(s->cstate_pmu);
    s->cstate_pmu = NULL;
}

static void cstate_free_state(void *state)
{
    cstate_pmu_state_free(state);
    free(state);
}

const struct sampler cstate_pmu_sampler = {
    .name = "cstate",
    .probe = cstate_probe,
    .collect = cstate_collect,
    .free_sample = cstate_free_sample,
    .free_state = cstate_free_state,
};

int cstate_pmu_reading_residency(const struct cstate_pmu_reading *x,
                                 const struct cstate_pmu_reading *y, unsigned i, unsigned k,
                                 double *ret_fraction)
{
    const struct cstate_pmu_counts *a = &x->counts, *b = &y->counts;
    if (!a->nunits || a->nunits != b->nunits || a->nevents != b->nevents || i >= b->nunits ||
        k >= b->nevents)
        return -ENODATA;
    size_t at = (size_t)i * b->nevents + k;
    return cstate_pmu_residency(a->counts[at], b->counts[at], a->tsc[i], b->tsc[i], ret_fraction);
}
