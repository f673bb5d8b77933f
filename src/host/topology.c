#include "topology.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define CPU_DIR "devices/system/cpu"

static void diag_read(struct host *h, struct diags *diags, const char *path, int r)
{
    _cleanup_free_ char *p = host_display_path(h, HOST_SYS, path);
    diags_add(diags, p, r, "%s", r == -EINVAL || r == -ERANGE ? "malformed value" : strerror(-r));
}

static int read_cpulist(struct host *h, const char *path, struct cpuset *ret, struct diags *diags)
{
    _cleanup_free_ char *s = NULL;
    int r = host_read_str(h, HOST_SYS, path, &s);
    if (r == 0)
        r = cpuset_parse(s, ret);
    if (r < 0 && r != -ENOENT)
        diag_read(h, diags, path, r);
    return r;
}

/* Without a "possible" file (very old kernels, some containers) the cpuN
 * directories are the list. */
static int list_cpu_dirs(struct host *h, struct cpuset *ret)
{
    char **names;
    size_t n;
    int r = host_list(h, HOST_SYS, CPU_DIR, &names, &n);
    if (r < 0)
        return r;
    struct cpuset set = {0};
    for (size_t i = 0; i < n; i++) {
        unsigned id;
        char tail;
        if (sscanf(names[i], "cpu%u%c", &id, &tail) == 1 && id <= CPUSET_MAX_CPU)
            cpuset_add(&set, id);
    }
    host_free_list(names, n);
    *ret = set;
    return 0;
}

/* One id of a CPU's topology directory; dflt when the file is absent. */
static int read_topo_id(struct host_dirh *dh, const char *name, int dflt, struct diags *diags)
{
    int64_t v; /* physical_package_id is -1 on some arm64 machines */
    int r = host_dir_read_i64(dh, name, &v);
    if (r == -ENOENT)
        return dflt;
    if (r < 0 || v < -1 || v > 1000000) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dh->path, name);
        diag_read(dh->h, diags, path, r < 0 ? r : -ERANGE);
        return -1;
    }
    return (int)v;
}

/* package, die, core of an online CPU, read under its topology directory
 * (a short lookup each). */
static void read_cpu_ids(struct host *h, int cpu, struct topo_cpu *c, struct diags *diags)
{
    char dir[64];
    snprintf(dir, sizeof(dir), CPU_DIR "/cpu%d/topology", cpu);
    struct host_dirh dh;
    if (host_dir_open(h, HOST_SYS, dir, &dh) < 0) {
        /* very old kernels and some containers: no topology, one package */
        c->package = c->die = 0;
        c->core = cpu;
        return;
    }
    c->package = read_topo_id(&dh, "physical_package_id", 0, diags);
    c->die = read_topo_id(&dh, "die_id", 0, diags);
    c->core = read_topo_id(&dh, "core_id", cpu, diags);
    host_dir_close(&dh);
}

/* Which CPUs are online. The "online" list when there is one, else the
 * per-CPU "online" files (cpu0 usually has none and is online; some
 * kernels and architectures have none at all). A CPU without a cpuN
 * directory, or not present, is not online. Whatever the source, a CPU
 * the kernel lists in "offline" is offline: a recorded tree may lack the
 * "online" list and every per-CPU file, and still say which are off. */
static void read_online_now(struct host *h, struct topology *t, struct diags *diags);

static void read_online(struct host *h, struct topology *t, struct diags *diags)
{
    /* under the agent's cache (host_cache_enable) the rest of the topology
     * is static; the online CPUs are read every sample, and a change
     * rescans (sense_sample) */
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_DYNAMIC);
    read_online_now(h, t, diags);
    host_cache_mode(h, m);
}

static void read_online_now(struct host *h, struct topology *t, struct diags *diags)
{
    if (read_cpulist(h, CPU_DIR "/online", &t->online, diags) < 0) {
        cpuset_free(&t->online);
        CPUSET_FOREACH (cpu, &t->present) {
            uint64_t v = 1;
            int r = host_read_u64f(h, HOST_SYS, &v, CPU_DIR "/cpu%d/online", cpu);
            if (r == -ENOENT && !host_existsf(h, HOST_SYS, CPU_DIR "/cpu%d", cpu))
                continue; /* no such CPU in sysfs: not online */
            if ((r == 0 && v == 1) || r == -ENOENT)
                cpuset_add(&t->online, (unsigned)cpu);
        }
    }
    struct cpuset off = {0};
    if (read_cpulist(h, CPU_DIR "/offline", &off, diags) == 0)
        CPUSET_FOREACH (cpu, &off)
            cpuset_del(&t->online, (unsigned)cpu);
    cpuset_free(&off);
}

static void read_nodes(struct host *h, struct topology *t, struct diags *diags)
{
    struct cpuset nodes = {0};
    if (read_cpulist(h, "devices/system/node/online", &nodes, diags) < 0)
        return;
    CPUSET_FOREACH (node, &nodes) {
        char path[96];
        struct cpuset cpus = {0};
        snprintf(path, sizeof(path), "devices/system/node/node%d/cpulist", node);
        if (read_cpulist(h, path, &cpus, diags) < 0)
            continue;
        CPUSET_FOREACH (cpu, &cpus)
            if ((unsigned)cpu < t->ncpu)
                t->cpu[cpu].node = node;
        cpuset_free(&cpus);
        t->nnodes++;
    }
    cpuset_free(&nodes);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void count_units(struct topology *t)
{
    t->package_ids = xcalloc(t->ncpu, sizeof(int));
    for (unsigned i = 0; i < t->ncpu; i++) {
        struct topo_cpu *c = &t->cpu[i];
        if (!c->online || c->package < 0)
            continue;
        bool seen_pkg = false;
        c->thread = 0;
        for (unsigned j = 0; j < i; j++) {
            struct topo_cpu *o = &t->cpu[j];
            if (!o->online || o->package != c->package)
                continue;
            seen_pkg = true;
            if (o->die == c->die && o->core == c->core)
                c->thread++;
        }
        if (!seen_pkg)
            t->package_ids[t->npackages++] = c->package;
        if (c->thread == 0)
            t->ncores++;
    }
    qsort(t->package_ids, t->npackages, sizeof(int), cmp_int);
}

int topology_read(struct host *h, struct topology *ret, struct diags *diags)
{
    struct topology t = {0};
    int r = read_cpulist(h, CPU_DIR "/possible", &t.possible, diags);
    if (r < 0 && list_cpu_dirs(h, &t.possible) < 0)
        return r;
    if (cpuset_count(&t.possible) == 0) {
        cpuset_free(&t.possible);
        return -ENODEV;
    }
    if (read_cpulist(h, CPU_DIR "/present", &t.present, diags) < 0) {
        cpuset_free(&t.present);
        CPUSET_FOREACH (cpu, &t.possible)
            cpuset_add(&t.present, (unsigned)cpu);
    }
    read_online(h, &t, diags);

    int last = -1;
    CPUSET_FOREACH (cpu, &t.possible)
        last = cpu;
    t.ncpu = (unsigned)last + 1;
    t.cpu = xcalloc(t.ncpu, sizeof(*t.cpu));
    for (unsigned i = 0; i < t.ncpu; i++) {
        struct topo_cpu *c = &t.cpu[i];
        c->present = cpuset_has(&t.present, i);
        c->online = cpuset_has(&t.online, i);
        c->node = -1;
        c->package = c->die = c->core = -1;
        if (!c->online)
            continue;
        read_cpu_ids(h, (int)i, c, diags);
    }
    /* A CPU that is online but not in possible cannot be indexed: drop it. */
    CPUSET_FOREACH (cpu, &t.online)
        if ((unsigned)cpu >= t.ncpu)
            diags_add(diags, "cpu topology", 0, "cpu%d is online but not possible; ignored", cpu);
    read_nodes(h, &t, diags);
    count_units(&t);
    *ret = t;
    return 0;
}

void topology_free(struct topology *t)
{
    cpuset_free(&t->possible);
    cpuset_free(&t->present);
    cpuset_free(&t->online);
    free(t->cpu);
    free(t->package_ids);
    *t = (struct topology){0};
}

int topology_package_index(const struct topology *t, int package)
{
    for (unsigned i = 0; i < t->npackages; i++)
        if (t->package_ids[i] == package)
            return (int)i;
    return -1;
}

int topology_package_lead(const struct topology *t, int package)
{
    for (unsigned i = 0; i < t->ncpu; i++)
        if (t->cpu[i].online && t->cpu[i].package == package)
            return (int)i;
    return -1;
}
