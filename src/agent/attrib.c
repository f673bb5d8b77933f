/* The agent's wake-ups and energy per cgroup: see attrib.h. */
#include "agent/attrib.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/metrics_writer.h"
#include "base/util.h"
#include "view/top_collect.h"

int agent_attrib_open(struct host *h, const struct power_model *m, enum agent_wakeups_mode mode,
                      unsigned top_n, struct agent_attrib **ret)
{
    *ret = NULL;
    if (mode == AGENT_WAKEUPS_OFF)
        return 0;
    struct agent_attrib *a = xcalloc(1, sizeof(*a));
    a->top_n = top_n;
    a->other.path = xstrdup("other");
    a->mode = mode;
    struct top_collector_opts o = {
        .model = m,
        .external_samples = true,
        .wakeups = (enum wake_mode)mode,
        .cgroup_cpu = true, /* per cgroup only: cpu.stat where BPF runs, no /proc scan */
    };
    int r = top_collector_open(h, &o, &a->col);
    if (r < 0) {
        agent_attrib_free(a);
        return r;
    }
    a->traced = top_collector_traced(a->col);
    const char *why = top_collector_why_not_traced(a->col);
    a->why_not_traced = why ? xstrdup(why) : NULL;
    a->path = top_collector_wake_path(a->col);
    why = top_collector_why_not_bpf(a->col);
    a->why_not_bpf = why ? xstrdup(why) : NULL;
    *ret = a;
    return 0;
}

void agent_attrib_free(struct agent_attrib *a)
{
    if (!a)
        return;
    top_collector_close(a->col);
    if (a->last)
        top_frame_free(a->last);
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i].path);
    free(a->v);
    free(a->other.path);
    free(a->cpu);
    free(a->cpu_idle_wakeups);
    free(a->why_not_traced);
    free(a->why_not_bpf);
    free(a);
}

size_t agent_attrib_fds(struct agent_attrib *a, const int **ret)
{
    return top_collector_fds(a->col, ret);
}

void agent_attrib_drain(struct agent_attrib *a)
{
    top_collector_drain(a->col);
}

static struct agent_cgroup_series *member(struct agent_attrib *a, const char *path)
{
    for (size_t i = 0; i < a->n; i++)
        if (streq(a->v[i].path, path))
            return &a->v[i];
    return NULL;
}

static double nz(double v)
{
    return isfinite(v) ? v : 0;
}

/* Wake-up rates are over the tracer's window, which may differ from the
 * samples' interval (the first window starts at open): counts back from
 * rates use it. */
static double wake_s(const struct top_frame *f)
{
    return f->wake_window_s > 0 ? f->wake_window_s : f->interval_s;
}

/* By energy, CPU and GPU, then (no power to split) by wake-ups. */
static int by_energy_desc(const void *x, const void *y)
{
    const struct top_cgroup *p = *(const struct top_cgroup *const *)x;
    const struct top_cgroup *q = *(const struct top_cgroup *const *)y;
    double a = nz(p->energy_j) + nz(p->gpu_j), b = nz(q->energy_j) + nz(q->gpu_j);
    if (a != b)
        return a < b ? 1 : -1;
    a = nz(p->wakeups_s), b = nz(q->wakeups_s);
    if (a != b)
        return a < b ? 1 : -1;
    return strcmp(p->path, q->path);
}

/* Members that stayed quiet too long give their slot back. */
static void evict(struct agent_attrib *a, double secs)
{
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++) {
        a->v[i].idle_s += secs;
        a->v[i].power_w = 0;
        if (a->v[i].idle_s > AGENT_ATTRIB_EVICT_S) {
            free(a->v[i].path);
            continue;
        }
        a->v[k++] = a->v[i];
    }
    a->n = k;
}

static void fold_cgroups(struct agent_attrib *a, const struct top_frame *f)
{
    evict(a, f->interval_s);
    a->other.power_w = 0;
    const struct top_cgroup **rank = xcalloc(f->ncgroups ? f->ncgroups : 1, sizeof(*rank));
    for (size_t i = 0; i < f->ncgroups; i++)
        rank[i] = &f->cgroups[i];
    qsort(rank, f->ncgroups, sizeof(*rank), by_energy_desc);
    for (size_t i = 0; i < f->ncgroups; i++) {
        const struct top_cgroup *g = rank[i];
        struct agent_cgroup_series *s = member(a, g->path);
        bool active = nz(g->energy_j) > 0 || nz(g->gpu_j) > 0 || nz(g->gpu_busy_pct) > 0 ||
                      (!isfinite(f->idle_w) && nz(g->wakeups_s) > 0);
        if (!s && a->n < a->top_n && active) {
            a->v = xrealloc(a->v, (a->n + 1) * sizeof(*a->v));
            s = &a->v[a->n++];
            *s = (struct agent_cgroup_series){.path = xstrdup(g->path)};
        }
        if (!s)
            s = &a->other;
        s->energy_j += nz(g->energy_j);
        s->wakeups += nz(g->wakeups_s) * wake_s(f);
        s->power_w += nz(g->power_w);
        s->gpu_j += nz(g->gpu_j);
        s->gpu_busy_s += nz(g->gpu_busy_pct) / 100.0 * f->interval_s;
        s->idle_s = 0;
    }
    free(rank);
}

static void fold_cpus(struct agent_attrib *a, const struct top_frame *f)
{
    for (size_t i = 0; i < f->ncpus_rows; i++) {
        const struct top_cpu *c = &f->cpus[i];
        if (!isfinite(c->idle_wakeups_s))
            continue;
        size_t k = 0;
        while (k < a->ncpu && a->cpu[k] != c->cpu)
            k++;
        if (k == a->ncpu) {
            a->cpu = xrealloc(a->cpu, (a->ncpu + 1) * sizeof(*a->cpu));
            a->cpu_idle_wakeups =
                xrealloc(a->cpu_idle_wakeups, (a->ncpu + 1) * sizeof(*a->cpu_idle_wakeups));
            a->cpu[k] = c->cpu;
            a->cpu_idle_wakeups[k] = 0;
            a->ncpu++;
        }
        a->cpu_idle_wakeups[k] += c->idle_wakeups_s * wake_s(f);
    }
}

/* The GPUs' lines no cgroup owns; with the cgroups' GPU joules they add
 * up to the GPUs' (those that state their watts). */
static void fold_gpus(struct agent_attrib *a, const struct top_frame *f)
{
    if (!f->ngpus)
        return;
    a->have_gpu = true;
    for (size_t i = 0; i < f->ngpus; i++) {
        const struct top_gpu *g = &f->gpus[i];
        if (!isfinite(g->watts))
            continue;
        a->gpu_j += g->watts * f->interval_s;
        a->gpu_unattributed_j += nz(g->unattributed_w) * f->interval_s;
        a->gpu_idle_j += nz(g->idle_w) * f->interval_s;
    }
}

void agent_attrib_update(struct agent_attrib *a, const struct sample *prev, const struct sample *b,
                         double secs)
{
    struct top_frame *f;
    if (!prev || top_collector_frame_from(a->col, prev, b, secs, &f) < 0)
        return;
    agent_attrib_fold(a, f);
}

void agent_attrib_fold(struct agent_attrib *a, struct top_frame *f)
{
    a->frames++;
    a->traced = f->traced;
    free(a->why_not_traced);
    a->why_not_traced = f->why_not_traced ? xstrdup(f->why_not_traced) : NULL;
    a->path = f->wake_path;
    a->lost += f->lost_events;
    if (isfinite(f->idle_w)) {
        a->have_power = true;
        a->idle_j += f->idle_w * f->interval_s;
        a->kernel_j += nz(f->kernel_w) * f->interval_s;
        a->unaccounted_j += nz(f->unaccounted_w) * f->interval_s;
    }
    /* every woken task is in one cgroup row (with or without process rows) */
    for (size_t i = 0; i < f->ncgroups; i++)
        a->kind_events[WAKE_TASK] += nz(f->cgroups[i].wakeups_s) * wake_s(f);
    for (size_t i = 0; i < f->nsources; i++)
        a->kind_events[f->sources[i].kind] += nz(f->sources[i].events_s) * wake_s(f);
    fold_cgroups(a, f);
    fold_gpus(a, f);
    fold_cpus(a, f);
    top_frame_sort(f, TOP_SORT_WAKEUPS);
    if (a->last)
        top_frame_free(a->last);
    a->last = f;
}

void agent_attrib_set_model(struct agent_attrib *a, const struct power_model *m)
{
    top_collector_set_model(a->col, m);
}

const struct top_frame *agent_attrib_frame(const struct agent_attrib *a)
{
    return a->last;
}

static const struct fam f_cg_energy =
    COUNTER("watt_cgroup_energy_joules_total", "joules",
            "Node energy attributed to the cgroup's processes (CPU time x frequency share of "
            "the active power); the top N cgroups, the rest in cgroup=\"other\".");
static const struct fam f_cg_wakeups =
    COUNTER("watt_cgroup_wakeups_total", NULL,
            "Times the cgroup's threads were woken (sched_wakeup; voluntary context switches "
            "without tracepoints).");
static const struct fam f_cg_power = GAUGE(
    "watt_cgroup_power_watts", "watts", "Power attributed to the cgroup over the last interval.");
static const struct fam f_cg_gpu_energy =
    COUNTER("watt_cgroup_gpu_joules_total", "joules",
            "GPU energy attributed to the cgroup's processes (each GPU's watts by their share "
            "of its engine time, docs/gpu-attribution.md); the top N cgroups, the rest in "
            "cgroup=\"other\".");
static const struct fam f_cg_gpu_busy =
    COUNTER("watt_cgroup_gpu_busy_seconds_total", "seconds",
            "GPU engine seconds of the cgroup's processes (DRM fdinfo engine time over each "
            "class's engine count, summed over classes and GPUs; NVML SM share).");
static const struct fam f_gpu_line_energy =
    COUNTER("watt_gpu_attributed_joules_total", "joules",
            "GPU energy no cgroup owns: line=\"unattributed\" (busy time the GPU states but no "
            "visible process explains), \"idle\" (no engine busy). With "
            "watt_cgroup_gpu_joules_total it adds up to the GPUs' energy (those that state "
            "their watts).");
static const struct fam f_line_energy =
    COUNTER("watt_attributed_energy_joules_total", "joules",
            "Node energy no cgroup owns: line=\"idle\" (the idle floor), \"kernel\" (irq and "
            "softirq time), \"unaccounted\" (processes that exited inside an interval).");
static const struct fam f_kind = COUNTER("watt_wakeups_total", NULL,
                                         "Wake-up events by kind: task woken, irq handled, timer "
                                         "or hrtimer expired, work item run.");
static const struct fam f_cpu_idle =
    COUNTER("watt_cpu_idle_wakeups_total", NULL,
            "Times the CPU left idle (tracepoints only: power:cpu_idle).");
static const struct fam f_traced =
    GAUGE("watt_wakeups_traced", NULL,
          "1 when wake-ups come from tracepoints, 0 when from /proc (no idle wake-ups then).");
static const struct fam f_path =
    GAUGE("watt_agent_wakeups_path_info", NULL,
          "The path wake-ups are counted by: path=\"bpf\" (counted in the kernel), \"trace\" "
          "(the tracepoint ring) or \"proc\"; mode is the config's choice, why_not_bpf the "
          "reason the BPF counters are not used (\"\" when they are), why_not_traced the "
          "reason /proc counts (\"\" unless path=\"proc\": tracefs not mounted and its "
          "mount refused, perf not allowed).");
static const struct fam f_lost = COUNTER("watt_wakeups_lost_events_total", NULL,
                                         "Trace events the kernel dropped (ring buffer full).");

static void cg_series(struct mw *w, const struct fam *f, const struct agent_attrib *a, size_t which)
{
    mw_fam(w, f);
    for (size_t i = 0; i <= a->n; i++) {
        const struct agent_cgroup_series *s = i < a->n ? &a->v[i] : &a->other;
        const double v[] = {s->energy_j, s->wakeups, s->power_w, s->gpu_j, s->gpu_busy_s};
        mw_series(w);
        mw_label(w, "cgroup", s->path);
        mw_value_double(w, v[which]);
    }
}

static void render_gpu(struct mw *w, const struct agent_attrib *a)
{
    if (!a->have_gpu)
        return;
    cg_series(w, &f_cg_gpu_energy, a, 3);
    cg_series(w, &f_cg_gpu_busy, a, 4);
    static const char *const lines[] = {"unattributed", "idle"};
    const double v[] = {a->gpu_unattributed_j, a->gpu_idle_j};
    mw_fam(w, &f_gpu_line_energy);
    for (size_t i = 0; i < ARRAY_SIZE(lines); i++) {
        mw_series(w);
        mw_label(w, "line", lines[i]);
        mw_value_double(w, v[i]);
    }
}

void agent_attrib_render(struct mw *w, const struct agent_attrib *a)
{
    if (!a || !a->frames)
        return;
    mw_fam(w, &f_traced);
    mw_series(w);
    mw_value_u64(w, a->traced ? 1 : 0);
    mw_fam(w, &f_path);
    mw_series(w);
    mw_label(w, "path", wake_path_name(a->path));
    mw_label(w, "mode", wake_mode_name((enum wake_mode)a->mode));
    mw_label(w, "why_not_bpf", a->path == WAKE_PATH_BPF || !a->why_not_bpf ? "" : a->why_not_bpf);
    mw_label(w, "why_not_traced",
             a->path != WAKE_PATH_PROC || !a->why_not_traced ? "" : a->why_not_traced);
    mw_value_u64(w, 1);
    if (a->have_power) {
        cg_series(w, &f_cg_energy, a, 0);
        cg_series(w, &f_cg_power, a, 2);
        static const char *const lines[] = {"idle", "kernel", "unaccounted"};
        const double v[] = {a->idle_j, a->kernel_j, a->unaccounted_j};
        mw_fam(w, &f_line_energy);
        for (size_t i = 0; i < ARRAY_SIZE(lines); i++) {
            mw_series(w);
            mw_label(w, "line", lines[i]);
            mw_value_double(w, v[i]);
        }
    }
    render_gpu(w, a);
    cg_series(w, &f_cg_wakeups, a, 1);
    mw_fam(w, &f_kind);
    for (int k = 0; k < _WAKE_KIND_MAX; k++) {
        if (!a->traced && k != WAKE_TASK && k != WAKE_IRQ)
            continue;
        mw_series(w);
        mw_label(w, "kind", wake_kind_name((enum wake_kind)k));
        mw_value_double(w, a->kind_events[k]);
    }
    if (a->traced) {
        mw_fam(w, &f_cpu_idle);
        for (size_t i = 0; i < a->ncpu; i++) {
            mw_series(w);
            mw_label_int(w, "cpu", a->cpu[i]);
            mw_value_double(w, a->cpu_idle_wakeups[i]);
        }
        mw_fam(w, &f_lost);
        mw_series(w);
        mw_value_u64(w, a->lost);
    }
}
