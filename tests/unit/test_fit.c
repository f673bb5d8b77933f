/* model/fit.c: least squares recovers known coefficients from noisy
 * synthetic points and refuses what cannot identify the model. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/host.h"
#include "model/fit.h"
#include "model/fit_store.h"
#include "model/model.h"
#include "sense/cpuidle.h"
#include "sense/sampler.h"
#include "tree.h"

/* A reproducible uniform in [0, 1) (no libc rand state: the same points
 * on every libc). */
static double uni(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* Gaussian noise (Box-Muller), sd 1. */
static double gauss(uint64_t *s)
{
    double u = uni(s), v = uni(s);
    return sqrt(-2.0 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

static double truth(unsigned cpus, double busy, double ghz)
{
    /* 40 W base, 0.5 W per idle CPU, 3 W per busy CPU at 2.5 GHz, f^2 */
    double f = isnan(ghz) ? 1 : pow(ghz / 2.5, 2.0);
    return 40 + 0.5 * cpus + 3.0 * busy * f;
}

static void expect_near(double got, double want, double tol, const char *what)
{
    if (fabs(got - want) > tol)
        fail_msg("%s: %g, want %g ± %g", what, got, want, tol);
}

/* One CPU count, no frequency: base + per-CPU is one term (64 + 40 W). */
static void test_fixed_cpus(void **state)
{
    (void)state;
    uint64_t seed = 1;
    struct fit_point p[200];
    for (int i = 0; i < 200; i++) {
        double busy = 48 * uni(&seed);
        p[i] = (struct fit_point){48, busy, NAN, truth(48, busy, NAN) + 2.0 * gauss(&seed)};
    }
    struct fit_result f;
    char *why = NULL;
    assert_int_equal(fit_power(p, 200, &f, &why), 0);
    assert_true(f.cpus_fixed);
    assert_false(f.ghz_varied);
    assert_true(f.ghz_exponent == 0);
    assert_true(f.idle_per_core_w == 0);
    expect_near(f.idle_base_w, 40 + 0.5 * 48, 1.0, "idle_base_w (the sum)");
    expect_near(f.active_per_core_w, 3.0, 0.05, "active_per_core_w");
    expect_near(f.rmse_w, 2.0, 0.4, "rmse (noise sd 2 W)");
    assert_true(f.r2 > 0.99);
    assert_int_equal(f.n, 200);
    assert_true(f.busy_max - f.busy_min > 40);
    assert_true(f.mape_pct > 0 && f.mape_pct < 3);
    struct power_model m;
    fit_to_model(&f, 1.5, NULL, &m);
    assert_int_equal(m.fit.cpus, 48); /* one CPU count: the model holds it */
}

/* CPU count and frequency vary: all three coefficients and the exponent. */
static void test_all_terms(void **state)
{
    (void)state;
    uint64_t seed = 7;
    struct fit_point p[400];
    static const unsigned cpus[] = {16, 32, 48, 64};
    for (int i = 0; i < 400; i++) {
        unsigned c = cpus[i % 4];
        double busy = c * uni(&seed), ghz = 1.5 + 2.0 * uni(&seed);
        p[i] = (struct fit_point){c, busy, ghz, truth(c, busy, ghz) + 1.0 * gauss(&seed)};
    }
    struct fit_result f;
    char *why = NULL;
    assert_int_equal(fit_power(p, 400, &f, &why), 0);
    assert_false(f.cpus_fixed);
    assert_true(f.ghz_varied);
    assert_true(f.ghz_exponent == 2.0);
    expect_near(f.idle_base_w, 40, 1.0, "idle_base_w");
    expect_near(f.idle_per_core_w, 0.5, 0.05, "idle_per_core_w");
    /* active is at ref_ghz (the mean GHz, about 2.5): 3 W x (ref/2.5)^2 */
    expect_near(f.active_per_core_w, 3.0 * pow(f.ref_ghz / 2.5, 2), 0.05, "active_per_core_w");
    struct power_model m;
    fit_to_model(&f, 1.4, "2026-12-04T23:59:00Z", &m);
    /* the model estimates what the truth says, within the noise */
    expect_near(model_estimate(&m, 32, 16, 3.0), truth(32, 16, 3.0), 1.0, "estimate");
    assert_string_equal(m.name, "fitted");
    assert_true(m.pue == 1.4);
    assert_int_equal(m.fit.n, 400);

    /* the file round-trips through model_parse */
    struct strbuf out = {0};
    model_format(&m, "written by a test\nsecond line", &out);
    struct power_model back;
    char *err = NULL;
    if (model_parse(strbuf_str(&out), "fitted.ini", &back, &err) < 0)
        fail_msg("%s", err);
    assert_int_equal(back.fit.n, 400);
    expect_near(back.fit.rmse_w, m.fit.rmse_w, 1e-4, "fit_rmse_w");
    expect_near(back.active_per_core_w, m.active_per_core_w, 1e-4, "active back");
    assert_string_equal(back.fit.time, "2026-12-04T23:59:00Z");
    assert_int_equal(back.fit.cpus, 0); /* the CPU count varied */
    strbuf_free(&out);
}

static void expect_refused(const struct fit_point *p, size_t n, const char *needle)
{
    struct fit_result f;
    char *why = NULL;
    assert_int_equal(fit_power(p, n, &f, &why), -EDOM);
    assert_non_null(why);
    if (!strstr(why, needle))
        fail_msg("reason '%s' lacks '%s'", why, needle);
    free(why);
}

static void test_refused(void **state)
{
    (void)state;
    struct fit_point p[64];
    /* too few */
    for (int i = 0; i < 5; i++)
        p[i] = (struct fit_point){8, i, NAN, 50 + 3 * i};
    expect_refused(p, 5, "too few points");
    /* unusable points do not count: watts NaN, busy above the CPUs */
    for (int i = 0; i < 10; i++)
        p[i] = (struct fit_point){8, i % 2 ? 9.0 : 1.0, NAN, i % 2 ? 60 : NAN};
    expect_refused(p, 10, "too few points: 0 usable");
    /* a week of idle: busy 0.02..0.12 */
    for (int i = 0; i < 64; i++)
        p[i] = (struct fit_point){8, 0.02 + 0.1 * (i % 5) / 4.0, NAN, 50 + (i % 3)};
    expect_refused(p, 64, "want a range of at least 0.2");
    /* CPU count changing only with load (busy = cpus/2): singular */
    for (int i = 0; i < 64; i++) {
        unsigned c = 4 + 4 * (i % 4);
        p[i] = (struct fit_point){c, c / 2.0, NAN, 30 + 2.0 * c};
    }
    expect_refused(p, 64, "singular");
    /* power falling with load */
    for (int i = 0; i < 64; i++)
        p[i] = (struct fit_point){8, 8.0 * i / 63, NAN, 100 - 5.0 * i / 63};
    expect_refused(p, 64, "active_per_core_w came out");
}

#define CPU "sys/devices/system/cpu/"

/* Two CPUs under haltpoll (this VM's driver): POLL and C1. One second
 * later (watt-faults): cpu0 spent 250 ms in POLL, cpu1 100 ms; cpu1's
 * C1 moved too, which is not busy. */
static struct sample *take(struct host *h)
{
    struct sample *s = calloc(1, sizeof(*s));
    assert_int_equal(topology_read(h, &s->topo, &s->diags), 0);
    assert_int_equal(cpuidle_sampler.collect(h, NULL, s), 0);
    return s;
}

static void test_poll_busy(void **state)
{
    (void)state;
    char *root = tree_new();
    tree_write(root, CPU "possible", "0-1\n");
    tree_write(root, CPU "online", "0-1\n");
    tree_write(root, CPU "cpuidle/current_driver", "haltpoll\n");
    tree_write(root, CPU "cpuidle/current_governor_ro", "haltpoll\n");
    static const char *names[] = {"POLL", "C1"};
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 2; k++) {
            char d[160];
#define W(f, ...)                                                 \
    snprintf(d, sizeof(d), CPU "cpu%d/cpuidle/state%d/" f, c, k); \
    tree_write(root, d, __VA_ARGS__)
            W("name", "%s\n", names[k]);
            W("desc", "%s\n", k ? "ACPI HLT" : "CPUIDLE CORE POLL IDLE");
            W("latency", "%d\n", k);
            W("residency", "%d\n", k);
            W("usage", "%d\n", 1000);
            W("time", "%d\n", 5000000 + 1000000 * k);
            W("disable", "0\n");
#undef W
        }
    tree_write(root, "watt-faults",
               CPU "cpu0/cpuidle/state0/time =5250000 from=2\n" CPU
                   "cpu1/cpuidle/state0/time =5100000 from=2\n" CPU
                   "cpu1/cpuidle/state1/time =6500000 from=2\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(cpuidle_sampler.probe(h, &st, &why), 1);
    struct sample *a = take(h), *b = take(h);
    double poll = fit_poll_cpus(a->cpuidle, b->cpuidle, 1.0);
    expect_near(poll, 0.35, 1e-9, "POLL CPUs over 1 s");
    /* over a 0.5 s window the same time is twice the share */
    expect_near(fit_poll_cpus(a->cpuidle, b->cpuidle, 0.5), 0.7, 1e-9, "POLL over 0.5 s");
    /* added to procstat's busy, capped at the CPUs */
    expect_near(fit_busy_cpus(1.0, poll, 2), 1.35, 1e-9, "busy + POLL");
    assert_true(fit_busy_cpus(1.9, poll, 2) == 2.0);
    assert_true(isnan(fit_busy_cpus(NAN, poll, 2)));
    expect_near(fit_busy_cpus(1.0, NAN, 2), 1.0, 1e-12, "no cpuidle: busy alone");
    /* no second sample or interval: unknown */
    assert_true(isnan(fit_poll_cpus(NULL, b->cpuidle, 1.0)));
    assert_true(isnan(fit_poll_cpus(a->cpuidle, b->cpuidle, 0)));
    /* a counter that went backwards (b before a) is left out */
    expect_near(fit_poll_cpus(b->cpuidle, a->cpuidle, 1.0), 0, 1e-12, "backwards");
    sample_free(a);
    sample_free(b);
    host_close(h);
    tree_free(root);
}

/* A week of idle after one busy hour: the busy points stay. */
static void test_store(void **state)
{
    (void)state;
    struct fit_store *s = calloc(1, sizeof(*s));
    assert_true(sizeof(*s) <= 4200);
    uint64_t seed = 3;
    for (int i = 0; i < 3600; i++) {
        double busy = 16 * uni(&seed);
        struct fit_point p = {16, busy, NAN, truth(16, busy, NAN)};
        assert_int_equal(fit_store_add(s, &p), 0);
    }
    for (int i = 0; i < 7 * 86400; i++) {
        double busy = 0.3 * uni(&seed);
        struct fit_point p = {16, busy, NAN, truth(16, busy, NAN)};
        fit_store_add(s, &p);
    }
    struct fit_point bad = {16, 17, NAN, 100};
    assert_int_equal(fit_store_add(s, &bad), -EINVAL);
    bad = (struct fit_point){16, 1, NAN, NAN};
    assert_int_equal(fit_store_add(s, &bad), -EINVAL);
    struct fit_point pts[FIT_STORE_MAX];
    size_t n = fit_store_points(s, pts);
    assert_int_equal(n, FIT_STORE_MAX);
    size_t busy = 0;
    for (size_t i = 0; i < n; i++)
        busy += pts[i].busy > 8;
    if (busy < FIT_STORE_MAX / 3)
        fail_msg("only %zu of %zu points busier than half after a week of idle", busy, n);
    struct fit_result f;
    char *why = NULL;
    assert_int_equal(fit_power(pts, n, &f, &why), 0);
    expect_near(f.active_per_core_w, 3.0, 0.01, "slope after a week of idle");
    assert_true(s->seen == 3600 + 7 * 86400);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_cpus), cmocka_unit_test(test_all_terms),
        cmocka_unit_test(test_refused),    cmocka_unit_test(test_poll_busy),
        cmocka_unit_test(test_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
