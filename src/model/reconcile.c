/* Wall power against the sum of the measured parts (reconcile.h). */
#include "model/reconcile.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"
#include "model/power.h"

/* hwmon chips of GPU drivers (Documentation/gpu/amdgpu/thermal.rst,
 * drivers/gpu/drm/i915/i915_hwmon.c, drivers/gpu/drm/xe/xe_hwmon.c) and
 * of CPU packages (the energy RAPL also counts). */
static const char *const gpu_chips[] = {"amdgpu", "radeon", "i915", "xe", "nouveau"};
static const char *const cpu_chips[] = {"amd_energy", "zenpower", "fam15h_power"};

static bool in(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (streq(s, list[i]))
            return true;
    return false;
}

/* PMBus PSU sensors are labelled pin (input) and pout (output): the
 * supply's side of the wall, not a part (Documentation/hwmon/pmbus.rst). */
static bool psu_label(const char *label)
{
    return strncasecmp(label, "pin", 3) == 0 || strncasecmp(label, "pout", 4) == 0;
}

enum kind { K_NONE, K_PACKAGE, K_PSYS, K_DRAM, K_GPU, K_HWMON_GPU, K_HWMON_CPU, K_OTHER };

/* A channel that is not a meter at all: an hwmon power sensor with only a
 * cap (i915's and xe's power1_max), no reading of any kind. */
static bool no_meter(const struct power_reading *p)
{
    return streq(p->source, "hwmon") && strstr(p->domain, "/power") && isnan(p->watts);
}

static enum kind kind_of(const struct power_reading *p)
{
    if (no_meter(p))
        return K_NONE;
    switch (p->scope) {
    case POWER_SCOPE_PACKAGE:
        return K_PACKAGE;
    case POWER_SCOPE_PSYS:
        return K_PSYS;
    case POWER_SCOPE_DRAM:
        return K_DRAM;
    case POWER_SCOPE_DEVICE:
        if (streq(p->source, "gpu"))
            return K_GPU;
        if (in(p->chip, gpu_chips, ARRAY_SIZE(gpu_chips)))
            return K_HWMON_GPU;
        if (in(p->chip, cpu_chips, ARRAY_SIZE(cpu_chips)))
            return K_HWMON_CPU;
        return psu_label(p->label) ? K_NONE : K_OTHER;
    default: /* core, uncore: inside the packages; platform: the wall */
        return K_NONE;
    }
}

/* The hwmon chip of a domain "hwmon2/energy1": its length up to the '/'. */
static size_t chip_len(const char *domain)
{
    const char *slash = strchr(domain, '/');
    return slash ? (size_t)(slash - domain) : strlen(domain);
}

static bool same_chip(const struct power_reading *a, const struct power_reading *b)
{
    size_t n = chip_len(a->domain);
    return n == chip_len(b->domain) && strncmp(a->domain, b->domain, n) == 0;
}

/* One channel per GPU hwmon chip, as the GPU sampler takes one figure per
 * GPU: xe's energy1 "card" contains energy2 "pkg" (xe_hwmon.c), and an
 * APU's amdgpu fastPPT and slowPPT are one power averaged twice. The
 * channel labelled "card", else the chip's first. */
static bool gpu_pick(const struct power_readings *r, size_t i)
{
    const struct power_reading *p = &r->v[i];
    size_t first = SIZE_MAX;
    for (size_t k = 0; k < r->n; k++) {
        const struct power_reading *q = &r->v[k];
        if (kind_of(q) != K_HWMON_GPU || !same_chip(p, q))
            continue;
        if (strcasecmp(q->label, "card") == 0)
            return k == i;
        if (first == SIZE_MAX)
            first = k;
    }
    return first == i;
}

static void add(struct reconcile_sum *s, const struct power_reading *p)
{
    if (isnan(p->watts)) {
        s->no_rate++;
        return;
    }
    s->watts += p->watts;
    s->channels++;
}

static bool present(const struct power_readings *r, enum kind k)
{
    for (size_t i = 0; i < r->n; i++)
        if (kind_of(&r->v[i]) == k)
            return true;
    return false;
}

static void sum_parts(const struct power_readings *r, struct reconcile *rc)
{
    bool rapl_pkg = present(r, K_PACKAGE), gpu = present(r, K_GPU);
    bool psys = !rapl_pkg && !present(r, K_HWMON_CPU) && present(r, K_PSYS);
    for (size_t i = 0; i < r->n; i++) {
        const struct power_reading *p = &r->v[i];
        switch (kind_of(p)) {
        case K_PACKAGE:
            add(&rc->part[RECONCILE_PACKAGES], p);
            break;
        case K_HWMON_CPU:
            if (!rapl_pkg)
                add(&rc->part[RECONCILE_PACKAGES], p);
            break;
        case K_PSYS:
            add(&rc->part[RECONCILE_PSYS], p);
            break;
        case K_DRAM:
            add(&rc->part[RECONCILE_DRAM], p);
            break;
        case K_GPU:
            add(&rc->part[RECONCILE_GPUS], p);
            break;
        case K_HWMON_GPU:
            if (!gpu && gpu_pick(r, i))
                add(&rc->part[RECONCILE_GPUS], p);
            break;
        case K_OTHER:
            add(&rc->part[RECONCILE_OTHER], p);
            break;
        case K_NONE:
            break;
        }
    }
    struct reconcile_sum *ps = &rc->part[RECONCILE_PSYS];
    if (ps->channels + ps->no_rate && !psys)
        ps->excluded = "covers the CPU packages, which are counted: not added";
    struct reconcile_sum *dram = &rc->part[RECONCILE_DRAM];
    if (psys && dram->channels + dram->no_rate)
        dram->excluded = "inside RAPL psys, which is counted: not added";
}

static void total(struct reconcile *rc)
{
    rc->parts_w = 0;
    rc->parts_complete = true;
    for (int i = 0; i < _RECONCILE_PARTS; i++) {
        const struct reconcile_sum *s = &rc->part[i];
        if (s->excluded)
            continue;
        rc->parts_w += s->watts;
        rc->parts_complete &= s->no_rate == 0;
    }
}

void reconcile_power(const struct power_readings *readings, double pue, struct reconcile *ret)
{
    struct reconcile rc = {
        .wall_w = NAN,
        .unmeasured_w = NAN,
        .pue = pue,
        .facility_w = NAN,
    };
    sum_parts(readings, &rc);
    total(&rc);
    const struct power_reading *wall = power_platform_meter(readings);
    if (!wall) {
        snprintf(rc.note, sizeof(rc.note),
                 "no wall meter (ACPI power meter or BMC DCMI): the unmeasured remainder cannot "
                 "be known; the measured parts only");
        *ret = rc;
        return;
    }
    rc.have_wall = true;
    snprintf(rc.wall_source, sizeof(rc.wall_source), "%s", wall->source);
    snprintf(rc.wall_via, sizeof(rc.wall_via), "%s", wall->via);
    snprintf(rc.wall_domain, sizeof(rc.wall_domain), "%s", wall->domain);
    rc.wall_w = wall->watts;
    /* Parts that gave no rate would be in the remainder: not a remainder
     * then, unless what was measured already exceeds the wall. */
    rc.parts_exceed = rc.parts_w > rc.wall_w;
    if (rc.parts_complete || rc.parts_exceed)
        rc.unmeasured_w = rc.wall_w - rc.parts_w;
    if (isfinite(pue) && pue > 0)
        rc.facility_w = rc.wall_w * pue;
    if (rc.parts_exceed)
        snprintf(rc.note, sizeof(rc.note),
                 "the parts exceed the wall by %.1f W: the sensors disagree (calibration, "
                 "averaging windows), no remainder can be given",
                 -rc.unmeasured_w);
    else if (!rc.parts_complete)
        snprintf(rc.note, sizeof(rc.note),
                 "a part gave no rate (one snapshot: use --interval; or a stuck counter): the "
                 "remainder cannot be given");
    else
        snprintf(rc.note, sizeof(rc.note),
                 "the remainder is what no sensor covers: fans, disks, NICs, PSU and VR losses");
    *ret = rc;
}

const char *reconcile_part_name(enum reconcile_part p)
{
    static const char *const names[] = {
        [RECONCILE_PACKAGES] = "packages", [RECONCILE_PSYS] = "psys",   [RECONCILE_DRAM] = "dram",
        [RECONCILE_GPUS] = "gpus",         [RECONCILE_OTHER] = "other",
    };
    return names[p];
}
