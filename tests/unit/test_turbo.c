#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "model/turbo.h"
#include "sense/sample.h"

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-6)

/* Two CPUs, both in package 0, plus CPU 2 in package 1 (no cpufreq). */
static struct topo_cpu topo_cpus[3] = {
    {.online = true, .package = 0}, {.online = true, .package = 0}, {.online = true, .package = 1}};
static int topo_pkgs[2] = {0, 1};
static const struct topology topo = {
    .ncpu = 3, .cpu = topo_cpus, .npackages = 2, .package_ids = topo_pkgs};

static struct cpufreq_cpu cpu_of(int id, const char *driver, const char *gov, const char *epp,
                                 uint64_t hw_max, uint64_t base)
{
    return (struct cpufreq_cpu){
        .cpu = id,
        .driver = (char *)driver,
        .governor = (char *)gov,
        .epp = (char *)epp,
        .cur_khz = 1500000,
        .min_khz = 1000000,
        .max_khz = hw_max,
        .hw_min_khz = 1000000,
        .hw_max_khz = hw_max,
        .hw_cur_khz = VAL_NONE,
        .base_khz = base,
        .nom_khz = VAL_NONE,
        .boost = -1,
        .aperf = VAL_NONE,
        .mperf = VAL_NONE,
        .tsc = VAL_NONE,
    };
}

static struct cpufreq_sample sample_of(struct cpufreq_cpu *cpus, unsigned n)
{
    return (struct cpufreq_sample){.ncpus = n,
                                   .cpus = cpus,
                                   .boost = -1,
                                   .no_turbo = -1,
                                   .max_perf_pct = -1,
                                   .min_perf_pct = -1,
                                   .turbo_pct = -1,
                                   .num_pstates = -1};
}

/* intel_pstate's show_turbo_pct(): 100 - floor(100 * n / total). */
static void test_nonturbo_states(void **state)
{
    (void)state;
    assert_int_equal(turbo_nonturbo_states(35, 23), 15); /* ratios 10..32, P1 24 */
    assert_int_equal(turbo_nonturbo_states(0, 10), 10);  /* no turbo range */
    assert_int_equal(turbo_nonturbo_states(50, 200), 0); /* n = 100 and 101 both give 50 */
    assert_int_equal(turbo_nonturbo_states(-1, 23), 0);
    assert_int_equal(turbo_nonturbo_states(35, -1), 0);
}

/* intel_pstate with HWP, turbo on, the busy clock from APERF/MPERF over
 * one second: 3000 MHz against a 2400 MHz base is turbo reached. */
static void test_intel_reached(void **state)
{
    (void)state;
    struct cpufreq_cpu ca[2], cb[2];
    for (int i = 0; i < 2; i++) {
        ca[i] = cpu_of(i, "intel_pstate", "powersave", "balance_performance", 3200000, 2400000);
        cb[i] = ca[i];
        ca[i].aperf = ca[i].mperf = 0;
        cb[i].mperf = 1000000000;
        cb[i].aperf = i ? 1100000000 : 1250000000;
    }
    ca[0].tsc = 0;
    cb[0].tsc = 2400000000; /* TSC measured at 2400 MHz */
    struct cpufreq_sample a = sample_of(ca, 2), b = sample_of(cb, 2);
    a.no_turbo = b.no_turbo = 0;
    a.turbo_pct = b.turbo_pct = 35;
    a.num_pstates = b.num_pstates = 23;
    a.msr_mono_ns = 1000000000;
    b.msr_mono_ns = 2000000000;
    struct turbo_pkg h;
    turbo_package(&a, &b, &topo, 0, &h);
    assert_int_equal(h.ncpus, 2);
    NEAR(h.base_mhz, 2400);
    assert_string_equal(h.base_source, "base_frequency");
    NEAR(h.nonturbo_mhz, 2400);
    assert_string_equal(h.nonturbo_source, "intel_pstate turbo_pct/num_pstates");
    NEAR(h.turbo_mhz, 3200);
    NEAR(h.limit_mhz, 3200);
    assert_int_equal(h.boost, 1);
    assert_string_equal(h.busy_source, "APERF/MPERF");
    assert_int_equal(h.busy_cpus, 2);
    NEAR(h.busy_max_mhz, 3000);
    NEAR(h.busy_mean_mhz, 2820);
    assert_int_equal(h.reached, 1);
    assert_int_equal(h.blockers, 0);
    /* Package 1 has no CPU with cpufreq: nothing is known. */
    turbo_package(&a, &b, &topo, 1, &h);
    assert_int_equal(h.ncpus, 0);
    assert_true(isnan(h.base_mhz));
    assert_int_equal(h.reached, -1);
}

/* Everything that holds intel_pstate below turbo at once; with no_turbo
 * cpuinfo_max_freq is the non-turbo maximum and max turbo is hidden. */
static void test_intel_blocked(void **state)
{
    (void)state;
    struct cpufreq_cpu c[2] = {
        cpu_of(0, "intel_pstate", "powersave", "power", 2400000, 2400000),
        cpu_of(1, "intel_pstate", "powersave", "power", 2400000, 2400000),
    };
    c[1].max_khz = 2000000;
    struct cpufreq_sample b = sample_of(c, 2);
    b.no_turbo = 1;
    b.max_perf_pct = 80;
    struct cpufreq_mhz mhz[2] = {{0, 2390.5}, {1, 1999.0}};
    b.mhz = mhz;
    b.nmhz = 2;
    struct turbo_pkg h;
    turbo_package(NULL, &b, &topo, 0, &h);
    NEAR(h.nonturbo_mhz, 2400);
    assert_string_equal(h.nonturbo_source, "cpuinfo_max_freq with no_turbo=1");
    assert_true(isnan(h.turbo_mhz));
    assert_string_equal(h.turbo_source, "hidden by no_turbo=1");
    NEAR(h.limit_mhz, 2000);
    assert_int_equal(h.boost, 0);
    assert_string_equal(h.busy_source, "cpuinfo cpu MHz");
    NEAR(h.busy_max_mhz, 2390.5);
    assert_int_equal(h.reached, 0); /* within 1 % of base */
    assert_int_equal(h.blockers, TURBO_BLOCK_NO_TURBO | TURBO_BLOCK_PERF_PCT |
                                     TURBO_BLOCK_EPP_POWER | TURBO_BLOCK_MAX_FREQ);
    assert_string_equal(turbo_blocker_name(TURBO_BLOCK_EPP_POWER), "powersave_epp_power");
    assert_non_null(turbo_blocker_text(TURBO_BLOCK_MAX_FREQ));
    assert_null(turbo_blocker_name(1u << 20));
}

/* acpi-cpufreq on an Intel part: P0 2601 MHz is the turbo marker, so base
 * is 2600; boost off and the generic powersave governor block turbo. */
static void test_acpi_intel_marker(void **state)
{
    (void)state;
    struct cpufreq_cpu c[1] = {cpu_of(0, "acpi-cpufreq", "powersave", NULL, 2601000, VAL_NONE)};
    struct cpufreq_sample b = sample_of(c, 1);
    b.boost = 0;
    struct turbo_pkg h;
    turbo_package(NULL, &b, &topo, 0, &h);
    NEAR(h.base_mhz, 2600);
    NEAR(h.nonturbo_mhz, 2600);
    assert_true(isnan(h.turbo_mhz));
    assert_int_equal(h.boost, 0);
    assert_string_equal(h.boost_source, "cpufreq/boost");
    assert_null(h.busy_source);
    assert_int_equal(h.reached, -1);
    assert_int_equal(h.blockers, TURBO_BLOCK_BOOST_OFF | TURBO_BLOCK_GOV_MIN);
}

/* acpi-cpufreq on AMD Rome: _PSS P0 is nominal, boost states are hidden;
 * scaling_max_freq at P0 is no cap (the hardware boosts above it). */
static void test_acpi_amd(void **state)
{
    (void)state;
    struct cpufreq_cpu c[1] = {cpu_of(0, "acpi-cpufreq", "schedutil", NULL, 2500000, VAL_NONE)};
    struct cpufreq_sample b = sample_of(c, 1);
    b.boost = 1;
    struct cpufreq_mhz mhz[1] = {{0, 3282.0}};
    b.mhz = mhz;
    b.nmhz = 1;
    struct turbo_pkg h;
    turbo_package(NULL, &b, &topo, 0, &h);
    NEAR(h.base_mhz, 2500);
    assert_string_equal(h.base_source, "_PSS P0 (cpuinfo_max_freq)");
    assert_string_equal(h.turbo_source, "not exposed by this driver");
    assert_int_equal(h.boost, 1);
    assert_int_equal(h.reached, 1);
    assert_int_equal(h.blockers, 0);
    /* 6.7+: one policy's own boost off while the global switch is on */
    c[0].boost = 0;
    turbo_package(NULL, &b, &topo, 0, &h);
    assert_int_equal(h.blockers, TURBO_BLOCK_POLICY_BOOST);
    assert_string_equal(turbo_blocker_name(TURBO_BLOCK_POLICY_BOOST), "policy_boost_off");
}

/* amd-pstate-epp on Genoa (6.10: no cpufreq/boost): base is the _CPC
 * nominal frequency, max turbo cpuinfo_max_freq (highest perf). */
static void test_amd_pstate(void **state)
{
    (void)state;
    struct cpufreq_cpu c[1] = {
        cpu_of(0, "amd-pstate-epp", "powersave", "balance_performance", 3688000, VAL_NONE)};
    c[0].nom_khz = 2400000;
    struct cpufreq_sample b = sample_of(c, 1);
    struct cpufreq_mhz mhz[1] = {{0, 3666.3}};
    b.mhz = mhz;
    b.nmhz = 1;
    struct turbo_pkg h;
    turbo_package(NULL, &b, &topo, 0, &h);
    NEAR(h.base_mhz, 2400);
    assert_string_equal(h.base_source, "acpi_cppc nominal_freq");
    NEAR(h.turbo_mhz, 3688);
    assert_int_equal(h.boost, -1);
    assert_int_equal(h.reached, 1);
    assert_int_equal(h.blockers, 0);
    /* powersave with EPP "power" blocks; the epp driver has no generic governor */
    c[0].epp = (char *)"power";
    turbo_package(NULL, &b, &topo, 0, &h);
    assert_int_equal(h.blockers, TURBO_BLOCK_EPP_POWER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonturbo_states), cmocka_unit_test(test_intel_reached),
        cmocka_unit_test(test_intel_blocked),   cmocka_unit_test(test_acpi_intel_marker),
        cmocka_unit_test(test_acpi_amd),        cmocka_unit_test(test_amd_pstate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
