/* CloudSim 3.0.3's dynamic consolidation (PowerVmAllocationPolicyMigration*
 * and PowerVmSelectionPolicy*), decision for decision:
 *
 *   1. every host is tested by the overload detector (THR, IQR, MAD, LR, LRR);
 *   2. from each overloaded host, VMs are picked by the selection policy
 *      (MMT, MC, MU, RS) until it is no longer overloaded;
 *   3. they are placed by power-aware best-fit decreasing (PABFD);
 *   4. then, least-utilised host first, every other host is drained if all
 *      its VMs fit elsewhere (there is no underload threshold).
 *
 * The round works on tentative VM lists (plan_save/plan_restore) and on
 * each host's utilisation as of the last update, as CloudSim does: a host
 * that was idle at the last update takes VMs without an overload test, and
 * the power estimate ignores VMs placed earlier in the same round. Those
 * are CloudSim's rules, kept here on purpose (see docs/fleet.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/model/stats.h"
#include "fleet/sim/sim.h"

#define FALLBACK_THR 0.7 /* CloudSim's fallback when history is short */
#define IQR_MAD_MIN  12  /* history values IQR and MAD need */
#define LR_LENGTH    10  /* values LR fits */

/* The detectors test a host's current VM list plus, when EXTRA >= 0, one
 * more VM appended to it (isHostOverUtilizedAfterAllocation), summing in
 * list order as CloudSim does. */
static bool thr_test(const struct sim *s, const struct sim_host *h, int32_t extra, double threshold)
{
    double req = sim_host_requested_mips(s, h);
    if (extra >= 0)
        req += s->vms[extra].req;
    return req / h->cap > threshold;
}

/* The host's utilisation history: the histories of the VMs on it now,
 * weighted by their MIPS, most recent first, trailing zeros trimmed. */
static size_t sim_host_history(const struct sim *s, const struct sim_host *h, int32_t extra,
                               double *out)
{
    sim_host_sums(s, h); /* c_mig_s for LR */
    memcpy(out, sim_host_history_sum(s, h), VM_HISTORY * sizeof(double));
    if (extra >= 0) {
        const struct sim_vm *v = &s->vms[extra];
        for (uint8_t k = 0; k < v->hist_n; k++)
            out[k] += v->hist[k] * v->mips / h->cap;
    }
    return stats_trim_zero_tail(out, VM_HISTORY);
}

static bool lr_test(const struct sim *s, const struct sim_host *h, int32_t extra)
{
    double hist[VM_HISTORY], y[LR_LENGTH], a, b;
    size_t n = sim_host_history(s, h, extra, hist);
    int r;

    if (n < LR_LENGTH)
        return thr_test(s, h, extra, FALLBACK_THR);
    for (size_t i = 0; i < LR_LENGTH; i++)
        y[i] = hist[LR_LENGTH - 1 - i]; /* oldest first */
    if (s->compat || s->pol->detector == FLEET_LR) {
        /* CloudSim >= 3.0.3 ignores LR's tricube weights (commons-math
         * applies them only when 40 % are <= 0): plain least squares. */
        double w[LR_LENGTH];
        stats_tricube_weights(w, LR_LENGTH);
        r = stats_linear_fit(y, s->compat ? NULL : w, LR_LENGTH, &a, &b);
    } else {
        r = stats_robust_fit(y, LR_LENGTH, &a, &b);
    }
    if (r < 0)
        return thr_test(s, h, extra, FALLBACK_THR);
    double max_mig_s = h->c_mig_s; /* filled by sim_host_history() */
    if (extra >= 0) {
        double t = s->vms[extra].ram_mb / (h->type->bw_mbit / 16.0);
        if (t > max_mig_s)
            max_mig_s = t;
    }
    double intervals = ceil(max_mig_s / s->opt->interval_s);
    double predicted = (a + b * (LR_LENGTH + intervals)) * s->pol->param;
    return predicted >= 1;
}

static bool sim_host_overloaded_with(const struct sim *s, const struct sim_host *h, int32_t extra)
{
    double hist[VM_HISTORY];
    size_t n;

    switch (s->pol->detector) {
    case FLEET_THR:
        return thr_test(s, h, extra, s->pol->param);
    case FLEET_IQR:
        n = sim_host_history(s, h, extra, hist);
        if (n < IQR_MAD_MIN)
            return thr_test(s, h, extra, FALLBACK_THR);
        return thr_test(s, h, extra, 1 - s->pol->param * stats_iqr(hist, n));
    case FLEET_MAD:
        n = sim_host_history(s, h, extra, hist);
        if (n < IQR_MAD_MIN)
            return thr_test(s, h, extra, FALLBACK_THR);
        return thr_test(s, h, extra, 1 - s->pol->param * stats_mad(hist, n));
    case FLEET_LR:
    case FLEET_LRR:
    default:
        return lr_test(s, h, extra);
    }
}

static bool sim_host_overloaded(const struct sim *s, const struct sim_host *h)
{
    return sim_host_overloaded_with(s, h, -1);
}

/* ---- selection --------------------------------------------------------- */

static int32_t select_mmt(const struct sim *s, const struct sim_host *h)
{
    int32_t best = -1;
    double min_ram = INFINITY;
    for (uint32_t i = 0; i < h->n_vms; i++) {
        const struct sim_vm *v = &s->vms[h->vms[i]];
        if (v->migrating)
            continue;
        if (v->ram_mb < min_ram) {
            min_ram = v->ram_mb;
            best = h->vms[i];
        }
    }
    return best;
}

static int32_t select_mu(const struct sim *s, const struct sim_host *h)
{
    int32_t best = -1;
    double min_u = INFINITY;
    for (uint32_t i = 0; i < h->n_vms; i++) {
        const struct sim_vm *v = &s->vms[h->vms[i]];
        if (v->migrating)
            continue;
        double u = v->req / v->mips;
        if (u < min_u) {
            min_u = u;
            best = h->vms[i];
        }
    }
    return best;
}

static int32_t select_rs(struct sim *s, const struct sim_host *h)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->n_vms; i++)
        n += s->vms[h->vms[i]].migrating == false;
    if (!n)
        return -1;
    uint32_t pick = (uint32_t)(sim_random(s) % n);
    for (uint32_t i = 0; i < h->n_vms; i++)
        if (s->vms[h->vms[i]].migrating == false && pick-- == 0)
            return h->vms[i];
    return -1;
}

/* MC: the VM whose history is best explained by the others' (highest R^2
 * of a multiple regression); MMT when that cannot be fitted. */
static int32_t select_mc(const struct sim *s, const struct sim_host *h)
{
    int32_t ids[64];
    uint32_t n = 0;
    size_t m = VM_HISTORY;

    for (uint32_t i = 0; i < h->n_vms && n < ARRAY_SIZE(ids); i++) {
        const struct sim_vm *v = &s->vms[h->vms[i]];
        if (v->migrating)
            continue;
        ids[n++] = h->vms[i];
        if (v->hist_n < m)
            m = v->hist_n;
    }
    if (n < 2 || m <= n)
        return select_mmt(s, h);
    _cleanup_free_ double *data = xmalloc(n * m * sizeof(double));
    for (uint32_t i = 0; i < n; i++)
        memcpy(data + i * m, s->vms[ids[i]].hist, m * sizeof(double));
    int32_t best = -1;
    double best_r2 = 0;
    for (uint32_t i = 0; i < n; i++) {
        double r2;
        if (stats_r_squared_others(data, n, m, i, &r2) < 0)
            return select_mmt(s, h);
        if (r2 > best_r2) {
            best_r2 = r2;
            best = ids[i];
        }
    }
    return best >= 0 ? best : select_mmt(s, h);
}

static int32_t select_vm(struct sim *s, const struct sim_host *h)
{
    switch (s->pol->selection) {
    case FLEET_MC:
        return select_mc(s, h);
    case FLEET_MU:
        return select_mu(s, h);
    case FLEET_RS:
        return select_rs(s, h);
    case FLEET_MMT:
    default:
        return select_mmt(s, h);
    }
}

/* ---- PABFD --------------------------------------------------------------- */

static void tentative_add(struct sim *s, struct sim_host *h, int32_t vi)
{
    int32_t hi = (int32_t)(h - s->hosts);
    if (s->in_round && !s->is_live[hi]) {
        s->is_live[hi] = 1;
        s->live[s->n_live++] = hi;
    }
    sim_host_add_vm(h, vi);
    if (s->opt->hard_ram || !s->vms[vi].born)
        h->ram_used += s->vms[vi].ram_mb;
}

static void tentative_remove(struct sim *s, struct sim_host *h, int32_t vi)
{
    sim_host_remove_vm(h, vi);
    if (s->opt->hard_ram || !s->vms[vi].born)
        h->ram_used -= s->vms[vi].ram_mb;
}

/* Would host h be overloaded with VM vi on it too? (CloudSim creates the VM
 * there, tests and destroys it; appending it to the sums is the same.) */
static bool overloaded_after(struct sim *s, struct sim_host *h, int32_t vi)
{
    return sim_host_overloaded_with(s, h, vi);
}

/* The host whose power would rise least by taking VM vi: its power at the
 * MIPS allocated now (this round's tentative VMs included) plus the VM's,
 * against its power at the last update; EXCLUDED marks
 * hosts not to consider (NULL: none). Ties go to the first host. */
static bool cand_less(const struct pabfd_cand *a, const struct pabfd_cand *b)
{
    return a->diff < b->diff || (a->diff == b->diff && a->host < b->host);
}

static void cand_sift(struct pabfd_cand *c, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && cand_less(&c[l], &c[m]))
            m = l;
        if (r < n && cand_less(&c[r], &c[m]))
            m = r;
        if (m == i)
            return;
        struct pabfd_cand t = c[i];
        c[i] = c[m];
        c[m] = t;
        i = m;
    }
}

/* Add host hi to the candidates if it can take VM v (suitable, CloudSim's
 * power model defined at the new load). */
static void pabfd_consider(struct sim *s, int32_t hi, const struct sim_vm *v, size_t *n)
{
    const struct sim_host *h = &s->hosts[hi];
    if (!sim_host_suitable(s, h, v))
        return;
    double pu = (sim_host_allocated_mips(s, h, true) + v->req) / h->cap;
    if (pu > 1)
        return; /* CloudSim's power model refuses > 100 % */
    s->cand[*n].diff = fleet_host_type_power(h->type, pu) - h->util_power_w;
    s->cand[(*n)++].host = hi;
}

static bool idle_host(const struct sim_host *h)
{
    return !h->n_vms && h->util_mips == 0;
}

/* The candidates during a round: the live hosts, and for each type the
 * idle host with the lowest id (every idle host of a type offers the same
 * increase, and ties go to the lowest id). */
static size_t pabfd_candidates_round(struct sim *s, const struct sim_vm *v, const uint8_t *excluded)
{
    size_t n = 0, nt = s->sc->hosts->n_types;
    s->stamp++;
    for (uint32_t i = 0; i < s->n_live; i++) {
        int32_t hi = s->live[i];
        const struct sim_host *h = &s->hosts[hi];
        if (excluded && excluded[hi])
            continue;
        if (idle_host(h)) {
            uint32_t t = (uint32_t)(h->type - s->types);
            if (s->type_stamp[t] != s->stamp || hi < s->type_idle[t]) {
                s->type_stamp[t] = s->stamp;
                s->type_idle[t] = hi;
            }
            continue;
        }
        pabfd_consider(s, hi, v, &n);
    }
    for (size_t t = 0; t < nt; t++) {
        while (s->idle_pos[t] < s->idle_n[t] &&
               !idle_host(&s->hosts[s->idle_by_type[t][s->idle_pos[t]]]))
            s->idle_pos[t]++; /* took a VM this round: it is live now */
        if (s->idle_pos[t] < s->idle_n[t]) {
            int32_t hi = s->idle_by_type[t][s->idle_pos[t]];
            if (!(excluded && excluded[hi]) &&
                (s->type_stamp[t] != s->stamp || hi < s->type_idle[t])) {
                s->type_stamp[t] = s->stamp;
                s->type_idle[t] = hi;
            }
        }
        if (s->type_stamp[t] == s->stamp)
            pabfd_consider(s, s->type_idle[t], v, &n);
    }
    return n;
}

/* Outside a round (creation at t = 0): every host, idle ones deduplicated
 * per type in id order. */
static size_t pabfd_candidates_all(struct sim *s, const struct sim_vm *v, const uint8_t *excluded)
{
    size_t n = 0;
    s->stamp++;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct sim_host *h = &s->hosts[hi];
        if (excluded && excluded[hi])
            continue;
        if (idle_host(h)) {
            uint32_t t = (uint32_t)(h->type - s->types);
            if (s->type_stamp[t] == s->stamp)
                continue;
            s->type_stamp[t] = s->stamp;
        }
        pabfd_consider(s, (int32_t)hi, v, &n);
    }
    return n;
}

/* The host whose power would rise least by taking VM vi: its power at the
 * MIPS allocated now (this round's tentative VMs included) plus the VM's,
 * against its power at the last update; EXCLUDED marks hosts not to
 * consider (NULL: none). Ties go to the first host.
 *
 * First the increase of every candidate; then the overload test (the
 * costly part) in increasing order of increase, lowest id first on ties,
 * until a host passes: the same choice as CloudSim's single pass, with far
 * fewer tests. */
static int32_t pabfd_host(struct sim *s, int32_t vi, const uint8_t *excluded)
{
    const struct sim_vm *v = &s->vms[vi];
    size_t n =
        s->in_round ? pabfd_candidates_round(s, v, excluded) : pabfd_candidates_all(s, v, excluded);

    /* a binary min-heap on (increase, id): O(n) to build, O(log n) a pop */
    for (size_t i = n / 2; i-- > 0;)
        cand_sift(s->cand, n, i);
    while (n > 0) {
        struct pabfd_cand c = s->cand[0];
        struct sim_host *h = &s->hosts[c.host];
        if (h->util_mips == 0 || !overloaded_after(s, h, vi))
            return c.host;
        s->cand[0] = s->cand[--n];
        cand_sift(s->cand, n, 0);
    }
    return -1;
}

static int32_t first_fit_host(struct sim *s, int32_t vi)
{
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        if (sim_host_suitable(s, &s->hosts[hi], &s->vms[vi]))
            return (int32_t)hi;
    return -1;
}

int32_t cloudsim_initial_host(struct sim *s, int32_t vi)
{
    if (s->pol->alloc == FLEET_MIGRATE)
        return pabfd_host(s, vi, NULL);
    return first_fit_host(s, vi);
}

/* ---- the round ----------------------------------------------------------- */

struct plan {
    int32_t *vm, *host;
    size_t n, cap;
};

static void plan_push(struct plan *p, int32_t vm, int32_t host)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->vm = xrealloc(p->vm, p->cap * sizeof(*p->vm));
        p->host = xrealloc(p->host, p->cap * sizeof(*p->host));
    }
    p->vm[p->n] = vm;
    p->host[p->n++] = host;
}

static int cmp_req_desc(const void *a, const void *b, void *arg)
{
    const struct sim *s = arg;
    double x = s->vms[*(const int32_t *)a].req, y = s->vms[*(const int32_t *)b].req;
    return (x < y) - (x > y);
}

/* Stable sort by requested MIPS, decreasing (Java's Collections.sort). */
static void sort_by_req(struct sim *s, int32_t *vms, size_t n)
{
    for (size_t i = 1; i < n; i++) { /* insertion sort: lists are short and it is stable */
        int32_t x = vms[i];
        size_t j = i;
        while (j > 0 && cmp_req_desc(&vms[j - 1], &x, s) > 0) {
            vms[j] = vms[j - 1];
            j--;
        }
        vms[j] = x;
    }
}

/* Place VMS with PABFD; ALL: all or nothing (draining an underloaded host).
 * Returns how many entries were added to PLAN, or -1 if ALL failed. */
static long place(struct sim *s, int32_t *vms, size_t n, const uint8_t *excluded, bool all,
                  struct plan *plan)
{
    size_t start = plan->n;
    sort_by_req(s, vms, n);
    for (size_t i = 0; i < n; i++) {
        int32_t hi = pabfd_host(s, vms[i], excluded);
        if (hi < 0) {
            if (!all)
                continue;
            for (size_t k = start; k < plan->n; k++)
                tentative_remove(s, &s->hosts[plan->host[k]], plan->vm[k]);
            plan->n = start;
            return -1;
        }
        tentative_add(s, &s->hosts[hi], vms[i]);
        plan_push(plan, vms[i], hi);
    }
    return (long)(plan->n - start);
}

static bool all_out_or_any_in(const struct sim *s, int32_t hi)
{
    const struct sim_host *h = &s->hosts[hi];
    for (uint32_t i = 0; i < h->n_vms; i++) {
        const struct sim_vm *v = &s->vms[h->vms[i]];
        if (!v->migrating)
            return false;
        if (v->host != hi)
            return true;
    }
    return true;
}

static double sim_host_util(const struct sim_host *h)
{
    double u = h->util_mips / h->cap;
    return (u > 1 && u < 1.01) ? 1 : u;
}

static void drain_underloaded(struct sim *s, uint8_t *ex_under, uint8_t *ex_place, size_t n_under,
                              struct plan *plan)
{
    _cleanup_free_ int32_t *vms = NULL;
    size_t cap = 0;

    while (n_under < s->n_hosts) {
        int32_t u = -1;
        double min_u = 1;
        for (size_t hi = 0; hi < s->n_hosts; hi++) {
            if (ex_under[hi])
                continue;
            double x = sim_host_util(&s->hosts[hi]);
            if (x > 0 && x < min_u && !all_out_or_any_in(s, (int32_t)hi)) {
                min_u = x;
                u = (int32_t)hi;
            }
        }
        if (u < 0)
            break;
        ex_under[u] = ex_place[u] = 1;
        n_under++;
        const struct sim_host *h = &s->hosts[u];
        if (h->n_vms > cap) {
            cap = h->n_vms;
            vms = xrealloc(vms, cap * sizeof(*vms));
        }
        size_t n = 0;
        for (uint32_t i = 0; i < h->n_vms; i++)
            if (s->vms[h->vms[i]].migrating == false)
                vms[n++] = h->vms[i];
        if (!n)
            continue;
        size_t before = plan->n;
        if (place(s, vms, n, ex_place, true, plan) < 0)
            continue;
        for (size_t k = before; k < plan->n; k++)
            if (!ex_under[plan->host[k]]) {
                ex_under[plan->host[k]] = 1;
                n_under++;
            }
    }
}

/* Sort the hosts into live ones (VMs or load) and, per type, idle ones. */
static void round_begin(struct sim *s)
{
    size_t nt = s->sc->hosts->n_types;
    s->n_live = 0;
    for (size_t t = 0; t < nt; t++)
        s->idle_n[t] = s->idle_pos[t] = 0;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct sim_host *h = &s->hosts[hi];
        s->is_live[hi] = !idle_host(h);
        if (s->is_live[hi]) {
            s->live[s->n_live++] = (int32_t)hi;
        } else {
            uint32_t t = (uint32_t)(h->type - s->types);
            s->idle_by_type[t][s->idle_n[t]++] = (int32_t)hi;
        }
    }
    s->in_round = true;
}

void cloudsim_optimize(struct sim *s)
{
    _cleanup_free_ uint8_t *over = xcalloc(s->n_hosts, 1);
    _cleanup_free_ uint8_t *ex_under = xcalloc(s->n_hosts, 1);
    _cleanup_free_ uint8_t *ex_place = xcalloc(s->n_hosts, 1);
    _cleanup_free_ int32_t *to_move = NULL;
    size_t n_move = 0, cap_move = 0, n_under = 0;
    struct plan plan = {0};

    for (size_t hi = 0; hi < s->n_hosts; hi++)
        over[hi] = sim_host_overloaded(s, &s->hosts[hi]);
    round_begin(s);
    plan_save(s);
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        if (!over[hi])
            continue;
        struct sim_host *h = &s->hosts[hi];
        for (;;) {
            int32_t vi = select_vm(s, h);
            if (vi < 0)
                break;
            if (n_move == cap_move)
                to_move = grow_array(to_move, sizeof(*to_move), n_move, &cap_move);
            to_move[n_move++] = vi;
            tentative_remove(s, h, vi);
            if (!sim_host_overloaded(s, h))
                break;
        }
    }
    place(s, to_move, n_move, over, false, &plan);
    /* The underload phase excludes overloaded and switched-off hosts;
     * CloudSim means to exclude this round's targets too but passes an
     * empty list, so they may be drained (kept). */
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        bool off = sim_host_util(&s->hosts[hi]) == 0;
        if (over[hi] || off) {
            ex_under[hi] = ex_place[hi] = 1;
            n_under++;
        }
    }
    drain_underloaded(s, ex_under, ex_place, n_under, &plan);
    s->in_round = false;
    plan_restore(s);
    for (size_t i = 0; i < plan.n; i++)
        sim_start_migration(s, plan.vm[i], plan.host[i]);
    free(plan.vm);
    free(plan.host);
}
