/* The simulator's side of the watt policy: every decision interval, a view
 * of the simulated fleet goes to the pure policy (policy/watt.c) and its
 * plan is applied here, as the controller applies it to a real fleet.
 * New VMs are placed here too: placement is the cloud's scheduler's job
 * (Nova's, vCenter's), not the consolidation policy's. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/policy/policy.h"
#include "fleet/sim/sim.h"

static void view_init(struct sim *s);

int sim_watt_init(struct sim *s, struct fleet_error *err)
{
    struct fleet_watt_params p;
    struct fleet_error perr;
    if (fleet_watt_params_parse(s->opt->watt_params, &p, &perr) < 0) {
        fleet_error_set(err, "watt policy tunables '%.100s': %.300s", s->opt->watt_params,
                        perr.msg);
        return -EINVAL;
    }
    s->planner = watt_planner_new(&p);
    size_t nh = s->n_hosts ? s->n_hosts : 1, nt = s->sc->hosts->n_types;
    s->view_hosts = xcalloc(nh, sizeof(*s->view_hosts));
    s->view_vms = xcalloc(s->n_vms ? s->n_vms : 1, sizeof(*s->view_vms));
    s->w_per_mips = xcalloc(nh, sizeof(double));
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        s->w_per_mips[hi] = s->hosts[hi].type->power_w[FLEET_POWER_POINTS - 1] / s->hosts[hi].cap;
    /* the first wave fills hosts by efficiency of their type (stable) */
    _cleanup_free_ const struct fleet_host_type **order = xcalloc(nt ? nt : 1, sizeof(*order));
    size_t n = 0;
    for (size_t i = 0; i < nt; i++) {
        const struct fleet_host_type *t = &s->types[i];
        double e = t->power_w[FLEET_POWER_POINTS - 1] / fleet_host_type_mips(t);
        size_t j = n++;
        while (j > 0 &&
               order[j - 1]->power_w[FLEET_POWER_POINTS - 1] / fleet_host_type_mips(order[j - 1]) >
                   e) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = t;
    }
    s->fill_order = xcalloc(nh, sizeof(int32_t));
    size_t o = 0;
    for (size_t k = 0; k < n; k++)
        for (size_t hi = 0; hi < s->n_hosts; hi++)
            if (s->hosts[hi].type == order[k])
                s->fill_order[o++] = (int32_t)hi;
    s->fill_pos = xcalloc(s->sc->n_vm_types ? s->sc->n_vm_types : 1, sizeof(size_t));
    view_init(s);
    return 0;
}

void sim_watt_free(struct sim *s)
{
    watt_planner_free(s->planner);
    s->planner = NULL;
    free(s->view_hosts);
    free(s->view_vms);
    free(s->w_per_mips);
    free(s->fill_order);
    free(s->fill_pos);
}

/* A new VM: nothing is known but its request (its full size at creation).
 * The first wave (t = 0, every VM at once) fills hosts in order of
 * efficiency, next fit, in O(1) per VM; a VM born later goes to the
 * fullest suitable running host of the most efficient type. */
/* Host HI may take VM VI as the constraints go: not in maintenance, the
 * VM's pin, no VM of its anti-affinity group there. */
static bool allowed(const struct sim *s, int32_t hi, int32_t vi)
{
    const struct fleet_constraints *k = s->sc->constraints;
    if (!k)
        return true;
    if (k->maintenance[hi] || (k->pin[vi] >= 0 && k->pin[vi] != hi))
        return false;
    if (k->group[vi] < 0)
        return true;
    const struct sim_host *h = &s->hosts[hi];
    for (uint32_t i = 0; i < h->n_vms; i++)
        if (h->vms[i] != vi && k->group[h->vms[i]] == k->group[vi])
            return false;
    return true;
}

int32_t sim_watt_place(struct sim *s, int32_t vi)
{
    const struct sim_vm *v = &s->vms[vi];
    const struct fleet_constraints *k = s->sc->constraints;
    /* the first-wave cursor assumes a host refused for a VM type stays
     * refused: not so for a pin or a group, which take the scan below */
    bool plain = !k || (k->pin[vi] < 0 && k->group[vi] < 0);
    if (s->now == 0 && plain) {
        /* one cursor per VM type: a host that cannot take a VM of a type
         * now never will in this wave (hosts only fill up) */
        size_t *pos = &s->fill_pos[v->type - s->sc->vm_types];
        while (*pos < s->n_hosts && (!sim_host_suitable(s, &s->hosts[s->fill_order[*pos]], v) ||
                                     !allowed(s, s->fill_order[*pos], vi)))
            (*pos)++;
        return *pos < s->n_hosts ? s->fill_order[*pos] : -1;
    }
    if (!plain && !s->compat && k->pin[vi] >= 0 && s->hosts[k->pin[vi]].power == SIM_OFF &&
        s->now > 0)
        sim_power_on(s, k->pin[vi]); /* its only host: switched on, the VM waits for it */
    int32_t to = -1;
    double best_eff = INFINITY, best_load = -1;
    for (size_t i = 0; i < s->n_hosts; i++) {
        int32_t hi = (int32_t)i;
        const struct sim_host *h = &s->hosts[hi];
        if (!sim_host_suitable(s, h, v) || (!s->compat && h->power == SIM_OFF) ||
            !allowed(s, hi, vi))
            continue;
        double eff = s->w_per_mips[hi];
        double load = h->cap - sim_host_available_mips(s, h);
        if (eff < best_eff - 1e-12 || (fabs(eff - best_eff) <= 1e-12 && load > best_load)) {
            best_eff = eff;
            best_load = load;
            to = hi;
        }
    }
    return to;
}

static enum fleet_power view_power(enum sim_power p)
{
    switch (p) {
    case SIM_ON:
        return FLEET_ON;
    case SIM_BOOTING:
        return FLEET_BOOTING;
    case SIM_OFF:
    default:
        return FLEET_OFF;
    }
}

/* What does not change during a run: types, sizes, constraints. */
static void view_init(struct sim *s)
{
    const struct fleet_constraints *k = s->sc->constraints;
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        s->view_hosts[hi] = (struct fleet_view_host){
            .type = s->hosts[hi].type,
            .maintenance = k && k->maintenance[hi],
        };
    for (size_t vi = 0; vi < s->n_vms; vi++) {
        const struct sim_vm *m = &s->vms[vi];
        s->view_vms[vi] = (struct fleet_view_vm){
            .mips = m->mips,
            .pes = m->pes,
            .ram_mb = m->ram_mb,
            .hist = m->hist,
            .pin = k ? k->pin[vi] : -1,
            .group = k ? k->group[vi] : -1,
        };
    }
}

/* What does, every decision. */
static void build_view(struct sim *s, struct fleet_view *v)
{
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct sim_host *h = &s->hosts[hi];
        struct fleet_view_host *x = &s->view_hosts[hi];
        x->power = view_power(h->power);
        x->ram_used_mb = h->ram_used;
        x->vms = h->vms;
        x->n_vms = h->n_vms;
        x->n_in = h->n_in;
        x->n_out = h->n_out;
        x->empty_ticks = h->empty_ticks;
    }
    for (size_t vi = 0; vi < s->n_vms; vi++) {
        const struct sim_vm *m = &s->vms[vi];
        struct fleet_view_vm *x = &s->view_vms[vi];
        x->host = m->host;
        x->dest = m->dest;
        x->req = m->req;
        x->hist_n = m->hist_n;
        x->migrations_day = m->migrations_day;
    }
    *v = (struct fleet_view){
        .hosts = s->view_hosts,
        .n_hosts = s->n_hosts,
        .vms = s->view_vms,
        .n_vms = s->n_vms,
        .types = s->types,
        .n_types = s->sc->hosts->n_types,
        /* CloudSim's model has neither power states nor migration limits */
        .max_migrations_per_host = s->compat ? 0 : s->opt->max_migrations_per_host,
        .hard_ram = s->opt->hard_ram,
        .manage_power = !s->compat,
        .warm = true, /* the simulator knows every VM's history from its birth */
        .constrained = s->sc->constraints != NULL,
    };
}

static void apply(struct sim *s, const struct fleet_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        const struct fleet_action *a = &p->v[i];
        int r = 0;
        switch (a->kind) {
        case FLEET_ACT_POWER_ON:
            sim_power_on(s, a->host);
            break;
        case FLEET_ACT_POWER_OFF:
            sim_power_off(s, a->host);
            break;
        case FLEET_ACT_MIGRATE:
            r = sim_start_migration(s, a->vm, a->dst);
            break;
        }
        /* the policy checks what the simulator checks: a refusal here is
         * a bug in one of them */
        if (r < 0 && s->opt->check && s->check_rc == 0) {
            fleet_error_set(&s->check_err, "t=%.1f: the plan's migration of VM %d to host %d: %s",
                            s->now, a->vm, a->dst, strerror(-r));
            s->check_rc = -EPROTO;
        }
    }
}

void sim_watt_decide(struct sim *s)
{
    if (s->now - s->day_start_s >= 86400) {
        s->day_start_s = s->now;
        for (size_t vi = 0; vi < s->n_vms; vi++)
            s->vms[vi].migrations_day = 0;
    }
    struct fleet_view v;
    struct fleet_plan p = {0};
    build_view(s, &v);
    watt_plan(s->planner, &v, &p);
    apply(s, &p);
    fleet_plan_free(&p);
    if (!s->compat)
        for (size_t hi = 0; hi < s->n_hosts; hi++) {
            struct sim_host *h = &s->hosts[hi];
            h->empty_ticks = h->power == SIM_ON && !h->n_vms ? h->empty_ticks + 1 : 0;
        }
}
