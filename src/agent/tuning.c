/* watt tune inside the agent: see tuning.h. */
#include "agent/tuning.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "sense/devpolicy.h"
#include "tune/journal.h"
#include "tune/plan.h"
#include "tune/profile.h"

#define OWNER "agent"

const char *agent_tuning_confdir(const struct agent_config *c)
{
    if (c->config_dir)
        return c->config_dir;
    const char *env = getenv("WATT_CONFIG_DIR");
    return env && *env ? env : PROFILE_CONFDIR_DEFAULT;
}

/* The journal's path under the root: a leading '/' names the same place. */
static char *journal_of(const struct agent_config *c)
{
    const char *p = c->journal ? c->journal : JOURNAL_DEFAULT_PATH;
    p += strspn(p, "/");
    return xstrdup(p);
}

/* Open the journal, saying once per wait that another tuner holds it. */
static int open_journal(struct agent_tuning *t, const char *owner, struct journal **ret)
{
    _cleanup_free_ char *err = NULL;
    int r = journal_open(t->h, t->journal, owner, ret, &err);
    if (r == -EBUSY) {
        if (!t->locked_logged)
            fprintf(stderr, "watt agent: %s; trying again every tick\n", err);
        t->locked_logged = true;
    } else if (r < 0) {
        fprintf(stderr, "watt agent: %s\n", err ? err : strerror(-r));
    } else {
        t->locked_logged = false;
    }
    return r;
}

/* Restore OWNER's records, logging what came back and what did not. */
static int restore_owner(struct journal *j, const char *owner, const char *why)
{
    struct journal_restore_report rep = {0};
    int r = journal_restore(j, owner, 0, &rep);
    if (rep.restored || rep.failed || rep.skipped || rep.refused || rep.changed || rep.earlier_boot)
        fprintf(stderr,
                "watt agent: %s: restored %zu value%s of owner %s, %zu failed, %zu skipped, "
                "%zu refused, %zu changed since (left), %zu of an earlier boot (left)\n",
                why, rep.restored, rep.restored == 1 ? "" : "s", owner, rep.failed, rep.skipped,
                rep.refused, rep.changed, rep.earlier_boot);
    for (size_t i = 0; i < rep.nlines; i++)
        fprintf(stderr, "watt agent:   %s\n", rep.lines[i]);
    journal_restore_report_free(&rep);
    return r;
}

/* While the profile is in force its records are not stale: only the
 * guard's are (a guard that could not let go). */
static bool has_stale(struct agent_tuning *t)
{
    struct journal_log log;
    if (journal_read(t->h, t->journal, &log) < 0)
        return true; /* unreadable: let the restore report it */
    bool stale = false;
    for (size_t i = 0; i < log.n && !stale; i++)
        stale = (!t->applied && streq(log.v[i].owner, OWNER)) ||
                streq(log.v[i].owner, GUARD_JOURNAL_OWNER) ||
                (!t->packer && streq(log.v[i].owner, PACK_JOURNAL_OWNER));
    journal_log_free(&log);
    return stale;
}

/* Values a crashed agent (or one with restore_on_exit = no) left: the
 * guard's first (its writes came after the profile's), then the
 * profile's; with the profile in force (a guard stopped while the journal
 * was locked), the guard's only. Returns -EBUSY while another tuner holds
 * the journal. */
static int recover(struct agent_tuning *t)
{
    if (!has_stale(t))
        return 0;
    struct journal *j;
    int r = open_journal(t, OWNER, &j);
    if (r < 0)
        return r;
    const char *why = t->applied ? "left by a stopped guard" : "left by a previous run";
    restore_owner(j, GUARD_JOURNAL_OWNER, why);
    if (!t->packer)
        restore_owner(j, PACK_JOURNAL_OWNER, why);
    if (!t->applied)
        restore_owner(j, OWNER, why);
    journal_close(j);
    return 0;
}

/* Everything about a profile that can fail before a write: load, the
 * guard's section, the device policy and the plan. */
struct loaded {
    struct profile *p;
    struct guard_config gc;
    bool has_guard;
    struct pack_config pc;
    bool has_pack;
};

static void loaded_clear(struct loaded *l)
{
    profile_free(l->p);
    if (l->has_guard)
        guard_config_clear(&l->gc);
    if (l->has_pack)
        pack_config_clear(&l->pc);
    *l = (struct loaded){0};
}

static int build_plan(struct agent_tuning *t, const struct profile *p, struct tune_plan *ret,
                      char **ret_err)
{
    struct devpolicy *dp = NULL;
    int r = devpolicy_load(t->confdir, &dp, ret_err);
    if (r < 0)
        return r;
    r = tune_plan_build(t->h, p, dp, ret, ret_err);
    devpolicy_free(dp);
    return r;
}

static int load(struct agent_tuning *t, const char *name, struct loaded *ret)
{
    struct loaded l = {0};
    _cleanup_free_ char *err = NULL;
    int r = profile_load(name, t->confdir, &l.p, &err);
    if (r >= 0) {
        r = guard_config_from_profile(t->h, l.p, &l.gc, &err);
        l.has_guard = r == 0;
        if (r == -ENOENT)
            r = 0;
    }
    if (r >= 0) {
        r = pack_config_from_profile(t->h, l.p, &l.pc, &err);
        l.has_pack = r == 0;
        if (r == -ENOENT)
            r = 0;
    }
    struct tune_plan plan = {0};
    if (r >= 0 && (r = build_plan(t, l.p, &plan, &err)) >= 0)
        tune_plan_free(&plan);
    if (r < 0) {
        fprintf(stderr, "watt agent: profile %s: %s\n", name, err ? err : strerror(-r));
        loaded_clear(&l);
        return r;
    }
    *ret = l;
    return 0;
}

/* Apply the loaded profile's plan, built now against the values in
 * force. -EBUSY while the journal is locked. */
static int apply(struct agent_tuning *t)
{
    struct tune_plan plan = {0};
    _cleanup_free_ char *err = NULL;
    int r = build_plan(t, t->prof, &plan, &err);
    if (r < 0) {
        fprintf(stderr, "watt agent: profile %s: %s\n", t->profile, err);
        return r;
    }
    for (size_t i = 0; i < plan.nnotes; i++)
        fprintf(stderr, "watt agent: profile %s: %s\n", t->profile, plan.notes[i]);
    if (plan.n) {
        struct journal *j;
        r = open_journal(t, OWNER, &j);
        if (r >= 0) {
            r = tune_plan_apply(j, &plan, &err);
            journal_close(j);
            if (r < 0)
                fprintf(stderr, "watt agent: profile %s not applied: %s\n", t->profile, err);
        }
    }
    if (r >= 0) {
        t->applied = true;
        t->nchanges = plan.n;
        fprintf(stderr, "watt agent: profile %s applied: %zu value%s changed\n", t->profile, plan.n,
                plan.n == 1 ? "" : "s");
    }
    tune_plan_free(&plan);
    return r;
}

static void start_guard(struct agent_tuning *t)
{
    const struct guard_config *c = &t->gc;
    guard_new(t->h, c, t->journal, &t->guard);
    _cleanup_free_ char *cpus = cpuset_format(&c->cpus);
    _cleanup_free_ char *what = cpuset_count(&c->cpus)
                                    ? xasprintf("the resume latency of CPUs %s", cpus)
                                    : xstrdup("cpu_dma_latency");
    fprintf(stderr,
            "watt agent: latency guard: %s at %d µs while %s is busy for %g s, released after "
            "%g s idle\n",
            what, c->latency_us, c->workload.spec, c->busy_after_s, c->idle_after_s);
}

static void start_packer(struct agent_tuning *t)
{
    packer_new(t->h, &t->pc, t->journal, &t->packer);
    struct pack_status st;
    packer_get_status(t->packer, &st);
    struct strbuf b = {0};
    for (size_t i = 0; i < t->pc.ncgroups; i++)
        strbuf_appendf(&b, "%s%s", i ? " " : "", t->pc.cgroups[i]);
    fprintf(stderr,
            "watt agent: packer: cgroups %s on %s, headroom %g, every %g s over a %g-s window; "
            "pressure: %s\n",
            strbuf_str(&b), st.hierarchy, t->pc.headroom, t->pc.interval_s, t->pc.window_s,
            st.pressure_source);
    strbuf_free(&b);
}

/* Take the loaded profile as the running one (applied by settle()). */
static void adopt(struct agent_tuning *t, const char *name, struct loaded *l)
{
    free(t->profile);
    t->profile = xstrdup(name);
    profile_free(t->prof);
    t->prof = TAKE_PTR(l->p);
    if (t->has_gc)
        guard_config_clear(&t->gc);
    t->gc = l->gc;
    t->has_gc = l->has_guard;
    l->has_guard = false;
    if (t->has_pc)
        pack_config_clear(&t->pc);
    t->pc = l->pc;
    t->has_pc = l->has_pack;
    l->has_pack = false;
    t->applied = false;
    t->nchanges = 0;
    t->need_apply = true;
}

/* Do what can be done now, in order: restore stale records, apply the
 * profile over the original values, start the guard. A locked journal
 * leaves the rest for the next tick; a refused write is an error. */
static int settle(struct agent_tuning *t)
{
    if (t->need_recover) {
        if (recover(t) == -EBUSY)
            return 0;
        t->need_recover = false;
    }
    if (t->need_apply) {
        int r = apply(t);
        if (r == -EBUSY)
            return 0;
        t->need_apply = false;
        if (r < 0)
            return r;
    }
    if (t->has_gc && !t->guard)
        start_guard(t);
    if (t->has_pc && !t->packer)
        start_packer(t);
    return 0;
}

int agent_tuning_start(struct agent_tuning *t, struct host *h, const struct agent_config *c)
{
    *t = (struct agent_tuning){
        .h = h,
        .journal = journal_of(c),
        .confdir = xstrdup(agent_tuning_confdir(c)),
        .restore_on_exit = c->restore_on_exit,
        .need_recover = true,
    };
    if (c->profile) {
        struct loaded l;
        int r = load(t, c->profile, &l);
        if (r < 0)
            return r;
        adopt(t, c->profile, &l);
        loaded_clear(&l);
    }
    return settle(t);
}

void agent_tuning_tick(struct agent_tuning *t, uint64_t now_ns)
{
    if ((t->need_recover || t->need_apply || (t->has_gc && !t->guard) ||
         (t->has_pc && !t->packer)) &&
        settle(t) < 0)
        fprintf(stderr, "watt agent: profile %s is not in force\n", t->profile);
    if (!t->guard)
        return;
    _cleanup_free_ char *msg = NULL;
    guard_tick(t->guard, now_ns, &msg);
    if (msg)
        fprintf(stderr, "watt agent: %s\n", msg);
}

static void pause_100ms(void)
{
    nanosleep(&(struct timespec){0, 100000000}, NULL);
}

/* Call RELEASE(OBJ, &err) until it is not -EBUSY (a locked journal), for
 * up to 2 s when WAIT; say a failure, prefixed by WHAT. A failure leaves
 * the hold and its records: restore them as soon as the journal is free
 * (settle() does, before a new one starts), not only at the next start,
 * since nothing watches them now. */
static void release_retry(struct agent_tuning *t, void *obj, int (*release)(void *, char **),
                          const char *what, bool wait)
{
    int r;
    for (int tries = 0;; tries++) {
        _cleanup_free_ char *err = NULL;
        r = release(obj, &err);
        if (r != -EBUSY || !wait || tries >= 20) {
            if (r < 0)
                fprintf(stderr, "watt agent: %s%s\n", what, err ? err : strerror(-r));
            break;
        }
        pause_100ms();
    }
    if (r < 0)
        t->need_recover = true;
}

static int packer_release_any(void *p, char **err)
{
    return packer_release(p, err);
}

static int guard_release_any(void *g, char **err)
{
    return guard_release(g, err);
}

/* Put the cpusets back and stop the packer. */
static void stop_packer(struct agent_tuning *t, bool wait)
{
    if (!t->packer)
        return;
    release_retry(t, t->packer, packer_release_any, "", wait);
    packer_free(t->packer); /* released: frees only */
    t->packer = NULL;
}

/* Release and stop the guard. */
static void stop_guard(struct agent_tuning *t, bool wait)
{
    if (!t->guard)
        return;
    release_retry(t, t->guard, guard_release_any, "latency guard: ", wait);
    guard_free(t->guard);
    t->guard = NULL;
}

/* Release the guard and restore the profile's values. ON_EXIT tries a
 * locked journal for up to 2 s: the lock is only ever held briefly. */
static int unwind(struct agent_tuning *t, bool on_exit)
{
    stop_packer(t, on_exit);
    stop_guard(t, on_exit);
    if (!t->applied || !t->nchanges)
        return 0;
    struct journal *j;
    int r;
    for (int tries = 0; (r = open_journal(t, OWNER, &j)) == -EBUSY && on_exit && tries < 20;
         tries++)
        pause_100ms();
    if (r < 0)
        return r;
    /* what the kernel refused stays in the journal, for watt restore */
    restore_owner(j, OWNER, on_exit ? "exit" : "profile change");
    journal_close(j);
    t->applied = false;
    return 0;
}

static bool same_profile(const struct profile *a, const struct profile *b)
{
    if (!a || !b || a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!streq(a->v[i].section, b->v[i].section) || !streq(a->v[i].key, b->v[i].key) ||
            !streq(a->v[i].value, b->v[i].value))
            return false;
    return true;
}

static void drop_profile(struct agent_tuning *t)
{
    profile_free(t->prof);
    t->prof = NULL;
    free(t->profile);
    t->profile = NULL;
    if (t->has_gc)
        guard_config_clear(&t->gc);
    t->has_gc = false;
    if (t->has_pc)
        pack_config_clear(&t->pc);
    t->has_pc = false;
    t->need_apply = false;
    t->applied = false;
    t->nchanges = 0;
}

void agent_tuning_reload(struct agent_tuning *t, const struct agent_config *c)
{
    const char *name = c->profile;
    t->restore_on_exit = c->restore_on_exit;
    _cleanup_free_ char *journal = journal_of(c);
    if (!streq(journal, t->journal) || !streq(agent_tuning_confdir(c), t->confdir))
        fprintf(stderr, "watt agent: reload: journal and config_dir changes need a restart\n");
    if (!name && !t->profile)
        return;
    struct loaded l = {0};
    if (name && load(t, name, &l) < 0) {
        fprintf(stderr, "watt agent: reload: keeping profile %s\n",
                t->profile ? t->profile : "(none)");
        return;
    }
    if (name && streq(name, t->profile) && same_profile(l.p, t->prof)) {
        loaded_clear(&l); /* unchanged: the guard keeps its state */
        return;
    }
    if (unwind(t, false) < 0) {
        fprintf(stderr, "watt agent: reload: profile %s not restored; keeping it\n", t->profile);
        loaded_clear(&l);
        return;
    }
    drop_profile(t);
    if (name) {
        adopt(t, name, &l);
        if (settle(t) < 0)
            fprintf(stderr, "watt agent: reload: profile %s is not in force\n", name);
    } else {
        fprintf(stderr, "watt agent: reload: no profile any more\n");
    }
    loaded_clear(&l);
}

void agent_tuning_stop(struct agent_tuning *t)
{
    if (t->restore_on_exit) {
        unwind(t, true);
    } else {
        /* a constraint nobody watches would hold for ever: always let go;
         * so would a packed set nobody grows */
        stop_packer(t, true);
        stop_guard(t, true);
        if (t->applied && t->nchanges)
            fprintf(stderr,
                    "watt agent: restore_on_exit = no: profile %s stays in force "
                    "(watt restore puts it back)\n",
                    t->profile);
    }
    drop_profile(t);
    free(t->journal);
    free(t->confdir);
    *t = (struct agent_tuning){0};
}

static void guard_json(const struct guard *g, uint64_t now_ns, struct json *j)
{
    struct guard_status st;
    guard_get_status(g, now_ns, &st);
    json_key(j, "guard");
    json_object_begin(j);
    json_kv_string(j, "workload", st.workload);
    json_kv_string(j, "state", guard_state_name(st.state));
    json_kv_bool(j, "held", st.held);
    json_kv_string(j, "mode", st.mode);
    if (*st.cpus)
        json_kv_string(j, "cpus", st.cpus);
    json_kv_i64(j, "target_us", st.target_us);
    json_kv_bool(j, "present", st.present);
    json_kv_bool(j, "busy", st.busy);
    json_kv_double(j, "cpu_ratio", st.cpu_ratio);
    json_kv_u64(j, "connections", st.connections);
    if (st.source && *st.source)
        json_kv_string(j, "source", st.source);
    json_kv_u64(j, "processes", st.nprocs);
    json_kv_double(j, "held_s", st.held_s);
    json_kv_u64(j, "transitions", st.transitions);
    json_kv_u64(j, "failures", st.failures);
    json_kv_string(j, "note", st.note);
    json_object_end(j);
}

static void pack_json(const struct packer *p, struct json *j)
{
    struct pack_status st;
    packer_get_status(p, &st);
    json_key(j, "pack");
    json_object_begin(j);
    json_kv_string(j, "state", st.state);
    json_kv_string(j, "cpus", st.cpus);
    json_kv_u64(j, "ncpus", st.ncpus);
    json_kv_double(j, "demand_cpus", st.demand_cpus);
    json_kv_double(j, "target_cpus", st.target_cpus);
    json_kv_string(j, "hierarchy", st.hierarchy);
    json_kv_string(j, "demand_source", st.demand_source);
    json_kv_string(j, "pressure", st.pressure_source);
    json_kv_double(j, "interval_s", st.interval_s);
    json_kv_double(j, "shrink_hold_s", st.shrink_hold_s);
    json_key(j, "cgroups");
    json_array_begin(j);
    for (size_t i = 0; i < st.ncgroups; i++) {
        json_object_begin(j);
        json_kv_string(j, "path", st.cgroups[i].path);
        json_kv_bool(j, "packed", st.cgroups[i].packed);
        json_kv_string(j, "note", st.cgroups[i].note);
        json_object_end(j);
    }
    json_array_end(j);
    json_key(j, "actions");
    json_object_begin(j);
    for (int a = PACK_KEEP; a <= PACK_REPLAN; a++)
        if (a != PACK_KEEP)
            json_kv_u64(j, pack_action_name(a), st.actions[a]);
    json_object_end(j);
    json_kv_u64(j, "pressure_events", st.pressure_events);
    json_kv_double(j, "last_grow_latency_s", st.last_grow_latency_s);
    json_kv_u64(j, "grows_by_pressure", st.grow_latency_count);
    json_kv_u64(j, "failures", st.failures);
    json_kv_string(j, "note", st.note);
    json_object_end(j);
}

void agent_tuning_status(const struct agent_tuning *t, uint64_t now_ns, struct json *j)
{
    json_kv_string(j, "profile", t->profile);
    json_key(j, "tuning");
    json_object_begin(j);
    json_kv_bool(j, "applied", t->applied);
    json_kv_u64(j, "changes", t->nchanges);
    json_kv_bool(j, "waiting_for_journal", t->need_apply || t->need_recover);
    json_kv_bool(j, "restore_on_exit", t->restore_on_exit);
    json_kv_string(j, "journal", t->journal);
    json_object_end(j);
    if (t->guard)
        guard_json(t->guard, now_ns, j);
    else
        json_kv_null(j, "guard");
    if (t->packer)
        pack_json(t->packer, j);
    else
        json_kv_null(j, "pack");
}

double agent_tuning_pack_interval(const struct agent_tuning *t)
{
    return t->packer ? t->pc.interval_s : 0;
}

void agent_tuning_pack_tick(struct agent_tuning *t, uint64_t now_ns)
{
    if (!t->packer)
        return;
    _cleanup_free_ char *msg = NULL;
    packer_tick(t->packer, now_ns, &msg);
    if (msg)
        fprintf(stderr, "watt agent: %s\n", msg);
}

void agent_tuning_pack_pressure(struct agent_tuning *t, int fd, uint64_t woke_ns)
{
    if (!t->packer)
        return;
    _cleanup_free_ char *msg = NULL;
    packer_pressure(t->packer, fd, woke_ns, &msg);
    if (msg)
        fprintf(stderr, "watt agent: %s\n", msg);
}

size_t agent_tuning_pack_fds(const struct agent_tuning *t, const int **ret)
{
    *ret = NULL;
    return t->packer ? packer_fds(t->packer, ret) : 0;
}
