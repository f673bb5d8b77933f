#include "sense/cpuidle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define CPU_DIR "devices/system/cpu"

static int cpuidle_probe(struct host *h, void **ret_state, char **ret_reason)
{
    if (host_exists(h, HOST_SYS, CPU_DIR "/cpuidle/current_driver"))
        return 1;
    *ret_reason = xstrdup("no cpuidle driver (kernel without CONFIG_CPU_IDLE, or idle=poll)");
    return 0;
}

static void diag_at(struct sample *s, struct host_dirh *dh, const char *name, int r)
{
    char path[192];
    snprintf(path, sizeof(path), "%s/%s", dh->path, name);
    sample_diag_read(s, dh->h, HOST_SYS, path, r);
}

static uint64_t read_u64_or_none(struct sample *s, struct host_dirh *dh, const char *name)
{
    uint64_t v;
    int r = host_dir_read_u64(dh, name, &v);
    if (r == 0)
        return v;
    diag_at(s, dh, name, r);
    return VAL_NONE;
}

static char *read_str_or_null(struct host *h, struct sample *s, const char *path)
{
    char *v = NULL;
    int r = host_read_str(h, HOST_SYS, path, &v);
    if (r < 0)
        sample_diag_read(s, h, HOST_SYS, path, r);
    return v;
}

static char *dir_str_or_null(struct sample *s, struct host_dirh *dh, const char *name)
{
    char *v = NULL;
    int r = host_dir_read_str(dh, name, &v);
    if (r < 0)
        diag_at(s, dh, name, r);
    return v;
}

/* Six files a state, read relative to the state's directory (a short
 * kernfs lookup); desc only for the first CPU (the report shows the state
 * list once), and not the above/below miss counters: on 384 CPUs each file
 * a state costs ~1100 opens. */
static void read_state(struct host *h, struct sample *s, const char *dir, bool first_cpu,
                       const struct cpuidle_state *tmpl, struct cpuidle_state *st)
{
    struct host_dirh dh;
    int r = host_dir_open(h, HOST_SYS, dir, &dh);
    if (r < 0) {
        sample_diag_read(s, h, HOST_SYS, dir, r);
        *st = (struct cpuidle_state){.latency_us = VAL_NONE,
                                     .residency_us = VAL_NONE,
                                     .usage = VAL_NONE,
                                     .time_us = VAL_NONE,
                                     .disable = -1};
        return;
    }
    if (tmpl) {
        st->name = tmpl->name ? xstrdup(tmpl->name) : NULL;
        st->latency_us = tmpl->latency_us;
        st->residency_us = tmpl->residency_us;
    } else {
        st->name = dir_str_or_null(s, &dh, "name");
        st->latency_us = read_u64_or_none(s, &dh, "latency");
        st->residency_us = read_u64_or_none(s, &dh, "residency");
    }
    if (first_cpu)
        st->desc = dir_str_or_null(s, &dh, "desc");
    /* the counters move; everything else here is the driver's and static */
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_DYNAMIC);
    st->usage = read_u64_or_none(s, &dh, "usage");
    st->time_us = read_u64_or_none(s, &dh, "time");
    host_cache_mode(h, m);
    uint64_t dis = read_u64_or_none(s, &dh, "disable");
    st->disable = dis == VAL_NONE ? -1 : dis != 0;
    host_dir_close(&dh);
}

/* States are numbered state0..stateN-1 without gaps. *ret_own_driver: the
 * CPU has a driver/ directory of its own (CONFIG_CPU_IDLE_MULTIPLE_DRIVERS),
 * seen in the same listing, so it costs nothing. */
static unsigned count_states(struct host *h, int cpu, bool *ret_own_driver)
{
    char path[96];
    snprintf(path, sizeof(path), CPU_DIR "/cpu%d/cpuidle", cpu);
    char **names;
    size_t n;
    *ret_own_driver = false;
    if (host_list(h, HOST_SYS, path, &names, &n) < 0)
        return 0;
    unsigned count = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned k;
        char tail;
        if (sscanf(names[i], "state%u%c", &k, &tail) == 1 && k < 64 && k + 1 > count)
            count = k + 1;
        else if (streq(names[i], "driver"))
            *ret_own_driver = true;
    }
    host_free_list(names, n);
    return count;
}

static void collect_cpus(struct host *h, struct sample *s, struct cpuidle_sample *ci);

/* Under the agent's cache (host_cache_enable) names, latencies, the
 * driver and governor, the state listing and the disable files are read
 * once a minute (hotplug or SIGHUP drops them sooner); usage and time
 * every sample, through files kept open. */
static int cpuidle_collect(struct host *h, void *state, struct sample *s)
{
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_STATIC);
    struct cpuidle_sample *ci = xcalloc(1, sizeof(*ci));
    s->cpuidle = ci;
    ci->driver = read_str_or_null(h, s, CPU_DIR "/cpuidle/current_driver");
    if (ci->driver && streq(ci->driver, "none")) {
        free(ci->driver);
        ci->driver = NULL;
    }
    /* current_governor_ro on kernels before 5.6, current_governor after */
    if (host_read_str(h, HOST_SYS, CPU_DIR "/cpuidle/current_governor", &ci->governor) < 0)
        ci->governor = read_str_or_null(h, s, CPU_DIR "/cpuidle/current_governor_ro");
    collect_cpus(h, s, ci);
    host_cache_mode(h, m);
    return 0;
}

static void collect_cpus(struct host *h, struct sample *s, struct cpuidle_sample *ci)
{
    ci->cpus = xcalloc(s->topo.ncpu ? s->topo.ncpu : 1, sizeof(*ci->cpus));
    /* States (name, latency, residency) belong to the driver, not the CPU:
     * with one driver for all CPUs they are read once. Only kernels with
     * CONFIG_CPU_IDLE_MULTIPLE_DRIVERS (big.LITTLE) have per-CPU drivers,
     * and they show cpuN/cpuidle/driver/. Halves the files on 384 CPUs.
     * Each CPU is judged on its own listing: a CPU with a driver of its
     * own, or after a first CPU that had one, reads its states itself. */
    const struct cpuidle_cpu *tmpl = NULL;
    bool tmpl_shared = false;
    CPUSET_FOREACH (cpu, &s->topo.online) {
        if ((unsigned)cpu >= s->topo.ncpu)
            continue;
        bool own_driver;
        unsigned nstates = count_states(h, cpu, &own_driver);
        if (nstates == 0)
            continue;
        struct cpuidle_cpu *c = &ci->cpus[ci->ncpus++];
        c->cpu = cpu;
        c->nstates = nstates;
        c->state = xcalloc(nstates, sizeof(*c->state));
        bool use = tmpl && tmpl_shared && !own_driver && tmpl->nstates == nstates;
        for (unsigned k = 0; k < nstates; k++) {
            char dir[96];
            snprintf(dir, sizeof(dir), CPU_DIR "/cpu%d/cpuidle/state%u", cpu, k);
            read_state(h, s, dir, ci->ncpus == 1, use ? &tmpl->state[k] : NULL, &c->state[k]);
        }
        if (!tmpl) {
            tmpl = c;
            tmpl_shared = !own_driver;
        }
    }
}

static void cpuidle_free_sample(struct sample *s)
{
    struct cpuidle_sample *ci = s->cpuidle;
    if (!ci)
        return;
    for (unsigned i = 0; i < ci->ncpus; i++) {
        for (unsigned k = 0; k < ci->cpus[i].nstates; k++) {
            free(ci->cpus[i].state[k].name);
            free(ci->cpus[i].state[k].desc);
        }
        free(ci->cpus[i].state);
    }
    free(ci->cpus);
    free(ci->driver);
    free(ci->governor);
    free(ci);
    s->cpuidle = NULL;
}

const struct cpuidle_cpu *cpuidle_find_cpu(const struct cpuidle_sample *s, int cpu)
{
    if (!s)
        return NULL;
    for (unsigned i = 0; i < s->ncpus; i++)
        if (s->cpus[i].cpu == cpu)
            return &s->cpus[i];
    return NULL;
}

int cpuidle_residency(const struct cpuidle_cpu *a, const struct cpuidle_cpu *b, double interval_us,
                      double *res_pct, double *ret_c0_pct, double *ret_wakeups_per_s)
{
    if (!a || !b || a->nstates != b->nstates || interval_us <= 0)
        return -ENODATA;
    double idle = 0, entries = 0;
    for (unsigned k = 0; k < a->nstates; k++) {
        const struct cpuidle_state *x = &a->state[k], *y = &b->state[k];
        if (x->time_us == VAL_NONE || y->time_us == VAL_NONE || x->usage == VAL_NONE ||
            y->usage == VAL_NONE)
            return -ENOENT; /* unreadable: the reason is in the samples' problems */
        if (y->time_us < x->time_us || y->usage < x->usage)
            return -ERANGE;
        double t = (double)(y->time_us - x->time_us);
        res_pct[k] = 100.0 * t / interval_us;
        idle += t;
        entries += (double)(y->usage - x->usage);
    }
    double c0 = 100.0 - 100.0 * idle / interval_us;
    /* time is accounted at idle exit: a long sleep spanning the interval
     * start can push the sum past 100 %. */
    *ret_c0_pct = c0 < 0 ? 0 : c0;
    *ret_wakeups_per_s = entries / (interval_us / 1e6);
    return 0;
}

const struct sampler cpuidle_sampler = {
    .name = "cpuidle",
    .probe = cpuidle_probe,
    .collect = cpuidle_collect,
    .free_sample = cpuidle_free_sample,
};
