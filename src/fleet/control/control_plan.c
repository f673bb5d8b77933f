/* The plan: the simulator's watt policy (src/fleet/policy/watt.c), the
 * very code `watt fleet sim` measures, run on a snapshot of the real
 * fleet. Each tick builds a simulator state from what was observed (hosts
 * on or off, VMs where they run, their CPU history and memory), lets the
 * policy make its moves, and reads them back as actions: migrations it
 * started, hosts it switched on or off. The controller then applies its
 * own limits on top (control_act.c checks safety again before acting). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/control/control.h"
#include "fleet/sim/sim.h"

struct snapshot {
    struct sim s;
    struct fleet_scenario sc;
    struct fleet_options opt;
    struct fleet_policy pol;
    struct fleet_vm_type vm_type;
    int32_t *sim_vm; /* per sim VM: its controller VM */
    char *params;
};

void ctl_policy_params(const struct controller *c, struct fleet_watt_params *ret)
{
    struct fleet_error err;
    /* site_parse() refused a policy that does not parse: the defaults are
     * for a site built by hand */
    if (fleet_watt_params_parse(c->site->policy, ret, &err) < 0)
        fleet_watt_params_parse(NULL, ret, &err);
}

void ctl_plan_note(struct ctl_plan *p, const char *fmt, ...)
{
    if (p->n_notes >= ARRAY_SIZE(p->notes))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->notes[p->n_notes++], sizeof(p->notes[0]), fmt, ap);
    va_end(ap);
}

void ctl_plan_free(struct ctl_plan *p)
{
    free(p->v);
    *p = (struct ctl_plan){0};
}

static struct ctl_action *add_action(struct ctl_plan *p)
{
    if (p->n == p->cap)
        p->v = grow_array(p->v, sizeof(*p->v), p->n, &p->cap);
    struct ctl_action *a = &p->v[p->n++];
    *a = (struct ctl_action){.vm = -1, .src = -1, .dst = -1, .host = -1};
    return a;
}

/* A VM's forecast demand, MIPS: the largest of its recent samples (at
 * least the policy's quantile of them), at least its demand now; with no
 * sample yet, its whole size. */
static double vm_forecast(const struct controller *c, const struct ctl_vm *v, size_t window)
{
    double mips = c->site->limits.vm_mips * (v->vcpus ? v->vcpus : 1);
    if (v->hist_n == 0)
        return mips;
    double top = 0;
    for (size_t i = 0; i < v->hist_n && i < window; i++)
        top = fmax(top, v->hist[i]);
    return top * mips;
}

void ctl_capacity(const struct controller *c, int32_t skip, double *ret_cap, double *ret_need)
{
    const struct site *site = c->site;
    struct fleet_watt_params wp;
    ctl_policy_params(c, &wp);
    double pack = wp.pack, cap = 0, need = 0;
    for (size_t hi = 0; hi < site->n_hosts; hi++) {
        const struct ctl_host *h = &c->hosts[hi];
        if ((int32_t)hi == skip || (h->state != CTL_ON && h->state != CTL_BOOTING))
            continue;
        cap += fleet_host_type_mips(&site->types.types[site->hosts[hi].type]) * pack;
    }
    for (size_t i = 0; i < c->n_vm; i++)
        if (c->vm[i].host >= 0)
            need += vm_forecast(c, &c->vm[i], (size_t)wp.window);
    *ret_cap = cap;
    *ret_need = need * (1 + site->limits.spare);
}

static enum sim_power sim_power(enum ctl_host_state s)
{
    switch (s) {
    case CTL_ON:
        return SIM_ON;
    case CTL_BOOTING:
        return SIM_BOOTING;
    case CTL_OFF:
    case CTL_STOPPING:
    case CTL_UNREACHABLE:
    case CTL_UNKNOWN:
    default:
        /* not usable; a switch-on the policy asks for is refused later
         * unless the host really is off */
        return SIM_OFF;
    }
}

static void build_hosts(struct controller *c, struct snapshot *sn)
{
    const struct site *site = c->site;
    struct sim *s = &sn->s;
    s->n_hosts = site->n_hosts;
    s->hosts = xcalloc(s->n_hosts, sizeof(*s->hosts));
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        struct sim_host *h = &s->hosts[hi];
        h->type = &site->types.types[site->hosts[hi].type];
        h->cap = fleet_host_type_mips(h->type);
        h->power = sim_power(c->hosts[hi].state);
        /* a host with less memory than its type says: plan with what it
         * has (the memory it lacks counts as used) */
        double real_mb = (double)c->hosts[hi].mem_kib / 1024;
        if (c->hosts[hi].mem_kib && real_mb < h->type->ram_mb)
            h->ram_used = h->type->ram_mb - real_mb;
    }
}

static void build_vms(struct controller *c, struct snapshot *sn)
{
    struct sim *s = &sn->s;
    s->vms = xcalloc(c->n_vm ? c->n_vm : 1, sizeof(*s->vms));
    sn->sim_vm = xcalloc(c->n_vm ? c->n_vm : 1, sizeof(int32_t));
    for (size_t i = 0; i < c->n_vm; i++) {
        const struct ctl_vm *cv = &c->vm[i];
        /* only VMs seen once, on a host that is on, are planned for */
        if (cv->host < 0 || cv->copies != 1 || c->hosts[cv->host].state != CTL_ON)
            continue;
        size_t k = s->n_vms++;
        struct sim_vm *v = &s->vms[k];
        sn->sim_vm[k] = (int32_t)i;
        v->type = &sn->vm_type;
        v->pes = cv->vcpus ? cv->vcpus : 1;
        v->mips = c->site->limits.vm_mips;
        v->ram_mb = cv->mem_mb;
        v->host = cv->host;
        v->dest = -1;
        v->alive = v->born = true;
        double u = ctl_vm_demand(c, cv); /* unknown: control_history.c */
        v->req = u * v->mips * v->pes;
        v->hist_n = (uint8_t)(cv->hist_n < VM_HISTORY ? cv->hist_n : VM_HISTORY);
        memcpy(v->hist, cv->hist, v->hist_n * sizeof(double));
        /* a VM not ours to move (not listed in vms =) never moves */
        v->migrations_day = cv->managed ? (uint16_t)fmin(cv->migrations_day, 65534) : UINT16_MAX;
        if (c->now_s < cv->no_move_until_s) /* its last migration failed: not yet again */
            v->migrations_day = UINT16_MAX;
        struct sim_host *h = &s->hosts[v->host];
        sim_host_add_vm(h, (int32_t)k);
        h->ram_used += v->ram_mb;
    }
}

static void snapshot_free(struct snapshot *sn)
{
    watt_policy_free(&sn->s);
    for (size_t hi = 0; hi < sn->s.n_hosts; hi++)
        free(sn->s.hosts[hi].vms);
    free(sn->s.hosts);
    free(sn->s.vms);
    free(sn->s.migs);
    free(sn->sim_vm);
    free(sn->params);
}

static int snapshot_make(struct controller *c, struct snapshot *sn, struct fleet_error *err)
{
    const struct site *site = c->site;
    *sn = (struct snapshot){0};
    fleet_options_default(&sn->opt);
    sn->opt.compat = false;
    sn->opt.hard_ram = true;
    sn->opt.interval_s = site->limits.interval_s;
    sn->opt.max_migrations_per_host = site->limits.per_host;
    /* the controller counts empty ticks itself (a snapshot has no past),
     * and per-VM migrations come from the journal */
    sn->params = xasprintf("spare=%g,per_vm_day=%g%s%s,off_after=0", site->limits.spare,
                           site->limits.per_vm_day, site->policy ? "," : "",
                           site->policy ? site->policy : "");
    sn->opt.watt_params = sn->params;
    sn->pol = (struct fleet_policy){.alloc = FLEET_WATT, .name = "watt"};
    snprintf(sn->vm_type.name, sizeof(sn->vm_type.name), "vm");
    sn->vm_type.mips = site->limits.vm_mips;
    sn->vm_type.pes = 1;
    sn->sc =
        (struct fleet_scenario){.hosts = &site->types, .vm_types = &sn->vm_type, .n_vm_types = 1};
    struct sim *s = &sn->s;
    s->sc = &sn->sc;
    s->pol = &sn->pol;
    s->opt = &sn->opt;
    s->types = site->types.types;
    build_hosts(c, sn);
    build_vms(c, sn);
    return watt_policy_init(s, err);
}

/* Read the policy's moves back as actions. */
static void collect(struct controller *c, struct snapshot *sn, const enum sim_power *before,
                    struct ctl_plan *p)
{
    struct sim *s = &sn->s;
    for (size_t i = 0; i < s->n_migs; i++) {
        struct ctl_action *a = add_action(p);
        a->kind = CTL_MIGRATE;
        a->vm = sn->sim_vm[s->migs[i].vm];
        a->src = s->migs[i].src;
        a->dst = s->migs[i].dst;
        const struct sim_host *src = &s->hosts[a->src];
        double load = 0;
        for (size_t k = 0; k < s->n_vms; k++)
            if (s->vms[k].host == a->src)
                load += s->vms[k].req;
        snprintf(a->why, sizeof(a->why), "%s was at %.0f %% of its %.0f MIPS",
                 c->site->hosts[a->src].name, 100 * load / src->cap, src->cap);
    }
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        enum sim_power now = s->hosts[hi].power;
        if (before[hi] == SIM_OFF && now == SIM_BOOTING) {
            struct ctl_action *a = add_action(p);
            a->kind = CTL_POWER_ON;
            a->host = (int32_t)hi;
            snprintf(a->why, sizeof(a->why), "spare capacity below %.0f %% of the forecast",
                     c->site->limits.spare * 100);
        } else if (before[hi] == SIM_ON && now == SIM_OFF) {
            struct ctl_action *a = add_action(p);
            a->kind = CTL_POWER_OFF;
            a->host = (int32_t)hi;
            snprintf(a->why, sizeof(a->why), "empty, and the others cover the forecast");
        }
    }
}

/* The controller's own limits over the policy's wishes. */
static void limit(struct controller *c, struct ctl_plan *p)
{
    const struct site *site = c->site;
    unsigned migrations = 0, on = 0;
    struct fleet_watt_params wp;
    ctl_policy_params(c, &wp);
    double off_after = wp.off_after;
    for (size_t hi = 0; hi < site->n_hosts; hi++)
        on += c->hosts[hi].state == CTL_ON || c->hosts[hi].state == CTL_BOOTING;
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct ctl_action *a = &p->v[i];
        bool keep = true;
        if (a->kind == CTL_MIGRATE && ++migrations > site->limits.max_concurrent) {
            keep = false;
            if (migrations == site->limits.max_concurrent + 1)
                ctl_plan_note(p, "max_concurrent_migrations = %u: the other migrations wait",
                              site->limits.max_concurrent);
        } else if (a->kind == CTL_POWER_ON && c->hosts[a->host].state != CTL_OFF) {
            keep = false;
            ctl_plan_note(p, "host %s is %s, not off: not switched on", site->hosts[a->host].name,
                          ctl_host_state_name(c->hosts[a->host].state));
        } else if (a->kind == CTL_POWER_ON) {
            on++;
        } else if (a->kind == CTL_POWER_OFF && c->hosts[a->host].empty_ticks <= off_after) {
            keep = false; /* empty for too short a time: the policy's off_after */
        } else if (a->kind == CTL_POWER_OFF &&
                   on <= (site->limits.min_hosts_on > 1 ? site->limits.min_hosts_on : 1)) {
            keep = false;
            ctl_plan_note(p, "min_hosts_on = %u keeps %s on", site->limits.min_hosts_on,
                          site->hosts[a->host].name);
        } else if (a->kind == CTL_POWER_OFF) {
            on--;
        }
        if (keep)
            p->v[k++] = *a;
    }
    p->n = k;
    /* fewer hosts on than min_hosts_on: switch on the first ones off */
    for (size_t hi = 0; hi < site->n_hosts && on < site->limits.min_hosts_on; hi++)
        if (c->hosts[hi].state == CTL_OFF) {
            bool planned = false;
            for (size_t i = 0; i < p->n; i++)
                planned |= p->v[i].kind == CTL_POWER_ON && p->v[i].host == (int32_t)hi;
            if (planned)
                continue;
            struct ctl_action *a = add_action(p);
            a->kind = CTL_POWER_ON;
            a->host = (int32_t)hi;
            snprintf(a->why, sizeof(a->why), "min_hosts_on = %u", site->limits.min_hosts_on);
            on++;
        }
}

int ctl_plan_make(struct controller *c, struct ctl_plan *ret)
{
    struct snapshot sn;
    struct ctl_plan p = {0};
    struct fleet_error err = {{0}};
    int r = snapshot_make(c, &sn, &err);
    if (r < 0) {
        snprintf(c->last_error, sizeof(c->last_error), "%.480s (docs/fleet.md)", err.msg);
        snapshot_free(&sn);
        return r;
    }
    _cleanup_free_ enum sim_power *before = xcalloc(sn.s.n_hosts, sizeof(*before));
    for (size_t hi = 0; hi < sn.s.n_hosts; hi++)
        before[hi] = sn.s.hosts[hi].power;
    watt_optimize(&sn.s);
    collect(c, &sn, before, &p);
    ctl_warm_gate(c, &p); /* with too few samples, only overloads act */
    limit(c, &p);
    ctl_capacity(c, -1, &p.capacity_on_mips, &p.forecast_mips);
    snapshot_free(&sn);
    *ret = p;
    return 0;
}
