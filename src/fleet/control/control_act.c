/* Acting on a plan: migrations in parallel (within the limits), each
 * journalled before it starts and verified after it ends; hosts switched
 * on; hosts switched off only after the safety checks pass again, on
 * facts read at that moment:
 *   - the host runs no domain (listed afresh, not taken from the tick);
 *   - its BMC answered this tick (a host whose state is unknown is never
 *     switched off, nor assumed off);
 *   - it is not the last host on (nor below min_hosts_on);
 *   - the hosts that stay on cover the forecast plus the spare. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/control/control.h"

/* One migration, run in its own thread. The thread owns its job and
 * nothing else: it reads the names and limits copied in here, calls the
 * engine (safe for that, exec.h) and the journal (its own lock), and
 * writes only its job's results. The loop's thread hands the job over
 * before pthread_create() and takes it back after pthread_join(); the
 * controller's state (the VM table, counters, last_error) is never
 * touched from a migration thread. */
struct mig_job {
    /* in */
    struct fx_vms *vms;
    struct ctl_journal *journal;
    char vm[FLEET_NAME_MAX * 2];
    const char *src_name, *dst_name; /* in the site, which no one changes */
    size_t src, dst;
    double timeout_s;
    /* out */
    int rc;
    char result[900];
};

/* Where VM runs now, after a migration: "h2", or why it is not known. */
static int32_t locate(const struct mig_job *job, unsigned *ret_copies, bool *ret_known)
{
    int32_t at = -1;
    unsigned copies = 0;
    bool known = true;
    size_t hs[2] = {job->src, job->dst};
    for (size_t i = 0; i < 2; i++) {
        struct fx_list l = {0};
        struct fleet_error err = {{0}};
        if (job->vms->list(job->vms, hs[i], &l, &err) < 0) {
            known = false;
            continue;
        }
        const struct fx_domain *d = fx_list_find(&l, job->vm);
        if (d && d->active) {
            at = (int32_t)hs[i];
            copies++;
        }
        fx_list_free(&l);
    }
    *ret_copies = copies;
    *ret_known = known;
    return at;
}

static void *migrate_one(void *arg)
{
    struct mig_job *job = arg;
    const char *src = job->src_name, *dst = job->dst_name;
    _cleanup_free_ char *word = ctl_journal_word(job->vm);
    long seq = ctl_journal_begin(job->journal, "migrate vm=%s src=%s dst=%s", word, src, dst);
    if (seq < 0) {
        job->rc = (int)seq;
        snprintf(job->result, sizeof(job->result), "not started: cannot write the journal: %s",
                 strerror((int)-seq));
        return NULL;
    }
    struct fleet_error err = {{0}};
    uint64_t t0 = now_monotonic_ns();
    job->rc = job->vms->migrate(job->vms, job->vm, job->src, job->dst, job->timeout_s, &err);
    double took = (double)(now_monotonic_ns() - t0) / 1e9;
    unsigned copies;
    bool known;
    int32_t at = locate(job, &copies, &known);
    const char *where = at < 0 ? NULL : at == (int32_t)job->dst ? dst : src;
    if (job->rc == 0 && (at != (int32_t)job->dst || copies != 1)) {
        job->rc = -EIO; /* the engine said yes, the facts say otherwise */
        snprintf(err.msg, sizeof(err.msg), "the migration returned, but the VM is not (only) on %s",
                 dst);
    }
    if (job->rc == 0)
        snprintf(job->result, sizeof(job->result), "ok in %.1f s, runs on %s", took, dst);
    else
        snprintf(job->result, sizeof(job->result), "failed after %.1f s: %s; the VM runs on %s%s",
                 took, err.msg, where ? where : "nowhere seen",
                 known ? "" : " (a host did not answer)");
    /* a failed end leaves the begin open: the next tick closes it (ctl_recover) */
    ctl_journal_end(job->journal, seq, "%s vm=%s on=%s copies=%u took=%.1f",
                    job->rc == 0 ? "ok" : "failed", word, where ? where : "-", copies, took);
    return NULL;
}

static void run_migrations(struct controller *c, struct ctl_plan *p)
{
    const struct site *site = c->site;
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        n += p->v[i].kind == CTL_MIGRATE;
    if (!n)
        return;
    _cleanup_free_ struct mig_job *jobs = xcalloc(n, sizeof(*jobs));
    _cleanup_free_ struct ctl_action **acts = xcalloc(n, sizeof(*acts));
    _cleanup_free_ pthread_t *th = xcalloc(n, sizeof(*th));
    _cleanup_free_ bool *started = xcalloc(n, sizeof(bool));
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct ctl_action *a = &p->v[i];
        if (a->kind != CTL_MIGRATE)
            continue;
        acts[k] = a;
        jobs[k] = (struct mig_job){.vms = c->vms,
                                   .journal = c->journal,
                                   .src_name = site->hosts[a->src].name,
                                   .dst_name = site->hosts[a->dst].name,
                                   .src = (size_t)a->src,
                                   .dst = (size_t)a->dst,
                                   .timeout_s = site->limits.migration_timeout_s};
        snprintf(jobs[k].vm, sizeof(jobs[k].vm), "%s", c->vm[a->vm].name);
        k++;
    }
    for (size_t i = 0; i < n; i++) {
        started[i] = pthread_create(&th[i], NULL, migrate_one, &jobs[i]) == 0;
        if (!started[i])
            migrate_one(&jobs[i]);
    }
    for (size_t i = 0; i < n; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    /* the jobs are the loop's again */
    for (size_t i = 0; i < n; i++) {
        struct ctl_action *a = acts[i];
        a->rc = jobs[i].rc;
        snprintf(a->result, sizeof(a->result), "%s", jobs[i].result);
        if (a->rc == 0) {
            c->migrations_ok++;
        } else {
            c->migrations_failed++;
            c->vm[a->vm].no_move_until_s = c->now_s + 2 * site->limits.interval_s;
        }
    }
}

/* The checks before a power-off, on facts read now. 0: safe, or -EPERM
 * with the reason in A->result. */
static int safe_to_switch_off(struct controller *c, struct ctl_action *a)
{
    const struct site *site = c->site;
    struct ctl_host *h = &c->hosts[a->host];
    const char *name = site->hosts[a->host].name;
    if (!h->bmc_ok) {
        snprintf(a->result, sizeof(a->result), "refused: the BMC of %s did not answer", name);
        return -EPERM;
    }
    /* a VM seen before and not now (its host does not answer) has a demand
     * the capacity check cannot count: no capacity goes until it is back */
    for (size_t i = 0; i < c->n_vm; i++)
        if (c->vm[i].host < 0 && c->vm[i].seen_on >= 0) {
            snprintf(a->result, sizeof(a->result),
                     "refused: vm '%s' (last on %s) is not seen this tick; no host goes off "
                     "until every VM is accounted for",
                     c->vm[i].name, site->hosts[c->vm[i].seen_on].name);
            return -EPERM;
        }
    struct fx_list l = {0};
    struct fleet_error err = {{0}};
    if (c->vms->list(c->vms, (size_t)a->host, &l, &err) < 0) {
        snprintf(a->result, sizeof(a->result), "refused: cannot list its domains now: %s", err.msg);
        return -EPERM;
    }
    const char *busy = NULL;
    for (size_t i = 0; i < l.n && !busy; i++)
        if (l.v[i].active)
            busy = l.v[i].name;
    if (busy) {
        snprintf(a->result, sizeof(a->result), "refused: %s runs domain '%s'", name, busy);
        fx_list_free(&l);
        return -EPERM;
    }
    fx_list_free(&l);
    unsigned on = 0;
    for (size_t hi = 0; hi < site->n_hosts; hi++)
        on += (int32_t)hi != a->host &&
              (c->hosts[hi].state == CTL_ON || c->hosts[hi].state == CTL_BOOTING);
    if (on == 0 || on < site->limits.min_hosts_on) {
        snprintf(a->result, sizeof(a->result), "refused: %s would leave %u host(s) on (min %u)",
                 name, on, site->limits.min_hosts_on ? site->limits.min_hosts_on : 1);
        return -EPERM;
    }
    double cap, need;
    ctl_capacity(c, a->host, &cap, &need);
    if (cap < need) {
        snprintf(a->result, sizeof(a->result),
                 "refused: without %s, %.0f MIPS on cannot cover %.0f (forecast + spare)", name,
                 cap, need);
        return -EPERM;
    }
    return 0;
}

static void power(struct controller *c, struct ctl_action *a, bool on)
{
    const struct site *site = c->site;
    const char *name = site->hosts[a->host].name;
    if (!on && (a->rc = safe_to_switch_off(c, a)) < 0) {
        c->safety_refusals++;
        return;
    }
    long seq = ctl_journal_begin(c->journal, "power_%s host=%s", on ? "on" : "off", name);
    if (seq < 0) {
        a->rc = (int)seq;
        snprintf(a->result, sizeof(a->result), "not done: cannot write the journal: %s",
                 strerror((int)-seq));
        return;
    }
    struct fleet_error err = {{0}};
    a->rc = c->power->set(c->power, (size_t)a->host, on, &err);
    struct ctl_host *h = &c->hosts[a->host];
    if (a->rc == 0) {
        h->state = on ? CTL_BOOTING : CTL_STOPPING;
        h->since_s = c->now_s;
        if (on)
            c->power_ons++;
        else
            c->power_offs++;
        snprintf(a->result, sizeof(a->result), "accepted by the BMC; %s",
                 on ? "booting" : "shutting down");
    } else {
        c->power_failed++;
        snprintf(a->result, sizeof(a->result), "failed: %s", err.msg);
    }
    ctl_journal_end(c->journal, seq, "%s host=%s", a->rc == 0 ? "accepted" : "failed", name);
}

void ctl_execute(struct controller *c, struct ctl_plan *p)
{
    /* stale copies first (control_copies.c); hosts on, so that capacity
     * is coming; then migrations; then, with the migrations' outcome
     * known, the power-offs */
    ctl_copies_execute(c, p);
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].kind == CTL_POWER_ON)
            power(c, &p->v[i], true);
    run_migrations(c, p);
    bool failed = false;
    for (size_t i = 0; i < p->n; i++)
        failed |= p->v[i].kind == CTL_MIGRATE && p->v[i].rc != 0;
    for (size_t i = 0; i < p->n; i++) {
        struct ctl_action *a = &p->v[i];
        if (a->kind != CTL_POWER_OFF)
            continue;
        if (failed) { /* the fleet is not what the plan assumed: look again first */
            a->rc = -EAGAIN;
            snprintf(a->result, sizeof(a->result), "postponed: a migration failed this tick");
            continue;
        }
        power(c, a, false);
    }
}

/* ---- what a crash left open ------------------------------------------ */

/* Where VM is active this tick: "h2", "h1,h3", or "-". */
static void vm_hosts(const struct controller *c, const char *vm, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t hi = 0; hi < c->site->n_hosts && o < size; hi++) {
        const struct fx_domain *d = fx_list_find(&c->hosts[hi].doms, vm);
        if (c->hosts[hi].hv_ok && d && d->active)
            o += (size_t)snprintf(buf + o, size - o, "%s%s", o ? "," : "", c->site->hosts[hi].name);
    }
    if (!buf[0])
        snprintf(buf, size, "-");
}

/* done: the VM runs on DST alone; failed: on SRC alone; unknown: anything
 * else (a third host, nowhere, two copies, or SRC or DST did not answer:
 * a migration the crash did not stop may still be running). */
static void recover_migration(struct controller *c, long seq, const char *word, const char *src,
                              const char *dst)
{
    char vm[FLEET_NAME_MAX * 2] = "", on[1024];
    ssize_t s = site_host_find(c->site, src), d = site_host_find(c->site, dst);
    int32_t v = ctl_journal_unword(word, vm, sizeof(vm)) == 0 ? ctl_vm_index(c, vm, false) : -1;
    const char *outcome = "unknown";
    if (v >= 0 && s >= 0 && d >= 0 && c->hosts[s].hv_ok && c->hosts[d].hv_ok &&
        c->vm[v].copies == 1)
        outcome = c->vm[v].host == d ? "done" : c->vm[v].host == s ? "failed" : "unknown";
    vm_hosts(c, vm, on, sizeof(on));
    ctl_journal_end(c->journal, seq, "recovered vm=%s on=%s copies=%u outcome=%s", word, on,
                    v >= 0 ? c->vm[v].copies : 0, outcome);
}

/* power_on done when the BMC says on, failed when it says off; power_off
 * done when it says off (still on: the soft off may be under way). */
static void recover_power(struct controller *c, long seq, bool on, const char *host)
{
    ssize_t h = site_host_find(c->site, host);
    const char *state = h >= 0 ? ctl_host_state_name(c->hosts[h].state) : "unknown";
    const char *outcome = "unknown";
    if (h >= 0 && c->hosts[h].bmc_ok && c->hosts[h].bmc != FX_POWER_UNKNOWN) {
        bool is_on = c->hosts[h].bmc == FX_POWER_ON;
        outcome = is_on == on ? "done" : on ? "failed" : "unknown";
    }
    ctl_journal_end(c->journal, seq, "recovered host=%s state=%s outcome=%s", host, state, outcome);
}

void ctl_recover(struct controller *c)
{
    /* the widths in the sscanf formats below */
    _Static_assert(FLEET_NAME_MAX == 48, "ctl_recover(): %287s and %47s follow FLEET_NAME_MAX");
    char **open_lines = NULL;
    size_t n = ctl_journal_open_actions(c->journal, &open_lines);
    for (size_t i = 0; i < n; i++) {
        long seq = strtol(open_lines[i], NULL, 10);
        char word[FLEET_NAME_MAX * 6], src[FLEET_NAME_MAX], dst[FLEET_NAME_MAX], what[8];
        if (sscanf(open_lines[i], "%*s migrate vm=%287s src=%47s dst=%47s", word, src, dst) == 3)
            recover_migration(c, seq, word, src, dst);
        else if (sscanf(open_lines[i], "%*s power_%7[onf] host=%47s", what, src) == 2 &&
                 (streq(what, "on") || streq(what, "off")))
            recover_power(c, seq, streq(what, "on"), src);
        else
            ctl_journal_end(c->journal, seq, "recovered outcome=unknown");
        free(open_lines[i]);
    }
    free(open_lines);
}
