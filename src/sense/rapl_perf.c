/* rapl via the perf "power" PMU (arch/x86/events/rapl.c): describe its
 * energy events and, on the live kernel, open one counter per package on
 * the CPU its cpumask names. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cpuset.h"
#include "base/util.h"
#include "sense/rapl.h"

#define PMU "bus/event_source/devices/power"

static const struct {
    const char *event;
    enum power_scope scope;
} rapl_events[] = {
    {"energy-pkg", POWER_SCOPE_PACKAGE}, {"energy-cores", POWER_SCOPE_CORE},
    {"energy-gpu", POWER_SCOPE_UNCORE},  {"energy-ram", POWER_SCOPE_DRAM},
    {"energy-psys", POWER_SCOPE_PSYS},
};

struct pmu_event {
    const char *name;
    enum power_scope scope;
    uint64_t config;
    double scale; /* J per count */
};

struct pmu_cpu {
    int cpu;
    int package;
    int die; /* -1 unless the PMU counts per die (two CPUs of one package in cpumask) */
};

/* One file of the event: "energy-pkg", "energy-pkg.scale", ".unit". */
static int read_event_file(struct host *h, const char *ev, const char *suffix, char **ret)
{
    return host_read_strf(h, HOST_SYS, ret, PMU "/events/%s%s", ev, suffix);
}

static void note(struct host *h, struct rapl_state *st, const char *ev, const char *suffix, int err,
                 const char *what)
{
    char path[160];
    snprintf(path, sizeof(path), PMU "/events/%s%s", ev, suffix);
    rapl_state_note(st, h, path, err == -EINVAL || err == -ERANGE ? 0 : err, what);
}

static int read_event(struct host *h, struct rapl_state *st, struct pmu_event *e)
{
    _cleanup_free_ char *cfg = NULL, *scale = NULL, *unit = NULL;
    int r = read_event_file(h, e->name, "", &cfg);
    if (r == -ENOENT)
        return r; /* this CPU has no such domain */
    if (r == 0)
        r = rapl_parse_perf_event(cfg, strlen(cfg), &e->config);
    if (r < 0) {
        note(h, st, e->name, "", r, "cannot read the event's config: event skipped");
        return r;
    }
    r = read_event_file(h, e->name, ".scale", &scale);
    if (r == 0)
        r = rapl_parse_scale(scale, strlen(scale), &e->scale);
    if (r < 0) {
        note(h, st, e->name, ".scale", r, "cannot read the event's scale: event skipped");
        return r;
    }
    /* The kernel has always said "Joules"; anything else we cannot convert. */
    r = read_event_file(h, e->name, ".unit", &unit);
    if (r == 0 && !streq(unit, "Joules")) {
        note(h, st, e->name, ".unit", 0, "unit is not Joules: event skipped");
        return -EINVAL;
    }
    return 0;
}

/* The CPUs of the PMU's cpumask with their packages (dies when the PMU
 * counts per die). Returns how many, or -errno. */
static int read_cpus(struct host *h, struct pmu_cpu **ret)
{
    _cleanup_free_ char *mask = NULL;
    struct cpuset set = {0};
    int r = host_read_str(h, HOST_SYS, PMU "/cpumask", &mask);
    if (r == 0)
        r = cpuset_parse(mask, &set);
    if (r < 0)
        return r;
    struct pmu_cpu *v = xcalloc(cpuset_count(&set) + 1, sizeof(*v));
    int n = 0;
    CPUSET_FOREACH (cpu, &set) {
        int64_t pkg, die = 0;
        if (host_read_i64f(h, HOST_SYS, &pkg,
                           "devices/system/cpu/cpu%d/topology/physical_package_id", cpu) < 0 ||
            pkg < 0)
            pkg = n; /* no topology: assume the kernel's one CPU per package */
        host_read_i64f(h, HOST_SYS, &die, "devices/system/cpu/cpu%d/topology/die_id", cpu);
        v[n++] = (struct pmu_cpu){.cpu = cpu, .package = (int)pkg, .die = (int)die};
    }
    cpuset_free(&set);
    for (int i = 0; i < n; i++) {
        bool shared = false;
        for (int j = 0; j < n; j++)
            shared |= j != i && v[j].package == v[i].package;
        if (!shared)
            v[i].die = -1;
    }
    *ret = v;
    return n;
}

static void domain_name(char *buf, size_t size, enum power_scope scope, const struct pmu_cpu *c)
{
    const char *kind = power_scope_name(scope);
    if (scope == POWER_SCOPE_PSYS)
        snprintf(buf, size, "psys");
    else if (c->die >= 0)
        snprintf(buf, size, "%s-%d-die-%d", kind, c->package, c->die);
    else
        snprintf(buf, size, "%s-%d", kind, c->package);
}

static int open_counter(struct host *h, uint32_t type, const struct pmu_event *e, int cpu)
{
    struct perf_event_attr attr = {
        .type = type,
        .size = sizeof(attr),
        .config = e->config,
    };
    /* system-wide on one CPU of the package: RAPL counts the whole package */
    return host_perf_open(h, &attr, -1, cpu, -1);
}

static void set_perf(struct rapl_track *t, const struct pmu_event *e, int fd)
{
    t->d.via = RAPL_VIA_PERF;
    t->d.scale = e->scale;
    t->d.max_range = VAL_NONE; /* the kernel accumulates 64 bits */
    t->d.enabled = -1;
    t->fd = fd;
    snprintf(t->d.zone, sizeof(t->d.zone), "%s", e->name);
    snprintf(t->dir, sizeof(t->dir), PMU "/events/%s", e->name);
}

/* powercap has this domain: perf takes over only if energy_uj cannot be
 * read here and the counter opens (non-root with perf_event_paranoid <= 0). */
static void maybe_take_over(struct host *h, uint32_t type, const struct pmu_event *e,
                            const struct pmu_cpu *c, struct rapl_track *t)
{
    uint64_t v;
    if (!h->live || host_read_u64f(h, HOST_SYS, &v, "%s/energy_uj", t->dir) == 0)
        return;
    int fd = open_counter(h, type, e, c->cpu);
    if (fd >= 0)
        set_perf(t, e, fd);
}

static void add_event(struct host *h, struct rapl_state *st, uint32_t type,
                      const struct pmu_event *e, const struct pmu_cpu *cpus, int ncpus)
{
    for (int i = 0; i < ncpus; i++) {
        char name[48];
        domain_name(name, sizeof(name), e->scope, &cpus[i]);
        struct rapl_track *t = rapl_state_find(st, name);
        if (t) {
            if (t->d.via == RAPL_VIA_POWERCAP)
                maybe_take_over(h, type, e, &cpus[i], t);
            continue;
        }
        t = rapl_state_add(st);
        snprintf(t->d.name, sizeof(t->d.name), "%s", name);
        t->d.scope = e->scope;
        t->d.package = e->scope == POWER_SCOPE_PSYS ? -1 : cpus[i].package;
        int fd = open_counter(h, type, e, cpus[i].cpu);
        set_perf(t, e, fd);
        if (fd == -ENOTSUP) {
            t->static_err = ENOTSUP;
            t->static_why = xstrdup("needs the live kernel: perf counters cannot be read "
                                    "from a recorded root");
        } else if (fd < 0) {
            t->static_err = -fd;
            t->static_why = xasprintf("cannot open the perf counter on CPU %d: %s%s", cpus[i].cpu,
                                      strerror(-fd),
                                      fd == -EACCES || fd == -EPERM
                                          ? " (needs root, CAP_PERFMON or perf_event_paranoid <= 0)"
                                          : "");
        }
    }
}

void rapl_perf_discover(struct host *h, struct rapl_state *st, char **ret_why)
{
    if (!host_exists(h, HOST_SYS, PMU))
        return;
    uint64_t type;
    int r = host_read_u64(h, HOST_SYS, PMU "/type", &type);
    if (r < 0 || type > UINT32_MAX) {
        *ret_why = xasprintf("the perf power PMU has no usable type: %s",
                             r < 0 ? strerror(-r) : "out of range");
        return;
    }
    _cleanup_free_ struct pmu_cpu *cpus = NULL;
    int ncpus = read_cpus(h, &cpus);
    if (ncpus <= 0) {
        *ret_why = xasprintf("the perf power PMU has no usable cpumask: %s",
                             ncpus < 0 ? strerror(-ncpus) : "empty");
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(rapl_events); i++) {
        struct pmu_event e = {.name = rapl_events[i].event, .scope = rapl_events[i].scope};
        if (read_event(h, st, &e) < 0)
            continue;
        /* psys is one platform-wide counter: read it on the first CPU only */
        add_event(h, st, (uint32_t)type, &e, cpus, e.scope == POWER_SCOPE_PSYS ? 1 : ncpus);
    }
}
