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
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/sim/sim.h"

#define NBUCKETS 1024 /* load buckets over 0..100 % of a host */

struct watt_state {
    struct fleet_watt_params p;
    double *fc;   /* per VM: forecast MIPS */
    double *load; /* per host: sum of forecasts of VMs on it (incl. incoming) */
    double *now;  /* per host: sum of current requests */
    uint32_t *empty_ticks;
    uint8_t *draining;
    int type_rank_n;
    double *w_per_mips;  /* per host: watts per MIPS at full load (efficiency) */
    uint8_t *is_active;  /* hosts with VMs (or VMs booked) this tick */
    int32_t *empty;      /* the others, best first: efficient, running, by id */
    size_t *class_start; /* scratch for ordering them: [2 x n_types + 1] */
    size_t n_empty;
    const struct fleet_host_type **type_order; /* by watts per MIPS at full load */
    size_t n_types;
    /* running hosts with VMs, bucketed by type rank and load, so a best
     * fit costs a bucket scan rather than a pass over the fleet */
    int32_t **bucket; /* [n_types * NBUCKETS] arrays of host ids */
    uint32_t *bucket_n, *bucket_cap;
    int32_t *host_bucket; /* per host: its bucket, -1 none */
    uint32_t *host_pos;   /* per host: index in its bucket */
    uint32_t *type_rank;  /* per host: rank of its type by efficiency */
    int32_t *fill_order;  /* all hosts, most efficient type first, for t = 0 */
    size_t *fill_pos;     /* per VM type: hosts before it are full for that type */
    unsigned budget;
    double no_room_fc; /* this round: the smallest forecast a drain could not place */
    double day_start_s;
};

static const struct {
    const char *key;
    size_t off;
    double lo, hi;
    bool lo_open, whole;
} tunables[] = {
    {"pack", offsetof(struct fleet_watt_params, pack), 0, 1, true, false},
    {"over", offsetof(struct fleet_watt_params, over), 0, 2, true, false},
    {"low", offsetof(struct fleet_watt_params, low), 0, 1, false, false},
    {"quantile", offsetof(struct fleet_watt_params, quantile), 0, 1, true, false},
    {"window", offsetof(struct fleet_watt_params, window), 1, 1000, false, true},
    {"per_vm_day", offsetof(struct fleet_watt_params, per_vm_day), 0, 1000, false, false},
    {"per_tick", offsetof(struct fleet_watt_params, per_tick), 0, 1, false, false},
    {"spare", offsetof(struct fleet_watt_params, spare), 0, 10, false, false},
    {"off_after", offsetof(struct fleet_watt_params, off_after), 0, 1e6, false, false},
};

static char *trim(char *s)
{
    s += strspn(s, " \t");
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* One "KEY=VALUE" into P. */
static int parse_tunable(char *tok, struct fleet_watt_params *p, struct fleet_error *err)
{
    char *eq = strchr(tok, '=');
    if (!eq) {
        fleet_error_set(err, "'%.40s': want KEY=VALUE", trim(tok));
        return -EINVAL;
    }
    *eq = '\0';
    const char *key = trim(tok), *val = trim(eq + 1);
    for (size_t i = 0; i < ARRAY_SIZE(tunables); i++) {
        if (!streq(key, tunables[i].key))
            continue;
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (val[strspn(val, "0123456789.eE+-")] || end == val || *end || errno || !isfinite(v) ||
            v < tunables[i].lo || v > tunables[i].hi ||
            (tunables[i].lo_open && v <= tunables[i].lo) || (tunables[i].whole && v != floor(v))) {
            fleet_error_set(err, "%s = '%.40s': want a%s number in %c%g, %g]", key, val,
                            tunables[i].whole ? " whole" : "", tunables[i].lo_open ? '(' : '[',
                            tunables[i].lo, tunables[i].hi);
            return -EINVAL;
        }
        *(double *)((char *)p + tunables[i].off) = v;
        return 0;
    }
    fleet_error_set(err,
                    "unknown tunable '%.40s' (pack, over, low, quantile, window, per_vm_day, "
                    "per_tick, spare, off_after)",
                    key);
    return -EINVAL;
}

int fleet_watt_params_parse(const char *text, struct fleet_watt_params *ret,
                            struct fleet_error *err)
{
    struct fleet_watt_params p = {
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
    _cleanup_free_ char *copy = xstrdup(text ? text : "");
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!*trim(tok))
            continue;
        int r = parse_tunable(tok, &p, err);
        if (r < 0)
            return r;
    }
    *ret = p;
    return 0;
}

int watt_policy_init(struct sim *s, struct fleet_error *err)
{
    struct watt_state *w = xcalloc(1, sizeof(*w));
    struct fleet_error perr;
    if (fleet_watt_params_parse(s->opt->watt_params, &w->p, &perr) < 0) {
        fleet_error_set(err, "watt policy tunables '%.100s': %.300s", s->opt->watt_params,
                        perr.msg);
        free(w);
        return -EINVAL;
    }
    w->fc = xcalloc(s->n_vms, sizeof(double));
    w->load = xcalloc(s->n_hosts, sizeof(double));
    w->now = xcalloc(s->n_hosts, sizeof(double));
    w->empty_ticks = xcalloc(s->n_hosts, sizeof(uint32_t));
    w->draining = xcalloc(s->n_hosts, 1);
    w->w_per_mips = xcalloc(s->n_hosts, sizeof(double));
    w->is_active = xcalloc(s->n_hosts, 1);
    w->host_bucket = xmalloc(s->n_hosts * sizeof(int32_t));
    w->host_pos = xcalloc(s->n_hosts, sizeof(uint32_t));
    w->type_rank = xcalloc(s->n_hosts, sizeof(uint32_t));
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        w->host_bucket[hi] = -1;
    w->empty = xcalloc(s->n_hosts, sizeof(int32_t));
    size_t nt = s->sc->hosts->n_types;
    w->type_order = xcalloc(nt, sizeof(*w->type_order));
    for (size_t i = 0; i < nt; i++) { /* insertion sort by efficiency, stable */
        const struct fleet_host_type *t = &s->types[i];
        double e = t->power_w[FLEET_POWER_POINTS - 1] / fleet_host_type_mips(t);
        size_t j = w->n_types++;
        while (j > 0 && w->type_order[j - 1]->power_w[FLEET_POWER_POINTS - 1] /
                                fleet_host_type_mips(w->type_order[j - 1]) >
                            e) {
            w->type_order[j] = w->type_order[j - 1];
            j--;
        }
        w->type_order[j] = t;
    }
    w->bucket = xcalloc(w->n_types * NBUCKETS, sizeof(*w->bucket));
    w->bucket_n = xcalloc(w->n_types * NBUCKETS, sizeof(uint32_t));
    w->bucket_cap = xcalloc(w->n_types * NBUCKETS, sizeof(uint32_t));
    for (size_t k = 0; k < w->n_types; k++)
        for (size_t hi = 0; hi < s->n_hosts; hi++)
            if (s->hosts[hi].type == w->type_order[k])
                w->type_rank[hi] = (uint32_t)k;
    w->class_start = xcalloc(2 * w->n_types + 1, sizeof(size_t));
    w->fill_order = xcalloc(s->n_hosts, sizeof(int32_t));
    size_t o = 0;
    for (size_t k = 0; k < w->n_types; k++)
        for (size_t hi = 0; hi < s->n_hosts; hi++)
            if (s->hosts[hi].type == w->type_order[k])
                w->fill_order[o++] = (int32_t)hi;
    w->fill_pos = xcalloc(s->sc->n_vm_types, sizeof(size_t));
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
    for (size_t b = 0; b < w->n_types * NBUCKETS; b++)
        free(w->bucket[b]);
    free(w->bucket);
    free(w->bucket_n);
    free(w->bucket_cap);
    free(w->host_bucket);
    free(w->host_pos);
    free(w->type_rank);
    free(w->is_active);
    free(w->empty);
    free(w->type_order);
    free(w->fill_order);
    free(w->class_start);
    free(w->fill_pos);
    free(w);
    s->policy_state = NULL;
}

/* Forecast: the QUANTILE of the last WINDOW samples, at least the demand
 * now. Without history (a new VM), its request now. */
static double forecast(const struct fleet_watt_params *p, const struct sim_vm *v)
{
    double top[VM_HISTORY];
    size_t n = v->hist_n < (size_t)p->window ? v->hist_n : (size_t)p->window;
    double now = v->req;
    if (n == 0)
        return now;
    size_t k = (size_t)ceil(p->quantile * (double)n) - 1;
    if (k >= n)
        k = n - 1;
    /* the (k+1)-th smallest is the m-th largest: keep the m largest, in
     * decreasing order (m is 1 or 2 for the usual quantiles) */
    size_t m = n - k, have = 0;
    for (size_t i = 0; i < n; i++) {
        double x = v->hist[i];
        if (have == m && x <= top[m - 1])
            continue;
        size_t j = have < m ? have++ : m - 1;
        while (j > 0 && top[j - 1] < x) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = x;
    }
    double f = top[m - 1] * v->mips * v->pes;
    return f > now ? f : now;
}

/* Can host hi take VM vi within the headroom? */
static bool fits(const struct sim *s, const struct watt_state *w, int32_t hi, int32_t vi)
{
    const struct sim_host *h = &s->hosts[hi];
    const struct sim_vm *v = &s->vms[vi];
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
    return s->compat || s->hosts[hi].power == SIM_ON;
}

/* Best fit: the fullest host that takes the VM, the most efficient type
 * first; then an empty running host; then (compat: free and instant) an
 * empty host of the most efficient type. SKIP: a host not to use. */
/* Best fit: among running hosts with VMs, the most efficient type, then
 * the fullest that takes the VM; else the first empty host in the order
 * refresh() sorted them (most efficient, running before cold; compat: an
 * empty host is free and instant). SKIP: a host not to use. */
static int32_t pick_host(struct sim *s, struct watt_state *w, int32_t vi, int32_t skip,
                         bool allow_empty)
{
    for (size_t k = 0; k < w->n_types; k++) {
        double cap = fleet_host_type_mips(w->type_order[k]);
        long top = (long)((cap * w->p.pack - w->fc[vi]) / cap * NBUCKETS);
        if (top >= NBUCKETS)
            top = NBUCKETS - 1;
        for (long b = top; b >= 0; b--) {
            int32_t bi = (int32_t)(k * NBUCKETS + (size_t)b), best = -1;
            for (uint32_t i = 0; i < w->bucket_n[bi]; i++) {
                int32_t hi = w->bucket[bi][i];
                if (hi == skip || w->draining[hi] || !host_usable(s, hi) || !fits(s, w, hi, vi))
                    continue;
                if (best < 0 || w->load[hi] > w->load[best] ||
                    (w->load[hi] == w->load[best] && hi < best))
                    best = hi;
            }
            if (best >= 0)
                return best;
        }
    }
    for (size_t i = 0; allow_empty && i < w->n_empty; i++) {
        int32_t hi = w->empty[i];
        if (hi == skip || w->is_active[hi] || s->hosts[hi].n_vms)
            continue;
        if (fits(s, w, hi, vi))
            return hi;
    }
    return -1;
}

static int32_t bucket_of(const struct sim *s, const struct watt_state *w, int32_t hi)
{
    double f = w->load[hi] / s->hosts[hi].cap;
    long b = (long)(f * NBUCKETS);
    b = b < 0 ? 0 : (b >= NBUCKETS ? NBUCKETS - 1 : b);
    return (int32_t)(w->type_rank[hi] * NBUCKETS + (uint32_t)b);
}

static void index_remove(struct watt_state *w, int32_t hi)
{
    int32_t b = w->host_bucket[hi];
    if (b < 0)
        return;
    uint32_t pos = w->host_pos[hi], last = --w->bucket_n[b];
    int32_t moved = w->bucket[b][last];
    w->bucket[b][pos] = moved;
    w->host_pos[moved] = pos;
    w->host_bucket[hi] = -1;
}

static void index_put(const struct sim *s, struct watt_state *w, int32_t hi)
{
    int32_t b = bucket_of(s, w, hi);
    if (w->host_bucket[hi] == b)
        return;
    index_remove(w, hi);
    if (w->bucket_n[b] == w->bucket_cap[b]) {
        w->bucket_cap[b] = w->bucket_cap[b] ? 2 * w->bucket_cap[b] : 16;
        w->bucket[b] = xrealloc(w->bucket[b], w->bucket_cap[b] * sizeof(int32_t));
    }
    w->host_pos[hi] = w->bucket_n[b];
    w->bucket[b][w->bucket_n[b]++] = hi;
    w->host_bucket[hi] = b;
}

/* Change a host's booked forecast load (and current demand), keeping the
 * index in step. */
static void add_load(const struct sim *s, struct watt_state *w, int32_t hi, double fc, double req)
{
    w->load[hi] += fc;
    w->now[hi] += req;
    if (w->is_active[hi])
        index_put(s, w, hi);
}

static void activate(const struct sim *s, struct watt_state *w, int32_t hi)
{
    if (w->is_active[hi])
        return;
    w->is_active[hi] = 1;
    index_put(s, w, hi);
}

static void move(struct sim *s, struct watt_state *w, int32_t vi, int32_t to)
{
    int32_t from = s->vms[vi].host;
    double fc = w->fc[vi], req = s->vms[vi].req;
    activate(s, w, to);
    int r = sim_start_migration(s, vi, to);
    if (r < 0) {
        /* target booting (or busy): book the VM there so that it is not
         * booked twice; it moves at a later tick */
        add_load(s, w, to, fc, req);
        return;
    }
    add_load(s, w, from, -fc, -req);
    add_load(s, w, to, fc, req);
    if (w->budget)
        w->budget--;
}

static bool may_move(const struct sim *s, const struct watt_state *w, int32_t vi)
{
    const struct sim_vm *v = &s->vms[vi];
    return v->dest < 0 && v->migrations_day < w->p.per_vm_day;
}

/* Relieve a host over the limit: move its biggest forecasts out until it
 * is back under the packing target. */
static void relieve(struct sim *s, struct watt_state *w, int32_t hi)
{
    struct sim_host *h = &s->hosts[hi];
    while (w->load[hi] > h->cap * w->p.pack || w->now[hi] > h->cap * w->p.over) {
        int32_t pick = -1;
        for (uint32_t i = 0; i < h->n_vms; i++) {
            int32_t vi = h->vms[i];
            if (!may_move(s, w, vi)) /* in flight, or out of moves today */
                continue;
            if (pick < 0 || w->fc[vi] > w->fc[pick])
                pick = vi;
        }
        if (pick < 0)
            return;
        int32_t to = pick_host(s, w, pick, hi, true);
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
    struct sim_host *h = &s->hosts[hi];
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
        /* Loads only grow during a round: a VM no smaller than one that
         * found no room will find none either. Never drain onto an empty
         * host: that saves nothing. */
        to[k] = w->fc[vms[k]] >= w->no_room_fc ? -1 : pick_host(s, w, vms[k], hi, false);
        if (to[k] < 0) {
            w->no_room_fc = fmin(w->no_room_fc, w->fc[vms[k]]);
            break;
        }
        if (s->hosts[to[k]].n_vms == 0)
            break; /* a host only booked, still booting */
        add_load(s, w, to[k], w->fc[vms[k]], s->vms[vms[k]].req);
    }
    for (uint32_t i = 0; i < k; i++) {
        add_load(s, w, to[i], -w->fc[vms[i]], -s->vms[vms[i]].req);
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

/* The order of empty hosts: type rank by efficiency, running first. */
static size_t empty_class(const struct sim *s, const struct watt_state *w, int32_t hi)
{
    return 2 * w->type_rank[hi] + (host_usable(s, hi) ? 0 : 1);
}

static void refresh(struct sim *s, struct watt_state *w)
{
    memset(w->load, 0, s->n_hosts * sizeof(double));
    memset(w->now, 0, s->n_hosts * sizeof(double));
    memset(w->draining, 0, s->n_hosts);
    w->no_room_fc = INFINITY;
    for (size_t vi = 0; vi < s->n_vms; vi++) {
        struct sim_vm *v = &s->vms[vi];
        if (v->host < 0)
            continue;
        w->fc[vi] = forecast(&w->p, v);
        int32_t at = v->dest >= 0 ? v->dest : v->host;
        w->load[at] += w->fc[vi];
        w->now[at] += v->req;
    }
    w->n_empty = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        w->is_active[hi] = s->hosts[hi].n_vms || w->load[hi] > 0;
        if (w->is_active[hi])
            index_put(s, w, (int32_t)hi);
        else
            index_remove(w, (int32_t)hi);
    }
    /* empty hosts: most efficient type first, running before cold, by id:
     * count each class, then place every host in one more pass */
    size_t nc = 2 * w->n_types;
    memset(w->class_start, 0, (nc + 1) * sizeof(size_t));
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        if (!w->is_active[hi])
            w->class_start[empty_class(s, w, (int32_t)hi) + 1]++;
    for (size_t c = 0; c < nc; c++)
        w->class_start[c + 1] += w->class_start[c];
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        if (!w->is_active[hi])
            w->empty[w->class_start[empty_class(s, w, (int32_t)hi)]++] = (int32_t)hi;
    w->n_empty = w->class_start[nc - 1];
}

/* Realistic mode: keep SPARE of the load as powered free capacity, boot
 * the most efficient hosts when short, switch off hosts that have stayed
 * empty for OFF_AFTER ticks while the spare margin holds without them. */
static void manage_power(struct sim *s, struct watt_state *w)
{
    double need = 0, free_cap = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        struct sim_host *h = &s->hosts[hi];
        need += w->load[hi];
        if (h->power != SIM_OFF)
            free_cap += h->cap * w->p.pack - w->load[hi];
        if (h->power == SIM_ON && h->n_vms == 0)
            w->empty_ticks[hi]++;
        else
            w->empty_ticks[hi] = 0;
    }
    double reserve = need * w->p.spare;
    /* boot the most efficient cold hosts: refresh() listed the empty hosts
     * by efficiency, the cold ones of a type after its running ones */
    for (size_t i = 0; i < w->n_empty && free_cap < reserve; i++) {
        int32_t hi = w->empty[i];
        if (s->hosts[hi].power != SIM_OFF)
            continue;
        sim_power_on(s, hi);
        free_cap += s->hosts[hi].cap * w->p.pack;
    }
    for (size_t i = s->n_hosts; i-- > 0;) {
        struct sim_host *h = &s->hosts[i];
        if (h->power != SIM_ON || h->n_vms || w->empty_ticks[i] < w->p.off_after)
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
        const struct sim_host *h = &s->hosts[hi];
        if (h->n_vms && (w->load[hi] > h->cap * w->p.over || w->now[hi] > h->cap * w->p.over))
            relieve(s, w, (int32_t)hi);
    }
    w->budget = saved;

    /* 2. drain lightly loaded hosts, least efficient and emptiest first */
    _cleanup_free_ int32_t *order = xmalloc(s->n_hosts * sizeof(int32_t));
    _cleanup_free_ double *key = xmalloc(s->n_hosts * sizeof(double));
    size_t n = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct sim_host *h = &s->hosts[hi];
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

/* A new VM: nothing is known but its request (its full size at creation).
 * The first wave (t = 0, every VM at once) fills hosts in order of
 * efficiency, next fit, in O(1) per VM; a VM born later goes to the
 * fullest suitable running host of the most efficient type. */
int32_t watt_initial_host(struct sim *s, int32_t vi)
{
    struct watt_state *w = s->policy_state;
    const struct sim_vm *v = &s->vms[vi];
    w->fc[vi] = v->req;
    if (s->now == 0) {
        /* one cursor per VM type: a host that cannot take a VM of a type
         * now never will in this wave (hosts only fill up) */
        size_t *pos = &w->fill_pos[v->type - s->sc->vm_types];
        while (*pos < s->n_hosts && !sim_host_suitable(s, &s->hosts[w->fill_order[*pos]], v))
            (*pos)++;
        return *pos < s->n_hosts ? w->fill_order[*pos] : -1;
    }
    int32_t to = -1;
    double best_eff = INFINITY, best_load = -1;
    for (size_t i = 0; i < s->n_hosts; i++) {
        int32_t hi = (int32_t)i;
        const struct sim_host *h = &s->hosts[hi];
        if (!sim_host_suitable(s, h, v) || (!s->compat && h->power == SIM_OFF))
            continue;
        double eff = w->w_per_mips[hi];
        double load = h->cap - sim_host_available_mips(s, h);
        if (eff < best_eff - 1e-12 || (fabs(eff - best_eff) <= 1e-12 && load > best_load)) {
            best_eff = eff;
            best_load = load;
            to = hi;
        }
    }
    return to;
}
