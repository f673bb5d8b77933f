#include "sense/sampler.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "sense/clock.h"
#include "sense/cpufreq.h"
#include "sense/cpuidle.h"
#include "sense/cstate_pmu.h"
#include "sense/dcmi.h"
#include "sense/devices.h"
#include "sense/gpu.h"
#include "sense/hwmon.h"
#include "sense/irq.h"
#include "sense/latency.h"
#include "sense/procstat.h"
#include "sense/rapl.h"

const struct sampler *const sampler_table[_SAMPLER_MAX] = {
    [SAMPLER_CPUIDLE] = &cpuidle_sampler,   [SAMPLER_CPUFREQ] = &cpufreq_sampler,
    [SAMPLER_PROCSTAT] = &procstat_sampler, [SAMPLER_RAPL] = &rapl_sampler,
    [SAMPLER_HWMON] = &hwmon_sampler,       [SAMPLER_IRQ] = &irq_sampler,
    [SAMPLER_DEVICES] = &devices_sampler,   [SAMPLER_LATENCY] = &latency_sampler,
    [SAMPLER_CLOCK] = &clock_sampler,       [SAMPLER_CSTATE_PMU] = &cstate_pmu_sampler,
    [SAMPLER_GPU] = &gpu_sampler,           [SAMPLER_DCMI] = &dcmi_sampler,
};

void sample_diag_read(struct sample *s, struct host *h, enum host_dir d, const char *path, int err)
{
    _cleanup_free_ char *p = host_display_path(h, d, path);
    const char *what;
    switch (-err) {
    case EINVAL:
        what = "malformed value";
        break;
    case ERANGE:
        what = "value out of range";
        break;
    case EACCES:
    case EPERM:
        what = "permission denied (run as root)";
        break;
    case EXDEV:
        what = "leaves the recorded tree (an absolute symlink or '..'): not read";
        break;
    case ENOTSUP:
        what = "needs the live kernel (not available on a recorded root)";
        break;
    default:
        what = strerror(-err);
    }
    diags_add(&s->diags, p, err == -EINVAL || err == -ERANGE ? 0 : err, "%s", what);
}

int sense_open(struct host *h, struct sense **ret)
{
    struct sense *s = xcalloc(1, sizeof(*s));
    s->h = h;
    for (int i = 0; i < _SAMPLER_MAX; i++) {
        const struct sampler *sp = sampler_table[i];
        char *why = NULL;
        int r = sp->probe(h, &s->state[i], &why);
        s->usable[i] = r > 0;
        if (r <= 0 && !why)
            why = xasprintf("%s probe failed: %s", sp->name, strerror(r < 0 ? -r : ENODEV));
        s->why[i] = why;
    }
    *ret = s;
    return 0;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sense_cache(struct sense *s, unsigned max_fds)
{
    host_cache_enable(s->h, max_fds);
}

void sense_refresh(struct sense *s)
{
    if (!s->h->cache)
        return;
    host_cache_drop(s->h);
    s->rescans++;
}

const char *sense_read_path(const struct sense *s)
{
    if (!s->h->cache)
        return "open";
    return s->h->live ? "cache+pread" : "cache+open";
}

const char *sense_cost_name(unsigned i)
{
    return i < _SAMPLER_MAX ? sampler_table[i]->name : "topology";
}

/* The topology, kernel release and hostname: static under a cache, but
 * for the online CPUs (topology.c), whose change drops the cache and
 * reads the topology again, so a CPU that came or went is seen at once. */
static int read_topology(struct sense *s, struct sample *smp)
{
    enum host_cache_mode m = host_cache_mode(s->h, HOST_CACHE_STATIC);
    int r = topology_read(s->h, &smp->topo, &smp->diags);
    if (r == 0 && s->h->cache) {
        _cleanup_free_ char *online = cpuset_format(&smp->topo.online);
        if (s->online && !streq(s->online, online)) {
            sense_refresh(s);
            topology_free(&smp->topo);
            diags_free(&smp->diags);
            smp->diags = (struct diags){0};
            r = topology_read(s->h, &smp->topo, &smp->diags);
            free(online);
            online = r == 0 ? cpuset_format(&smp->topo.online) : NULL;
        }
        free(s->online);
        s->online = TAKE_PTR(online);
    }
    /* Identity only: a missing file is not worth a problem line. */
    host_read_str(s->h, HOST_PROC, "sys/kernel/osrelease", &smp->kernel);
    host_read_str(s->h, HOST_PROC, "sys/kernel/hostname", &smp->hostname);
    host_cache_mode(s->h, m);
    return r;
}

int sense_sample(struct sense *s, struct sample **ret)
{
    struct sample *smp = xcalloc(1, sizeof(*smp));
    smp->mono_ns = now_monotonic_ns();
    smp->real_ns = now_realtime_ns();
    if (host_cache_expire(s->h, smp->mono_ns, SENSE_CACHE_MAX_AGE_NS))
        s->rescans++;
    /* under a cache what a sampler does not call static is read now */
    enum host_cache_mode m = host_cache_mode(s->h, HOST_CACHE_DYNAMIC);
    uint64_t t0 = thread_cpu_ns();
    int r = read_topology(s, smp);
    if (r < 0) {
        _cleanup_free_ char *p = host_display_path(s->h, HOST_SYS, "devices/system/cpu");
        diags_add(&smp->diags, p, r, "no CPU found: %s", strerror(-r));
    }
    uint64_t t1 = thread_cpu_ns();
    s->last_ns[SENSE_COST_TOPOLOGY] = t1 - t0;
    for (int i = 0; i < _SAMPLER_MAX; i++) {
        s->last_ns[i] = 0;
        if (!s->usable[i] || (s->skip & (1u << i)))
            continue;
        if (r != 0 && i == SAMPLER_CPUIDLE) {
            s->ok[i] = false;
            continue;
        }
        size_t ndiags = smp->diags.n;
        int rc = sampler_table[i]->collect(s->h, s->state[i], smp);
        s->ok[i] = rc >= 0 && smp->diags.n == ndiags;
        uint64_t t2 = thread_cpu_ns();
        s->last_ns[i] = t2 - t1;
        t1 = t2;
    }
    host_cache_mode(s->h, m);
    for (int i = 0; i <= _SAMPLER_MAX; i++)
        s->cpu_ns[i] += s->last_ns[i];
    s->samples++;
    smp->cost_ns = now_monotonic_ns() - smp->mono_ns;
    *ret = smp;
    return 0;
}

void sample_free(struct sample *s)
{
    if (!s)
        return;
    for (int i = 0; i < _SAMPLER_MAX; i++)
        sampler_table[i]->free_sample(s);
    topology_free(&s->topo);
    diags_free(&s->diags);
    free(s->kernel);
    free(s->hostname);
    free(s);
}

void sense_close(struct sense *s)
{
    if (!s)
        return;
    for (int i = 0; i < _SAMPLER_MAX; i++) {
        if (s->state[i] && sampler_table[i]->free_state)
            sampler_table[i]->free_state(s->state[i]);
        free(s->why[i]);
    }
    free(s->online);
    free(s);
}
