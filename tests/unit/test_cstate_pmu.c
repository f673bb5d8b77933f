/* The cstate PMU sampler (sense/cstate_pmu.c): event names, discovery on
 * the intel-2s fixture and on small trees, and the residency arithmetic
 * from recorded counter deltas. */
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
#include "sense/cstate_pmu.h"
#include "sense/sample.h"
#include "sense/sampler.h"
#include "tree.h"

#define DEV "sys/bus/event_source/devices/"

#define assert_near(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

static void test_event_names(void **unused)
{
    (void)unused;
    char st[8];
    unsigned n = 99;
    assert_int_equal(cstate_pmu_parse_event_name("c6-residency", st, &n), 0);
    assert_string_equal(st, "c6");
    assert_int_equal(n, 6);
    assert_int_equal(cstate_pmu_parse_event_name("c10-residency", st, &n), 0);
    assert_string_equal(st, "c10");
    assert_int_equal(n, 10);
    const char *bad[] = {"c6-residency.scale",
                         "c-residency",
                         "6-residency",
                         "c6",
                         "c1000-residency",
                         "energy-pkg",
                         "",
                         "c6-residencyx"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(cstate_pmu_parse_event_name(bad[i], st, &n), -EINVAL);
    assert_int_equal(cstate_pmu_parse_event_name(NULL, st, &n), -EINVAL);
}

/* Recorded deltas: a 2.4 GHz TSC over 1 s; PC6 counted 1.68e9 ticks, so
 * the package spent 70 % of the interval in PC6 (turbostat's Pkg%pc6 70.00). */
static void test_residency(void **unused)
{
    (void)unused;
    double f = -1;
    uint64_t t0 = 8123456789012ull, t1 = t0 + 2400000000ull;
    assert_int_equal(cstate_pmu_residency(5000000000ull, 6680000000ull, t0, t1, &f), 0);
    assert_near(f, 0.70, 1e-12);
    /* never entered */
    assert_int_equal(cstate_pmu_residency(42, 42, t0, t1, &f), 0);
    assert_near(f, 0.0, 0);
    /* read just after the TSC: a hair over the interval is clamped to 1 */
    assert_int_equal(cstate_pmu_residency(0, 2400000100ull, t0, t1, &f), 0);
    assert_near(f, 1.0, 0);
    /* far over the TSC: not a residency */
    f = -1;
    assert_int_equal(cstate_pmu_residency(0, 2500000000ull, t0, t1, &f), -ERANGE);
    assert_near(f, -1, 0); /* untouched on failure */
    /* a counter that went backwards, a TSC that went backwards */
    assert_int_equal(cstate_pmu_residency(10, 9, t0, t1, &f), -ERANGE);
    assert_int_equal(cstate_pmu_residency(1, 2, t1, t0, &f), -ERANGE);
    /* no interval, or an unread value */
    assert_int_equal(cstate_pmu_residency(1, 2, t0, t0, &f), -EINVAL);
    assert_int_equal(cstate_pmu_residency(VAL_NONE, 2, t0, t1, &f), -EINVAL);
    assert_int_equal(cstate_pmu_residency(1, 2, t0, VAL_NONE, &f), -EINVAL);
}

/* Two readings of a 2-package cstate_pkg (pc2, pc6) taken 0.5 s apart at
 * a 2.4 GHz TSC, as the sampler stores them: package 0 spent 10 % in PC2
 * and 80 % in PC6, package 1 never left PC0 (its counts did not move). */
static void test_readings(void **unused)
{
    (void)unused;
    uint64_t c0[] = {1000, 900000000000ull, 5, 7}, t0[] = {77000000000ull, 77000000100ull};
    uint64_t c1[] = {1000 + 120000000, 900000000000ull + 960000000, 5, 7};
    uint64_t t1[] = {t0[0] + 1200000000, t0[1] + 1200000000};
    struct cstate_pmu_reading x = {.counts = {.nunits = 2, .nevents = 2, .counts = c0, .tsc = t0}};
    struct cstate_pmu_reading y = {.counts = {.nunits = 2, .nevents = 2, .counts = c1, .tsc = t1}};
    double f;
    assert_int_equal(cstate_pmu_reading_residency(&x, &y, 0, 0, &f), 0);
    assert_near(f, 0.10, 1e-12);
    assert_int_equal(cstate_pmu_reading_residency(&x, &y, 0, 1, &f), 0);
    assert_near(f, 0.80, 1e-12);
    assert_int_equal(cstate_pmu_reading_residency(&x, &y, 1, 1, &f), 0);
    assert_near(f, 0.0, 0);
    /* out of range, or a reading that was not taken (a recorded root) */
    assert_int_equal(cstate_pmu_reading_residency(&x, &y, 2, 0, &f), -ENODATA);
    assert_int_equal(cstate_pmu_reading_residency(&x, &y, 0, 2, &f), -ENODATA);
    struct cstate_pmu_reading none = {0};
    assert_int_equal(cstate_pmu_reading_residency(&none, &y, 0, 0, &f), -ENODATA);
    /* a unit whose count went backwards (its PMU reloaded in between) */
    c1[2] = 4;
    assert_int_equal(cstate_pmu_reading_residency(&x, &y, 1, 0, &f), -ERANGE);
}

static struct host *open_root(const char *root)
{
    struct host *h = NULL;
    assert_int_equal(host_open(root, &h), 0);
    return h;
}

/* intel-2s (2 x Xeon Silver 4210R): cstate_core c6 on CPUs 0-19, one per
 * core; cstate_pkg c2 c6 on CPUs 0 and 10, one per package. */
static void test_intel_2s(void **unused)
{
    (void)unused;
    char root[4096];
    snprintf(root, sizeof(root), "%s/intel-2s", getenv("WATT_FIXTURES"));
    struct host *h = open_root(root);
    struct cstate_pmu_state st;
    cstate_pmu_discover(h, &st);
    assert_null(st.why_missing);

    const struct cstate_pmu *core = &st.pmu[CSTATE_PMU_CORE];
    assert_true(core->present);
    assert_string_equal(core->name, "cstate_core");
    assert_int_equal(core->type, 14);
    assert_int_equal(core->nevents, 1);
    assert_string_equal(core->ev[0].state, "c6");
    assert_int_equal(core->ev[0].config, 2);
    assert_int_equal(core->nunits, 20);
    unsigned idx = 0;
    const struct cstate_pmu_unit *u = cstate_pmu_find_unit(core, 1, 12, &idx);
    assert_non_null(u);
    assert_int_equal(u->cpu, 19); /* pkg 1's cores 0-4,8-12 are CPUs 10-19 */
    assert_int_equal(idx, 19);
    assert_int_equal(u->fd[0], -1);
    assert_null(cstate_pmu_find_unit(core, 1, 5, NULL)); /* fused-off core */

    const struct cstate_pmu *pkg = &st.pmu[CSTATE_PMU_PKG];
    assert_true(pkg->present);
    assert_string_equal(pkg->name, "cstate_pkg");
    assert_int_equal(pkg->type, 15);
    assert_int_equal(pkg->nevents, 2);
    assert_string_equal(pkg->ev[0].state, "c2");
    assert_int_equal(pkg->ev[0].config, 0);
    assert_string_equal(pkg->ev[1].state, "c6");
    assert_int_equal(pkg->ev[1].config, 2);
    assert_int_equal(pkg->nunits, 2);
    assert_int_equal(pkg->units[0].cpu, 0);
    assert_int_equal(pkg->units[0].package, 0);
    assert_int_equal(pkg->units[1].cpu, 10);
    assert_int_equal(pkg->units[1].package, 1);
    assert_int_equal(pkg->units[1].core, -1);

    /* a recorded root: described, never counted, and says why */
    for (unsigned s = 0; s < _CSTATE_PMU_MAX; s++) {
        assert_non_null(st.pmu[s].why);
        assert_non_null(strstr(st.pmu[s].why, "needs the live kernel"));
        struct cstate_pmu_counts c;
        assert_int_equal(cstate_pmu_read(&st.pmu[s], &c), -ENOTSUP);
    }
    cstate_pmu_state_free(&st);
    cstate_pmu_state_free(&st); /* idempotent */

    /* the sampler: usable (the PMUs are described), a sample that copies
     * them and holds no reading, so the report says why */
    void *state = NULL;
    char *why = NULL;
    assert_int_equal(cstate_pmu_sampler.probe(h, &state, &why), 1);
    assert_null(why);
    struct sample s = {0};
    assert_int_equal(cstate_pmu_sampler.collect(h, state, &s), 0);
    assert_non_null(s.cstate_pmu);
    const struct cstate_pmu_reading *r = &s.cstate_pmu->r[CSTATE_PMU_PKG];
    assert_int_equal(r->pmu.nunits, 2);
    assert_int_equal(r->pmu.units[1].package, 1);
    assert_int_equal(r->counts.nunits, 0);
    assert_non_null(strstr(r->pmu.why, "needs the live kernel"));
    cstate_pmu_sampler.free_sample(&s);
    assert_null(s.cstate_pmu);
    cstate_pmu_sampler.free_state(state);
    host_close(h);
}

static void cpu_topo(const char *root, int cpu, int pkg, int core)
{
    char p[160];
    snprintf(p, sizeof(p), "sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
    tree_write(root, p, "%d\n", pkg);
    snprintf(p, sizeof(p), "sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
    tree_write(root, p, "%d\n", core);
}

/* A machine with neither PMU (AMD, a VM): said once, plainly. */
static void test_missing(void **unused)
{
    (void)unused;
    char *root = tree_new();
    cpu_topo(root, 0, 0, 0);
    tree_write(root, DEV "power/type", "13\n");
    struct host *h = open_root(root);
    struct cstate_pmu_state st;
    cstate_pmu_discover(h, &st);
    assert_non_null(st.why_missing);
    assert_non_null(strstr(st.why_missing, "no cstate_core or cstate_pkg perf PMU"));
    assert_false(st.pmu[CSTATE_PMU_CORE].present);
    assert_false(st.pmu[CSTATE_PMU_PKG].present);
    cstate_pmu_state_free(&st);
    void *state = NULL;
    char *why = NULL;
    assert_int_equal(cstate_pmu_sampler.probe(h, &state, &why), 0);
    assert_null(state);
    assert_non_null(strstr(why, "does not load under a hypervisor"));
    free(why);
    host_close(h);
    tree_free(root);
}

/* cstate_die (several dies per package) stands for the package PMU;
 * events come out in state order (c10 after c2, not before); files that
 * are not residency events and configs in a format we do not know are
 * left out; without the msr PMU there is no TSC to divide by. */
static void test_die_and_order(void **unused)
{
    (void)unused;
    char *root = tree_new();
    cpu_topo(root, 0, 0, 0);
    cpu_topo(root, 4, 0, 4);
    tree_write(root, DEV "cstate_die/type", "21\n");
    tree_write(root, DEV "cstate_die/cpumask", "0,4\n");
    tree_write(root, DEV "cstate_die/events/c10-residency", "event=0x06\n");
    tree_write(root, DEV "cstate_die/events/c2-residency", "event=0x00\n");
    tree_write(root, DEV "cstate_die/events/c6-residency", "event=0x02\n");
    tree_write(root, DEV "cstate_die/events/c7-residency", "umask=0x1\n");
    tree_write(root, DEV "cstate_die/events/c3-residency.scale", "1\n");
    struct host *h = open_root(root);
    struct cstate_pmu_state st;
    cstate_pmu_discover(h, &st);
    assert_null(st.why_missing);
    const struct cstate_pmu *p = &st.pmu[CSTATE_PMU_PKG];
    assert_string_equal(p->name, "cstate_die");
    assert_int_equal(p->nevents, 3);
    assert_string_equal(p->ev[0].state, "c2");
    assert_string_equal(p->ev[1].state, "c6");
    assert_string_equal(p->ev[2].state, "c10");
    assert_int_equal(p->ev[2].config, 6);
    assert_int_equal(p->nunits, 2);
    assert_int_equal(p->units[1].cpu, 4);
    assert_int_equal(p->units[1].package, 0);
    assert_non_null(strstr(p->why, "no msr PMU tsc event"));
    assert_false(st.pmu[CSTATE_PMU_CORE].present);
    cstate_pmu_state_free(&st);
    host_close(h);
    tree_free(root);
}

/* A PMU whose cpumask or type cannot be read: named, with the reason. */
static void test_broken(void **unused)
{
    (void)unused;
    char *root = tree_new();
    tree_write(root, DEV "cstate_core/type", "15\n");
    tree_write(root, DEV "cstate_core/events/c6-residency", "event=0x02\n");
    tree_write(root, DEV "cstate_pkg/type", "x\n");
    struct host *h = open_root(root);
    struct cstate_pmu_state st;
    cstate_pmu_discover(h, &st);
    assert_non_null(strstr(st.pmu[CSTATE_PMU_CORE].why, "cstate_core PMU has no usable cpumask"));
    assert_non_null(strstr(st.pmu[CSTATE_PMU_PKG].why, "cstate_pkg PMU has no usable type"));
    cstate_pmu_state_free(&st);
    host_close(h);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_names), cmocka_unit_test(test_residency),
        cmocka_unit_test(test_readings),    cmocka_unit_test(test_intel_2s),
        cmocka_unit_test(test_missing),     cmocka_unit_test(test_die_and_order),
        cmocka_unit_test(test_broken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
