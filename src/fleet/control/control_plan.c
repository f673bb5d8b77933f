/* The plan: the watt policy (src/fleet/policy/watt.c), the very code
 * `watt fleet sim` measures, on a view of the real fleet. Each tick builds
 * a fleet view from what was observed (hosts on or off, VMs where they
 * run, their CPU history and memory, the operator's constraints), the
 * pure policy returns its actions with their reasons and forecasts, and
 * the controller applies its own limits on top (control_act.c checks
 * safety again before acting). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/control/control.h"
#include "fleet/policy/policy.h"

int ctl_policy_params(const struct site *site, struct fleet_watt_params *ret,
                      struct fleet_error *err)
{
    /* fleet.ini's limits first, its policy string over them (a later key
     * wins), as docs/fleet-run.md says */
    _cleanup_free_ char *text =
        xasprintf("spare=%.17g,per_vm_day=%.17g%s%s", site->limits.spare, site->limits.per_vm_day,
                  site->policy ? "," : "", site->policy ? site->policy : "");
    return fleet_watt_params_parse(text, ret, err);
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

/* The safety check's forecast of a VM, MIPS: stricter than the policy's
 * (docs/fleet-run.md): the largest of its last WINDOW samples (the
 * policy takes a quantile of them), its whole size with no sample. */
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

static const struct fleet_watt_params *params(struct controller *c)
{
    if (!c->planner) {
        struct fleet_watt_params wp;
        struct fleet_error err;
        /* site_parse() refused a policy that does not parse: the defaults
         * are for a site built by hand */
        if (ctl_policy_params(c->site, &wp, &err) < 0)
            fleet_watt_params_parse(NULL, &wp, &err);
        c->planner = watt_planner_new(&wp);
    }
    return watt_planner_params(c->planner);
}

void ctl_capacity(const struct controller *c, int32_t skip, double *ret_cap, double *ret_need)
{
    const struct site *site = c->site;
    const struct fleet_watt_params *wp = params((struct controller *)c);
    double cap = 0, need = 0;
    for (size_t hi = 0; hi < site->n_hosts; hi++) {
        const struct ctl_host *h = &c->hosts[hi];
        if ((int32_t)hi == skip || (h->state != CTL_ON && h->state != CTL_BOOTING) ||
            h->maintenance)
            continue;
        cap += fleet_host_type_mips(&site->types.types[site->hosts[hi].type]) * wp->pack;
    }
    for (size_t i = 0; i < c->n_vm; i++)
        if (c->vm[i].host >= 0)
            need += vm_forecast(c, &c->vm[i], (size_t)wp->window);
    *ret_cap = cap;
    *ret_need = need * (1 + wp->spare);
}

static enum fleet_power view_power(enum ctl_host_state s)
{
    switch (s) {
    case CTL_ON:
        return FLEET_ON;
    case CTL_BOOTING:
        return FLEET_BOOTING;
    case CTL_OFF:
        return FLEET_OFF;
    case CTL_STOPPING:
    case CTL_UNREACHABLE:
    case CTL_UNKNOWN:
    default:
        return FLEET_UNUSABLE; /* never a target, never switched */
    }
}

/* Only VMs seen once, on a host that is on, are planned for. */
static bool planned(const struct controller *c, const struct ctl_vm *v)
{
    return v->host >= 0 && v->copies == 1 && c->hosts[v->host].state == CTL_ON;
}

void ctl_view_make(const struct controller *c, struct fleet_view *ret, struct ctl_view_buf *buf)
{
    const struct site *site = c->site;
    size_t nh = site->n_hosts, nv = c->n_vm;
    buf->hosts = xcalloc(nh ? nh : 1, sizeof(*buf->hosts));
    buf->vms = xcalloc(nv ? nv : 1, sizeof(*buf->vms));
    buf->lists = xcalloc(nv ? nv : 1, sizeof(int32_t));
    bool constrained = false;
    for (size_t i = 0; i < nv; i++) {
        const struct ctl_vm *cv = &c->vm[i];
        struct fleet_view_vm *v = &buf->vms[i];
        v->host = planned(c, cv) ? cv->host : -1;
        v->dest = -1;
        v->pes = cv->vcpus ? cv->vcpus : 1;
        v->mips = site->limits.vm_mips;
        v->ram_mb = cv->mem_mb;
        double u = ctl_vm_demand(c, cv); /* unknown: control_history.c */
        v->req = u * v->mips * v->pes;
        v->hist = cv->hist;
        v->hist_n = cv->hist_n < ARRAY_SIZE(cv->hist) ? cv->hist_n : ARRAY_SIZE(cv->hist);
        v->migrations_day = cv->migrations_day;
        /* not ours to move (not listed in vms =), or its last migration
         * failed: left alone */
        v->fixed = !cv->managed || c->now_s < cv->no_move_until_s;
        v->pin = cv->pin;
        v->group = cv->group;
        constrained |= v->fixed || v->pin >= 0 || v->group >= 0;
    }
    size_t off = 0;
    for (size_t hi = 0; hi < nh; hi++) {
        constrained |= c->hosts[hi].maintenance;
        const struct ctl_host *ch = &c->hosts[hi];
        struct fleet_view_host *h = &buf->hosts[hi];
        h->type = &site->types.types[site->hosts[hi].type];
        h->power = view_power(ch->state);
        /* a host with less memory than its type says: plan with what it
         * has (the memory it lacks counts as used) */
        double real_mb = (double)ch->mem_kib / 1024;
        if (ch->mem_kib && real_mb < h->type->ram_mb)
            h->ram_used_mb = h->type->ram_mb - real_mb;
        h->vms = &buf->lists[off];
        for (size_t i = 0; i < nv; i++)
            if (buf->vms[i].host == (int32_t)hi) {
                buf->lists[off++] = (int32_t)i;
                h->n_vms++;
                h->ram_used_mb += buf->vms[i].ram_mb;
            }
        /* the policy counts this decision itself: empty_ticks here is
         * the decisions before it */
        h->empty_ticks = ch->empty_ticks ? ch->empty_ticks - 1 : 0;
        h->maintenance = ch->maintenance;
        /* an active domain here that the view does not plan for here (a
         * second copy, a VM seen on two hosts): the host is not empty */
        for (size_t k = 0; ch->state == CTL_ON && k < ch->doms.n && !h->busy; k++) {
            const struct fx_domain *d = &ch->doms.v[k];
            int32_t vi = d->active ? ctl_vm_index((struct controller *)c, d->name, false) : -1;
            h->busy = d->active && (vi < 0 || buf->vms[vi].host != (int32_t)hi);
        }
    }
    *ret = (struct fleet_view){
        .hosts = buf->hosts,
        .n_hosts = nh,
        .vms = buf->vms,
        .n_vms = nv,
        .types = site->types.types,
        .n_types = site->types.n_types,
        .max_migrations_per_host = site->limits.per_host,
        .hard_ram = true,
        .manage_power = true,
        .warm = ctl_warm(c, NULL, NULL), /* control_history.c */
        .constrained = constrained,
    };
}

void ctl_view_free(struct ctl_view_buf *buf)
{
    free(buf->hosts);
    free(buf->vms);
    free(buf->lists);
    *buf = (struct ctl_view_buf){0};
}

/* The policy's actions, with their reasons in words. */
static void collect(const struct controller *c, const struct fleet_plan *fp, struct ctl_plan *p)
{
    const struct site *site = c->site;
    for (size_t i = 0; i < fp->n; i++) {
        const struct fleet_action *f = &fp->v[i];
        struct ctl_action *a = add_action(p);
        a->reason = f->reason;
        a->vm_mips = f->vm_mips;
        a->load_mips = f->load_mips;
        a->cap_mips = f->cap_mips;
        switch (f->kind) {
        case FLEET_ACT_MIGRATE:
            a->kind = CTL_MIGRATE;
            a->vm = f->vm;
            a->src = f->src;
            a->dst = f->dst;
            break;
        case FLEET_ACT_POWER_ON:
            a->kind = CTL_POWER_ON;
            a->host = f->host;
            break;
        case FLEET_ACT_POWER_OFF:
            a->kind = CTL_POWER_OFF;
            a->host = f->host;
            break;
        }
        const char *src = a->src >= 0 ? site->hosts[a->src].name : "";
        switch (f->reason) {
        case FLEET_WHY_OVERLOAD:
            snprintf(a->why, sizeof(a->why),
                     "%s is forecast at %.0f %% of its %.0f MIPS; this VM at %.0f MIPS", src,
                     100 * f->load_mips / f->cap_mips, f->cap_mips, f->vm_mips);
            break;
        case FLEET_WHY_DRAIN:
            snprintf(a->why, sizeof(a->why),
                     "%s is forecast at %.0f %% of its %.0f MIPS: emptied so it can go off", src,
                     100 * f->load_mips / f->cap_mips, f->cap_mips);
            break;
        case FLEET_WHY_MAINTENANCE:
            snprintf(a->why, sizeof(a->why), "%s is in maintenance", src);
            break;
        case FLEET_WHY_PIN:
            snprintf(a->why, sizeof(a->why), "pinned to %s", site->hosts[a->dst].name);
            break;
        case FLEET_WHY_AFFINITY:
            snprintf(a->why, sizeof(a->why), "shares %s with a VM of its anti-affinity group", src);
            break;
        case FLEET_WHY_TARGET:
            snprintf(a->why, sizeof(a->why), "a VM that must move needs a host");
            break;
        case FLEET_WHY_SPARE:
            snprintf(a->why, sizeof(a->why),
                     "forecast %.0f MIPS with %.0f %% spare; %.0f MIPS on with this host",
                     f->load_mips, c->site->limits.spare * 100, f->cap_mips);
            break;
        case FLEET_WHY_IDLE:
            snprintf(a->why, sizeof(a->why),
                     "empty, and the others cover the forecast (%.0f of %.0f MIPS)", f->load_mips,
                     f->cap_mips);
            break;
        }
    }
}

/* The controller's own limits over the policy's wishes. */
static void limit(struct controller *c, struct ctl_plan *p)
{
    const struct site *site = c->site;
    unsigned migrations = 0, on = 0;
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
        if (c->hosts[hi].state == CTL_OFF && !c->hosts[hi].maintenance) {
            bool planned_on = false;
            for (size_t i = 0; i < p->n; i++)
                planned_on |= p->v[i].kind == CTL_POWER_ON && p->v[i].host == (int32_t)hi;
            if (planned_on)
                continue;
            struct ctl_action *a = add_action(p);
            a->kind = CTL_POWER_ON;
            a->reason = FLEET_WHY_SPARE;
            a->host = (int32_t)hi;
            snprintf(a->why, sizeof(a->why), "min_hosts_on = %u", site->limits.min_hosts_on);
            on++;
        }
}

int ctl_plan_make(struct controller *c, struct ctl_plan *ret)
{
    struct ctl_plan p = {0};
    struct fleet_view v;
    struct ctl_view_buf buf;
    struct fleet_plan fp = {0};
    params(c);
    ctl_view_make(c, &v, &buf);
    watt_plan(c->planner, &v, &fp);
    collect(c, &fp, &p);
    p.observing = fp.observing;
    if (fp.observing) {
        /* what a warm controller would do: said, not done */
        struct fleet_plan wfp = {0};
        struct ctl_plan would = {0};
        v.warm = true;
        watt_plan(c->planner, &v, &wfp);
        collect(c, &wfp, &would);
        ctl_warm_notes(c, &would, &p);
        fleet_plan_free(&wfp);
        ctl_plan_free(&would);
    }
    fleet_plan_free(&fp);
    ctl_view_free(&buf);
    limit(c, &p);
    ctl_capacity(c, -1, &p.capacity_on_mips, &p.forecast_mips);
    *ret = p;
    return 0;
}
