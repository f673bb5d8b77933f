/* Wall power against the sum of the measured parts: what the meters inside
 * the server (RAPL packages and DRAM, GPUs, other device sensors) account
 * for of what the wall meter (the ACPI power meter or the BMC's DCMI
 * reading) sees, and the remainder no sensor covers (fans, disks, NICs,
 * PSU and VR losses). Pure: readings in, a reconciliation out.
 *
 * What is added, so that nothing is counted twice:
 *  - packages: RAPL package-N; a CPU hwmon chip (amd_energy, zenpower,
 *    fam15h_power) only where RAPL has no package (else it is the same
 *    energy);
 *  - psys: RAPL psys covers the packages (and the memory rail on the
 *    platforms that have it): added only where no package is measured,
 *    and then DRAM is not;
 *  - dram: RAPL dram-N;
 *  - gpus: readings of source "gpu" (sense/gpu.h); where there are none,
 *    hwmon sensors of GPU drivers (amdgpu, radeon, i915, xe, nouveau);
 *  - other: every other hwmon device sensor, but PMBus PSU sensors
 *    labelled pin/pout, which measure the supply, not a part.
 * RAPL core and uncore are inside the packages: never added. */
#pragma once

#include <stdbool.h>

#include "sense/power_reading.h"

enum reconcile_part {
    RECONCILE_PACKAGES,
    RECONCILE_PSYS,
    RECONCILE_DRAM,
    RECONCILE_GPUS,
    RECONCILE_OTHER,
    _RECONCILE_PARTS,
};

struct reconcile_sum {
    double watts;         /* sum of the channels with a rate */
    unsigned channels;    /* channels with a rate */
    unsigned no_rate;     /* channels that gave no rate (one snapshot, stuck) */
    const char *excluded; /* why the part is not added (static text), else NULL */
};

struct reconcile {
    bool have_wall;
    char wall_source[24]; /* "acpi_power_meter", "dcmi" */
    char wall_via[24];
    char wall_domain[64];
    double wall_w; /* NaN without a wall meter */
    struct reconcile_sum part[_RECONCILE_PARTS];
    double parts_w;      /* the added parts */
    bool parts_complete; /* every added channel gave a rate */
    double unmeasured_w; /* wall - parts; NaN without a wall meter or
                          * when a part gave no rate (it would be in the
                          * remainder); negative only when parts_exceed */
    bool parts_exceed;   /* the parts add up to more than the wall: the
                          * sensors disagree (calibration, averaging
                          * windows, a double count we did not catch) */
    double pue;
    double facility_w; /* wall x PUE; NaN without a wall meter */
    char note[192];    /* one line on what the figures mean */
};

/* Reconcile READINGS (watts NaN where a channel gave no rate) with PUE.
 * The wall meter is the one power_summarise() would choose
 * (power_platform_meter()). */
void reconcile_power(const struct power_readings *readings, double pue, struct reconcile *ret);
const char *reconcile_part_name(enum reconcile_part p); /* "packages", ... */
