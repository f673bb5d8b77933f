/* fleet_sim_run(): set a scenario up, step through time, collect results. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/sim/sim.h"

/* CloudSim's rule: VM i of N gets type i / ceil(N / 4) (file order). */
static size_t quarters_type(size_t i, size_t n, size_t n_types)
{
    size_t per = (n + n_types - 1) / n_types;
    size_t t = per ? i / per : 0;
    return t < n_types ? t : n_types - 1;
}

/* Does VM v fit an empty host of some type (its whole MIPS on one core,
 * its RAM)? Otherwise the scenario cannot run. */
static int check_fits(const struct sim *s, size_t vi, struct fleet_error *err)
{
    const struct sim_vm *v = &s->vms[vi];
    const struct fleet_hosts *hs = s->sc->hosts;
    for (size_t t = 0; t < hs->n_types; t++)
        if (hs->types[t].mips_per_core >= v->mips && hs->types[t].cores >= v->pes &&
            hs->types[t].ram_mb >= v->ram_mb)
            return 0;
    fleet_error_set(err,
                    "VM '%s' (%u x %.0f MIPS, %.0f MB RAM) is bigger than every host type: "
                    "it needs a core of at least %.0f MIPS and %.0f MB",
                    s->sc->trace->vms[vi].name, v->pes, v->mips, v->ram_mb, v->mips, v->ram_mb);
    return -EINVAL;
}

static int sim_init(struct sim *s, const struct fleet_scenario *sc, const struct fleet_policy *p,
                    const struct fleet_options *o, struct fleet_host_type *types,
                    struct fleet_error *err)
{
    const struct fleet_hosts *hs = sc->hosts;
    const struct fleet_trace *tr = sc->trace;

    const struct fleet_constraints *k = sc->constraints;
    if (k && p->alloc != FLEET_WATT) {
        fleet_error_set(err,
                        "policy %s: constraints (--constraints) need the watt policy; "
                        "CloudSim's policies know none",
                        p->name);
        return -EINVAL;
    }
    if (k && (k->n_hosts != hs->n_hosts || k->n_vms != tr->n_vms)) {
        fleet_error_set(err, "constraints for %zu hosts and %zu VMs, the scenario has %zu and %zu",
                        k->n_hosts, k->n_vms, hs->n_hosts, tr->n_vms);
        return -EINVAL;
    }
    if (!hs->n_hosts || !hs->n_types) {
        fleet_error_set(err, "the fleet has no hosts");
        return -EINVAL;
    }
    if (!tr->n_vms || !tr->n_steps) {
        fleet_error_set(err, "trace %s has no VMs", tr->origin ? tr->origin : "");
        return -EINVAL;
    }
    if (!sc->n_vm_types) {
        fleet_error_set(err, "no VM types");
        return -EINVAL;
    }
    /* The run ticks every interval over the whole horizon: bound both. */
    double horizon = tr->n_steps * tr->step_s;
    if (!(horizon <= FLEET_MAX_HORIZON_S)) {
        fleet_error_set(err,
                        "trace %s spans %.0f s (%u steps of %.0f s), more than the %.0f s "
                        "(366 days) a simulation may cover",
                        tr->origin ? tr->origin : "", horizon, tr->n_steps, tr->step_s,
                        FLEET_MAX_HORIZON_S);
        return -EINVAL;
    }
    if (!(o->interval_s > 0) || !(horizon / o->interval_s <= FLEET_MAX_TICKS)) {
        fleet_error_set(err,
                        "a decision interval of %g s over the %.0f s of trace %s is more than "
                        "the %.0f intervals a simulation may take",
                        o->interval_s, horizon, tr->origin ? tr->origin : "", FLEET_MAX_TICKS);
        return -EINVAL;
    }
    *s = (struct sim){.sc = sc, .pol = p, .opt = o, .compat = o->compat, .rng = o->seed};
    for (size_t t = 0; t < hs->n_types; t++) {
        types[t] = hs->types[t];
        if (o->off_w >= 0)
            types[t].off_w = o->off_w;
        if (o->boot_s >= 0)
            types[t].boot_s = o->boot_s;
        if (o->boot_j >= 0)
            types[t].boot_j = o->boot_j;
        if (!(types[t].boot_s > 0))
            types[t].boot_s = 1e-9; /* instant boot: avoid dividing by 0 */
    }
    s->n_hosts = hs->n_hosts;
    s->hosts = xcalloc(s->n_hosts, sizeof(*s->hosts));
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        struct sim_host *h = &s->hosts[hi];
        h->type = &types[hs->type_of[hi]];
        h->cap = fleet_host_type_mips(h->type);
        h->power = o->compat ? SIM_ON : SIM_OFF;
    }
    s->n_vms = tr->n_vms;
    s->vms = xcalloc(s->n_vms, sizeof(*s->vms));
    for (size_t vi = 0; vi < s->n_vms; vi++) {
        struct sim_vm *v = &s->vms[vi];
        size_t t =
            sc->vm_type_of ? sc->vm_type_of[vi] : quarters_type(vi, s->n_vms, sc->n_vm_types);
        if (t >= sc->n_vm_types)
            t = sc->n_vm_types - 1;
        v->type = &sc->vm_types[t];
        v->mips = v->type->mips;
        v->pes = v->type->pes ? v->type->pes : 1;
        v->ram_mb = tr->vms[vi].ram_mb ? tr->vms[vi].ram_mb : v->type->ram_mb;
        v->host = v->dest = -1;
        int r = check_fits(s, vi, err);
        if (r < 0)
            return r;
    }
    s->types = types;
    s->type_stamp = xcalloc(hs->n_types, sizeof(*s->type_stamp));
    s->cand = xcalloc(s->n_hosts, sizeof(*s->cand));
    s->type_idle = xcalloc(hs->n_types, sizeof(*s->type_idle));
    s->live = xcalloc(s->n_hosts, sizeof(*s->live));
    s->is_live = xcalloc(s->n_hosts, 1);
    s->idle_n = xcalloc(hs->n_types, sizeof(*s->idle_n));
    s->idle_pos = xcalloc(hs->n_types, sizeof(*s->idle_pos));
    s->idle_by_type = xcalloc(hs->n_types, sizeof(*s->idle_by_type));
    {
        _cleanup_free_ size_t *count = xcalloc(hs->n_types, sizeof(size_t));
        for (size_t hi = 0; hi < s->n_hosts; hi++)
            count[hs->type_of[hi]]++;
        for (size_t t = 0; t < hs->n_types; t++)
            s->idle_by_type[t] = xcalloc(count[t] ? count[t] : 1, sizeof(int32_t));
    }
    s->saved_off = xcalloc(s->n_hosts + 1, sizeof(*s->saved_off));
    s->saved_ram = xcalloc(s->n_hosts, sizeof(*s->saved_ram));
    if (p->alloc == FLEET_WATT)
        return sim_watt_init(s, err);
    return 0;
}

static void sim_free(struct sim *s)
{
    if (s->pol && s->pol->alloc == FLEET_WATT)
        sim_watt_free(s);
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        free(s->hosts[hi].vms);
    free(s->hosts);
    free(s->vms);
    free(s->migs);
    free(s->saved);
    free(s->saved_off);
    free(s->saved_ram);
    free(s->type_stamp);
    free(s->cand);
    free(s->type_idle);
    free(s->live);
    free(s->is_live);
    free(s->idle_n);
    free(s->idle_pos);
    if (s->idle_by_type)
        for (size_t t = 0; t < s->sc->hosts->n_types; t++)
            free(s->idle_by_type[t]);
    free(s->idle_by_type);
}

static int32_t initial_host(struct sim *s, int32_t vi)
{
    if (s->pol->alloc == FLEET_WATT)
        return sim_watt_place(s, vi);
    return cloudsim_initial_host(s, vi);
}

/* Create VM vi now: CloudSim asks for its full MIPS and RAM at creation. */
static void sim_vm_create(struct sim *s, int32_t vi)
{
    struct sim_vm *v = &s->vms[vi];
    v->req = v->mips * v->pes;
    int32_t hi = initial_host(s, vi);
    v->alive = true;
    if (hi < 0) {
        if (s->compat) {
            v->alive = false;
            v->gone = true;
            s->n_failed++;
        }
        return; /* realistic: waits for a host, its demand unserved */
    }
    struct sim_host *h = &s->hosts[hi];
    sim_host_add_vm(h, vi);
    h->ram_used += v->ram_mb;
    v->host = hi;
    v->born = true;
    if (!s->compat && h->power == SIM_OFF) {
        if (s->now == 0)
            h->power = SIM_ON; /* the fleet starts with its loaded hosts up */
        else
            sim_power_on(s, hi);
    }
}

/* The invariants a test asks for (opt->check): every live VM is on exactly
 * one host's list (and its target's while migrating), nothing else is on
 * any list, no host runs above capacity, and a host asked for more than its
 * capacity is metered as violating its SLA. */
static void check_invariants(struct sim *s, const char *when)
{
    if (!s->opt->check || s->check_rc < 0)
        return;
    _cleanup_free_ uint8_t *seen = xcalloc(s->n_vms, 1);
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct sim_host *h = &s->hosts[hi];
        for (uint32_t i = 0; i < h->n_vms; i++) {
            int32_t vi = h->vms[i];
            const struct sim_vm *v = &s->vms[vi];
            if (!v->alive || v->host < 0 || seen[vi] > v->inflight) {
                fleet_error_set(&s->check_err, "%s t=%.1f: VM %d wrongly on host %zu", when, s->now,
                                vi, hi);
                s->check_rc = -EPROTO;
                return;
            }
            seen[vi]++;
        }
        if (h->util_mips > h->cap * 1.01 ||
            (h->sh_has && h->sh_req > h->cap * (1 + 1e-9) && !(h->sh_alloc < h->sh_req))) {
            fleet_error_set(&s->check_err,
                            "%s t=%.1f: host %zu runs %.0f of %.0f MIPS (%.0f requested) "
                            "unmetered",
                            when, s->now, hi, h->util_mips, h->cap, h->sh_req);
            s->check_rc = -EPROTO;
            return;
        }
    }
    /* the constraints: nothing on a host in maintenance, pinned VMs at
     * home or nowhere, no two VMs of a group listed on one host */
    const struct fleet_constraints *k = s->sc->constraints;
    for (size_t hi = 0; k && hi < s->n_hosts; hi++) {
        const struct sim_host *h = &s->hosts[hi];
        for (uint32_t i = 0; i < h->n_vms; i++) {
            int32_t a = h->vms[i];
            bool bad = k->maintenance[hi] || (k->pin[a] >= 0 && k->pin[a] != (int32_t)hi);
            for (uint32_t j = i + 1; j < h->n_vms && !bad; j++)
                bad = k->group[a] >= 0 && k->group[h->vms[j]] == k->group[a];
            if (bad) {
                fleet_error_set(&s->check_err, "%s t=%.1f: host %zu breaks a constraint (VM %d)",
                                when, s->now, hi, a);
                s->check_rc = -EPROTO;
                return;
            }
        }
    }
    for (size_t vi = 0; vi < s->n_vms; vi++) {
        const struct sim_vm *v = &s->vms[vi];
        unsigned want = v->host < 0 ? 0 : 1u + v->inflight;
        if (seen[vi] != want) {
            fleet_error_set(&s->check_err, "%s t=%.1f: VM %zu is on %u host lists, not %u", when,
                            s->now, vi, seen[vi], want);
            s->check_rc = -EPROTO;
            return;
        }
    }
}

static void optimize(struct sim *s)
{
    switch (s->pol->alloc) {
    case FLEET_MIGRATE:
        cloudsim_optimize(s);
        break;
    case FLEET_WATT:
        sim_watt_decide(s);
        break;
    default:
        break;
    }
    if (!s->compat && s->pol->alloc != FLEET_NPA && s->pol->alloc != FLEET_WATT) {
        /* CloudSim's policies switch a host off as soon as it is empty */
        for (size_t hi = 0; hi < s->n_hosts; hi++)
            if (s->hosts[hi].power == SIM_ON && !s->hosts[hi].n_vms)
                sim_power_off(s, (int32_t)hi);
    }
}

static unsigned count_active(const struct sim *s)
{
    unsigned n = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct sim_host *h = &s->hosts[hi];
        if (s->pol->alloc == FLEET_NPA)
            n++;
        else if (s->compat ? h->util_mips > 0 : h->power != SIM_OFF)
            n++;
    }
    return n;
}

static void record_point(struct sim *s, struct fleet_result *r, double t, double dt)
{
    unsigned vms = 0;
    for (size_t vi = 0; vi < s->n_vms; vi++)
        vms += s->vms[vi].alive;
    struct fleet_point pt = {
        .t_s = t,
        .active_hosts = count_active(s),
        .vms = vms,
        .power_w = dt > 0 ? s->interval_energy_ws / dt : 0,
        .sla_violation =
            s->interval_active_s > 0 ? s->interval_violation_s / s->interval_active_s : 0,
        .migrations = s->interval_migrations,
    };
    s->interval_energy_ws = s->interval_active_s = s->interval_violation_s = 0;
    s->interval_migrations = 0;
    if (pt.active_hosts > r->max_active_hosts)
        r->max_active_hosts = pt.active_hosts;
    r->mean_active_hosts += pt.active_hosts;
    if (!s->opt->series)
        return;
    size_t cap = r->n_series;
    if ((r->n_series & (r->n_series - 1)) == 0) { /* grow at powers of two */
        cap = r->n_series ? 2 * r->n_series : 1;
        r->series = xrealloc(r->series, cap * sizeof(*r->series));
    }
    r->series[r->n_series++] = pt;
}

/* CloudSim: create every VM at 0, ticks at 300.1, 600.1, ... while before
 * the 24-h limit; VMs whose demand hits 0 are removed; migrations still in
 * flight at the last tick complete (and are metered) before the limit. */
static void run_compat(struct sim *s, struct fleet_result *r)
{
    double limit = s->sc->trace->n_steps * s->sc->trace->step_s;
    double interval = s->opt->interval_s, prev = 0;

    for (size_t vi = 0; vi < s->n_vms; vi++)
        sim_vm_create(s, (int32_t)vi);
    if (!s->opt->hard_ram)
        for (size_t hi = 0; hi < s->n_hosts; hi++)
            s->hosts[hi].ram_used = 0; /* CloudSim re-creates VMs at 0 MB in its first round */
    size_t ticks = 0;
    for (double t = 0.1 + interval; t < limit; t += interval) {
        run_migrations_until(s, t);
        s->now = t;
        sim_update(s, t);
        ticks++;
        check_invariants(s, "update");
        optimize(s);
        check_invariants(s, "consolidation");
        record_point(s, r, t, t - prev);
        prev = t;
    }
    run_migrations_until(s, limit);
    r->mean_active_hosts = ticks ? r->mean_active_hosts / (double)ticks : 0;
}

/* Realistic: VMs live as their traces say, ticks at k x interval, a final
 * update at the horizon. */
static void run_realistic(struct sim *s, struct fleet_result *r)
{
    const struct fleet_trace *tr = s->sc->trace;
    double interval = s->opt->interval_s;
    double limit = tr->n_steps * tr->step_s;
    size_t ticks = 0;
    double prev = 0;

    for (double t = 0; t <= limit + 1e-9; t += interval) {
        run_migrations_until(s, t);
        s->now = t;
        boots_complete(s, t);
        sim_update(s, t);
        if (t > 0) {
            ticks++;
            record_point(s, r, t, t - prev);
            prev = t;
        }
        if (t >= limit)
            break;
        uint32_t k = (uint32_t)floor(t / tr->step_s + 1e-9);
        if (!s->opt->hard_ram) /* RAM counts only while VMs are created */
            for (size_t hi = 0; hi < s->n_hosts; hi++)
                s->hosts[hi].ram_used = 0;
        for (size_t vi = 0; vi < s->n_vms; vi++) {
            struct sim_vm *v = &s->vms[vi];
            const struct fleet_trace_vm *tv = &tr->vms[vi];
            if (v->alive && k >= tv->first + tv->len && v->dest < 0)
                sim_vm_finish(s, (int32_t)vi);
            else if ((!v->alive && !v->gone && k >= tv->first && k < tv->first + tv->len) ||
                     (v->alive && v->host < 0))
                sim_vm_create(s, (int32_t)vi);
        }
        check_invariants(s, "update");
        optimize(s);
        check_invariants(s, "consolidation");
    }
    r->mean_active_hosts = ticks ? r->mean_active_hosts / (double)ticks : 0;
}

static void fill_result(const struct sim *s, const struct fleet_policy *p, struct fleet_result *r)
{
    double active = 0, viol = 0, req = 0, alloc = 0, loss = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        active += s->hosts[hi].active_s;
        viol += s->hosts[hi].violation_s;
    }
    for (size_t vi = 0; vi < s->n_vms; vi++) {
        req += s->vms[vi].req_integral;
        alloc += s->vms[vi].alloc_integral;
        loss += s->vms[vi].mig_loss_integral;
        r->vms_end += s->vms[vi].alive;
    }
    snprintf(r->policy, sizeof(r->policy), "%s", p->name);
    r->compat = s->compat;
    r->energy_kwh = s->energy_ws / 3.6e6;
    r->slatah = active > 0 ? viol / active : 0;
    r->pdm = req > 0 ? loss / req : 0;
    r->slav = r->slatah * r->pdm;
    r->esv = r->energy_kwh * r->slav;
    double want = req + s->pending_req_integral;
    r->unserved = want > 0 ? (want - alloc) / want : 0;
    /* the fluid bound on what was served: every host draws at least its
     * standby power and P(u) >= P_off + e x u x capacity */
    double off = 0, metered = s->compat ? 0 : s->sc->trace->n_steps * s->sc->trace->step_s;
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        off += fleet_type_off_w(s->hosts[hi].type, s->opt);
    r->served_bound_kwh =
        (fleet_cheapest_w_per_mips(s->sc->hosts, s->opt) * s->util_mips_s + off * metered) / 3.6e6;
    r->vms_failed = s->n_failed;
    r->migrations = s->migrations;
    r->power_ons = s->power_ons;
    r->power_offs = s->power_offs;
}

int fleet_sim_run(const struct fleet_scenario *sc, const struct fleet_policy *p,
                  const struct fleet_options *o, struct fleet_result *ret, struct fleet_error *err)
{
    struct sim s = {0};
    struct fleet_result r = {0};
    _cleanup_free_ struct fleet_host_type *types =
        xcalloc(sc->hosts->n_types ? sc->hosts->n_types : 1, sizeof(*types));

    int rc = sim_init(&s, sc, p, o, types, err);
    if (rc < 0) {
        sim_free(&s);
        return rc;
    }
    if (o->compat)
        run_compat(&s, &r);
    else
        run_realistic(&s, &r);
    fill_result(&s, p, &r);
    rc = s.check_rc;
    if (rc < 0 && err)
        *err = s.check_err;
    sim_free(&s);
    if (rc < 0) {
        fleet_result_free(&r);
        return rc;
    }
    r.lower_bound_kwh = fleet_lower_bound_kwh(sc, o);
    *ret = r;
    return 0;
}
