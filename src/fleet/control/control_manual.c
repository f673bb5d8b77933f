/* The operator's side of a tick (docs/fleet-run.md):
 *
 *  - maintenance: state_dir/maintenance (watt fleet host NAME maintenance
 *    on|off) is read every tick into hosts[].maintenance; the policy
 *    evacuates those hosts and keeps them out of its plans;
 *  - every action gets an ID, the same every tick for the same action;
 *  - mode = manual: nothing is executed unless approved (watt fleet
 *    approve ID|all). Each tick takes every approval there is (and
 *    removes the file), executes the approved actions that are still in
 *    its plan, says which approvals it dropped (no longer planned, or
 *    older than APPROVAL_TICKS intervals), and writes its plan to
 *    state_dir/plan.json. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/util.h"
#include "fleet/control/control.h"

#define APPROVAL_TICKS 3 /* an approval older than this many intervals expires */
#define RECENT_PLANS   3 /* plans "approve all" may name */

struct ctl_recent {
    uint64_t serial;
    char (*ids)[OPSTATE_ID_LEN + 1]; /* its pending actions */
    size_t n;
};

const char *ctl_action_name(enum ctl_action_kind k)
{
    static const char *const n[] = {"migrate", "power_on", "power_off", "destroy_copy"};
    return (size_t)k < ARRAY_SIZE(n) ? n[k] : "?";
}

void ctl_action_describe(const struct controller *c, const struct ctl_action *a, char *buf,
                         size_t size)
{
    const struct site *s = c->site;
    switch (a->kind) {
    case CTL_MIGRATE:
        snprintf(buf, size, "migrate %s %s -> %s", c->vm[a->vm].name, s->hosts[a->src].name,
                 s->hosts[a->dst].name);
        break;
    case CTL_POWER_ON:
    case CTL_POWER_OFF:
        snprintf(buf, size, "%s %s", a->kind == CTL_POWER_ON ? "switch on" : "switch off",
                 s->hosts[a->host].name);
        break;
    case CTL_DESTROY_COPY:
        snprintf(buf, size, "destroy the paused copy of %s on %s", c->vm[a->vm].name,
                 s->hosts[a->host].name);
        break;
    }
}

/* ---- maintenance ----------------------------------------------------------- */

void ctl_operator_read(struct controller *c)
{
    const struct site *s = c->site;
    _cleanup_free_ char *text = NULL;
    _cleanup_free_ struct opstate_maint *v = NULL;
    _cleanup_free_ char *origin = xasprintf("%s/maintenance", s->state_dir);
    size_t len = 0, n = 0;
    struct fleet_error err = {{0}};
    int r = opstate_read(s->state_dir, "maintenance", &text, &len, &err);
    if (r == 0)
        r = opstate_maint_parse(text, len, origin, &v, &n, &err);
    if (r < 0 && r != -ENOENT) {
        /* a file we cannot trust changes nothing: hosts stay as they were */
        snprintf(c->maint_error, sizeof(c->maint_error), "%.250s; maintenance unchanged", err.msg);
        return;
    }
    c->maint_error[0] = '\0';
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        c->hosts[hi].maintenance = false;
    for (size_t i = 0; i < n; i++) {
        ssize_t hi = site_host_find(s, v[i].host);
        if (hi >= 0)
            c->hosts[hi].maintenance = true;
        else
            snprintf(c->maint_error, sizeof(c->maint_error),
                     "%s names host '%s', which %s does not define: ignored", origin, v[i].host,
                     s->origin);
    }
}

/* ---- IDs and approvals ------------------------------------------------------ */

static void set_id(const struct controller *c, struct ctl_action *a)
{
    const struct site *s = c->site;
    const char *w[4] = {ctl_action_name(a->kind)};
    size_t n = 1;
    if (a->kind == CTL_MIGRATE) {
        w[n++] = c->vm[a->vm].name;
        w[n++] = s->hosts[a->src].name;
        w[n++] = s->hosts[a->dst].name;
    } else if (a->kind == CTL_DESTROY_COPY) {
        w[n++] = c->vm[a->vm].name;
        w[n++] = s->hosts[a->host].name;
    } else {
        w[n++] = s->hosts[a->host].name;
    }
    opstate_action_id(a->id, w, n);
}

struct approved {
    char id[OPSTATE_ID_LEN + 1];
    bool from_all, used;
};

/* Take every approval: read and remove the file under the folder lock. */
static int take(struct controller *c, struct ctl_plan *p, struct opstate_approval **ret,
                size_t *ret_n)
{
    const char *dir = c->site->state_dir;
    struct fleet_error err = {{0}};
    _cleanup_free_ char *origin = xasprintf("%s/approvals", dir);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int lock = -1;
    int r = opstate_lock(dir, &lock, &err);
    if (r == 0)
        r = opstate_read(dir, "approvals", &text, &len, &err);
    if (r == 0)
        r = opstate_approvals_parse(text, len, origin, ret, ret_n, &err);
    /* a file refused stays for a person to look at; nothing is approved */
    if (r == 0 && opstate_remove(dir, "approvals", &err) < 0) {
        free(*ret);
        r = -EIO;
    }
    if (lock >= 0)
        close(lock);
    if (r < 0 && r != -ENOENT)
        ctl_plan_note(p, "approvals: %.220s: nothing approved", err.msg);
    return r;
}

static const struct ctl_recent *recent_find(const struct controller *c, uint64_t serial)
{
    for (size_t i = 0; c->recent && i < RECENT_PLANS; i++)
        if (c->recent[i].serial == serial && serial)
            return &c->recent[i];
    return NULL;
}

static void add_approved(struct approved **v, size_t *n, const char *id, bool from_all)
{
    for (size_t i = 0; i < *n; i++)
        if (streq((*v)[i].id, id))
            return;
    *v = xrealloc(*v, (*n + 1) * sizeof(**v));
    (*v)[*n] = (struct approved){.from_all = from_all};
    snprintf((*v)[*n].id, sizeof((*v)[*n].id), "%s", id);
    (*n)++;
}

/* The IDs approved, and still fresh. */
static size_t approved_ids(struct controller *c, struct ctl_plan *p, struct approved **ret)
{
    struct opstate_approval *a = NULL;
    size_t na = 0, n = 0;
    *ret = NULL;
    if (take(c, p, &a, &na) < 0)
        return 0;
    double now = (double)now_realtime_ns() / 1e9;
    double ttl = APPROVAL_TICKS * c->site->limits.interval_s;
    for (size_t i = 0; i < na; i++) {
        if (now - a[i].time > ttl) {
            c->approvals_dropped++;
            ctl_plan_note(p,
                          "approval of %s expired (%.0f s old, more than %d intervals): "
                          "approve again",
                          a[i].id, now - a[i].time, APPROVAL_TICKS);
            continue;
        }
        if (!streq(a[i].id, "all")) {
            add_approved(ret, &n, a[i].id, false);
            continue;
        }
        const struct ctl_recent *r = recent_find(c, a[i].plan);
        if (!r) {
            c->approvals_dropped++;
            ctl_plan_note(p,
                          "approval of all of plan %" PRIu64 " dropped: not one of this "
                          "controller's last plans; approve again",
                          a[i].plan);
            continue;
        }
        for (size_t k = 0; k < r->n; k++)
            add_approved(ret, &n, r->ids[k], true);
    }
    free(a);
    return n;
}

/* Manual mode: hold what is not approved, approved actions first. */
static size_t apply_approvals(struct controller *c, struct ctl_plan *p)
{
    _cleanup_free_ struct approved *ok = NULL;
    size_t n_ok = c->opt.dry_run ? 0 : approved_ids(c, p, &ok);
    for (size_t i = 0; i < p->n; i++) {
        struct ctl_action *a = &p->v[i];
        a->held = true;
        for (size_t k = 0; k < n_ok && a->held; k++)
            if (streq(ok[k].id, a->id)) {
                a->held = false;
                ok[k].used = true;
                c->approvals_done++;
            }
    }
    for (size_t k = 0; k < n_ok; k++)
        if (!ok[k].used) {
            c->approvals_dropped++;
            ctl_plan_note(p, "approval of %s%s dropped: no longer planned", ok[k].id,
                          ok[k].from_all ? " (approve all)" : "");
        }
    /* a stable partition: the approved keep their order, ahead of the held */
    _cleanup_free_ struct ctl_action *tmp = xmalloc((p->n ? p->n : 1) * sizeof(*tmp));
    size_t run = 0, k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (!p->v[i].held)
            tmp[k++] = p->v[i];
    run = k;
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].held)
            tmp[k++] = p->v[i];
    if (p->n)
        memcpy(p->v, tmp, p->n * sizeof(*tmp));
    return run;
}

void ctl_operator_plan(struct controller *c, struct ctl_plan *p, size_t *ret_n_run)
{
    ctl_copies_plan(c, p);
    for (size_t i = 0; i < p->n; i++)
        set_id(c, &p->v[i]);
    if (c->maint_error[0])
        ctl_plan_note(p, "%s", c->maint_error);
    *ret_n_run = c->site->mode == SITE_MANUAL ? apply_approvals(c, p) : p->n;
}

/* ---- plan.json and the metrics ---------------------------------------------- */

static const char *action_state(const struct ctl_action *a, bool executed)
{
    if (a->held || !executed)
        return "pending";
    return a->rc == 0 ? "done" : "failed";
}

static void plan_json(const struct controller *c, const struct ctl_plan *p, struct json *j)
{
    const struct site *s = c->site;
    json_object_begin(j);
    json_kv_u64(j, "plan", c->plan_serial); /* first: watt fleet approve reads it */
    json_kv_u64(j, "tick", c->ticks);
    json_kv_double(j, "time", (double)now_realtime_ns() / 1e9);
    json_kv_string(j, "mode", "manual");
    json_kv_double(j, "interval_s", s->limits.interval_s);
    json_kv_double(j, "approval_ttl_s", APPROVAL_TICKS * s->limits.interval_s);
    json_key(j, "actions");
    json_array_begin(j);
    for (size_t i = 0; i < p->n; i++) {
        const struct ctl_action *a = &p->v[i];
        char what[400];
        ctl_action_describe(c, a, what, sizeof(what));
        json_object_begin(j);
        /* id, state, what first and in this order: opstate_plan_pending() */
        json_kv_string(j, "id", a->id);
        json_kv_string(j, "state", action_state(a, true));
        json_kv_string(j, "what", what);
        json_kv_string(j, "action", ctl_action_name(a->kind));
        if (a->vm >= 0)
            json_kv_string(j, "vm", c->vm[a->vm].name);
        if (a->kind == CTL_MIGRATE) {
            json_kv_string(j, "src", s->hosts[a->src].name);
            json_kv_string(j, "dst", s->hosts[a->dst].name);
        } else {
            json_kv_string(j, "host", s->hosts[a->host].name);
        }
        if (a->kind == CTL_DESTROY_COPY)
            json_kv_string(j, "twin", s->hosts[a->src].name);
        json_kv_string(j, "reason",
                       a->kind == CTL_DESTROY_COPY ? "stale_copy" : fleet_reason_name(a->reason));
        json_kv_string(j, "why", a->why);
        json_kv_double(j, "vm_mips", a->vm_mips);
        json_kv_double(j, "load_mips", a->load_mips);
        json_kv_double(j, "cap_mips", a->cap_mips);
        if (!a->held)
            json_kv_string(j, "result", a->result);
        json_object_end(j);
    }
    json_array_end(j);
    json_key(j, "maintenance");
    json_array_begin(j);
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        if (c->hosts[hi].maintenance)
            json_string(j, s->hosts[hi].name);
    json_array_end(j);
    json_key(j, "notes");
    json_array_begin(j);
    for (size_t i = 0; i < p->n_notes; i++)
        json_string(j, p->notes[i]);
    json_array_end(j);
    json_object_end(j);
}

static void remember(struct controller *c, const struct ctl_plan *p)
{
    if (!c->recent)
        c->recent = xcalloc(RECENT_PLANS, sizeof(*c->recent));
    free(c->recent[RECENT_PLANS - 1].ids);
    memmove(c->recent + 1, c->recent, (RECENT_PLANS - 1) * sizeof(*c->recent));
    struct ctl_recent *r = &c->recent[0];
    *r = (struct ctl_recent){.serial = c->plan_serial};
    r->ids = xcalloc(p->n ? p->n : 1, sizeof(*r->ids));
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].held)
            memcpy(r->ids[r->n++], p->v[i].id, sizeof(r->ids[0]));
}

void ctl_operator_done(struct controller *c, struct ctl_plan *p)
{
    memset(c->plan_kinds, 0, sizeof(c->plan_kinds));
    c->plan_pending = 0;
    for (size_t i = 0; i < p->n; i++) {
        if ((size_t)p->v[i].kind < ARRAY_SIZE(c->plan_kinds))
            c->plan_kinds[p->v[i].kind]++;
        c->plan_pending += p->v[i].held;
    }
    if (c->site->mode != SITE_MANUAL || c->opt.dry_run)
        return;
    /* a serial that only grows, also across restarts: milliseconds */
    uint64_t ms = now_realtime_ns() / 1000000;
    c->plan_serial = ms > c->plan_serial ? ms : c->plan_serial + 1;
    remember(c, p);
    struct json j;
    json_init(&j, false);
    plan_json(c, p, &j);
    strbuf_append(&j.out, "\n");
    struct fleet_error err = {{0}};
    if (opstate_write(c->site->state_dir, "plan.json", strbuf_str(&j.out), j.out.len, &err) < 0)
        ctl_plan_note(p, "%.240s", err.msg); /* approve reads it: nothing can be approved */
    json_free(&j);
}

void ctl_operator_metrics(const struct controller *c, FILE *f)
{
    const struct site *s = c->site;
    fprintf(f,
            "# HELP watt_fleet_manual 1 when the controller executes only approved actions.\n"
            "# TYPE watt_fleet_manual gauge\nwatt_fleet_manual %d\n",
            s->mode == SITE_MANUAL);
    fprintf(f, "# HELP watt_fleet_plan_actions Actions in the last tick's plan, by kind.\n"
               "# TYPE watt_fleet_plan_actions gauge\n");
    for (int k = CTL_MIGRATE; k <= CTL_DESTROY_COPY; k++)
        fprintf(f, "watt_fleet_plan_actions{kind=\"%s\"} %u\n",
                ctl_action_name((enum ctl_action_kind)k), c->plan_kinds[k]);
    fprintf(f,
            "# HELP watt_fleet_plan_pending Actions of the last plan awaiting an approval.\n"
            "# TYPE watt_fleet_plan_pending gauge\nwatt_fleet_plan_pending %u\n"
            "# HELP watt_fleet_approvals_total Approvals executed, or dropped (expired, no "
            "longer planned).\n# TYPE watt_fleet_approvals_total counter\n"
            "watt_fleet_approvals_total{result=\"executed\"} %lu\n"
            "watt_fleet_approvals_total{result=\"dropped\"} %lu\n"
            "# HELP watt_fleet_stale_copies_destroyed_total Paused copies destroyed "
            "(destroy_stale_copy).\n# TYPE watt_fleet_stale_copies_destroyed_total counter\n"
            "watt_fleet_stale_copies_destroyed_total %lu\n",
            c->plan_pending, c->approvals_done, c->approvals_dropped, c->copies_destroyed);
    fprintf(f, "# HELP watt_fleet_host_maintenance 1 for a host in maintenance.\n"
               "# TYPE watt_fleet_host_maintenance gauge\n");
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        fprintf(f, "watt_fleet_host_maintenance{host=\"%s\"} %d\n", s->hosts[hi].name,
                c->hosts[hi].maintenance);
}

void ctl_operator_free(struct controller *c)
{
    for (size_t i = 0; c->recent && i < RECENT_PLANS; i++)
        free(c->recent[i].ids);
    free(c->recent);
    c->recent = NULL;
}
