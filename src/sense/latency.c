#include "sense/latency.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"

#define CPU_DIR    "devices/system/cpu"
#define RESUME_FMT CPU_DIR "/cpu%d/power/pm_qos_resume_latency_us"
#define DMA_DEV    "cpu_dma_latency"

int latency_parse_global(const void *buf, size_t len, int64_t *ret_us, int64_t *ret_raw)
{
    int32_t v;
    if (len != sizeof(v))
        return -EIO;
    memcpy(&v, buf, sizeof(v)); /* native endian, as the kernel copies it */
    if (v < 0)
        return -EINVAL;
    /* The aggregate is the minimum of the requests, or the default when
     * there are none; a request above the default is no constraint either. */
    *ret_us = v >= LATENCY_GLOBAL_DEFAULT ? LATENCY_NONE : v;
    *ret_raw = v;
    return 0;
}

int latency_parse_resume(const char *text, size_t len, int64_t *ret_us)
{
    char buf[32];
    if (len >= sizeof(buf) || memchr(text, '\0', len))
        return -EINVAL;
    memcpy(buf, text, len);
    buf[len] = '\0';
    strip_trailing(buf);
    if (streq(buf, "n/a")) {
        *ret_us = 0; /* the kernel's 0: no latency tolerated */
        return 0;
    }
    uint64_t v;
    int r = parse_u64(buf, &v);
    if (r < 0)
        return r;
    if (v > INT32_MAX)
        return -ERANGE;
    /* "0" is how the kernel shows PM_QOS_RESUME_LATENCY_NO_CONSTRAINT */
    *ret_us = v == 0 ? LATENCY_NONE : (int64_t)v;
    return 0;
}

/* Does any CPU have pm_qos_resume_latency_us? Not only cpu0: cpu0 may be
 * absent (offline and unplugged on arm64) or lack the file in a recorded
 * tree while the other CPUs have it. Stops at the first. */
static bool any_cpu_resume_file(struct host *h)
{
    char **names;
    size_t n;
    if (host_list(h, HOST_SYS, CPU_DIR, &names, &n) < 0)
        return false;
    bool found = false;
    for (size_t i = 0; i < n && !found; i++) {
        int cpu;
        char tail;
        if (sscanf(names[i], "cpu%d%c", &cpu, &tail) == 1 && cpu >= 0)
            found = host_existsf(h, HOST_SYS, RESUME_FMT, cpu);
    }
    host_free_list(names, n);
    return found;
}

static int latency_probe(struct host *h, void **ret_state, char **ret_reason)
{
    if (host_exists(h, HOST_DEV, DMA_DEV) || any_cpu_resume_file(h))
        return 1;
    *ret_reason = xstrdup("no PM QoS interface (neither /dev/cpu_dma_latency nor "
                          "pm_qos_resume_latency_us)");
    return 0;
}

static void read_global(struct host *h, struct sample *s, struct latency_sample *l)
{
    /* Opening the device adds a request at PM_QOS_DEFAULT_VALUE, which the
     * kernel turns into the default (kernel/power/qos.c: cpu_latency_qos_open
     * -> cpu_latency_qos_add_request -> pm_qos_update_target), and the
     * aggregate is the minimum, so the constraint does not change; closing
     * removes the request. Reading returns the aggregate (4 bytes). Only a
     * write would set a constraint, and we never write. */
    unsigned char buf[4];
    l->global_us = l->global_raw = LATENCY_UNKNOWN;
    int r = host_pread(h, HOST_DEV, DMA_DEV, buf, sizeof(buf), 0);
    if (r == 0)
        r = latency_parse_global(buf, sizeof(buf), &l->global_us, &l->global_raw);
    if (r == -EIO) {
        /* host_pread's answer to a short read too: a recorded file that is
         * not the 4-byte s32 */
        _cleanup_free_ char *p = host_display_path(h, HOST_DEV, DMA_DEV);
        diags_add(&s->diags, p, EIO, "cannot read the 4-byte value (short file or I/O error)");
    } else if (r < 0)
        sample_diag_read(s, h, HOST_DEV, DMA_DEV, r);
}

static int64_t read_resume(struct host *h, struct sample *s, int cpu)
{
    char path[96];
    snprintf(path, sizeof(path), RESUME_FMT, cpu);
    _cleanup_free_ char *text = NULL;
    size_t len;
    int64_t v;
    int r = host_read(h, HOST_SYS, path, &text, &len);
    if (r == 0)
        r = latency_parse_resume(text, len, &v);
    if (r == 0)
        return v;
    sample_diag_read(s, h, HOST_SYS, path, r);
    return LATENCY_UNKNOWN;
}

static void scan_fds(struct host *h, struct latency_sample *l, const char *pid, const char *dev)
{
    char dir[48];
    snprintf(dir, sizeof(dir), "%s/fd", pid);
    char **fds;
    size_t n;
    if (host_list(h, HOST_PROC, dir, &fds, &n) < 0) {
        l->holders_unreadable++; /* exited, or not ours to see */
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char link[96];
        _cleanup_free_ char *target = NULL;
        snprintf(link, sizeof(link), "%s/%s", dir, fds[i]);
        if (host_readlink(h, HOST_PROC, link, &target) < 0 || !streq(target, dev))
            continue;
        l->holders = xrealloc(l->holders, (l->nholders + 1) * sizeof(*l->holders));
        struct latency_holder *hd = &l->holders[l->nholders++];
        hd->pid = atoi(pid);
        hd->comm = NULL;
        host_read_strf(h, HOST_PROC, &hd->comm, "%s/comm", pid);
        break; /* one entry per process */
    }
    host_free_list(fds, n);
}

/* Who has the device open: the kernel keeps one request per open file, so
 * these processes are the user-space candidates for the constraint. */
static void find_holders(struct host *h, struct latency_sample *l)
{
    char **names;
    size_t n;
    if (host_list(h, HOST_PROC, ".", &names, &n) < 0)
        return;
    _cleanup_free_ char *dev = host_kernel_path(HOST_DEV, DMA_DEV);
    l->holders_scanned = true;
    for (size_t i = 0; i < n; i++)
        if (str_all_digits(names[i]))
            scan_fds(h, l, names[i], dev);
    host_free_list(names, n);
}

static int latency_collect(struct host *h, void *state, struct sample *s)
{
    struct latency_sample *l = xcalloc(1, sizeof(*l));
    s->latency = l;
    read_global(h, s, l);
    if (l->global_us != LATENCY_NONE && l->global_us != LATENCY_UNKNOWN)
        find_holders(h, l);
    l->cpus = xcalloc(s->topo.ncpu ? s->topo.ncpu : 1, sizeof(*l->cpus));
    /* per-CPU resume latency limits are settings: under the agent's cache
     * read once a minute, at SIGHUP and after the agent's own writes */
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_STATIC);
    CPUSET_FOREACH (cpu, &s->topo.online) {
        if ((unsigned)cpu >= s->topo.ncpu)
            continue;
        struct latency_cpu *c = &l->cpus[l->ncpus++];
        c->cpu = cpu;
        c->resume_us = read_resume(h, s, cpu);
    }
    host_cache_mode(h, m);
    return 0;
}

static void latency_free_sample(struct sample *s)
{
    if (!s->latency)
        return;
    for (size_t i = 0; i < s->latency->nholders; i++)
        free(s->latency->holders[i].comm);
    free(s->latency->holders);
    free(s->latency->cpus);
    free(s->latency);
    s->latency = NULL;
}

const struct sampler latency_sampler = {
    .name = "latency",
    .probe = latency_probe,
    .collect = latency_collect,
    .free_sample = latency_free_sample,
};

const struct latency_cpu *latency_find_cpu(const struct latency_sample *l, int cpu)
{
    if (!l)
        return NULL;
    for (unsigned i = 0; i < l->ncpus; i++)
        if (l->cpus[i].cpu == cpu)
            return &l->cpus[i];
    return NULL;
}

int64_t latency_in_force_us(const struct latency_sample *l, int cpu)
{
    if (!l)
        return LATENCY_UNKNOWN;
    const struct latency_cpu *c = latency_find_cpu(l, cpu);
    int64_t g = l->global_us, p = c ? c->resume_us : LATENCY_UNKNOWN;
    if (g == LATENCY_UNKNOWN)
        return p;
    if (p == LATENCY_UNKNOWN)
        return g;
    return g < p ? g : p;
}

bool latency_excludes_state(const struct latency_sample *l, int cpu, uint64_t state_latency_us)
{
    int64_t v = latency_in_force_us(l, cpu);
    if (v == LATENCY_UNKNOWN || v == LATENCY_NONE || state_latency_us == VAL_NONE)
        return false;
    return (uint64_t)v < state_latency_us;
}
