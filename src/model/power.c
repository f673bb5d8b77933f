#include "model/power.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"

static double sum_scope(const struct power_readings *r, enum power_scope scope, int *count)
{
    double w = 0;
    *count = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (r->v[i].scope != scope || isnan(r->v[i].watts))
            continue;
        w += r->v[i].watts;
        (*count)++;
    }
    return w;
}

static bool has_scope(const struct power_readings *r, enum power_scope scope)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].scope == scope)
            return true;
    return false;
}

static void set_measured(struct power_summary *ps, double w, const char *src, const char *cov)
{
    ps->measured = true;
    ps->it_w = w;
    snprintf(ps->source, sizeof(ps->source), "%s", src);
    snprintf(ps->coverage, sizeof(ps->coverage), "%s", cov);
}

void power_summarise(struct power_summary *ps, struct power_readings *readings,
                     const struct power_model *m, unsigned cores, double busy_cores, double ghz)
{
    *ps = (struct power_summary){
        .it_w = NAN,
        .estimated_w = NAN,
        .busy_cores = busy_cores,
        .cores = cores,
        .ghz = ghz,
        .model = *m,
        .pue = m->pue,
        .facility_w = NAN,
        .readings = *readings,
    };
    *readings = (struct power_readings){0};
    if (!isnan(busy_cores))
        ps->estimated_w = model_estimate(m, cores, busy_cores, ghz);

    int n_platform, n_psys, n_pkg, n_dram;
    double platform = sum_scope(&ps->readings, POWER_SCOPE_PLATFORM, &n_platform);
    double psys = sum_scope(&ps->readings, POWER_SCOPE_PSYS, &n_psys);
    double pkg = sum_scope(&ps->readings, POWER_SCOPE_PACKAGE, &n_pkg);
    double dram = sum_scope(&ps->readings, POWER_SCOPE_DRAM, &n_dram);
    if (n_platform) {
        const char *src = "platform meter";
        for (size_t i = 0; i < ps->readings.n; i++)
            if (ps->readings.v[i].scope == POWER_SCOPE_PLATFORM)
                src = ps->readings.v[i].source;
        set_measured(ps, platform, src, "the whole server (platform power meter)");
    } else if (n_psys) {
        set_measured(ps, psys, "rapl psys", "the SoC platform (RAPL psys)");
    } else if (n_pkg) {
        set_measured(ps, pkg + dram, n_dram ? "rapl package+dram" : "rapl package",
                     n_dram ? "CPU packages and DRAM only: fans, disks, NICs and PSU losses "
                              "are not metered"
                            : "CPU packages only: memory and the rest of the server are not "
                              "metered");
    } else {
        ps->it_w = ps->estimated_w;
        snprintf(ps->source, sizeof(ps->source), "model %s", m->name);
        snprintf(ps->coverage, sizeof(ps->coverage), "the whole server (estimated, ±%.0f %%)",
                 m->error_pct);
        /* A meter that exists but gave no rate (one snapshot) is still a meter. */
        if (has_scope(&ps->readings, POWER_SCOPE_PACKAGE) ||
            has_scope(&ps->readings, POWER_SCOPE_PLATFORM))
            snprintf(ps->coverage, sizeof(ps->coverage),
                     "a meter exists but one snapshot gives no rate: estimated");
    }
    if (!isnan(ps->it_w))
        ps->facility_w = ps->it_w * ps->pue;
}

void power_summary_free(struct power_summary *ps)
{
    power_readings_free(&ps->readings);
}
