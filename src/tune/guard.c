/* The latency guard: see guard.h. */
#include "tune/guard.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "tune/journal.h"
#include "tune/profile.h"

#define NSEC_PER_SEC 1000000000ull

/* ---- the state machine ---- */

static uint64_t seconds_to_ns(double s)
{
    if (!(s > 0))
        return 0;
    if (s > 1e9) /* 30 years: forever */
        s = 1e9;
    return (uint64_t)llround(s * 1e9);
}

void guard_fsm_init(struct guard_fsm *f, double busy_after_s, double idle_after_s)
{
    *f = (struct guard_fsm){
        .state = GUARD_IDLE,
        .busy_after_ns = seconds_to_ns(busy_after_s),
        .idle_after_ns = seconds_to_ns(idle_after_s),
    };
}

bool guard_fsm_holding(const struct guard_fsm *f)
{
    return f->state == GUARD_HELD || f->state == GUARD_RELEASING;
}

const char *guard_state_name(enum guard_state s)
{
    static const char *const names[] = {"idle", "arming", "held", "releasing"};
    return (unsigned)s < ARRAY_SIZE(names) ? names[s] : "unknown";
}

enum guard_action guard_fsm_tick(struct guard_fsm *f, uint64_t now_ns, bool busy)
{
    if (f->ticked && now_ns < f->last_ns)
        now_ns = f->last_ns; /* backwards: no time passed */
    /* this tick's measurement covers (since, now] */
    uint64_t since = f->ticked ? f->last_ns : now_ns;
    if (guard_fsm_holding(f))
        f->held_ns += now_ns - since;
    f->last_ns = now_ns;
    f->ticked = true;

    switch (f->state) {
    case GUARD_IDLE:
        if (!busy)
            return GUARD_NONE;
        f->state = GUARD_ARMING;
        f->run_start_ns = since;
        __attribute__((fallthrough));
    case GUARD_ARMING:
        if (!busy) {
            f->state = GUARD_IDLE;
            return GUARD_NONE;
        }
        if (now_ns - f->run_start_ns < f->busy_after_ns)
            return GUARD_NONE;
        f->state = GUARD_HELD;
        f->transitions++;
        return GUARD_HOLD;
    case GUARD_HELD:
        if (busy)
            return GUARD_NONE;
        f->state = GUARD_RELEASING;
        f->run_start_ns = since;
        __attribute__((fallthrough));
    case GUARD_RELEASING:
        if (busy) { /* a blip: the hold stays */
            f->state = GUARD_HELD;
            return GUARD_NONE;
        }
        if (now_ns - f->run_start_ns < f->idle_after_ns)
            return GUARD_NONE;
        f->state = GUARD_IDLE;
        f->transitions++;
        return GUARD_RELEASE;
    }
    return GUARD_NONE;
}

/* ---- workloads ---- */

static bool bad_cgroup_path(const char *p)
{
    for (const char *s = p; *s;) {
        size_t n = strcspn(s, "/");
        if ((n == 2 && s[0] == '.' && s[1] == '.') || (n == 1 && s[0] == '.'))
            return true;
        s += n;
        s += strspn(s, "/");
    }
    return false;
}

static int parse_port(const char *s, unsigned *ret)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || *s == '+' || v < 1 || v > 65535)
        return -EINVAL;
    *ret = (unsigned)v;
    return 0;
}

int guard_workload_parse(const char *spec, struct guard_workload *ret, char **ret_err)
{
    struct guard_workload w = {0};
    const char *colon = strchr(spec, ':');
    const char *arg = colon ? colon + 1 : "";
    size_t klen = colon ? (size_t)(colon - spec) : strlen(spec);

    if (klen == 6 && strncmp(spec, "cgroup", 6) == 0) {
        arg += strspn(arg, "/");
        if (strlen(arg) > 1024 || bad_cgroup_path(arg)) {
            *ret_err =
                xasprintf("workload '%s': a cgroup path without '.' or '..' components", spec);
            return -EINVAL;
        }
        w.kind = GUARD_WL_CGROUP;
        w.name = xstrdup(arg);
        size_t n = strlen(w.name);
        while (n && w.name[n - 1] == '/')
            w.name[--n] = '\0';
    } else if (klen == 7 && strncmp(spec, "process", 7) == 0) {
        if (!*arg || strlen(arg) > 15 || strchr(arg, '/') || strchr(arg, '\n')) {
            *ret_err = xasprintf("workload '%s': a process name is its comm, 1 to 15 bytes "
                                 "without '/'",
                                 spec);
            return -EINVAL;
        }
        w.kind = GUARD_WL_PROCESS;
        w.name = xstrdup(arg);
    } else if (klen == 4 && strncmp(spec, "port", 4) == 0) {
        if (parse_port(arg, &w.port) < 0) {
            *ret_err = xasprintf("workload '%s': want port:N, N in 1..65535", spec);
            return -EINVAL;
        }
        w.kind = GUARD_WL_PORT;
    } else {
        *ret_err = xasprintf("workload '%s': want cgroup:PATH, process:NAME or port:N", spec);
        return -EINVAL;
    }
    w.spec = xstrdup(spec);
    *ret = w;
    return 0;
}

void guard_workload_clear(struct guard_workload *w)
{
    free(w->name);
    free(w->spec);
    w->name = w->spec = NULL;
}

/* ---- parsers ---- */

int guard_parse_cpu_stat(const char *text, uint64_t *ret_usage_us)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, "usage_usec ", 11) != 0)
            continue;
        const char *v = l + 11;
        char *end;
        errno = 0;
        unsigned long long u = strtoull(v, &end, 10);
        if (errno || end == v || *v == '-' || (*end && *end != '\n'))
            return -EINVAL;
        *ret_usage_us = u;
        return 0;
    }
    return -EINVAL;
}

/* The next space-separated token of [*p, end) as an unsigned number;
 * *ok cleared when it is not one. */
static uint64_t next_u64(const char **p, const char *end, bool *ok)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    uint64_t v = 0;
    const char *start = s;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - 9) / 10)
            *ok = false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (s == start || (s < end && *s != ' ' && *s != '\n'))
        *ok = false;
    *p = s;
    return v;
}

static void skip_token(const char **p, const char *end)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    while (s < end && *s != ' ' && *s != '\n')
        s++;
    *p = s;
}

int guard_parse_pid_stat(const char *text, size_t len, char **ret_comm, uint64_t *ret_ticks,
                         uint64_t *ret_start)
{
    const char *end = text + len;
    const char *open = memchr(text, '(', len);
    const char *close = NULL;
    for (const char *s = end; s > text; s--)
        if (s[-1] == ')') {
            close = s - 1;
            break;
        }
    if (!open || !close || close < open || close - open - 1 > 64)
        return -EINVAL;
    /* after ")": state (field 3) ... utime (14), stime (15) ... starttime (22) */
    const char *p = close + 1;
    bool ok = true;
    for (int field = 3; field < 14; field++)
        skip_token(&p, end);
    uint64_t utime = next_u64(&p, end, &ok);
    uint64_t stime = next_u64(&p, end, &ok);
    for (int field = 16; field < 22; field++)
        skip_token(&p, end);
    uint64_t start = next_u64(&p, end, &ok);
    if (!ok || utime > UINT64_MAX - stime)
        return -EINVAL;
    char *comm = xmalloc((size_t)(close - open));
    memcpy(comm, open + 1, (size_t)(close - open - 1));
    comm[close - open - 1] = '\0';
    *ret_comm = comm;
    *ret_ticks = utime + stime;
    *ret_start = start;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* A whole token of hex digits; -1 when it is not one (or too long). */
static long hex_token(const char *s, size_t n)
{
    if (n == 0 || n > 8)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = hexval(s[i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* One line: "  12: 0100007F:1F90 00000000:0000 0A ..." */
static void tcp_line(const char *l, size_t len, unsigned port, unsigned *established,
                     bool *listening)
{
    const char *tok[4];
    size_t tlen[4];
    const char *s = l, *end = l + len;
    for (int i = 0; i < 4; i++) {
        while (s < end && *s == ' ')
            s++;
        tok[i] = s;
        while (s < end && *s != ' ')
            s++;
        tlen[i] = (size_t)(s - tok[i]);
        if (!tlen[i])
            return;
    }
    const char *colon = memchr(tok[1], ':', tlen[1]);
    if (!colon || tlen[0] < 2 || tok[0][tlen[0] - 1] != ':')
        return;
    size_t alen = (size_t)(colon - tok[1]); /* 8 hex digits for IPv4, 32 for IPv6 */
    if (alen != 8 && alen != 32)
        return;
    for (size_t i = 0; i < alen; i++)
        if (hexval(tok[1][i]) < 0)
            return;
    long lport = hex_token(colon + 1, (size_t)(tok[1] + tlen[1] - colon - 1));
    long st = hex_token(tok[3], tlen[3]);
    if (lport != (long)port)
        return;
    if (st == 0x01)
        (*established)++;
    else if (st == 0x0A)
        *listening = true;
}

void guard_parse_net_tcp(const char *text, unsigned port, unsigned *established, bool *listening)
{
    for (const char *l = text; *l;) {
        size_t n = strcspn(l, "\n");
        tcp_line(l, n, port, established, listening);
        l += n;
        if (*l)
            l++;
    }
}

/* ---- probes ---- */

void guard_probe_init(struct guard_probe *p, const struct guard_workload *w)
{
    *p = (struct guard_probe){.w = w, .clk_tck = sysconf(_SC_CLK_TCK)};
    if (p->clk_tck <= 0)
        p->clk_tck = 100;
}

void guard_probe_clear(struct guard_probe *p)
{
    free(p->pids);
    p->pids = NULL;
    p->npids = 0;
    p->scans = 0;
    p->have_prev = false;
}

/* Where a cgroup's CPU time is: v2 (pure, or hybrid's "unified"), then v1
 * cpuacct (separate or co-mounted with cpu). */
static int read_cgroup(struct host *h, const char *name, uint64_t *ret_ns, const char **ret_src)
{
    static const char *const v2[] = {"fs/cgroup", "fs/cgroup/unified"};
    static const char *const v1[] = {"fs/cgroup/cpuacct", "fs/cgroup/cpu,cpuacct"};
    const char *sep = *name ? "/" : "";
    for (size_t i = 0; i < ARRAY_SIZE(v2); i++) {
        _cleanup_free_ char *text = NULL;
        uint64_t us;
        if (host_read_strf(h, HOST_SYS, &text, "%s%s%s/cpu.stat", v2[i], sep, name) == 0 &&
            guard_parse_cpu_stat(text, &us) == 0) {
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

static int probe_cgroup(struct host *h, struct guard_probe *p, struct guard_reading *r)
{
    uint64_t ns;
    if (read_cgroup(h, p->w->name, &ns, &r->source) < 0) {
        p->have_prev = false;
        r->source = "cgroup";
        return 0;
    }
    r->present = true;
    if (p->have_prev && ns >= p->prev_cpu_ns) {
        r->have_cpu = true;
        r->cpu_ns = ns - p->prev_cpu_ns;
    }
    p->prev_cpu_ns = ns;
    p->have_prev = true;
    return 0;
}

static int pid_cmp(const void *a, const void *b)
{
    int x = ((const struct guard_probe_pid *)a)->pid, y = ((const struct guard_probe_pid *)b)->pid;
    return (x > y) - (x < y);
}

static const struct guard_probe_pid *find_pid(const struct guard_probe *p, int pid)
{
    struct guard_probe_pid key = {.pid = pid};
    return p->npids ? bsearch(&key, p->pids, p->npids, sizeof(key), pid_cmp) : NULL;
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* One process: its entry in NOW, and its ticks since the previous probe
 * added to *TICKS when it has the name. A process known not to have the
 * name is not read again until the next full scan. */
static void probe_pid(struct host *h, const struct guard_probe *p, const char *name, bool full,
                      struct guard_probe_pid *now, bool *ret_keep, uint64_t *ticks)
{
    int pid = atoi(name);
    const struct guard_probe_pid *old = find_pid(p, pid);
    *ret_keep = false;
    if (old && !old->match && !full) {
        *now = *old;
        *ret_keep = true;
        return;
    }
    _cleanup_free_ char *text = NULL, *comm = NULL;
    uint64_t t, start;
    if (host_read_strf(h, HOST_PROC, &text, "%s/stat", name) < 0 ||
        guard_parse_pid_stat(text, strlen(text), &comm, &t, &start) < 0)
        return; /* exited meanwhile */
    bool match = streq(comm, p->w->name);
    if (match && old && old->match && old->start == start && t >= old->ticks)
        *ticks += t - old->ticks;
    *now = (struct guard_probe_pid){.pid = pid, .start = start, .ticks = t, .match = match};
    *ret_keep = true;
}

/* Every process whose comm is the name: CPU ticks since the previous
 * probe, per process (one that exited takes its last ticks along; one
 * seen with the name for the first time adds nothing this time). Only
 * new processes and those with the name are read on every probe; all of
 * them every GUARD_PROCESS_RESCAN probes, which finds a process that took
 * the name by exec() (same pid, same start time) or a reused pid. */
static int probe_process(struct host *h, struct guard_probe *p, struct guard_reading *r)
{
    char **names;
    size_t n;
    int ret = host_list(h, HOST_PROC, ".", &names, &n);
    if (ret < 0)
        return ret;
    bool full = p->scans++ % GUARD_PROCESS_RESCAN == 0;
    struct guard_probe_pid *now = xcalloc(n + 1, sizeof(*now));
    size_t nnow = 0;
    unsigned matched = 0;
    uint64_t ticks = 0;
    for (size_t i = 0; i < n; i++) {
        bool keep;
        if (!all_digits(names[i]))
            continue;
        probe_pid(h, p, names[i], full, &now[nnow], &keep, &ticks);
        if (keep)
            matched += now[nnow++].match;
    }
    host_free_list(names, n);
    qsort(now, nnow, sizeof(*now), pid_cmp);
    r->source = "process stat";
    r->present = matched > 0;
    r->nprocs = matched;
    r->have_cpu = p->have_prev;
    r->cpu_ns = ticks * NSEC_PER_SEC / (uint64_t)p->clk_tck;
    free(p->pids);
    p->pids = now;
    p->npids = nnow;
    p->have_prev = true;
    return 0;
}

/* "TCP: inuse 5 orphan 0 ..." of sockstat, "TCP6: inuse 1" of sockstat6:
 * the sockets in the table (listening and connected). -1 when unknown. */
long guard_parse_sockstat_inuse(const char *text, const char *proto)
{
    size_t plen = strlen(proto);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, proto, plen) != 0 || strncmp(l + plen, ": inuse ", 8) != 0)
            continue;
        char *end;
        errno = 0;
        long v = strtol(l + plen + 8, &end, 10);
        return errno || end == l + plen + 8 || v < 0 ? -1 : v;
    }
    return -1;
}

/* A seq_file read returns at most one kernel buffer (a page or more) and
 * never stops short of it by more than one record (under 256 bytes here)
 * unless the table ended: so a shorter read is the end, and the read that
 * would return 0 (a second walk of the whole TCP hash table) is skipped. */
#define SEQ_SHORT_READ (4096 - 256)

static int read_tcp_table(struct host *h, const char *path, char **ret)
{
    if (!h->live) /* a plain file: the host layer's read, faults and all */
        return host_read(h, HOST_PROC, path, ret, NULL);
    _cleanup_close_ int fd = host_open_fd(h, HOST_PROC, path, O_RDONLY);
    if (fd < 0)
        return fd;
    size_t len = 0, cap = 0;
    _cleanup_free_ char *buf = NULL;
    for (;;) {
        if (cap - len < 65536 + 1) {
            cap = cap ? cap * 2 : 131072;
            if (cap > 64u << 20)
                return -EFBIG;
            buf = xrealloc(buf, cap);
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        len += (size_t)n;
        if (n < SEQ_SHORT_READ)
            break;
    }
    buf[len] = '\0';
    *ret = TAKE_PTR(buf);
    return 0;
}

/* Both tables, each only when sockstat says it holds a socket: every read
 * of one walks the kernel's whole TCP hash table (sized by memory, ~2.5 ms
 * for 262144 buckets on the test VM), whatever few sockets it has. */
static int probe_port(struct host *h, struct guard_probe *p, struct guard_reading *r)
{
    static const struct {
        const char *table, *sockstat, *proto;
    } t[] = {{"net/tcp", "net/sockstat", "TCP"}, {"net/tcp6", "net/sockstat6", "TCP6"}};
    int found = 0;
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        _cleanup_free_ char *stat = NULL, *text = NULL;
        if (host_read(h, HOST_PROC, t[i].sockstat, &stat, NULL) == 0 &&
            guard_parse_sockstat_inuse(stat, t[i].proto) == 0) {
            found++;
            continue; /* no socket of this family at all */
        }
        if (read_tcp_table(h, t[i].table, &text) < 0)
            continue; /* no IPv6 */
        found++;
        guard_parse_net_tcp(text, p->w->port, &r->connections, &r->listening);
    }
    r->source = "net tcp";
    r->present = r->listening || r->connections > 0;
    p->have_prev = true;
    return found ? 0 : -ENOENT;
}

int guard_probe_read(struct host *h, struct guard_probe *p, struct guard_reading *ret)
{
    struct guard_reading r = {0};
    int err;
    switch (p->w->kind) {
    case GUARD_WL_CGROUP:
        err = probe_cgroup(h, p, &r);
        break;
    case GUARD_WL_PROCESS:
        err = probe_process(h, p, &r);
        break;
    default:
        err = probe_port(h, p, &r);
        break;
    }
    if (err < 0)
        return err;
    *ret = r;
    return 0;
}

/* ---- configuration ---- */

void guard_config_clear(struct guard_config *c)
{
    guard_workload_clear(&c->workload);
    cpuset_free(&c->cpus);
    free(c->origin);
    c->origin = NULL;
}

static bool num_in(const char *s, double min, double max, double *ret)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(d) || d < min || d > max)
        return false;
    *ret = d;
    return true;
}

/* Each key: the value or its default; an error names the origin. */
struct from_profile {
    struct host *h;
    const struct profile *p;
    struct guard_config *c;
    char *err;
};

static const char *get(struct from_profile *fp, const char *key, const char **origin)
{
    const struct profile_value *v = profile_get(fp->p, "latency", key);
    if (!v || !v->value || !*v->value)
        return NULL;
    *origin = v->origin ? v->origin : "profile";
    return v->value;
}

static bool get_num(struct from_profile *fp, const char *key, double min, double max, double *d)
{
    const char *origin, *s = get(fp, key, &origin);
    if (!s || fp->err)
        return true;
    if (num_in(s, min, max, d))
        return true;
    fp->err = xasprintf("%s: [latency] %s = %s: want a number in %g..%g", origin, key, s, min, max);
    return false;
}

static void get_latency(struct from_profile *fp)
{
    const char *origin, *s = get(fp, "latency_us", &origin);
    double d;
    if (!s) {
        fp->c->latency_us = 0; /* the point of a guard: no wake-up latency */
    } else if (num_in(s, 0, 2000000000, &d) && d == floor(d)) {
        fp->c->latency_us = (int32_t)d;
    } else {
        fp->err = xasprintf("%s: [latency] latency_us = %s: want µs in 0..2000000000", origin, s);
    }
}

static void get_cpus(struct from_profile *fp)
{
    const char *origin, *s = get(fp, "cpus", &origin);
    if (!s || fp->err)
        return;
    _cleanup_free_ char *online = NULL;
    if (streq(s, "all") && host_read_str(fp->h, HOST_SYS, "devices/system/cpu/online", &online) < 0)
        fp->err = xasprintf("%s: [latency] cpus = all: cannot read the online CPUs", origin);
    else if (cpuset_parse(online ? online : s, &fp->c->cpus) < 0 || !cpuset_count(&fp->c->cpus))
        fp->err =
            xasprintf("%s: [latency] cpus = %s: want a CPU list like 0-3,8 or all", origin, s);
}

int guard_config_from_profile(struct host *h, const struct profile *p, struct guard_config *ret,
                              char **ret_err)
{
    if (!profile_has_section(p, "latency"))
        return -ENOENT;
    struct from_profile probe = {.p = p};
    const char *origin;
    const char *wl = get(&probe, "workload", &origin);
    if (!wl) {
        *ret_err = xasprintf("profile %s: [latency] needs workload = cgroup:PATH, "
                             "process:NAME or port:N",
                             p->name);
        return -EINVAL;
    }
    struct guard_config c = {
        .busy_cpu_pct = GUARD_DEFAULT_BUSY_CPU_PCT,
        .busy_connections = GUARD_DEFAULT_CONNECTIONS,
        .busy_after_s = GUARD_DEFAULT_BUSY_AFTER_S,
        .idle_after_s = GUARD_DEFAULT_IDLE_AFTER_S,
    };
    struct from_profile fp = {.h = h, .p = p, .c = &c};
    _cleanup_free_ char *werr = NULL;
    if (guard_workload_parse(wl, &c.workload, &werr) < 0)
        fp.err = xasprintf("%s: %s", origin, werr);
    double d = c.busy_connections;
    get_cpus(&fp);
    if (!fp.err)
        get_latency(&fp);
    get_num(&fp, "busy_cpu_pct", 0, 100000, &c.busy_cpu_pct);
    if (get_num(&fp, "busy_connections", 1, 1000000, &d))
        c.busy_connections = (unsigned)d;
    get_num(&fp, "busy_after_s", 0, 86400, &c.busy_after_s);
    get_num(&fp, "idle_after_s", 0, 86400, &c.idle_after_s);
    if (fp.err) {
        guard_config_clear(&c);
        *ret_err = fp.err;
        return -EINVAL;
    }
    c.origin = xasprintf("profile %s", p->name);
    *ret = c;
    return 0;
}

/* ---- the guard ---- */

struct guard {
    struct host *h;
    struct guard_config c;
    char *journal;
    char *cpus_text;
    struct guard_probe probe;
    struct guard_fsm fsm;
    int fd; /* global mode: cpu_dma_latency, open while held */
    bool held;
    bool failing; /* the last hold or release failed */
    uint64_t held_ns, transitions, failures;
    uint64_t last_ns;
    bool ticked;
    struct guard_reading last;
    bool busy, measured;
    double cpu_ratio;
    char *note;
};

static void cpuset_copy(struct cpuset *dst, const struct cpuset *src)
{
    *dst = (struct cpuset){0};
    CPUSET_FOREACH (cpu, src)
        cpuset_add(dst, (unsigned)cpu);
}

int guard_new(struct host *h, const struct guard_config *c, const char *journal, struct guard **ret)
{
    struct guard *g = xcalloc(1, sizeof(*g));
    g->h = h;
    g->c = *c;
    g->c.workload.name = c->workload.name ? xstrdup(c->workload.name) : NULL;
    g->c.workload.spec = xstrdup(c->workload.spec ? c->workload.spec : "");
    g->c.origin = c->origin ? xstrdup(c->origin) : NULL;
    cpuset_copy(&g->c.cpus, &c->cpus);
    g->cpus_text = cpuset_format(&g->c.cpus);
    g->journal = journal ? xstrdup(journal) : NULL;
    g->fd = -1;
    g->cpu_ratio = NAN;
    guard_probe_init(&g->probe, &g->c.workload);
    guard_fsm_init(&g->fsm, c->busy_after_s, c->idle_after_s);
    *ret = g;
    return 0;
}

/* The per-CPU value: "n/a" is the sysfs spelling of 0 µs ("0" there
 * means no constraint; Documentation/ABI/testing/sysfs-devices-power). */
static void resume_value(int32_t us, char *buf, size_t len)
{
    if (us == 0)
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, "%" PRId32, us);
}

static int hold_cpus(struct guard *g, char **ret_err)
{
    struct journal *j;
    int r = journal_open(g->h, g->journal, GUARD_JOURNAL_OWNER, &j, ret_err);
    if (r < 0)
        return r;
    char value[16];
    resume_value(g->c.latency_us, value, sizeof(value));
    journal_begin(j);
    CPUSET_FOREACH (cpu, &g->c.cpus) {
        char path[96];
        snprintf(path, sizeof(path), "devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us",
                 cpu);
        r = journal_set(j, HOST_SYS, path, value, NULL);
        if (r < 0) {
            _cleanup_free_ char *display = host_display_path(g->h, HOST_SYS, path);
            _cleanup_free_ char *rerr = NULL;
            *ret_err = xasprintf("cannot write %s to %s: %s", value, display, strerror(-r));
            journal_rollback(j, &rerr);
            break;
        }
    }
    journal_close(j);
    return r < 0 ? r : 0;
}

static int release_cpus(struct guard *g, char **ret_err)
{
    struct journal *j;
    int r = journal_open(g->h, g->journal, GUARD_JOURNAL_OWNER, &j, ret_err);
    if (r < 0)
        return r;
    struct journal_restore_report rep = {0};
    r = journal_restore(j, GUARD_JOURNAL_OWNER, false, &rep);
    if (r < 0)
        *ret_err = xasprintf("restoring the per-CPU resume latency: %s",
                             rep.nlines ? rep.lines[0] : strerror(-r));
    journal_restore_report_free(&rep);
    journal_close(j);
    return r;
}

static int hold_global(struct guard *g, char **ret_err)
{
    int fd = host_open_fd(g->h, HOST_DEV, "cpu_dma_latency", O_WRONLY);
    int32_t v = g->c.latency_us;
    if (fd >= 0 && write(fd, &v, sizeof(v)) == (ssize_t)sizeof(v)) {
        g->fd = fd;
        return 0;
    }
    int r = fd < 0 ? fd : -errno;
    if (fd >= 0)
        close(fd);
    _cleanup_free_ char *display = host_display_path(g->h, HOST_DEV, "cpu_dma_latency");
    *ret_err =
        xasprintf("cannot hold %s at %" PRId32 " µs: %s", display, v, strerror(r < 0 ? -r : EIO));
    return r < 0 ? r : -EIO;
}

/* Closing the fd drops the request. A recorded tree has a plain file
 * there, which nothing resets: write the kernel's default back. */
static void release_global(struct guard *g)
{
    if (g->fd < 0)
        return;
    if (!g->h->live) {
        int32_t def = GUARD_LATENCY_DEFAULT_VALUE;
        (void)!pwrite(g->fd, &def, sizeof(def), 0);
    }
    close(g->fd);
    g->fd = -1;
}

static int do_hold(struct guard *g, char **ret_err)
{
    return cpuset_count(&g->c.cpus) ? hold_cpus(g, ret_err) : hold_global(g, ret_err);
}

int guard_release(struct guard *g, char **ret_err)
{
    if (!g || !g->held)
        return 0;
    if (cpuset_count(&g->c.cpus)) {
        int r = release_cpus(g, ret_err);
        if (r < 0)
            return r;
    } else {
        release_global(g);
    }
    g->held = false;
    g->transitions++;
    return 0;
}

void guard_free(struct guard *g)
{
    if (!g)
        return;
    _cleanup_free_ char *err = NULL;
    (void)guard_release(g, &err);
    release_global(g);
    guard_probe_clear(&g->probe);
    guard_config_clear(&g->c);
    free(g->journal);
    free(g->cpus_text);
    free(g->note);
    free(g);
}

static void set_note(struct guard *g, char *note)
{
    free(g->note);
    g->note = note;
}

/* Busy by this reading, over DT_NS. */
static void judge(struct guard *g, const struct guard_reading *r, uint64_t dt_ns)
{
    g->measured = g->c.workload.kind == GUARD_WL_PORT || (r->have_cpu && dt_ns > 0);
    g->cpu_ratio = NAN;
    if (g->c.workload.kind == GUARD_WL_PORT) {
        g->busy = r->connections >= g->c.busy_connections;
    } else if (g->measured) {
        g->cpu_ratio = (double)r->cpu_ns / (double)dt_ns;
        g->busy = g->cpu_ratio * 100 > g->c.busy_cpu_pct;
    } else {
        g->busy = false;
    }
    if (!r->present)
        set_note(g, xasprintf("workload %s: %s; idle", g->c.workload.spec,
                              g->c.workload.kind == GUARD_WL_CGROUP    ? "no such cgroup"
                              : g->c.workload.kind == GUARD_WL_PROCESS ? "no such process"
                                                                       : "nothing uses the port"));
    else
        set_note(g, NULL);
}

/* Bring the constraint in line with the state machine. */
static int sync_hold(struct guard *g, char **ret_msg)
{
    bool want = guard_fsm_holding(&g->fsm);
    if (want == g->held)
        return 0;
    _cleanup_free_ char *err = NULL;
    int r = want ? do_hold(g, &err) : guard_release(g, &err);
    if (r < 0) {
        if (!err)
            err = xstrdup(strerror(-r));
        g->failures++;
        if (ret_msg && !g->failing) /* once per streak, not every tick */
            *ret_msg = xasprintf("latency guard: %s (retrying every tick)", err);
        g->failing = true;
        set_note(g, TAKE_PTR(err));
        return r;
    }
    g->failing = false;
    if (want) {
        g->held = true;
        g->transitions++;
    }
    if (ret_msg && want)
        *ret_msg =
            xasprintf("latency guard: %s busy: holding %s at %" PRId32 " µs", g->c.workload.spec,
                      cpuset_count(&g->c.cpus) ? "the CPUs' resume latency" : "cpu_dma_latency",
                      g->c.latency_us);
    else if (ret_msg)
        *ret_msg = xasprintf("latency guard: %s idle: released", g->c.workload.spec);
    return 1;
}

int guard_tick(struct guard *g, uint64_t now_ns, char **ret_msg)
{
    if (ret_msg)
        *ret_msg = NULL;
    if (g->ticked && now_ns < g->last_ns)
        now_ns = g->last_ns;
    uint64_t dt = g->ticked ? now_ns - g->last_ns : 0;
    if (g->held)
        g->held_ns += dt;
    struct guard_reading r = {0};
    int err = guard_probe_read(g->h, &g->probe, &r);
    judge(g, &r, dt);
    if (err < 0)
        set_note(g, xasprintf("workload %s: cannot read it: %s; idle", g->c.workload.spec,
                              strerror(-err)));
    g->last = r;
    g->last_ns = now_ns;
    g->ticked = true;
    (void)guard_fsm_tick(&g->fsm, now_ns, g->busy);
    return sync_hold(g, ret_msg);
}

void guard_get_status(const struct guard *g, uint64_t now_ns, struct guard_status *ret)
{
    uint64_t held = g->held_ns;
    if (g->held && g->ticked && now_ns > g->last_ns)
        held += now_ns - g->last_ns;
    *ret = (struct guard_status){
        .workload = g->c.workload.spec,
        .state = g->fsm.state,
        .held = g->held,
        .present = g->last.present,
        .busy = g->busy,
        .measured = g->measured,
        .cpu_ratio = g->cpu_ratio,
        .connections = g->last.connections,
        .listening = g->last.listening,
        .nprocs = g->last.nprocs,
        .target_us = g->c.latency_us,
        .mode = cpuset_count(&g->c.cpus) ? "cpus" : "global",
        .cpus = g->cpus_text ? g->cpus_text : "",
        .held_s = (double)held / 1e9,
        .transitions = g->transitions,
        .failures = g->failures,
        .note = g->note,
    };
}
