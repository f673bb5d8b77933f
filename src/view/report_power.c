/* The report's power section: every measured channel, the node figure
 * (measured, and by what; or estimated, and by which model), and the
 * facility view (IT watts x PUE). */
#include "view/report_power.h"
#include "view/report_memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/table.h"
#include "base/util.h"
#include "model/fit.h"
#include "sense/clock.h"
#include "sense/cpufreq.h"
#include "sense/dcmi.h"
#include "sense/gpu.h"
#include "sense/hwmon.h"
#include "sense/procstat.h"
#include "sense/rapl.h"

/* A counter that did not advance is absent, with the reason in problems. */
static void stuck_diags(const struct report_ctx *c, const struct power_summary *ps, double busy)
{
    for (size_t i = 0; i < ps->readings.n; i++) {
        const struct power_reading *p = &ps->readings.v[i];
        if (!p->stuck)
            continue;
        char where[96], cpus[64];
        snprintf(where, sizeof(where), "%s %s", p->source, p->domain);
        if (isnan(busy))
            snprintf(cpus, sizeof(cpus), "utilisation unknown");
        else
            snprintf(cpus, sizeof(cpus), "%.2f CPUs busy", busy);
        diags_add(c->diags, where, 0,
                  "absent: the counter did not advance over the %.3f s interval (%s): a stuck "
                  "counter, not 0 W",
                  c->interval_s, cpus);
    }
}

/* A GPU's hwmon chip ("hwmon4/energy1") is the GPU sampler's reading of
 * it (source "gpu"): its hwmon readings go, so each GPU counts once. */
static void drop_gpu_chips(struct power_readings *r, const struct gpu_sample *g)
{
    size_t w = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct power_reading *p = &r->v[i];
        bool gpu = false;
        size_t len = strcspn(p->domain, "/");
        for (size_t k = 0; k < g->n && !gpu && streq(p->source, "hwmon"); k++)
            gpu = g->v[k].hwmon[0] && strlen(g->v[k].hwmon) == len &&
                  strncmp(p->domain, g->v[k].hwmon, len) == 0;
        if (!gpu)
            r->v[w++] = *p;
    }
    r->n = w;
}

void report_power_build(const struct report_ctx *c, const struct power_model *m,
                        struct power_summary *ps)
{
    struct power_readings r = {0};
    const struct sample *a = c->a, *b = c->b;
    if (c->cur->rapl)
        rapl_power(a->rapl, b ? b->rapl : NULL, c->interval_s, &r, c->diags);
    if (c->cur->hwmon)
        hwmon_power(a->hwmon, b ? b->hwmon : NULL, c->interval_s, &r, c->diags);
    if (c->cur->gpu) {
        drop_gpu_chips(&r, c->cur->gpu);
        gpu_power(a->gpu, b ? b->gpu : NULL, c->interval_s, &r, c->diags);
    }
    if (c->cur->dcmi)
        dcmi_power(a->dcmi, b ? b->dcmi : NULL, &r, c->diags);
    double busy = b ? procstat_busy_cpus(a->procstat, b->procstat) : NAN;
    double ghz = cpufreq_mean_busy_ghz(b ? a->cpufreq : NULL, c->cur->cpufreq);
    unsigned cores = cpuset_count(&c->cur->topo.online);
    /* a fitted model counts POLL busy (model/fit.h): it was fitted so */
    double poll = b ? fit_poll_cpus(a->cpuidle, b->cpuidle, c->interval_s) : NAN;
    double fit_busy = fit_busy_cpus(busy, poll, cores);
    power_summarise(ps, &r, m, cores, m->fit.n ? fit_busy : busy, ghz);
    ps->poll_cpus = poll;
    ps->fit_busy_cores = fit_busy;
    if (m->fit.n) {
        ps->fitted = *m;
        ps->fitted_w = ps->estimated_w;
    } else if (c->fitted && c->fitted->fit.n) {
        ps->fitted = *c->fitted;
        if (!isnan(fit_busy))
            ps->fitted_w = model_estimate(c->fitted, cores, fit_busy, ghz);
    }
    stuck_diags(c, ps, busy);
}

/* "fit": how a fitted model fitted; null for a model that was not. */
static void fit_json(const struct power_model *m, struct json *j)
{
    if (!m->fit.n) {
        json_null(j);
        return;
    }
    json_object_begin(j);
    json_kv_u64(j, "n", m->fit.n);
    json_kv_double(j, "rmse_w", m->fit.rmse_w);
    json_kv_double(j, "mape_pct", m->fit.mape_pct);
    json_kv_double(j, "r2", m->fit.r2);
    json_kv_double(j, "busy_min", m->fit.busy_min);
    json_kv_double(j, "busy_max", m->fit.busy_max);
    if (m->fit.cpus)
        json_kv_u64(j, "cpus", m->fit.cpus);
    else
        json_kv_null(j, "cpus");
    json_kv_string(j, "time", m->fit.time[0] ? m->fit.time : NULL);
    json_object_end(j);
}

static void channel_json(const struct power_reading *p, struct json *j)
{
    json_object_begin(j);
    json_kv_string(j, "source", p->source);
    json_kv_string(j, "via", p->via);
    json_kv_string(j, "domain", p->domain);
    json_kv_string(j, "label", p->label[0] ? p->label : NULL);
    json_kv_string(j, "scope", power_scope_name(p->scope));
    if (p->package >= 0)
        json_kv_i64(j, "package", p->package);
    else
        json_kv_null(j, "package");
    json_kv_double(j, "joules", p->joules);
    json_kv_double(j, "delta_j", p->delta_j);
    json_kv_double(j, "watts", p->watts);
    json_kv_string(j, "absent", p->stuck ? "the counter did not advance" : NULL);
    if (!isnan(p->period))
        json_kv_double(j, "period_s", p->period);
    json_object_end(j);
}

static void model_json(const struct power_summary *ps, struct json *j)
{
    const struct power_model *m = &ps->model;
    json_object_begin(j);
    json_kv_string(j, "name", m->name);
    json_kv_string(j, "source", m->source);
    json_kv_string(j, "description", m->description);
    json_kv_double(j, "idle_base_w", m->idle_base_w);
    json_kv_double(j, "idle_per_cpu_w", m->idle_per_core_w);
    json_kv_double(j, "active_per_cpu_w", m->active_per_core_w);
    json_kv_double(j, "ref_ghz", m->ref_ghz);
    json_kv_double(j, "ghz_exponent", m->ghz_exponent);
    json_kv_double(j, "error_pct", m->error_pct);
    json_kv_u64(j, "cpus", ps->cores);
    json_kv_double(j, "busy_cpus", ps->busy_cores);
    json_kv_double(j, "ghz", ps->ghz);
    json_kv_double(j, "estimated_w", ps->estimated_w);
    if (m->fit.n) { /* only for a fitted model: the other documents stay as they were */
        json_kv_double(j, "poll_cpus", ps->poll_cpus);
        json_key(j, "fit");
        fit_json(m, j);
    }
    json_object_end(j);
}

/* "fitted": the fitted model beside a measurement (or as the node's model). */
static void fitted_json(const struct power_summary *ps, struct json *j)
{
    const struct power_model *m = &ps->fitted;
    json_object_begin(j);
    json_kv_string(j, "source", m->source);
    json_kv_double(j, "estimated_w", ps->fitted_w);
    json_kv_double(j, "busy_cpus", ps->fit_busy_cores);
    json_kv_double(j, "poll_cpus", ps->poll_cpus);
    json_kv_double(j, "idle_base_w", m->idle_base_w);
    json_kv_double(j, "idle_per_cpu_w", m->idle_per_core_w);
    json_kv_double(j, "active_per_cpu_w", m->active_per_core_w);
    json_kv_double(j, "ref_ghz", m->ref_ghz);
    json_kv_double(j, "ghz_exponent", m->ghz_exponent);
    json_key(j, "fit");
    fit_json(m, j);
    json_object_end(j);
}

static void power_json(const struct report_ctx *c, struct json *j)
{
    const struct power_summary *ps = c->power;
    json_object_begin(j);
    json_kv_bool(j, "measured", ps->measured);
    json_kv_string(j, "source", ps->source);
    json_kv_string(j, "coverage", ps->coverage);
    json_kv_double(j, "it_w", ps->it_w);
    json_kv_double(j, "estimated_w", ps->estimated_w);
    double dram_w, node_w;
    const char *why;
    json_kv_double(j, "dram_share_pct", report_dram_share(c, &dram_w, &node_w, &why));
    json_key(j, "facility");
    json_object_begin(j);
    json_kv_double(j, "pue", ps->pue);
    json_kv_double(j, "facility_w", ps->facility_w);
    json_kv_double(j, "overhead_w", ps->facility_w - ps->it_w);
    json_object_end(j);
    json_key(j, "model");
    model_json(ps, j);
    if (ps->fitted.fit.n) {
        json_key(j, "fitted");
        fitted_json(ps, j);
    }
    json_key(j, "channels");
    json_array_begin(j);
    for (size_t i = 0; i < ps->readings.n; i++)
        channel_json(&ps->readings.v[i], j);
    json_array_end(j);
    json_object_end(j);
}

static char *fmt_num(double v, int decimals)
{
    return isnan(v) ? xstrdup("-") : xasprintf("%.*f", decimals, v);
}

static void channels_text(const struct power_summary *ps, struct strbuf *out)
{
    struct table t;
    table_init(&t, "source", "via", "domain", "scope", ">W", ">J (cumulative)", NULL);
    for (size_t i = 0; i < ps->readings.n; i++) {
        const struct power_reading *p = &ps->readings.v[i];
        _cleanup_free_ char *w = fmt_num(p->watts, 2);
        _cleanup_free_ char *jl = fmt_num(p->joules, 3);
        table_add(&t, p->source, p->via, p->domain, power_scope_name(p->scope), w, jl);
    }
    table_render(&t, out, REPORT_WIDTH);
    table_free(&t);
}

/* The fitted model: its estimate beside a measurement, and how it fitted. */
static void fitted_text(const struct power_summary *ps, struct strbuf *out)
{
    const struct power_model_fit *f = &ps->fitted.fit;
    if (ps->measured && !isnan(ps->fitted_w))
        strbuf_appendf(out,
                       "  the fitted model would estimate %.1f W (RMSE %.1f W over %u samples)\n",
                       ps->fitted_w, f->rmse_w, f->n);
    _cleanup_free_ char *r2 = isnan(f->r2) ? xstrdup("") : xasprintf(", R² %.3f", f->r2);
    _cleanup_free_ char *line =
        xasprintf("fit (%s): RMSE %.1f W, mean absolute error %.1f %%%s, %u samples over "
                  "%.2f..%.2f busy CPUs%s%s",
                  ps->fitted.source, f->rmse_w, f->mape_pct, r2, f->n, f->busy_min, f->busy_max,
                  f->time[0] ? ", fitted " : "", f->time);
    report_wrap(out, "  ", 4, line);
    if (f->cpus && f->cpus != ps->cores) {
        _cleanup_free_ char *warn = xasprintf(
            "the fit saw %u CPUs only, this machine has %u online: its idle power per CPU "
            "could not be told from the base, so the estimate is off by that much per CPU",
            f->cpus, ps->cores);
        report_wrap(out, "  ", 4, warn);
    }
    if (!isnan(ps->poll_cpus) && ps->poll_cpus > 0)
        strbuf_appendf(
            out,
            "  POLL: %.2f CPUs spinning in the POLL idle state, counted busy by the fitted model\n",
            ps->poll_cpus);
}

static void node_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct power_summary *ps = c->power;
    const struct power_model *m = &ps->model;
    if (ps->measured) {
        strbuf_appendf(out, "  node: %.1f W measured (%s)\n", ps->it_w, ps->source);
        _cleanup_free_ char *line = xasprintf("covers %s", ps->coverage);
        report_wrap(out, "  ", 4, line);
    } else if (!isnan(ps->it_w) && m->fit.n)
        strbuf_appendf(out, "  node: %.1f W estimated (fitted, RMSE %.1f W over %u samples)\n",
                       ps->it_w, m->fit.rmse_w, m->fit.n);
    else if (!isnan(ps->it_w))
        strbuf_appendf(out, "  node: %.1f W estimated (%s, ±%.0f %%)\n", ps->it_w, m->name,
                       m->error_pct);
    else if (!c->b)
        strbuf_appendf(out,
                       "  node: - (estimated by %s, but one snapshot has no utilisation; "
                       "use --interval)\n",
                       m->name);
    else
        strbuf_appendf(out,
                       "  node: - (estimated by %s, but the interval has no utilisation: "
                       "no /proc/stat tick)\n",
                       m->name);
    if (ps->meter_unused)
        report_wrap(out, "  ", 4, ps->coverage);
    if (!ps->readings.n)
        report_wrap(out, "  ", 4,
                    "no power meter found: no RAPL (powercap or perf power PMU), no hwmon "
                    "power sensor, no ACPI power meter");
    if (!ps->measured) {
        _cleanup_free_ char *line =
            xasprintf("model %s (%s): %s", m->name, m->source, m->description);
        report_wrap(out, "  ", 4, line);
    }
    if (!isnan(ps->busy_cores))
        strbuf_appendf(out, "  model inputs: %.2f of %u CPUs busy%s\n", ps->busy_cores, ps->cores,
                       isnan(ps->ghz) ? "" : "");
    if (ps->measured && !isnan(ps->estimated_w) && !m->fit.n)
        strbuf_appendf(out, "  the model (%s) would estimate %.1f W\n", m->name, ps->estimated_w);
    if (ps->fitted.fit.n)
        fitted_text(ps, out);
    if (!isnan(ps->facility_w))
        strbuf_appendf(out, "  facility at PUE %.2f: %.1f W (%.1f W cooling and power delivery)\n",
                       ps->pue, ps->facility_w, ps->facility_w - ps->it_w);
}

static void power_text(const struct report_ctx *c, struct strbuf *out)
{
    node_text(c, out);
    double dram_w, node_w;
    const char *why;
    double share = report_dram_share(c, &dram_w, &node_w, &why);
    if (!isnan(share))
        strbuf_appendf(out, "  DRAM (RAPL): %.1f W, %.1f %% of the node's %.1f W (%s)\n", dram_w,
                       share, node_w, c->power->source);
    if (c->power->readings.n)
        channels_text(c->power, out);
}

const struct report_section report_section_power = {
    .key = "power",
    .title = "Power",
    .json = power_json,
    .text = power_text,
};
