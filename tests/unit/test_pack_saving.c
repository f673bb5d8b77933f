/* What packing would save (model/pack_saving.c): a plan on the intel-2s
 * fixture's real topology priced by the built-in models, checked against
 * the arithmetic of pack_saving.h done by hand. */
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

#include "host/topology.h"
#include "model/pack.h"
#include "model/pack_saving.h"

/* cmocka 1.1 has no assert_double_equal */
#define assert_near(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

static void read_fixture(const char *name, struct topology *ret)
{
    const char *dir = getenv("WATT_FIXTURES");
    assert_non_null(dir);
    char root[4096];
    snprintf(root, sizeof(root), "%s/%s", dir, name);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct diags d = {0};
    assert_int_equal(topology_read(h, ret, &d), 0);
    host_close(h);
}

static struct pack_saving price(const struct topology *t, const char *model, double busy,
                                double pkg_w, double dram_w, struct pack_plan *ret_plan)
{
    struct power_model m;
    assert_int_equal(model_builtin(model, &m), 0);
    struct pack_input in = {
        .topo = t, .demand_cpus = busy, .headroom = PACK_DEFAULT_HEADROOM, .min_cpus = 1};
    assert_int_equal(pack_plan_build(&in, ret_plan), 0);
    struct pack_saving_input si = {.topo = t,
                                   .plan = ret_plan,
                                   .model = &m,
                                   .busy_cpus = busy,
                                   .ghz = NAN,
                                   .rapl_package_w = pkg_w,
                                   .rapl_dram_w = dram_w};
    struct pack_saving s;
    assert_int_equal(pack_saving_estimate(&si, &s), 0);
    return s;
}

/* 20 % of intel-2s's 40 CPUs: 8 × 1.25 = 10 CPUs, cores 0-4 of package
 * 0 with their siblings; package 1 and 5 cores of package 0 idle. */
static void seed_2011_intel_2s(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("intel-2s", &t);
    struct pack_plan p;
    struct pack_saving s = price(&t, "seed-2011", 8, NAN, NAN, &p);
    assert_int_equal(s.packed_cpus, 10);
    assert_int_equal(s.idle_packages, 1);
    assert_int_equal(s.idle_cores, 15);
    assert_int_equal(s.idle_cpus, 30);
    assert_int_equal(s.idle_cpus_awake_pkg, 10);
    double idle = 7.29 * 40;                       /* 291.6 W */
    double pkg = 0.35 * idle / 2;                  /* 51.03 W */
    double dram = 0.15 * idle / 2;                 /* 21.87 W */
    double core = 10 * 0.5 * pkg / 20 * 0.5 * 0.9; /* 5.74 W */
    assert_near(s.idle_w, idle, 1e-9);
    assert_near(s.saving_pkg_w, pkg * 0.7, 1e-9);
    assert_near(s.saving_dram_w, dram * 0.5, 1e-9);
    assert_near(s.saving_core_w, core, 1e-9);
    assert_near(s.saving_w, pkg * 0.7 + dram * 0.5 + core, 1e-9);
    assert_false(s.pkg_measured);
    /* the model's ±30 % and the shares' ±50 % */
    assert_near(s.uncertainty_pct, hypot(50, 30), 1e-9);
    assert_near(s.low_w, s.saving_w * (1 - hypot(50, 30) / 100), 1e-9);
    char *why = pack_saving_assumptions(&s, &(struct power_model){.name = "seed-2011"});
    assert_non_null(strstr(why, "51.0 W per package awake and idle"));
    assert_non_null(strstr(why, "no RAPL package meter"));
    free(why);
    pack_plan_free(&p);
    topology_free(&t);
}

/* RAPL measuring twice the model's CPU part doubles the package and
 * core terms; the model's error no longer counts. */
static void rapl_scales(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("intel-2s", &t);
    struct pack_plan p0, p1;
    struct pack_saving base = price(&t, "specpower-2023", 8, NAN, NAN, &p0);
    double model_cpu = 0.35 * base.idle_w + 1.83 * 8;
    double model_dram = 0.15 * base.idle_w;
    struct pack_saving s = price(&t, "specpower-2023", 8, 2 * model_cpu, 3 * model_dram, &p1);
    assert_true(s.pkg_measured && s.dram_measured);
    assert_near(s.pkg_scale, 2, 1e-9);
    assert_near(s.saving_pkg_w, 2 * base.saving_pkg_w, 1e-9);
    assert_near(s.saving_core_w, 2 * base.saving_core_w, 1e-9);
    assert_near(s.saving_dram_w, 3 * base.saving_dram_w, 1e-9);
    assert_near(s.uncertainty_pct, 50, 1e-9);
    pack_plan_free(&p0);
    pack_plan_free(&p1);
    topology_free(&t);
}

/* A machine busy on every CPU frees nothing: no saving. */
static void busy_saves_nothing(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("intel-2s", &t);
    struct pack_plan p;
    struct pack_saving s = price(&t, "seed-2011", 40, NAN, NAN, &p);
    assert_true(p.saturated);
    assert_int_equal(s.idle_packages, 0);
    assert_near(s.saving_w, 0, 0);
    pack_plan_free(&p);
    struct pack_saving_input bad = {.topo = &t, .plan = &p, .busy_cpus = 1};
    assert_int_equal(pack_saving_estimate(&bad, &s), -EINVAL); /* no model */
    topology_free(&t);
}

/* RAPL sums: every channel of the scope, none missing. */
static void rapl_sum(void **state)
{
    (void)state;
    struct power_readings r = {0};
    struct power_reading *a = power_readings_add(&r);
    snprintf(a->source, sizeof(a->source), "rapl");
    a->scope = POWER_SCOPE_PACKAGE;
    a->watts = 40;
    struct power_reading *b = power_readings_add(&r);
    snprintf(b->source, sizeof(b->source), "rapl");
    b->scope = POWER_SCOPE_PACKAGE;
    b->watts = 30;
    assert_near(pack_saving_rapl_w(&r, POWER_SCOPE_PACKAGE), 70, 1e-12);
    assert_true(isnan(pack_saving_rapl_w(&r, POWER_SCOPE_DRAM)));
    b->watts = NAN; /* package-1 gave no rate: no sum */
    assert_true(isnan(pack_saving_rapl_w(&r, POWER_SCOPE_PACKAGE)));
    power_readings_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seed_2011_intel_2s),
        cmocka_unit_test(rapl_scales),
        cmocka_unit_test(busy_saves_nothing),
        cmocka_unit_test(rapl_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
