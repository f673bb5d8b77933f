/* verify: one measured window (two samples) reduced to what a tune moves,
 * and the before/after table. Watts come only from a meter; the model's
 * estimate is carried separately and always labelled an estimate. */
#include "tune/verify.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/table.h"
#include "base/util.h"
#include "host/fault.h"
#include "model/model.h"
#include "sense/clock.h"
#include "sense/cpufreq.h"
#include "sense/cpuidle.h"
#include "sense/irq.h"
#include "sense/latency.h"
#include "sense/sampler.h"
#include "view/report_power.h"
#include "view/window.h"

/* ---- building a window from two samples ---- */

/* Per-state sums over the CPUs measured in both samples. */
struct state_acc {
    double res_pct, entries;
};

static void states_init(struct tune_verify_window *w, const struct cpuidle_sample *b)
{
    unsigned n = 0;
    for (unsigned i = 0; i < b->ncpus; i++)
        if (b->cpus[i].nstates > n)
            n = b->cpus[i].nstates;
    w->nstates = n;
    w->state = xcalloc(n ? n : 1, sizeof(*w->state));
    for (unsigned k = 0; k < n; k++) {
        struct tune_verify_state *st = &w->state[k];
        st->latency_us = VAL_NONE;
        st->residency_pct = st->entries_per_s = st->entries_per_s_cpu = NAN;
        for (unsigned i = 0; i < b->ncpus && !st->name; i++)
            if (k < b->cpus[i].nstates) {
                const struct cpuidle_state *cs = &b->cpus[i].state[k];
                st->name = cs->name ? xstrdup(cs->name) : xasprintf("state%u", k);
                st->latency_us = cs->latency_us;
            }
    }
}

/* What the end of the window says about one CPU's states: disabled, and
 * excluded by the latency constraint in force. */
static void states_static(struct tune_verify_window *w, const struct cpuidle_cpu *cb,
                          const struct latency_sample *lat)
{
    for (unsigned k = 0; k < cb->nstates && k < w->nstates; k++) {
        struct tune_verify_state *st = &w->state[k];
        st->ncpus++;
        if (cb->state[k].disable == 1)
            st->ndisabled++;
        if (lat && latency_excludes_state(lat, cb->cpu, cb->state[k].latency_us))
            st->nexcluded++;
    }
}

static void build_cpuidle(struct tune_verify_window *w, const struct sample *a,
                          const struct sample *b, double interval_s)
{
    const struct cpuidle_sample *ia = a->cpuidle, *ib = b->cpuidle;
    w->idle_driver = ib->driver ? xstrdup(ib->driver) : NULL;
    w->idle_governor = ib->governor ? xstrdup(ib->governor) : NULL;
    w->ncpus = ib->ncpus;
    states_init(w, ib);
    struct state_acc *acc = xcalloc(w->nstates ? w->nstates : 1, sizeof(*acc));
    _cleanup_free_ double *res = xcalloc(w->nstates ? w->nstates : 1, sizeof(*res));
    unsigned measured = 0;
    double c0 = 0, wakeups = 0;
    for (unsigned i = 0; i < ib->ncpus; i++) {
        const struct cpuidle_cpu *cb = &ib->cpus[i];
        states_static(w, cb, b->latency);
        const struct cpuidle_cpu *ca = ia ? cpuidle_find_cpu(ia, cb->cpu) : NULL;
        double cpu_c0, cpu_wk;
        if (!ca || cpuidle_residency(ca, cb, interval_s * 1e6, res, &cpu_c0, &cpu_wk) < 0)
            continue; /* a CPU that went offline, or a counter that went backwards */
        measured++;
        c0 += cpu_c0;
        wakeups += cpu_wk;
        for (unsigned k = 0; k < cb->nstates; k++) {
            acc[k].res_pct += res[k];
            acc[k].entries += (double)(cb->state[k].usage - ca->state[k].usage);
        }
    }
    w->c0_pct = measured ? c0 / measured : NAN;
    w->wakeups_per_s = measured ? wakeups : NAN;
    for (unsigned k = 0; measured && k < w->nstates; k++) {
        w->state[k].residency_pct = acc[k].res_pct / measured;
        w->state[k].entries_per_s = acc[k].entries / interval_s;
        w->state[k].entries_per_s_cpu = w->state[k].entries_per_s / measured;
    }
    free(acc);
}

/* Interrupts per second summed over every per-CPU row of /proc/interrupts. */
static double irq_total_per_s(const struct irq_sample *a, const struct irq_sample *b,
                              double interval_s)
{
    if (!a || !b)
        return NAN;
    struct irq_rates r;
    struct diags d = {0};
    double sum = NAN;
    if (irq_rates(a, b, interval_s, &r, &d) == 0) {
        sum = 0;
        for (unsigned i = 0; i < r.ncpus; i++)
            if (!isnan(r.cpu_per_s[i]))
                sum += r.cpu_per_s[i];
        irq_rates_free(&r);
    }
    diags_free(&d);
    return sum;
}

static void build_latency(struct tune_verify_window *w, const struct latency_sample *l)
{
    w->global_latency_us = LATENCY_UNKNOWN;
    w->min_resume_us = LATENCY_UNKNOWN;
    if (!l)
        return;
    w->global_latency_us = l->global_us;
    for (unsigned i = 0; i < l->ncpus; i++) {
        int64_t v = l->cpus[i].resume_us;
        if (v != LATENCY_UNKNOWN && (w->min_resume_us == LATENCY_UNKNOWN || v < w->min_resume_us))
            w->min_resume_us = v;
    }
    struct strbuf sb = {0};
    for (size_t i = 0; i < l->nholders; i++)
        strbuf_appendf(&sb, "%s%s[%d]", i ? ", " : "",
                       l->holders[i].comm ? l->holders[i].comm : "?", l->holders[i].pid);
    w->latency_holders = l->nholders ? strbuf_steal(&sb) : NULL;
    strbuf_free(&sb);
}

/* One value for all CPUs, "mixed" when they differ, NULL when none has it. */
static char *common_str(const struct cpufreq_sample *f, bool epp)
{
    const char *v = NULL;
    for (unsigned i = 0; i < f->ncpus; i++) {
        const char *x = epp ? f->cpus[i].epp : f->cpus[i].governor;
        if (!x)
            continue;
        if (v && !streq(v, x))
            return xstrdup("mixed");
        v = x;
    }
    return v ? xstrdup(v) : NULL;
}

/* The power summary every face shows (view/report_power.h), with the
 * default model (vm-vcpu in a VM): watts only from a meter, the model's
 * figure kept apart as the estimate. */
static void build_power(struct tune_verify_window *w, const struct sample *a,
                        const struct sample *b, double interval_s)
{
    struct power_model m;
    model_default(&m);
    if (clock_is_vm(b->clock))
        model_builtin("vm-vcpu", &m);
    struct diags d = {0};
    struct report_ctx c = {.a = a, .b = b, .cur = b, .interval_s = interval_s, .diags = &d};
    struct power_summary ps;
    report_power_build(&c, &m, &ps);
    diags_free(&d);
    if (ps.measured) {
        w->watts = ps.it_w;
        w->meter = xasprintf("%s, covers %s", ps.source, ps.coverage);
    } else {
        w->no_meter_why =
            xstrdup(ps.readings.n > 0 ? "the power meters gave no rate over the window"
                                      : "no meter here: no RAPL, no hwmon power sensor, "
                                        "no ACPI power meter");
    }
    w->est_watts = ps.estimated_w;
    w->est_model = xstrdup(ps.model.name);
    tune_verify_packages_build(w, &c, &ps.readings);
    power_summary_free(&ps);
}

int tune_verify_window_build(const struct sample *a, const struct sample *b, double interval_s,
                             bool recorded, struct tune_verify_window **ret)
{
    if (!a || !b || !(interval_s > 0))
        return -EINVAL;
    struct tune_verify_window *w = xcalloc(1, sizeof(*w));
    *w = (struct tune_verify_window){
        .seconds = interval_s,
        .recorded = recorded,
        .c0_pct = NAN,
        .wakeups_per_s = NAN,
        .busy_mhz = NAN,
        .watts = NAN,
        .est_watts = NAN,
        .workload_runs_per_s = NAN,
    };
    if (b->cpuidle)
        build_cpuidle(w, a, b, interval_s);
    w->irq_per_s = irq_total_per_s(a->irq, b->irq, interval_s);
    build_latency(w, b->latency);
    if (b->cpufreq) {
        w->freq_governor = common_str(b->cpufreq, false);
        w->epp = common_str(b->cpufreq, true);
        w->busy_mhz = 1000.0 * cpufreq_mean_busy_ghz(a->cpufreq, b->cpufreq);
    }
    build_power(w, a, b, interval_s);
    if (!b->cpuidle && isnan(w->irq_per_s) && isnan(w->watts)) {
        tune_verify_window_free(w);
        return -ENODATA;
    }
    *ret = w;
    return 0;
}

void tune_verify_window_free(struct tune_verify_window *w)
{
    if (!w)
        return;
    for (unsigned k = 0; k < w->nstates; k++)
        free(w->state[k].name);
    free(w->state);
    free(w->idle_driver);
    free(w->idle_governor);
    free(w->latency_holders);
    free(w->freq_governor);
    free(w->epp);
    free(w->meter);
    free(w->no_meter_why);
    free(w->est_model);
    tune_verify_packages_free(w);
    free(w);
}

/* ---- measuring ---- */

/* A recorded root replays one second: its watt-faults make the second read
 * of each moving counter the machine one second later. Counting the reads
 * afresh lets every window replay that second, so before and after are
 * measured the same way (the tune writes into the copy show up as they
 * are: disabled states, resume latencies). */
static void replay_from_start(struct host *h)
{
    for (size_t i = 0; i < h->nfault; i++)
        if (!h->fault[i].write) /* write faults (op=write) keep their count */
            h->fault[i].seen = 0;
}

int tune_verify_measure(struct host *h, double seconds, struct tune_verify_window **ret,
                        char **ret_err)
{
    if (!(seconds > 0) || seconds > 3600) {
        *ret_err =
            xasprintf("verify interval %g s is out of range: want 0 < seconds <= 3600", seconds);
        return -EINVAL;
    }
    if (!h->live)
        replay_from_start(h);
    struct sense *s;
    sense_open(h, &s);
    /* Devices are not part of the window, and their scan is the slowest
     * sampler on big machines. */
    s->usable[SAMPLER_DEVICES] = 0;
    /* a recorded root's window is its one recorded second */
    struct window win;
    int r = window_take(s, h->live, h->live ? seconds : 1.0, &win);
    if (r < 0) {
        *ret_err = xasprintf("sampling %s failed: %s", h->root, strerror(-r));
        sense_close(s);
        return r;
    }
    r = tune_verify_window_build(win.a, win.b, win.seconds, !h->live, ret);
    if (r < 0)
        *ret_err = xasprintf("nothing to measure under %s: no cpuidle, no interrupt counts "
                             "and no power meter could be read",
                             h->root);
    window_clear(&win);
    sense_close(s);
    return r;
}

/* ---- judging and formatting changes ---- */

bool tune_verify_is_noise(enum tune_verify_kind k, double before, double after)
{
    if (isnan(before) || isnan(after))
        return false;
    double diff = fabs(after - before);
    if (k == TUNE_VERIFY_PCT)
        return diff < TUNE_VERIFY_NOISE_PTS;
    return diff < TUNE_VERIFY_NOISE_FLOOR || diff < TUNE_VERIFY_NOISE_REL * fabs(before);
}

void tune_verify_format_change(char *buf, size_t size, enum tune_verify_kind k, double before,
                               double after)
{
    if (isnan(before) || isnan(after)) {
        snprintf(buf, size, "-");
        return;
    }
    double diff = after - before;
    if (diff == 0) {
        snprintf(buf, size, "same");
        return;
    }
    const char *noise = tune_verify_is_noise(k, before, after) ? " ~noise" : "";
    int dec = fabs(diff) < 10 ? 1 : 0;
    if (fabs(diff) < 0.05) /* would print as "-0.0": a sign without a change */
        snprintf(buf, size, "0.0%s%s", k == TUNE_VERIFY_PCT ? " pts" : "", noise);
    else if (k == TUNE_VERIFY_PCT)
        snprintf(buf, size, "%+.*f pts%s", dec, diff, noise);
    else if (before != 0)
        snprintf(buf, size, "%+.*f (%+.0f %%)%s", dec, diff, 100.0 * diff / fabs(before), noise);
    else
        snprintf(buf, size, "%+.*f%s", dec, diff, noise);
}

/* ---- the table ---- */

struct vtab {
    struct table t;
    bool pair; /* before and after, with a change column */
};

static void num(char *buf, size_t size, double v)
{
    if (isnan(v))
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.*f", fabs(v) < 100 ? 1 : 0, v);
}

static void row_str(struct vtab *vt, const char *label, const char *b, const char *a)
{
    if (!vt->pair) {
        table_add(&vt->t, label, b);
        return;
    }
    table_add(&vt->t, label, b, a, streq(a, b) ? "" : "changed");
}

static void row_num(struct vtab *vt, const char *label, enum tune_verify_kind k, double b,
                    const double *a)
{
    char sb[32], sa[32], chg[64];
    num(sb, sizeof(sb), b);
    if (!vt->pair) {
        table_add(&vt->t, label, sb);
        return;
    }
    num(sa, sizeof(sa), *a);
    tune_verify_format_change(chg, sizeof(chg), k, b, *a);
    table_add(&vt->t, label, sb, sa, chg);
}

static char *fmt_latency(int64_t v)
{
    if (v == LATENCY_NONE)
        return xstrdup("none");
    if (v == LATENCY_UNKNOWN)
        return xstrdup("unreadable");
    return xasprintf("%lld us", (long long)v);
}

/* The after window's state matching before's state k: same index and
 * name, else the same name anywhere. */
static const struct tune_verify_state *match_state(const struct tune_verify_window *after,
                                                   const struct tune_verify_state *st, unsigned k)
{
    if (k < after->nstates && streq(after->state[k].name, st->name))
        return &after->state[k];
    for (unsigned i = 0; i < after->nstates; i++)
        if (streq(after->state[i].name, st->name))
            return &after->state[i];
    return NULL;
}

static void rows_state(struct vtab *vt, const struct tune_verify_state *b,
                       const struct tune_verify_state *a)
{
    static const struct tune_verify_state none = {
        .residency_pct = NAN, .entries_per_s = NAN, .entries_per_s_cpu = NAN};
    if (!a)
        a = &none;
    _cleanup_free_ char *head =
        b->latency_us == VAL_NONE
            ? xasprintf("%s (exit latency ?)", b->name)
            : xasprintf("%s (exit %llu us)", b->name, (unsigned long long)b->latency_us);
    row_str(vt, head, "", "");
    row_num(vt, "  residency %", TUNE_VERIFY_PCT, b->residency_pct, &a->residency_pct);
    row_num(vt, "  entries/s, all CPUs", TUNE_VERIFY_RATE, b->entries_per_s, &a->entries_per_s);
    row_num(vt, "  entries/s per CPU", TUNE_VERIFY_RATE, b->entries_per_s_cpu,
            &a->entries_per_s_cpu);
    _cleanup_free_ char *db = xasprintf("%u of %u", b->ndisabled, b->ncpus);
    _cleanup_free_ char *da = xasprintf("%u of %u", a->ndisabled, a->ncpus);
    row_str(vt, "  disabled on CPUs", db, da);
    _cleanup_free_ char *eb = xasprintf("%u of %u", b->nexcluded, b->ncpus);
    _cleanup_free_ char *ea = xasprintf("%u of %u", a->nexcluded, a->ncpus);
    row_str(vt, "  excluded by latency limit", eb, ea);
}

static void rows_cpuidle(struct vtab *vt, const struct tune_verify_window *b,
                         const struct tune_verify_window *a)
{
    for (unsigned k = 0; k < b->nstates; k++)
        rows_state(vt, &b->state[k], a ? match_state(a, &b->state[k], k) : NULL);
    for (unsigned k = 0; a && k < a->nstates; k++)
        if (!match_state(b, &a->state[k], k)) {
            _cleanup_free_ char *l = xasprintf("%s (only after)", a->state[k].name);
            row_str(vt, l, "-", "present");
        }
    row_num(vt, "busy (C0) %", TUNE_VERIFY_PCT, b->c0_pct, a ? &a->c0_pct : NULL);
    row_num(vt, "wake-ups/s (idle entries)", TUNE_VERIFY_RATE, b->wakeups_per_s,
            a ? &a->wakeups_per_s : NULL);
}

static void rows_latency(struct vtab *vt, const struct tune_verify_window *b,
                         const struct tune_verify_window *a)
{
    _cleanup_free_ char *gb = fmt_latency(b->global_latency_us);
    _cleanup_free_ char *ga = a ? fmt_latency(a->global_latency_us) : NULL;
    row_str(vt, "cpu_dma_latency limit", gb, ga);
    if (b->latency_holders || (a && a->latency_holders))
        row_str(vt, "  held open by", b->latency_holders ? b->latency_holders : "-",
                a && a->latency_holders ? a->latency_holders : "-");
    _cleanup_free_ char *rb = fmt_latency(b->min_resume_us);
    _cleanup_free_ char *ra = a ? fmt_latency(a->min_resume_us) : NULL;
    row_str(vt, "smallest per-CPU resume latency", rb, ra);
}

static void rows_freq(struct vtab *vt, const struct tune_verify_window *b,
                      const struct tune_verify_window *a)
{
    if (!b->freq_governor && !(a && a->freq_governor)) {
        row_str(vt, "cpufreq governor / EPP", "no cpufreq here", "no cpufreq here");
        return;
    }
    row_str(vt, "cpufreq governor", b->freq_governor ? b->freq_governor : "-",
            a && a->freq_governor ? a->freq_governor : "-");
    row_str(vt, "EPP", b->epp ? b->epp : "-", a && a->epp ? a->epp : "-");
    row_num(vt, "busy MHz", TUNE_VERIFY_RATE, b->busy_mhz, a ? &a->busy_mhz : NULL);
}

static void rows_power(struct vtab *vt, const struct tune_verify_window *b,
                       const struct tune_verify_window *a)
{
    if (!isnan(b->watts) || (a && !isnan(a->watts)))
        row_num(vt, "power W, measured", TUNE_VERIFY_RATE, b->watts, a ? &a->watts : NULL);
    else
        row_str(vt, "power W, measured", "no meter", "no meter");
    _cleanup_free_ char *l =
        xasprintf("power W, estimate (model %s)", b->est_model ? b->est_model : "?");
    row_num(vt, l, TUNE_VERIFY_RATE, b->est_watts, a ? &a->est_watts : NULL);
}

/* The after window's entry for package id, or NULL. */
static const struct tune_verify_package *match_pkg(const struct tune_verify_window *a, int id)
{
    for (unsigned k = 0; a && k < a->npackages; k++)
        if (a->pkg[k].package == id)
            return &a->pkg[k];
    return NULL;
}

static void rows_pc(struct vtab *vt, const struct tune_verify_package *b,
                    const struct tune_verify_package *a)
{
    for (unsigned e = 0; e < b->npc; e++) {
        double av = NAN;
        for (unsigned i = 0; a && i < a->npc; i++)
            if (a->pc_number[i] == b->pc_number[e])
                av = a->pc_pct[i];
        _cleanup_free_ char *l = xasprintf("  PC%u %% (package PMU)", b->pc_number[e]);
        row_num(vt, l, TUNE_VERIFY_PCT, b->pc_pct[e], &av);
    }
}

/* Per package: what packing and deep package sleep move. Package
 * C-states only where the cstate_pkg PMU counted (the footer says why
 * not); watts only where RAPL measured. */
static void rows_packages(struct vtab *vt, const struct tune_verify_window *b,
                          const struct tune_verify_window *a)
{
    static const struct tune_verify_package none = {
        .idle_pct = NAN, .deepest_pct = NAN, .busy_mhz = NAN, .package_w = NAN, .dram_w = NAN};
    for (unsigned k = 0; k < b->npackages; k++) {
        const struct tune_verify_package *pb = &b->pkg[k];
        const struct tune_verify_package *pa = match_pkg(a, pb->package);
        if (!pa)
            pa = &none;
        _cleanup_free_ char *head =
            xasprintf("package %d (%u CPUs with cpuidle)", pb->package, pb->ncpus);
        row_str(vt, head, "", "");
        row_num(vt, "  idle % (mean of its CPUs)", TUNE_VERIFY_PCT, pb->idle_pct, &pa->idle_pct);
        row_num(vt, "  deepest state %", TUNE_VERIFY_PCT, pb->deepest_pct, &pa->deepest_pct);
        rows_pc(vt, pb, a ? pa : NULL);
        if (!isnan(pb->busy_mhz) || !isnan(pa->busy_mhz))
            row_num(vt, "  busy MHz (APERF/MPERF)", TUNE_VERIFY_RATE, pb->busy_mhz, &pa->busy_mhz);
        if (!isnan(pb->package_w) || !isnan(pa->package_w))
            row_num(vt, "  RAPL package W", TUNE_VERIFY_RATE, pb->package_w, &pa->package_w);
        if (!isnan(pb->dram_w) || !isnan(pa->dram_w))
            row_num(vt, "  RAPL DRAM W", TUNE_VERIFY_RATE, pb->dram_w, &pa->dram_w);
    }
}

static void print_header(FILE *f, const struct tune_verify_window *b,
                         const struct tune_verify_window *a)
{
    if (b->recorded)
        fprintf(f, "Verify: a recorded root; each window replays its one recorded second.\n");
    else if (a)
        fprintf(f, "Verify: measured %.1f s before and %.1f s after.\n", b->seconds, a->seconds);
    else
        fprintf(f, "Verify: measured over %.1f s.\n", b->seconds);
    if (b->idle_driver || b->idle_governor)
        fprintf(f, "cpuidle driver %s, governor %s, %u CPUs.\n",
                b->idle_driver ? b->idle_driver : "?", b->idle_governor ? b->idle_governor : "?",
                b->ncpus);
    else
        fprintf(f, "No cpuidle here: no C-state residency to show.\n");
}

/* The haltpoll governor picks POLL only for a 0 us latency limit and else
 * halts; it never reads the disable files (drivers/cpuidle/governors/
 * haltpoll.c: haltpoll_select()), so disabled states there change nothing. */
static const char *disabled_ignored_note(const struct tune_verify_window *w)
{
    if (!w || !w->idle_governor || !streq(w->idle_governor, "haltpoll"))
        return NULL;
    for (unsigned k = 0; k < w->nstates; k++)
        if (w->state[k].ndisabled > 0)
            return "the haltpoll cpuidle governor ignores disabled states: only a 0 us latency "
                   "limit (cpu_dma_latency, pm_qos_resume_latency_us) makes it poll instead of "
                   "halting";
    return NULL;
}

/* POLL spins in the idle loop: /proc/stat counts that time as idle, so a
 * model fed by utilisation sees less work while the CPU burns about what
 * busy code burns. Said when POLL holds a real share of the time. */
static const char *poll_estimate_note(const struct tune_verify_window *w)
{
    if (!w || w->meter)
        return NULL;
    for (unsigned k = 0; k < w->nstates; k++)
        if (w->state[k].name && streq(w->state[k].name, "POLL") && w->state[k].residency_pct >= 5.0)
            return "POLL residency is counted as idle time, yet polling draws about the power "
                   "of busy code: the model's estimate is too low while CPUs poll";
    return NULL;
}

static void print_footer(FILE *f, const struct tune_verify_window *b,
                         const struct tune_verify_window *a)
{
    const struct tune_verify_window *w = a ? a : b;
    const char *note = disabled_ignored_note(w);
    if (note)
        fprintf(f, "Note: %s.\n", note);
    if ((note = poll_estimate_note(w)))
        fprintf(f, "Note: %s.\n", note);
    if (w->npackages && w->pc_why)
        fprintf(f, "Package C-states: not measured: %s.\n", w->pc_why);
    if (w->meter)
        fprintf(f, "Power measured by %s.\n", w->meter);
    else
        fprintf(f, "Power: %s; the estimate is the model's, not a measurement.\n",
                w->no_meter_why ? w->no_meter_why : "no meter here");
    if (a)
        fprintf(f,
                "~noise: a rate that moved less than %.0f %% (or %.0f/s), a share less "
                "than %.0f point.\n",
                100 * TUNE_VERIFY_NOISE_REL, TUNE_VERIFY_NOISE_FLOOR, TUNE_VERIFY_NOISE_PTS);
}

void tune_verify_print(FILE *f, const struct tune_verify_window *before,
                       const struct tune_verify_window *after)
{
    struct vtab vt = {.pair = after != NULL};
    if (vt.pair)
        table_init(&vt.t, "", ">before", ">after", ">change", NULL);
    else
        table_init(&vt.t, "", ">value", NULL);
    print_header(f, before, after);
    rows_cpuidle(&vt, before, after);
    row_num(&vt, "interrupts/s", TUNE_VERIFY_RATE, before->irq_per_s,
            after ? &after->irq_per_s : NULL);
    rows_latency(&vt, before, after);
    rows_freq(&vt, before, after);
    rows_power(&vt, before, after);
    rows_packages(&vt, before, after);
    if (!isnan(before->workload_runs_per_s) || (after && !isnan(after->workload_runs_per_s))) {
        row_num(&vt, "workload runs/s (--workload)", TUNE_VERIFY_RATE, before->workload_runs_per_s,
                after ? &after->workload_runs_per_s : NULL);
        _cleanup_free_ char *fb = xasprintf("%" PRIu64, before->workload_failed);
        _cleanup_free_ char *fa = after ? xasprintf("%" PRIu64, after->workload_failed) : NULL;
        row_str(&vt, "  runs failed", fb, fa);
    }
    struct strbuf out = {0};
    table_render(&vt.t, &out, 120);
    fputs(strbuf_str(&out), f);
    strbuf_free(&out);
    table_free(&vt.t);
    print_footer(f, before, after);
}

/* ---- JSON ---- */

/* A constraint: the µs value, null when none; unreadable says which. */
static void json_latency(struct json *j, const char *key, int64_t v)
{
    json_key(j, key);
    json_object_begin(j);
    json_kv_bool(j, "constrained", v != LATENCY_NONE && v != LATENCY_UNKNOWN);
    json_kv_bool(j, "readable", v != LATENCY_UNKNOWN);
    if (v == LATENCY_NONE || v == LATENCY_UNKNOWN)
        json_kv_null(j, "us");
    else
        json_kv_i64(j, "us", v);
    json_object_end(j);
}

static void json_state(struct json *j, const struct tune_verify_state *st)
{
    json_object_begin(j);
    json_kv_string(j, "name", st->name);
    if (st->latency_us == VAL_NONE)
        json_kv_null(j, "exit_latency_us");
    else
        json_kv_u64(j, "exit_latency_us", st->latency_us);
    json_kv_double(j, "residency_pct", st->residency_pct);
    json_kv_double(j, "entries_per_s", st->entries_per_s);
    json_kv_double(j, "entries_per_s_per_cpu", st->entries_per_s_cpu);
    json_kv_u64(j, "cpus", st->ncpus);
    json_kv_u64(j, "disabled_cpus", st->ndisabled);
    json_kv_u64(j, "excluded_cpus", st->nexcluded);
    json_object_end(j);
}

static void json_window(struct json *j, const struct tune_verify_window *w)
{
    json_object_begin(j);
    json_kv_double(j, "seconds", w->seconds);
    json_kv_bool(j, "recorded", w->recorded);
    json_kv_u64(j, "cpus", w->ncpus);
    json_kv_string(j, "idle_driver", w->idle_driver);
    json_kv_string(j, "idle_governor", w->idle_governor);
    json_key(j, "states");
    json_array_begin(j);
    for (unsigned k = 0; k < w->nstates; k++)
        json_state(j, &w->state[k]);
    json_array_end(j);
    json_kv_double(j, "c0_pct", w->c0_pct);
    json_kv_double(j, "wakeups_per_s", w->wakeups_per_s);
    json_kv_double(j, "interrupts_per_s", w->irq_per_s);
    json_latency(j, "cpu_dma_latency", w->global_latency_us);
    json_kv_string(j, "cpu_dma_latency_holders", w->latency_holders);
    json_latency(j, "min_resume_latency", w->min_resume_us);
    json_kv_string(j, "cpufreq_governor", w->freq_governor);
    json_kv_string(j, "epp", w->epp);
    json_kv_double(j, "busy_mhz", w->busy_mhz);
    json_kv_double(j, "watts", w->watts);
    json_kv_string(j, "meter", w->meter);
    json_kv_string(j, "no_meter", w->no_meter_why);
    json_kv_double(j, "estimated_watts", w->est_watts);
    json_kv_string(j, "estimate_model", w->est_model);
    tune_verify_packages_json(j, w);
    json_kv_double(j, "workload_runs_per_s", w->workload_runs_per_s);
    if (isnan(w->workload_runs_per_s)) {
        json_kv_null(j, "workload_runs");
        json_kv_null(j, "workload_failed");
    } else {
        json_kv_u64(j, "workload_runs", w->workload_runs);
        json_kv_u64(j, "workload_failed", w->workload_failed);
    }
    json_object_end(j);
}

void tune_verify_json(struct json *j, const struct tune_verify_window *before,
                      const struct tune_verify_window *after)
{
    json_object_begin(j);
    json_kv_double(j, "seconds", before->seconds);
    json_key(j, "noise");
    json_object_begin(j);
    json_kv_double(j, "rate_rel", TUNE_VERIFY_NOISE_REL);
    json_kv_double(j, "rate_floor_per_s", TUNE_VERIFY_NOISE_FLOOR);
    json_kv_double(j, "share_pts", TUNE_VERIFY_NOISE_PTS);
    json_object_end(j);
    json_key(j, "notes");
    json_array_begin(j);
    const char *note = disabled_ignored_note(after ? after : before);
    if (note)
        json_string(j, note);
    if ((note = poll_estimate_note(after ? after : before)))
        json_string(j, note);
    json_array_end(j);
    json_key(j, "before");
    json_window(j, before);
    json_key(j, "after");
    if (after)
        json_window(j, after);
    else
        json_null(j);
    json_object_end(j);
}
