/* The agent's metrics (docs/agent-metrics.md): every family rendered
 * straight into one strbuf, once per sample and format. Scrapes copy the
 * result, so this is the agent's only per-second formatting cost: values
 * that sysfs gives as integers (µJ, µs, ms, ticks, kHz) are printed as
 * exact decimals by integer arithmetic, and only true rates go through
 * format_double(). */
#include "agent/metrics.h"
#include "agent/attrib.h"
#include "agent/metrics_cstate.h"
#include "agent/metrics_gpu.h"
#include "agent/metrics_memory.h"
#include "agent/metrics_pack.h"
#include "agent/metrics_turbo.h"
#include "agent/metrics_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/util.h"
#include "config.h"
#include "model/reconcile.h"
#include "sense/cpufreq.h"
#include "sense/cpuidle.h"
#include "sense/devices.h"
#include "sense/devsafety.h"
#include "sense/hwmon.h"
#include "sense/irq.h"
#include "sense/latency.h"
#include "sense/procstat.h"
#include "sense/rapl.h"

/* ---- energy totals ---- */

struct energy_entry {
    char source[16];    /* "rapl", "hwmon" */
    char via[16];       /* "powercap", "perf", "sysfs" */
    char domain[64];    /* "package-0", "hwmon3/energy1" */
    uint64_t max_range; /* raw wrap point; VAL_NONE unknown */
    double scale;       /* joules per raw unit */
    bool micro;         /* scale is 1e-6: total_uj is exact */
    bool have_last;
    bool present;   /* read in the latest sample: exported */
    uint64_t last;  /* the previous raw reading */
    uint64_t total; /* micro: µJ since the first reading's own value */
    double total_j; /* !micro: joules */
};

struct agent_energy {
    struct energy_entry *v;
    size_t n, cap;
};

int agent_energy_new(struct agent_energy **ret)
{
    *ret = xcalloc(1, sizeof(**ret));
    return 0;
}

void agent_energy_free(struct agent_energy *e)
{
    if (!e)
        return;
    free(e->v);
    free(e);
}

static struct energy_entry *energy_find(struct agent_energy *e, const char *source, const char *via,
                                        const char *domain)
{
    for (size_t i = 0; i < e->n; i++)
        if (streq(e->v[i].domain, domain) && streq(e->v[i].via, via) &&
            streq(e->v[i].source, source))
            return &e->v[i];
    e->v = grow_array(e->v, sizeof(*e->v), e->n, &e->cap);
    struct energy_entry *x = &e->v[e->n++];
    memset(x, 0, sizeof(*x));
    snprintf(x->source, sizeof(x->source), "%s", source);
    snprintf(x->via, sizeof(x->via), "%s", via);
    snprintf(x->domain, sizeof(x->domain), "%s", domain);
    return x;
}

/* Fold one raw reading into its total. The first reading starts the total
 * at the counter's own value (J since boot for powercap, as node_exporter
 * shows it); later ones add the wrap-corrected delta. A delta that cannot
 * be trusted (backwards without a known range, above the range) is
 * skipped: the total stays, the next delta starts from this reading. */
static void energy_fold(struct agent_energy *e, const char *source, const char *via,
                        const char *domain, uint64_t max_range, double scale, uint64_t raw)
{
    if (raw == VAL_NONE)
        return;
    struct energy_entry *x = energy_find(e, source, via, domain);
    bool micro = scale == 1e-6;
    if (x->have_last && micro != x->micro)
        x->have_last = false; /* another kind of counter under the same name */
    x->max_range = max_range;
    x->scale = scale;
    x->micro = micro;
    uint64_t delta = raw;
    if (x->have_last && rapl_delta(x->last, raw, max_range, &delta) < 0)
        delta = 0;
    if (micro)
        x->total += delta;
    else
        x->total_j += (double)delta * scale;
    x->last = raw;
    x->have_last = true;
    x->present = true;
}

void agent_energy_update(struct agent_energy *e, const struct sample *a, const struct sample *b)
{
    (void)a; /* the entries keep their own last readings */
    for (size_t i = 0; i < e->n; i++)
        e->v[i].present = false;
    if (!b)
        return;
    for (unsigned i = 0; b->rapl && i < b->rapl->n; i++) {
        const struct rapl_domain *d = &b->rapl->v[i];
        energy_fold(e, "rapl", rapl_via_name(d->via), d->name, d->max_range, d->scale, d->raw);
    }
    for (unsigned i = 0; b->hwmon && i < b->hwmon->n; i++) {
        const struct hwmon_sensor *s = &b->hwmon->v[i];
        if (s->kind != HWMON_ENERGY)
            continue;
        char dom[64];
        /* the domain as hwmon_power() names it */
        snprintf(dom, sizeof(dom), "%s/energy%u", s->chip, s->index);
        energy_fold(e, "hwmon", "sysfs", dom, VAL_NONE, 1e-6, s->input);
    }
}

/* ---- the families ---- */

/* A gauge of 1 in both formats (not OpenMetrics' info type), so that both
 * give the same family name. */
static const struct fam f_build =
    GAUGE("watt_build_info", NULL, "The watt version running: always 1.");
static const struct fam f_self_cpu =
    COUNTER("watt_agent_cpu_seconds_total", "seconds", "CPU time the agent used, user and system.");
static const struct fam f_self_wakeups =
    COUNTER("watt_agent_wakeups_total", NULL,
            "Times the agent was scheduled in: voluntary and involuntary context switches.");
static const struct fam f_self_rss =
    GAUGE("watt_agent_resident_memory_bytes", "bytes", "The agent's resident set size.");
static const struct fam f_self_sample = GAUGE("watt_agent_sample_duration_seconds", "seconds",
                                              "How long the agent's last sample took.");
static const struct fam f_self_samples =
    COUNTER("watt_agent_samples_total", NULL, "Samples the agent took.");
static const struct fam f_self_scrapes = COUNTER(
    "watt_agent_scrapes_total", NULL, "Metrics requests served, as of this snapshot's sample.");
static const struct fam f_self_http_open = GAUGE(
    "watt_agent_http_connections", NULL, "HTTP connections open, as of this snapshot's sample.");
static const struct fam f_self_http_accepted =
    COUNTER("watt_agent_http_connections_accepted_total", NULL, "HTTP connections accepted.");
static const struct fam f_self_http_closed =
    COUNTER("watt_agent_http_connections_closed_total", NULL,
            "HTTP connections the agent closed: reason limit for max_connections, reason "
            "header_timeout for no whole request head within header_timeout.");
static const struct fam f_self_start = GAUGE("watt_agent_start_time_seconds", "seconds",
                                             "When the agent started, seconds since the epoch.");
static const struct fam f_sampler_s =
    COUNTER("watt_agent_sampler_seconds_total", "seconds",
            "CPU time each part of the agent's sample used (its thread's CPU clock): the sense "
            "samplers, topology, wakeups, model and render.");
static const struct fam f_sampler_last =
    GAUGE("watt_agent_sampler_last_seconds", "seconds",
          "CPU time each part of the agent's last sample used.");
static const struct fam f_sampler_info =
    GAUGE("watt_agent_sampler_info", NULL,
          "How each part reads, always 1: path cache+pread (static files cached, moving ones "
          "kept open), cache+open (a recorded root), open (every file each sample); wakeups: "
          "trace, proc or off.");
static const struct fam f_sampler_up =
    GAUGE("watt_sampler_up", NULL,
          "1 when the sampler's last read worked (no file it tried failed), 0 when not; "
          "samplers that do not work on this machine at all are left out.");
static const struct fam f_fleet_up =
    GAUGE("watt_agent_fleet_metrics_up", NULL,
          "1 when the fleet controller's metrics file (fleet_metrics) was read and valid at "
          "the last sample and is served, 0 when missing, too large or malformed (the log "
          "says why).");
static const struct fam f_cache_files = GAUGE(
    "watt_agent_read_cache_entries", NULL, "Files, listings and links in the agent's read cache.");
static const struct fam f_cache_fds = GAUGE("watt_agent_read_cache_open_files", NULL,
                                            "Files and directories the read cache keeps open.");
static const struct fam f_cache_rescans =
    COUNTER("watt_agent_read_cache_rescans_total", NULL,
            "Times the read cache was dropped and the static files read anew: once a minute, "
            "on SIGHUP, when a device or CPU went away or the online CPUs changed.");
static const struct fam f_energy =
    COUNTER("watt_energy_joules_total", "joules",
            "Energy per meter domain, corrected for hardware counter wraps; never decreases.");
static const struct fam f_power =
    GAUGE("watt_power_watts", "watts",
          "Average power per meter domain over the last interval, or the model's estimate.");
static const struct fam f_node = GAUGE("watt_node_power_watts", "watts",
                                       "The node's IT power, measured where a meter covers it, "
                                       "else estimated by the power model.");
static const struct fam f_parts =
    GAUGE("watt_node_measured_parts_watts", "watts",
          "Power of the measured parts of the node (packages, psys, dram, gpus, other device "
          "sensors), each counted once, as watt report's reconciliation adds them.");
static const struct fam f_unmeasured =
    GAUGE("watt_node_unmeasured_watts", "watts",
          "The wall meter (source) minus the measured parts: what no sensor covers (fans, "
          "disks, NICs, PSU losses). Negative only when the parts exceed the wall: the sensors "
          "disagree.");
static const struct fam f_facility =
    GAUGE("watt_facility_power_watts", "watts", "The node's IT power times the PUE.");
static const struct fam f_pue =
    GAUGE("watt_pue_ratio", "ratio", "Power usage effectiveness applied to the facility power.");
static const struct fam f_idle_time =
    COUNTER("watt_cpu_idle_state_residency_seconds_total", "seconds",
            "Time each CPU spent in each idle state (cpuidle time).");
static const struct fam f_idle_usage = COUNTER("watt_cpu_idle_state_entries_total", NULL,
                                               "Entries into each idle state (cpuidle usage).");
static const struct fam f_idle_disabled =
    GAUGE("watt_cpu_idle_state_disabled", NULL, "1 when the idle state is disabled on the CPU.");
static const struct fam f_idle_latency =
    GAUGE("watt_cpu_idle_state_exit_latency_seconds", "seconds",
          "Exit latency of each idle state, as the first CPU reports it.");
static const struct fam f_idle_target =
    GAUGE("watt_cpu_idle_state_target_residency_seconds", "seconds",
          "Target residency of each idle state, as the first CPU reports it.");
static const struct fam f_freq = GAUGE("watt_cpu_scaling_frequency_hertz", "hertz",
                                       "Frequency the kernel last requested or saw for the CPU "
                                       "(scaling_cur_freq).");
static const struct fam f_freq_min = GAUGE("watt_cpu_scaling_frequency_min_hertz", "hertz",
                                           "The CPU's policy minimum (scaling_min_freq).");
static const struct fam f_freq_max = GAUGE("watt_cpu_scaling_frequency_max_hertz", "hertz",
                                           "The CPU's policy maximum (scaling_max_freq).");
static const struct fam f_freq_eff = GAUGE("watt_cpu_effective_frequency_hertz", "hertz",
                                           "Mean clock while not idle over the last interval "
                                           "(APERF/MPERF).");
static const struct fam f_freq_avg = GAUGE("watt_cpu_average_frequency_hertz", "hertz",
                                           "Mean clock over the last interval, idle counted as 0 "
                                           "(APERF).");
static const struct fam f_cpu_s =
    COUNTER("watt_cpu_seconds_total", "seconds", "CPU time per mode, from /proc/stat.");
static const struct fam f_guest_s =
    COUNTER("watt_cpu_guest_seconds_total", "seconds",
            "CPU time spent running guests (already counted in user and nice).");
static const struct fam f_util =
    GAUGE("watt_cpu_utilisation_ratio", "ratio",
          "Busy share of the CPU over the last interval (all but idle, iowait and steal).");
static const struct fam f_irq =
    COUNTER("watt_interrupts_total", NULL, "Interrupts per source, summed over CPUs.");
static const struct fam f_dev_active = GAUGE("watt_device_runtime_active", NULL,
                                             "1 when the device is powered (runtime PM active "
                                             "or resuming), 0 when suspended or suspending.");
static const struct fam f_dev_active_s = COUNTER("watt_device_runtime_active_seconds_total",
                                                 "seconds", "Time the device was runtime-active.");
static const struct fam f_dev_susp_s = COUNTER("watt_device_runtime_suspended_seconds_total",
                                               "seconds", "Time the device was runtime-suspended.");
static const struct fam f_dev_auto = GAUGE(
    "watt_device_runtime_auto", NULL, "1 when runtime PM may suspend the device (control auto).");
static const struct fam f_dev_safe =
    GAUGE("watt_device_autosuspend_safe", NULL,
          "1 when the device never suspends and watt judges autosuspend safe for it.");
static const struct fam f_lat = GAUGE("watt_latency_constraint_seconds", "seconds",
                                      "System-wide CPU latency limit in force (cpu_dma_latency).");
static const struct fam f_lat_cpu =
    GAUGE("watt_cpu_resume_latency_constraint_seconds", "seconds",
          "The CPU's own resume latency limit (pm_qos_resume_latency_us).");

static const struct fam f_guard_held =
    GAUGE("watt_latency_guard_held", NULL,
          "1 while the latency guard holds its constraint (the workload is busy).");
static const struct fam f_guard_held_s = COUNTER("watt_latency_guard_held_seconds_total", "seconds",
                                                 "Time the latency guard held its constraint.");
static const struct fam f_guard_trans =
    COUNTER("watt_latency_guard_transitions_total", NULL,
            "Times the latency guard's constraint went into or out of force.");
static const struct fam f_guard_fail =
    COUNTER("watt_latency_guard_failures_total", NULL,
            "Holds or releases that failed (retried on the next tick).");
static const struct fam f_guard_target =
    GAUGE("watt_latency_guard_target_seconds", "seconds",
          "The latency the guard holds while the workload is busy.");
static const struct fam f_guard_busy =
    GAUGE("watt_latency_guard_workload_busy", NULL,
          "1 when the guard's workload was busy over the last tick.");
static const struct fam f_guard_cpu =
    GAUGE("watt_latency_guard_workload_cpu_ratio", "ratio",
          "CPU time of the guard's workload over the last tick, in CPUs (1 = one CPU busy).");
static const struct fam f_guard_conn = GAUGE("watt_latency_guard_workload_connections", NULL,
                                             "ESTABLISHED TCP connections on the guard's port.");

/* A family of one series without labels. */
static void single_u64(struct mw *w, const struct fam *f, uint64_t v)
{
    mw_fam(w, f);
    mw_series(w);
    mw_value_u64(w, v);
}

static void single_double(struct mw *w, const struct fam *f, double v)
{
    mw_fam(w, f);
    mw_series(w);
    mw_value_double(w, v);
}

static void cost_series(struct mw *w, const struct agent_cost *c)
{
    mw_series(w);
    mw_label(w, "sampler", c->sampler);
}

static void render_costs(struct mw *w, const struct agent_costs *c)
{
    if (!c)
        return;
    mw_fam(w, &f_sampler_s);
    for (size_t i = 0; i < c->n; i++) {
        cost_series(w, &c->v[i]);
        mw_value_double(w, c->v[i].cpu_s);
    }
    mw_fam(w, &f_sampler_last);
    for (size_t i = 0; i < c->n; i++) {
        cost_series(w, &c->v[i]);
        mw_value_double(w, c->v[i].last_s);
    }
    mw_fam(w, &f_sampler_up);
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].up >= 0) {
            cost_series(w, &c->v[i]);
            mw_value_u64(w, (uint64_t)c->v[i].up);
        }
    mw_fam(w, &f_sampler_info);
    for (size_t i = 0; i < c->n; i++) {
        cost_series(w, &c->v[i]);
        mw_label(w, "path", c->v[i].path);
        mw_value_u64(w, 1);
    }
    if (!c->cache)
        return;
    single_u64(w, &f_cache_files, c->cache_files);
    single_u64(w, &f_cache_fds, c->cache_fds);
    single_u64(w, &f_cache_rescans, c->rescans);
}

void agent_costs_json(const struct agent_costs *c, struct json *j)
{
    json_object_begin(j);
    json_key(j, "samplers");
    json_array_begin(j);
    for (size_t i = 0; i < c->n; i++) {
        json_object_begin(j);
        json_kv_string(j, "sampler", c->v[i].sampler);
        json_kv_string(j, "path", c->v[i].path);
        json_kv_double(j, "cpu_s", c->v[i].cpu_s);
        json_kv_double(j, "last_cpu_s", c->v[i].last_s);
        json_object_end(j);
    }
    json_array_end(j);
    json_key(j, "read_cache");
    if (c->cache) {
        json_object_begin(j);
        json_kv_u64(j, "entries", c->cache_files);
        json_kv_u64(j, "open_files", c->cache_fds);
        json_kv_u64(j, "rescans", c->rescans);
        json_object_end(j);
    } else {
        json_null(j);
    }
    json_object_end(j);
}

static void render_self(struct mw *w, const struct agent_self *s)
{
    mw_fam(w, &f_build);
    mw_series(w);
    mw_label(w, "version", WATT_VERSION);
    mw_value_u64(w, 1);
    if (!s)
        return;
    single_double(w, &f_self_cpu, s->cpu_s);
    single_u64(w, &f_self_wakeups, s->wakeups);
    single_u64(w, &f_self_rss, s->rss_bytes);
    single_double(w, &f_self_sample, s->sample_s);
    single_u64(w, &f_self_samples, s->samples);
    single_u64(w, &f_self_scrapes, s->scrapes);
    single_u64(w, &f_self_http_open, s->http_open);
    single_u64(w, &f_self_http_accepted, s->http_accepted);
    mw_fam(w, &f_self_http_closed);
    mw_series(w);
    mw_label(w, "reason", "limit");
    mw_value_u64(w, s->http_evicted);
    mw_series(w);
    mw_label(w, "reason", "header_timeout");
    mw_value_u64(w, s->http_timed_out);
    single_double(w, &f_self_start, s->start_time_s);
    render_costs(w, s->costs);
}

/* Energy and power series share their labels. */
static void meter_series(struct mw *w, const char *source, const char *domain, const char *via)
{
    mw_series(w);
    mw_label(w, "source", source);
    mw_label(w, "domain", domain);
    mw_label(w, "via", via);
}

static void render_energy(struct mw *w, const struct agent_energy *e, enum agent_rapl_mode rapl)
{
    mw_fam(w, &f_energy);
    for (size_t i = 0; e && i < e->n; i++) {
        const struct energy_entry *x = &e->v[i];
        bool is_rapl = streq(x->source, "rapl");
        if (!x->present || (is_rapl && rapl == AGENT_RAPL_OFF))
            continue;
        meter_series(w, x->source, x->domain, x->via);
        if (is_rapl && rapl == AGENT_RAPL_COARSE)
            mw_value_u64(w, x->micro ? x->total / 1000000000 * 1000
                                     : (uint64_t)floor(x->total_j / 1000) * 1000);
        else if (x->micro)
            mw_value_fixed(w, x->total, 6);
        else
            mw_value_double(w, x->total_j);
    }
}

/* RAPL watts: whole watts when coarse (a 1-s average to the milliwatt
 * still carries what coarse energy hides). */
static double rapl_watts(double v, enum agent_rapl_mode rapl)
{
    return rapl == AGENT_RAPL_COARSE ? round(v) : v;
}

static void render_channels(struct mw *w, const struct power_summary *ps, enum agent_rapl_mode rapl)
{
    mw_fam(w, &f_power);
    for (size_t i = 0; i < ps->readings.n; i++) {
        const struct power_reading *p = &ps->readings.v[i];
        bool is_rapl = streq(p->source, "rapl");
        if (!isfinite(p->watts) || (is_rapl && rapl == AGENT_RAPL_OFF))
            continue;
        meter_series(w, p->source, p->domain, p->via);
        mw_value_double(w, is_rapl ? rapl_watts(p->watts, rapl) : p->watts);
    }
    if (isfinite(ps->estimated_w)) {
        /* the model's name in a label of its own: queries by source or via
         * do not change with the model */
        meter_series(w, "model", "node", "model");
        mw_label(w, "model", ps->model.name);
        mw_value_double(w, ps->estimated_w);
    }
    /* the model fitted to this machine's meter (model/fit.h), beside the
     * configured one: model="fitted" */
    if (ps->fitted.fit.n && !ps->model.fit.n && isfinite(ps->fitted_w)) {
        meter_series(w, "model", "node", "model");
        mw_label(w, "model", "fitted");
        mw_value_double(w, ps->fitted_w);
    }
}

/* The node figure; a RAPL-based one gives way to the model's estimate
 * when RAPL is off, and is rounded like RAPL power when coarse. */
static void render_node(struct mw *w, const struct power_summary *ps, enum agent_rapl_mode rapl,
                        double pue)
{
    bool from_rapl = ps->measured && strncmp(ps->source, "rapl", 4) == 0;
    double it = ps->it_w;
    bool measured = ps->measured;
    if (from_rapl && rapl == AGENT_RAPL_OFF) {
        it = ps->estimated_w;
        measured = false;
    } else if (from_rapl) {
        it = rapl_watts(it, rapl);
    }
    if (!isfinite(it))
        return;
    mw_fam(w, &f_node);
    mw_series(w);
    mw_label(w, "basis", measured ? "measured" : "estimated");
    mw_label(w, "source", measured ? ps->source : "model");
    if (!measured)
        mw_label(w, "model", ps->model.name);
    mw_value_double(w, it);
    if (!isfinite(pue) || pue <= 0)
        return;
    single_double(w, &f_facility, it * pue);
    single_double(w, &f_pue, pue);
}

/* The wall against the measured parts (model/reconcile.h). RAPL's
 * privacy modes hold here too: with rapl_energy = off a part from RAPL is
 * not shown, nor the remainder it would reveal; coarse rounds them. */
static void render_reconcile(struct mw *w, const struct power_summary *ps,
                             enum agent_rapl_mode rapl)
{
    struct reconcile rc;
    reconcile_power(&ps->readings, ps->pue, &rc);
    bool rapl_part = false;
    for (int i = RECONCILE_PACKAGES; i <= RECONCILE_DRAM; i++)
        rapl_part |= !rc.part[i].excluded && rc.part[i].channels > 0;
    if (rapl_part && rapl == AGENT_RAPL_OFF)
        return;
    bool round_to = rapl_part && rapl == AGENT_RAPL_COARSE;
    mw_fam(w, &f_parts);
    for (int i = 0; i < _RECONCILE_PARTS; i++) {
        const struct reconcile_sum *sum = &rc.part[i];
        if (sum->excluded || !sum->channels || sum->no_rate)
            continue;
        mw_series(w);
        mw_label(w, "part", reconcile_part_name((enum reconcile_part)i));
        mw_value_double(w, round_to ? round(sum->watts) : sum->watts);
    }
    if (!isfinite(rc.unmeasured_w))
        return;
    mw_fam(w, &f_unmeasured);
    mw_series(w);
    mw_label(w, "source", rc.wall_source);
    mw_value_double(w, round_to ? round(rc.unmeasured_w) : rc.unmeasured_w);
}

static void render_power(struct mw *w, const struct report_ctx *c, enum agent_rapl_mode rapl,
                         double pue)
{
    if (!c->power)
        return;
    render_channels(w, c->power, rapl);
    render_node(w, c->power, rapl, pue);
    render_reconcile(w, c->power, rapl);
}

enum cs_field { CS_TIME, CS_USAGE, CS_DISABLED };

/* A state's counter as an integer; VAL_NONE when unreadable. */
static uint64_t cs_value(const struct cpuidle_state *st, enum cs_field f)
{
    switch (f) {
    case CS_TIME:
        return st->time_us;
    case CS_USAGE:
        return st->usage;
    default:
        return st->disable < 0 ? VAL_NONE : (uint64_t)st->disable;
    }
}

/* One series per CPU and state; the value is v / 10^decimals. */
static void cs_family(struct mw *w, const struct fam *f, const struct cpuidle_sample *ci,
                      enum cs_field field, unsigned decimals)
{
    mw_fam(w, f);
    for (unsigned i = 0; i < ci->ncpus; i++)
        for (unsigned k = 0; k < ci->cpus[i].nstates; k++) {
            const struct cpuidle_state *st = &ci->cpus[i].state[k];
            uint64_t v = cs_value(st, field);
            if (!st->name || v == VAL_NONE)
                continue;
            mw_series(w);
            mw_label_int(w, "cpu", ci->cpus[i].cpu);
            mw_label(w, "state", st->name);
            mw_value_fixed(w, v, decimals);
        }
}

static void render_cstates(struct mw *w, const struct cpuidle_sample *ci)
{
    if (!ci)
        return;
    cs_family(w, &f_idle_time, ci, CS_TIME, 6);
    cs_family(w, &f_idle_usage, ci, CS_USAGE, 0);
    cs_family(w, &f_idle_disabled, ci, CS_DISABLED, 0);
    if (!ci->ncpus)
        return;
    const struct cpuidle_cpu *first = &ci->cpus[0];
    for (int pass = 0; pass < 2; pass++) {
        mw_fam(w, pass ? &f_idle_target : &f_idle_latency);
        for (unsigned k = 0; k < first->nstates; k++) {
            const struct cpuidle_state *st = &first->state[k];
            uint64_t us = pass ? st->residency_us : st->latency_us;
            if (!st->name || us == VAL_NONE)
                continue;
            mw_series(w);
            mw_label(w, "state", st->name);
            mw_value_fixed(w, us, 6);
        }
    }
}

static void cpu_series(struct mw *w, int cpu)
{
    mw_series(w);
    mw_label_int(w, "cpu", cpu);
}

/* kHz as Hz; VAL_NONE leaves the series out. */
static void freq_family(struct mw *w, const struct fam *f, const struct cpufreq_sample *cf,
                        size_t off)
{
    mw_fam(w, f);
    for (unsigned i = 0; i < cf->ncpus; i++) {
        uint64_t khz = *(const uint64_t *)((const char *)&cf->cpus[i] + off);
        if (khz != VAL_NONE) {
            cpu_series(w, cf->cpus[i].cpu);
            mw_value_u64(w, khz * 1000);
        }
    }
}

static void render_frequency(struct mw *w, const struct report_ctx *c)
{
    const struct cpufreq_sample *cf = c->cur->cpufreq;
    if (!cf)
        return;
    freq_family(w, &f_freq, cf, offsetof(struct cpufreq_cpu, cur_khz));
    freq_family(w, &f_freq_min, cf, offsetof(struct cpufreq_cpu, min_khz));
    freq_family(w, &f_freq_max, cf, offsetof(struct cpufreq_cpu, max_khz));
    if (!c->b || !c->a->cpufreq)
        return;
    struct cpufreq_eff *eff = xcalloc(cf->ncpus + 1, sizeof(*eff));
    bool *ok = xcalloc(cf->ncpus + 1, sizeof(*ok));
    for (unsigned i = 0; i < cf->ncpus; i++)
        ok[i] = cpufreq_effective(c->a->cpufreq, cf, cf->cpus[i].cpu, &eff[i]) == 0;
    mw_fam(w, &f_freq_eff);
    for (unsigned i = 0; i < cf->ncpus; i++)
        if (ok[i] && isfinite(eff[i].busy_mhz)) {
            cpu_series(w, cf->cpus[i].cpu);
            mw_value_double(w, eff[i].busy_mhz * 1e6);
        }
    mw_fam(w, &f_freq_avg);
    for (unsigned i = 0; i < cf->ncpus; i++)
        if (ok[i] && isfinite(eff[i].avg_mhz)) {
            cpu_series(w, cf->cpus[i].cpu);
            mw_value_double(w, eff[i].avg_mhz * 1e6);
        }
    free(eff);
    free(ok);
}

/* USER_HZ ticks print as seconds with two exact decimals. */
_Static_assert(PROCSTAT_USER_HZ == 100, "ticks are printed with 2 decimals");

static void render_cpu_seconds(struct mw *w, const struct procstat_sample *ps)
{
    mw_fam(w, &f_cpu_s);
    for (unsigned i = 0; i < ps->ncpus; i++)
        for (int m = PROCSTAT_USER; m <= PROCSTAT_STEAL; m++) {
            uint64_t t = ps->cpus[i].ticks[m];
            if (t == VAL_NONE)
                continue;
            cpu_series(w, ps->cpus[i].cpu);
            mw_label(w, "mode", procstat_mode_name((enum procstat_mode)m));
            mw_value_fixed(w, t, 2);
        }
    /* node_exporter's names: guest is mode "user", guest_nice mode "nice" */
    mw_fam(w, &f_guest_s);
    for (unsigned i = 0; i < ps->ncpus; i++)
        for (int m = PROCSTAT_GUEST; m <= PROCSTAT_GUEST_NICE; m++) {
            uint64_t t = ps->cpus[i].ticks[m];
            if (t == VAL_NONE)
                continue;
            cpu_series(w, ps->cpus[i].cpu);
            mw_label(w, "mode", m == PROCSTAT_GUEST ? "user" : "nice");
            mw_value_fixed(w, t, 2);
        }
}

static void render_utilisation(struct mw *w, const struct report_ctx *c)
{
    const struct procstat_sample *ps = c->cur->procstat;
    if (!ps)
        return;
    render_cpu_seconds(w, ps);
    if (!c->b || !c->a->procstat)
        return;
    mw_fam(w, &f_util);
    for (unsigned i = 0; i < ps->ncpus; i++) {
        const struct procstat_cpu *y = &ps->cpus[i];
        struct procstat_util u;
        if (procstat_util(procstat_find_cpu(c->a->procstat, y->cpu), y, &u) == 0 &&
            isfinite(u.busy_pct)) {
            cpu_series(w, y->cpu);
            mw_value_double(w, u.busy_pct / 100);
        }
    }
}

/* Counts since boot summed over CPUs. The kernel's per-CPU counts are
 * 32-bit: a wrap (after 2^32 interrupts on one CPU) reads as a counter
 * reset, which rate() and increase() absorb. */
static void render_interrupts(struct mw *w, const struct irq_sample *irq)
{
    if (!irq)
        return;
    mw_fam(w, &f_irq);
    for (unsigned i = 0; i < irq->nsources; i++) {
        const struct irq_source *s = &irq->src[i];
        mw_series(w);
        mw_label(w, "irq", s->label);
        mw_label(w, "name", s->name);
        mw_value_u64(w, s->total);
    }
}

/* Runtime PM in use for the device: its status is one the kernel's
 * runtime PM core sets (active .. error). */
static void dev_series(struct mw *w, const struct device_info *d)
{
    mw_series(w);
    mw_label(w, "bus", d->bus);
    mw_label(w, "device", d->name);
}

enum dev_field { DEV_ACTIVE, DEV_ACTIVE_MS, DEV_SUSPENDED_MS, DEV_AUTO };

/* A device's figure as an integer; VAL_NONE when it has none. */
static uint64_t dev_value(const struct device_info *d, enum dev_field f)
{
    switch (f) {
    case DEV_ACTIVE:
        if (d->status < DEV_STATUS_ACTIVE || d->status > DEV_STATUS_RESUMING)
            return VAL_NONE;
        return d->status == DEV_STATUS_ACTIVE || d->status == DEV_STATUS_RESUMING;
    case DEV_ACTIVE_MS:
        return d->active_ms;
    case DEV_SUSPENDED_MS:
        return d->suspended_ms;
    default:
        return d->control == DEV_CONTROL_UNKNOWN ? VAL_NONE : d->control == DEV_CONTROL_AUTO;
    }
}

static void dev_family(struct mw *w, const struct fam *f, const struct devices_sample *s,
                       enum dev_field field, unsigned decimals)
{
    mw_fam(w, f);
    for (size_t i = 0; i < s->n; i++) {
        uint64_t v = dev_value(&s->dev[i], field);
        if (device_has_rpm(&s->dev[i]) && v != VAL_NONE) {
            dev_series(w, &s->dev[i]);
            mw_value_fixed(w, v, decimals);
        }
    }
}

static void render_device_states(struct mw *w, const struct devices_sample *s)
{
    dev_family(w, &f_dev_active, s, DEV_ACTIVE, 0);
    dev_family(w, &f_dev_active_s, s, DEV_ACTIVE_MS, 3);
    dev_family(w, &f_dev_susp_s, s, DEV_SUSPENDED_MS, 3);
    dev_family(w, &f_dev_auto, s, DEV_AUTO, 0);
}

static void render_devices(struct mw *w, const struct report_ctx *c)
{
    const struct devices_sample *s = c->cur->devices;
    if (!s)
        return;
    render_device_states(w, s);
    struct device_candidate *v = NULL;
    /* the policy of watt report and watt tune: built-in rules plus
     * CONFDIR/devices.conf, so the safe set is what tune would switch */
    size_t n = devices_assess_policy(s, report_dev_prev(c), c->devpolicy, &v);
    mw_fam(w, &f_dev_safe);
    for (size_t i = 0; i < n; i++)
        if (device_has_rpm(v[i].dev)) {
            dev_series(w, v[i].dev);
            mw_value_u64(w, v[i].verdict == DEV_VERDICT_SAFE);
        }
    device_candidates_free(v, n);
}

static void render_latency(struct mw *w, const struct latency_sample *l)
{
    if (!l)
        return;
    if (l->global_us >= 0 && l->global_us != LATENCY_NONE) {
        mw_fam(w, &f_lat);
        mw_series(w);
        mw_value_fixed(w, (uint64_t)l->global_us, 6);
    }
    mw_fam(w, &f_lat_cpu);
    for (unsigned i = 0; i < l->ncpus; i++) {
        int64_t us = l->cpus[i].resume_us;
        if (us >= 0 && us != LATENCY_NONE) {
            cpu_series(w, l->cpus[i].cpu);
            mw_value_fixed(w, (uint64_t)us, 6);
        }
    }
}

static void guard_series(struct mw *w, const struct fam *f, const struct guard_status *g)
{
    mw_fam(w, f);
    mw_series(w);
    mw_label(w, "workload", g->workload);
}

static void render_guard(struct mw *w, const struct guard_status *g)
{
    if (!g)
        return;
    guard_series(w, &f_guard_held, g);
    mw_value_u64(w, g->held);
    guard_series(w, &f_guard_held_s, g);
    mw_value_double(w, g->held_s);
    guard_series(w, &f_guard_trans, g);
    mw_value_u64(w, g->transitions);
    guard_series(w, &f_guard_fail, g);
    mw_value_u64(w, g->failures);
    guard_series(w, &f_guard_target, g);
    mw_value_fixed(w, (uint64_t)(g->target_us < 0 ? 0 : g->target_us), 6);
    if (!g->measured)
        return;
    guard_series(w, &f_guard_busy, g);
    mw_value_u64(w, g->busy);
    if (isfinite(g->cpu_ratio)) {
        guard_series(w, &f_guard_cpu, g);
        mw_value_double(w, g->cpu_ratio);
    } else {
        guard_series(w, &f_guard_conn, g);
        mw_value_u64(w, g->connections);
    }
}

/* The fleet controller's families go last, before OpenMetrics' # EOF:
 * checked and converted when read (fleet_doc.h). */
static void render_fleet(struct mw *w, const struct agent_fleet *f)
{
    if (!f)
        return;
    single_u64(w, &f_fleet_up, f->ok);
    if (f->ok)
        strbuf_append(w->out, w->om ? f->om : f->text);
}

void agent_metrics_render(const struct report_ctx *c, const struct agent_energy *e,
                          const struct agent_self *self, enum agent_rapl_mode rapl, double pue,
                          bool openmetrics, struct strbuf *out)
{
    struct mw w = {.out = out, .om = openmetrics};
    render_self(&w, self);
    render_energy(&w, e, rapl);
    if (c && c->cur) {
        render_power(&w, c, rapl, pue);
        render_cstates(&w, c->cur->cpuidle);
        render_frequency(&w, c);
        metrics_render_turbo(&w, c);
        metrics_render_cstate(&w, self ? self->cstate : NULL, c);
        metrics_render_memory(&w, self ? self->memory : NULL, c);
        metrics_render_gpu(&w, c);
        render_utilisation(&w, c);
        render_interrupts(&w, c->cur->irq);
        render_devices(&w, c);
        render_latency(&w, c->cur->latency);
    }
    render_guard(&w, self ? self->guard : NULL);
    metrics_render_pack(&w, self ? self->pack : NULL);
    agent_attrib_render(&w, self ? self->attrib : NULL);
    render_fleet(&w, self ? self->fleet : NULL);
    if (openmetrics)
        strbuf_append(out, "# EOF\n");
}
