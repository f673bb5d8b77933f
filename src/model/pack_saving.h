/* What packing would save: a pack plan (model/pack.h) priced by a power
 * model (model/model.h), scaled by RAPL where it measured. Pure: no I/O.
 *
 * The models give a node's power from its CPU count and busy CPUs; they
 * know nothing of package C-states, so packing the same work onto fewer
 * CPUs changes nothing in them. The saving is therefore priced by stated
 * shares of the model's idle power (below), every one of them printed
 * with the figure (pack_saving_assumptions()):
 *
 *   idle_w       = model_estimate(cores, 0 busy)        node at idle, W
 *   pkg_awake_w  = CPU_SHARE × idle_w × pkg_scale / npackages
 *                  one package idle but awake (PC0/PC2: uncore, ring and
 *                  memory controller clocked), W
 *   pkg_deep_w   = PKG_DEEP_SHARE × pkg_awake_w         in its deepest
 *                  package C-state (PC6), W
 *   cpu_w        = CORE_SHARE × pkg_awake_w / CPUs of the package
 *                  one logical CPU's share of the cores' idle power, W
 *   dram_w       = DRAM_SHARE × idle_w × dram_scale / npackages
 *                  one package's memory, awake and idle, W
 *
 *   saving = idle packages × (pkg_awake_w − pkg_deep_w)
 *          + idle packages × DRAM_SR_SAVE × dram_w     (self-refresh)
 *          + CPUs of idle cores in awake packages × cpu_w
 *            × SHALLOW_SHARE × (1 − CORE_DEEP_SHARE)
 *
 * pkg_scale is RAPL package watts / the model's CPU part now
 * (CPU_SHARE × idle_w + active_per_core_w × busy × f), dram_scale RAPL
 * dram watts / (DRAM_SHARE × idle_w): where RAPL measured, the model's
 * shares are scaled to the meter; else both are 1. */
#pragma once

#include <stdbool.h>

#include "host/topology.h"
#include "model/model.h"
#include "model/pack.h"
#include "sense/power_reading.h"

/* The assumptions, with where they come from. Each is a share, not a
 * measurement; PACK_SAVING_ASSUMED_PCT is the uncertainty given to them
 * together. */
#define PACK_SAVING_CPU_SHARE                          \
    0.35 /* CPU packages' share of a node's idle power \
          * (2-socket servers: 30-40 %, the rest is    \
          * DRAM, fans, PSU loss, disks, NICs, BMC) */
#define PACK_SAVING_PKG_DEEP_SHARE                 \
    0.30 /* a package in PC6 draws ~30 % of its    \
          * awake-idle power (uncore clocks gated, \
          * voltage lowered; Xeon idle ~40-60 W    \
          * per package without PC6, 12-20 W with) */
#define PACK_SAVING_CORE_SHARE                     \
    0.50 /* cores' share of a package's awake-idle \
          * power; the rest is uncore */
#define PACK_SAVING_SHALLOW_SHARE                  \
    0.50 /* share of a spread-out idle CPU's idle  \
          * time that scattered wake-ups keep in a \
          * shallow state */
#define PACK_SAVING_CORE_DEEP_SHARE                                           \
    0.10                            /* a core in C6 (power gated) draws ~10 % \
                                     * of its shallow-idle power */
#define PACK_SAVING_DRAM_SHARE 0.15 /* DRAM's share of a node's idle power */
#define PACK_SAVING_DRAM_SR_SAVE                                            \
    0.50                             /* self-refresh saves ~half of an idle \
                                      * package's DRAM power */
#define PACK_SAVING_ASSUMED_PCT 50.0 /* ± on the shares above */

struct pack_saving_input {
    const struct topology *topo;
    const struct pack_plan *plan; /* built on topo */
    const struct power_model *model;
    double busy_cpus;      /* measured demand (1.0 = one CPU), >= 0 */
    double ghz;            /* mean busy clock for the model; <= 0 or NaN: unknown */
    double rapl_package_w; /* every RAPL package channel summed; NaN: none */
    double rapl_dram_w;    /* every RAPL dram channel summed; NaN: none */
};

struct pack_saving {
    unsigned cpus, cores, packages; /* online */
    unsigned packed_cpus;
    unsigned idle_cpus;           /* CPUs of the cores left wholly idle */
    unsigned idle_cores;          /* cores left wholly idle */
    unsigned idle_packages;       /* packages left wholly idle */
    unsigned idle_cpus_awake_pkg; /* idle_cpus outside the idle packages */
    double idle_w;                /* the model's node power at idle, W */
    double pkg_scale;             /* RAPL package / model CPU part; 1 without RAPL */
    double dram_scale;            /* RAPL dram / model DRAM part; 1 without RAPL */
    bool pkg_measured, dram_measured;
    double pkg_awake_w, pkg_deep_w, dram_w; /* per package, W */
    double cpu_w;                           /* per logical CPU, W (mean) */
    double saving_pkg_w, saving_dram_w, saving_core_w;
    double saving_w;        /* their sum */
    double uncertainty_pct; /* ± on saving_w */
    double low_w, high_w;   /* saving_w ∓ uncertainty, low >= 0 */
};

/* Prices a plan. -EINVAL for missing inputs, a negative or non-finite
 * busy figure, or a topology without packages. *ret set only on success. */
int pack_saving_estimate(const struct pack_saving_input *in, struct pack_saving *ret);

/* Sums every channel of SCOPE; NaN when there is none or one of them has
 * no rate (a partial sum would understate). */
double pack_saving_rapl_w(const struct power_readings *r, enum power_scope scope);

/* The assumptions as one line of text, for the report and the bench;
 * owned by the caller. */
char *pack_saving_assumptions(const struct pack_saving *s, const struct power_model *m);
