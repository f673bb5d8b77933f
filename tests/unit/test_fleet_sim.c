/* The fleet simulator on seeded random scenarios built in memory, with its
 * invariant checks on (opt.check), and the statistics behind the overload
 * detectors (src/fleet/model/stats.h) against hand-computed values. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "fleet/model/fleet.h"
#include "fleet/model/stats.h"

#define N_SCENARIOS 6

static const char *const policies[] = {
    "npa",         "dvfs",       "thr-mmt-0.8", "iqr-mmt-1.5", "mad-mmt-2.5", "lr-mmt-1.2",
    "lrr-mmt-1.2", "thr-mc-0.8", "thr-mu-0.8",  "thr-rs-0.8",  "watt",        "thr-mmt-1.0",
};
#define N_POLICIES (sizeof(policies) / sizeof(policies[0]))

static void assert_contains(const char *s, const char *needle)
{
    if (!strstr(s, needle))
        fail_msg("'%s' lacks '%s'", s, needle);
}

/* splitmix64: the scenarios' own generator, independent of the simulator's. */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned rand_in(uint64_t *s, unsigned lo, unsigned hi) /* lo..hi inclusive */
{
    return lo + (unsigned)(next_rand(s) % (hi - lo + 1));
}

struct scenario {
    unsigned idx;
    char desc[160];
    struct fleet_hosts hosts;
    struct fleet_trace trace;
    struct fleet_scenario sc;
};

static void hosts_of(const char *spec, struct fleet_hosts *h)
{
    struct fleet_error err = {{0}};
    if (fleet_hosts_parse(spec, strlen(spec), "test", h, &err) < 0)
        fail_msg("hosts '%s': %s", spec, err.msg);
}

static void synth_of(size_t n_vms, uint32_t n_steps, uint64_t seed, struct fleet_trace *t)
{
    struct fleet_error err = {{0}};
    struct fleet_synth s = {.n_vms = n_vms, .n_steps = n_steps, .seed = seed};
    if (fleet_trace_synth(&s, t, &err) < 0)
        fail_msg("synth %zu x %u seed %llu: %s", n_vms, n_steps, (unsigned long long)seed, err.msg);
}

/* Scenario I: 2..40 hosts, at least one G5 (CloudSim's 2500-MIPS VMs do
 * not fit a 1860-MIPS G4 core), 20..300 VMs over 48..288 steps. */
static void scenario_make(unsigned i, struct scenario *s)
{
    uint64_t g = 0x5eed0000u + i;
    unsigned n5 = rand_in(&g, 1, 20), n4 = rand_in(&g, 1, 40 - n5);
    unsigned n_vms = rand_in(&g, 20, 300), n_steps = rand_in(&g, 48, 288);
    uint64_t seed = next_rand(&g);
    char spec[64];

    if (i == 0) /* one tiny fleet always: far more demand than capacity */
        n4 = 1, n5 = 1;
    snprintf(spec, sizeof(spec), "%uxG4,%uxG5", n4, n5);
    hosts_of(spec, &s->hosts);
    synth_of(n_vms, n_steps, seed, &s->trace);
    snprintf(s->desc, sizeof(s->desc), "scenario %u (%s, %u VMs x %u steps, seed %llu)", i, spec,
             n_vms, n_steps, (unsigned long long)seed);
    s->idx = i;
    s->sc = (struct fleet_scenario){
        .hosts = &s->hosts,
        .trace = &s->trace,
        .vm_types = fleet_vm_types_cloudsim,
        .n_vm_types = 4,
    };
}

static void scenario_free(struct scenario *s)
{
    fleet_hosts_free(&s->hosts);
    fleet_trace_free(&s->trace);
}

static struct fleet_policy policy_of(const char *name)
{
    struct fleet_policy p;
    struct fleet_error err = {{0}};
    if (fleet_policy_parse(name, &p, &err) < 0)
        fail_msg("policy '%s': %s", name, err.msg);
    return p;
}

static struct fleet_options options_of(bool compat)
{
    struct fleet_options o;
    fleet_options_default(&o);
    o.compat = compat;
    o.check = true;
    o.series = true;
    return o;
}

static void run_or_fail(const struct scenario *s, const struct fleet_policy *p,
                        const struct fleet_options *o, struct fleet_result *r)
{
    struct fleet_error err = {{0}};
    int rc = fleet_sim_run(&s->sc, p, o, r, &err);
    if (rc != 0)
        fail_msg("%s %s %s: fleet_sim_run %d: %s", s->desc, o->compat ? "compat" : "realistic",
                 p->name, rc, err.msg);
}

#define SAME(a, b, field) (memcmp(&(a)->field, &(b)->field, sizeof((a)->field)) == 0)

/* Bit-identical numbers, series included. */
static bool same_result(const struct fleet_result *a, const struct fleet_result *b)
{
    if (!(SAME(a, b, energy_kwh) && SAME(a, b, slatah) && SAME(a, b, pdm) && SAME(a, b, slav) &&
          SAME(a, b, esv) && SAME(a, b, unserved) && SAME(a, b, migrations) &&
          SAME(a, b, power_ons) && SAME(a, b, power_offs) && SAME(a, b, max_active_hosts) &&
          SAME(a, b, mean_active_hosts) && SAME(a, b, vms_end) && SAME(a, b, lower_bound_kwh) &&
          SAME(a, b, n_series)))
        return false;
    for (size_t k = 0; k < a->n_series; k++) {
        const struct fleet_point *x = &a->series[k], *y = &b->series[k];
        if (!(SAME(x, y, t_s) && SAME(x, y, active_hosts) && SAME(x, y, vms) &&
              SAME(x, y, power_w) && SAME(x, y, sla_violation) && SAME(x, y, migrations)))
            return false;
    }
    return true;
}

static bool fraction(double x)
{
    return x >= 0 && x <= 1;
}

/* The checks on one run (the lower bound has its own test). */
static void check_result(const struct scenario *s, const struct fleet_policy *p,
                         const struct fleet_options *o, const struct fleet_result *r)
{
    const char *mode = o->compat ? "compat" : "realistic";
    if (!isfinite(r->energy_kwh) || r->energy_kwh < 0)
        fail_msg("%s %s %s: energy %g kWh", s->desc, mode, p->name, r->energy_kwh);
    if (!fraction(r->slatah) || !fraction(r->pdm) || !fraction(r->unserved) || !fraction(r->slav))
        fail_msg("%s %s %s: slatah %g pdm %g unserved %g slav %g: not fractions 0..1", s->desc,
                 mode, p->name, r->slatah, r->pdm, r->unserved, r->slav);
    if (fabs(r->slav - r->slatah * r->pdm) > 1e-12 || fabs(r->esv - r->energy_kwh * r->slav) > 1e-9)
        fail_msg("%s %s %s: slav %g esv %g, want slatah x pdm and energy x slav", s->desc, mode,
                 p->name, r->slav, r->esv);
    if ((p->alloc == FLEET_NPA || p->alloc == FLEET_DVFS) && r->migrations != 0)
        fail_msg("%s %s %s: %lu migrations, want 0", s->desc, mode, p->name, r->migrations);
    if (r->n_series == 0 || r->n_series > s->trace.n_steps)
        fail_msg("%s %s %s: %zu series points for %u steps", s->desc, mode, p->name, r->n_series,
                 s->trace.n_steps);
    if (r->max_active_hosts > s->hosts.n_hosts || r->vms_end > s->trace.n_vms)
        fail_msg("%s %s %s: %u hosts on of %zu, %zu VMs of %zu", s->desc, mode, p->name,
                 r->max_active_hosts, s->hosts.n_hosts, r->vms_end, s->trace.n_vms);
}

/* energy_kwh >= the fluid bounds, on the runs run_all() makes of these
 * policies: a bound is a bound only if no schedule can beat it. The bound
 * on what the run served holds always; the bound on the demand only for a
 * run that served all of it. Each violation is listed, and counted in
 * bound_violations, before test_lower_bound fails. */
static const char *const bounded[] = {"npa", "dvfs", "thr-mmt-0.8", "thr-mmt-1.0", "watt"};
static unsigned bound_runs, bound_violations;

static void check_bound(const struct scenario *s, const struct fleet_policy *p, bool compat,
                        const struct fleet_result *r)
{
    bool listed = false;
    for (size_t k = 0; k < sizeof(bounded) / sizeof(bounded[0]); k++)
        listed |= strcmp(p->name, bounded[k]) == 0;
    if (!listed)
        return;
    bound_runs++;
    bool served_all = r->unserved < 1e-9;
    if (!(r->energy_kwh >= r->served_bound_kwh * (1 - 1e-9)) ||
        (served_all && !(r->energy_kwh >= r->lower_bound_kwh * (1 - 1e-9)))) {
        print_message("# %s %s %s: energy %.4f kWh < bound %.4f (served %.4f, "
                      "unserved %.2g; %zu of %zu VMs at the end)\n",
                      s->desc, compat ? "compat" : "realistic", p->name, r->energy_kwh,
                      r->lower_bound_kwh, r->served_bound_kwh, r->unserved, r->vms_end,
                      s->trace.n_vms);
        bound_violations++;
    }
}

/* Every policy on scenario S in one mode: invariants, ranges, and NPA
 * (every host at full power) draws the most energy. On scenarios 0 and 4
 * (not all: the test runs under ASan too) each policy runs twice, and the
 * two runs must agree bit for bit. */
static void run_all(const struct scenario *s, bool compat)
{
    struct fleet_options o = options_of(compat);
    double energy[N_POLICIES];

    for (size_t i = 0; i < N_POLICIES; i++) {
        struct fleet_policy p = policy_of(policies[i]);
        struct fleet_result a, b;
        energy[i] = 0;
        /* MC's correlations take half the time of all the others together:
         * one scenario (116 VMs x 255 steps), not every other one */
        if (p.alloc == FLEET_MIGRATE && p.selection == FLEET_MC && s->idx != 2)
            continue;
        run_or_fail(s, &p, &o, &a);
        check_result(s, &p, &o, &a);
        check_bound(s, &p, compat, &a);
        if (s->idx % 4 == 0) {
            run_or_fail(s, &p, &o, &b);
            if (!same_result(&a, &b))
                fail_msg("%s %s %s: two runs with the same seed differ (energy %.17g vs %.17g)",
                         s->desc, compat ? "compat" : "realistic", p.name, a.energy_kwh,
                         b.energy_kwh);
            fleet_result_free(&b);
        }
        energy[i] = a.energy_kwh;
        fleet_result_free(&a);
    }
    for (size_t i = 1; i < N_POLICIES; i++)
        if (energy[i] > energy[0] * (1 + 1e-9))
            fail_msg("%s %s: %s draws %.4f kWh, more than npa's %.4f", s->desc,
                     compat ? "compat" : "realistic", policies[i], energy[i], energy[0]);
}

static void random_scenarios(bool compat)
{
    for (unsigned i = 0; i < N_SCENARIOS; i++) {
        struct scenario s;
        scenario_make(i, &s);
        print_message("# %s %s\n", compat ? "compat" : "realistic", s.desc);
        run_all(&s, compat);
        scenario_free(&s);
    }
}

static void test_random_compat(void **state)
{
    (void)state;
    random_scenarios(true);
}

static void test_random_realistic(void **state)
{
    (void)state;
    random_scenarios(false);
}

/* The bounds of the runs test_random_compat and test_random_realistic
 * made (check_bound): every scenario, both modes, the policies in
 * bounded[]. Runs after them (cmocka keeps the order). */
static void test_lower_bound(void **state)
{
    (void)state;
    if (bound_runs != 2 * N_SCENARIOS * (sizeof(bounded) / sizeof(bounded[0])))
        fail_msg("%u runs checked against the bound, want %zu (run the whole test)", bound_runs,
                 2 * N_SCENARIOS * (sizeof(bounded) / sizeof(bounded[0])));
    if (bound_violations)
        fail_msg("%u runs drew less energy than the lower bound (listed above)", bound_violations);
}

/* A VM bigger than every host: -EINVAL naming the VM, result untouched. */
static void expect_einval(const struct fleet_scenario *sc, bool compat, const char *name,
                          const char *needle)
{
    struct fleet_policy p = policy_of(name);
    struct fleet_options o = options_of(compat);
    struct fleet_error err = {{0}};
    struct fleet_result r, sentinel;
    memset(&r, 0x5a, sizeof(r));
    memcpy(&sentinel, &r, sizeof(r));
    int rc = fleet_sim_run(sc, &p, &o, &r, &err);
    if (rc != -EINVAL)
        fail_msg("%s %s: fleet_sim_run %d, want -EINVAL", compat ? "compat" : "realistic", name,
                 rc);
    assert_contains(err.msg, needle);
    assert_memory_equal(&r, &sentinel, sizeof(r));
}

static void test_vm_too_big(void **state)
{
    (void)state;
    struct fleet_hosts h;
    struct fleet_trace t;
    hosts_of("4xG4", &h);
    synth_of(20, 48, 3, &t);
    /* CloudSim's quarters rule: VM 0 is High-CPU Medium, 2500 MIPS > 1860 */
    struct fleet_scenario sc = {
        .hosts = &h, .trace = &t, .vm_types = fleet_vm_types_cloudsim, .n_vm_types = 4};
    for (size_t i = 0; i < N_POLICIES; i++) {
        expect_einval(&sc, true, policies[i], "synth-0");
        expect_einval(&sc, false, policies[i], "synth-0");
    }
    /* explicit types: all Micro (500 MIPS) but VM 7 */
    uint16_t type_of[20];
    for (size_t v = 0; v < 20; v++)
        type_of[v] = v == 7 ? 0 : 3;
    sc.vm_type_of = type_of;
    expect_einval(&sc, true, "iqr-mmt-1.5", "synth-7");
    expect_einval(&sc, false, "watt", "synth-7");
    fleet_trace_free(&t);
    fleet_hosts_free(&h);
}

/* The horizon, not the number of samples, sets the run time: a trace that
 * did not come through the parser (an API caller) is bounded too, and so
 * is the number of decision intervals. */
static void test_horizon_bound(void **state)
{
    (void)state;
    struct fleet_hosts h;
    struct fleet_trace t;
    hosts_of("4xG5", &h);
    synth_of(20, 48, 3, &t);
    struct fleet_scenario sc = {
        .hosts = &h, .trace = &t, .vm_types = fleet_vm_types_cloudsim, .n_vm_types = 4};
    t.step_s = 2 * FLEET_MAX_HORIZON_S / 48; /* 732 days in 48 steps */
    expect_einval(&sc, true, "npa", "more than the 31622400 s (366 days) a simulation may cover");
    expect_einval(&sc, false, "watt", "more than the 31622400 s (366 days)");
    t.step_s = 300;
    struct fleet_policy p = policy_of("watt");
    struct fleet_options o = options_of(false);
    struct fleet_result r;
    struct fleet_error err = {{0}};
    for (int k = 0; k < 2; k++) {
        o.interval_s = k ? 0.01 : 0; /* 1,440,000 intervals; none at all */
        assert_int_equal(fleet_sim_run(&sc, &p, &o, &r, &err), -EINVAL);
        assert_contains(err.msg, "intervals a simulation may take");
    }
    fleet_trace_free(&t);
    fleet_hosts_free(&h);
}

static void test_empty_fleet(void **state)
{
    (void)state;
    struct fleet_trace t;
    struct fleet_host_type g5 = *fleet_host_type_builtin("g5");
    struct fleet_hosts none = {.types = &g5, .n_types = 1};
    struct fleet_hosts no_types = {0};
    synth_of(20, 48, 3, &t);
    struct fleet_scenario sc = {
        .hosts = &none, .trace = &t, .vm_types = fleet_vm_types_cloudsim, .n_vm_types = 4};
    for (size_t i = 0; i < N_POLICIES; i++) {
        expect_einval(&sc, true, policies[i], "no hosts");
        expect_einval(&sc, false, policies[i], "no hosts");
    }
    sc.hosts = &no_types;
    expect_einval(&sc, true, "watt", "no hosts");
    expect_einval(&sc, false, "npa", "no hosts");
    fleet_trace_free(&t);
}

/* ---- stats.h ------------------------------------------------------------ */

#define assert_near(x, y, tol)                              \
    do {                                                    \
        double x_ = (x), y_ = (y);                          \
        if (!(fabs(x_ - y_) <= (tol)))                      \
            fail_msg("%s = %.17g, want %.17g", #x, x_, y_); \
    } while (0)

static void test_median(void **state)
{
    (void)state;
    const double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2}, one[] = {7};
    double big[101];
    for (size_t i = 0; i < 101; i++) /* a permutation of 0..100: the heap path */
        big[i] = (double)((i * 37) % 101);
    assert_near(stats_median(odd, 3), 3, 0);
    assert_near(stats_median(even, 4), 2.5, 0);
    assert_near(stats_median(one, 1), 7, 0);
    assert_near(stats_median(odd, 0), 0, 0);
    assert_near(stats_median(big, 101), 50, 0);
    assert_near(stats_median(big, 100), 49.5, 0); /* without (100 * 37) % 101 = 64 */
    assert_near(odd[0], 5, 0);                    /* sorts a copy */
}

static void test_iqr(void **state)
{
    (void)state;
    double v[13];
    for (size_t i = 0; i < 13; i++) /* 13, 12, ..., 1: unsorted on purpose */
        v[i] = (double)(13 - i);
    /* 1..12: indices round(3.25) - 1 = 2 and round(9.75) - 1 = 9: 10 - 3 */
    assert_near(stats_iqr(v + 1, 12), 7, 0);
    /* 1..13: round(3.5) - 1 = 3 and round(10.5) - 1 = 10 (Java rounds half
     * up): 11 - 4 = 7, where round-half-even would give 6 */
    assert_near(stats_iqr(v, 13), 7, 0);
    /* 1..10: round(2.75) - 1 = 2 and round(8.25) - 1 = 7: 8 - 3 */
    assert_near(stats_iqr(v + 3, 10), 5, 0);
    assert_near(v[0], 13, 0); /* sorts a copy */
    assert_near(stats_iqr(v, 0), 0, 0);
}

static void test_mad(void **state)
{
    (void)state;
    /* median 2; |x - 2| = 1 1 0 0 2 4 7; their median 1 */
    const double v[] = {9, 1, 2, 6, 2, 4, 1};
    const double w[] = {1, 2, 3, 4}; /* median 2.5; 1.5 .5 .5 1.5 -> 1 */
    assert_near(stats_mad(v, 7), 1, 0);
    assert_near(stats_mad(w, 4), 1, 0);
    assert_near(stats_mad(v, 0), 0, 0);
}

static void test_trim_zero_tail(void **state)
{
    (void)state;
    const double v[] = {1, 0, 2, 0, 0}, z[] = {0, 0, 0}, n[] = {0, 3};
    assert_int_equal(stats_trim_zero_tail(v, 5), 3);
    assert_int_equal(stats_trim_zero_tail(z, 3), 0);
    assert_int_equal(stats_trim_zero_tail(n, 2), 2);
    assert_int_equal(stats_trim_zero_tail(v, 0), 0);
}

static void test_linear_fit(void **state)
{
    (void)state;
    double y[10], w[10], a = -1, b = -1;
    for (size_t i = 0; i < 10; i++) /* y = 2 + 0.5 x, x = 1..10 */
        y[i] = 2 + 0.5 * (double)(i + 1);
    assert_int_equal(stats_linear_fit(y, NULL, 10, &a, &b), 0);
    assert_near(a, 2, 1e-12);
    assert_near(b, 0.5, 1e-12);
    stats_tricube_weights(w, 10);
    assert_int_equal(stats_linear_fit(y, w, 10, &a, &b), 0);
    assert_near(a, 2, 1e-12);
    assert_near(b, 0.5, 1e-12);
    /* degenerate: one point, or all weight on one point; out-params kept */
    a = b = 42;
    assert_int_equal(stats_linear_fit(y, NULL, 1, &a, &b), -EDOM);
    const double w1[3] = {0, 1, 0};
    assert_int_equal(stats_linear_fit(y, w1, 3, &a, &b), -EDOM);
    assert_near(a, 42, 0);
    assert_near(b, 42, 0);
}

static void test_tricube(void **state)
{
    (void)state;
    double w[30];
    for (size_t n = 2; n <= 30; n++) {
        stats_tricube_weights(w, n);
        assert_near(w[n - 1], 1, 1e-15); /* the newest point */
        assert_true(w[0] > 0);
        for (size_t i = 1; i < n; i++)
            if (!(w[i] > w[i - 1]))
                fail_msg("n=%zu: w[%zu] = %g <= w[%zu] = %g", n, i, w[i], i - 1, w[i - 1]);
    }
}

static void test_robust_fit(void **state)
{
    (void)state;
    double y[10], a, b, ols_a, ols_b;
    for (size_t i = 0; i < 10; i++) /* y = 1 + 2 x, one outlier on x = 3 */
        y[i] = 1 + 2 * (double)(i + 1);
    y[2] += 100;
    assert_int_equal(stats_linear_fit(y, NULL, 10, &ols_a, &ols_b), 0);
    assert_true(fabs(ols_b - 2) > 2); /* OLS is dragged far off (b = -1.03) */
    assert_int_equal(stats_robust_fit(y, 10, &a, &b), 0);
    assert_near(a, 1, 1e-9); /* the bisquare step gives the outlier weight 0 */
    assert_near(b, 2, 1e-9);
    /* no outlier: exact */
    y[2] -= 100;
    assert_int_equal(stats_robust_fit(y, 10, &a, &b), 0);
    assert_near(a, 1, 1e-9);
    assert_near(b, 2, 1e-9);
    assert_int_equal(stats_robust_fit(y, 1, &a, &b), -EDOM);
}

static void test_r_squared(void **state)
{
    (void)state;
    enum { N = 3, M = 20 };
    double d[N * M], r2 = -1;
    uint64_t g = 11;
    for (size_t t = 0; t < M; t++) { /* row 2 = 3 + 2 row0 - row1 */
        d[0 * M + t] = (double)(next_rand(&g) % 1000) / 10;
        d[1 * M + t] = (double)(next_rand(&g) % 1000) / 10;
        d[2 * M + t] = 3 + 2 * d[0 * M + t] - d[1 * M + t];
    }
    assert_int_equal(stats_r_squared_others(d, N, M, 2, &r2), 0);
    assert_near(r2, 1, 1e-9);
    /* row 0 is also an exact combination of the others */
    assert_int_equal(stats_r_squared_others(d, N, M, 0, &r2), 0);
    assert_near(r2, 1, 1e-9);
    /* two independent rows: R^2 well below 1 */
    assert_int_equal(stats_r_squared_others(d, 2, M, 0, &r2), 0);
    assert_true(r2 >= 0 && r2 < 0.9);
    /* too few samples for the unknowns */
    r2 = -7;
    assert_int_equal(stats_r_squared_others(d, N, N, 0, &r2), -EDOM);
    assert_near(r2, -7, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_iqr),
        cmocka_unit_test(test_mad),
        cmocka_unit_test(test_trim_zero_tail),
        cmocka_unit_test(test_linear_fit),
        cmocka_unit_test(test_tricube),
        cmocka_unit_test(test_robust_fit),
        cmocka_unit_test(test_r_squared),
        cmocka_unit_test(test_vm_too_big),
        cmocka_unit_test(test_empty_fleet),
        cmocka_unit_test(test_horizon_bound),
        cmocka_unit_test(test_random_compat),
        cmocka_unit_test(test_random_realistic),
        cmocka_unit_test(test_lower_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
