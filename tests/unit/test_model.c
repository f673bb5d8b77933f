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

#include "model/model.h"
#include "model/power.h"

static void test_parse(void **state)
{
    struct power_model m;
    char *err = NULL;
    assert_int_equal(model_parse("[model]\nname = seed-2011\nidle_base_w = 0\n"
                                 "idle_per_core_w = 7.29\nactive_per_core_w = 12.7\npue = 2\n",
                                 "t.ini", &m, &err),
                     0);
    assert_string_equal(m.name, "seed-2011");
    /* the seed's 48-core 2011 server: 350 W idle, 960 W busy */
    assert_true(fabs(model_estimate(&m, 48, 0, NAN) - 349.92) < 0.01);
    assert_true(fabs(model_estimate(&m, 48, 48, NAN) - 959.52) < 0.01);
    /* more busy CPUs than CPUs is clamped */
    assert_true(fabs(model_estimate(&m, 48, 60, NAN) - 959.52) < 0.01);
}

static void expect_error(const char *text, const char *needle)
{
    struct power_model m;
    char *err = NULL;
    assert_int_equal(model_parse(text, "bad.ini", &m, &err), -EINVAL);
    assert_non_null(err);
    if (!strstr(err, needle))
        fail_msg("error '%s' lacks '%s'", err, needle);
    free(err);
}

static void test_bad(void **state)
{
    expect_error("[model]\nidle_base_w = -3\n", "bad.ini:2: idle_base_w = '-3'");
    expect_error("[model]\nidle_base_w = lots\n", "want a number");
    expect_error("[model]\nwatts = 3\n", "bad.ini:2: unknown key 'watts'");
    expect_error("[other]\nidle_base_w = 3\n", "unknown section [other]");
    expect_error("[model]\nname\n", "bad.ini:2:");
    expect_error("[model]\npue = 0.5\n", "pue");
}

static void test_frequency_term(void **state)
{
    struct power_model m;
    model_default(&m);
    m.ghz_exponent = 1;
    m.ref_ghz = 2.0;
    double at_ref = model_estimate(&m, 10, 5, 2.0);
    double at_2x = model_estimate(&m, 10, 5, 4.0);
    assert_true(fabs((at_2x - at_ref) - 5 * m.active_per_core_w) < 1e-9);
    assert_true(fabs(model_estimate(&m, 10, 5, NAN) - at_ref) < 1e-9);
}

static void test_summary_prefers_meters(void **state)
{
    struct power_model m;
    model_default(&m);
    struct power_readings r = {0};
    struct power_reading *p = power_readings_add(&r);
    p->scope = POWER_SCOPE_PACKAGE;
    p->watts = 80;
    p = power_readings_add(&r);
    p->scope = POWER_SCOPE_DRAM;
    p->watts = 10;
    struct power_summary ps;
    power_summarise(&ps, &r, &m, 40, 4, NAN);
    assert_true(ps.measured);
    assert_true(fabs(ps.it_w - 90) < 1e-9);
    assert_string_equal(ps.source, "rapl package+dram");
    assert_true(fabs(ps.facility_w - 135) < 1e-9);
    power_summary_free(&ps);

    struct power_readings none = {0};
    power_summarise(&ps, &none, &m, 2, 0.5, NAN);
    assert_false(ps.measured);
    assert_non_null(strstr(ps.source, "model"));
    assert_true(fabs(ps.it_w - model_estimate(&m, 2, 0.5, NAN)) < 1e-9);
    power_summary_free(&ps);
}

/* Half a machine is not a measurement of it; two meters of one server are
 * one measurement. */
static void test_summary_partial_and_double(void **state)
{
    struct power_model m;
    model_default(&m);
    struct power_readings r = {0};
    struct power_reading *p = power_readings_add(&r);
    p->scope = POWER_SCOPE_PACKAGE;
    p->watts = 244.8;
    p = power_readings_add(&r);
    p->scope = POWER_SCOPE_PACKAGE; /* package-1: energy_uj unreadable */
    struct power_summary ps;
    power_summarise(&ps, &r, &m, 376, 150, NAN);
    assert_false(ps.measured);
    assert_non_null(strstr(ps.coverage, "no rate"));
    power_summary_free(&ps);

    p = power_readings_add(&r);
    p->scope = POWER_SCOPE_PLATFORM;
    snprintf(p->source, sizeof(p->source), "hwmon");
    p->watts = 200;
    p = power_readings_add(&r);
    p->scope = POWER_SCOPE_PLATFORM;
    snprintf(p->source, sizeof(p->source), "acpi_power_meter");
    p->watts = 226.5;
    power_summarise(&ps, &r, &m, 40, 10, NAN);
    assert_true(ps.measured);
    assert_true(fabs(ps.it_w - 226.5) < 1e-9);
    assert_string_equal(ps.source, "acpi_power_meter");
    power_summary_free(&ps);
}

/* Two RAPL packages over a 1 s interval, package-1's counter still. */
static void stuck_readings(struct power_readings *r)
{
    *r = (struct power_readings){0};
    for (int k = 0; k < 2; k++) {
        struct power_reading *p = power_readings_add(r);
        snprintf(p->source, sizeof(p->source), "rapl");
        snprintf(p->domain, sizeof(p->domain), "package-%d", k);
        p->scope = POWER_SCOPE_PACKAGE;
        p->package = k;
        p->joules = 1000;
        p->delta_j = p->watts = k ? 0 : 120;
    }
    struct power_reading *p = power_readings_add(r); /* a power sensor: no counter */
    snprintf(p->source, sizeof(p->source), "hwmon");
    p->scope = POWER_SCOPE_DEVICE;
    p->watts = 0;
    p = power_readings_add(r); /* an hwmon energy counter, also still */
    snprintf(p->source, sizeof(p->source), "hwmon");
    snprintf(p->domain, sizeof(p->domain), "hwmon3/energy1");
    p->scope = POWER_SCOPE_DEVICE;
    p->joules = 5;
    p->delta_j = p->watts = 0;
}

/* An energy counter that did not advance while the CPUs were busy is
 * absent, not 0 W: the node figure falls back to the model and says why.
 * With every CPU idle for every tick (busy exactly 0) the 0 W stands;
 * unknown utilisation (NaN) is not idle. */
static void test_summary_stuck(void **state)
{
    struct power_model m;
    model_default(&m);
    const double busy[] = {10.4, NAN, 0};
    for (int i = 0; i < 3; i++) {
        struct power_readings r;
        stuck_readings(&r);
        struct power_summary ps;
        power_summarise(&ps, &r, &m, 40, busy[i], NAN);
        const struct power_reading *p1 = &ps.readings.v[1];
        if (busy[i] == 0) {
            assert_false(p1->stuck);
            assert_true(p1->watts == 0);
            assert_true(ps.measured);
            assert_true(fabs(ps.it_w - 120) < 1e-9);
        } else {
            assert_true(p1->stuck);
            assert_true(isnan(p1->watts) && isnan(p1->delta_j));
            assert_true(p1->joules == 1000); /* the counter itself was read */
            assert_false(ps.measured);
            assert_true(ps.meter_unused);
            assert_string_equal(ps.coverage,
                                "estimated: rapl package-1 is absent: the counter did not advance");
            assert_non_null(strstr(ps.source, "model"));
        }
        assert_false(ps.readings.v[0].stuck);
        assert_false(ps.readings.v[2].stuck); /* a 0 W power sensor is a reading */
        assert_true(ps.readings.v[2].watts == 0);
        assert_true(ps.readings.v[3].stuck == (busy[i] != 0));
        assert_true(busy[i] == 0 ? ps.readings.v[3].watts == 0 : isnan(ps.readings.v[3].watts));
        power_summary_free(&ps);
    }
}

/* data/models/NAME.ini and the built-in of the same name agree exactly. */
static void test_files_match_builtins(void **state)
{
    static const char *const names[] = {"specpower-2023", "seed-2011", "vm-vcpu"};
    const char *src = getenv("WATT_SRCDIR");
    assert_non_null(src);
    for (size_t i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/data/models/%s.ini", src, names[i]);
        struct power_model f, b;
        char *err = NULL;
        if (model_load(path, &f, &err) < 0)
            fail_msg("%s", err);
        assert_int_equal(model_builtin(names[i], &b), 0);
        assert_string_equal(f.name, b.name);
        assert_string_equal(f.description, b.description);
        assert_true(f.idle_base_w == b.idle_base_w);
        assert_true(f.idle_per_core_w == b.idle_per_core_w);
        assert_true(f.active_per_core_w == b.active_per_core_w);
        assert_true(f.ref_ghz == b.ref_ghz);
        assert_true(f.ghz_exponent == b.ghz_exponent);
        assert_true(f.error_pct == b.error_pct);
        assert_true(f.pue == b.pue);
    }
    struct power_model m;
    assert_int_equal(model_builtin("nope", &m), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_frequency_term),
        cmocka_unit_test(test_summary_prefers_meters),
        cmocka_unit_test(test_files_match_builtins),
        cmocka_unit_test(test_summary_partial_and_double),
        cmocka_unit_test(test_summary_stuck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
