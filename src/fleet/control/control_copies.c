/* destroy_stale_copy: a VM active on two hosts at once (a migration that
 * failed half-way: the destination's copy, or the source's, left paused).
 * The controller never moves such a VM; with `destroy_stale_copy = yes`
 * in fleet.ini it also plans to destroy the paused copy, and only when
 * the facts leave no doubt which copy is the VM:
 *   - exactly one copy runs, on a host that is on and whose hypervisor
 *     answered this tick (its twin);
 *   - every other copy is paused (active, not running);
 * and before acting it lists both hosts again and asks the engine to
 * destroy the copy only if it is still paused. Journalled like the other
 * actions ("begin destroy_copy vm=W host=H twin=T"). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "fleet/control/control.h"

static struct ctl_action *add(struct ctl_plan *p)
{
    if (p->n == p->cap)
        p->v = grow_array(p->v, sizeof(*p->v), p->n, &p->cap);
    struct ctl_action *a = &p->v[p->n++];
    *a = (struct ctl_action){.kind = CTL_DESTROY_COPY, .vm = -1, .src = -1, .dst = -1, .host = -1};
    return a;
}

/* The copies of VM I this tick: the one host where it runs (or -1 when
 * none or several), and how many copies are paused. */
static int32_t twin(const struct controller *c, size_t vi, unsigned *ret_paused,
                    unsigned *ret_running)
{
    int32_t run = -1;
    unsigned running = 0, paused = 0;
    for (size_t hi = 0; hi < c->site->n_hosts; hi++) {
        const struct ctl_host *h = &c->hosts[hi];
        const struct fx_domain *d = h->hv_ok ? fx_list_find(&h->doms, c->vm[vi].name) : NULL;
        if (!d || !d->active)
            continue;
        if (d->running) {
            running++;
            run = (int32_t)hi;
        } else {
            paused++;
        }
    }
    *ret_paused = paused;
    *ret_running = running;
    return running == 1 && c->hosts[run].state == CTL_ON ? run : -1;
}

void ctl_copies_plan(struct controller *c, struct ctl_plan *p)
{
    const struct site *s = c->site;
    if (!s->destroy_stale_copy)
        return;
    for (size_t vi = 0; vi < c->n_vm; vi++) {
        const struct ctl_vm *v = &c->vm[vi];
        if (v->copies < 2 || !v->managed)
            continue;
        unsigned paused, running;
        int32_t t = twin(c, vi, &paused, &running);
        if (t < 0 || paused + 1 != v->copies) {
            ctl_plan_note(p,
                          "vm '%s': %u copies, %u running: no copy destroyed (one must run, on a "
                          "host that answers, the others paused)",
                          v->name, v->copies, running);
            continue;
        }
        for (size_t hi = 0; hi < s->n_hosts; hi++) {
            const struct ctl_host *h = &c->hosts[hi];
            const struct fx_domain *d = h->hv_ok ? fx_list_find(&h->doms, v->name) : NULL;
            if (!d || !d->active || d->running)
                continue;
            struct ctl_action *a = add(p);
            a->vm = (int32_t)vi;
            a->host = (int32_t)hi;
            a->src = t;
            snprintf(a->why, sizeof(a->why), "a paused copy; the VM runs on %s, which answers",
                     s->hosts[t].name);
        }
    }
}

/* The facts again, now: VM runs on its twin, and is paused on HOST. */
static int still_stale(struct controller *c, struct ctl_action *a)
{
    const char *vm = c->vm[a->vm].name;
    int32_t hs[2] = {a->src, a->host};
    for (size_t i = 0; i < 2; i++) {
        struct fx_list l = {0};
        struct fleet_error err = {{0}};
        if (c->vms->list(c->vms, (size_t)hs[i], &l, &err) < 0) {
            snprintf(a->result, sizeof(a->result), "refused: cannot list %s now: %.600s",
                     c->site->hosts[hs[i]].name, err.msg);
            return -EPERM;
        }
        const struct fx_domain *d = fx_list_find(&l, vm);
        bool ok = i == 0 ? d && d->running : d && d->active && !d->running;
        fx_list_free(&l);
        if (!ok) {
            snprintf(a->result, sizeof(a->result), "refused: %s %s on %s now", vm,
                     i == 0 ? "does not run" : "is not paused", c->site->hosts[hs[i]].name);
            return -EPERM;
        }
    }
    return 0;
}

static void destroy_one(struct controller *c, struct ctl_action *a)
{
    const struct site *s = c->site;
    const char *vm = c->vm[a->vm].name, *host = s->hosts[a->host].name, *tw = s->hosts[a->src].name;
    if (!c->vms->destroy_paused) {
        a->rc = -EOPNOTSUPP;
        snprintf(a->result, sizeof(a->result), "not done: the %s engine cannot destroy a domain",
                 c->vms->name);
        return;
    }
    if ((a->rc = still_stale(c, a)) < 0) {
        c->safety_refusals++;
        return;
    }
    _cleanup_free_ char *word = ctl_journal_word(vm);
    long seq = ctl_journal_begin(c->journal, "destroy_copy vm=%s host=%s twin=%s", word, host, tw);
    if (seq < 0) {
        a->rc = (int)seq;
        snprintf(a->result, sizeof(a->result), "not done: cannot write the journal: %s",
                 strerror((int)-seq));
        return;
    }
    struct fleet_error err = {{0}};
    a->rc = c->vms->destroy_paused(c->vms, vm, (size_t)a->host, &err);
    struct fx_list l = {0};
    if (a->rc == 0 && c->vms->list(c->vms, (size_t)a->host, &l, &err) == 0) {
        const struct fx_domain *d = fx_list_find(&l, vm);
        if (d && d->active) { /* the engine said yes, the facts say otherwise */
            a->rc = -EIO;
            snprintf(err.msg, sizeof(err.msg), "destroyed, but %s is still active on %s", vm, host);
        }
    }
    fx_list_free(&l);
    if (a->rc == 0) {
        c->copies_destroyed++;
        snprintf(a->result, sizeof(a->result), "destroyed; %s runs on %s", vm, tw);
    } else {
        snprintf(a->result, sizeof(a->result), "failed: %.800s", err.msg);
    }
    ctl_journal_end(c->journal, seq, "%s vm=%s host=%s", a->rc == 0 ? "ok" : "failed", word, host);
}

void ctl_copies_execute(struct controller *c, struct ctl_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].kind == CTL_DESTROY_COPY)
            destroy_one(c, &p->v[i]);
}
