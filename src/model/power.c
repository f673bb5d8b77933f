#include "model/power.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"

/* The watts of one scope: the sum over its channels, and whether every
 * channel gave a rate. A scope with one channel missing (package-1's
 * energy_uj unreadable) is not a measurement of the whole. */
static double sum_scope(const struct power_readings *r, enum power_scope scope, int *count,
                        bool *complete)
{
    double w = 0;
    *count = 0;
    *complete = true;
    for (size_t i = 0; i < r->n; i++) {
        if (r->v[i].scope != scope)
            continue;
        if (isnan(r->v[i].watts)) {
            *complete = false;
            continue;
        }
        w += r->v[i].watts;
        (*count)++;
    }
    return w;
}

/* Which whole-server meter is preferred: the ACPI power meter (read from
 * sysfs, no BMC round trip, averaged by the firmware over its own
 * interval), then the BMC's DCMI reading (the wall as the BMC measures it:
 * the same PSUs, a slower path), then any other platform sensor (an hwmon
 * chip labelled "System Power"). Lower is better. */
static int meter_rank(const struct power_reading *p)
{
    if (streq(p->source, "acpi_power_meter"))
        return 0;
    return streq(p->source, "dcmi") ? 1 : 2;
}

/* One whole-server meter. Two meters of one server measure the same
 * watts: adding them would double-count. */
const struct power_reading *power_platform_meter(const struct power_readings *r)
{
    const struct power_reading *best = NULL;
    for (size_t i = 0; i < r->n; i++) {
        const struct power_reading *p = &r->v[i];
        if (p->scope != POWER_SCOPE_PLATFORM || isnan(p->watts))
            continue;
        if (!best || meter_rank(p) < meter_rank(best))
            best = p;
    }
    return best;
}

/* How many platform meters gave watts. */
static unsigned platform_meters(const struct power_readings *r)
{
    unsigned n = 0;
    for (size_t i = 0; i < r->n; i++)
        n += r->v[i].scope == POWER_SCOPE_PLATFORM && !isnan(r->v[i].watts);
    return n;
}

static bool has_scope(const struct power_readings *r, enum power_scope scope)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].scope == scope)
            return true;
    return false;
}

/* The first stuck counter among the channels that make a node figure. */
static const struct power_reading *stuck_meter(const struct power_readings *r)
{
    for (size_t i = 0; i < r->n; i++) {
        enum power_scope sc = r->v[i].scope;
        if (r->v[i].stuck && (sc == POWER_SCOPE_PLATFORM || sc == POWER_SCOPE_PSYS ||
                              sc == POWER_SCOPE_PACKAGE || sc == POWER_SCOPE_DRAM))
            return &r->v[i];
    }
    return NULL;
}

/* Was any package or platform meter read at all (a counter or a power)? */
static bool any_meter_read(const struct power_readings *r)
{
    for (size_t i = 0; i < r->n; i++)
        if ((r->v[i].scope == POWER_SCOPE_PACKAGE || r->v[i].scope == POWER_SCOPE_PLATFORM) &&
            (!isnan(r->v[i].joules) || !isnan(r->v[i].watts)))
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
        .poll_cpus = NAN,
        .fit_busy_cores = NAN,
        .fitted_w = NAN,
    };
    *readings = (struct power_readings){0};
    power_readings_mark_stuck(&ps->readings, busy_cores);
    if (!isnan(busy_cores))
        ps->estimated_w = model_estimate(m, cores, busy_cores, ghz);

    int n_psys, n_pkg, n_dram;
    bool all_psys, all_pkg, all_dram;
    const struct power_reading *meter = power_platform_meter(&ps->readings);
    double psys = sum_scope(&ps->readings, POWER_SCOPE_PSYS, &n_psys, &all_psys);
    double pkg = sum_scope(&ps->readings, POWER_SCOPE_PACKAGE, &n_pkg, &all_pkg);
    double dram = sum_scope(&ps->readings, POWER_SCOPE_DRAM, &n_dram, &all_dram);
    if (meter) {
        char cov[192];
        if (platform_meters(&ps->readings) > 1)
            snprintf(cov, sizeof(cov),
                     "the whole server (%s %s; chosen over the other wall meter%s: %s)",
                     meter->source, meter->domain, platform_meters(&ps->readings) > 2 ? "s" : "",
                     meter_rank(meter) == 0 ? "sysfs, no BMC round trip"
                                            : "the BMC's own wall reading");
        else
            snprintf(cov, sizeof(cov), "the whole server (%s %s)", meter->source, meter->domain);
        set_measured(ps, meter->watts, meter->source, cov);
    } else if (n_psys && all_psys) {
        set_measured(ps, psys, "rapl psys", "the SoC platform (RAPL psys)");
    } else if (n_pkg && all_pkg && all_dram) {
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
        /* A meter that exists but gave no (complete) rate is still a meter:
         * say why its figure is not the node's. */
        const struct power_reading *stuck = stuck_meter(&ps->readings);
        ps->meter_unused = true;
        if (stuck)
            snprintf(ps->coverage, sizeof(ps->coverage),
                     "estimated: %s %s is absent: the counter did not advance", stuck->source,
                     stuck->domain);
        else if (n_pkg && !all_pkg)
            snprintf(ps->coverage, sizeof(ps->coverage),
                     "estimated: a RAPL package gave no rate, a partial sum would be wrong");
        else if (!has_scope(&ps->readings, POWER_SCOPE_PACKAGE) &&
                 !has_scope(&ps->readings, POWER_SCOPE_PLATFORM))
            ps->meter_unused = false;
        else if (!any_meter_read(&ps->readings))
            snprintf(ps->coverage, sizeof(ps->coverage),
                     "estimated: the meter could not be read here (see the problems)");
        else
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
