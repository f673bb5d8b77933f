/* The fluid lower bound of a fleet's energy.
 *
 * Every interval, pretend the total demand D could be poured into hosts
 * like a fluid: each MIPS costs at least e = min over host types and load
 * points u of (P(u) - P_off) / (u x capacity) watts (with a piecewise
 * linear P the minimum of (P(u) - c) / u lies on a table point), and every
 * host draws at least its standby power P_off. No host is ever partly
 * idle, no migration or boot costs anything. A real schedule can only do
 * worse, so E >= the bound; the distance from it says how much a policy
 * leaves on the table. The metering is the run's: compat mode leaves the
 * first interval unmetered and drops VMs whose demand hits 0, as CloudSim. */
#include <math.h>
#include <stdlib.h>

#include "base/util.h"
#include "fleet/model/fleet.h"

double fleet_type_off_w(const struct fleet_host_type *t, const struct fleet_options *o)
{
    if (o->compat)
        return 0;
    return o->off_w >= 0 ? o->off_w : t->off_w;
}

/* Cheapest watts per MIPS above standby, over all types and load points. */
double fleet_cheapest_w_per_mips(const struct fleet_hosts *hs, const struct fleet_options *o)
{
    double best = INFINITY;
    for (size_t t = 0; t < hs->n_types; t++) {
        const struct fleet_host_type *ty = &hs->types[t];
        double cap = fleet_host_type_mips(ty), off = fleet_type_off_w(ty, o);
        for (int k = 1; k < FLEET_POWER_POINTS; k++) {
            double e = (ty->power_w[k] - off) / (k / 10.0 * cap);
            if (e < best)
                best = e;
        }
    }
    return best > 0 ? best : 0;
}

/* Demand (MIPS) of every VM alive at sample time t, compat removal rule. */
static double demand_at(const struct fleet_scenario *sc, const struct fleet_options *o, double t,
                        bool *gone)
{
    const struct fleet_trace *tr = sc->trace;
    double step = tr->step_s, d = 0;
    double k1 = floor(t / step);

    for (size_t v = 0; v < tr->n_vms; v++) {
        if (gone[v])
            continue;
        const struct fleet_trace_vm *tv = &tr->vms[v];
        if (k1 < tv->first || k1 - tv->first >= tv->len)
            continue;
        uint32_t i1 = (uint32_t)k1 - tv->first, i2 = i1 + 1 < tv->len ? i1 + 1 : i1;
        double u1 = tr->cpu[tv->off + i1] / FLEET_CPU_SCALE;
        double u2 = tr->cpu[tv->off + i2] / FLEET_CPU_SCALE;
        double u = u1 + (u2 - u1) * (t - k1 * step) / step;
        size_t ty = sc->vm_type_of ? sc->vm_type_of[v]
                                   : v / ((tr->n_vms + sc->n_vm_types - 1) / sc->n_vm_types);
        if (ty >= sc->n_vm_types)
            ty = sc->n_vm_types - 1;
        const struct fleet_vm_type *vt = &sc->vm_types[ty];
        if (o->compat && u == 0) {
            gone[v] = true; /* CloudSim drops it for good */
            continue;
        }
        d += u * vt->mips * (vt->pes ? vt->pes : 1);
    }
    return d;
}

double fleet_lower_bound_kwh(const struct fleet_scenario *sc, const struct fleet_options *o)
{
    const struct fleet_hosts *hs = sc->hosts;
    const struct fleet_trace *tr = sc->trace;
    double limit = tr->n_steps * tr->step_s, interval = o->interval_s;
    double e = fleet_cheapest_w_per_mips(hs, o), off_total = 0, energy = 0;
    _cleanup_free_ bool *gone = xcalloc(tr->n_vms ? tr->n_vms : 1, sizeof(bool));

    double capacity = 0;
    for (size_t h = 0; h < hs->n_hosts; h++) {
        off_total += fleet_type_off_w(&hs->types[hs->type_of[h]], o);
        capacity += fleet_host_type_mips(&hs->types[hs->type_of[h]]);
    }
    double t0 = o->compat ? 0.1 + interval : 0;
    /* demand beyond the fleet's capacity cannot be served, by any policy */
    double d0 = fmin(demand_at(sc, o, t0, gone), capacity);
    for (double t = t0 + interval; o->compat ? t < limit : t <= limit + 1e-9; t += interval) {
        double d1 = fmin(demand_at(sc, o, t, gone), capacity);
        energy += (off_total + e * (d0 + d1) / 2) * interval;
        d0 = d1;
    }
    return energy / 3.6e6;
}
