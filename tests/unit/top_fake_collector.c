/* A fake watt top collector: frames from a formula of the frame number,
 * with the shapes the real one produces (kernel threads, exited tasks,
 * NaNs where something is unknown, names with UTF-8, control and bidi
 * characters) and one timerfd standing in for the tracer's ring fds, so
 * the TUI's ppoll()/drain path runs too. */
#include "top_fake_collector.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/util.h"

struct top_collector {
    struct top_fake_opts o;
    int tfd; /* fires every 100 ms: "a ring is a quarter full" */
    unsigned frames;
    unsigned long drains;
    uint64_t last_ns;
};

int top_fake_open(const struct top_fake_opts *o, struct top_collector **ret)
{
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct itimerspec its = {.it_interval = {0, 100000000}, .it_value = {0, 100000000}};
    if (timerfd_settime(fd, 0, &its, NULL) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    struct top_collector *c = xcalloc(1, sizeof(*c));
    c->o = *o;
    if (!c->o.nprocs)
        c->o.nprocs = 12;
    c->tfd = fd;
    c->last_ns = now_monotonic_ns();
    *ret = c;
    return 0;
}

void top_fake_close(struct top_collector *c)
{
    if (!c)
        return;
    close(c->tfd);
    free(c);
}

unsigned top_fake_frames(const struct top_collector *c)
{
    return c->frames;
}

unsigned long top_fake_drains(const struct top_collector *c)
{
    return c->drains;
}

size_t top_collector_fds(struct top_collector *c, const int **ret)
{
    *ret = &c->tfd;
    return 1;
}

void top_collector_drain(struct top_collector *c)
{
    uint64_t n;
    if (read(c->tfd, &n, sizeof(n)) == sizeof(n))
        c->drains++;
}

static const struct {
    const char *comm, *cmdline, *cgroup;
    bool kthread;
} procs[] = {
    {"systemd", "/sbin/init splash", "/init.scope", false},
    {"kworker/0:1", NULL, NULL, true},
    {"chrome", "/opt/chrome --type=renderer --lang=de Grüße 日本語", "/user.slice/user-1000.slice",
     false},
    {"evil\x1b[31mred", "evil\x1b[31mred\nsecond line\t\x7f", "/system.slice/evil.service", false},
    {"bidi\xe2\x80\xaetxt.exe", "bidi\xe2\x80\xaetxt.exe --flag", "/system.slice/bidi.service",
     false},
    {"bad\xff\xfeutf8", NULL, "/system.slice/bad.service", false},
    {"sshd", "sshd: root@pts/0", "/system.slice/ssh.service", false},
    {"rcu_sched", NULL, NULL, true},
};

/* Process I of frame K: the named ones, then "worker-N" to fill. */
static void fake_proc(struct top_proc *p, size_t i, unsigned k, double secs)
{
    size_t named = ARRAY_SIZE(procs);
    p->pid = (int32_t)(i < named ? 1 + i * 97 : 1000 + i);
    if (i < named) {
        snprintf(p->comm, sizeof(p->comm), "%s", procs[i].comm);
        p->cmdline = procs[i].cmdline ? xstrdup(procs[i].cmdline) : NULL;
        p->cgroup = procs[i].cgroup ? xstrdup(procs[i].cgroup) : NULL;
        p->kthread = procs[i].kthread;
    } else {
        snprintf(p->comm, sizeof(p->comm), "worker-%zu", i);
        p->cmdline = xasprintf("/usr/bin/worker --id %zu", i);
        p->cgroup = xstrdup("/system.slice/workers.service");
    }
    p->exited = i == 5 && k % 2;
    p->threads = 1 + (unsigned)(i % 4);
    double phase = (double)k * 0.7 + (double)i;
    p->cpu_pct = 50.0 / (double)(i + 1) * (1.2 + sin(phase));
    p->wakeups_s = 400.0 / (double)(i + 1) * (1.1 + cos(phase));
    p->idle_wakeups_s = p->wakeups_s / 3;
    p->power_w = i == 7 ? NAN : p->cpu_pct * 0.05;
    p->energy_j = p->power_w * secs;
}

static void fake_cgroups(struct top_frame *f)
{
    f->cgroups = xcalloc(f->nprocs + 1, sizeof(*f->cgroups));
    for (size_t i = 0; i < f->nprocs; i++) {
        const struct top_proc *p = &f->procs[i];
        const char *path = p->cgroup ? p->cgroup : "(unknown)";
        struct top_cgroup *g = NULL;
        for (size_t j = 0; j < f->ncgroups && !g; j++)
            if (streq(f->cgroups[j].path, path))
                g = &f->cgroups[j];
        if (!g) {
            g = &f->cgroups[f->ncgroups++];
            g->path = xstrdup(path);
        }
        g->nprocs++;
        g->cpu_pct += p->cpu_pct;
        g->wakeups_s += p->wakeups_s;
        g->idle_wakeups_s += p->idle_wakeups_s;
        g->power_w += isfinite(p->power_w) ? p->power_w : 0;
        g->energy_j += isfinite(p->energy_j) ? p->energy_j : 0;
    }
}

static void fake_sources(struct top_frame *f, unsigned k)
{
    static const struct {
        enum wake_kind kind;
        int irq;
        const char *name;
    } s[] = {
        {WAKE_IRQ, 24, "virtio0-input.0"},       {WAKE_IRQ, 1, "i8042"},
        {WAKE_TIMER, -1, "tcp_keepalive_timer"}, {WAKE_HRTIMER, -1, "tick_sched_timer"},
        {WAKE_WORK, -1, "vmstat_update"},        {WAKE_OTHER, -1, "(no cause event)"},
    };
    f->nsources = ARRAY_SIZE(s);
    f->sources = xcalloc(f->nsources, sizeof(*f->sources));
    for (size_t i = 0; i < f->nsources; i++) {
        struct top_source *x = &f->sources[i];
        x->kind = s[i].kind;
        x->irq = s[i].irq;
        snprintf(x->name, sizeof(x->name), "%s", s[i].name);
        x->events_s = 200.0 / (double)(i + 1) + (double)(k % 5);
        x->idle_wakeups_s = f->traced ? x->events_s / 2 : NAN;
    }
}

static void fake_cpus(struct top_frame *f, unsigned k)
{
    static const char *const names[] = {"POLL", "C1", "C1E", "C6"};
    static const unsigned lat[] = {0, 2, 10, 133};
    f->ncpus_rows = 4;
    f->cpus = xcalloc(f->ncpus_rows, sizeof(*f->cpus));
    for (size_t c = 0; c < f->ncpus_rows; c++) {
        struct top_cpu *cpu = &f->cpus[c];
        cpu->cpu = (int)c;
        cpu->busy_pct = 10.0 + 5.0 * (double)((k + c) % 4);
        cpu->mhz = c == 3 ? NAN : 2400 + 100.0 * (double)c;
        cpu->idle_wakeups_s = f->traced ? 300.0 + (double)c : NAN;
        cpu->irqs_s = 150.0 + (double)k;
        cpu->nstates = ARRAY_SIZE(names);
        cpu->st = xcalloc(cpu->nstates, sizeof(*cpu->st));
        for (size_t s = 0; s < cpu->nstates; s++) {
            struct top_cstate *st = &cpu->st[s];
            snprintf(st->name, sizeof(st->name), "%s", names[s]);
            st->latency_us = lat[s];
            st->disabled = s == 2 && c == 1;
            st->residency_pct = st->disabled ? 0 : (100 - cpu->busy_pct) * (double)(s + 1) / 10;
            st->entries_s = 100.0 / (double)(s + 1);
        }
    }
}

static void fake_devices(struct top_frame *f, unsigned k)
{
    f->ndevices = 2;
    f->devices = xcalloc(f->ndevices, sizeof(*f->devices));
    struct top_device *d = &f->devices[0];
    d->bus = xstrdup("pci");
    d->name = xstrdup("0000:00:14.0");
    d->driver = xstrdup("xhci_hcd");
    d->product = xstrdup("USB controller");
    snprintf(d->control, sizeof(d->control), "auto");
    snprintf(d->status, sizeof(d->status), "%s", k % 2 ? "suspended" : "active");
    d->active_pct = k % 2 ? 5 : 60;
    d->safe = true;
    d = &f->devices[1];
    d->bus = xstrdup("pci");
    d->name = xstrdup("0000:00:03.0");
    d->driver = xstrdup("virtio-pci");
    snprintf(d->control, sizeof(d->control), "on");
    snprintf(d->status, sizeof(d->status), "active");
    d->active_pct = NAN;
    d->why = xstrdup("virtio: never suspended");
}

static void fake_header(struct top_frame *f, double secs, unsigned k)
{
    f->interval_s = secs;
    f->real_ns = now_realtime_ns();
    f->hostname = xstrdup("fakehost");
    f->kernel = xstrdup("6.1.0-fake");
    f->ncpus = 4;
    f->busy_cpus = 0.25 + 0.05 * (double)(k % 4);
    f->why_not_traced = f->traced ? NULL : xstrdup("a fake collector: --no-trace");
    f->lost_events = k == 2 ? 17 : 0;
    f->node_w = 40 + (double)(k % 3);
    f->measured = k % 2 == 0;
    snprintf(f->power_source, sizeof(f->power_source), "%s",
             f->measured ? "rapl psys" : "model generic-server");
    f->idle_w = 20;
    f->kernel_w = 1.5;
    f->error_pct = f->measured ? NAN : 15;
    snprintf(f->power_note, sizeof(f->power_note), "split by CPU time x GHz; +/-30 %% per cycle");
    f->nnotes = 1;
    f->notes = xcalloc(1, sizeof(char *));
    /* longer than the help box is wide: the TUI must wrap it, not cut it */
    f->notes[0] = xstrdup("fake frames: nothing here was measured, and this note runs past the "
                          "width of the help box on purpose, so that it wraps instead of being "
                          "cut: LAST-WORDS-OF-THE-NOTE");
}

int top_collector_frame(struct top_collector *c, struct top_frame **ret)
{
    uint64_t now = now_monotonic_ns();
    double secs = (double)(now - c->last_ns) / 1e9;
    c->last_ns = now;
    unsigned k = c->frames++;
    struct top_frame *f = xcalloc(1, sizeof(*f));
    f->traced = c->o.traced;
    fake_header(f, secs, k);
    f->nprocs = c->o.nprocs;
    f->procs = xcalloc(f->nprocs, sizeof(*f->procs));
    double procs_w = 0;
    for (size_t i = 0; i < f->nprocs; i++) {
        fake_proc(&f->procs[i], i, k, secs);
        procs_w += isfinite(f->procs[i].power_w) ? f->procs[i].power_w : 0;
        f->total_wakeups_s += f->procs[i].wakeups_s;
    }
    f->procs_w = procs_w;
    f->unaccounted_w = f->node_w - f->idle_w - f->kernel_w - procs_w;
    f->total_idle_wakeups_s = f->traced ? f->total_wakeups_s / 3 : NAN;
    fake_cgroups(f);
    fake_sources(f, k);
    fake_cpus(f, k);
    fake_devices(f, k);
    *ret = f;
    return 0;
}
