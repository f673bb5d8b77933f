/* The fleet controller: its state, the observation of every host (in
 * parallel: a host that does not answer costs its timeout once, not once
 * per host behind it) and what each host's answers make of its state. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "fleet/control/control.h"
#include "fleet/policy/policy.h"

#define OBSERVE_THREADS 32

const char *ctl_host_state_name(enum ctl_host_state s)
{
    static const char *const n[] = {"on", "off", "booting", "stopping", "unreachable", "unknown"};
    return (size_t)s < ARRAY_SIZE(n) ? n[s] : "?";
}

/* VMs by name: open addressing over indices into c->vm, FNV-1a. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void index_put(struct controller *c, int32_t vi)
{
    size_t mask = c->vm_index_cap - 1, k = name_hash(c->vm[vi].name) & mask;
    while (c->vm_index[k] >= 0)
        k = (k + 1) & mask;
    c->vm_index[k] = vi;
}

static void index_grow(struct controller *c)
{
    size_t cap = c->vm_index_cap ? c->vm_index_cap * 2 : 64;
    free(c->vm_index);
    c->vm_index = xmalloc(cap * sizeof(*c->vm_index));
    for (size_t k = 0; k < cap; k++)
        c->vm_index[k] = -1;
    c->vm_index_cap = cap;
    for (size_t i = 0; i < c->n_vm; i++)
        index_put(c, (int32_t)i);
}

int32_t ctl_vm_index(struct controller *c, const char *name, bool add)
{
    if (c->vm_index_cap) {
        size_t mask = c->vm_index_cap - 1;
        for (size_t k = name_hash(name) & mask; c->vm_index[k] >= 0; k = (k + 1) & mask)
            if (streq(c->vm[c->vm_index[k]].name, name))
                return c->vm_index[k];
    }
    if (!add)
        return -1;
    if (c->n_vm == c->cap_vm)
        c->vm = grow_array(c->vm, sizeof(*c->vm), c->n_vm, &c->cap_vm);
    struct ctl_vm *v = &c->vm[c->n_vm];
    *v = (struct ctl_vm){
        .host = -1, .seen_on = -1, .prev_host = -1, .util = NAN, .pin = -1, .group = -1};
    snprintf(v->name, sizeof(v->name), "%s", name);
    const struct site_rule *rule = site_rule_find(c->site, name); /* fleet.ini's pin, group */
    if (rule) {
        v->pin = rule->pin;
        v->group = rule->group;
    }
    /* the listed VMs are all added at open (and set managed there) */
    v->managed = !c->site->vms_listed;
    int32_t vi = (int32_t)c->n_vm++;
    if (2 * c->n_vm > c->vm_index_cap)
        index_grow(c); /* puts every VM, this one included */
    else
        index_put(c, vi);
    return vi;
}

/* ---- observation ----------------------------------------------------- */

struct obs_job {
    struct controller *c;
    size_t hi;
};

/* The BMC: asked unless it is in its backoff after failures. */
static void observe_bmc(struct controller *c, size_t hi)
{
    struct ctl_host *h = &c->hosts[hi];
    struct fleet_error err = {{0}};
    h->bmc_ok = false;
    if (c->now_s < h->bmc_next_s)
        return;
    enum fx_power_state p;
    int r = c->power->status(c->power, hi, &p, &err);
    if (r < 0) {
        h->bmc_failures++;
        /* retry after 1, 2, 4 ... intervals, at most 8 */
        double back = c->site->limits.interval_s *
                      (double)(1u << (h->bmc_failures < 4 ? h->bmc_failures - 1 : 3));
        h->bmc_next_s = c->now_s + back;
        snprintf(h->err, sizeof(h->err), "%.560s (asked again in %.0f s)", err.msg, back);
        return;
    }
    h->bmc_ok = true;
    h->bmc = p;
    h->bmc_failures = 0;
    h->bmc_next_s = 0;
    h->watts = NAN;
    double w;
    if (p == FX_POWER_ON && c->power->reading(c->power, hi, &w, &err) == 0)
        h->watts = w;
}

static void *observe_host(void *arg)
{
    struct obs_job *job = arg;
    struct controller *c = job->c;
    struct ctl_host *h = &c->hosts[job->hi];
    struct fleet_error err = {{0}};
    h->err[0] = '\0';
    fx_list_free(&h->doms);
    observe_bmc(c, job->hi);
    h->hv_ok = false;
    /* a host the BMC says is off is not asked: its address may not answer
     * a connection at all, and that costs a TCP timeout */
    if (h->bmc_ok && h->bmc == FX_POWER_OFF)
        return NULL;
    int r = c->vms->list(c->vms, job->hi, &h->doms, &err);
    if (r == 0) {
        h->hv_ok = true;
        h->mem_kib = h->doms.node.mem_kib;
    } else if (!h->err[0]) {
        snprintf(h->err, sizeof(h->err), "%.600s", err.msg);
    }
    return NULL;
}

static void observe_all_hosts(struct controller *c)
{
    size_t n = c->site->n_hosts;
    _cleanup_free_ struct obs_job *jobs = xcalloc(n, sizeof(*jobs));
    _cleanup_free_ pthread_t *th = xcalloc(n, sizeof(*th));
    for (size_t base = 0; base < n; base += OBSERVE_THREADS) {
        size_t end = base + OBSERVE_THREADS < n ? base + OBSERVE_THREADS : n;
        for (size_t i = base; i < end; i++) {
            jobs[i] = (struct obs_job){c, i};
            if (pthread_create(&th[i], NULL, observe_host, &jobs[i]) != 0) {
                observe_host(&jobs[i]);
                th[i] = 0;
            }
        }
        for (size_t i = base; i < end; i++)
            if (th[i])
                pthread_join(th[i], NULL);
    }
}

static void set_state(struct controller *c, struct ctl_host *h, enum ctl_host_state s)
{
    if (h->state != s)
        h->since_s = c->now_s;
    h->state = s;
}

/* What the answers make of a host's state. Never "off" without the BMC
 * saying so; never "on" without the hypervisor answering. */
static void host_state(struct controller *c, struct ctl_host *h)
{
    const struct site_limits *l = &c->site->limits;
    double in_state = c->now_s - h->since_s;
    if (h->bmc_ok && h->bmc == FX_POWER_OFF) {
        set_state(c, h, CTL_OFF);
        return;
    }
    if (h->state == CTL_STOPPING && in_state < l->off_timeout_s)
        return; /* still shutting down: not used, even if it answers */
    if (h->hv_ok) {
        set_state(c, h, CTL_ON);
        return;
    }
    if (h->state == CTL_BOOTING && in_state < l->boot_timeout_s)
        return;
    if (h->state == CTL_STOPPING || h->state == CTL_BOOTING)
        snprintf(h->err + strlen(h->err), sizeof(h->err) - strlen(h->err), "%s%s for %.0f s",
                 h->err[0] ? "; " : "", h->state == CTL_STOPPING ? "soft off not done" : "booting",
                 in_state);
    set_state(c, h, h->bmc_ok ? CTL_UNREACHABLE : CTL_UNKNOWN);
}

/* A VM's CPU share since its last sample on the same host (a migration
 * starts a new process, whose counter starts again). */
static void vm_sample(struct ctl_vm *v, const struct fx_domain *d, uint64_t t_ns, int32_t hi,
                      double now_unix_s)
{
    v->vcpus = d->vcpus ? d->vcpus : 1;
    v->mem_mb = (double)d->mem_kib / 1024.0;
    v->seen_unix_s = now_unix_s;
    if (v->prev_host == hi && v->prev_t_ns && t_ns > v->prev_t_ns && d->cpu_ns >= v->prev_cpu_ns) {
        double u = (double)(d->cpu_ns - v->prev_cpu_ns) / (double)(t_ns - v->prev_t_ns) / v->vcpus;
        v->util = u < 0 ? 0 : (u > 1 ? 1 : u);
        ctl_history_push(v, v->util, now_unix_s);
    }
    v->prev_host = hi;
    v->prev_cpu_ns = d->cpu_ns;
    v->prev_t_ns = t_ns;
}

static void place_vms(struct controller *c)
{
    for (size_t i = 0; i < c->n_vm; i++) {
        c->vm[i].host = -1;
        c->vm[i].copies = 0;
    }
    for (size_t hi = 0; hi < c->site->n_hosts; hi++) {
        struct ctl_host *h = &c->hosts[hi];
        if (!h->hv_ok)
            continue;
        for (size_t k = 0; k < h->doms.n; k++) {
            const struct fx_domain *d = &h->doms.v[k];
            if (!d->active)
                continue;
            int32_t vi = ctl_vm_index(c, d->name, true); /* may move c->vm */
            struct ctl_vm *v = &c->vm[vi];
            v->copies++;
            v->host = (int32_t)hi;
            v->seen_on = (int32_t)hi;
            vm_sample(v, d, h->doms.t_ns, (int32_t)hi, c->now_unix_s);
        }
    }
}

static void count_migration(void *ctx, const char *vm)
{
    struct controller *c = ctx;
    int32_t vi = ctl_vm_index(c, vm, false);
    if (vi >= 0)
        c->vm[vi].migrations_day++;
}

void ctl_observe(struct controller *c)
{
    c->now_unix_s = (double)now_realtime_ns() / 1e9;
    c->observations++;
    observe_all_hosts(c);
    for (size_t hi = 0; hi < c->site->n_hosts; hi++)
        host_state(c, &c->hosts[hi]);
    place_vms(c);
    for (size_t hi = 0; hi < c->site->n_hosts; hi++) {
        struct ctl_host *h = &c->hosts[hi];
        bool empty = h->state == CTL_ON;
        for (size_t k = 0; empty && k < h->doms.n; k++)
            empty = !h->doms.v[k].active;
        h->empty_ticks = empty ? h->empty_ticks + 1 : 0;
    }
    for (size_t i = 0; i < c->n_vm; i++)
        c->vm[i].migrations_day = 0;
    if (c->journal)
        ctl_journal_migrations_since(c->journal, (double)now_realtime_ns() / 1e9 - 86400,
                                     count_migration, c);
}

/* ---- open, recover, close -------------------------------------------- */

static int take_lock(struct controller *c, struct fleet_error *err)
{
    _cleanup_free_ char *path = xasprintf("%s/lock", c->site->state_dir);
    c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (c->lock_fd < 0) {
        int e = errno;
        fleet_error_set(err, "cannot open %s: %s", path, strerror(e));
        return -e;
    }
    if (flock(c->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        fleet_error_set(err, "%s: another watt fleet run holds the lock (%s)", path,
                        e == EWOULDBLOCK ? "it is running" : strerror(e));
        return -EBUSY;
    }
    return 0;
}

int controller_open(const struct site *site, const struct ctl_options *opt, struct controller **ret,
                    struct fleet_error *err)
{
    struct fx_vms *vms = NULL;
    struct fx_power *pw = NULL;
    int r = fx_open(site, &vms, &pw, err);
    if (r < 0)
        return r;
    return controller_open_engines(site, opt, vms, pw, ret, err);
}

int controller_open_engines(const struct site *site, const struct ctl_options *opt,
                            struct fx_vms *vms, struct fx_power *power, struct controller **ret,
                            struct fleet_error *err)
{
    struct controller *c = xcalloc(1, sizeof(*c));
    c->site = site;
    c->opt = *opt;
    c->lock_fd = -1;
    c->vms = vms;
    c->power = power;
    c->hosts = xcalloc(site->n_hosts, sizeof(*c->hosts));
    for (size_t i = 0; i < site->n_hosts; i++)
        c->hosts[i] = (struct ctl_host){.state = CTL_UNKNOWN, .watts = NAN};
    for (size_t i = 0; i < site->n_vms; i++) {
        int32_t vi = ctl_vm_index(c, site->vms[i].name, true); /* may move c->vm */
        c->vm[vi].managed = true;
    }
    int r = 0;
    if (!opt->dry_run) {
        r = ctl_journal_mkdir(site->state_dir, err);
        if (r == 0)
            r = take_lock(c, err);
        if (r == 0)
            r = ctl_journal_open(site->state_dir, false, &c->journal, err);
    } else {
        /* a dry run reads the journal (migrations per VM per day) if there is one */
        _cleanup_free_ char *path = xasprintf("%s/journal", site->state_dir);
        struct fleet_error ignored = {{0}};
        if (access(path, R_OK) == 0 &&
            ctl_journal_open(site->state_dir, true, &c->journal, &ignored) < 0)
            c->journal = NULL;
    }
    if (r < 0) {
        controller_close(c);
        return r;
    }
    /* the CPU samples of before a restart; refused: a cold start, said in
     * the plan's notes while the controller observes */
    struct fleet_error herr = {{0}};
    if (ctl_history_load(c, (double)now_realtime_ns() / 1e9, &herr) < 0)
        snprintf(c->history_error, sizeof(c->history_error), "%.500s; starting cold", herr.msg);
    /* what a crash left open is closed with what the fleet shows now:
     * nothing is done again blindly; the next plan starts from the facts */
    if (!opt->dry_run && ctl_journal_n_open(c->journal) > 0) {
        ctl_observe(c);
        ctl_recover(c);
    }
    *ret = c;
    return 0;
}

void controller_close(struct controller *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->hosts && i < c->site->n_hosts; i++)
        fx_list_free(&c->hosts[i].doms);
    free(c->hosts);
    free(c->vm);
    free(c->vm_index);
    watt_planner_free(c->planner);
    ctl_operator_free(c);
    if (c->vms)
        c->vms->close(c->vms);
    if (c->power)
        c->power->close(c->power);
    ctl_journal_close(c->journal);
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    free(c);
}
