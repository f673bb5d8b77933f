/* watt's consolidation policy: predictive, migration-aware, frugal.
 *
 *  - Each VM's demand is forecast as a high quantile of its recent history
 *    (not the mean: the mean is exceeded half the time), never below what
 *    it asks for now.
 *  - Hosts are packed to an explicit headroom (PACK of capacity, counted in
 *    forecasts); a host is relieved only when its forecast or its current
 *    demand passes OVER, moving as few VMs as will do (the biggest first).
 *  - Consolidation drains a lightly loaded host only if all its VMs fit
 *    elsewhere under the headroom, leaving less efficient host types first,
 *    and within a migration budget: per tick, and per VM per day.
 *  - Realistic mode: a spare margin of capacity stays powered; an empty host
 *    is switched off only after it has stayed empty long enough that the
 *    boot energy is repaid, and hosts are booted ahead of need.
 *
 * Tunables: fleet_options.watt_params, "pack=0.8,over=0.95,..." (docs/fleet.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/sim.h"

struct watt_params {
    double pack;       /* pack hosts to this share of capacity (forecasts) */
    double over;       /* relieve a host above this share (forecast or now) */
    double low;        /* drain candidates: hosts below this share */
    double quantile;   /* forecast quantile of the recent history */
    double window;     /* history samples the forecast looks at */
    double per_vm_day; /* migrations allowed per VM per day */
    double per_tick;   /* drain migrations per tick, as a share of VMs (at least 2) */
    double spare;      /* realistic: powered spare capacity, share of load */
    double off_after;  /* realistic: ticks a host stays empty before it is switched off */
};

struct watt_state {
    struct watt_params p;
    double *fc;   /* per VM: forecast MIPS */
    double *load; /* per host: sum of forecasts of VMs on it (incl. incoming) */
    double *now;  /* per host: sum of current requests */
    uint32_t *empty_ticks;
    uint8_t *draining;
    int type_rank_n;
    double *w_per_mips; /* per host: watts per MIPS at full load (efficiency) */
    unsigned budget;
    double day_start_s;
};

static const struct watt_params defaults = {
    .pack = 0.80,
    .over = 0.95,
    .low = 0.50,
    .quantile = 0.90,
    .window = 12,
    .per_vm_day = 4,
    .per_tick = 0.25,
    .spare = 0.10,
    .off_after = 2,
};

static int parse_params(const char *text, struct watt_params *p)
{
    *p = defaults;
    if (!text || !*text)
        return 0;
    _cleanup_free_ char *copy = xstrdup(text);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return -EINVAL;
        *eq = '\0';
        double v = strtod(eq + 1, NULL);
        if (streq(tok, "pack"))
            p->pack = v;
        else if (streq(tok, "over"))
            p->over = v;
        else if (streq(tok, "low"))
            p->low = v;
        else if (streq(tok, "quantile"))
            p->quantile = v;
        else if (streq(tok, "window"))
            p->window = v;
        else if (streq(tok, "per_vm_day"))
            p->per_vm_day = v;
        else if (streq(tok, "per_tick"))
            p->per_tick = v;
        else if (streq(tok, "spare"))
            p->spare = v;
        else if (streq(tok, "off_after"))
            p->off_after = v;
        else
            return -EINVAL;
    }
    return 0;
}

int watt_policy_init(struct sim *s)
{
    struct watt_state *w = xcalloc(1, sizeof(*w));
    if (parse_params(s->opt->watt_params, &w->p) < 0) {
        free(w);
        return -EINVAL;
    }
    w->fc = xcalloc(s->n_vms, sizeof(double));
    w->load = xcalloc(s->n_hosts, sizeof(double));
    w->now = xcalloc(s->n_hosts, sizeof(double));
    w->empty_ticks = xcalloc(s->n_hosts, sizeof(uint32_t));
    w->draining = xcalloc(s->n_hosts, 1);
    w->w_per_mips = xcalloc(s->n_hosts, sizeof(double));
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        w->w_per_mips[hi] = s->hosts[hi].type->power_w[FLEET_POWER_POINTS - 1] / s->hosts[hi].cap;
    s->policy_state = w;
    return 0;
}

void watt_policy_free(struct sim *s)
{
    struct watt_state *w = s->policy_state;
    if (!w)
        return;
    free(w->fc);
    free(w->load);
    free(w->now);
    free(w->empty_ticks);
    free(w->draining);
    free(w->w_per_mips);
    free(w);
    s->policy_state = NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Forecast: the QUANTILE of the last WINDOW samples, at least the demand
 * now. Without history (a new VM), its request now. */
static double forecast(const struct watt_params *p, const struct vm *v)
{
    double buf[VM_HISTORY];
    size_t n = v->hist_n < (size_t)p->window ? v->hist_n : (size_t)p->window;
    double now = v->req;
    if (n == 0)
        return now;
    memcpy(buf, v->hist, n * sizeof(double));
    qsort(buf, n, sizeof(double), cmp_double);
    size_t k = (size_t)ceil(p->quantile * (double)n) - 1;
    if (k >= n)
        k = n - 1;
    double f = buf[k] * v->mips * v->pes;
    return f > now ? f : now;
}

/* Can host hi take VM vi within the headroom? */
static bool fits(const struct sim *s, const struct watt_state *w, int32_t hi, int32_t vi)
{
    const struct host *h = &s->hosts[hi];
    const struct vm *v = &s->vms[vi];
    if (v->req / v->pes > h->type->mips_per_core || v->mips > h->type->mips_per_core)
        return false;
    if (w->load[hi] + w->fc[vi] > h->cap * w->p.pack)
        return false;
    if (w->now[hi] + v->req > h->cap * w->p.pack)
        return false;
    double ram = (s->opt->hard_ram || !v->born) ? v->ram_mb : 0;
    return h->ram_used + ram <= h->type->ram_mb;
}

static bool host_usable(const struct sim *s, int32_t hi)
{
    return s->compat || s->hosts[hi].power == HOST_ON;
}

/* Best fit: the fullest host that takes the VM, the most efficient type
 * first; then an empty running host; then (compat: free and instant) an
 * empty host of the most efficient type. SKIP: a host not to use. */
static int32_t pick_host(struct sim *s, struct watt_state *w, int32_t vi, int32_t skip)
{
    int32_t best = -1, empty = -1;
    double best_eff = INFINITY, best_load = -1, empty_eff = INFINITY;

    for (size_t i = 0; i < s->n_hosts; i++) {
        int32_t hi = (int32_t)i;
        const struct host *h = &s->hosts[hi];
        if (hi == skip || w->draining[hi] || !fits(s, w, hi, vi))
            continue;
        double eff = w->w_per_mips[hi];
        if (h->n_vms == 0) {
            bool up = host_usable(s, hi);
            /* prefer running empties over cold ones at equal efficiency */
            double key = eff - (up ? 1e-9 : 0);
            if (key < empty_eff) {
                empty_eff = key;
                empty = hi;
            }
            continue;
        }
        if (!host_usable(s, hi))
            continue;
        if (eff < best_eff - 1e-12 || (fabs(eff - best_eff) <= 1e-12 && w->load[hi] > best_load)) {
            best_eff = eff;
            best_load = w->load[hi];
            best = hi;
        }
    }
    return best >= 0 ? best : empty;
}

static void move(struct sim *s, struct watt_state *w, int32_t vi, int32_t to)
{
    int32_t from = s->vms[vi].host;
    int r = sim_start_migration(s, vi, to);
    if (r == -EAGAIN || r < 0) {
        /* target booting: count the VM there so we do not book it twice */
        w->load[to] += w->fc[vi];
        w->now[to] += s->vms[vi].req;
        return;
    }
    w->load[from] -= w->fc[vi];
    w->now[from] -= s->vms[vi].req;
    w->load[to] += w->fc[vi];
    w->now[to] += s->vms[vi].req;
    if (w->budget)
        w->budget--;
}

static bool may_move(const struct sim *s, const struct watt_state *w, int32_t vi)
{
    const struct vm *v = &s->vms[vi];
    return v->dest < 0 && v->migrations_day < w->p.per_vm_day;
}

/* Relieve a host over the limit: move its biggest forecasts out until it
 * is back under the packing target. */
static void relieve(struct sim *s, struct watt_state *w, int32_t hi)
{
    struct host *h = &s->hosts[hi];
    while (w->load[hi] > h->cap * w->p.pack || w->now[hi] > h->cap * w->p.over) {
        int32_t pick = -1;
        for (uint32_t i = 0; i < h->n_vms; i++) {
            int32_t vi = h->vms[i];
            if (!may_move(s, w, vi) && s->vms[vi].migrations_day < 250)
                continue;
            if (s->vms[vi].dest >= 0)
                continue;
            if (pick < 0 || w->fc[vi] > w->fc[pick])
                pick = vi;
        }
        if (pick < 0)
            return;
        int32_t to = pick_host(s, w, pick, hi);
        if (to < 0)
            return;
        move(s, w, pick, to);
        if (s->vms[pick].host == hi && s->vms[pick].dest < 0)
            return; /* could not start (target booting): try next tick */
    }
}

/* Drain host hi if every VM fits elsewhere; all or nothing. */
static bool drain(struct sim *s, struct watt_state *w, int32_t hi)
{
    struct host *h = &s->hosts[hi];
    uint32_t n = h->n_vms;
    if (!n || n > w->budget)
        return false;
    int32_t vms[64], to[64];
    if (n > ARRAY_SIZE(vms))
        return false;
    for (uint32_t i = 0; i < n; i++) {
        vms[i] = h->vms[i];
        if (!may_move(s, w, vms[i]))
            return false;
    }
    w->draining[hi] = 1;
    uint32_t k = 0;
    for (; k < n; k++) {
        to[k] = pick_host(s, w, vms[k], hi);
        if (to[k] < 0 || s->hosts[to[k]].n_vms == 0)
            break; /* never drain onto an empty host: that saves nothing */
        w->load[to[k]] += w->fc[vms[k]];
        w->now[to[k]] += s->vms[vms[k]].req;
    }
    for (uint32_t i = 0; i < k; i++) {
        w->load[to[i]] -= w->fc[vms[i]];
        w->now[to[i]] -= s->vms[vms[i]].req;
    }
    if (k < n) {
        w->draining[hi] = 0;
        return false;
    }
    for (uint32_t i = 0; i < n; i++)
        move(s, w, vms[i], to[i]);
    return true;
}

static int cmp_by_key(const void *a, const void *b, void *arg)
{
    const double *key = arg;
    double x = key[*(const int32_t *)a], y = key[*(const int32_t *)b];
    if (x != y)
        return (x > y) - (x < y);
    return (*(const int32_t *)a > *(const int32_t *)b) -
           (*(const int32_t *)a < *(const int32_t *)b);
}

static void refresh(struct sim *s, struct watt_state *w)
{
    memset(w->load, 0, s->n_hosts * sizeof(double));
    memset(w->now, 0, s->n_hosts * sizeof(double));
    memset(w->draining, 0, s->n_hosts);
    for (size_t vi = 0; vi < s->n_vms; vi++) {
        struct vm *v = &s->vms[vi];
        if (v->host < 0)
            continue;
        w->fc[vi] = forecast(&w->p, v);
        int32_t at = v->dest >= 0 ? v->dest : v->host;
        w->load[at] += w->fc[vi];
        w->now[at] += v->req;
    }
}

/* Realistic mode: keep SPARE of the load as powered free capacity, boot
 * the most efficient hosts when short, switch off hosts that have stayed
 * empty for OFF_AFTER ticks while the spare margin holds without them. */
static void manage_power(struct sim *s, struct watt_state *w)
{
    double need = 0, free_cap = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        struct host *h = &s->hosts[hi];
        need += w->load[hi];
        if (h->power != HOST_OFF)
            free_cap += h->cap * w->p.pack - w->load[hi];
        if (h->power == HOST_ON && h->n_vms == 0)
            w->empty_ticks[hi]++;
        else
            w->empty_ticks[hi] = 0;
    }
    double reserve = need * w->p.spare;
    while (free_cap < reserve) {
        int32_t best = -1;
        for (size_t hi = 0; hi < s->n_hosts; hi++)
            if (s->hosts[hi].power == HOST_OFF &&
                (best < 0 || w->w_per_mips[hi] < w->w_per_mips[best]))
                best = (int32_t)hi;
        if (best < 0)
            break;
        sim_power_on(s, best);
        free_cap += s->hosts[best].cap * w->p.pack;
    }
    for (size_t i = s->n_hosts; i-- > 0;) {
        struct host *h = &s->hosts[i];
        if (h->power != HOST_ON || h->n_vms || w->empty_ticks[i] < w->p.off_after)
            continue;
        if (free_cap - h->cap * w->p.pack < reserve)
            continue;
        free_cap -= h->cap * w->p.pack;
        sim_power_off(s, (int32_t)i);
    }
}

void watt_optimize(struct sim *s)
{
    struct watt_state *w = s->policy_state;
    double day = 86400;

    if (s->now - w->day_start_s >= day) {
        w->day_start_s = s->now;
        for (size_t vi = 0; vi < s->n_vms; vi++)
            s->vms[vi].migrations_day = 0;
    }
    refresh(s, w);
    size_t alive = 0;
    for (size_t vi = 0; vi < s->n_vms; vi++)
        alive += s->vms[vi].host >= 0;
    w->budget = (unsigned)fmax(2, ceil(w->p.per_tick * (double)alive));

    /* 1. relieve overloaded hosts: these moves are not budgeted */
    unsigned saved = w->budget;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct host *h = &s->hosts[hi];
        if (h->n_vms && (w->load[hi] > h->cap * w->p.over || w->now[hi] > h->cap * w->p.over))
            relieve(s, w, (int32_t)hi);
    }
    w->budget = saved;

    /* 2. drain lightly loaded hosts, least efficient and emptiest first */
    _cleanup_free_ int32_t *order = xmalloc(s->n_hosts * sizeof(int32_t));
    _cleanup_free_ double *key = xmalloc(s->n_hosts * sizeof(double));
    size_t n = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct host *h = &s->hosts[hi];
        if (!h->n_vms || !host_usable(s, (int32_t)hi) || h->n_in || h->n_out)
            continue;
        if (w->load[hi] >= h->cap * w->p.low)
            continue;
        /* cost per unit of load freed: favour inefficient, lightly used hosts */
        key[hi] = w->load[hi] / h->cap - 10 * w->w_per_mips[hi];
        order[n++] = (int32_t)hi;
    }
    qsort_r(order, n, sizeof(int32_t), cmp_by_key, key);
    for (size_t i = 0; i < n && w->budget > 0; i++)
        drain(s, w, order[i]);

    if (!s->compat)
        manage_power(s, w);
}

int32_t watt_initial_host(struct sim *s, int32_t vi)
{
    struct watt_state *w = s->policy_state;
    /* A new VM: nothing known but its request (its full size at creation). */
    w->fc[vi] = s->vms[vi].req;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        /* at creation, only the scheduler's own limits: pack by request */
        (void)hi;
    }
    int32_t to = -1;
    double best_eff = INFINITY, best_load = -1;
    for (size_t i = 0; i < s->n_hosts; i++) {
        int32_t hi = (int32_t)i;
        const struct host *h = &s->hosts[hi];
        if (!host_suitable(s, h, &s->vms[vi]))
            continue;
        if (!s->compat && s->now > 0 && h->power == HOST_OFF)
            continue;
        double eff = w->w_per_mips[hi];
        double load = h->cap - host_available_mips(s, h);
        if (eff < best_eff - 1e-12 || (fabs(eff - best_eff) <= 1e-12 && load > best_load)) {
            best_eff = eff;
            best_load = load;
            to = hi;
        }
    }
    return to;
}
