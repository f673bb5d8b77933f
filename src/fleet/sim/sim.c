/* The simulation engine: time, demand, each host's CPU scheduler, energy,
 * migrations in flight and the SLA accounting. Policies (cloudsim.c,
 * policy/watt.c) only decide; this file applies and meters.
 *
 * Time follows CloudSim's event structure: a decision tick every interval
 * (at k x 300 + 0.1 s in compat mode, CloudSim's minimum event gap; at
 * k x 300 s in realistic mode), and an update of every host whenever a
 * migration completes in between. Energy of a host over [t0, t1] is the
 * trapezoid of its power after the events at t0 and before those at t1. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/sim/sim.h"

#define PDM_DEGRADATION 0.9 /* a migrating VM gets 90 % of its MIPS */
#define MIG_IN_SHARE    0.1 /* the target reserves 10 % of it meanwhile */

uint64_t sim_random(struct sim *s)
{
    /* splitmix64: small, seeded, the same on every machine */
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* ---- demand ---------------------------------------------------------- */

/* A VM's demand at time t as a fraction, interpolated between samples as
 * CloudSim's UtilizationModelPlanetLabInMemory does (the sample after the
 * last one repeats it). */
double sim_vm_demand(const struct sim *s, size_t v, double t)
{
    const struct fleet_trace *tr = s->sc->trace;
    const struct fleet_trace_vm *tv = &tr->vms[v];
    double step = tr->step_s;
    double k1 = floor(t / step), k2 = ceil(t / step);

    if (k1 < tv->first)
        return 0;
    uint32_t i1 = (uint32_t)k1 - tv->first, i2 = (uint32_t)k2 - tv->first;
    if (i1 >= tv->len)
        return 0;
    if (i2 >= tv->len)
        i2 = tv->len - 1;
    double u1 = tr->cpu[tv->off + i1] / FLEET_CPU_SCALE;
    if (fmod(t, step) == 0)
        return u1;
    double u2 = tr->cpu[tv->off + i2] / FLEET_CPU_SCALE;
    double delta = (u2 - u1) / ((k2 - k1) * step);
    return u1 + delta * (t - k1 * step);
}

double sim_vm_requested_mips(const struct sim *s, const struct sim_vm *v)
{
    return v->req;
}

/* ---- the host's CPU scheduler (CloudSim's time-shared, oversubscribed) */

static double sim_vm_capped(const struct sim_host *h, const struct sim_vm *v)
{
    double per_pe = v->req / v->pes;
    if (per_pe > h->type->mips_per_core)
        per_pe = h->type->mips_per_core;
    return per_pe * v->pes;
}

static double sim_host_sum_requested_eff(const struct sim_host *h, const struct sim_vm *vms,
                                         int32_t self)
{
    double sum = 0;
    for (uint32_t i = 0; i < h->n_vms; i++) {
        const struct sim_vm *v = &vms[h->vms[i]];
        double r = sim_vm_capped(h, v);
        sum += v->host != self ? r * MIG_IN_SHARE : r; /* not its host: migrating in */
    }
    return sum;
}

static double sim_vm_mig_s(const struct sim_host *h, const struct sim_vm *v)
{
    return v->ram_mb / (h->type->bw_mbit / 16.0); /* RAM over half the link */
}

/* Fill the host's cached sums: requests, the scheduler's requested MIPS
 * (capped, 10 % for VMs migrating in), the MIPS it allocates counting VMs
 * migrating in fully (CloudSim's getUtilizationOfCpuMips(host) for PABFD),
 * the longest migration, and the MIPS-weighted utilisation history. The
 * cache is semantically const: it changes no result. */
void sim_host_sums(const struct sim *s, const struct sim_host *hc)
{
    struct sim_host *h = (struct sim_host *)hc;
    uint64_t key = ((uint64_t)s->epoch << 32) | h->version;
    if (h->ckey == key)
        return;
    int32_t self = (int32_t)(h - s->hosts);
    double req = 0, sum = 0, mig = 0;
    for (uint32_t i = 0; i < h->n_vms; i++) {
        const struct sim_vm *v = &s->vms[h->vms[i]];
        double r = sim_vm_capped(h, v);
        req += v->req;
        sum += v->host != self ? r * MIG_IN_SHARE : r; /* not its host: migrating in */
        double t = sim_vm_mig_s(h, v);
        if (t > mig)
            mig = t;
    }
    double scale = sum > h->cap ? h->cap / sum : 1, total = 0;
    for (uint32_t i = 0; i < h->n_vms; i++) {
        const struct sim_vm *v = &s->vms[h->vms[i]];
        bool in = v->host != self, out = v->migrating && !in;
        double per_pe = sim_vm_capped(h, v) / v->pes * (in ? MIG_IN_SHARE : 1) * scale;
        if (out)
            per_pe *= PDM_DEGRADATION;
        if (scale < 1)
            per_pe = floor(per_pe);
        double a = per_pe * v->pes;
        total += a;
        if (in)
            total += a * 0.9 / 0.1;
    }
    h->c_req = req;
    h->c_sum_eff = sum;
    h->c_alloc_pot = total;
    h->c_mig_s = mig;
    h->ckey = key;
}

/* The host's MIPS-weighted utilisation history (IQR, MAD, LR), cached
 * apart: THR never needs it. */
const double *sim_host_history_sum(const struct sim *s, const struct sim_host *hc)
{
    struct sim_host *h = (struct sim_host *)hc;
    uint64_t key = ((uint64_t)s->epoch << 32) | h->version;
    if (h->hkey == key)
        return h->c_hist;
    memset(h->c_hist, 0, sizeof(h->c_hist));
    for (uint32_t i = 0; i < h->n_vms; i++) {
        const struct sim_vm *v = &s->vms[h->vms[i]];
        for (uint8_t k = 0; k < v->hist_n; k++)
            h->c_hist[k] += v->hist[k] * v->mips / h->cap;
    }
    h->hkey = key;
    return h->c_hist;
}

/* MIPS the host's scheduler allocates to the VMs on its list now, counting
 * a VM migrating in at its full allocation rather than the 10 % it
 * reserves (CloudSim's getUtilizationOfCpuMips(host)). */
double sim_host_allocated_mips(const struct sim *s, const struct sim_host *h, bool potential)
{
    (void)potential;
    sim_host_sums(s, h);
    return h->c_alloc_pot;
}

double sim_host_available_mips(const struct sim *s, const struct sim_host *h)
{
    sim_host_sums(s, h);
    return h->c_sum_eff <= h->cap ? h->cap - h->c_sum_eff : 0;
}

bool sim_host_suitable(const struct sim *s, const struct sim_host *h, const struct sim_vm *v)
{
    if (v->req / v->pes > h->type->mips_per_core)
        return false;
    if (sim_host_available_mips(s, h) < v->req)
        return false;
    /* RAM: CloudSim asks for the VM's current RAM use, which its PlanetLab
     * runner models as 0 once the VM runs; --hard-ram holds the VM's whole
     * RAM, as a hypervisor without ballooning does. */
    double ram = (s->opt->hard_ram || !v->born) ? v->ram_mb : 0;
    return h->ram_used + ram <= h->type->ram_mb;
}

double sim_host_requested_mips(const struct sim *s, const struct sim_host *h)
{
    sim_host_sums(s, h);
    return h->c_req;
}

double sim_host_power_w(const struct sim_host *h, double util_mips)
{
    double u = util_mips / h->cap;
    if (u > 1 && u < 1.01)
        u = 1;
    return fleet_host_type_power(h->type, u);
}

void sim_host_add_vm(struct sim_host *h, int32_t vm)
{
    if (h->n_vms == h->cap_vms) {
        h->cap_vms = h->cap_vms ? 2 * h->cap_vms : 4;
        h->vms = xrealloc(h->vms, h->cap_vms * sizeof(*h->vms));
    }
    h->vms[h->n_vms++] = vm;
    h->version++;
}

void sim_host_remove_vm(struct sim_host *h, int32_t vm)
{
    for (uint32_t i = 0; i < h->n_vms; i++)
        if (h->vms[i] == vm) {
            memmove(h->vms + i, h->vms + i + 1, (h->n_vms - i - 1) * sizeof(*h->vms));
            h->n_vms--;
            h->version++;
            return;
        }
}

bool sim_host_has_vm(const struct sim_host *h, int32_t vm)
{
    for (uint32_t i = 0; i < h->n_vms; i++)
        if (h->vms[i] == vm)
            return true;
    return false;
}

/* Allocate the host's MIPS at the current requests and meter: returns the
 * new utilisation in MIPS and records the SLA state of host and VMs. */
static double sim_host_schedule(struct sim *s, int32_t hi, double t)
{
    struct sim_host *h = &s->hosts[hi];
    double sum = sim_host_sum_requested_eff(h, s->vms, hi);
    /* a host that is off or still booting runs nothing (realistic mode) */
    double cap = (s->compat || h->power == SIM_ON) ? h->cap : 0;
    double scale = sum > cap ? cap / sum : 1;
    double util = 0, requested = 0;

    for (uint32_t i = 0; i < h->n_vms; i++) {
        struct sim_vm *v = &s->vms[h->vms[i]];
        bool in = v->host != hi, out = v->migrating && !in;
        double per_pe = sim_vm_capped(h, v) / v->pes, a;
        if (out)
            a = per_pe * (scale < 1 ? scale : 1) * PDM_DEGRADATION;
        else if (in)
            a = per_pe * MIG_IN_SHARE * (scale < 1 ? scale : 1);
        else
            a = per_pe * scale;
        if (scale < 1)
            a = floor(a);
        a *= v->pes;
        requested += v->req;
        if (!in) {
            v->alloc = a;
            if (v->sh_has && t > v->sh_t) {
                double dt = t - v->sh_t;
                v->req_integral += v->sh_req * dt;
                v->alloc_integral += v->sh_alloc * dt;
                if (v->sh_mig && v->sh_alloc < v->sh_req)
                    v->mig_loss_integral += (v->sh_req - v->sh_alloc) * dt;
            }
            v->sh_has = true;
            v->sh_t = t;
            v->sh_alloc = a;
            v->sh_req = v->req;
            v->sh_mig = out;
            if (out)
                a /= PDM_DEGRADATION;
        }
        util += a;
    }
    if (h->sh_has && t > h->sh_t && h->sh_active) {
        double dt = t - h->sh_t;
        h->active_s += dt;
        s->interval_active_s += dt;
        if (h->sh_alloc < h->sh_req) {
            h->violation_s += dt;
            s->interval_violation_s += dt;
        }
    }
    h->sh_has = true;
    h->sh_t = t;
    h->sh_alloc = util;
    h->sh_req = requested;
    h->sh_active = util > 0;
    return util;
}

/* Energy of host h over dt seconds going from utilisation u0 to u1 MIPS. */
static double sim_host_energy_ws(const struct sim *s, const struct sim_host *h, double u0,
                                 double u1, double dt)
{
    if (s->pol->alloc == FLEET_NPA)
        return h->type->power_w[FLEET_POWER_POINTS - 1] * dt;
    if (s->compat) {
        if (u0 == 0)
            return 0; /* CloudSim: a host at 0 % is off and free */
        double p0 = sim_host_power_w(h, u0), p1 = sim_host_power_w(h, u1);
        return (p0 + (p1 - p0) / 2) * dt;
    }
    switch (h->power) {
    case SIM_OFF:
        return h->type->off_w * dt;
    case SIM_BOOTING:
        return (h->type->off_w + h->type->boot_j / h->type->boot_s) * dt;
    case SIM_ON:
    default: {
        double p0 = sim_host_power_w(h, u0), p1 = sim_host_power_w(h, u1);
        return (p0 + (p1 - p0) / 2) * dt;
    }
    }
}

/* ---- updates ----------------------------------------------------------- */

static void sim_vm_add_history(struct sim_vm *v, double u)
{
    memmove(v->hist + 1, v->hist, (VM_HISTORY - 1) * sizeof(double));
    v->hist[0] = u;
    if (v->hist_n < VM_HISTORY)
        v->hist_n++;
}

void sim_vm_finish(struct sim *s, int32_t vi)
{
    struct sim_vm *v = &s->vms[vi];
    if (v->host >= 0) {
        sim_host_remove_vm(&s->hosts[v->host], vi);
        if (s->opt->hard_ram)
            s->hosts[v->host].ram_used -= v->ram_mb;
    }
    v->host = -1;
    v->alive = false;
    v->gone = true;
}

/* CloudSim's PowerVm records history only when (t - 0.1) is a multiple of
 * the interval, computed in doubles exactly as it does. */
static bool is_tick_time(const struct sim *s, double t)
{
    if (s->compat)
        return fmod(t - 0.1, s->opt->interval_s) == 0;
    return fmod(t, s->opt->interval_s) == 0;
}

/* Set the utilisation a host's last update found. */
static void set_util(struct sim *s, struct sim_host *h, double u1)
{
    if (s->compat && (h->util_mips > 0) != (u1 > 0)) {
        /* CloudSim's hosts switch off and on by their utilisation alone */
        if (u1 > 0)
            s->power_ons++;
        else
            s->power_offs++;
    }
    h->util_mips = u1;
    h->util_power_w = sim_host_power_w(h, u1);
}

/* Re-schedule host hi at time t and meter its energy since its last
 * update (a trapezoid between the two utilisations). */
static void sim_host_update(struct sim *s, int32_t hi, double t)
{
    struct sim_host *h = &s->hosts[hi];
    double u0 = h->util_mips, dt = t - h->last_s;
    double u1 = sim_host_schedule(s, hi, t);
    if (dt > 0) {
        double e = sim_host_energy_ws(s, h, u0, u1, dt);
        s->energy_ws += e;
        s->interval_energy_ws += e;
        if (s->pol->alloc == FLEET_NPA || (s->compat ? u0 != 0 : h->power == SIM_ON))
            s->util_mips_s += (fmin(u0, h->cap) + fmin(u1, h->cap)) / 2 * dt;
    }
    set_util(s, h, u1);
    h->last_s = t;
}

/* Realistic mode: update only host hi and the requests of the VMs on it
 * (a migration's ends); the others keep running on their trapezoids. */
static void sim_host_update_alone(struct sim *s, int32_t hi, double t)
{
    struct sim_host *h = &s->hosts[hi];
    s->epoch++;
    for (uint32_t i = 0; i < h->n_vms; i++) {
        struct sim_vm *v = &s->vms[h->vms[i]];
        v->req = sim_vm_demand(s, (size_t)h->vms[i], t) * v->mips * v->pes;
    }
    sim_host_update(s, hi, t);
}

/* Update every host at time t: new requests, allocations, energy since
 * the last update, SLA state; then (compat) drop VMs whose demand is 0. */
void sim_update(struct sim *s, double t)
{
    s->epoch++;
    double dt = t - s->last_s;
    bool tick = is_tick_time(s, t);

    for (size_t vi = 0; vi < s->n_vms; vi++) {
        struct sim_vm *v = &s->vms[vi];
        if (v->host < 0) {
            if (v->alive) /* waiting for a host: all its demand unserved */
                s->pending_req_integral += sim_vm_demand(s, vi, s->last_s) * v->mips * v->pes * dt;
            continue;
        }
        double u = sim_vm_demand(s, vi, t);
        v->req = u * v->mips * v->pes;
        if (tick && t > s->last_s && (t != 0 || u != 0))
            sim_vm_add_history(v, u);
    }
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        sim_host_update(s, (int32_t)hi, t);
    if (s->compat) {
        for (size_t vi = 0; vi < s->n_vms; vi++) {
            struct sim_vm *v = &s->vms[vi];
            if (v->host >= 0 && !v->migrating && v->req == 0)
                sim_vm_finish(s, (int32_t)vi);
        }
    }
    s->last_s = t;
}

/* Re-schedule the hosts of a migration without metering energy: CloudSim
 * does this when a migration starts (Host.addMigratingInVm). */
static void sim_host_reschedule(struct sim *s, int32_t hi)
{
    set_util(s, &s->hosts[hi], sim_host_schedule(s, hi, s->now));
}

int sim_start_migration(struct sim *s, int32_t vi, int32_t dst)
{
    struct sim_vm *v = &s->vms[vi];
    struct sim_host *d = &s->hosts[dst];

    if (v->host < 0 || v->host == dst)
        return -EINVAL;
    if (!s->compat) {
        /* a host must be up to take a VM: start it, the VM moves later */
        if (d->power != SIM_ON) {
            sim_power_on(s, dst);
            return -EAGAIN;
        }
        const struct sim_host *src = &s->hosts[v->host];
        unsigned lim = s->opt->max_migrations_per_host;
        if (lim && (d->n_in + d->n_out >= lim || src->n_in + src->n_out >= lim))
            return -EBUSY;
    }
    if (sim_host_has_vm(d, vi))
        return -EALREADY;
    /* CloudSim can list a VM twice in one round (placed off an overloaded
     * host, then drained again from there): both migrations run, the VM is
     * reserved on both targets and ends on the last one. */
    /* Time to copy the RAM over half the target's bandwidth (CloudSim). */
    double mb_per_s = d->type->bw_mbit / 8.0 / 2.0;
    double dur = v->ram_mb / mb_per_s;
    if (!s->compat) {
        unsigned busy = d->n_in + d->n_out + 1;
        dur *= busy; /* concurrent migrations share the link */
    }
    s->epoch++;
    v->dest = dst;
    v->inflight++;
    v->migrating = true;
    v->mig_end_s = s->now + dur;
    sim_host_add_vm(d, vi);
    d->n_in++;
    s->hosts[v->host].n_out++;
    if (s->opt->hard_ram)
        d->ram_used += v->ram_mb;
    if (s->n_migs == s->cap_migs)
        s->migs = grow_array(s->migs, sizeof(*s->migs), s->n_migs, &s->cap_migs);
    s->migs[s->n_migs++] = (struct migration){vi, v->host, dst, v->mig_end_s};
    s->migrations++;
    s->interval_migrations++;
    v->migrations_day++;
    v->last_migration_s = s->now;
    sim_host_reschedule(s, dst);
    sim_host_reschedule(s, v->host);
    return 0;
}

static void migration_complete(struct sim *s, const struct migration *m)
{
    struct sim_vm *v = &s->vms[m->vm];
    struct sim_host *dst = &s->hosts[m->dst];
    if (v->host < 0 || !sim_host_has_vm(dst, m->vm))
        return;
    /* CloudSim: free the VM where it runs now, release the target's
     * reservation and create it again at the end of the target's list */
    struct sim_host *cur = &s->hosts[v->host];
    s->epoch++;
    sim_host_remove_vm(cur, m->vm);
    s->hosts[m->src].n_out--;
    if (s->opt->hard_ram)
        cur->ram_used -= v->ram_mb;
    sim_host_remove_vm(dst, m->vm);
    dst->n_in--;
    sim_host_add_vm(dst, m->vm);
    v->host = m->dst;
    v->migrating = false; /* CloudSim clears it at the first completion */
    if (--v->inflight == 0)
        v->dest = -1;
}

static double next_migration_end(const struct sim *s)
{
    double t = INFINITY;
    for (size_t i = 0; i < s->n_migs; i++)
        if (s->migs[i].end_s < t)
            t = s->migs[i].end_s;
    return t;
}

static int cmp_mig_start(const void *a, const void *b)
{
    /* completions at the same time run in the order the migrations started */
    const struct migration *x = a, *y = b;
    return (x->end_s > y->end_s) - (x->end_s < y->end_s);
}

/* Complete every migration that ends before LIMIT, updating all hosts at
 * each completion time as CloudSim's PowerDatacenter.processVmMigrate. */
void run_migrations_until(struct sim *s, double limit)
{
    for (;;) {
        double t = next_migration_end(s);
        if (!(t < limit))
            return;
        s->now = t;
        if (s->compat) /* CloudSim updates every host at a completion */
            sim_update(s, t);
        /* stable: keep start order among equal end times */
        size_t n = 0;
        for (size_t i = 0; i < s->n_migs; i++)
            if (s->migs[i].end_s == t)
                n++;
        struct migration *done = xmalloc(n * sizeof(*done));
        size_t j = 0, k = 0;
        for (size_t i = 0; i < s->n_migs; i++) {
            if (s->migs[i].end_s == t)
                done[j++] = s->migs[i];
            else
                s->migs[k++] = s->migs[i];
        }
        s->n_migs = k;
        (void)cmp_mig_start;
        if (s->compat) {
            for (size_t i = 0; i < n; i++)
                migration_complete(s, &done[i]);
            /* The same instant again: CloudSim updates every host, but only
             * the hosts a migration left or reached can change (dt = 0, the
             * same requests); and a VM that arrived asking 0 MIPS goes. */
            s->epoch++;
            for (size_t i = 0; i < n; i++) {
                sim_host_update(s, done[i].src, t);
                sim_host_update(s, done[i].dst, t);
            }
            for (size_t i = 0; i < n; i++) {
                struct sim_vm *v = &s->vms[done[i].vm];
                if (v->host >= 0 && !v->migrating && v->req == 0)
                    sim_vm_finish(s, done[i].vm);
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                int32_t cur = s->vms[done[i].vm].host;
                if (cur >= 0)
                    sim_host_update_alone(s, cur, t);
                sim_host_update_alone(s, done[i].dst, t);
                migration_complete(s, &done[i]);
                if (cur >= 0)
                    sim_host_update_alone(s, cur, t);
                sim_host_update_alone(s, done[i].dst, t);
            }
        }
        free(done);
    }
}

/* ---- power states (realistic mode) ------------------------------------ */

void sim_power_off(struct sim *s, int32_t hi)
{
    struct sim_host *h = &s->hosts[hi];
    if (h->power == SIM_OFF || h->n_vms)
        return;
    h->power = SIM_OFF;
    h->off_since_s = s->now;
    s->power_offs++;
}

void sim_power_on(struct sim *s, int32_t hi)
{
    struct sim_host *h = &s->hosts[hi];
    if (h->power != SIM_OFF)
        return;
    h->power = SIM_BOOTING;
    h->boot_done_s = s->now + h->type->boot_s;
    s->power_ons++;
}

void boots_complete(struct sim *s, double t)
{
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        struct sim_host *h = &s->hosts[hi];
        if (h->power == SIM_BOOTING && h->boot_done_s <= t + 1e-9)
            h->power = SIM_ON;
    }
}

/* ---- plan save/restore for a consolidation round --------------------- */

void plan_save(struct sim *s)
{
    size_t total = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        total += s->hosts[hi].n_vms;
    s->saved = xrealloc(s->saved, (total + 1) * sizeof(*s->saved));
    size_t o = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        s->saved_off[hi] = (uint32_t)o;
        memcpy(s->saved + o, s->hosts[hi].vms, s->hosts[hi].n_vms * sizeof(*s->saved));
        o += s->hosts[hi].n_vms;
    }
    s->saved_off[s->n_hosts] = (uint32_t)o;
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        s->saved_ram[hi] = s->hosts[hi].ram_used;
}

/* Tentative placements during a round change only the hosts' VM lists and
 * RAM; VMs keep their host until a migration starts. */
void plan_restore(struct sim *s)
{
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        struct sim_host *h = &s->hosts[hi];
        uint32_t n = s->saved_off[hi + 1] - s->saved_off[hi];
        h->n_vms = 0;
        for (uint32_t i = 0; i < n; i++)
            sim_host_add_vm(h, s->saved[s->saved_off[hi] + i]);
        h->ram_used = s->saved_ram[hi];
    }
}
