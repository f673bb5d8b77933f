/* Agent metrics of the packer: see metrics_pack.h. */
#include "agent/metrics_pack.h"

#include <math.h>
#include <stdio.h>

#include "base/util.h"

static const struct fam f_cpus =
    GAUGE("watt_pack_cpus", NULL,
          "CPUs in the packed set the [pack] cgroups are confined to (0: nothing packed).");
static const struct fam f_demand =
    GAUGE("watt_pack_demand_cpus", NULL,
          "The machine's busy CPUs over the packer's window (/proc/stat; 1 = one CPU busy).");
static const struct fam f_target =
    GAUGE("watt_pack_target_cpus", NULL, "The packer's target: demand x (1 + headroom), in CPUs.");
static const struct fam f_actions =
    COUNTER("watt_pack_actions_total", NULL,
            "Packed-set changes written, by action (grow, shrink, replan).");
static const struct fam f_pressure =
    COUNTER("watt_pack_pressure_events_total", NULL,
            "CPU pressure seen by the packer: PSI trigger events, or stall above the trigger's "
            "rate read at a tick where the kernel refused the trigger.");
static const struct fam f_failures =
    COUNTER("watt_pack_failures_total", NULL,
            "Packer ticks whose cpuset writes the kernel refused (each rolled back).");
static const struct fam f_latency =
    HISTOGRAM("watt_pack_grow_latency_seconds", "seconds",
              "Time from CPU pressure waking the agent to the grown cpuset written.");

void metrics_render_pack(struct mw *w, const struct pack_status *s)
{
    if (!s)
        return;
    mw_fam(w, &f_cpus);
    mw_series(w);
    mw_value_u64(w, s->ncpus);
    if (isfinite(s->demand_cpus)) {
        mw_fam(w, &f_demand);
        mw_series(w);
        mw_value_double(w, s->demand_cpus);
    }
    if (isfinite(s->target_cpus)) {
        mw_fam(w, &f_target);
        mw_series(w);
        mw_value_double(w, s->target_cpus);
    }
    static const char *const names[] = {NULL, "grow", "shrink", "replan"};
    mw_fam(w, &f_actions);
    for (int a = PACK_GROW; a <= PACK_REPLAN; a++) {
        mw_series(w);
        mw_label(w, "action", names[a]);
        mw_value_u64(w, s->actions[a]);
    }
    mw_fam(w, &f_pressure);
    mw_series(w);
    mw_value_u64(w, s->pressure_events);
    mw_fam(w, &f_failures);
    mw_series(w);
    mw_value_u64(w, s->failures);
    mw_fam(w, &f_latency);
    for (size_t b = 0; b < PACK_LATENCY_BUCKETS; b++) {
        char le[32];
        snprintf(le, sizeof(le), "%g", pack_latency_bounds[b]);
        mw_series_suffix(w, "_bucket");
        mw_label(w, "le", le);
        mw_value_u64(w, s->grow_latency_buckets[b]);
    }
    mw_series_suffix(w, "_bucket");
    mw_label(w, "le", "+Inf");
    mw_value_u64(w, s->grow_latency_count);
    mw_series_suffix(w, "_count");
    mw_value_u64(w, s->grow_latency_count);
    mw_series_suffix(w, "_sum");
    mw_value_double(w, s->grow_latency_sum_s);
}
