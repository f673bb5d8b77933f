/* verify's per-package rows: what packing and deep package sleep move,
 * per package over one window (docs/tune.md, "--verify"). */
#pragma once

#include "base/json.h"
#include "sense/cstate_pmu.h"
#include "sense/power_reading.h"

struct report_ctx;
struct tune_verify_window;

struct tune_verify_package {
    int package;        /* physical_package_id */
    unsigned ncpus;     /* its CPUs with a cpuidle rate over the window */
    double idle_pct;    /* mean over them of 100 - C0, %; NaN */
    double deepest_pct; /* mean residency in each CPU's deepest state, %; NaN */
    double busy_mhz;    /* mean APERF/MPERF clock while busy over its CPUs; NaN */
    double package_w;   /* RAPL package-N, W; NaN without RAPL or a rate */
    double dram_w;      /* RAPL dram of this package, W; NaN likewise */
    unsigned npc;       /* package C-states the cstate_pkg PMU measured; 0: none */
    unsigned pc_number[CSTATE_PMU_MAX_EVENTS]; /* 6 for PC6 */
    double pc_pct[CSTATE_PMU_MAX_EVENTS];      /* % of the window */
};

/* Fills w->pkg (one per package of c->cur's topology) and w->pc_why from
 * the window's two samples in c and the power readings of the same
 * window. Nothing when the topology lists no package. */
void tune_verify_packages_build(struct tune_verify_window *w, const struct report_ctx *c,
                                const struct power_readings *r);
void tune_verify_packages_free(struct tune_verify_window *w);
/* "packages": [...] and "package_pmu_why" members of a window object. */
void tune_verify_packages_json(struct json *j, const struct tune_verify_window *w);
