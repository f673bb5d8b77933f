/* cgroup_cpu: see cgroup_cpu.h. */
#include "sense/cgroup_cpu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

#define SCAN_DEF_MAX   4096
#define SCAN_MAX_DEPTH 16

int cgroup_cpu_parse_stat(const char *text, uint64_t *ret_usage_us)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, "usage_usec ", 11) != 0)
            continue;
        const char *v = l + 11;
        char *end;
        errno = 0;
        /* digits only: strtoull would take " -5" as 2^64 - 5 */
        unsigned long long u = strtoull(v, &end, 10);
        if (errno || *v < '0' || *v > '9' || (*end && *end != '\n'))
            return -EINVAL;
        *ret_usage_us = u;
        return 0;
    }
    return -EINVAL;
}

int cgroup_cpu_read(struct host *h, const char *name, uint64_t *ret_ns, const char **ret_src)
{
    static const char *const v2[] = {"fs/cgroup", "fs/cgroup/unified"};
    static const char *const v1[] = {"fs/cgroup/cpuacct", "fs/cgroup/cpu,cpuacct"};
    const char *sep = *name ? "/" : "";
    for (size_t i = 0; i < ARRAY_SIZE(v2); i++) {
        _cleanup_free_ char *text = NULL;
        uint64_t us;
        if (host_read_strf(h, HOST_SYS, &text, "%s%s%s/cpu.stat", v2[i], sep, name) == 0 &&
            cgroup_cpu_parse_stat(text, &us) == 0) {
            *ret_ns = us * 1000;
            *ret_src = "cgroup v2 cpu.stat";
            return 0;
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(v1); i++) {
        uint64_t ns;
        if (host_read_u64f(h, HOST_SYS, &ns, "%s%s%s/cpuacct.usage", v1[i], sep, name) == 0) {
            *ret_ns = ns;
            *ret_src = "cgroup v1 cpuacct.usage";
            return 0;
        }
    }
    return -ENOENT;
}

struct walk {
    struct host *h;
    const struct cgroup_cpu_snapshot *prev;
    bool refresh;
    size_t max, cap;
    struct cgroup_cpu_snapshot *s;
};

/* A cgroup's interface files are "<controller>.<name>" ("cpu.stat",
 * "cgroup.procs", "memory.max"): not worth a stat each second to learn
 * they are not directories. Other names are (a child may well be called
 * "system.slice"). */
static bool interface_file(const char *name)
{
    static const char *const prefix[] = {"cgroup.", "cpu.",  "cpuset.", "io.",   "memory.", "pids.",
                                         "rdma.",   "misc.", "irq.",    "dmem.", "hugetlb."};
    for (size_t i = 0; i < ARRAY_SIZE(prefix); i++)
        if (strncmp(name, prefix[i], strlen(prefix[i])) == 0)
            return true;
    return false;
}

static uint64_t dir_id(struct host *h, const char *rel)
{
    int fd = host_open_fd(h, HOST_SYS, rel, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return 0;
    struct stat st;
    uint64_t id = fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
    close(fd);
    return id;
}

/* One cgroup (rel: under HOST_SYS; path: as /proc/PID/cgroup says), then
 * its children. Returns its index, or -1 when it has no readable cpu.stat. */
static long walk_one(struct walk *w, const char *rel, const char *path, unsigned depth)
{
    if (w->s->n >= w->max) {
        w->s->truncated = true;
        return -1;
    }
    _cleanup_free_ char *text = NULL;
    uint64_t us;
    if (host_read_strf(w->h, HOST_SYS, &text, "%s/cpu.stat", rel) < 0 ||
        cgroup_cpu_parse_stat(text, &us) < 0)
        return -1;
    w->s->v = grow_array(w->s->v, sizeof(*w->s->v), w->s->n, &w->cap);
    size_t me = w->s->n++;
    const struct cgroup_cpu *old = w->prev && !w->refresh ? cgroup_cpu_find(w->prev, path) : NULL;
    w->s->v[me] = (struct cgroup_cpu){
        .path = xstrdup(path),
        .id = old && old->id ? old->id : dir_id(w->h, rel),
        .usage_ns = us * 1000,
    };
    char **names = NULL;
    size_t nn = 0;
    if (depth < SCAN_MAX_DEPTH && host_list(w->h, HOST_SYS, rel, &names, &nn) == 0) {
        for (size_t i = 0; i < nn; i++) {
            if (interface_file(names[i]))
                continue;
            _cleanup_free_ char *crel = xasprintf("%s/%s", rel, names[i]);
            if (!host_is_dir(w->h, HOST_SYS, crel))
                continue;
            _cleanup_free_ char *cpath = xasprintf("%s/%s", streq(path, "/") ? "" : path, names[i]);
            (void)walk_one(w, crel, cpath, depth + 1);
        }
        host_free_list(names, nn);
    }
    return (long)me;
}

static int cmp_path(const void *x, const void *y)
{
    return strcmp(((const struct cgroup_cpu *)x)->path, ((const struct cgroup_cpu *)y)->path);
}

int cgroup_cpu_scan(struct host *h, const struct cgroup_cpu_snapshot *prev, bool refresh_ids,
                    size_t max, struct cgroup_cpu_snapshot *ret)
{
    static const char *const roots[] = {"fs/cgroup", "fs/cgroup/unified"};
    *ret = (struct cgroup_cpu_snapshot){0};
    for (size_t i = 0; i < ARRAY_SIZE(roots); i++) {
        _cleanup_free_ char *probe = xasprintf("%s/cgroup.procs", roots[i]);
        _cleanup_free_ char *v1 = xasprintf("%s/cgroup.clone_children", roots[i]);
        if (!host_exists(h, HOST_SYS, probe) || host_exists(h, HOST_SYS, v1))
            continue; /* not a v2 root (v1 hierarchies have clone_children) */
        ret->root = roots[i];
        struct walk w = {.h = h,
                         .prev = prev,
                         .refresh = refresh_ids,
                         .max = max ? max : SCAN_DEF_MAX,
                         .s = ret};
        if (walk_one(&w, roots[i], "/", 0) < 0) {
            cgroup_cpu_snapshot_clear(ret);
            return -ENOENT; /* no cpu.stat at the root (before 5.8 the root has none) */
        }
        qsort(ret->v, ret->n, sizeof(*ret->v), cmp_path);
        return 0;
    }
    return -ENOENT;
}

void cgroup_cpu_snapshot_clear(struct cgroup_cpu_snapshot *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].path);
    free(s->v);
    *s = (struct cgroup_cpu_snapshot){0};
}

const struct cgroup_cpu *cgroup_cpu_find(const struct cgroup_cpu_snapshot *s, const char *path)
{
    struct cgroup_cpu key = {.path = (char *)path};
    return s && s->n ? bsearch(&key, s->v, s->n, sizeof(*s->v), cmp_path) : NULL;
}

const struct cgroup_cpu *cgroup_cpu_find_id(const struct cgroup_cpu_snapshot *s, uint64_t id)
{
    for (size_t i = 0; s && id && i < s->n; i++)
        if (s->v[i].id == id)
            return &s->v[i];
    return NULL;
}

/* "/a/b" -> "/a"; "/a" -> "/"; "/" -> NULL. */
static char *parent_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash || streq(path, "/"))
        return NULL;
    return slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
}

void cgroup_cpu_own_delta(const struct cgroup_cpu_snapshot *a, const struct cgroup_cpu_snapshot *b,
                          double *ret)
{
    double *grow = xcalloc(b->n ? b->n : 1, sizeof(*grow));
    for (size_t i = 0; i < b->n; i++) {
        const struct cgroup_cpu *o = cgroup_cpu_find(a, b->v[i].path);
        uint64_t d = !o                                ? b->v[i].usage_ns
                     : b->v[i].usage_ns >= o->usage_ns ? b->v[i].usage_ns - o->usage_ns
                                                       : 0;
        grow[i] = ret[i] = (double)d / 1e9;
    }
    for (size_t i = 0; i < b->n; i++) {
        _cleanup_free_ char *pp = parent_of(b->v[i].path);
        const struct cgroup_cpu *p = pp ? cgroup_cpu_find(b, pp) : NULL;
        if (p)
            ret[p - b->v] -= grow[i];
    }
    for (size_t i = 0; i < b->n; i++)
        if (!(ret[i] > 0))
            ret[i] = 0;
    free(grow);
}
