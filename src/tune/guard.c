/* The latency guard: see guard.h. The state machine, the [latency]
 * configuration and the holder; the workload probes are in guard_probe.c. */
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
        .source = g->last.source,
    };
}
