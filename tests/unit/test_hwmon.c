#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "sense/hwmon.h"
#include "sense/sampler.h" /* sample_free() */
#include "tree.h"

#define HW "sys/class/hwmon/"

/* A server: the ACPI power meter, a GPU, an energy counter, an old-style
 * driver with its attributes in device/, a BMC-style "System Power"
 * sensor, a temperature-only chip and a dangling link. */
static char *make_root(const char *faults)
{
    char *root = tree_new();
    const char *acpi = "sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI000D:00/hwmon/hwmon0/";
    char p[256];
#define A(f, ...)                            \
    snprintf(p, sizeof(p), "%s%s", acpi, f); \
    tree_write(root, p, __VA_ARGS__)
    A("name", "power_meter\n");
    A("power1_average", "218000000\n");
    A("power1_average_interval", "1000\n");
    A("power1_average_interval_min", "1000\n");
    A("power1_average_interval_max", "60000\n");
    A("power1_is_battery", "0\n");
    A("power1_accuracy", "95.0%%\n");
    A("power1_model_number", "DELTA-PSU-750\n");
#undef A
    tree_symlink(root, HW "hwmon0",
                 "../../devices/LNXSYSTM:00/LNXSYBUS:00/ACPI000D:00/hwmon/hwmon0");
    tree_write(root, HW "hwmon1/name", "amdgpu\n");
    tree_write(root, HW "hwmon1/power1_average", "45000000\n");
    tree_write(root, HW "hwmon1/power1_cap", "250000000\n");
    tree_write(root, HW "hwmon1/power1_label", "PPT\n");
    tree_write(root, HW "hwmon1/temp1_input", "45000\n");
    tree_write(root, HW "hwmon2/name", "amd_energy\n");
    tree_write(root, HW "hwmon2/energy1_input", "1000000\n");
    tree_write(root, HW "hwmon2/energy1_label", "Esocket0\n");
    tree_write(root, HW "hwmon2/energy2_input", "5000000\n");
    tree_write(root, HW "hwmon3/device/name", "oldchip\n");
    tree_write(root, HW "hwmon3/device/power1_input", "12500000\n");
    tree_write(root, HW "hwmon4/name", "ibmpowernv\n");
    tree_write(root, HW "hwmon4/power1_input", "480000000\n");
    tree_write(root, HW "hwmon4/power1_label", "System Power\n");
    tree_write(root, HW "hwmon5/name", "coretemp\n");
    tree_write(root, HW "hwmon5/temp1_input", "40000\n");
    tree_symlink(root, HW "hwmon6", "../../devices/platform/gone.0/hwmon/hwmon6");
    if (faults)
        tree_write(root, "watt-faults", "%s", faults);
    return root;
}

static struct sample *take(struct host *h)
{
    struct sample *s = calloc(1, sizeof(*s));
    assert_int_equal(hwmon_sampler.collect(h, NULL, s), 0);
    return s;
}

static const struct power_reading *reading(const struct power_readings *r, const char *domain)
{
    for (size_t i = 0; i < r->n; i++)
        if (streq(r->v[i].domain, domain))
            return &r->v[i];
    return NULL;
}

static bool has_diag(const struct diags *d, const char *where_tail, int err)
{
    for (size_t i = 0; i < d->n; i++) {
        size_t a = strlen(d->v[i].where), b = strlen(where_tail);
        if (a >= b && streq(d->v[i].where + a - b, where_tail) && d->v[i].err == err)
            return true;
    }
    return false;
}

static void test_parse_attr(void **state)
{
    struct hwmon_attr a;
#define AT(t) hwmon_parse_attr(t, strlen(t), &a)
    assert_int_equal(AT("power1_average"), 0);
    assert_int_equal(a.kind, HWMON_POWER);
    assert_int_equal(a.index, 1);
    assert_int_equal(a.field, HWMON_AVERAGE);
    assert_int_equal(AT("power12_average_interval"), 0);
    assert_int_equal(a.index, 12);
    assert_int_equal(a.field, HWMON_AVERAGE_INTERVAL);
    assert_int_equal(AT("energy3_input"), 0);
    assert_int_equal(a.kind, HWMON_ENERGY);
    assert_int_equal(a.field, HWMON_INPUT);
    assert_int_equal(AT("power1_is_battery"), 0);
    assert_int_equal(a.field, HWMON_IS_BATTERY);
    assert_int_equal(AT("energy1_cap"), -ENOENT); /* no such energy field */
    assert_int_equal(AT("power1_average_interval_max"), -ENOENT);
    assert_int_equal(AT("power1_cap_max"), -ENOENT);
    assert_int_equal(AT("power0_input"), -ENOENT);
    assert_int_equal(AT("power_input"), -ENOENT);
    assert_int_equal(AT("power1input"), -ENOENT);
    assert_int_equal(AT("temp1_input"), -ENOENT);
    assert_int_equal(AT("power99999_input"), -ENOENT);
    assert_int_equal(AT(""), -ENOENT);
    assert_int_equal(hwmon_parse_attr("power1_input", 7, &a), -ENOENT); /* "power1_" */
    assert_int_equal(hwmon_parse_attr("power1\0_input", 13, &a), -EINVAL);
#undef AT
}

static void test_read_server(void **state)
{
    char *root = make_root(NULL);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(hwmon_sampler.probe(h, &st, &why), 1);
    struct sample *s = take(h);
    assert_int_equal(s->diags.n, 0); /* the dangling hwmon6 is not a problem */
    assert_int_equal(s->hwmon->n, 6);
    const struct hwmon_sensor *m = hwmon_find(s->hwmon, "hwmon0", HWMON_POWER, 1);
    assert_non_null(m);
    assert_string_equal(m->name, "power_meter");
    assert_int_equal(m->average_uw, 218000000);
    assert_int_equal(m->average_interval_ms, 1000);
    assert_int_equal(m->is_battery, 0);
    assert_int_equal(m->input, VAL_NONE);
    const struct hwmon_sensor *old = hwmon_find(s->hwmon, "hwmon3", HWMON_POWER, 1);
    assert_non_null(old);
    assert_string_equal(old->name, "oldchip");
    /* energy sorts after power within a chip, then by index */
    assert_int_equal(s->hwmon->v[2].kind, HWMON_ENERGY);
    assert_int_equal(s->hwmon->v[3].index, 2);

    struct power_readings r = {0};
    struct diags d = {0};
    assert_int_equal(hwmon_power(s->hwmon, NULL, 0, &r, &d), 6);
    const struct power_reading *p = reading(&r, "hwmon0/power1");
    assert_string_equal(p->source, "acpi_power_meter");
    assert_string_equal(p->via, "sysfs");
    assert_string_equal(p->label, "power_meter");
    assert_int_equal(p->scope, POWER_SCOPE_PLATFORM);
    assert_true(p->watts == 218.0); /* node_exporter's µW / 1e6 */
    assert_true(isnan(p->joules));
    p = reading(&r, "hwmon1/power1");
    assert_string_equal(p->source, "hwmon");
    assert_string_equal(p->label, "PPT");
    assert_int_equal(p->scope, POWER_SCOPE_DEVICE);
    assert_true(p->watts == 45.0);
    p = reading(&r, "hwmon3/power1");
    assert_true(p->watts == 12.5); /* from power1_input */
    p = reading(&r, "hwmon4/power1");
    assert_int_equal(p->scope, POWER_SCOPE_PLATFORM); /* "System Power" */
    assert_true(p->watts == 480.0);
    p = reading(&r, "hwmon2/energy1");
    assert_true(p->joules == 1.0);
    assert_true(isnan(p->delta_j) && isnan(p->watts));
    assert_int_equal(d.n, 0);
    power_readings_free(&r);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

static void test_two_samples(void **state)
{
    char *root = make_root(HW "hwmon2/energy1_input =3500000 from=2\n" HW
                              "hwmon2/energy2_input =4000000 from=2\n" HW
                              "hwmon1/power1_average =47000000 from=2\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *a = take(h), *b = take(h);
    struct power_readings r = {0};
    struct diags d = {0};
    assert_int_equal(hwmon_power(a->hwmon, b->hwmon, 0.5, &r, &d), 6);
    const struct power_reading *p = reading(&r, "hwmon2/energy1");
    assert_true(p->joules == 3.5);
    assert_true(fabs(p->delta_j - 2.5) < 1e-12);
    assert_true(fabs(p->watts - 5.0) < 1e-12);
    assert_string_equal(p->label, "Esocket0");
    /* power sensors: the later sample's own reading */
    assert_true(reading(&r, "hwmon1/power1")->watts == 47.0);
    /* energy2 went backwards: no delta, a reason */
    p = reading(&r, "hwmon2/energy2");
    assert_true(p->joules == 4.0 && isnan(p->delta_j) && isnan(p->watts));
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].where, "hwmon hwmon2/energy2");
    assert_non_null(strstr(d.v[0].what, "backwards"));
    power_readings_free(&r);
    diags_free(&d);
    sample_free(a);
    sample_free(b);
    host_close(h);
    tree_free(root);
}

static void test_bad_values(void **state)
{
    char *root = make_root(HW "hwmon0/power1_average EACCES\n" HW "hwmon1/power1_average =abc\n" HW
                              "hwmon2/energy1_input =-5\n" HW "hwmon2/energy2_input =\n" HW
                              "hwmon4/power1_input ENODATA\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    assert_true(has_diag(&s->diags, "hwmon0/power1_average", EACCES));
    assert_true(has_diag(&s->diags, "hwmon1/power1_average", 0));
    assert_true(has_diag(&s->diags, "hwmon2/energy1_input", 0));
    assert_true(has_diag(&s->diags, "hwmon2/energy2_input", 0));
    assert_true(has_diag(&s->diags, "hwmon4/power1_input", ENODATA));
    struct power_readings r = {0};
    struct diags d = {0};
    hwmon_power(s->hwmon, NULL, 0, &r, &d);
    assert_true(isnan(reading(&r, "hwmon0/power1")->watts));
    assert_true(isnan(reading(&r, "hwmon1/power1")->watts));
    assert_true(isnan(reading(&r, "hwmon2/energy1")->joules));
    assert_true(isnan(reading(&r, "hwmon4/power1")->watts));
    assert_true(reading(&r, "hwmon3/power1")->watts == 12.5); /* the rest still reads */
    power_readings_free(&r);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* A chip that goes away between samples: its energy has no delta. */
static void test_sensor_gone(void **state)
{
    char *root = make_root(HW "hwmon2 ENOENT from=2\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *a = take(h), *b = take(h);
    assert_int_equal(b->hwmon->n, 4);
    struct power_readings r = {0};
    struct diags d = {0};
    /* reversed: b is earlier, a later, so energy1 is missing earlier */
    hwmon_power(b->hwmon, a->hwmon, 1.0, &r, &d);
    assert_true(isnan(reading(&r, "hwmon2/energy1")->delta_j));
    assert_int_equal(d.n, 2);
    power_readings_free(&r);
    diags_free(&d);
    sample_free(a);
    sample_free(b);
    host_close(h);
    tree_free(root);
}

static void test_scope(void **state)
{
    struct hwmon_sensor s = {.name = "nct6775", .label = "System Agent"};
    assert_int_equal(hwmon_scope(&s), POWER_SCOPE_DEVICE);
    s.label = "Chassis power";
    assert_int_equal(hwmon_scope(&s), POWER_SCOPE_PLATFORM);
    s.label = NULL;
    assert_int_equal(hwmon_scope(&s), POWER_SCOPE_DEVICE);
    s.name = "power_meter";
    assert_int_equal(hwmon_scope(&s), POWER_SCOPE_PLATFORM);
}

/* node_exporter's fixture: every node_hwmon_power_* and node_hwmon_energy_*
 * series it exports must be a sensor here (the fixture has none: its hwmon
 * chips are temperature, fan and frequency sensors). */
static void test_node_exporter(void **state)
{
    char path[4096], line[1024];
    snprintf(path, sizeof(path), "%s/fixtures/node_exporter/e2e-output.txt",
             getenv("WATT_TESTDIR"));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    unsigned series = 0, hwmon_lines = 0;
    while (fgets(line, sizeof(line), f)) {
        hwmon_lines += strncmp(line, "node_hwmon_", 11) == 0;
        series += strncmp(line, "node_hwmon_power_", 17) == 0 ||
                  strncmp(line, "node_hwmon_energy_", 18) == 0;
    }
    fclose(f);
    assert_true(hwmon_lines > 50); /* the file is the one we think */

    snprintf(path, sizeof(path), "%s/node_exporter", getenv("WATT_FIXTURES"));
    struct host *h;
    assert_int_equal(host_open(path, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(hwmon_sampler.probe(h, &st, &why), 0);
    assert_non_null(strstr(why, "no hwmon power or energy sensor"));
    free(why);
    struct sample *s = take(h);
    assert_int_equal(s->hwmon->n, series);
    sample_free(s);
    host_close(h);
}

/* a chip whose device is runtime-suspended is listed but not read (a read
 * would wake it), said in the readings; awake again, it is read */
static void test_suspended_device(void **state)
{
    (void)state;
    char *root = tree_new();
    tree_write(root, "sys/devices/pci0000:00/0000:03:00.0/hwmon/hwmon0/name", "i915\n");
    tree_write(root, "sys/devices/pci0000:00/0000:03:00.0/hwmon/hwmon0/energy1_input", "5000000\n");
    tree_write(root, "sys/devices/pci0000:00/0000:03:00.0/hwmon/hwmon0/power1_max", "150000000\n");
    tree_symlink(root, "sys/devices/pci0000:00/0000:03:00.0/hwmon/hwmon0/device",
                 "../../../0000:03:00.0");
    tree_write(root, "sys/devices/pci0000:00/0000:03:00.0/power/runtime_status", "suspended\n");
    tree_symlink(root, HW "hwmon0", "../../devices/pci0000:00/0000:03:00.0/hwmon/hwmon0");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *a = take(h);
    assert_int_equal(a->diags.n, 0);
    const struct hwmon_sensor *e = hwmon_find(a->hwmon, "hwmon0", HWMON_ENERGY, 1);
    assert_non_null(e);
    assert_true(e->suspended);
    assert_int_equal(e->input, VAL_NONE);
    struct power_readings r = {0};
    struct diags d = {0};
    assert_int_equal(hwmon_power(a->hwmon, NULL, 0, &r, &d), 1);
    assert_true(isnan(r.v[0].joules) && isnan(r.v[0].watts));
    assert_true(has_diag(&d, "hwmon0/energy1", 0));
    assert_non_null(strstr(d.v[0].what, "runtime-suspended"));
    power_readings_free(&r);
    diags_free(&d);
    /* awake: read; the interval from a suspended start has no energy, said */
    tree_write(root, "sys/devices/pci0000:00/0000:03:00.0/power/runtime_status", "active\n");
    struct sample *b = take(h);
    e = hwmon_find(b->hwmon, "hwmon0", HWMON_ENERGY, 1);
    assert_false(e->suspended);
    assert_int_equal(e->input, 5000000);
    d = (struct diags){0};
    hwmon_power(a->hwmon, b->hwmon, 1.0, &r, &d);
    assert_true(isnan(r.v[0].delta_j));
    assert_true(r.v[0].joules == 5.0);
    assert_true(has_diag(&d, "hwmon0/energy1", 0));
    power_readings_free(&r);
    diags_free(&d);
    sample_free(a);
    sample_free(b);
    host_close(h);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_attr),    cmocka_unit_test(test_read_server),
        cmocka_unit_test(test_two_samples),   cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_sensor_gone),   cmocka_unit_test(test_scope),
        cmocka_unit_test(test_node_exporter), cmocka_unit_test(test_suspended_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
