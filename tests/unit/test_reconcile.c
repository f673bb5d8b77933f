/* model/reconcile.c: the wall against the measured parts, on hand-made
 * readings: parts under the wall, parts over it, no wall meter, psys with
 * and without packages, GPUs counted once, the wall meter chosen. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "model/reconcile.h"

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-9)

static struct power_reading *add(struct power_readings *r, const char *source, const char *domain,
                                 enum power_scope scope, double watts)
{
    struct power_reading *p = power_readings_add(r);
    snprintf(p->source, sizeof(p->source), "%s", source);
    snprintf(p->domain, sizeof(p->domain), "%s", domain);
    p->scope = scope;
    p->watts = watts;
    p->joules = 1000;
    return p;
}

/* A two-socket server: RAPL packages and DRAM, one GPU hwmon chip. */
static void server(struct power_readings *r)
{
    *r = (struct power_readings){0};
    add(r, "rapl", "package-0", POWER_SCOPE_PACKAGE, 70);
    add(r, "rapl", "package-1", POWER_SCOPE_PACKAGE, 60);
    add(r, "rapl", "core-0", POWER_SCOPE_CORE, 50); /* inside package-0 */
    add(r, "rapl", "dram-0", POWER_SCOPE_DRAM, 11);
    add(r, "rapl", "dram-1", POWER_SCOPE_DRAM, 9);
    struct power_reading *p = add(r, "hwmon", "hwmon4/power1", POWER_SCOPE_DEVICE, 45);
    snprintf(p->chip, sizeof(p->chip), "amdgpu");
    snprintf(p->label, sizeof(p->label), "PPT");
    p->joules = NAN;
    p = add(r, "hwmon", "hwmon5/power1", POWER_SCOPE_DEVICE, 5);
    snprintf(p->chip, sizeof(p->chip), "nic_sensor");
    p->joules = NAN;
}

static void test_parts_under_wall(void **state)
{
    (void)state;
    struct power_readings r;
    server(&r);
    add(&r, "dcmi", "bmc", POWER_SCOPE_PLATFORM, 300)->joules = NAN;
    struct reconcile rc;
    reconcile_power(&r, 1.4, &rc);
    assert_true(rc.have_wall);
    assert_string_equal(rc.wall_source, "dcmi");
    NEAR(rc.wall_w, 300);
    NEAR(rc.part[RECONCILE_PACKAGES].watts, 130); /* not core-0 */
    NEAR(rc.part[RECONCILE_DRAM].watts, 20);
    NEAR(rc.part[RECONCILE_GPUS].watts, 45);
    NEAR(rc.part[RECONCILE_OTHER].watts, 5);
    NEAR(rc.parts_w, 200);
    assert_true(rc.parts_complete);
    assert_false(rc.parts_exceed);
    NEAR(rc.unmeasured_w, 100);
    NEAR(rc.facility_w, 420);
    assert_non_null(strstr(rc.note, "fans"));
    power_readings_free(&r);
}

static void test_parts_over_wall(void **state)
{
    (void)state;
    struct power_readings r;
    server(&r);
    add(&r, "dcmi", "bmc", POWER_SCOPE_PLATFORM, 180)->joules = NAN;
    struct reconcile rc;
    reconcile_power(&r, 1.5, &rc);
    assert_true(rc.parts_exceed);
    NEAR(rc.unmeasured_w, -20); /* said, never a silent negative */
    assert_non_null(strstr(rc.note, "exceed the wall by 20.0 W"));
    assert_non_null(strstr(rc.note, "disagree"));
    power_readings_free(&r);
}

static void test_no_wall(void **state)
{
    (void)state;
    struct power_readings r;
    server(&r);
    struct reconcile rc;
    reconcile_power(&r, 1.5, &rc);
    assert_false(rc.have_wall);
    assert_true(isnan(rc.wall_w));
    assert_true(isnan(rc.unmeasured_w));
    assert_true(isnan(rc.facility_w));
    NEAR(rc.parts_w, 200); /* the parts only */
    assert_non_null(strstr(rc.note, "cannot be known"));
    power_readings_free(&r);
}

/* psys covers the packages: with packages it is shown but not added;
 * without them it is the CPU side, and DRAM (inside it) is not added. */
static void test_psys(void **state)
{
    (void)state;
    struct power_readings r;
    server(&r);
    add(&r, "rapl", "psys", POWER_SCOPE_PSYS, 150);
    add(&r, "acpi_power_meter", "hwmon0/power1", POWER_SCOPE_PLATFORM, 320)->joules = NAN;
    struct reconcile rc;
    reconcile_power(&r, 1.5, &rc);
    assert_non_null(rc.part[RECONCILE_PSYS].excluded);
    assert_null(rc.part[RECONCILE_PACKAGES].excluded);
    NEAR(rc.parts_w, 200);
    NEAR(rc.unmeasured_w, 120);
    power_readings_free(&r);

    r = (struct power_readings){0};
    add(&r, "rapl", "psys", POWER_SCOPE_PSYS, 25);
    add(&r, "rapl", "dram-0", POWER_SCOPE_DRAM, 3);
    add(&r, "acpi_power_meter", "hwmon0/power1", POWER_SCOPE_PLATFORM, 40)->joules = NAN;
    reconcile_power(&r, 1.5, &rc);
    assert_null(rc.part[RECONCILE_PSYS].excluded);
    assert_non_null(rc.part[RECONCILE_DRAM].excluded);
    NEAR(rc.parts_w, 25);
    NEAR(rc.unmeasured_w, 15);
    power_readings_free(&r);
}

/* Two wall meters: the ACPI meter is chosen, the BMC's is not added. */
static void test_wall_choice(void **state)
{
    (void)state;
    struct power_readings r;
    server(&r);
    add(&r, "dcmi", "bmc", POWER_SCOPE_PLATFORM, 310)->joules = NAN;
    add(&r, "acpi_power_meter", "hwmon0/power1", POWER_SCOPE_PLATFORM, 300)->joules = NAN;
    struct reconcile rc;
    reconcile_power(&r, 1.5, &rc);
    assert_string_equal(rc.wall_source, "acpi_power_meter");
    NEAR(rc.unmeasured_w, 100);
    power_readings_free(&r);
}

/* GPUs: xe's card contains its pkg; a cap-only power sensor is no meter;
 * the GPU sampler's readings replace the hwmon chips'. */
static void test_gpus_once(void **state)
{
    (void)state;
    struct power_readings r = {0};
    struct power_reading *p = add(&r, "hwmon", "hwmon2/energy1", POWER_SCOPE_DEVICE, 126);
    snprintf(p->chip, sizeof(p->chip), "xe");
    snprintf(p->label, sizeof(p->label), "card");
    p = add(&r, "hwmon", "hwmon2/energy2", POWER_SCOPE_DEVICE, 104);
    snprintf(p->chip, sizeof(p->chip), "xe");
    snprintf(p->label, sizeof(p->label), "pkg");
    p = add(&r, "hwmon", "hwmon2/power1", POWER_SCOPE_DEVICE, NAN); /* power1_max only */
    p->joules = NAN;
    snprintf(p->chip, sizeof(p->chip), "xe");
    struct reconcile rc;
    reconcile_power(&r, 1.5, &rc);
    NEAR(rc.part[RECONCILE_GPUS].watts, 126);
    assert_int_equal(rc.part[RECONCILE_GPUS].channels, 1);
    assert_true(rc.parts_complete);
    add(&r, "gpu", "card2", POWER_SCOPE_DEVICE, 127);
    reconcile_power(&r, 1.5, &rc);
    NEAR(rc.part[RECONCILE_GPUS].watts, 127);
    power_readings_free(&r);
}

/* One snapshot: energy counters give no rate, so no remainder. */
static void test_no_rate(void **state)
{
    (void)state;
    struct power_readings r = {0};
    add(&r, "rapl", "package-0", POWER_SCOPE_PACKAGE, NAN);
    add(&r, "dcmi", "bmc", POWER_SCOPE_PLATFORM, 200)->joules = NAN;
    struct reconcile rc;
    reconcile_power(&r, 1.5, &rc);
    assert_false(rc.parts_complete);
    assert_int_equal(rc.part[RECONCILE_PACKAGES].no_rate, 1);
    assert_true(isnan(rc.unmeasured_w));
    assert_non_null(strstr(rc.note, "no rate"));
    power_readings_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parts_under_wall), cmocka_unit_test(test_parts_over_wall),
        cmocka_unit_test(test_no_wall),          cmocka_unit_test(test_psys),
        cmocka_unit_test(test_wall_choice),      cmocka_unit_test(test_gpus_once),
        cmocka_unit_test(test_no_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
