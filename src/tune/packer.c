/* The packer, acting: see packer.h and docs/pack.md. */
#include "tune/packer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/diag.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "host/isolation.h"
#include "host/mountinfo.h"
#include "host/topology.h"
#include "tune/guard.h"
#include "tune/journal.h"
#include "tune/profile.h"

const double pack_latency_bounds[PACK_LATENCY_BUCKETS] = {0.001, 0.002, 0.005, 0.01,
                                                          0.02,  0.05,  0.1,   1.0};

/* ---- where the cpusets are ---- */

static bool word_in(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *s = list; s && *s;) {
        s += strspn(s, " \n\t");
        size_t k = strcspn(s, " \n\t");
        if (k == n && !memcmp(s, word, n))
            return true;
        s += k;
    }
    return false;
}

void pack_hier_find(struct host *h, struct pack_hier *ret)
{
    *ret = (struct pack_hier){0};
    _cleanup_free_ char *text = NULL, *v2m = NULL, *v1m = NULL;
    size_t len = 0;
    char *v2 = NULL, *v1 = NULL;
    if (host_read(h, HOST_PROC, "self/mountinfo", &text, &len) >= 0 &&
        mountinfo_find_cgroup(text, len, &v2m, &v1m, NULL) >= 0) {
        v2 = v2m ? mountinfo_under_sys(v2m) : NULL;
        v1 = v1m ? mountinfo_under_sys(v1m) : NULL;
    } else {
        /* a recorded tree without the mount table: the usual places */
        if (host_exists(h, HOST_SYS, "fs/cgroup/cgroup.controllers"))
            v2 = xstrdup("fs/cgroup");
        else if (host_exists(h, HOST_SYS, "fs/cgroup/unified/cgroup.controllers"))
            v2 = xstrdup("fs/cgroup/unified");
        if (host_exists(h, HOST_SYS, "fs/cgroup/cpuset/cpuset.cpus"))
            v1 = xstrdup("fs/cgroup/cpuset");
    }
    ret->v2 = v2;
    _cleanup_free_ char *ctl = NULL;
    if (v2) {
        _cleanup_free_ char *p = xasprintf("%s/cgroup.controllers", v2);
        (void)host_read_str(h, HOST_SYS, p, &ctl);
    }
    if (v2 && word_in(ctl, "cpuset")) {
        ret->base = xstrdup(v2);
    } else if (v1) {
        ret->base = v1;
        ret->v1 = true;
        v1 = NULL;
    } else {
        ret->why = xstrdup(v2 ? "the cgroup2 hierarchy has no cpuset controller (not in its "
                                "cgroup.controllers: a v1 hierarchy holds it, or the kernel "
                                "lacks CONFIG_CPUSETS) and no v1 cpuset hierarchy is mounted"
                              : "no cgroup2 and no v1 cpuset hierarchy is mounted under /sys");
    }
    free(v1);
}

void pack_hier_clear(struct pack_hier *p)
{
    free(p->base);
    free(p->v2);
    free(p->why);
    *p = (struct pack_hier){0};
}

/* ---- configuration ---- */

struct from_profile {
    const struct profile *p;
    char *err;
};

static const char *get(struct from_profile *fp, const char *key, const char **origin)
{
    const struct profile_value *v = profile_get(fp->p, "pack", key);
    if (!v || !v->value || !*v->value)
        return NULL;
    *origin = v->origin ? v->origin : "profile";
    return v->value;
}

static void get_num(struct from_profile *fp, const char *key, double min, double max, bool integer,
                    double *d)
{
    const char *origin, *s = get(fp, key, &origin);
    if (!s || fp->err)
        return;
    double v;
    if (parse_double(s, &v) >= 0 && isfinite(v) && v >= min && v <= max &&
        (!integer || v == floor(v))) {
        *d = v;
        return;
    }
    fp->err = xasprintf("%s: [pack] %s = %s: want %s in %g..%g", origin, key, s,
                        integer ? "an integer" : "a number", min, max);
}

/* A cgroup path as written: relative, '/'-separated names, no "." or
 * "..", no empty component (the root cannot be packed). */
static bool cgroup_name_ok(const char *s)
{
    if (!*s || strlen(s) > 512)
        return false;
    for (const char *c = s; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)c[i] <= ' ' || c[i] == 0x7f)
                return false;
        c += n;
        if (*c == '/' && !*++c)
            return false;
    }
    return true;
}

static void config_cgroups(struct host *h, struct from_profile *fp, struct pack_config *c)
{
    const char *origin = NULL, *s = get(fp, "cgroups", &origin);
    _cleanup_free_ char *dflt = NULL;
    if (!s) {
        s = PACK_DEFAULT_CGROUPS;
        origin = dflt =
            xasprintf("%s (the default cgroups)", fp->p->origin ? fp->p->origin : fp->p->name);
    }
    _cleanup_free_ char *copy = xstrdup(s);
    size_t cap = 0;
    char *save = NULL;
    for (char *w = strtok_r(copy, " \t,", &save); w && !fp->err;
         w = strtok_r(NULL, " \t,", &save)) {
        while (*w == '/')
            w++;
        if (!cgroup_name_ok(w)) {
            fp->err = xasprintf("%s: [pack] cgroups: '%s' is not a cgroup path (relative names "
                                "split by '/', no '.' or '..'; the root cannot be packed)",
                                origin, w);
            break;
        }
        if (c->ncgroups == PACK_MAX_CGROUPS) {
            fp->err = xasprintf("%s: [pack] cgroups: more than %d", origin, PACK_MAX_CGROUPS);
            break;
        }
        c->cgroups = grow_array(c->cgroups, sizeof(*c->cgroups), c->ncgroups + 1, &cap);
        c->cgroups[c->ncgroups++] = xstrdup(w);
    }
    if (fp->err)
        return;
    if (!c->ncgroups) {
        fp->err = xasprintf("%s: [pack] cgroups is empty: name the cgroups to pack", origin);
        return;
    }
    struct pack_hier hier;
    pack_hier_find(h, &hier);
    if (!hier.base) {
        fp->err = xasprintf("profile %s: [pack] cannot work here: %s", fp->p->name, hier.why);
        pack_hier_clear(&hier);
        return;
    }
    for (size_t i = 0; i < c->ncgroups && !c->missing_skip && !fp->err; i++) {
        _cleanup_free_ char *dir = xasprintf("%s/%s", hier.base, c->cgroups[i]);
        if (!host_is_dir(h, HOST_SYS, dir)) {
            _cleanup_free_ char *disp = host_display_path(h, HOST_SYS, dir);
            fp->err = xasprintf("%s: [pack] cgroups: cgroup '%s' does not exist (no %s); create "
                                "it, leave it out, or set missing = skip",
                                origin, c->cgroups[i], disp);
        }
    }
    pack_hier_clear(&hier);
}

int pack_config_from_profile(struct host *h, const struct profile *p, struct pack_config *ret,
                             char **ret_err)
{
    if (!profile_has_section(p, "pack"))
        return -ENOENT;
    struct pack_config c = {
        .headroom = PACK_DEFAULT_HEADROOM,
        .shrink_slack = PACK_DEFAULT_SHRINK_SLACK,
        .min_cpus = PACK_DEFAULT_MIN_CPUS,
        .window_s = PACK_DEFAULT_WINDOW_S,
        .interval_s = PACK_DEFAULT_INTERVAL_S,
        .stall_us = PACK_DEFAULT_STALL_US,
        .psi_window_us = PACK_DEFAULT_PSI_WINDOW_US,
    };
    struct from_profile fp = {.p = p};
    const char *origin, *s = get(&fp, "missing", &origin);
    if (s && streq(s, "skip"))
        c.missing_skip = true;
    else if (s && !streq(s, "error"))
        fp.err = xasprintf("%s: [pack] missing = %s: want error or skip", origin, s);
    double d;
    get_num(&fp, "headroom", 0, 10, false, &c.headroom);
    get_num(&fp, "shrink_slack", 0, 10, false, &c.shrink_slack);
    d = c.min_cpus;
    get_num(&fp, "min_cpus", 1, CPUSET_MAX_CPU + 1, true, &d);
    c.min_cpus = (unsigned)d;
    get_num(&fp, "window_s", 1, 3600, false, &c.window_s);
    const char *ec = get(&fp, "enable_controller", &origin);
    if (ec && parse_bool(ec, &c.enable_controller) < 0 && !fp.err)
        fp.err = xasprintf("%s: [pack] enable_controller = %s: want yes or no", origin, ec);
    const char *dm = get(&fp, "demand", &origin);
    if (dm && streq(dm, "cgroups"))
        c.demand_cgroups = true;
    else if (dm && !streq(dm, "machine") && !fp.err)
        fp.err = xasprintf("%s: [pack] demand = %s: want machine or cgroups", origin, dm);
    get_num(&fp, "interval_s", 0.01, 60, false, &c.interval_s);
    /* psi.rst: the window is 500 ms .. 10 s, the threshold at most the window */
    d = c.psi_window_us;
    get_num(&fp, "pressure_window_us", 500000, 10000000, true, &d);
    c.psi_window_us = (unsigned)d;
    d = c.stall_us;
    get_num(&fp, "pressure_stall_us", 1, 10000000, true, &d);
    c.stall_us = (unsigned)d;
    if (!fp.err && c.stall_us > c.psi_window_us) {
        const char *o = "profile";
        get(&fp, "pressure_stall_us", &o);
        fp.err = xasprintf("%s: [pack] pressure_stall_us = %u is more than pressure_window_us = "
                           "%u (the kernel refuses such a trigger)",
                           o, c.stall_us, c.psi_window_us);
    }
    if (!fp.err)
        config_cgroups(h, &fp, &c);
    /* a [latency] guard's CPUs and cgroup are never packed */
    const struct profile_value *gv = profile_get(p, "latency", "cpus");
    if (!fp.err && gv && gv->value && *gv->value && !streq(gv->value, "all"))
        (void)cpuset_parse(gv->value, &c.guard_cpus);
    gv = profile_get(p, "latency", "workload");
    if (!fp.err && gv && gv->value && !strncmp(gv->value, "cgroup:", 7))
        c.guard_cgroup = xstrdup(gv->value + 7 + strspn(gv->value + 7, "/"));
    if (fp.err) {
        pack_config_clear(&c);
        *ret_err = fp.err;
        return -EINVAL;
    }
    c.origin = xasprintf("profile %s", p->name);
    *ret = c;
    return 0;
}

void pack_config_clear(struct pack_config *c)
{
    for (size_t i = 0; i < c->ncgroups; i++)
        free(c->cgroups[i]);
    free(c->cgroups);
    cpuset_free(&c->guard_cpus);
    free(c->guard_cgroup);
    free(c->origin);
    *c = (struct pack_config){0};
}

static void config_copy(struct pack_config *to, const struct pack_config *c)
{
    *to = *c;
    to->cgroups = xcalloc(c->ncgroups ? c->ncgroups : 1, sizeof(*to->cgroups));
    for (size_t i = 0; i < c->ncgroups; i++)
        to->cgroups[i] = xstrdup(c->cgroups[i]);
    to->guard_cpus = (struct cpuset){0};
    for (int cpu = -1; (cpu = cpuset_next(&c->guard_cpus, cpu)) >= 0;)
        cpuset_add(&to->guard_cpus, (unsigned)cpu);
    to->guard_cgroup = c->guard_cgroup ? xstrdup(c->guard_cgroup) : NULL;
    to->origin = c->origin ? xstrdup(c->origin) : NULL;
}

/* ---- demand ---- */

int pack_parse_proc_stat(const char *text, uint64_t *ret_busy, uint64_t *ret_total)
{
    const char *l = text;
    while (l && strncmp(l, "cpu ", 4) != 0) {
        l = strchr(l, '\n');
        l = l ? l + 1 : NULL;
    }
    if (!l)
        return -EINVAL;
    l += 4;
    uint64_t v[10] = {0};
    int n = 0;
    for (char *end; n < 10; n++) {
        while (*l == ' ')
            l++;
        if (*l < '0' || *l > '9')
            break;
        v[n] = strtoull(l, &end, 10);
        l = end;
    }
    if (n < 4)
        return -EINVAL;
    /* user nice system idle iowait irq softirq steal (guest in user) */
    *ret_busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    *ret_total = *ret_busy + v[3] + v[4];
    return 0;
}

/* ---- the packer ---- */

#define RING     512
#define PSI_RING 256 /* pressure readings kept: a window of 0.5 s at 2-ms ticks */

struct pcg {
    char *path;  /* relative to the hierarchy */
    bool ours;   /* watt wrote its cpuset (this run) */
    bool active; /* to be packed now */
    char *note;  /* why it is left alone; owned */
    int rt_tid;  /* a real-time task in it or below, as last checked; 0: none */
    bool enable; /* v2: a parent's subtree_control lacks cpuset; enable it */
};

struct packer {
    struct host *h;
    struct pack_config c;
    struct pack_hier hier;
    char *journal;
    struct pcg *cg;
    size_t ncg;
    struct cpuset current; /* the set in force in every ours cgroup */
    bool packed;
    bool need_reset; /* a packed cgroup must be let go: restore all */
    struct {
        uint64_t t, busy, total;
    } ring[RING];
    size_t nring, ring_head;
    double demand, target;
    unsigned online;
    char *demand_source; /* what the demand is read from */
    uint64_t hold_shrink_until;
    uint64_t rt_checked_ns; /* the last real-time check (at most one a second) */
    bool rt_checked;
    bool busy_said;          /* "journal locked" said once per wait */
    cpu_set_t own;           /* the agent's own affinity before it followed the set */
    bool own_saved;          /* own holds it; the agent runs on the packed set */
    double hold_s;           /* how long a pressure growth holds off a shrink */
    uint64_t last_shrink_ns; /* the last shrink written (0: none) */
    int *fds;
    size_t nfds;
    /* pressure files whose trigger the kernel refused: read at each tick */
    struct psi_poll {
        enum host_dir d;
        char *path;
        struct {
            uint64_t total_us, t_ns;
        } v[PSI_RING]; /* readings, oldest first */
        size_t n;
    } * polls;
    size_t npolls;
    char *psi_source;
    char *hier_text;
    char *cpus_text;
    char *note;
    uint64_t actions[4], failures, pressure_events;
    double last_latency, lat_sum;
    uint64_t lat_count, lat_buckets[PACK_LATENCY_BUCKETS];
    struct pack_cgroup_status *st;
};

/* Whether this process has CAP_SYS_RESOURCE (bit 24 of CapEff): without
 * it the kernel (6.5 on) takes only PSI triggers whose window is a
 * multiple of 2 s, and updates them with the 2-s averages. */
static bool cap_sys_resource(struct packer *p)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    if (host_read(p->h, HOST_PROC, "self/status", &text, &len) < 0)
        return true; /* unknown: do not blame it */
    const char *c = strstr(text, "\nCapEff:");
    if (!c)
        return true;
    unsigned long long eff = strtoull(c + 8, NULL, 16);
    return (eff >> 24) & 1;
}

static void open_trigger(struct packer *p, enum host_dir d, const char *path, struct strbuf *src)
{
    if (!p->h->live) {
        /* a recorded tree has no kernel behind its files: read them */
        _cleanup_free_ char *disp = host_display_path(p->h, d, path);
        strbuf_appendf(src, "%s%s read every tick (a recorded tree)", src->len ? "; " : "", disp);
        p->polls = xrealloc(p->polls, (p->npolls + 1) * sizeof(*p->polls));
        p->polls[p->npolls++] = (struct psi_poll){.d = d, .path = xstrdup(path)};
        return;
    }
    int fd = host_open_fd(p->h, d, path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    _cleanup_free_ char *disp = host_display_path(p->h, d, path);
    if (fd < 0) {
        strbuf_appendf(src, "%s%s: %s", src->len ? "; " : "", disp, strerror(-fd));
        return;
    }
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "some %u %u", p->c.stall_us, p->c.psi_window_us);
    if (write(fd, buf, (size_t)n + 1) < 0) {
        /* read its total at each tick instead */
        int err = errno;
        strbuf_appendf(src, "%s%s read every tick (the kernel refused the trigger: %s%s)",
                       src->len ? "; " : "", disp, strerror(err),
                       err == EINVAL && p->c.psi_window_us % 2000000 && !cap_sys_resource(p)
                           ? "; without CAP_SYS_RESOURCE a trigger's window must be a multiple "
                             "of 2 s, served only every 2 s"
                           : "");
        close(fd);
        p->polls = xrealloc(p->polls, (p->npolls + 1) * sizeof(*p->polls));
        p->polls[p->npolls++] = (struct psi_poll){.d = d, .path = xstrdup(path)};
        return;
    }
    p->fds = xrealloc(p->fds, (p->nfds + 1) * sizeof(*p->fds));
    p->fds[p->nfds++] = fd;
    strbuf_appendf(src, "%s%s", src->len ? ", " : "", disp);
}

/* A trigger on each packed cgroup's cpu.pressure on the cgroup2
 * hierarchy (the same path there, on a hybrid machine), else one on the
 * machine's pressure/cpu. */
static void open_triggers(struct packer *p)
{
    struct strbuf src = {0};
    for (size_t i = 0; p->hier.v2 && i < p->ncg; i++) {
        _cleanup_free_ char *f = xasprintf("%s/%s/cpu.pressure", p->hier.v2, p->cg[i].path);
        if (host_exists(p->h, HOST_SYS, f))
            open_trigger(p, HOST_SYS, f, &src);
    }
    if (!p->nfds && !p->npolls)
        open_trigger(p, HOST_PROC, "pressure/cpu", &src);
    if (!p->nfds && !p->npolls)
        strbuf_appendf(&src, " (no pressure: growth waits for the demand)");
    p->psi_source = strbuf_steal(&src);
}

int packer_new(struct host *h, const struct pack_config *c, const char *journal,
               struct packer **ret)
{
    struct packer *p = xcalloc(1, sizeof(*p));
    p->h = h;
    config_copy(&p->c, c);
    p->journal = xstrdup(journal ? journal : JOURNAL_DEFAULT_PATH);
    pack_hier_find(h, &p->hier);
    p->cg = xcalloc(c->ncgroups ? c->ncgroups : 1, sizeof(*p->cg));
    p->st = xcalloc(c->ncgroups ? c->ncgroups : 1, sizeof(*p->st));
    p->ncg = c->ncgroups;
    for (size_t i = 0; i < p->ncg; i++)
        p->cg[i].path = xstrdup(c->cgroups[i]);
    p->demand = p->target = NAN;
    p->hold_s = c->window_s;
    p->last_latency = NAN;
    if (p->hier.base) {
        _cleanup_free_ char *d = host_display_path(h, HOST_SYS, p->hier.base);
        p->hier_text = xasprintf("cgroup %s cpuset at %s", p->hier.v1 ? "v1" : "v2", d);
    } else {
        p->hier_text = xasprintf("none: %s", p->hier.why);
    }
    open_triggers(p);
    p->cpus_text = xstrdup("");
    if (p->c.demand_cgroups) {
        _cleanup_free_ char *d = p->hier.v2 ? host_display_path(h, HOST_SYS, p->hier.v2) : NULL;
        p->demand_source = d ? xasprintf("the packed cgroups' usage_usec (cpu.stat below %s)", d)
                             : xstrdup("none: demand = cgroups needs a cgroup2 hierarchy");
    } else {
        p->demand_source = xstrdup("the machine's busy CPUs (/proc/stat)");
    }
    *ret = p;
    return 0;
}

size_t packer_fds(const struct packer *p, const int **ret)
{
    *ret = p->fds;
    return p->nfds;
}

static void set_note(char **slot, char *note)
{
    free(*slot);
    *slot = note;
}

static char *cpus_file(const struct packer *p, const char *cg)
{
    return xasprintf("%s/%s/cpuset.cpus", p->hier.base, cg);
}

static int read_cpus(struct packer *p, const char *cg, struct cpuset *ret)
{
    _cleanup_free_ char *f = cpus_file(p, cg), *v = NULL;
    int r = host_read_str(p->h, HOST_SYS, f, &v);
    if (r < 0)
        return r;
    *ret = (struct cpuset){0};
    return cpuset_parse(v, ret);
}

static bool subset(const struct cpuset *a, const struct cpuset *b)
{
    for (int c = -1; (c = cpuset_next(a, c)) >= 0;)
        if (!cpuset_has(b, (unsigned)c))
            return false;
    return true;
}

static bool same_set(const struct cpuset *a, const struct cpuset *b)
{
    return subset(a, b) && subset(b, a);
}

static void set_copy(struct cpuset *to, const struct cpuset *from)
{
    cpuset_free(to);
    *to = (struct cpuset){0};
    for (int c = -1; (c = cpuset_next(from, c)) >= 0;)
        cpuset_add(to, (unsigned)c);
}

/* Every cgroup below CG (relative paths), parents before children. */
static void descendants(struct packer *p, const char *cg, unsigned depth, char ***v, size_t *n,
                        size_t *cap)
{
    if (depth >= PACK_MAX_DEPTH)
        return;
    _cleanup_free_ char *dir = xasprintf("%s/%s", p->hier.base, cg);
    char **names;
    size_t nn;
    if (host_list(p->h, HOST_SYS, dir, &names, &nn) < 0)
        return;
    for (size_t i = 0; i < nn; i++) {
        _cleanup_free_ char *sub = xasprintf("%s/%s", dir, names[i]);
        if (!host_is_dir(p->h, HOST_SYS, sub))
            continue;
        *v = grow_array(*v, sizeof(**v), *n + 1, cap);
        char *child = xasprintf("%s/%s", cg, names[i]);
        (*v)[(*n)++] = child;
        descendants(p, child, depth + 1, v, n, cap);
    }
    host_free_list(names, nn);
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* The pid of a real-time task (SCHED_FIFO, SCHED_RR, SCHED_DEADLINE) in
 * CG, 0 when none. One sched_getscheduler(2) per thread on a live root
 * (4.8x cheaper than reading /proc/TID/stat: 6.5 against 31 us a thread
 * on this loaded 2-vCPU VM). */
static int rt_task_in(struct packer *p, const char *cg)
{
    _cleanup_free_ char *f =
        xasprintf("%s/%s/%s", p->hier.base, cg, p->hier.v1 ? "tasks" : "cgroup.threads");
    _cleanup_free_ char *text = NULL;
    size_t len;
    if (host_read(p->h, HOST_SYS, f, &text, &len) < 0)
        return 0;
    for (char *s = text, *end; *s; s = end) {
        long tid = strtol(s, &end, 10);
        if (end == s)
            break;
        end += strspn(end, "\n");
        if (tid <= 0 || tid > INT_MAX)
            continue;
        int policy = host_sched_policy(p->h, (pid_t)tid);
        if (policy == SCHED_FIFO || policy == SCHED_RR || policy == 6 /* SCHED_DEADLINE */)
            return (int)tid;
    }
    return 0;
}

/* The same for CG and every cgroup below it: in v2 the tasks of a slice
 * are in its leaves. */
static int rt_task(struct packer *p, const char *cg)
{
    int tid = rt_task_in(p, cg);
    if (tid)
        return tid;
    char **desc = NULL;
    size_t nd = 0, cap = 0;
    descendants(p, cg, 0, &desc, &nd, &cap);
    for (size_t i = 0; i < nd && !tid; i++)
        tid = rt_task_in(p, desc[i]);
    free_names(desc, nd);
    return tid;
}

/* v2: the first cgroup from the root down to CG's parent whose
 * cgroup.subtree_control lacks cpuset (relative to HOST_SYS, owned), or
 * NULL when every one has it (v1: always NULL). */
static char *controller_missing(struct packer *p, const char *cg)
{
    if (p->hier.v1)
        return NULL;
    _cleanup_free_ char *dir = xstrdup(p->hier.base);
    for (const char *c = cg;;) {
        _cleanup_free_ char *f = xasprintf("%s/cgroup.subtree_control", dir);
        _cleanup_free_ char *v = NULL;
        if (host_read_str(p->h, HOST_SYS, f, &v) < 0 || !word_in(v, "cpuset"))
            return TAKE_PTR(dir);
        size_t n = strcspn(c, "/");
        if (!c[n])
            return NULL; /* DIR is CG's parent */
        char *next = xasprintf("%s/%.*s", dir, (int)n, c);
        free(dir);
        dir = next;
        c += n + 1;
    }
}

/* Decide whether each cgroup is packed now, and why not. Pinned CPUs
 * (a cpuset narrower than its parent's that watt did not write) are
 * added to EXCLUDED: nothing of ours goes there. */
static void refresh_cgroups(struct packer *p, uint64_t now, struct cpuset *excluded)
{
    /* reading every thread's stat is the costly part: once a second */
    bool rt_now = !p->rt_checked || now - p->rt_checked_ns >= 1000000000ull;
    if (rt_now)
        p->rt_checked = true, p->rt_checked_ns = now;
    for (size_t i = 0; i < p->ncg; i++) {
        struct pcg *g = &p->cg[i];
        char *note = NULL;
        _cleanup_free_ char *dir = xasprintf("%s/%s", p->hier.base, g->path);
        _cleanup_free_ char *f = cpus_file(p, g->path);
        int tid;
        _cleanup_free_ char *missing = NULL;
        if (!host_is_dir(p->h, HOST_SYS, dir)) {
            note = xstrdup("does not exist");
        } else if ((missing = controller_missing(p, g->path)) && !p->c.enable_controller) {
            /* v2: cpuset.cpus shows only where the parent enabled the controller */
            _cleanup_free_ char *d = host_display_path(p->h, HOST_SYS, missing);
            note = xasprintf("the cpuset controller is not enabled in %s/cgroup.subtree_control; "
                             "watt does not enable it unless [pack] enable_controller = yes "
                             "(or write +cpuset there, or leave the cgroup out)",
                             d);
        } else if (!missing && !host_exists(p->h, HOST_SYS, f)) {
            note = xstrdup("has no cpuset.cpus");
        } else if (p->c.guard_cgroup && (streq(p->c.guard_cgroup, g->path) ||
                                         (!strncmp(p->c.guard_cgroup, g->path, strlen(g->path)) &&
                                          p->c.guard_cgroup[strlen(g->path)] == '/'))) {
            note = xasprintf("holds the [latency] guard's workload cgroup:%s", p->c.guard_cgroup);
        } else if ((tid = rt_now ? (g->rt_tid = rt_task(p, g->path)) : g->rt_tid) > 0) {
            note = xasprintf("holds a real-time task (tid %d): left alone", tid);
        } else if (!g->ours) {
            /* pinned: narrower than its parent's effective set */
            struct cpuset mine = {0}, parent = {0};
            _cleanup_free_ char *par = xstrdup(g->path);
            char *slash = strrchr(par, '/');
            _cleanup_free_ char *pf =
                slash ? (*slash = '\0',
                         xasprintf("%s/%s/%s", p->hier.base, par,
                                   p->hier.v1 ? "cpuset.effective_cpus" : "cpuset.cpus.effective"))
                      : xasprintf("%s/%s", p->hier.base,
                                  p->hier.v1 ? "cpuset.effective_cpus" : "cpuset.cpus.effective");
            _cleanup_free_ char *pv = NULL;
            if (read_cpus(p, g->path, &mine) >= 0 && host_read_str(p->h, HOST_SYS, pf, &pv) >= 0 &&
                cpuset_parse(pv, &parent) >= 0 && cpuset_count(&mine) && subset(&mine, &parent) &&
                !same_set(&mine, &parent)) {
                _cleanup_free_ char *m = cpuset_format(&mine), *pa = cpuset_format(&parent);
                note = xasprintf("pinned to CPUs %s (its parent has %s) by someone else: left "
                                 "alone, its CPUs not packed",
                                 m, pa);
                for (int c = -1; (c = cpuset_next(&mine, c)) >= 0;)
                    cpuset_add(excluded, (unsigned)c);
            }
            cpuset_free(&mine);
            cpuset_free(&parent);
        }
        if (note && g->ours)
            p->need_reset = true; /* e.g. a real-time task came: give it back */
        g->enable = !note && missing;
        g->active = !note;
        set_note(&g->note, note);
    }
}

/* Write S to CG (and, on v1, to the descendants that follow it) inside
 * the open transaction. v1 keeps every child a subset of its parent:
 * first the shrink to S ∩ old (children first), then the growth to S
 * (parent first). A descendant pinned elsewhere that S would not hold
 * refuses the cgroup (-EBUSY, *ret_err says which). */
static int write_cgroup(struct packer *p, struct journal *j, const char *cg, const struct cpuset *s,
                        char **ret_err)
{
    struct cpuset old = {0}, inter = {0};
    char **desc = NULL;
    size_t nd = 0, cap = 0;
    bool *follow = NULL;
    int r = read_cpus(p, cg, &old);
    if (r < 0) {
        *ret_err = xasprintf("cannot read %s/cpuset.cpus: %s", cg, strerror(-r));
        return r;
    }
    if (p->hier.v1)
        descendants(p, cg, 0, &desc, &nd, &cap);
    follow = xcalloc(nd ? nd : 1, sizeof(*follow));
    for (size_t i = 0; i < nd && r >= 0; i++) {
        struct cpuset cs = {0};
        if (read_cpus(p, desc[i], &cs) >= 0) {
            follow[i] = same_set(&cs, &old);
            if (!follow[i] && cpuset_count(&cs) && !subset(&cs, s)) {
                _cleanup_free_ char *t = cpuset_format(&cs);
                *ret_err =
                    xasprintf("its child %s pins CPUs %s outside the packed set", desc[i], t);
                r = -EBUSY;
            }
        }
        cpuset_free(&cs);
    }
    for (int c = -1; (c = cpuset_next(&old, c)) >= 0;)
        if (cpuset_has(s, (unsigned)c))
            cpuset_add(&inter, (unsigned)c);
    _cleanup_free_ char *it = cpuset_format(&inter), *st = cpuset_format(s);
    const char *fail = NULL, *val = st;
    /* phase 1: shrink to S ∩ old, deepest first */
    if (r >= 0 && !same_set(&inter, &old) && cpuset_count(&inter)) {
        for (size_t i = nd; i-- > 0 && r >= 0;)
            if (follow[i]) {
                _cleanup_free_ char *f = cpus_file(p, desc[i]);
                if ((r = journal_set(j, HOST_SYS, f, it, NULL)) < 0)
                    fail = desc[i], val = it;
            }
        if (r >= 0) {
            _cleanup_free_ char *f = cpus_file(p, cg);
            if ((r = journal_set(j, HOST_SYS, f, it, NULL)) < 0)
                fail = cg, val = it;
        }
    }
    /* phase 2: grow to S, parent first */
    if (r >= 0 && !same_set(&inter, s)) {
        _cleanup_free_ char *f = cpus_file(p, cg);
        if ((r = journal_set(j, HOST_SYS, f, st, NULL)) < 0)
            fail = cg;
        for (size_t i = 0; i < nd && r >= 0; i++)
            if (follow[i]) {
                _cleanup_free_ char *fd = cpus_file(p, desc[i]);
                if ((r = journal_set(j, HOST_SYS, fd, st, NULL)) < 0)
                    fail = desc[i];
            }
    }
    if (fail) {
        _cleanup_free_ char *f = cpus_file(p, fail);
        _cleanup_free_ char *disp = host_display_path(p->h, HOST_SYS, f);
        *ret_err = xasprintf("the kernel refused CPUs %s in %s: %s", val, disp, strerror(-r));
    }
    free_names(desc, nd);
    free(follow);
    cpuset_free(&old);
    cpuset_free(&inter);
    return r;
}

/* enable_controller = yes: "+cpuset" into the subtree_control of every
 * cgroup from the root down to CG's parent that lacks it, parents first
 * (the kernel enables a controller only below one that has it). */
static int enable_controller(struct packer *p, struct journal *j, const char *cg, char **ret_err)
{
    _cleanup_free_ char *dir = xstrdup(p->hier.base);
    for (const char *c = cg;;) {
        _cleanup_free_ char *f = xasprintf("%s/cgroup.subtree_control", dir);
        _cleanup_free_ char *v = NULL;
        if (host_read_str(p->h, HOST_SYS, f, &v) >= 0 && !word_in(v, "cpuset")) {
            int r = journal_set(j, HOST_SYS, f, "+cpuset", NULL);
            if (r < 0) {
                _cleanup_free_ char *d = host_display_path(p->h, HOST_SYS, f);
                *ret_err = xasprintf("the kernel refused +cpuset in %s: %s", d, strerror(-r));
                return r;
            }
        }
        size_t n = strcspn(c, "/");
        if (!c[n])
            return 0; /* DIR was CG's parent */
        char *next = xasprintf("%s/%.*s", dir, (int)n, c);
        free(dir);
        dir = next;
        c += n + 1;
    }
}

/* The agent itself follows the packed set on a live machine, so that its
 * own ticks do not wake the CPUs it freed; its first affinity comes back
 * when the set is let go. Not journalled: it dies with the process. */
static void follow_set(struct packer *p, const struct cpuset *s)
{
    if (!p->h->live)
        return;
    if (!p->own_saved) {
        CPU_ZERO(&p->own);
        if (sched_getaffinity(0, sizeof(p->own), &p->own) < 0)
            return;
        p->own_saved = true;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c = -1; (c = cpuset_next(s, c)) >= 0;)
        if (c < CPU_SETSIZE && CPU_ISSET(c, &p->own))
            CPU_SET(c, &set);
    if (CPU_COUNT(&set))
        (void)sched_setaffinity(0, sizeof(set), &set);
}

static void unfollow_set(struct packer *p)
{
    if (p->own_saved)
        (void)sched_setaffinity(0, sizeof(p->own), &p->own);
    p->own_saved = false;
}

/* S to every active cgroup (ALL) or only those not ours yet, in one
 * transaction: a refusal rolls back everything this call wrote. */
static int apply(struct packer *p, const struct cpuset *s, bool all, char **ret_msg)
{
    struct journal *j;
    _cleanup_free_ char *jerr = NULL;
    int r = journal_open(p->h, p->journal, PACK_JOURNAL_OWNER, &j, &jerr);
    if (r < 0) {
        /* another tuner holds the lock: said once per wait, tried every tick */
        if (r != -EBUSY || !p->busy_said)
            *ret_msg = xasprintf("packer: %s%s", jerr ? jerr : strerror(-r),
                                 r == -EBUSY ? "; trying again every tick" : "");
        p->busy_said = r == -EBUSY;
        return r;
    }
    p->busy_said = false;
    journal_begin(j);
    bool wrote[PACK_MAX_CGROUPS] = {0};
    for (size_t i = 0; i < p->ncg && r >= 0; i++) {
        struct pcg *g = &p->cg[i];
        if (!g->active || (!all && g->ours))
            continue;
        _cleanup_free_ char *err = NULL;
        if (g->enable)
            r = enable_controller(p, j, g->path, &err);
        if (r >= 0)
            r = write_cgroup(p, j, g->path, s, &err);
        if (r == -EBUSY && !strstr(err, "refused")) {
            /* a pinned child: leave this cgroup alone, go on with the others */
            set_note(&g->note, xasprintf("%s: left alone", err));
            g->active = false;
            if (g->ours)
                p->need_reset = true; /* it holds an earlier set of ours: give it back */
            r = 0;
            continue;
        }
        if (r < 0) {
            _cleanup_free_ char *rb = NULL;
            int rr = journal_rollback(j, &rb);
            *ret_msg = xasprintf("packer: cgroup %s: %s; rolled back this tick's writes%s%s",
                                 g->path, err, rr < 0 ? " (partly: " : "", rr < 0 ? rb : "");
            if (rr < 0) {
                char *m = xasprintf("%s)", *ret_msg);
                free(*ret_msg);
                *ret_msg = m;
            }
            /* the same refusal tick after tick: said once */
            if (p->note && streq(p->note, *ret_msg)) {
                free(*ret_msg);
                *ret_msg = NULL;
            } else {
                set_note(&p->note, xstrdup(*ret_msg));
            }
            p->failures++;
            journal_close(j);
            return r;
        }
        wrote[i] = true;
    }
    journal_close(j);
    for (size_t i = 0; i < p->ncg; i++)
        if (wrote[i])
            p->cg[i].ours = true;
    set_copy(&p->current, s);
    p->packed = true;
    free(p->cpus_text);
    p->cpus_text = cpuset_format(s);
    set_note(&p->note, NULL);
    follow_set(p, s);
    return 1;
}

int packer_release(struct packer *p, char **ret_err)
{
    bool any = false;
    for (size_t i = 0; i < p->ncg; i++)
        any |= p->cg[i].ours;
    if (!any && !p->packed)
        return 0;
    struct journal *j;
    _cleanup_free_ char *jerr = NULL;
    int r = journal_open(p->h, p->journal, PACK_JOURNAL_OWNER, &j, &jerr);
    if (r < 0) {
        *ret_err = xasprintf("packer: %s", jerr ? jerr : strerror(-r));
        return r;
    }
    struct journal_restore_report rep = {0};
    r = journal_restore(j, PACK_JOURNAL_OWNER, 0, &rep);
    journal_close(j);
    if (r < 0) {
        struct strbuf b = {0};
        strbuf_appendf(&b, "packer: %zu cpuset%s not restored",
                       rep.failed + rep.changed + rep.refused,
                       rep.failed + rep.changed + rep.refused == 1 ? "" : "s");
        for (size_t i = 0; i < rep.nlines; i++)
            strbuf_appendf(&b, "%s %s", i ? ";" : ":", rep.lines[i]);
        *ret_err = strbuf_steal(&b);
    }
    journal_restore_report_free(&rep);
    for (size_t i = 0; i < p->ncg; i++)
        p->cg[i].ours = false;
    p->packed = false;
    unfollow_set(p);
    cpuset_free(&p->current);
    p->current = (struct cpuset){0};
    free(p->cpus_text);
    p->cpus_text = xstrdup("");
    return r;
}

void packer_free(struct packer *p)
{
    if (!p)
        return;
    _cleanup_free_ char *err = NULL;
    if (packer_release(p, &err) < 0 && err)
        fprintf(stderr, "watt agent: %s\n", err);
    for (size_t i = 0; i < p->nfds; i++)
        close(p->fds[i]);
    free(p->fds);
    for (size_t i = 0; i < p->npolls; i++)
        free(p->polls[i].path);
    free(p->polls);
    for (size_t i = 0; i < p->ncg; i++) {
        free(p->cg[i].path);
        free(p->cg[i].note);
    }
    free(p->cg);
    free(p->st);
    pack_config_clear(&p->c);
    pack_hier_clear(&p->hier);
    cpuset_free(&p->current);
    free(p->journal);
    free(p->psi_source);
    free(p->hier_text);
    free(p->demand_source);
    free(p->cpus_text);
    free(p->note);
    free(p);
}

/* Add a /proc/stat sample at NOW; the demand over the window, NaN with
 * fewer than two samples. */
/* demand = cgroups: the packed cgroups' usage, µs; false when one
 * cannot be read (cgroup2 has no cpu.stat for it). */
static bool cgroups_usage(struct packer *p, uint64_t *ret_us)
{
    const char *base = p->hier.v2;
    uint64_t sum = 0;
    for (size_t i = 0; base && i < p->ncg; i++) {
        if (!p->cg[i].active)
            continue;
        _cleanup_free_ char *v = NULL;
        uint64_t us;
        if (host_read_strf(p->h, HOST_SYS, &v, "%s/%s/cpu.stat", base, p->cg[i].path) < 0 ||
            guard_parse_cpu_stat(v, &us) < 0)
            return false;
        sum += us;
    }
    *ret_us = sum;
    return base != NULL;
}

static void measure(struct packer *p, uint64_t now)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    uint64_t busy, total;
    if (p->c.demand_cgroups) {
        /* busy: µs of CPU used; total: µs of wall time, per one CPU */
        if (!cgroups_usage(p, &busy))
            return;
        total = now / 1000;
    } else if (host_read(p->h, HOST_PROC, "stat", &text, &len) < 0 ||
               pack_parse_proc_stat(text, &busy, &total) < 0) {
        return;
    }
    size_t at = (p->ring_head + p->nring) % RING;
    if (p->nring == RING) {
        p->ring_head = (p->ring_head + 1) % RING;
        p->nring--;
        at = (p->ring_head + p->nring) % RING;
    }
    p->ring[at].t = now, p->ring[at].busy = busy, p->ring[at].total = total;
    p->nring++;
    uint64_t window = (uint64_t)(p->c.window_s * 1e9);
    while (p->nring > 2 && now - p->ring[(p->ring_head + 1) % RING].t >= window) {
        p->ring_head = (p->ring_head + 1) % RING;
        p->nring--;
    }
    if (p->nring < 2)
        return;
    size_t first = p->ring_head;
    uint64_t db = busy - p->ring[first].busy, dt = total - p->ring[first].total;
    if (dt == 0 || busy < p->ring[first].busy)
        return;
    p->demand = (double)db / (double)dt * (p->c.demand_cgroups ? 1 : p->online);
}

/* The plan input of this moment: topology, isolated and guarded CPUs,
 * pinned cgroups. */
struct moment {
    struct topology topo;
    struct cpu_isolation iso;
    struct cpuset excluded;
};

static int moment_read(struct packer *p, struct moment *m)
{
    struct diags d = {0};
    *m = (struct moment){0};
    int r = topology_read(p->h, &m->topo, &d);
    if (r < 0) {
        diags_free(&d);
        return r;
    }
    isolation_read(p->h, m->topo.ncpu, &m->iso, &d);
    diags_free(&d);
    for (int c = -1; (c = cpuset_next(&m->iso.all, c)) >= 0;)
        cpuset_add(&m->excluded, (unsigned)c);
    for (int c = -1; (c = cpuset_next(&p->c.guard_cpus, c)) >= 0;)
        cpuset_add(&m->excluded, (unsigned)c);
    /* cgroup2 isolated partitions (cpuset.cpus.partition = isolated): the
     * root's cpuset.cpus.isolated lists their CPUs (6.7 on) */
    _cleanup_free_ char *iso = NULL;
    struct cpuset part = {0};
    if (!p->hier.v1 && p->hier.base &&
        host_read_strf(p->h, HOST_SYS, &iso, "%s/cpuset.cpus.isolated", p->hier.base) >= 0 &&
        cpuset_parse(iso, &part) >= 0)
        for (int c = -1; (c = cpuset_next(&part, c)) >= 0;)
            cpuset_add(&m->excluded, (unsigned)c);
    cpuset_free(&part);
    p->online = cpuset_count(&m->topo.online);
    return 0;
}

static void moment_free(struct moment *m)
{
    topology_free(&m->topo);
    isolation_free(&m->iso);
    cpuset_free(&m->excluded);
}

static bool any_new(const struct packer *p)
{
    for (size_t i = 0; i < p->ncg; i++)
        if (p->cg[i].active && !p->cg[i].ours)
            return true;
    return false;
}

static int grow_now(struct packer *p, uint64_t woke_ns, const char *why, char **ret_msg);
static bool polled_pressure(struct packer *p, uint64_t now);

int packer_tick(struct packer *p, uint64_t now, char **ret_msg)
{
    *ret_msg = NULL;
    if (!p->hier.base)
        return 0;
    struct moment m;
    int r = moment_read(p, &m);
    if (r < 0) {
        *ret_msg = xasprintf("packer: cannot read the topology: %s", strerror(-r));
        return r;
    }
    refresh_cgroups(p, now, &m.excluded);
    if (p->need_reset) {
        _cleanup_free_ char *err = NULL;
        r = packer_release(p, &err);
        if (r < 0) {
            *ret_msg = TAKE_PTR(err);
            moment_free(&m);
            return r;
        }
        p->need_reset = false;
        refresh_cgroups(p, now, &m.excluded);
    }
    bool any_active = false;
    for (size_t i = 0; i < p->ncg; i++)
        any_active |= p->cg[i].active;
    if (!any_active && p->packed) {
        /* every cgroup is left alone now: hold no set */
        _cleanup_free_ char *err = NULL;
        if ((r = packer_release(p, &err)) < 0) {
            *ret_msg = TAKE_PTR(err);
            moment_free(&m);
            return r;
        }
    }
    measure(p, now); /* after refresh: demand = cgroups sums the active ones */
    p->target = p->demand * (1 + p->c.headroom);
    if (isnan(p->demand)) {
        moment_free(&m);
        return 0; /* measuring */
    }
    if (!any_active) {
        moment_free(&m);
        return 0; /* nothing to pack: each cgroup's note says why */
    }
    if (polled_pressure(p, now) && p->packed) {
        moment_free(&m);
        return grow_now(p, now, "read at the tick", ret_msg);
    }
    struct pack_input in = {.topo = &m.topo,
                            .excluded = &m.excluded,
                            .demand_cpus = p->demand,
                            .headroom = p->c.headroom,
                            .min_cpus = p->c.min_cpus};
    enum pack_action act;
    struct pack_plan plan;
    r = pack_decide(&in, p->packed ? &p->current : NULL, p->c.shrink_slack, &act, &plan);
    if (r < 0) {
        *ret_msg =
            xasprintf("packer: no plan: %s", r == -ENOSPC ? "every CPU is excluded" : strerror(-r));
        moment_free(&m);
        return r;
    }
    p->target = plan.target;
    if (act == PACK_SHRINK && now < p->hold_shrink_until)
        act = PACK_KEEP; /* a pressure growth holds for a window */
    if (act == PACK_KEEP && !any_new(p)) {
        pack_plan_free(&plan);
        moment_free(&m);
        return 0;
    }
    const struct cpuset *s = act == PACK_KEEP ? &p->current : &plan.cpus;
    _cleanup_free_ char *before = xstrdup(p->cpus_text);
    r = apply(p, s, act != PACK_KEEP, ret_msg);
    if (r > 0) {
        if (act != PACK_KEEP)
            p->actions[act]++;
        if (act == PACK_SHRINK)
            p->last_shrink_ns = now;
        *ret_msg = xasprintf("packer: %s: CPUs %s%s%s (demand %.2f CPUs, target %.2f)",
                             act == PACK_KEEP ? "joined" : pack_action_name(act), p->cpus_text,
                             *before ? ", was " : "", before, p->demand, p->target);
    }
    pack_plan_free(&plan);
    moment_free(&m);
    return r;
}

/* Grow by one core at once (CPU pressure seen at WOKE_NS). */
static int grow_now(struct packer *p, uint64_t woke_ns, const char *why, char **ret_msg)
{
    p->pressure_events++;
    if (!p->packed || !p->hier.base)
        return 0;
    struct moment m;
    int r = moment_read(p, &m);
    if (r < 0)
        return r;
    refresh_cgroups(p, woke_ns, &m.excluded);
    /* one core more than the set in force */
    struct pack_input in = {.topo = &m.topo,
                            .excluded = &m.excluded,
                            .demand_cpus = (double)cpuset_count(&p->current) + 1,
                            .headroom = 0,
                            .min_cpus = p->c.min_cpus};
    struct pack_plan plan;
    r = pack_plan_build(&in, &plan);
    if (r < 0) {
        moment_free(&m);
        return r;
    }
    if (subset(&plan.cpus, &p->current)) {
        pack_plan_free(&plan);
        moment_free(&m);
        return 0; /* nothing more to give */
    }
    _cleanup_free_ char *before = xstrdup(p->cpus_text);
    r = apply(p, &plan.cpus, true, ret_msg);
    if (r > 0) {
        uint64_t done = now_monotonic_ns();
        double lat = (double)(done - woke_ns) / 1e9;
        p->last_latency = lat;
        p->lat_sum += lat;
        p->lat_count++;
        for (size_t b = 0; b < PACK_LATENCY_BUCKETS; b++)
            if (lat <= pack_latency_bounds[b])
                p->lat_buckets[b]++;
        p->actions[PACK_GROW]++;
        /* pressure soon after a shrink: the shrink was wrong; hold the
         * next one off twice as long (up to 32 windows), so a set on a
         * contended machine does not flap at the window's rhythm */
        if (p->last_shrink_ns && woke_ns - p->last_shrink_ns < (uint64_t)(2 * p->hold_s * 1e9))
            p->hold_s = fmin(p->hold_s * 2, 32 * p->c.window_s);
        else
            p->hold_s = p->c.window_s;
        p->hold_shrink_until = woke_ns + (uint64_t)(p->hold_s * 1e9); /* the tick's clock */
        *ret_msg = xasprintf("packer: CPU pressure (%s): grew to CPUs %s, was %s, in %.3f ms", why,
                             p->cpus_text, before, lat * 1e3);
    }
    pack_plan_free(&plan);
    moment_free(&m);
    return r;
}

int packer_pressure(struct packer *p, int fd, uint64_t woke_ns, char **ret_msg)
{
    *ret_msg = NULL;
    bool ours = false;
    for (size_t i = 0; i < p->nfds; i++)
        ours |= p->fds[i] == fd;
    if (!ours)
        return 0;
    return grow_now(p, woke_ns, "PSI trigger", ret_msg);
}

int pack_parse_pressure_total(const char *text, uint64_t *ret_us)
{
    if (strncmp(text, "some ", 5) != 0)
        return -EINVAL;
    const char *t = strstr(text, " total=");
    const char *nl = strchr(text, '\n');
    if (!t || (nl && t > nl) || t[7] < '0' || t[7] > '9')
        return -EINVAL;
    *ret_us = strtoull(t + 7, NULL, 10);
    return 0;
}

/* The polled pressure files: true when one stalled more than the
 * trigger's rate (stall_us per window_us) since the previous tick. */
static bool polled_pressure(struct packer *p, uint64_t now)
{
    bool hit = false;
    uint64_t window = (uint64_t)p->c.psi_window_us * 1000;
    for (size_t i = 0; i < p->npolls; i++) {
        struct psi_poll *q = &p->polls[i];
        _cleanup_free_ char *text = NULL;
        size_t len;
        uint64_t total;
        if (host_read(p->h, q->d, q->path, &text, &len) < 0 ||
            pack_parse_pressure_total(text, &total) < 0)
            continue;
        if (q->n && (total < q->v[q->n - 1].total_us || now <= q->v[q->n - 1].t_ns))
            q->n = 0; /* a counter or clock going back: start again */
        /* drop what is older than the window, keeping one reading at or
         * before its start as the baseline */
        size_t k = 0;
        while (k + 1 < q->n && now - q->v[k + 1].t_ns >= window)
            k++;
        if (k) {
            memmove(q->v, q->v + k, (q->n - k) * sizeof(q->v[0]));
            q->n -= k;
        }
        if (q->n == PSI_RING) {
            memmove(q->v, q->v + 1, (q->n - 1) * sizeof(q->v[0]));
            q->n--;
        }
        if (q->n) {
            /* as the kernel's trigger: the stall within the window against
             * the threshold; a baseline older than the window (ticks longer
             * than it) scales the threshold to the span */
            uint64_t span = now - q->v[0].t_ns, stall = total - q->v[0].total_us;
            double need = (double)p->c.stall_us * (span > window ? (double)span / window : 1);
            if ((double)stall >= need) {
                hit = true;
                q->n = 0; /* re-armed from here, as a trigger is once per window */
            }
        }
        q->v[q->n].total_us = total, q->v[q->n].t_ns = now;
        q->n++;
    }
    return hit;
}

void packer_get_status(const struct packer *p, struct pack_status *ret)
{
    struct packer *w = (struct packer *)p; /* the status array is a cache */
    for (size_t i = 0; i < p->ncg; i++)
        w->st[i] = (struct pack_cgroup_status){
            p->cg[i].path, p->cg[i].ours && p->cg[i].active && p->packed, p->cg[i].note};
    *ret = (struct pack_status){
        .state = !p->hier.base      ? "unavailable"
                 : p->note          ? "failing"
                 : p->packed        ? "packed"
                 : isnan(p->demand) ? "measuring"
                                    : "unpacked",
        .cpus = p->cpus_text,
        .ncpus = p->packed ? cpuset_count(&p->current) : 0,
        .demand_cpus = p->demand,
        .target_cpus = p->target,
        .hierarchy = p->hier_text,
        .demand_source = p->demand_source,
        .pressure_source = p->psi_source,
        .cgroups = w->st,
        .ncgroups = p->ncg,
        .failures = p->failures,
        .pressure_events = p->pressure_events,
        .last_grow_latency_s = p->last_latency,
        .grow_latency_count = p->lat_count,
        .grow_latency_sum_s = p->lat_sum,
        .note = p->note,
        .interval_s = p->c.interval_s,
        .shrink_hold_s = p->hold_s,
    };
    memcpy(ret->actions, p->actions, sizeof(ret->actions));
    memcpy(ret->grow_latency_buckets, p->lat_buckets, sizeof(ret->grow_latency_buckets));
}
