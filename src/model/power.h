/* The node's power: measured where a meter exists, estimated where none
 * does, and saying which. Also the facility view (IT watts x PUE). */
#pragma once

#include <stdbool.h>

#include "model/model.h"
#include "sense/power_reading.h"

struct power_summary {
    bool measured;      /* it_w comes from a meter */
    bool meter_unused;  /* a meter exists but gave no (complete) rate: coverage says why */
    char source[96];    /* "acpi_power_meter", "rapl (package+dram)", "model seed-2011" */
    char coverage[192]; /* what the figure covers */
    double it_w;        /* node IT watts; NaN when unknown (no interval, no meter) */
    double estimated_w; /* the model's estimate, NaN when its inputs are missing */
    double busy_cores;  /* utilisation summed over CPUs, NaN when unknown */
    unsigned cores;     /* online logical CPUs */
    double ghz;         /* mean busy frequency used by the model, NaN when unknown */
    double pue;
    double facility_w; /* it_w * pue */
    struct power_model model;
    struct power_readings readings; /* every measured channel, owned */
    /* The fitted model (model/fit.h) counts time in the POLL idle state
     * busy: the POLL share, and busy_cores + it, which a fitted model's
     * estimate uses. NaN when unknown. */
    double poll_cpus;
    double fit_busy_cores;
    /* A fitted model's estimate beside the measurement (fitted.fit.n > 0:
     * one was given); estimated_w when the node's model is the fitted one. */
    struct power_model fitted;
    double fitted_w;
};

/* Choose the node figure from the readings (taking ownership of them):
 * a whole-platform meter first, then RAPL psys, then the sum of RAPL
 * package+dram (CPU and memory only), else the model. Energy counters that
 * did not advance while the CPUs were not all idle (busy_cores, see
 * power_readings_mark_stuck()) are marked stuck first: they give no rate,
 * so the figure falls back as for any absent meter, and coverage says so. */
void power_summarise(struct power_summary *ps, struct power_readings *readings,
                     const struct power_model *m, unsigned cores, double busy_cores, double ghz);
void power_summary_free(struct power_summary *ps);
/* The whole-server meter the node figure uses: the ACPI power meter, else
 * the BMC's DCMI reading, else another platform sensor; only readings
 * with watts; NULL when none. */
const struct power_reading *power_platform_meter(const struct power_readings *r);
