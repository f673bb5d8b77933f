/* Package and core C-state residency as counters of seconds: folded from
 * the cstate PMUs' readings of two samples, or from the package's CPUs'
 * cpuidle times where no package PMU measured it. */
#include "agent/metrics_cstate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "sense/cpuidle.h"
#include "sense/cstate_pmu.h"
#include "sense/sampler.h"
#include "view/report_cstate_pmu.h"

enum cs_kind { K_PKG, K_CORE, K_MEAN };

struct cs_total {
    enum cs_kind kind;
    int package;
    int die;        /* cstate_die units only, else -1 */
    int core;       /* K_CORE only, else -1 */
    char state[16]; /* "pc6", "cc6", or the cpuidle name ("C6") */
    double seconds;
    bool present; /* added to in the last interval: exported */
};

struct agent_cstate {
    struct cs_total *v;
    size_t n, cap;
    size_t cursor; /* where the next lookup expects its entry */
};

int agent_cstate_new(struct agent_cstate **ret)
{
    *ret = xcalloc(1, sizeof(**ret));
    return 0;
}

void agent_cstate_free(struct agent_cstate *s)
{
    if (!s)
        return;
    free(s->v);
    free(s);
}

static bool same(const struct cs_total *t, enum cs_kind kind, int package, int die, int core,
                 const char *state)
{
    return t->kind == kind && t->package == package && t->die == die && t->core == core &&
           streq(t->state, state);
}

/* The entry of a key, added when new. Samples visit the keys in the same
 * order, so the entry after the last one found is tried first: a sample
 * costs one comparison per key, not a search (768 keys on 192 cores). */
static struct cs_total *find(struct agent_cstate *s, enum cs_kind kind, int package, int die,
                             int core, const char *state)
{
    size_t at = s->cursor < s->n && same(&s->v[s->cursor], kind, package, die, core, state)
                    ? s->cursor
                    : s->n;
    for (size_t i = 0; at == s->n && i < s->n; i++)
        if (same(&s->v[i], kind, package, die, core, state))
            at = i;
    if (at == s->n) {
        s->v = grow_array(s->v, sizeof(*s->v), s->n, &s->cap);
        s->v[s->n] = (struct cs_total){.kind = kind, .package = package, .die = die, .core = core};
        snprintf(s->v[s->n].state, sizeof(s->v[s->n].state), "%s", state);
        s->n++;
    }
    s->cursor = at + 1;
    return &s->v[at];
}

static void add(struct agent_cstate *s, enum cs_kind kind, int package, int die, int core,
                const char *state, double seconds)
{
    struct cs_total *t = find(s, kind, package, die, core, state);
    t->seconds += seconds;
    t->present = true;
}

/* Each unit's share of the interval in each state, times the interval. */
static void pmu_fold(struct agent_cstate *s, const struct report_ctx *c, enum cstate_pmu_scope sc)
{
    const struct cstate_pmu_sample *xs = c->a->cstate_pmu, *ys = c->b->cstate_pmu;
    if (!xs || !ys)
        return;
    const struct cstate_pmu_reading *x = &xs->r[sc], *y = &ys->r[sc];
    if (!y->pmu.present || y->pmu.why)
        return;
    const struct topology *t = &c->cur->topo;
    bool per_die = y->pmu.name && streq(y->pmu.name, "cstate_die");
    for (unsigned i = 0; i < y->pmu.nunits; i++) {
        const struct cstate_pmu_unit *u = &y->pmu.units[i];
        int die = per_die && u->cpu >= 0 && (unsigned)u->cpu < t->ncpu ? t->cpu[u->cpu].die : -1;
        for (unsigned k = 0; k < y->pmu.nevents; k++) {
            double f;
            if (cstate_pmu_reading_residency(x, y, i, k, &f) < 0)
                continue; /* not read in both, or implausible: no time added */
            char st[16];
            snprintf(st, sizeof(st), "%s%u", sc == CSTATE_PMU_PKG ? "pc" : "cc",
                     y->pmu.ev[k].number);
            add(s, sc == CSTATE_PMU_PKG ? K_PKG : K_CORE, u->package, die,
                sc == CSTATE_PMU_CORE ? u->core : -1, st, f * c->interval_s);
        }
    }
}

#define MEAN_STATES 16 /* the kernel's CPUIDLE_STATE_MAX is 10 */

/* CPU's time per state over the interval into us[], false when it cannot
 * count (not in both samples, another state list, a counter that went
 * backwards or is unreadable). */
static bool cpu_delta(const struct cpuidle_cpu *a, const struct cpuidle_cpu *b,
                      const struct cpuidle_cpu *first, uint64_t *us)
{
    if (!a || a->nstates != b->nstates || b->nstates != first->nstates || b->nstates > MEAN_STATES)
        return false;
    for (unsigned k = 0; k < b->nstates; k++) {
        const struct cpuidle_state *x = &a->state[k], *y = &b->state[k];
        if (!y->name || !first->state[k].name || !streq(y->name, first->state[k].name) ||
            x->time_us == VAL_NONE || y->time_us == VAL_NONE || y->time_us < x->time_us)
            return false;
        us[k] = y->time_us - x->time_us;
    }
    return true;
}

/* The mean over package PKG's CPUs of each cpuidle state's time. */
static void mean_fold_pkg(struct agent_cstate *s, const struct report_ctx *c, int pkg)
{
    const struct cpuidle_sample *ca = c->a->cpuidle, *cb = c->b->cpuidle;
    const struct topology *t = &c->cur->topo;
    const struct cpuidle_cpu *first = NULL;
    uint64_t sum[MEAN_STATES] = {0};
    unsigned n = 0;
    for (unsigned i = 0; i < cb->ncpus; i++) {
        const struct cpuidle_cpu *b = &cb->cpus[i];
        uint64_t us[MEAN_STATES];
        if (b->cpu < 0 || (unsigned)b->cpu >= t->ncpu || t->cpu[b->cpu].package != pkg)
            continue;
        if (!first)
            first = b;
        /* the same CPU at the same index in both samples, unless one went
         * away or came back: no search over 384 CPUs per CPU */
        const struct cpuidle_cpu *a = i < ca->ncpus && ca->cpus[i].cpu == b->cpu
                                          ? &ca->cpus[i]
                                          : cpuidle_find_cpu(ca, b->cpu);
        if (!cpu_delta(a, b, first, us))
            continue;
        for (unsigned k = 0; k < b->nstates; k++)
            sum[k] += us[k];
        n++;
    }
    for (unsigned k = 0; n && k < first->nstates; k++)
        add(s, K_MEAN, pkg, -1, -1, first->state[k].name, (double)sum[k] / n / 1e6);
}

/* Whether the package PMU measured PKG over c's interval. */
static bool pkg_by_pmu(const struct report_ctx *c, int pkg)
{
    double pct[CSTATE_PMU_MAX_EVENTS];
    const struct cstate_pmu *p = NULL;
    const char *why = NULL;
    return c->b && c->cur->cstate_pmu && report_pkg_pmu(c, pkg, pct, &p, &why) > 0;
}

void agent_cstate_update(struct agent_cstate *s, const struct report_ctx *c)
{
    for (size_t i = 0; i < s->n; i++)
        s->v[i].present = false;
    if (!c->b || !(c->interval_s > 0))
        return;
    s->cursor = 0;
    pmu_fold(s, c, CSTATE_PMU_PKG);
    pmu_fold(s, c, CSTATE_PMU_CORE);
    const struct topology *t = &c->cur->topo;
    if (!c->a->cpuidle || !c->b->cpuidle)
        return;
    for (unsigned p = 0; p < t->npackages; p++)
        if (!pkg_by_pmu(c, t->package_ids[p]))
            mean_fold_pkg(s, c, t->package_ids[p]);
}

/* ---- the families ---- */

static const struct fam f_pkg =
    COUNTER("watt_cpu_package_cstate_seconds_total", "seconds",
            "Time the package spent in each package C-state (pc2..pc10), from the cstate_pkg "
            "perf PMU (cstate_die: per die), counted at the TSC's rate.");
static const struct fam f_core =
    COUNTER("watt_cpu_core_cstate_seconds_total", "seconds",
            "Time each core spent in each core C-state (cc1, cc3, cc6, cc7), from the "
            "cstate_core perf PMU.");
static const struct fam f_mean =
    COUNTER("watt_cpu_package_idle_state_mean_seconds_total", "seconds",
            "Where no package PMU measured the package: the mean over its CPUs of the time in "
            "each cpuidle state (a CPU-level view, not a package C-state).");
static const struct fam f_source =
    GAUGE("watt_cpu_package_cstate_source", NULL,
          "Where the package's C-state figures come from, always 1: source pmu (the "
          "cstate_pkg PMU), cpuidle_mean (the mean of its CPUs) or none (neither: no PMU and "
          "no cpuidle).");
static const struct fam f_unavail =
    GAUGE("watt_cpu_cstate_pmu_unavailable", NULL,
          "1 for each cstate PMU that measures nothing here, with the reason (no PMU in a "
          "virtual machine or on AMD, counters that could not be opened).");

static void render_totals(struct mw *w, const struct agent_cstate *s, const struct fam *f,
                          enum cs_kind kind)
{
    mw_fam(w, f);
    for (size_t i = 0; s && i < s->n; i++) {
        const struct cs_total *t = &s->v[i];
        if (t->kind != kind || !t->present)
            continue;
        mw_series(w);
        mw_label_int(w, "package", t->package);
        if (t->die >= 0)
            mw_label_int(w, "die", t->die);
        if (t->core >= 0)
            mw_label_int(w, "core", t->core);
        mw_label(w, "state", t->state);
        mw_value_double(w, t->seconds);
    }
}

static bool has_mean(const struct agent_cstate *s, int pkg)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (s->v[i].kind == K_MEAN && s->v[i].package == pkg && s->v[i].present)
            return true;
    return false;
}

static const char *source_of(const struct agent_cstate *s, const struct report_ctx *c, int pkg)
{
    if (pkg_by_pmu(c, pkg))
        return "pmu";
    return has_mean(s, pkg) ? "cpuidle_mean" : "none";
}

static void render_source(struct mw *w, const struct agent_cstate *s, const struct report_ctx *c)
{
    const struct topology *t = &c->cur->topo;
    if (!c->b || (!c->cur->cstate_pmu && !c->cur->cpuidle))
        return; /* one sample, or neither source read */
    mw_fam(w, &f_source);
    for (unsigned p = 0; p < t->npackages; p++) {
        mw_series(w);
        mw_label_int(w, "package", t->package_ids[p]);
        mw_label(w, "source", source_of(s, c, t->package_ids[p]));
        mw_value_u64(w, 1);
    }
}

static void render_unavailable(struct mw *w, const struct report_ctx *c)
{
    static const char *const names[_CSTATE_PMU_MAX] = {"cstate_core", "cstate_pkg"};
    const struct cstate_pmu_sample *y = c->cur->cstate_pmu;
    if (!y && !c->sense)
        return; /* a sample made by hand, not by the samplers: nothing to say */
    mw_fam(w, &f_unavail);
    for (int sc = CSTATE_PMU_PKG; sc >= CSTATE_PMU_CORE; sc--) {
        const struct cstate_pmu *p = y ? &y->r[sc].pmu : NULL;
        const char *why = NULL;
        if (!y)
            why = report_unavailable(c, SAMPLER_CSTATE_PMU);
        else if (!p->present)
            why = sc == CSTATE_PMU_PKG ? "no cstate_pkg perf PMU on this machine"
                                       : "no cstate_core perf PMU on this machine";
        else
            why = p->why;
        if (!y && !why)
            why = "the cstate PMUs were not read";
        if (!why)
            continue;
        mw_series(w);
        mw_label(w, "pmu", p && p->present && p->name ? p->name : names[sc]);
        mw_label(w, "reason", why);
        mw_value_u64(w, 1);
    }
}

void metrics_render_cstate(struct mw *w, const struct agent_cstate *s, const struct report_ctx *c)
{
    render_totals(w, s, &f_pkg, K_PKG);
    render_totals(w, s, &f_core, K_CORE);
    render_totals(w, s, &f_mean, K_MEAN);
    render_source(w, s, c);
    render_unavailable(w, c);
}
