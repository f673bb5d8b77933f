/* "What you could do": each action with its expected saving (and the basis
 * of that figure) and its latency cost. Savings are estimates: the report
 * says what they rest on, and `watt report` before and after measures the
 * real effect. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "model/pack.h"
#include "model/pack_saving.h"
#include "sense/cpufreq.h"
#include "sense/cpuidle.h"
#include "sense/devices.h"
#include "sense/devsafety.h"
#include "sense/gpu.h"
#include "sense/latency.h"
#include "sense/procstat.h"
#include "view/report.h"
#include "view/report_gpu.h"

/* A core held in a shallow state instead of its deepest one is clock gated
 * but powered: assume it leaks ~30 % of its active power. An assumption
 * stated in the output, to be replaced by a measurement. */
#define SHALLOW_LEAK_SHARE 0.3
/* What a server draws switched off: its BMC (watt fleet's default). */
#define STANDBY_W       5.0
#define IDLE_BUSY_SHARE 0.10

struct advice {
    char *action;      /* owned */
    char *why;         /* owned */
    char *how;         /* owned; NULL when there is no single command */
    double saving_w;   /* NaN when it cannot be estimated */
    const char *basis; /* what the saving rests on; static or basis_owned */
    double latency_us; /* cost per event; NaN when none */
    char *latency;     /* the cost in words; owned */
    char *basis_owned; /* a basis built for this item; owned, may be NULL */
    bool has_pack;     /* the packing item: pack and pack_model are set */
    struct pack_saving pack;
    const char *pack_model; /* the model's name; points into the ctx */
};

struct advice_list {
    struct advice *v;
    size_t n, cap;
};

static struct advice *add(struct advice_list *l)
{
    l->v = grow_array(l->v, sizeof(*l->v), l->n, &l->cap);
    struct advice *a = &l->v[l->n++];
    *a = (struct advice){.saving_w = NAN, .latency_us = NAN};
    return a;
}

static double idle_share(const struct report_ctx *c)
{
    double busy = c->power->busy_cores;
    unsigned n = c->power->cores;
    return isnan(busy) || !n ? 1.0 : 1.0 - busy / n;
}

static double leak_per_cpu(const struct report_ctx *c)
{
    return c->power->model.active_per_core_w * SHALLOW_LEAK_SHARE * idle_share(c);
}

/* Deep states switched off by hand through cpuidle's `disable`. */
static void advise_disabled_states(const struct report_ctx *c, struct advice_list *l)
{
    const struct cpuidle_sample *ci = c->cur->cpuidle;
    if (!ci || !ci->ncpus)
        return;
    for (unsigned k = 1; k < ci->cpus[0].nstates; k++) {
        struct cpuset cpus = {0};
        for (unsigned i = 0; i < ci->ncpus; i++)
            if (k < ci->cpus[i].nstates && ci->cpus[i].state[k].disable == 1)
                cpuset_add(&cpus, (unsigned)ci->cpus[i].cpu);
        unsigned n = cpuset_count(&cpus);
        if (n) {
            const struct cpuidle_state *st = &ci->cpus[0].state[k];
            _cleanup_free_ char *list = cpuset_format(&cpus);
            _cleanup_free_ char *path =
                host_display_path(c->h, HOST_SYS, "devices/system/cpu/cpuN/cpuidle/stateK/disable");
            struct advice *a = add(l);
            a->action = xasprintf("re-enable idle state %s on CPU%s %s", st->name ? st->name : "?",
                                  n == 1 ? "" : "s", list);
            a->why = xasprintf("it is disabled in sysfs, so idle CPUs stop in a shallower state");
            a->how = xasprintf("write 0 to %s (K=%u)", path, k);
            a->saving_w = leak_per_cpu(c) * n;
            a->basis = "idle CPUs held shallow leak ~30 % of a busy CPU's power (model)";
            a->latency_us = st->latency_us == VAL_NONE ? NAN : (double)st->latency_us;
            a->latency = st->latency_us == VAL_NONE
                             ? xstrdup("an unknown exit latency per wake-up")
                             : xasprintf("up to %.0f us exit latency per wake-up", a->latency_us);
        }
        cpuset_free(&cpus);
    }
}

/* The deepest state a latency constraint keeps off, per CPU. */
static void advise_constraints(const struct report_ctx *c, struct advice_list *l)
{
    const struct cpuidle_sample *ci = c->cur->cpuidle;
    const struct latency_sample *lat = c->cur->latency;
    if (!ci || !lat)
        return;
    struct cpuset cpus = {0};
    uint64_t worst = 0;
    const char *state = NULL;
    for (unsigned i = 0; i < ci->ncpus; i++) {
        const struct cpuidle_cpu *cpu = &ci->cpus[i];
        for (unsigned k = cpu->nstates; k-- > 1;) {
            const struct cpuidle_state *st = &cpu->state[k];
            if (st->disable == 1 || st->latency_us == VAL_NONE)
                continue;
            if (latency_excludes_state(lat, cpu->cpu, st->latency_us)) {
                cpuset_add(&cpus, (unsigned)cpu->cpu);
                if (st->latency_us > worst) {
                    worst = st->latency_us;
                    state = st->name;
                }
            }
            break; /* only the deepest enabled state matters */
        }
    }
    unsigned n = cpuset_count(&cpus);
    if (n) {
        _cleanup_free_ char *list = cpuset_format(&cpus);
        struct advice *a = add(l);
        a->action = xasprintf("hold the latency constraint only while the workload needs it "
                              "(CPU%s %s)",
                              n == 1 ? "" : "s", list);
        a->why = xasprintf("a PM QoS request below %" PRIu64 " us keeps %s off on %u CPU%s "
                           "all the time",
                           worst, state ? state : "the deepest state", n, n == 1 ? "" : "s");
        a->how = xstrdup("release /dev/cpu_dma_latency or pm_qos_resume_latency_us when idle "
                         "(watt's latency guard does it)");
        a->saving_w = leak_per_cpu(c) * n;
        a->basis = "idle CPUs held shallow leak ~30 % of a busy CPU's power (model)";
        a->latency_us = (double)worst;
        a->latency = xasprintf("up to %" PRIu64 " us per wake-up while released", worst);
    }
    cpuset_free(&cpus);
}

static void advise_devices(const struct report_ctx *c, struct advice_list *l)
{
    if (!c->cur->devices)
        return;
    struct device_candidate *v = NULL;
    size_t n = devices_candidates_policy(c->cur->devices, report_dev_prev(c), c->devpolicy, &v);
    for (size_t i = 0; i < n; i++) {
        if (v[i].verdict != DEV_VERDICT_SAFE)
            continue;
        const struct device_info *d = v[i].dev;
        /* control already auto: only a negative autosuspend delay keeps it on */
        bool delay = d->control == DEV_CONTROL_AUTO;
        _cleanup_free_ char *path =
            xasprintf("%s/power/%s", d->path, delay ? "autosuspend_delay_ms" : "control");
        _cleanup_free_ char *shown = host_kernel_path(HOST_SYS, path);
        struct advice *a = add(l);
        a->action = d->driver
                        ? xasprintf("allow runtime PM on %s %s (%s)", d->bus, d->name, d->driver)
                        : xasprintf("allow runtime PM on %s %s", d->bus, d->name);
        a->why = xstrdup(v[i].reason ? v[i].reason : "it never suspends");
        a->how = xasprintf("write %s to %s", delay ? "2000" : "auto", shown);
        a->saving_w = v[i].saving_w;
        a->basis = v[i].basis;
        a->latency_us = v[i].resume_ms * 1000.0;
        a->latency = xasprintf("~%.0f ms per resume", v[i].resume_ms);
    }
    device_candidates_free(v, n);
}

static void advise_governor(const struct report_ctx *c, struct advice_list *l)
{
    const struct cpufreq_sample *cf = c->cur->cpufreq;
    if (!cf)
        return;
    unsigned perf_gov = 0, perf_epp = 0;
    const char *driver = NULL;
    for (unsigned i = 0; i < cf->ncpus; i++) {
        perf_gov += streq(cf->cpus[i].governor, "performance");
        perf_epp += streq(cf->cpus[i].epp, "performance");
        driver = cf->cpus[i].driver ? cf->cpus[i].driver : driver;
    }
    if (!perf_gov && !perf_epp)
        return;
    bool pstate = driver && (strstr(driver, "intel_pstate") || strstr(driver, "amd-pstate-epp"));
    double busy = c->power->busy_cores;
    struct advice *a = add(l);
    if (perf_gov) {
        a->action = xasprintf("switch the cpufreq governor from performance to %s on %u CPUs",
                              pstate ? "powersave" : "schedutil", perf_gov);
        a->why = xstrdup("performance keeps the highest frequency whatever the load");
        a->how = xasprintf("cpupower frequency-set -g %s", pstate ? "powersave" : "schedutil");
    } else {
        a->action = xasprintf("set EPP to balance_performance on %u CPUs", perf_epp);
        a->why = xstrdup("EPP performance asks the hardware for the highest frequency");
        a->how = xstrdup("write balance_performance to each policy's "
                         "energy_performance_preference");
    }
    /* At low load a lower clock saves part of the active power; assume
     * 20 % of it (stated), nothing when the load is unknown. */
    a->saving_w = isnan(busy) ? NAN : 0.2 * busy * c->power->model.active_per_core_w;
    a->basis = "~20 % of the busy CPUs' active power (model; measure before and after)";
    a->latency_us = 1000;
    a->latency = xstrdup("~1 ms to ramp the clock up when load arrives");
}

static void advise_idle_machine(const struct report_ctx *c, struct advice_list *l)
{
    const struct power_summary *ps = c->power;
    if (isnan(ps->busy_cores) || !ps->cores || isnan(ps->it_w))
        return;
    double share = ps->busy_cores / ps->cores;
    if (share >= IDLE_BUSY_SHARE)
        return;
    struct advice *a = add(l);
    a->action = xstrdup("move this machine's work elsewhere and switch it off");
    a->why =
        xasprintf("it is %.1f %% busy: an idle server still draws %.0f W", 100 * share, ps->it_w);
    a->how = xstrdup("consolidate VMs or services onto busier hosts; power off (IPMI) until "
                     "load returns");
    a->saving_w = (ps->it_w - STANDBY_W) * ps->pue;
    a->basis = "node power now, less 5 W BMC standby, times PUE";
    a->latency_us = 300e6;
    a->latency = xstrdup("~300 s to boot when load returns, plus migrations");
}

/* What packing the measured load onto the fewest cores and packages would
 * save (model/pack_saving.h), with every assumption in the basis. Needs a
 * measured demand (an interval); isolated CPUs are not read here (the
 * report is pure over its samples), so the plan takes every online CPU. */
static void advise_pack(const struct report_ctx *c, struct advice_list *l)
{
    const struct power_summary *ps = c->power;
    const struct topology *t = &c->cur->topo;
    if (isnan(ps->busy_cores) || !t->npackages)
        return;
    struct pack_input in = {.topo = t,
                            .demand_cpus = ps->busy_cores,
                            .headroom = PACK_DEFAULT_HEADROOM,
                            .min_cpus = PACK_DEFAULT_MIN_CPUS};
    struct pack_plan plan;
    if (pack_plan_build(&in, &plan) < 0)
        return;
    struct pack_saving_input si = {
        .topo = t,
        .plan = &plan,
        .model = &ps->model,
        .busy_cpus = ps->busy_cores,
        .ghz = ps->ghz,
        .rapl_package_w = pack_saving_rapl_w(&ps->readings, POWER_SCOPE_PACKAGE),
        .rapl_dram_w = pack_saving_rapl_w(&ps->readings, POWER_SCOPE_DRAM),
    };
    struct pack_saving s;
    if (plan.saturated || pack_saving_estimate(&si, &s) < 0 || !(s.saving_w > 0)) {
        pack_plan_free(&plan);
        return;
    }
    _cleanup_free_ char *list = cpuset_format(&plan.cpus);
    struct advice *a = add(l);
    a->action = xasprintf("pack movable work onto CPU%s %s so that %u of %u cores and %u of %u "
                          "packages can sleep",
                          plan.ncpus == 1 ? "" : "s", list, s.idle_cores, s.cores, s.idle_packages,
                          s.packages);
    a->why = xasprintf("%.2f busy CPUs (+%.0f %% headroom) fit on %u of %u CPUs; spread over "
                       "all, every core and package is woken",
                       ps->busy_cores, 100 * PACK_DEFAULT_HEADROOM, plan.ncpus, s.cpus);
    a->how = xstrdup("run watt agent with a profile holding a [pack] section (docs/pack.md)");
    a->saving_w = s.saving_w;
    _cleanup_free_ char *assumed = pack_saving_assumptions(&s, &ps->model);
    a->basis_owned = xasprintf("%s; every online CPU taken as packable (isolcpus and nohz_full "
                               "are not read here; the agent's packer leaves them out)",
                               assumed);
    a->basis = a->basis_owned;
    a->latency = xstrdup("queueing while the packed set grows when load rises, and packed work "
                         "shares its cores' caches");
    a->has_pack = true;
    a->pack = s;
    a->pack_model = ps->model.name;
    pack_plan_free(&plan);
}

/* A GPU no process holds that runtime PM keeps awake: control "on", or
 * "auto" but never suspended. Its saving is what it draws now when that
 * was measured and it is idle (a runtime-suspended GPU is in D3, near 0 W
 * at the card); else unknown, never a made-up figure. */
static void advise_gpu(const struct report_ctx *c, const struct gpu_dev *g, struct advice_list *l)
{
    const struct power_reading *p = report_gpu_reading(c, g);
    bool idle = isnan(g->busy_pct) || g->busy_pct < 1.0;
    struct advice *a = add(l);
    const char *what = g->name[0] ? g->name : g->driver;
    if (streq(g->rpm_control, "on")) {
        _cleanup_free_ char *path = xasprintf("bus/pci/devices/%s/power/control", g->pdev);
        _cleanup_free_ char *shown = host_kernel_path(HOST_SYS, path);
        a->action = xasprintf("let idle GPU %s (%s, %s) runtime-suspend", g->id, what, g->pdev);
        a->why = xstrdup("no process holds it, yet runtime PM is off (power/control \"on\")");
        a->how = streq(g->driver, "nvidia")
                     ? xasprintf("write auto to %s (the nvidia driver also needs "
                                 "NVreg_DynamicPowerManagement=0x02)",
                                 shown)
                     : xasprintf("write auto to %s", shown);
    } else {
        a->action = xasprintf("find what keeps idle GPU %s (%s, %s) awake", g->id, what, g->pdev);
        a->why = xstrdup("no process holds it and runtime PM is allowed, but it never "
                         "suspended (a display attached, or the driver's runtime PM is off: "
                         "amdgpu.runpm=0, i915/xe without it for this card)");
    }
    if (p && !isnan(p->watts) && idle) {
        a->saving_w = p->watts;
        a->basis_owned =
            xasprintf("the GPU's measured draw now (%s, %s), idle: what runtime suspend (D3) "
                      "saves where the driver supports it for this GPU",
                      p->via, isnan(p->delta_j) ? "driver's reading" : "energy counter");
        a->basis = a->basis_owned;
    } else {
        a->basis = p && !isnan(p->watts) ? "unknown: the GPU was not idle over the interval"
                                         : "unknown: the GPU's idle draw was not measured";
    }
    a->latency = xstrdup("a resume of the GPU (tens to hundreds of ms) at its next use");
}

static void advise_gpus(const struct report_ctx *c, struct advice_list *l)
{
    const struct gpu_sample *gs = c->cur->gpu;
    if (!gs || !gs->n)
        return;
    struct gpu_holders hs;
    bool scanned = false;
    for (size_t i = 0; i < gs->n; i++) {
        const struct gpu_dev *g = &gs->v[i];
        bool never = streq(g->rpm_control, "auto") && !streq(g->rpm_status, "suspended") &&
                     (g->rpm_suspended_ms == 0);
        if (g->lost || !g->pdev[0] || !(streq(g->rpm_control, "on") || never))
            continue;
        if (!scanned) {
            report_gpu_holders(c, &hs);
            scanned = true;
        }
        if (report_gpu_held(&hs, g) == 0)
            advise_gpu(c, g, l);
    }
    if (scanned)
        report_gpu_holders_free(&hs);
}

static int by_saving(const void *x, const void *y)
{
    const struct advice *a = x, *b = y;
    double sa = isnan(a->saving_w) ? -1 : a->saving_w, sb = isnan(b->saving_w) ? -1 : b->saving_w;
    return (sa < sb) - (sa > sb);
}

static void collect(const struct report_ctx *c, struct advice_list *l)
{
    advise_idle_machine(c, l);
    advise_disabled_states(c, l);
    advise_constraints(c, l);
    advise_devices(c, l);
    advise_gpus(c, l);
    advise_governor(c, l);
    advise_pack(c, l);
    if (l->n)
        qsort(l->v, l->n, sizeof(*l->v), by_saving);
}

static void free_list(struct advice_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].action);
        free(l->v[i].why);
        free(l->v[i].how);
        free(l->v[i].latency);
        free(l->v[i].basis_owned);
    }
    free(l->v);
}

/* The packing item's figures (docs/report-json.md, "advice"). */
static void pack_json(struct json *j, const struct advice *a)
{
    const struct pack_saving *s = &a->pack;
    json_key(j, "pack");
    json_object_begin(j);
    json_kv_string(j, "model", a->pack_model);
    json_kv_u64(j, "packed_cpus", s->packed_cpus);
    json_kv_u64(j, "idle_cpus", s->idle_cpus);
    json_kv_u64(j, "idle_cores", s->idle_cores);
    json_kv_u64(j, "cores", s->cores);
    json_kv_u64(j, "idle_packages", s->idle_packages);
    json_kv_u64(j, "packages", s->packages);
    json_kv_double(j, "saving_packages_w", s->saving_pkg_w);
    json_kv_double(j, "saving_dram_w", s->saving_dram_w);
    json_kv_double(j, "saving_cores_w", s->saving_core_w);
    json_kv_double(j, "saving_low_w", s->low_w);
    json_kv_double(j, "saving_high_w", s->high_w);
    json_kv_double(j, "uncertainty_pct", s->uncertainty_pct);
    json_kv_double(j, "package_awake_w", s->pkg_awake_w);
    json_kv_double(j, "package_deep_w", s->pkg_deep_w);
    json_kv_double(j, "dram_per_package_w", s->dram_w);
    json_kv_double(j, "rapl_package_scale", s->pkg_measured ? s->pkg_scale : NAN);
    json_kv_double(j, "rapl_dram_scale", s->dram_measured ? s->dram_scale : NAN);
    json_object_end(j);
}

static void advice_json(const struct report_ctx *c, struct json *j)
{
    struct advice_list l = {0};
    collect(c, &l);
    json_array_begin(j);
    for (size_t i = 0; i < l.n; i++) {
        const struct advice *a = &l.v[i];
        json_object_begin(j);
        json_kv_string(j, "action", a->action);
        json_kv_string(j, "why", a->why);
        json_kv_string(j, "how", a->how);
        json_kv_double(j, "saving_w", a->saving_w);
        json_kv_string(j, "saving_basis", a->basis);
        json_kv_double(j, "latency_cost_us", a->latency_us);
        json_kv_string(j, "latency_cost", a->latency);
        if (a->has_pack)
            pack_json(j, a);
        json_object_end(j);
    }
    json_array_end(j);
    free_list(&l);
}

static void advice_text(const struct report_ctx *c, struct strbuf *out)
{
    struct advice_list l = {0};
    collect(c, &l);
    if (!l.n)
        strbuf_append(out, "  nothing found to change (this report cannot see everything: "
                           "see 'Not measured here')\n");
    for (size_t i = 0; i < l.n && i < 12; i++) {
        const struct advice *a = &l.v[i];
        char num[16];
        snprintf(num, sizeof(num), "  %zu. ", i + 1);
        report_wrap(out, num, 5, a->action);
        _cleanup_free_ char *cost =
            isnan(a->saving_w) ? xasprintf("saves: unknown here; costs %s", a->latency)
            : a->has_pack      ? xasprintf("saves ~%.1f W (%.1f-%.1f W); costs %s", a->saving_w,
                                           a->pack.low_w, a->pack.high_w, a->latency)
                               : xasprintf("saves ~%.1f W; costs %s", a->saving_w, a->latency);
        report_wrap(out, "     ", 7, cost);
        report_wrap(out, "     why: ", 7, a->why);
        if (a->how)
            report_wrap(out, "     how: ", 7, a->how);
        report_wrap(out, "     estimate: ", 7, a->basis);
    }
    if (l.n > 12)
        strbuf_appendf(out, "  ... %zu more in --json\n", l.n - 12);
    free_list(&l);
}

const struct report_section report_section_advice = {
    .key = "advice",
    .title = "What you could do",
    .json = advice_json,
    .text = advice_text,
};
