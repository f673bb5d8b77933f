/* watt top's collector: every refresh it takes a sample of the samplers, a
 * scan of /proc and the wake-up window (BPF counters, else the tracepoint
 * ring, else /proc), splits
 * the node's power over the processes (model/attrib.h) and builds one
 * struct top_frame for the TUI or --once. */
#include "view/top_collect.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "model/attrib.h"
#include "sense/cgroup_cpu.h"
#include "sense/clock.h"
#include "sense/cpufreq.h"
#include "sense/cpuidle.h"
#include "sense/devices.h"
#include "sense/devsafety.h"
#include "sense/irq.h"
#include "sense/procstat.h"
#include "sense/tasks.h"
#include "view/report_power.h"
#include "view/top_gpu.h"
#include "view/top_pkg.h"
#include "view/window.h"

/* tid -> tgid within a frame: a thread woken by several events is resolved
 * (an open of /proc/TID/status) once. Reset every frame and when full. */
#define TIDMAP_CAP 8192
/* The agent's kallsyms passes for new callback names: at most one per 10
 * minutes (a pass costs ~50 ms of CPU; the ring's and watt top's 10 s
 * cost the agent ~5 ms/s on a machine where new callbacks keep coming). */
#define AGENT_NAME_PASS_S 600.0

struct tid_slot {
    int32_t tid, tgid;
};

struct top_collector {
    struct host *h;
    struct sense *sense;
    struct power_model model;
    const struct devpolicy *pol;
    double nominal_s; /* a recorded root: the interval to assume */
    struct wake_tracer *tracer;
    struct wake_bpf *bpf; /* when it loaded: then no tracer */
    char *why_not_traced;
    char *why_not_bpf;
    struct sample *prev;
    struct tasks_snapshot prev_tasks;
    struct tasks_opts topts;
    bool cgmode; /* per-cgroup CPU from cpu.stat, no /proc scan (top_collector_opts.cgroup_cpu) */
    struct cgroup_cpu_snapshot prev_cg;
    struct diags open_diags; /* the first scan's problems, for the first frame */
    struct tid_slot *tidmap; /* TIDMAP_CAP slots, tid 0 = empty */
    size_t ntid;
    struct top_gpu_state *gpu; /* the DRM clients' previous read (top_gpu.h) */
};

static uint32_t tid_hash(int32_t tid)
{
    return ((uint32_t)tid * 2654435761u) & (TIDMAP_CAP - 1);
}

static int32_t tidmap_get(struct top_collector *c, int32_t tid)
{
    for (uint32_t i = tid_hash(tid), k = 0; k < TIDMAP_CAP; k++, i = (i + 1) & (TIDMAP_CAP - 1)) {
        if (c->tidmap[i].tid == tid)
            return c->tidmap[i].tgid;
        if (c->tidmap[i].tid == 0)
            return -1;
    }
    return -1;
}

static void tidmap_put(struct top_collector *c, int32_t tid, int32_t tgid)
{
    if (c->ntid >= TIDMAP_CAP * 3 / 4) {
        memset(c->tidmap, 0, TIDMAP_CAP * sizeof(*c->tidmap));
        c->ntid = 0;
    }
    uint32_t i = tid_hash(tid);
    while (c->tidmap[i].tid != 0 && c->tidmap[i].tid != tid)
        i = (i + 1) & (TIDMAP_CAP - 1);
    if (c->tidmap[i].tid == 0)
        c->ntid++;
    c->tidmap[i] = (struct tid_slot){tid, tgid};
}

/* The process a woken thread belongs to, or -1 when it is gone. */
static int32_t resolve_tid(struct top_collector *c, const struct tasks_snapshot *ts, int32_t tid)
{
    if (tasks_find(ts, tid))
        return tid; /* a main thread (or a single-threaded process) */
    int32_t tgid = tidmap_get(c, tid);
    if (tgid > 0 && tasks_find(ts, tgid))
        return tgid;
    if (tasks_tgid_of(c->h, tid, &tgid) < 0 || tgid <= 0)
        return -1;
    tidmap_put(c, tid, tgid);
    return tgid;
}

int top_collector_open(struct host *h, const struct top_collector_opts *o,
                       struct top_collector **ret)
{
    struct top_collector *c = xcalloc(1, sizeof(*c));
    c->h = h;
    c->model = *o->model;
    c->pol = o->devpolicy;
    c->nominal_s = o->interval_s;
    c->tidmap = xcalloc(TIDMAP_CAP, sizeof(*c->tidmap));
    c->gpu = top_gpu_state_new();
    c->topts = (struct tasks_opts){.ctxsw = true, .cgroups = true, .cmdline = true};
    int r;
    if (!o->external_samples) {
        r = sense_open(h, &c->sense);
        if (r < 0) {
            top_collector_close(c);
            return r;
        }
    }
    enum wake_mode mode = o->no_trace || o->wakeups == WAKE_MODE_OFF ? WAKE_MODE_PROC : o->wakeups;
    if (mode == WAKE_MODE_AUTO || mode == WAKE_MODE_BPF) {
        r = wake_bpf_open(h, 0, &c->bpf, &c->why_not_bpf);
        if (r < 0 && !c->why_not_bpf)
            c->why_not_bpf = xasprintf("the BPF counters failed: %s", strerror(-r));
    } else {
        c->why_not_bpf =
            xasprintf("wake-ups by the %s path, as asked (wakeups = %s)",
                      mode == WAKE_MODE_TRACE ? "tracepoint ring" : "/proc", wake_mode_name(mode));
    }
    if (c->bpf) {
        /* the BPF counters do it all */
    } else if (mode == WAKE_MODE_PROC) {
        c->why_not_traced = xstrdup(o->no_trace ? "tracing turned off (--no-trace)"
                                                : "wake-ups from /proc, as asked (wakeups = proc)");
    } else {
        r = wake_tracer_open(h, NULL, &c->tracer, &c->why_not_traced);
        if (r < 0 && !c->why_not_traced)
            c->why_not_traced = xasprintf("the wake-up tracer failed: %s", strerror(-r));
    }
    /* Without tracepoints the per-thread walk is the only source of task
     * wake-ups; with them it would only cost opens. */
    c->topts.ctxsw = (c->tracer == NULL && c->bpf == NULL) || o->precise_tasks;
    if (c->sense) {
        r = sense_sample(c->sense, &c->prev);
        if (r < 0 || !c->prev) {
            top_collector_close(c);
            return r < 0 ? r : -EIO;
        }
        if (o->model_auto && clock_is_vm(c->prev->clock))
            model_builtin("vm-vcpu", &c->model);
    }
    /* per-cgroup wake-ups need the woken task's cgroup: only the BPF
     * counters know it without /proc */
    if (o->cgroup_cpu) { /* the agent: callback names only in /status */
        wake_bpf_set_name_interval(c->bpf, AGENT_NAME_PASS_S);
        wake_tracer_set_name_interval(c->tracer, AGENT_NAME_PASS_S);
    }
    if (c->bpf && o->cgroup_cpu && cgroup_cpu_scan(h, NULL, true, 0, &c->prev_cg) == 0)
        c->cgmode = true;
    else
        tasks_scan(h, &c->topts, NULL, &c->prev_tasks, &c->open_diags);
    /* the first window's GPU engine counters, where the sample has a GPU */
    if (c->prev && c->prev->gpu && c->prev->gpu->n)
        top_gpu_baseline(c->gpu, h, c->cgmode ? NULL : &c->prev_tasks);
    if (c->tracer)
        wake_tracer_reset(c->tracer); /* the first window starts with the first sample */
    if (c->bpf)
        wake_bpf_reset(c->bpf);
    *ret = c;
    return 0;
}

void top_collector_close(struct top_collector *c)
{
    if (!c)
        return;
    wake_tracer_close(c->tracer);
    wake_bpf_close(c->bpf);
    free(c->why_not_traced);
    free(c->why_not_bpf);
    sample_free(c->prev);
    tasks_snapshot_clear(&c->prev_tasks);
    cgroup_cpu_snapshot_clear(&c->prev_cg);
    diags_free(&c->open_diags);
    if (c->sense)
        sense_close(c->sense);
    top_gpu_state_free(c->gpu);
    free(c->tidmap);
    free(c);
}

bool top_collector_traced(const struct top_collector *c)
{
    return c->tracer != NULL || c->bpf != NULL;
}

enum wake_path top_collector_wake_path(const struct top_collector *c)
{
    return c->bpf ? WAKE_PATH_BPF : c->tracer ? WAKE_PATH_TRACE : WAKE_PATH_PROC;
}

const char *top_collector_why_not_bpf(const struct top_collector *c)
{
    return c->bpf ? NULL : c->why_not_bpf;
}

void top_collector_set_model(struct top_collector *c, const struct power_model *m)
{
    c->model = *m;
}

const char *top_collector_why_not_traced(const struct top_collector *c)
{
    return c->tracer || c->bpf ? NULL : c->why_not_traced;
}

size_t top_collector_fds(struct top_collector *c, const int **ret)
{
    if (!c->tracer) {
        *ret = NULL;
        return 0;
    }
    return wake_tracer_fds(c->tracer, ret);
}

void top_collector_drain(struct top_collector *c)
{
    if (c->tracer)
        wake_tracer_drain(c->tracer);
}

/* ---- building a frame ---- */

struct build {
    struct top_collector *c;
    struct top_frame *f;
    const struct sample *a, *b;
    double secs;
    struct diags diags;
    struct irq_rates irq;
    bool have_irq;
    struct tasks_snapshot tasks;
    struct task_delta *td;
    size_t ntd;
    struct tasks_diff_stats tstats;
    struct wake_window w;
};

static void note(struct top_frame *f, char *text)
{
    for (size_t i = 0; i < f->nnotes; i++)
        if (streq(f->notes[i], text)) { /* both scans of the first frame met it */
            free(text);
            return;
        }
    f->notes = xrealloc(f->notes, (f->nnotes + 1) * sizeof(*f->notes));
    f->notes[f->nnotes++] = text;
}

static double per_s(uint64_t n, double secs)
{
    return secs > 0 ? (double)n / secs : NAN;
}

/* A new row for pid at the end of f->procs. */
static struct top_proc *proc_row(struct top_frame *f, int32_t pid, size_t *cap)
{
    if (f->nprocs == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        f->procs = xrealloc(f->procs, *cap * sizeof(*f->procs));
    }
    struct top_proc *p = &f->procs[f->nprocs++];
    *p = (struct top_proc){.pid = pid,
                           .idle_wakeups_s = NAN,
                           .power_w = NAN,
                           .energy_j = NAN,
                           .gpu_busy_pct = NAN,
                           .gpu_w = NAN,
                           .gpu_j = NAN};
    return p;
}

static void copy_comm(char *dst, size_t size, const char *src, size_t len)
{
    len = len < size - 1 ? len : size - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

static int cmp_pid(const void *x, const void *y)
{
    int32_t a = ((const struct top_proc *)x)->pid, b = ((const struct top_proc *)y)->pid;
    return (a > b) - (a < b);
}

/* qsort() and bsearch() want a non-NULL array even when it is empty. */
static void sort_procs(struct top_frame *f)
{
    if (f->nprocs)
        qsort(f->procs, f->nprocs, sizeof(*f->procs), cmp_pid);
}

/* pid among the first n rows (sorted by pid). */
static struct top_proc *find_proc_in(struct top_frame *f, size_t n, int32_t pid)
{
    struct top_proc key = {.pid = pid};
    return n ? bsearch(&key, f->procs, n, sizeof(*f->procs), cmp_pid) : NULL;
}

static struct top_proc *find_proc(struct top_frame *f, int32_t pid)
{
    return find_proc_in(f, f->nprocs, pid);
}

static double add_rate(double a, double b)
{
    return (isnan(a) ? 0 : a) + (isnan(b) ? 0 : b);
}

/* Rows added from the trace (several threads of one new process each got
 * a row): sort them in, folding rows of the same pid into one. */
static void merge_procs(struct top_frame *f)
{
    sort_procs(f);
    size_t k = 0;
    for (size_t i = 0; i < f->nprocs; i++) {
        if (k && f->procs[k - 1].pid == f->procs[i].pid) {
            struct top_proc *into = &f->procs[k - 1], *dup = &f->procs[i];
            into->wakeups_s = add_rate(into->wakeups_s, dup->wakeups_s);
            into->idle_wakeups_s = add_rate(into->idle_wakeups_s, dup->idle_wakeups_s);
            free(dup->cmdline);
            free(dup->cgroup);
            continue;
        }
        f->procs[k++] = f->procs[i];
    }
    f->nprocs = k;
}

/* A lossy traced window: each process the scan saw in both snapshots
 * gets its voluntary context switches as its wake-ups (exited ones keep
 * what the trace saw). */
static void procs_from_ctxsw(struct build *B)
{
    struct top_frame *f = B->f;
    for (size_t i = 0; i < B->ntd; i++) {
        const struct task_delta *d = &B->td[i];
        if (d->vol_ctxsw == VAL_NONE || d->is_new)
            continue;
        struct top_proc *p = find_proc(f, d->t->pid);
        if (p)
            p->wakeups_s = per_s(d->vol_ctxsw, B->secs);
    }
    f->proc_wakeups_from_proc = true;
}

/* Whether the kernel lost more than 2 % of the window's trace events: then
 * per-process wake-ups come from /proc (voluntary context switches, which
 * the kernel counts exactly) where the scan has them. */
static bool lossy(const struct wake_window *w)
{
    uint64_t missing = w->lost + w->undelivered;
    return w->traced && missing * 50 > w->total_events + missing;
}

/* Processes that used CPU time or were woken in the window. */
static void build_procs(struct build *B)
{
    struct top_frame *f = B->f;
    size_t cap = 0;
    bool from_proc = !B->w.traced || (lossy(&B->w) && B->c->topts.ctxsw);
    for (size_t i = 0; i < B->ntd; i++) {
        const struct task_delta *d = &B->td[i];
        bool woke = d->vol_ctxsw != VAL_NONE && d->vol_ctxsw > 0 && from_proc;
        if (d->cpu_s <= 0 && !woke)
            continue;
        struct top_proc *p = proc_row(f, d->t->pid, &cap);
        copy_comm(p->comm, sizeof(p->comm), d->t->comm, strlen(d->t->comm));
        p->cmdline = d->t->cmdline ? xstrdup(d->t->cmdline) : NULL;
        p->cgroup = d->t->cgroup ? xstrdup(d->t->cgroup) : NULL;
        p->kthread = d->t->kthread;
        p->threads = d->t->nthreads;
        p->cpu_pct = 100.0 * d->cpu_s / B->secs;
        /* /proc: its switches are its wake-ups, unknown when unreadable */
        if (from_proc && d->vol_ctxsw == VAL_NONE)
            p->wakeups_s = NAN;
    }
    /* the scan's rows are in pid order; trace entries of other processes
     * are appended, then merged in once */
    size_t nsorted = f->nprocs;
    for (size_t i = 0; i < B->w.n; i++) {
        const struct wake_entry *e = &B->w.e[i];
        if (e->kind != WAKE_TASK || (e->events == 0 && e->idle_wakeups == 0))
            continue;
        int32_t pid = e->id;
        if (e->tgid > 0 && tasks_find(&B->tasks, e->tgid))
            pid = e->tgid; /* the BPF counters know the process */
        else if (B->w.traced)
            pid = resolve_tid(B->c, &B->tasks, e->id);
        bool gone = pid < 0;
        if (gone)
            pid = e->id;
        struct top_proc *p = find_proc_in(f, nsorted, pid);
        if (!p) {
            p = proc_row(f, pid, &cap);
            const struct task_info *t = gone ? NULL : tasks_find(&B->tasks, pid);
            p->exited = gone; /* else born after the scan, or idle in it */
            if (t) {
                copy_comm(p->comm, sizeof(p->comm), t->comm, strlen(t->comm));
                p->cmdline = t->cmdline ? xstrdup(t->cmdline) : NULL;
                p->cgroup = t->cgroup ? xstrdup(t->cgroup) : NULL;
                p->kthread = t->kthread;
                p->threads = t->nthreads;
            } else {
                copy_comm(p->comm, sizeof(p->comm), e->name, strnlen(e->name, sizeof(e->name)));
            }
        }
        p->wakeups_s = (isnan(p->wakeups_s) ? 0 : p->wakeups_s) + per_s(e->events, B->w.seconds);
        if (B->w.traced)
            p->idle_wakeups_s = (isnan(p->idle_wakeups_s) ? 0 : p->idle_wakeups_s) +
                                per_s(e->idle_wakeups, B->w.seconds);
    }
    merge_procs(f);
    if (B->w.traced)
        for (size_t i = 0; i < f->nprocs; i++)
            if (isnan(f->procs[i].idle_wakeups_s))
                f->procs[i].idle_wakeups_s = 0;
    if (B->w.traced && from_proc)
        procs_from_ctxsw(B);
}

static void build_sources(struct build *B)
{
    struct top_frame *f = B->f;
    for (size_t i = 0; i < B->w.n; i++) {
        const struct wake_entry *e = &B->w.e[i];
        if (e->kind == WAKE_TASK || (e->events == 0 && e->idle_wakeups == 0))
            continue;
        f->sources = xrealloc(f->sources, (f->nsources + 1) * sizeof(*f->sources));
        struct top_source *s = &f->sources[f->nsources++];
        *s = (struct top_source){
            .kind = e->kind,
            .irq = e->kind == WAKE_IRQ ? e->id : -1,
            .events_s = per_s(e->events, B->w.seconds),
            .idle_wakeups_s = B->w.traced ? per_s(e->idle_wakeups, B->w.seconds) : NAN,
        };
        copy_comm(s->name, sizeof(s->name), e->name, strnlen(e->name, sizeof(e->name)));
    }
}

/* Busy and irq seconds over all CPUs between the two /proc/stat samples. */
static void busy_seconds(const struct build *B, double *busy_s, double *irq_s)
{
    *busy_s = *irq_s = NAN;
    const struct procstat_sample *pa = B->a->procstat, *pb = B->b->procstat;
    if (!pa || !pb || !pa->has_total || !pb->has_total)
        return;
    static const enum procstat_mode busy[] = {PROCSTAT_USER, PROCSTAT_NICE, PROCSTAT_SYSTEM,
                                              PROCSTAT_IRQ, PROCSTAT_SOFTIRQ};
    double sum = 0, irq = 0;
    for (size_t k = 0; k < ARRAY_SIZE(busy); k++) {
        uint64_t x = pa->total.ticks[busy[k]], y = pb->total.ticks[busy[k]];
        if (x == VAL_NONE || y == VAL_NONE || y < x)
            continue;
        double s = (double)(y - x) / PROCSTAT_USER_HZ;
        sum += s;
        if (busy[k] == PROCSTAT_IRQ || busy[k] == PROCSTAT_SOFTIRQ)
            irq += s;
    }
    *busy_s = sum;
    *irq_s = irq;
}

static double cpu_ghz(const struct build *B, int cpu)
{
    struct cpufreq_eff e;
    if (!B->a->cpufreq || !B->b->cpufreq ||
        cpufreq_effective(B->a->cpufreq, B->b->cpufreq, cpu, &e) < 0 || isnan(e.busy_mhz))
        return NAN;
    return e.busy_mhz / 1000.0;
}

/* Split the node's power over n consumers (processes, or cgroups): their
 * watts and joules into ret_w/ret_j. false when there is nothing to split. */
static bool split_power(struct build *B, const struct attrib_task *at, size_t n, double *ret_w,
                        double *ret_j)
{
    struct top_frame *f = B->f;
    struct power_summary ps;
    struct report_ctx rc = {
        .h = B->c->h, .a = B->a, .b = B->b, .cur = B->b, .interval_s = B->secs, .diags = &B->diags};
    report_power_build(&rc, &B->c->model, &ps);
    f->measured = ps.measured;
    snprintf(f->power_source, sizeof(f->power_source), "%s", ps.source);
    f->node_w = ps.it_w;
    f->idle_w = f->kernel_w = f->unaccounted_w = f->procs_w = f->error_pct = NAN;
    if (isnan(ps.it_w)) {
        note(f, xstrdup("no node power: no meter, and the model lacks its inputs (CPU "
                        "utilisation); power is not attributed"));
        power_summary_free(&ps);
        return false;
    }
    double busy_s, irq_s;
    busy_seconds(B, &busy_s, &irq_s);
    unsigned cores = cpuset_count(&B->b->topo.online);
    struct attrib_input in = {
        .node_w = ps.it_w,
        .measured = ps.measured,
        .node_error_pct = ps.measured ? NAN : B->c->model.error_pct,
        .idle_w =
            attrib_idle_floor(&B->c->model, cores, ps.busy_cores, ps.ghz, ps.it_w, ps.measured),
        .seconds = B->secs,
        .busy_cpu_s = isnan(busy_s) ? 0 : busy_s,
        .irq_cpu_s = isnan(irq_s) ? 0 : irq_s,
        .mean_ghz = ps.ghz,
        .ntasks = n,
        .tasks = at,
    };
    struct attrib_result ar;
    bool ok = attrib_compute(&in, &ar) == 0;
    if (ok) {
        f->idle_w = ar.idle_w;
        f->kernel_w = ar.kernel_w;
        f->unaccounted_w = ar.unaccounted_w;
        f->procs_w = 0;
        for (size_t i = 0; i < n; i++) {
            ret_w[i] = ar.task_w[i];
            ret_j[i] = ar.task_j[i];
            f->procs_w += ar.task_w[i];
        }
        f->error_pct = ar.error_pct;
        snprintf(f->power_note, sizeof(f->power_note), "%s", ar.note);
        attrib_result_clear(&ar);
    } else {
        note(f, xstrdup("power could not be split over processes (bad input to the model)"));
    }
    power_summary_free(&ps);
    return ok;
}

static void build_power(struct build *B)
{
    struct top_frame *f = B->f;
    size_t n = f->nprocs;
    struct attrib_task *at = xcalloc(n ? n : 1, sizeof(*at));
    double *w = xcalloc(n ? n : 1, sizeof(*w)), *j = xcalloc(n ? n : 1, sizeof(*j));
    for (size_t i = 0; i < n; i++) {
        const struct task_info *t = tasks_find(&B->tasks, f->procs[i].pid);
        at[i] = (struct attrib_task){
            .pid = f->procs[i].pid,
            .cgroup = f->procs[i].cgroup,
            .cpu_s = f->procs[i].cpu_pct * B->secs / 100.0,
            .ghz = t ? cpu_ghz(B, t->last_cpu) : NAN,
        };
    }
    if (split_power(B, at, n, w, j))
        for (size_t i = 0; i < n; i++) {
            f->procs[i].power_w = w[i];
            f->procs[i].energy_j = j[i];
        }
    free(at);
    free(w);
    free(j);
}

static int cmp_cgroup_path(const void *x, const void *y)
{
    return strcmp(((const struct top_cgroup *)x)->path, ((const struct top_cgroup *)y)->path);
}

/* Cgroups from the process rows: every row lands in exactly one, so their
 * power sums to the processes' (the sum rule holds for cgroups too). */
static void build_cgroups(struct top_frame *f)
{
    for (size_t i = 0; i < f->nprocs; i++) {
        const struct top_proc *p = &f->procs[i];
        const char *path = p->cgroup ? p->cgroup : "(unknown)";
        struct top_cgroup key = {.path = (char *)path};
        struct top_cgroup *g = f->ncgroups ? bsearch(&key, f->cgroups, f->ncgroups,
                                                     sizeof(*f->cgroups), cmp_cgroup_path)
                                           : NULL;
        if (!g) {
            f->cgroups = xrealloc(f->cgroups, (f->ncgroups + 1) * sizeof(*f->cgroups));
            g = &f->cgroups[f->ncgroups++];
            *g = (struct top_cgroup){.path = xstrdup(path),
                                     .idle_wakeups_s = isnan(p->idle_wakeups_s) ? NAN : 0,
                                     .power_w = isnan(p->power_w) ? NAN : 0,
                                     .energy_j = isnan(p->energy_j) ? NAN : 0,
                                     .gpu_busy_pct = NAN,
                                     .gpu_w = NAN,
                                     .gpu_j = NAN};
            qsort(f->cgroups, f->ncgroups, sizeof(*f->cgroups), cmp_cgroup_path);
            g = bsearch(&key, f->cgroups, f->ncgroups, sizeof(*f->cgroups), cmp_cgroup_path);
        }
        g->nprocs++;
        g->cpu_pct += p->cpu_pct;
        g->wakeups_s += p->wakeups_s; /* one unknown member: the sum is unknown */
        if (!isnan(p->idle_wakeups_s))
            g->idle_wakeups_s += p->idle_wakeups_s;
        if (!isnan(p->power_w)) {
            g->power_w += p->power_w;
            g->energy_j += p->energy_j;
        }
        if (!isnan(p->gpu_busy_pct))
            g->gpu_busy_pct = (isnan(g->gpu_busy_pct) ? 0 : g->gpu_busy_pct) + p->gpu_busy_pct;
        if (!isnan(p->gpu_w)) {
            g->gpu_w = (isnan(g->gpu_w) ? 0 : g->gpu_w) + p->gpu_w;
            g->gpu_j = (isnan(g->gpu_j) ? 0 : g->gpu_j) + p->gpu_j;
        }
    }
}

/* The agent's cgroups without a /proc scan: each cgroup's own CPU time
 * from cpu.stat (the delta since the previous frame, children's taken
 * out), its wake-ups from the BPF counters' task entries by cgroup id.
 * The node's power is split over the cgroups as over processes, so the
 * sum rule holds the same way. */
static void build_cgroups_cpustat(struct build *B, const struct cgroup_cpu_snapshot *cur)
{
    struct top_frame *f = B->f;
    struct top_collector *c = B->c;
    size_t n = cur->n, unknown = n; /* row n: "(unknown)" */
    double *own = xcalloc(n + 1, sizeof(*own)), *wk = xcalloc(n + 1, sizeof(*wk));
    double *iw = xcalloc(n + 1, sizeof(*iw));
    cgroup_cpu_own_delta(&c->prev_cg, cur, own);
    /* v2's root counts irq and softirq time too (the kernel line has it) */
    double busy_s, irq_s;
    busy_seconds(B, &busy_s, &irq_s);
    const struct cgroup_cpu *root = cgroup_cpu_find(cur, "/");
    if (root && isfinite(irq_s)) {
        own[root - cur->v] -= irq_s;
        if (own[root - cur->v] < 0)
            own[root - cur->v] = 0;
    }
    for (size_t i = 0; i < B->w.n; i++) {
        const struct wake_entry *e = &B->w.e[i];
        if (e->kind != WAKE_TASK)
            continue;
        const struct cgroup_cpu *g = cgroup_cpu_find_id(cur, e->cgroup_id);
        size_t k = g ? (size_t)(g - cur->v) : unknown;
        wk[k] += per_s(e->events, B->w.seconds);
        iw[k] += per_s(e->idle_wakeups, B->w.seconds);
    }
    f->cgroups = xcalloc(n + 1, sizeof(*f->cgroups));
    struct attrib_task *at = xcalloc(n + 1, sizeof(*at));
    size_t *row = xcalloc(n + 1, sizeof(*row));
    for (size_t i = 0; i <= n; i++) {
        if (own[i] <= 0 && wk[i] <= 0 && iw[i] <= 0)
            continue;
        const char *path = i < n ? cur->v[i].path : "(unknown)";
        row[f->ncgroups] = i;
        at[f->ncgroups] = (struct attrib_task){.cgroup = path, .cpu_s = own[i], .ghz = NAN};
        f->cgroups[f->ncgroups++] = (struct top_cgroup){
            .path = xstrdup(path),
            .cpu_pct = 100.0 * own[i] / B->secs,
            .wakeups_s = wk[i],
            .idle_wakeups_s = iw[i],
            .power_w = NAN,
            .energy_j = NAN,
            .gpu_busy_pct = NAN,
            .gpu_w = NAN,
            .gpu_j = NAN,
        };
    }
    double *w = xcalloc(f->ncgroups + 1, sizeof(*w)), *j = xcalloc(f->ncgroups + 1, sizeof(*j));
    if (split_power(B, at, f->ncgroups, w, j))
        for (size_t k = 0; k < f->ncgroups; k++) {
            f->cgroups[k].power_w = w[k];
            f->cgroups[k].energy_j = j[k];
        }
    if (f->ncgroups)
        qsort(f->cgroups, f->ncgroups, sizeof(*f->cgroups), cmp_cgroup_path);
    note(f, xstrdup("per-cgroup CPU time from each cgroup's cpu.stat and wake-ups from the BPF "
                    "counters: no per-process rows (watt top has them)"));
    free(own);
    free(wk);
    free(iw);
    free(at);
    free(row);
    free(w);
    free(j);
}

/* GPU rows and columns (top_gpu.h): each process's engine time and GPU
 * watts; a process busy on a GPU but not on a CPU gets a row too. */
static void gpu_into_procs(struct build *B, const struct top_gpu_out *o)
{
    struct top_frame *f = B->f;
    size_t cap = f->nprocs, nsorted = f->nprocs;
    for (size_t i = 0; i < o->nprocs; i++) {
        const struct top_gpu_proc *g = &o->procs[i];
        struct top_proc *p = find_proc_in(f, nsorted, g->pid);
        if (!p) {
            p = proc_row(f, g->pid, &cap);
            const struct task_info *t = tasks_find(&B->tasks, g->pid);
            if (t) {
                copy_comm(p->comm, sizeof(p->comm), t->comm, strlen(t->comm));
                p->cmdline = t->cmdline ? xstrdup(t->cmdline) : NULL;
                p->threads = t->nthreads;
            }
            p->cgroup = g->cgroup ? xstrdup(g->cgroup) : NULL;
            if (B->w.traced)
                p->idle_wakeups_s = 0;
        }
        p->gpu_busy_pct = g->busy_pct;
        p->gpu_w = g->w;
        p->gpu_j = g->j;
    }
    if (f->nprocs != nsorted)
        sort_procs(f);
}

/* The agent's per-cgroup mode: the GPU cgroups merged into the cpu.stat
 * ones by path. */
static void gpu_into_cgroups(struct top_frame *f, const struct top_gpu_out *o)
{
    for (size_t i = 0; i < o->ncgroups; i++) {
        const struct top_cgroup *src = &o->cgroups[i];
        struct top_cgroup *g = f->ncgroups ? bsearch(src, f->cgroups, f->ncgroups,
                                                     sizeof(*f->cgroups), cmp_cgroup_path)
                                           : NULL;
        if (!g) {
            f->cgroups = xrealloc(f->cgroups, (f->ncgroups + 1) * sizeof(*f->cgroups));
            f->cgroups[f->ncgroups++] = (struct top_cgroup){
                .path = xstrdup(src->path), .nprocs = src->nprocs, .power_w = NAN, .energy_j = NAN};
            qsort(f->cgroups, f->ncgroups, sizeof(*f->cgroups), cmp_cgroup_path);
            g = bsearch(src, f->cgroups, f->ncgroups, sizeof(*f->cgroups), cmp_cgroup_path);
        }
        g->gpu_busy_pct = src->gpu_busy_pct;
        g->gpu_w = src->gpu_w;
        g->gpu_j = src->gpu_j;
    }
}

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static void build_gpu(struct build *B, bool cgmode)
{
    struct top_gpu_out o;
    if (!B->b->gpu || !B->b->gpu->n) /* no GPU: nothing to read */
        return;
    /* the processes that ran in the window (and the DRM holders, which
     * top_gpu keeps): an idle process costs no fd check */
    int32_t *pids = xcalloc(B->ntd ? B->ntd : 1, sizeof(*pids));
    size_t n = 0;
    for (size_t i = 0; i < B->ntd; i++)
        if (B->td[i].cpu_s > 0)
            pids[n++] = B->td[i].t->pid;
    qsort(pids, n, sizeof(*pids), cmp_i32);
    struct top_gpu_active act = {.pids = pids, .n = n};
    top_gpu_collect(B->c->gpu, B->c->h, cgmode ? NULL : &B->tasks, cgmode ? NULL : &act, B->a->gpu,
                    B->b->gpu, B->secs, &o);
    free(pids);
    if (!o.ngpus) {
        top_gpu_out_clear(&o);
        return;
    }
    B->f->gpus = o.gpus;
    B->f->ngpus = o.ngpus;
    o.gpus = NULL;
    if (o.note) {
        note(B->f, o.note);
        o.note = NULL;
    }
    if (cgmode)
        gpu_into_cgroups(B->f, &o);
    else
        gpu_into_procs(B, &o);
    top_gpu_out_clear(&o);
}

static void cpu_states(const struct build *B, int cpu, struct top_cpu *row)
{
    const struct cpuidle_cpu *ia = B->a->cpuidle ? cpuidle_find_cpu(B->a->cpuidle, cpu) : NULL;
    const struct cpuidle_cpu *ib = B->b->cpuidle ? cpuidle_find_cpu(B->b->cpuidle, cpu) : NULL;
    if (!ib)
        return;
    _cleanup_free_ double *res = xcalloc(ib->nstates ? ib->nstates : 1, sizeof(*res));
    double c0, wk;
    bool ok = ia && cpuidle_residency(ia, ib, B->secs * 1e6, res, &c0, &wk) == 0;
    row->nstates = ib->nstates;
    row->st = xcalloc(ib->nstates ? ib->nstates : 1, sizeof(*row->st));
    for (unsigned k = 0; k < ib->nstates; k++) {
        const struct cpuidle_state *s = &ib->state[k];
        struct top_cstate *t = &row->st[k];
        snprintf(t->name, sizeof(t->name), "%s", s->name ? s->name : "?");
        t->residency_pct = ok ? res[k] : NAN;
        t->entries_s = NAN;
        if (ok && s->usage != VAL_NONE && ia->state[k].usage != VAL_NONE &&
            s->usage >= ia->state[k].usage)
            t->entries_s = per_s(s->usage - ia->state[k].usage, B->secs);
        t->latency_us = s->latency_us == VAL_NONE ? 0 : (unsigned)s->latency_us;
        t->disabled = s->disable == 1;
    }
}

static void build_cpus(struct build *B)
{
    struct top_frame *f = B->f;
    const struct cpuset *on = &B->b->topo.online;
    f->ncpus_rows = cpuset_count(on);
    f->cpus = xcalloc(f->ncpus_rows ? f->ncpus_rows : 1, sizeof(*f->cpus));
    size_t n = 0;
    CPUSET_FOREACH (cpu, on) {
        if (n == f->ncpus_rows)
            break;
        struct top_cpu *row = &f->cpus[n++];
        *row = (struct top_cpu){.cpu = cpu, .busy_pct = NAN, .idle_wakeups_s = NAN, .irqs_s = NAN};
        struct procstat_util u;
        if (B->a->procstat && B->b->procstat &&
            procstat_util(procstat_find_cpu(B->a->procstat, cpu),
                          procstat_find_cpu(B->b->procstat, cpu), &u) == 0)
            row->busy_pct = u.busy_pct;
        double ghz = cpu_ghz(B, cpu);
        row->mhz = isnan(ghz) ? NAN : ghz * 1000.0;
        for (unsigned k = 0; k < B->w.ncpus; k++)
            if (B->w.traced && B->w.cpu[k] == cpu)
                row->idle_wakeups_s = per_s(B->w.cpu_idle_wakeups[k], B->w.seconds);
        for (unsigned k = 0; B->have_irq && k < B->irq.ncpus; k++)
            if (B->irq.cpu[k] == cpu)
                row->irqs_s = B->irq.cpu_per_s[k];
        cpu_states(B, cpu, row);
    }
    f->ncpus_rows = n;
}

/* After build_cpus: the package rows (their fallback is the CPU rows' mean). */
static void build_pkgs(struct build *B)
{
    struct report_ctx rc = {.h = B->c->h,
                            .sense = B->c->sense,
                            .a = B->a,
                            .b = B->b,
                            .cur = B->b,
                            .interval_s = B->secs,
                            .diags = &B->diags};
    top_build_pkgs(B->f, &rc);
}

static void build_devices(struct build *B)
{
    struct top_frame *f = B->f;
    const struct devices_sample *ds = B->b->devices;
    if (!ds)
        return;
    struct device_candidate *v;
    size_t n = devices_assess_policy(ds, B->a->devices, B->c->pol, &v);
    f->devices = xcalloc(n ? n : 1, sizeof(*f->devices));
    for (size_t i = 0; i < n; i++) {
        const struct device_info *d = v[i].dev;
        if (d->status == DEV_STATUS_UNSUPPORTED)
            continue;
        struct top_device *t = &f->devices[f->ndevices++];
        t->bus = xstrdup(d->bus);
        t->name = xstrdup(d->name);
        t->driver = d->driver ? xstrdup(d->driver) : NULL;
        t->product = d->product ? xstrdup(d->product) : NULL;
        const char *cn = dev_control_name(d->control), *sn = dev_status_name(d->status);
        snprintf(t->control, sizeof(t->control), "%s", cn ? cn : "?");
        snprintf(t->status, sizeof(t->status), "%s", sn ? sn : "?");
        t->active_pct = isnan(v[i].suspended_pct) ? NAN : 100.0 - v[i].suspended_pct;
        t->safe = v[i].verdict == DEV_VERDICT_SAFE;
        t->why = v[i].reason ? xstrdup(v[i].reason) : NULL;
    }
    device_candidates_free(v, n);
}

static void build_notes(struct build *B)
{
    struct top_frame *f = B->f;
    if (!B->w.traced)
        note(f, xasprintf("wake-ups from /proc (voluntary context switches per process, IRQ "
                          "counts): %s; idle wake-ups, timers and work items need tracepoints",
                          f->why_not_traced ? f->why_not_traced : "no tracepoints"));
    const char *tn = B->c->tracer ? wake_tracer_note(B->c->tracer)
                     : B->c->bpf  ? wake_bpf_note(B->c->bpf)
                                  : NULL;
    if (!B->c->bpf && B->c->why_not_bpf)
        note(f, xasprintf("BPF wake-up counters not used: %s", B->c->why_not_bpf));
    if (tn)
        note(f, xstrdup(tn));
    if (B->w.undelivered && B->w.note[0])
        note(f, xstrdup(B->w.note));
    if (f->proc_wakeups_from_proc)
        note(f, xstrdup("per-process wake-ups are voluntary context switches from /proc "
                        "(the trace lost events); IRQs, timers and idle wake-ups are low"));
    if (B->w.lost)
        note(f, xasprintf("the kernel dropped %" PRIu64 " trace events (ring full): wake-up "
                          "counts are low by that much",
                          B->w.lost));
    if (B->w.dropped)
        note(f, xasprintf("%" PRIu64 " events of sources past the table bound are counted in "
                          "\"(table full)\"",
                          B->w.dropped));
    if (B->tstats.exited)
        note(f, xasprintf("%zu process%s exited during the window: %s CPU time is in "
                          "\"unaccounted\"",
                          B->tstats.exited, B->tstats.exited == 1 ? "" : "es",
                          B->tstats.exited == 1 ? "its" : "their"));
    if (B->tasks.truncated)
        note(f, xasprintf("more processes than the scan bound: only %zu were read", B->tasks.n));
    const struct diags *lists[] = {&B->diags, &B->b->diags};
    size_t shown = 0, total = B->diags.n + B->b->diags.n;
    for (size_t k = 0; k < ARRAY_SIZE(lists); k++)
        for (size_t i = 0; i < lists[k]->n && shown < 16; i++, shown++) {
            const struct diag *g = &lists[k]->v[i];
            note(f, xasprintf("%s: %s%s%s", g->where, g->what ? g->what : "",
                              g->what && g->err ? ": " : "", g->err ? strerror(g->err) : ""));
        }
    if (total > shown)
        note(f, xasprintf("... and %zu more problems reading values", total - shown));
}

static void frame_header(struct build *B)
{
    struct top_frame *f = B->f;
    f->interval_s = B->secs;
    f->real_ns = B->b->real_ns;
    f->hostname = B->b->hostname ? xstrdup(B->b->hostname) : NULL;
    f->kernel = B->b->kernel ? xstrdup(B->b->kernel) : NULL;
    f->ncpus = cpuset_count(&B->b->topo.online);
    f->busy_cpus =
        B->a->procstat && B->b->procstat ? procstat_busy_cpus(B->a->procstat, B->b->procstat) : NAN;
    f->traced = B->w.traced;
    f->why_not_traced = !B->w.traced && B->c->why_not_traced ? xstrdup(B->c->why_not_traced) : NULL;
    f->wake_path = B->w.bpf ? WAKE_PATH_BPF : B->w.traced ? WAKE_PATH_TRACE : WAKE_PATH_PROC;
    f->why_not_bpf = !B->w.bpf && B->c->why_not_bpf ? xstrdup(B->c->why_not_bpf) : NULL;
    f->wake_window_s = B->w.seconds;
    f->total_wakeups_s = per_s(B->w.total_events, B->w.seconds);
    f->total_idle_wakeups_s = B->w.traced ? per_s(B->w.total_idle_wakeups, B->w.seconds) : NAN;
    f->lost_events = B->w.lost + B->w.undelivered;
    f->undelivered_events = B->w.undelivered;
    f->dropped_events = B->w.dropped;
}

/* Whether every woken task's cgroup id is known; else the ids are read
 * again (a cgroup made since, or a path made anew). */
static bool cgroup_ids_known(const struct wake_window *w, const struct cgroup_cpu_snapshot *s)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->e[i].kind == WAKE_TASK && w->e[i].cgroup_id &&
            !cgroup_cpu_find_id(s, w->e[i].cgroup_id))
            return false;
    return true;
}

static int frame_cgmode(struct build *B)
{
    struct top_collector *c = B->c;
    struct cgroup_cpu_snapshot cur;
    if (B->a->irq && B->b->irq)
        B->have_irq = irq_rates(B->a->irq, B->b->irq, B->secs, &B->irq, &B->diags) == 0;
    int r = wake_bpf_take(c->bpf, &B->w);
    if (r < 0) {
        wake_window_clear(&B->w);
        wake_window_from_proc(B->have_irq ? &B->irq : NULL, NULL, 0, B->secs, &B->w);
        note(B->f, xasprintf("the BPF counters could not be read: %s", strerror(-r)));
    }
    r = cgroup_cpu_scan(c->h, &c->prev_cg, false, 0, &cur);
    if (r == 0 && !cgroup_ids_known(&B->w, &cur)) {
        cgroup_cpu_snapshot_clear(&cur);
        r = cgroup_cpu_scan(c->h, &c->prev_cg, true, 0, &cur);
    }
    if (r < 0) {
        note(B->f, xasprintf("cgroup cpu.stat could not be read: %s", strerror(-r)));
        cur = (struct cgroup_cpu_snapshot){0};
    }
    if (cur.truncated)
        note(B->f, xstrdup("more cgroups than the scan bound: the rest count in their parents"));
    frame_header(B);
    build_sources(B);
    build_cgroups_cpustat(B, &cur);
    build_gpu(B, true);
    build_cpus(B);
    build_pkgs(B);
    build_notes(B); /* no device rows: the agent has its own device metrics */
    cgroup_cpu_snapshot_clear(&c->prev_cg);
    c->prev_cg = cur;
    return 0;
}

int top_collector_frame_from(struct top_collector *c, const struct sample *a,
                             const struct sample *b, double secs, struct top_frame **ret)
{
    struct build B = {.c = c, .f = xcalloc(1, sizeof(struct top_frame)), .a = a, .b = b};
    B.secs = secs > 0 ? secs : c->nominal_s > 0 ? c->nominal_s : 1;
    B.diags = c->open_diags; /* the first frame reports the first scan's problems too */
    /* tid -> tgid holds for one frame only: a tid reused later must not be
     * credited to a process that still lives */
    memset(c->tidmap, 0, TIDMAP_CAP * sizeof(*c->tidmap));
    c->ntid = 0;
    c->open_diags = (struct diags){0};
    if (c->cgmode) {
        frame_cgmode(&B);
        wake_window_clear(&B.w);
        if (B.have_irq)
            irq_rates_free(&B.irq);
        diags_free(&B.diags);
        *ret = B.f;
        return 0;
    }
    tasks_scan(c->h, &c->topts, &c->prev_tasks, &B.tasks, &B.diags);
    tasks_diff(&c->prev_tasks, &B.tasks, &B.td, &B.ntd, &B.tstats, &B.diags);
    if (a->irq && b->irq)
        B.have_irq = irq_rates(a->irq, b->irq, B.secs, &B.irq, &B.diags) == 0;
    int r = c->bpf      ? wake_bpf_take(c->bpf, &B.w)
            : c->tracer ? wake_tracer_take(c->tracer, &B.w)
                        : -ENODEV;
    if (r < 0) {
        wake_window_clear(&B.w);
        wake_window_from_proc(B.have_irq ? &B.irq : NULL, B.td, B.ntd, B.secs, &B.w);
    }
    frame_header(&B);
    build_procs(&B);
    if (lossy(&B.w) && !c->topts.ctxsw) {
        c->topts.ctxsw = true; /* from the next window on */
        note(B.f, xstrdup("the kernel loses trace events here: per-process wake-ups will come "
                          "from /proc context switches from the next refresh on"));
    }
    build_sources(&B);
    build_gpu(&B, false);
    build_power(&B);
    build_cgroups(B.f);
    build_cpus(&B);
    build_pkgs(&B);
    build_devices(&B);
    build_notes(&B);

    wake_window_clear(&B.w);
    if (B.have_irq)
        irq_rates_free(&B.irq);
    free(B.td);
    diags_free(&B.diags);
    tasks_snapshot_clear(&c->prev_tasks);
    c->prev_tasks = B.tasks;
    *ret = B.f;
    return 0;
}

int top_collector_frame(struct top_collector *c, struct top_frame **ret)
{
    if (!c->sense)
        return -EINVAL; /* opened for frame_from() only */
    struct sample *b = NULL;
    int r = sense_sample(c->sense, &b);
    if (r < 0 || !b)
        return r < 0 ? r : -EIO;
    double secs = window_interval(c->prev, b, c->h->live, c->nominal_s);
    r = top_collector_frame_from(c, c->prev, b, secs, ret);
    sample_free(c->prev);
    c->prev = b;
    return r;
}
