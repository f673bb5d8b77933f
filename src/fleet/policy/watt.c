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
 * Constraints: a host in maintenance is evacuated and never a target;
 * a VM pinned to a host goes nowhere else (and back there when it can);
 * VMs of one anti-affinity group never share a host.
 *
 * A pure function of the view (model/view.h) and the tunables (params.c,
 * docs/fleet.md): watt_plan() changes nothing but its own scratch memory
 * and the plan it returns. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/policy/policy.h"

#define NBUCKETS 1024 /* load buckets over 0..100 % of a host */

struct watt_planner {
    struct fleet_watt_params p;
    uint32_t *top_m; /* [window + 1]: of N samples, the forecast is the top_m[N]-th largest */
    /* this call's view and plan */
    const struct fleet_view *v;
    struct fleet_plan *out;
    size_t cap_hosts, cap_vms, cap_types;
    /* per VM: the plan's copy of what it changes */
    double *fc;     /* forecast MIPS */
    int32_t *dest;  /* migrating to */
    uint32_t *mday; /* migrations begun in the last day */
    /* per host */
    double *load; /* sum of forecasts of VMs on it (incl. incoming) */
    double *now;  /* sum of current requests */
    double *ram;  /* RAM used */
    double *hcap; /* MIPS */
    uint32_t *n_in, *n_out;
    uint8_t *power; /* enum fleet_power */
    uint8_t *draining;
    uint8_t *is_active; /* hosts with VMs (or VMs booked) this round */
    double *w_per_mips; /* watts per MIPS at full load (efficiency) */
    uint32_t *n_list;   /* VMs listed: the view's, and those this plan sends */
    int32_t **add;      /* VMs this plan sends to it, after the view's list */
    uint32_t *add_n, *add_cap;
    int32_t *empty; /* hosts not active, best first: efficient, running, by id */
    size_t n_empty;
    size_t *class_start; /* scratch for ordering them: [2 x n_types + 1] */
    int32_t *order;      /* drain candidates */
    double *key;
    /* host types by watts per MIPS at full load */
    const struct fleet_host_type **type_order;
    size_t n_types;
    uint32_t *type_rank; /* per host: rank of its type */
    /* running hosts with VMs, bucketed by type rank and load, so a best
     * fit costs a bucket scan rather than a pass over the fleet */
    int32_t **bucket; /* [n_types * NBUCKETS] arrays of host ids */
    uint32_t *bucket_n, *bucket_cap;
    int32_t *host_bucket; /* per host: its bucket, -1 none */
    uint32_t *host_pos;   /* per host: index in its bucket */
    unsigned budget;
    double no_room_fc; /* this round: the smallest forecast a drain could not place */
    /* running totals for the plan's figures: forecast load over all
     * hosts, powered capacity at the packing target */
    double sum_load, sum_cap;
    /* the host types the per-host tables were made for */
    const struct fleet_host_type **type_of;
    const struct fleet_host_type *types_of; /* the view's types array */
    size_t n_types_of;
};

/* The (k+1)-th smallest of N samples at the QUANTILE: k = ceil(q N) - 1. */
static size_t quantile_index(double quantile, size_t n)
{
    size_t k = (size_t)ceil(quantile * (double)n) - 1;
    return k >= n ? n - 1 : k;
}

struct watt_planner *watt_planner_new(const struct fleet_watt_params *p)
{
    struct watt_planner *w = xcalloc(1, sizeof(*w));
    w->p = *p;
    size_t window = (size_t)p->window;
    w->top_m = xcalloc(window + 1, sizeof(uint32_t));
    for (size_t n = 1; n <= window; n++)
        w->top_m[n] = (uint32_t)(n - quantile_index(p->quantile, n));
    return w;
}

const struct fleet_watt_params *watt_planner_params(const struct watt_planner *w)
{
    return &w->p;
}

static void free_buckets(struct watt_planner *w)
{
    for (size_t b = 0; b < w->cap_types * NBUCKETS; b++)
        free(w->bucket[b]);
    free(w->bucket);
    free(w->bucket_n);
    free(w->bucket_cap);
}

void watt_planner_free(struct watt_planner *w)
{
    if (!w)
        return;
    free(w->top_m);
    free(w->fc);
    free(w->dest);
    free(w->mday);
    free(w->load);
    free(w->now);
    free(w->ram);
    free(w->hcap);
    free(w->n_in);
    free(w->n_out);
    free(w->power);
    free(w->draining);
    free(w->is_active);
    free(w->w_per_mips);
    for (size_t hi = 0; hi < w->cap_hosts; hi++)
        free(w->add[hi]);
    free(w->add);
    free(w->n_list);
    free(w->add_n);
    free(w->add_cap);
    free(w->empty);
    free(w->class_start);
    free(w->order);
    free(w->key);
    free(w->type_order);
    free(w->type_rank);
    free(w->type_of);
    free(w->host_bucket);
    free(w->host_pos);
    free_buckets(w);
    free(w);
}

#define REALLOC(p, n) ((p) = xrealloc((p), ((n) ? (n) : 1) * sizeof(*(p))))

/* Size the scratch for VIEW (it only grows) and reset it. */
static void prepare(struct watt_planner *w, const struct fleet_view *v)
{
    if (v->n_vms > w->cap_vms) {
        w->cap_vms = v->n_vms;
        REALLOC(w->fc, w->cap_vms);
        REALLOC(w->dest, w->cap_vms);
        REALLOC(w->mday, w->cap_vms);
    }
    if (v->n_hosts > w->cap_hosts) {
        size_t old = w->cap_hosts;
        w->cap_hosts = v->n_hosts;
        REALLOC(w->load, w->cap_hosts);
        REALLOC(w->now, w->cap_hosts);
        REALLOC(w->ram, w->cap_hosts);
        REALLOC(w->hcap, w->cap_hosts);
        REALLOC(w->n_in, w->cap_hosts);
        REALLOC(w->n_out, w->cap_hosts);
        REALLOC(w->power, w->cap_hosts);
        REALLOC(w->draining, w->cap_hosts);
        REALLOC(w->is_active, w->cap_hosts);
        REALLOC(w->w_per_mips, w->cap_hosts);
        REALLOC(w->add, w->cap_hosts);
        REALLOC(w->n_list, w->cap_hosts);
        REALLOC(w->add_n, w->cap_hosts);
        REALLOC(w->add_cap, w->cap_hosts);
        for (size_t hi = old; hi < w->cap_hosts; hi++) {
            w->add[hi] = NULL;
            w->add_cap[hi] = 0;
        }
        REALLOC(w->empty, w->cap_hosts);
        REALLOC(w->order, w->cap_hosts);
        REALLOC(w->key, w->cap_hosts);
        REALLOC(w->type_rank, w->cap_hosts);
        REALLOC(w->type_of, w->cap_hosts);
        for (size_t hi = old; hi < w->cap_hosts; hi++)
            w->type_of[hi] = NULL;
        REALLOC(w->host_bucket, w->cap_hosts);
        REALLOC(w->host_pos, w->cap_hosts);
    }
    if (v->n_types > w->cap_types) {
        free_buckets(w);
        w->cap_types = v->n_types;
        w->bucket = xcalloc(w->cap_types * NBUCKETS, sizeof(*w->bucket));
        w->bucket_n = xcalloc(w->cap_types * NBUCKETS, sizeof(uint32_t));
        w->bucket_cap = xcalloc(w->cap_types * NBUCKETS, sizeof(uint32_t));
        REALLOC(w->type_order, w->cap_types);
        REALLOC(w->class_start, 2 * w->cap_types + 1);
    }
    memset(w->bucket_n, 0, w->cap_types * NBUCKETS * sizeof(uint32_t));

    /* types by efficiency (insertion sort, stable) and the per-host tables
     * that follow from a host's type: made again only where a type changed */
    bool same_types = v->types == w->types_of && v->n_types == w->n_types_of;
    if (!same_types) {
        w->n_types = 0;
        for (size_t i = 0; i < v->n_types; i++) {
            const struct fleet_host_type *t = &v->types[i];
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
        w->types_of = v->types;
        w->n_types_of = v->n_types;
    }
    for (size_t hi = 0; hi < v->n_hosts; hi++) {
        const struct fleet_view_host *h = &v->hosts[hi];
        if (!same_types || h->type != w->type_of[hi]) {
            w->type_of[hi] = h->type;
            w->type_rank[hi] = 0;
            for (size_t k = 0; k < w->n_types; k++)
                if (h->type == w->type_order[k])
                    w->type_rank[hi] = (uint32_t)k;
            w->hcap[hi] = fleet_host_type_mips(h->type);
            w->w_per_mips[hi] = h->type->power_w[FLEET_POWER_POINTS - 1] / w->hcap[hi];
        }
        w->ram[hi] = h->ram_used_mb;
        w->n_in[hi] = h->n_in;
        w->n_out[hi] = h->n_out;
        w->power[hi] = (uint8_t)h->power;
        w->add_n[hi] = 0;
        w->n_list[hi] = h->n_vms;
        w->host_bucket[hi] = -1;
    }
    for (size_t vi = 0; vi < v->n_vms; vi++) {
        w->dest[vi] = v->vms[vi].dest;
        w->mday[vi] = v->vms[vi].migrations_day;
    }
}

/* The forecast from the M-th largest of the VM's last N samples, at least
 * its demand now; N = 0: its demand now. */
static inline double forecast_top(const struct fleet_view_vm *v, size_t n, size_t m)
{
    double top[64];
    double now = v->req;
    if (n == 0)
        return now;
    /* the (k+1)-th smallest is the m-th largest: keep the m largest, in
     * decreasing order (m is 1 or 2 for the usual quantiles) */
    if (m > ARRAY_SIZE(top)) { /* a low quantile of a long window: sort a copy */
        _cleanup_free_ double *all = xmalloc(n * sizeof(double));
        memcpy(all, v->hist, n * sizeof(double));
        for (size_t i = 1; i < n; i++) /* insertion sort, decreasing */
            for (size_t j = i; j > 0 && all[j - 1] < all[j]; j--) {
                double t = all[j];
                all[j] = all[j - 1];
                all[j - 1] = t;
            }
        double f = all[m - 1] * v->mips * v->pes;
        return f > now ? f : now;
    }
    if (m <= 2) { /* the max, or the second largest (a 0.9 quantile of 12) */
        double t1 = -INFINITY, t2 = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            double x = v->hist[i];
            if (x > t1) {
                t2 = t1;
                t1 = x;
            } else if (x > t2) {
                t2 = x;
            }
        }
        double f = (m == 1 ? t1 : t2) * v->mips * v->pes;
        return f > now ? f : now;
    }
    size_t have = 0;
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

static inline double forecast(const struct watt_planner *w, const struct fleet_view_vm *v)
{
    size_t n = v->hist_n < (size_t)w->p.window ? v->hist_n : (size_t)w->p.window;
    return forecast_top(v, n, w->top_m[n]);
}

double watt_forecast(const struct fleet_watt_params *p, const struct fleet_view_vm *v)
{
    size_t n = v->hist_n < (size_t)p->window ? v->hist_n : (size_t)p->window;
    return forecast_top(v, n, n ? n - quantile_index(p->quantile, n) : 0);
}

/* ---- the hosts' VM lists: the view's, then what this plan sends ------- */

static uint32_t host_n(const struct watt_planner *w, int32_t hi)
{
    return w->n_list[hi];
}

static int32_t host_vm(const struct watt_planner *w, int32_t hi, uint32_t i)
{
    uint32_t n = w->v->hosts[hi].n_vms;
    return i < n ? w->v->hosts[hi].vms[i] : w->add[hi][i - n];
}

static void host_append(struct watt_planner *w, int32_t hi, int32_t vi)
{
    if (w->add_n[hi] == w->add_cap[hi]) {
        w->add_cap[hi] = w->add_cap[hi] ? 2 * w->add_cap[hi] : 4;
        w->add[hi] = xrealloc(w->add[hi], w->add_cap[hi] * sizeof(int32_t));
    }
    w->add[hi][w->add_n[hi]++] = vi;
    w->n_list[hi]++;
}

static bool host_lists(const struct watt_planner *w, int32_t hi, int32_t vi)
{
    for (uint32_t i = 0, n = host_n(w, hi); i < n; i++)
        if (host_vm(w, hi, i) == vi)
            return true;
    return false;
}

/* Another VM of VI's anti-affinity group is listed on host HI. */
static bool group_clash(const struct watt_planner *w, int32_t hi, int32_t vi)
{
    int32_t g = w->v->vms[vi].group;
    if (g < 0)
        return false;
    for (uint32_t i = 0, n = host_n(w, hi); i < n; i++) {
        int32_t x = host_vm(w, hi, i);
        if (x != vi && w->v->vms[x].group == g)
            return true;
    }
    return false;
}

/* Can host hi take VM vi within the headroom and the constraints? */
static bool fits(const struct watt_planner *w, int32_t hi, int32_t vi)
{
    const struct fleet_view_host *h = &w->v->hosts[hi];
    const struct fleet_view_vm *v = &w->v->vms[vi];
    if (v->req / v->pes > h->type->mips_per_core || v->mips > h->type->mips_per_core)
        return false;
    if (w->load[hi] + w->fc[vi] > w->hcap[hi] * w->p.pack)
        return false;
    if (w->now[hi] + v->req > w->hcap[hi] * w->p.pack)
        return false;
    double ram = w->v->hard_ram ? v->ram_mb : 0;
    if (!(w->ram[hi] + ram <= h->type->ram_mb))
        return false;
    if (!w->v->constrained)
        return true;
    if (h->maintenance || (v->pin >= 0 && v->pin != hi))
        return false;
    return !group_clash(w, hi, vi);
}

static bool host_usable(const struct watt_planner *w, int32_t hi)
{
    return w->power[hi] == FLEET_ON;
}

/* An empty host a VM may be sent to: on, or off and ours to switch on. */
static bool may_fill(const struct watt_planner *w, int32_t hi)
{
    if (w->v->constrained && w->v->hosts[hi].maintenance)
        return false;
    return w->power[hi] == FLEET_ON || w->power[hi] == FLEET_BOOTING ||
           (w->power[hi] == FLEET_OFF && w->v->manage_power);
}

/* Best fit: among running hosts with VMs, the most efficient type, then
 * the fullest that takes the VM; else the first empty host in the order
 * refresh() sorted them (most efficient, running before cold). SKIP: a
 * host not to use. */
static int32_t pick_host(const struct watt_planner *w, int32_t vi, int32_t skip, bool allow_empty)
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
                if (hi == skip || w->draining[hi] || !host_usable(w, hi) || !fits(w, hi, vi))
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
        if (hi == skip || w->is_active[hi] || host_n(w, hi) || !may_fill(w, hi))
            continue;
        if (fits(w, hi, vi))
            return hi;
    }
    return -1;
}

/* ---- the load index ---------------------------------------------------- */

static int32_t bucket_of(const struct watt_planner *w, int32_t hi)
{
    double f = w->load[hi] / w->hcap[hi];
    long b = (long)(f * NBUCKETS);
    b = b < 0 ? 0 : (b >= NBUCKETS ? NBUCKETS - 1 : b);
    return (int32_t)(w->type_rank[hi] * NBUCKETS + (uint32_t)b);
}

static void index_remove(struct watt_planner *w, int32_t hi)
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

static void index_put(struct watt_planner *w, int32_t hi)
{
    int32_t b = bucket_of(w, hi);
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
static void add_load(struct watt_planner *w, int32_t hi, double fc, double req)
{
    w->sum_load += fc;
    w->load[hi] += fc;
    w->now[hi] += req;
    if (w->is_active[hi])
        index_put(w, hi);
}

static void activate(struct watt_planner *w, int32_t hi)
{
    if (w->is_active[hi])
        return;
    w->is_active[hi] = 1;
    index_put(w, hi);
}

/* ---- actions ----------------------------------------------------------- */

/* The fleet's forecast need (load plus spare) and powered capacity at the
 * packing target, as the plan stands (running sums: refresh() starts
 * them, add_load() and power() keep them). */
static bool counts_capacity(const struct watt_planner *w, int32_t hi)
{
    return (w->power[hi] == FLEET_ON || w->power[hi] == FLEET_BOOTING) &&
           !(w->v->constrained && w->v->hosts[hi].maintenance);
}

static void totals(const struct watt_planner *w, double *need, double *cap)
{
    *need = w->sum_load * (1 + w->p.spare);
    *cap = w->sum_cap;
}

static void power(struct watt_planner *w, int32_t hi, bool on, enum fleet_reason why)
{
    if (counts_capacity(w, hi))
        w->sum_cap -= w->hcap[hi] * w->p.pack;
    w->power[hi] = on ? FLEET_BOOTING : FLEET_OFF;
    if (counts_capacity(w, hi))
        w->sum_cap += w->hcap[hi] * w->p.pack;
    struct fleet_action *a =
        fleet_plan_add(w->out, on ? FLEET_ACT_POWER_ON : FLEET_ACT_POWER_OFF, why);
    a->host = hi;
    totals(w, &a->load_mips, &a->cap_mips);
}

/* Start moving VI to TO, as the simulator and the controller will: the
 * target must be on (an off one is switched on, and the VM moves at a
 * later decision) and within the concurrent migration limit. */
static int start_migration(struct watt_planner *w, int32_t vi, int32_t to, enum fleet_reason why)
{
    const struct fleet_view_vm *v = &w->v->vms[vi];
    int32_t from = v->host;
    if (from < 0 || from == to)
        return -EINVAL;
    if (w->power[to] != FLEET_ON) {
        if (w->power[to] == FLEET_OFF && w->v->manage_power)
            power(w, to, true, FLEET_WHY_TARGET);
        return -EAGAIN;
    }
    uint32_t lim = w->v->max_migrations_per_host;
    if (lim && (w->n_in[to] + w->n_out[to] >= lim || w->n_in[from] + w->n_out[from] >= lim))
        return -EBUSY;
    if (host_lists(w, to, vi))
        return -EALREADY;
    struct fleet_action *a = fleet_plan_add(w->out, FLEET_ACT_MIGRATE, why);
    a->vm = vi;
    a->src = from;
    a->dst = to;
    a->vm_mips = w->fc[vi];
    a->load_mips = w->load[from];
    a->cap_mips = w->hcap[from];
    w->dest[vi] = to;
    host_append(w, to, vi);
    w->n_in[to]++;
    w->n_out[from]++;
    if (w->v->hard_ram)
        w->ram[to] += v->ram_mb;
    w->mday[vi]++;
    return 0;
}

static bool move(struct watt_planner *w, int32_t vi, int32_t to, enum fleet_reason why)
{
    int32_t from = w->v->vms[vi].host;
    double fc = w->fc[vi], req = w->v->vms[vi].req;
    activate(w, to);
    if (start_migration(w, vi, to, why) < 0) {
        /* target booting (or busy): book the VM there so that it is not
         * booked twice; it moves at a later decision */
        add_load(w, to, fc, req);
        return false;
    }
    add_load(w, from, -fc, -req);
    add_load(w, to, fc, req);
    if (w->budget)
        w->budget--;
    return true;
}

/* A VM the policy may move of its own accord. */
static bool may_move(const struct watt_planner *w, int32_t vi)
{
    if (w->dest[vi] >= 0 || !(w->mday[vi] < w->p.per_vm_day))
        return false;
    const struct fleet_view_vm *v = &w->v->vms[vi];
    return !w->v->constrained || (!v->fixed && v->pin < 0);
}

/* ---- the steps of a round ---------------------------------------------- */

/* Relieve a host over the limit: move its biggest forecasts out until it
 * is back under the packing target. */
static void relieve(struct watt_planner *w, int32_t hi)
{
    while (w->load[hi] > w->hcap[hi] * w->p.pack || w->now[hi] > w->hcap[hi] * w->p.over) {
        int32_t pick = -1;
        for (uint32_t i = 0, n = host_n(w, hi); i < n; i++) {
            int32_t vi = host_vm(w, hi, i);
            if (!may_move(w, vi)) /* in flight, or out of moves today */
                continue;
            if (pick < 0 || w->fc[vi] > w->fc[pick])
                pick = vi;
        }
        if (pick < 0)
            return;
        int32_t to = pick_host(w, pick, hi, true);
        if (to < 0)
            return;
        if (!move(w, pick, to, FLEET_WHY_OVERLOAD))
            return; /* could not start (target booting): try next time */
    }
}

/* Drain host hi if every VM fits elsewhere; all or nothing. */
static bool drain(struct watt_planner *w, int32_t hi)
{
    uint32_t n = host_n(w, hi);
    if (!n || n > w->budget)
        return false;
    int32_t vms[64], to[64];
    if (n > ARRAY_SIZE(vms))
        return false;
    for (uint32_t i = 0; i < n; i++) {
        vms[i] = host_vm(w, hi, i);
        if (!may_move(w, vms[i]))
            return false;
    }
    w->draining[hi] = 1;
    uint32_t k = 0;
    for (; k < n; k++) {
        /* Loads only grow during a round: a VM no smaller than one that
         * found no room will find none either. Never drain onto an empty
         * host: that saves nothing. */
        to[k] = w->fc[vms[k]] >= w->no_room_fc ? -1 : pick_host(w, vms[k], hi, false);
        if (to[k] < 0) {
            w->no_room_fc = fmin(w->no_room_fc, w->fc[vms[k]]);
            break;
        }
        if (host_n(w, to[k]) == 0)
            break; /* a host only booked, still booting */
        add_load(w, to[k], w->fc[vms[k]], w->v->vms[vms[k]].req);
    }
    for (uint32_t i = 0; i < k; i++)
        add_load(w, to[i], -w->fc[vms[i]], -w->v->vms[vms[i]].req);
    if (k < n) {
        w->draining[hi] = 0;
        return false;
    }
    for (uint32_t i = 0; i < n; i++)
        move(w, vms[i], to[i], FLEET_WHY_DRAIN);
    return true;
}

/* What the operator asked for comes first: evacuate hosts in maintenance,
 * bring pinned VMs home, split anti-affinity groups. Not budgeted. */
static void constrain(struct watt_planner *w)
{
    const struct fleet_view *v = w->v;
    for (size_t vi = 0; vi < v->n_vms; vi++) {
        const struct fleet_view_vm *m = &v->vms[vi];
        int32_t at = m->host, vid = (int32_t)vi;
        if (at < 0 || w->dest[vi] >= 0 || m->fixed)
            continue;
        if (m->pin >= 0 && m->pin != at) {
            if ((size_t)m->pin < v->n_hosts && host_usable(w, m->pin) && fits(w, m->pin, vid))
                move(w, vid, m->pin, FLEET_WHY_PIN);
            continue;
        }
        if (m->pin >= 0)
            continue; /* home; a pinned VM stays even on a host in maintenance */
        enum fleet_reason why;
        if (v->hosts[at].maintenance)
            why = FLEET_WHY_MAINTENANCE;
        else if (m->group >= 0 && group_clash(w, at, vid)) {
            /* the first of the group listed on the host stays */
            bool first = true;
            for (uint32_t i = 0, n = host_n(w, at); i < n; i++) {
                int32_t x = host_vm(w, at, i);
                if (x == vid)
                    break;
                if (v->vms[x].group == m->group)
                    first = false;
            }
            if (first)
                continue;
            why = FLEET_WHY_AFFINITY;
        } else
            continue;
        int32_t to = pick_host(w, vid, at, true);
        if (to >= 0)
            move(w, vid, to, why);
    }
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
static size_t empty_class(const struct watt_planner *w, int32_t hi)
{
    return 2 * w->type_rank[hi] + (host_usable(w, hi) ? 0 : 1);
}

static void refresh(struct watt_planner *w)
{
    const struct fleet_view *v = w->v;
    memset(w->load, 0, v->n_hosts * sizeof(double));
    memset(w->now, 0, v->n_hosts * sizeof(double));
    memset(w->draining, 0, v->n_hosts);
    w->no_room_fc = INFINITY;
    for (size_t vi = 0; vi < v->n_vms; vi++) {
        const struct fleet_view_vm *m = &v->vms[vi];
        if (m->host < 0)
            continue;
        w->fc[vi] = forecast(w, m);
        int32_t at = m->dest >= 0 ? m->dest : m->host;
        w->load[at] += w->fc[vi];
        w->now[at] += m->req;
    }
    w->sum_load = w->sum_cap = 0;
    for (size_t hi = 0; hi < v->n_hosts; hi++) {
        w->sum_load += w->load[hi];
        if (counts_capacity(w, (int32_t)hi))
            w->sum_cap += w->hcap[hi] * w->p.pack;
        w->is_active[hi] = v->hosts[hi].n_vms || w->load[hi] > 0;
        if (w->is_active[hi])
            index_put(w, (int32_t)hi);
    }
    /* empty hosts: most efficient type first, running before cold, by id:
     * count each class, then place every host in one more pass */
    size_t nc = 2 * w->n_types;
    memset(w->class_start, 0, (nc + 1) * sizeof(size_t));
    for (size_t hi = 0; hi < v->n_hosts; hi++)
        if (!w->is_active[hi])
            w->class_start[empty_class(w, (int32_t)hi) + 1]++;
    for (size_t c = 0; c < nc; c++)
        w->class_start[c + 1] += w->class_start[c];
    for (size_t hi = 0; hi < v->n_hosts; hi++)
        if (!w->is_active[hi])
            w->empty[w->class_start[empty_class(w, (int32_t)hi)]++] = (int32_t)hi;
    w->n_empty = w->class_start[nc - 1];
}

/* Keep SPARE of the load as powered free capacity, boot the most efficient
 * hosts when short, switch off hosts that have stayed empty for OFF_AFTER
 * decisions while the spare margin holds without them. */
static void manage_power(struct watt_planner *w)
{
    const struct fleet_view *v = w->v;
    double need = 0, free_cap = 0;
    _cleanup_free_ uint32_t *empty_ticks = xcalloc(v->n_hosts ? v->n_hosts : 1, sizeof(uint32_t));
    for (size_t hi = 0; hi < v->n_hosts; hi++) {
        need += w->load[hi];
        bool up = w->power[hi] == FLEET_ON || w->power[hi] == FLEET_BOOTING;
        if (up && !v->hosts[hi].maintenance)
            free_cap += w->hcap[hi] * w->p.pack - w->load[hi];
        if (w->power[hi] == FLEET_ON && host_n(w, (int32_t)hi) == 0 && !v->hosts[hi].busy)
            empty_ticks[hi] = v->hosts[hi].empty_ticks + 1;
    }
    double reserve = need * w->p.spare;
    /* boot the most efficient cold hosts: refresh() listed the empty hosts
     * by efficiency, the cold ones of a type after its running ones */
    for (size_t i = 0; i < w->n_empty && free_cap < reserve; i++) {
        int32_t hi = w->empty[i];
        if (w->power[hi] != FLEET_OFF || v->hosts[hi].maintenance)
            continue;
        power(w, hi, true, FLEET_WHY_SPARE);
        free_cap += w->hcap[hi] * w->p.pack;
    }
    for (size_t i = v->n_hosts; i-- > 0;) {
        if (w->power[i] != FLEET_ON || host_n(w, (int32_t)i) || v->hosts[i].maintenance ||
            empty_ticks[i] < w->p.off_after)
            continue;
        if (free_cap - w->hcap[i] * w->p.pack < reserve)
            continue;
        free_cap -= w->hcap[i] * w->p.pack;
        power(w, (int32_t)i, false, FLEET_WHY_IDLE);
    }
}

void watt_plan(struct watt_planner *w, const struct fleet_view *v, struct fleet_plan *ret)
{
    w->v = v;
    w->out = ret;
    prepare(w, v);
    refresh(w);
    size_t alive = 0;
    for (size_t vi = 0; vi < v->n_vms; vi++)
        alive += v->vms[vi].host >= 0;
    w->budget = (unsigned)fmax(2, ceil(w->p.per_tick * (double)alive));

    /* 0. maintenance, pins, anti-affinity; 1. relieve overloaded hosts:
     * these moves are not budgeted */
    unsigned saved = w->budget;
    if (v->constrained)
        constrain(w);
    for (size_t hi = 0; hi < v->n_hosts; hi++) {
        if (host_n(w, (int32_t)hi) &&
            (w->load[hi] > w->hcap[hi] * w->p.over || w->now[hi] > w->hcap[hi] * w->p.over))
            relieve(w, (int32_t)hi);
    }
    w->budget = saved;

    ret->observing = !v->warm;
    if (v->warm) {
        /* 2. drain lightly loaded hosts, least efficient and emptiest first */
        size_t n = 0;
        for (size_t hi = 0; hi < v->n_hosts; hi++) {
            if (!host_n(w, (int32_t)hi) || !host_usable(w, (int32_t)hi) || w->n_in[hi] ||
                w->n_out[hi] || v->hosts[hi].maintenance || v->hosts[hi].busy)
                continue;
            if (w->load[hi] >= w->hcap[hi] * w->p.low)
                continue;
            /* cost per unit of load freed: favour inefficient, lightly used hosts */
            w->key[hi] = w->load[hi] / w->hcap[hi] - 10 * w->w_per_mips[hi];
            w->order[n++] = (int32_t)hi;
        }
        qsort_r(w->order, n, sizeof(int32_t), cmp_by_key, w->key);
        for (size_t i = 0; i < n && w->budget > 0; i++)
            drain(w, w->order[i]);

        if (v->manage_power)
            manage_power(w);
    }
    totals(w, &ret->need_mips, &ret->cap_mips);
    w->v = NULL;
    w->out = NULL;
}
