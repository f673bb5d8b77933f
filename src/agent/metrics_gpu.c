/* GPU metrics: per GPU its power over the interval (the report's "gpu"
 * power channel), its energy counter, limit and range, utilisation,
 * temperature, clocks and runtime PM, rendered from the sample. */
#include "agent/metrics_gpu.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "base/util.h"
#include "sense/gpu.h"
#include "view/report_gpu.h"

static const struct fam f_power =
    GAUGE("watt_gpu_power_watts", "watts",
          "Power of the GPU over the last interval: its energy counter differenced, else the "
          "driver's own reading (the report's power channel of source gpu).");
static const struct fam f_energy =
    COUNTER("watt_gpu_energy_joules_total", "joules",
            "The GPU's energy counter (i915/xe energyK_input, NVML total energy consumption) "
            "since its driver loaded; resets when the driver reloads.");
static const struct fam f_limit = GAUGE("watt_gpu_power_limit_watts", "watts",
                                        "The GPU's power limit in force (amdgpu power1_cap, "
                                        "i915/xe powerK_max, NVML management limit).");
static const struct fam f_limit_min =
    GAUGE("watt_gpu_power_limit_min_watts", "watts", "The lowest power limit the GPU accepts.");
static const struct fam f_limit_max =
    GAUGE("watt_gpu_power_limit_max_watts", "watts",
          "The highest power limit the GPU accepts (i915/xe: the rated maximum).");
static const struct fam f_busy = GAUGE("watt_gpu_busy_ratio", "ratio",
                                       "Share of time the GPU was busy, 0..1 (amdgpu "
                                       "gpu_busy_percent, NVML utilisation rate).");
static const struct fam f_temp =
    GAUGE("watt_gpu_temperature_celsius", "celsius", "Temperature of the GPU (edge or die).");
static const struct fam f_clock = GAUGE("watt_gpu_clock_hertz", "hertz",
                                        "Current clock of the GPU: clock=\"core\" (graphics/SM) "
                                        "or clock=\"mem\" (memory).");
static const struct fam f_rpm =
    GAUGE("watt_gpu_runtime_suspended", NULL,
          "1 when the GPU's PCI function is runtime-suspended (power/runtime_status), else 0.");
static const struct fam f_info =
    GAUGE("watt_gpu_info", NULL,
          "1 for each GPU, with its driver, product name, PCI address and amdgpu performance "
          "level (or NVML P-state, \"P0\"..\"P15\").");

static void labels(struct mw *w, const struct gpu_dev *g)
{
    mw_series(w);
    mw_label(w, "gpu", g->id);
    mw_label(w, "driver", g->driver);
    mw_label(w, "pdev", g->pdev);
}

static void gauge_each(struct mw *w, const struct fam *f, const struct gpu_sample *gs, size_t off,
                       double scale)
{
    mw_fam(w, f);
    for (size_t i = 0; i < gs->n; i++) {
        const struct gpu_dev *g = &gs->v[i];
        double v = *(const double *)((const char *)g + off);
        if (g->lost || isnan(v))
            continue;
        labels(w, g);
        mw_value_double(w, v * scale);
    }
}

static void render_power(struct mw *w, const struct report_ctx *c, const struct gpu_sample *gs)
{
    mw_fam(w, &f_power);
    for (size_t i = 0; i < gs->n; i++) {
        const struct power_reading *p = report_gpu_reading(c, &gs->v[i]);
        if (!p || isnan(p->watts))
            continue;
        labels(w, &gs->v[i]);
        mw_label(w, "via", isnan(p->delta_j) ? "driver_reading" : "energy_counter");
        mw_value_double(w, p->watts);
    }
}

static void render_clocks(struct mw *w, const struct gpu_sample *gs)
{
    mw_fam(w, &f_clock);
    for (size_t i = 0; i < gs->n; i++) {
        const struct gpu_dev *g = &gs->v[i];
        for (int k = 0; k < 2 && !g->lost; k++) {
            double mhz = k ? g->mem_mhz : g->core_mhz;
            if (isnan(mhz))
                continue;
            labels(w, g);
            mw_label(w, "clock", k ? "mem" : "core");
            mw_value_double(w, mhz * 1e6);
        }
    }
}

static void render_info(struct mw *w, const struct gpu_sample *gs)
{
    mw_fam(w, &f_rpm);
    for (size_t i = 0; i < gs->n; i++)
        if (gs->v[i].rpm_status[0]) {
            labels(w, &gs->v[i]);
            mw_value_u64(w, streq(gs->v[i].rpm_status, "suspended"));
        }
    mw_fam(w, &f_info);
    for (size_t i = 0; i < gs->n; i++) {
        const struct gpu_dev *g = &gs->v[i];
        char level[24];
        if (g->perf_level[0])
            snprintf(level, sizeof(level), "%s", g->perf_level);
        else if (g->pstate >= 0)
            snprintf(level, sizeof(level), "P%d", g->pstate);
        else
            level[0] = '\0';
        labels(w, g);
        mw_label(w, "name", g->name);
        mw_label(w, "perf_level", level);
        mw_value_u64(w, 1);
    }
}

void metrics_render_gpu(struct mw *w, const struct report_ctx *c)
{
    const struct gpu_sample *gs = c->cur->gpu;
    if (!gs || !gs->n)
        return;
    render_power(w, c, gs);
    gauge_each(w, &f_energy, gs, offsetof(struct gpu_dev, energy_j), 1);
    gauge_each(w, &f_limit, gs, offsetof(struct gpu_dev, cap_w), 1);
    gauge_each(w, &f_limit_min, gs, offsetof(struct gpu_dev, cap_min_w), 1);
    gauge_each(w, &f_limit_max, gs, offsetof(struct gpu_dev, cap_max_w), 1);
    gauge_each(w, &f_busy, gs, offsetof(struct gpu_dev, busy_pct), 0.01);
    gauge_each(w, &f_temp, gs, offsetof(struct gpu_dev, temp_c), 1);
    render_clocks(w, gs);
    render_info(w, gs);
}
